package testkit_test

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/message"
)

func TestCollectStopsAtTheFirstError(t *testing.T) {
	boom := errors.New("boom")
	seq := func(yield func(int, error) bool) {
		_ = yield(1, nil) && yield(2, nil) && yield(0, boom) && yield(3, nil)
	}
	got, err := testkit.Collect(seq)
	if !errors.Is(err, boom) || !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("Collect = %v, %v; want [1 2], boom", got, err)
	}
}

func TestSyncBufferConcurrentWriters(t *testing.T) {
	var b testkit.SyncBuffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() { fmt.Fprintf(&b, "%d\n", i) })
	}
	wg.Wait()
	if n := len(b.String()); n != 16 {
		t.Fatalf("wrote %d bytes, want 16", n)
	}
}

func TestLogTakesWhatWasAdded(t *testing.T) {
	var l testkit.Log[int]
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() { l.Add(i, i) })
	}
	wg.Wait()
	got := l.Take()
	slices.Sort(got)
	if want := []int{0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7}; !slices.Equal(got, want) {
		t.Fatalf("Take = %v, want %v", got, want)
	}
	if again := l.Take(); again != nil {
		t.Fatalf("a second Take = %v, want nothing", again)
	}
}

func TestHistoryAlternates(t *testing.T) {
	h := testkit.History(3)
	want := []message.Role{message.User, message.Assistant, message.User}
	for i, m := range h {
		if m.Role != want[i] {
			t.Fatalf("message %d has role %q, want %q", i, m.Role, want[i])
		}
	}
}

type closer struct{ closed *bool }

func (c closer) Close() error { *c.closed = true; return nil }

func TestChildStopsAtTheFirstFailedStep(t *testing.T) {
	boom := errors.New("boom")
	for _, tt := range []struct {
		name          string
		charter, make error
		want          int
		ran           bool
	}{
		{name: "all steps succeed", want: 7, ran: true},
		{name: "charter fails", charter: boom, want: 2},
		{name: "runner fails", make: boom, want: 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			closed, ran := false, false
			c := testkit.Child[closer, string, string]{
				Open:    func() (closer, error) { return closer{&closed}, nil },
				Charter: func() (string, error) { return "charter", tt.charter },
				Runner:  func(_ closer, ch string) (string, error) { return "runner of " + ch, tt.make },
			}
			got := c.Run(func(r string) int {
				ran = r == "runner of charter"
				return 7
			})
			if got != tt.want || ran != tt.ran || !closed {
				t.Fatalf("Run = %d, ran %v, closed %v; want %d, ran %v, closed", got, ran, closed, tt.want, tt.ran)
			}
		})
	}
}

func TestChildReportsAFailedOpen(t *testing.T) {
	c := testkit.Child[closer, string, string]{
		Open: func() (closer, error) { return closer{}, errors.New("no file") },
	}
	if got := c.Run(func(string) int { return 0 }); got != 2 {
		t.Fatalf("Run = %d, want 2", got)
	}
}

func TestSuspendPartsFindsTheResolvingParts(t *testing.T) {
	h := testkit.History(2)
	h = append(h, message.Message{Role: message.Tool, Parts: []message.Part{
		{Kind: message.KindToolResult, SuspendID: "s1", Text: "yes"},
		{Kind: message.KindToolResult, SuspendID: "s2", Text: "no"},
	}})
	got := testkit.SuspendParts(h, "s1")
	if len(got) != 1 || got[0].Text != "yes" {
		t.Fatalf("SuspendParts(s1) = %v, want the one part answering yes", got)
	}
	if got := testkit.SuspendParts(h, "none"); len(got) != 0 {
		t.Fatalf("SuspendParts(none) = %v, want none", got)
	}
}

// TestRaceOverlapsTheCalls: every call starts before any returns (each
// waits for all to have started), and the results come in call order.
func TestRaceOverlapsTheCalls(t *testing.T) {
	const n = 4
	var started sync.WaitGroup
	started.Add(n)
	got := testkit.Race(n, func(i int) int {
		started.Done()
		started.Wait()
		return i * i
	})
	if want := []int{0, 1, 4, 9}; !slices.Equal(got, want) {
		t.Fatalf("Race = %v, want %v", got, want)
	}
}

func TestMap(t *testing.T) {
	got := testkit.Map([]int{1, 2, 3}, strconv.Itoa)
	if want := []string{"1", "2", "3"}; !slices.Equal(got, want) {
		t.Fatalf("Map = %q, want %q", got, want)
	}
	if got := testkit.Map(nil, strconv.Itoa); len(got) != 0 {
		t.Fatalf("Map(nil) = %q, want empty", got)
	}
}

// stopper records how Require stopped a test, in place of a *testing.T
// whose failure would fail this test.
type stopper struct {
	testing.TB
	fatal, skip string
}

func (s *stopper) Helper()                      {}
func (s *stopper) Fatalf(f string, args ...any) { s.fatal = fmt.Sprintf(f, args...) }
func (s *stopper) Skipf(f string, args ...any)  { s.skip = fmt.Sprintf(f, args...) }

func TestRequire(t *testing.T) {
	missing := errors.New("exec: \"node\": executable file not found")
	for _, tc := range []struct {
		ci          string
		err         error
		fatal, skip bool
	}{
		{ci: "", err: missing, skip: true},
		{ci: "false", err: missing, skip: true},
		{ci: "true", err: missing, fatal: true},
		{ci: "1", err: missing, fatal: true},
		{ci: "true", err: nil},
		{ci: "", err: nil},
	} {
		t.Setenv("CI", tc.ci)
		s := &stopper{TB: t}
		testkit.Require(s, tc.err, "node", "apt-get install nodejs")
		if (s.fatal != "") != tc.fatal || (s.skip != "") != tc.skip {
			t.Fatalf("CI=%q err=%v: fatal %q, skip %q", tc.ci, tc.err, s.fatal, s.skip)
		}
		if msg := s.fatal + s.skip; tc.err != nil && !strings.Contains(msg, "node is missing") || tc.err != nil && !strings.Contains(msg, "apt-get install nodejs") {
			t.Fatalf("the message %q names neither what is missing nor the command", msg)
		}
	}
}
