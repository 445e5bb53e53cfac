package testkit_test

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"

	"github.com/markov-agents/markov/internal/testkit"
)

// The test binary doubles as the child processes of the tests below: with
// TESTKIT_CHILD set it plays that role and exits.
func TestMain(m *testing.M) {
	switch os.Getenv("TESTKIT_CHILD") {
	case "gated":
		if err := testkit.AwaitGo(); err != nil {
			os.Exit(2)
		}
		fmt.Println("released", os.Getenv("TESTKIT_NAME"))
		os.Exit(0)
	case "unready":
		fmt.Println("not yet")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestRaceChildrenReturnsEachChildsLine(t *testing.T) {
	var cmds []*exec.Cmd
	for i := range 3 {
		cmds = append(cmds, testkit.ChildCommand("TESTKIT_CHILD=gated", "TESTKIT_NAME=c"+strconv.Itoa(i)))
	}
	lines, err := testkit.RaceChildren(cmds...)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"released c0", "released c1", "released c2"}; !slices.Equal(lines, want) {
		t.Fatalf("lines %q, want %q", lines, want)
	}
}

func TestRaceChildrenRefusesAChildThatIsNotReady(t *testing.T) {
	gated := testkit.ChildCommand("TESTKIT_CHILD=gated")
	_, err := testkit.RaceChildren(gated, testkit.ChildCommand("TESTKIT_CHILD=unready"))
	if err == nil {
		t.Fatal("no error for a child that did not say ready")
	}
	if gated.ProcessState == nil {
		t.Fatal("the ready child was left running")
	}
}

// TestStartChildWaitsForTheLine starts a child that waits at the gate
// after saying "ready", and one that says something else, which is
// refused and not left running.
func TestStartChildWaitsForTheLine(t *testing.T) {
	gated := testkit.ChildCommand("TESTKIT_CHILD=gated")
	if err := testkit.StartChild(gated, "ready"); err != nil {
		t.Fatal(err)
	}
	if gated.ProcessState != nil {
		t.Fatal("the child has exited: it waits at the gate")
	}
	if err := gated.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = gated.Wait()

	unready := testkit.ChildCommand("TESTKIT_CHILD=unready")
	if err := testkit.StartChild(unready, "ready"); err == nil {
		t.Fatal("no error for a child that said something else")
	}
	if unready.ProcessState == nil {
		t.Fatal("the refused child was left running")
	}
}
