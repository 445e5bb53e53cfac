package testkit

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// ChildCommand returns a command that runs this test binary again, running
// no tests, with env added to its environment and its stderr this
// process's: the child process of a cross-process test, whose TestMain
// picks its role from env.
func ChildCommand(env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	return cmd
}

// StartChild starts the child process cmd and waits for the first line
// it prints, which must be want (without its newline); otherwise it kills
// the child and returns an error. The caller ends the child it started
// (Process.Kill, then Wait).
func StartChild(cmd *exec.Cmd, want string) error {
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != want+"\n" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("the child's first line is %q (%v), not %q", line, err, want)
	}
	return nil
}

// AwaitGo is a gated child's side of RaceChildren: it says "ready" on
// stdout and waits for the line on stdin that releases it.
func AwaitGo() error {
	fmt.Println("ready")
	_, err := bufio.NewReader(os.Stdin).ReadString('\n')
	return err
}

// RaceChildren starts the child processes cmds, waits until each says
// "ready" (see AwaitGo), releases them all at once, and returns the line
// each prints next, without its newline, once it has exited. A child that
// says anything else first, fails to print, or exits with an error is an
// error; the children still running then are killed.
func RaceChildren(cmds ...*exec.Cmd) (lines []string, err error) {
	type child struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		out   *bufio.Reader
	}
	var running []child
	defer func() {
		if err != nil {
			for _, c := range running {
				_ = c.cmd.Process.Kill()
				_ = c.cmd.Wait()
			}
		}
	}()
	for _, cmd := range cmds {
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		c := child{cmd, stdin, bufio.NewReader(stdout)}
		running = append(running, c)
		if line, err := c.out.ReadString('\n'); line != "ready\n" {
			return nil, fmt.Errorf("testkit: a child said %q before it was ready: %v", line, err)
		}
	}
	for _, c := range running {
		if _, err := io.WriteString(c.stdin, "go\n"); err != nil {
			return nil, err
		}
	}
	for len(running) > 0 {
		c := running[0]
		line, err := c.out.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("testkit: a released child printed %q: %w", line, err)
		}
		running = running[1:]
		if err := c.cmd.Wait(); err != nil {
			return nil, fmt.Errorf("testkit: a released child: %w", err)
		}
		lines = append(lines, strings.TrimSuffix(line, "\n"))
	}
	return lines, nil
}

// Main is the TestMain of a test binary that doubles as child processes:
// with the environment variable env set, it runs child with its value and
// exits with the code child returns; otherwise it runs the tests.
func Main(m *testing.M, env string, child func(string) int) {
	if v := os.Getenv(env); v != "" {
		os.Exit(child(v))
	}
	os.Exit(m.Run())
}
