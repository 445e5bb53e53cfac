// Package testkit holds the helpers the project's tests share: draining a
// run, racing goroutines, mapping a slice, a buffer safe for concurrent
// writers, a settable clock, a ready-made history, and the setup of a test
// binary's child process. It is
// imported only by _test.go files.
package testkit

import (
	"bytes"
	"fmt"
	"io"
	"iter"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/markov-agents/markov/message"
)

// Collect drains seq, returning the values it yielded before its first
// error, and that error.
func Collect[T any](seq iter.Seq2[T, error]) ([]T, error) {
	var out []T
	for v, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, v)
	}
	return out, nil
}

// Race calls f(0), …, f(n-1), each in a goroutine of its own held at a
// gate until all n are launched, so that the calls overlap as much as the
// scheduler lets them, and returns their results once all have returned.
func Race[T any](n int, f func(i int) T) []T {
	out := make([]T, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			out[i] = f(i)
		})
	}
	close(start)
	wg.Wait()
	return out
}

// Map returns f of each element of s, in order.
func Map[T, U any](s []T, f func(T) U) []U {
	out := make([]U, len(s))
	for i, v := range s {
		out[i] = f(v)
	}
	return out
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers and readers,
// for logs written from handler goroutines.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Log is a list that goroutines add to and a test takes from, safe for
// concurrent use: what a model, a store or a client under test saw.
type Log[T any] struct {
	mu    sync.Mutex
	items []T
}

// Add appends items.
func (l *Log[T]) Add(items ...T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.items = append(l.items, items...)
}

// Take returns the items added since the last Take and forgets them.
func (l *Log[T]) Take() []T {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.items
	l.items = nil
	return out
}

// History returns n messages of a finished conversation: user questions
// and assistant answers, alternating, the user first.
func History(n int) []message.Message {
	h := make([]message.Message, n)
	for i := range h {
		if i%2 == 0 {
			h[i] = message.UserText("question " + strconv.Itoa(i))
		} else {
			h[i] = message.Message{Role: message.Assistant, Parts: []message.Part{message.Text("answer " + strconv.Itoa(i))}}
		}
	}
	return h
}

// SuspendParts returns the parts of history that name the suspension
// suspendID: the results and records that resolved it.
func SuspendParts(history []message.Message, suspendID string) []message.Part {
	var out []message.Part
	for _, m := range history {
		for _, p := range m.Parts {
			if p.SuspendID == suspendID {
				out = append(out, p)
			}
		}
	}
	return out
}

// ToolResults returns the tool results of history as the model saw them,
// in order: their text, "error: " before an error result's.
func ToolResults(history []message.Message) []string {
	var out []string
	for _, m := range history {
		for _, p := range m.Parts {
			if p.Kind != message.KindToolResult {
				continue
			}
			if p.IsError {
				out = append(out, "error: "+p.Text)
			} else {
				out = append(out, p.Text)
			}
		}
	}
	return out
}

// Child is the setup of a test binary run as a child process: open a store,
// build a charter, and make a runner over both. The generic parameters keep
// this package free of the packages above it.
type Child[S io.Closer, C, R any] struct {
	Open    func() (S, error)
	Charter func() (C, error)
	Runner  func(S, C) (R, error)
}

// Run sets the child up and returns body's exit code, closing the store
// when body returns. A failed step is reported on stderr as "open:",
// "charter:" or "runner:" followed by its error, and Run returns 2.
func (c Child[S, C, R]) Run(body func(R) int) int {
	s, err := c.Open()
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 2
	}
	defer s.Close()
	ch, err := c.Charter()
	if err != nil {
		fmt.Fprintln(os.Stderr, "charter:", err)
		return 2
	}
	r, err := c.Runner(s, ch)
	if err != nil {
		fmt.Fprintln(os.Stderr, "runner:", err)
		return 2
	}
	return body(r)
}

// Clock is a settable clock, safe for concurrent use; its Now method is
// what charters, stores and servers take as their clock.
type Clock struct{ now atomic.Pointer[time.Time] }

// NewClock returns a clock reading t.
func NewClock(t time.Time) *Clock {
	c := &Clock{}
	c.Set(t)
	return c
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time { return *c.now.Load() }

// Set sets the clock to t.
func (c *Clock) Set(t time.Time) { c.now.Store(&t) }

// Advance moves the clock d forward.
func (c *Clock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

// Reported is a scripted model's report of the tool results in last:
// "Done: " and their texts joined by "; ", and true when last is a tool
// message; "" and false otherwise.
func Reported(last message.Message) (string, bool) {
	if last.Role != message.Tool {
		return "", false
	}
	parts := make([]string, 0, len(last.Parts))
	for _, p := range last.Parts {
		parts = append(parts, p.Text)
	}
	return "Done: " + strings.Join(parts, "; "), true
}
