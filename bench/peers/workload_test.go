package peers

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
)

// The canned conversation both libraries play: the model asks for
// lookup_order with orderInput, the tool answers toolResult (or, where it
// suspends, the resume payload is toolResult), and the model's final
// answer is finalAnswer.
const (
	toolName    = "lookup_order"
	toolDesc    = "Look up an order by ID."
	orderID     = "A-42"
	orderInput  = `{"order_id":"` + orderID + `"}`
	toolResult  = "order " + orderID + ": shipped"
	finalAnswer = "Order " + orderID + " has shipped."
	question    = "Where is order " + orderID + "?"
)

// lookupIn is lookup_order's input on both sides: each library infers the
// tool's JSON Schema from it ("order_id" required, a string).
type lookupIn struct {
	OrderID string `json:"order_id"`
}

// lookup is the tool's work on both sides; calls counts its calls.
func lookup(calls *atomic.Int64, in lookupIn) string {
	calls.Add(1)
	return "order " + in.OrderID + ": shipped"
}

// block is one 4-message block of the histories: a question, the
// assistant's lookup_order call, its result, and the answer. Histories
// are n/4 such blocks; every message is shared (no leaf-scoped ones), so
// every leaf of either library sees all n.
type block struct {
	question, callID, input, result, answer string
}

func blocks(n int) []block {
	out := make([]block, n/4)
	for i := range out {
		id := "A-" + strconv.Itoa(i)
		out[i] = block{
			question: "Where is order " + id + "?",
			callID:   "call_h" + strconv.Itoa(i),
			input:    `{"order_id":"` + id + `"}`,
			result:   "order " + id + ": shipped",
			answer:   "Order " + id + " has shipped.",
		}
	}
	return out
}

// A run is one library's side of a workload, built outside the timer.
// do runs the workload once and returns the tool's result (for one-round
// workloads) or the final answer; calls counts the tool's calls. When
// every is set, reset rebuilds what do consumes, untimed, after every
// `every` calls (a machine's history grows by a tool exchange per round).
type run struct {
	do    func() (string, error)
	calls *atomic.Int64
	reset func()
	every int
}

// side builds one library's run of a workload, failing tb on error.
type side func(tb testing.TB) run

