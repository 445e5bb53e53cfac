package durabletest

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzReadProgress: a progress file of any content — a line cut short by
// a crash, garbage — reads without panicking, to the last turn begun
// whole (or none) and whether it ended; what note writes reads back.
func FuzzReadProgress(f *testing.F) {
	for _, seed := range []string{"", "begin 0 1\n", "begin 0 1\ndone 0\n", "begin 0 1\ndone 0\nbegin 1 4\n", "begin 1 4\ndone 0\n", "begin 2 7\nbeg", "begin x y\n", "done 3\n", "begin -1 -5\n"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, content string) {
		env := Env{Dir: t.TempDir()}
		if err := os.WriteFile(filepath.Join(env.Dir, progressFile), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := readProgress(env); err != nil {
			return // a line too long for the scanner
		}
		if err := note(env, "\nbegin %d %d\n", 5, 42); err != nil {
			t.Fatal(err)
		}
		q, err := readProgress(env)
		if err != nil {
			return
		}
		if q.begun != 5 || q.rev != 42 || q.done {
			t.Fatalf("after %q and a begin of turn 5 at 42, read %+v", content, q)
		}
		if err := note(env, "done %d\n", 5); err != nil {
			t.Fatal(err)
		}
		if q, err = readProgress(env); err == nil && !q.done {
			t.Fatalf("after %q, turn 5's done is not read", content)
		}
	})
}