// compare runs a workload's markov and eino sides, and any other
// readings of it, as the sub-benchmarks lib=markov, lib=eino, …, so one
// `go test -bench` run interleaves them and `benchstat -col /lib` sets
// them side by side.
func compare(b *testing.B, markov, eino side, others ...named) {
	for _, s := range append([]named{{"markov", markov}, {"eino", eino}}, others...) {
		b.Run("lib="+s.name, func(b *testing.B) {
			r := s.build(b)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if r.every > 0 && i%r.every == r.every-1 {
					b.StopTimer()
					r.reset()
					b.StartTimer()
				}
				if _, err := r.do(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// named is a side and the name of its sub-benchmark.
type named struct {
	name  string
	build side
}

// sizes names sub-benchmarks by history length.
func sizes(b *testing.B, ns []int, fn func(b *testing.B, n int)) {
	for _, n := range ns {
		b.Run(fmt.Sprintf("history=%d", n), func(b *testing.B) { fn(b, n) })
	}
}

// Workload 1: one agent+tool round (one model call, one validated tool
// call) with a 100-message history.
func BenchmarkRound(b *testing.B) {
	compare(b, func(tb testing.TB) run { return markovRound(tb, 100) }, func(tb testing.TB) run { return einoRound(tb, 100) })
}

// Workload 2a: the first round after taking in a decoded history: markov
// restores a machine from the history (machine.Restore), eino's ReAct
// agent is invoked with it.
func BenchmarkRestoreRound(b *testing.B) {
	sizes(b, []int{100, 10_000}, func(b *testing.B, n int) {
		compare(b, func(tb testing.TB) run { return markovRestoreRound(tb, 1, n) }, func(tb testing.TB) run { return einoInputRound(tb, n) })
	})
}

// Workload 2c: the first round after taking in a plain slice, as an
// application that keeps its conversations in its own tables has one:
// markov wraps it with message.NewHistory and restores a machine from
// it, eino's ReAct agent is invoked with it (as in workload 2a).
func BenchmarkPlainRestoreRound(b *testing.B) {
	sizes(b, []int{100, 10_000}, func(b *testing.B, n int) {
		compare(b, func(tb testing.TB) run { return markovPlainRound(tb, n) }, func(tb testing.TB) run { return einoInputRound(tb, n) })
	})
}

// Workload 2b: the first round after a restore from bytes: markov
// decodes a serialized machine (serialize.Unmarshal), eino resumes its
// ReAct graph from a checkpoint in its CheckPointStore.
func BenchmarkCheckpointRound(b *testing.B) {
	sizes(b, []int{100, 10_000}, func(b *testing.B, n int) {
		compare(b, func(tb testing.TB) run { return markovUnmarshalRound(tb, n) }, func(tb testing.TB) run { return einoCheckpointRound(tb, n) })
	})
}

// Workload 3: suspend → serialize → restore → resume → finish with a
// 1,000-message history: the tool suspends (markov) or interrupts (eino),
// the run is persisted, taken up again from the bytes, resumed with the
// tool's result, and the model gives its final answer.
func BenchmarkSuspendResume(b *testing.B) {
	compare(b, func(tb testing.TB) run { return markovCycle(tb, 1000) }, func(tb testing.TB) run { return einoCycle(tb, 1000) })
}

// Workload 4: one round of 101 agents in parallel (markov: a primary and
// 100 worker leaves; eino: 101 ReAct agents as parallel branches of one
// chain), each making one model call and one tool call, all with the
// same 100-message history. lib=eino-toolcalls is the cheaper reading:
// one eino agent whose one model reply asks for 101 tool calls, and
// lib=markov-toolcalls the same on markov: one leaf, one reply of 101
// tool uses.
func BenchmarkWorkers(b *testing.B) {
	compare(b, func(tb testing.TB) run { return markovWorkers(tb, 100, 100) }, func(tb testing.TB) run { return einoWorkers(tb, 100, 100) },
		named{"eino-toolcalls", func(tb testing.TB) run { return einoToolCalls(tb, 101, 100) }},
		named{"markov-toolcalls", func(tb testing.TB) run { return markovRestoreRound(tb, 101, 100) }})
}

// TestWorkloads runs every workload once on each side and checks that it
// did the work: the tool ran as often as the workload says and the model
// was told its result, or gave the final answer.
func TestWorkloads(t *testing.T) {
	cases := []struct {
		name         string
		markov, eino side
		calls        int64
		want         string
	}{
		{"round", func(tb testing.TB) run { return markovRound(tb, 100) }, func(tb testing.TB) run { return einoRound(tb, 100) }, 1, toolResult},
		{"restore round", func(tb testing.TB) run { return markovRestoreRound(tb, 1, 1000) }, func(tb testing.TB) run { return einoInputRound(tb, 1000) }, 1, toolResult},
		{"plain restore round", func(tb testing.TB) run { return markovPlainRound(tb, 1000) }, func(tb testing.TB) run { return einoInputRound(tb, 1000) }, 1, toolResult},
		{"checkpoint round", func(tb testing.TB) run { return markovUnmarshalRound(tb, 1000) }, func(tb testing.TB) run { return einoCheckpointRound(tb, 1000) }, 1, toolResult},
		{"suspend resume", func(tb testing.TB) run { return markovCycle(tb, 1000) }, func(tb testing.TB) run { return einoCycle(tb, 1000) }, 1, finalAnswer},
		{"workers", func(tb testing.TB) run { return markovWorkers(tb, 100, 100) }, func(tb testing.TB) run { return einoWorkers(tb, 100, 100) }, 101, toolResult},
		{"workers as tool calls", func(tb testing.TB) run { return markovRestoreRound(tb, 101, 100) }, func(tb testing.TB) run { return einoToolCalls(tb, 101, 100) }, 101, toolResult},
	}
	for _, c := range cases {
		for _, s := range []named{{"markov", c.markov}, {"eino", c.eino}} {
			t.Run(c.name+"/"+s.name, func(t *testing.T) {
				r := s.build(t)
				for range 2 { // twice: a run must be repeatable
					before := r.calls.Load()
					got, err := r.do()
					if err != nil {
						t.Fatal(err)
					}
					if got != c.want {
						t.Errorf("got %q, want %q", got, c.want)
					}
					if n := r.calls.Load() - before; n != c.calls {
						t.Errorf("the tool ran %d times, want %d", n, c.calls)
					}
				}
			})
		}
	}
}
