// Package bench holds the runtime benchmarks the README's table reports:
// the library's own cost per round (scripted model, zero latency), a round
// of 100 workers, and an in-memory suspend → resume cycle.
package bench

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/access"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/serialize"
)

type state struct {
	Count int    `json:"count"`
	Topic string `json:"topic"`
}

type echoIn struct {
	Text string `json:"text"`
}

// fixedModel answers every call with the same response: the benchmark
// measures the library, not the model.
type fixedModel struct{ resp llm.Response }

func (f *fixedModel) Generate(context.Context, *llm.Request) (*llm.Response, error) {
	r := f.resp
	return &r, nil
}

func toolReply(name string) *fixedModel {
	return &fixedModel{resp: llm.Response{
		Message:    message.Message{Role: message.Assistant, Parts: []message.Part{message.ToolUse("toolu_1", name, []byte(`{"text":"hi"}`))}},
		StopReason: llm.ToolUse,
	}}
}

func echo() node.Tool[state] {
	return node.NewTool("echo", "echo text", func(ctx *node.ToolContext[state], in echoIn) (string, error) {
		return in.Text, nil
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// history returns n messages of a finished conversation.
var history = testkit.History

// oneRound runs exactly one round: the leaf keeps calling tools, and the
// loop breaks after the first step.
func oneRound(b testing.TB, m *machine.Machine) {
	for _, err := range m.Run(context.Background()) {
		if err != nil {
			b.Fatal(err)
		}
		break
	}
}

// roundMachine returns a machine whose leaf calls a tool every round, with
// size messages of history and its transcript built: two rounds run, as
// the history, a plain slice with no room, is copied once into an array
// with room when the second round's transcript reaches past it (the
// first round's messages wait past it); a round after those is what
// BenchmarkRunRound measures.
func roundMachine(t testing.TB, size int) *machine.Machine {
	m := must(machine.Restore(roundCharter(), &instance.Instance{ID: "root", Node: "chat", State: state{Topic: "bench"}}, message.NewHistory(history(size))))
	oneRound(t, m)
	oneRound(t, m)
	return m
}

// roundCharter returns a charter whose node "chat" calls the tool echo
// every round.
func roundCharter() *machine.Charter {
	n := must(node.New("chat", node.Config[state]{Instructions: "Answer briefly.", Initial: state{Topic: "bench"}, Tools: []node.Tool[state]{echo()}}))
	return must(machine.NewCharter(machine.CharterConfig{Model: toolReply("echo"), Nodes: []*node.Node{n}, MaxSteps: 1 << 30}))
}

func BenchmarkRunRound(b *testing.B) {
	for _, size := range []int{100, 10_000} {
		b.Run(fmt.Sprintf("history=%d", size), func(b *testing.B) {
			loop(b, 1000, func() *machine.Machine { return roundMachine(b, size) }, func(m *machine.Machine) { oneRound(b, m) })
		})
	}
}

// BenchmarkRestoreRound is the first round after taking in a decoded
// history: Restore a machine from it, then one agent+tool round. The
// history is a message.History with room to grow, as a decoded one is
// (serialize leaves room, and learns what each instance sees), so the
// round neither reads the history nor copies it to append its messages;
// every iteration restores from the same messages (what one appended
// beyond them, the next overwrites).
func BenchmarkRestoreRound(b *testing.B) {
	for _, size := range []int{100, 1000, 10_000} {
		b.Run(fmt.Sprintf("history=%d", size), func(b *testing.B) {
			restoreRounds(b, roundCharter(), message.NewHistory(roomy(history(size))))
		})
	}
}

// BenchmarkRestoreRoundPlain is BenchmarkRestoreRound on a plain slice,
// as an application that keeps its conversations in its own tables
// hands one to message.NewHistory: no room past its end. The round
// appends its messages past the slice without copying it (the history
// joins them when a contiguous read asks for them: the next round's
// transcript, Messages), and leaves the slice as it was. NewHistory's
// own read of the messages is BenchmarkNewHistory.
func BenchmarkRestoreRoundPlain(b *testing.B) {
	for _, size := range []int{100, 1000, 10_000} {
		b.Run(fmt.Sprintf("history=%d", size), func(b *testing.B) {
			restoreRounds(b, roundCharter(), message.NewHistory(history(size)))
		})
	}
}

// BenchmarkNewHistory is message.NewHistory on a plain slice: it reads
// every message once (what each instance sees), and allocates nothing.
func BenchmarkNewHistory(b *testing.B) {
	for _, size := range []int{100, 1000, 10_000} {
		b.Run(fmt.Sprintf("history=%d", size), func(b *testing.B) {
			h := history(size)
			b.ReportAllocs()
			for b.Loop() {
				message.NewHistory(h)
			}
		})
	}
}

// restoreRounds runs b's iterations: Restore a machine of c from h, then
// one round.
func restoreRounds(b *testing.B, c *machine.Charter, h message.History) {
	b.ReportAllocs()
	start := cpu()
	for b.Loop() {
		oneRound(b, must(machine.Restore(c, &instance.Instance{ID: "root", Node: "chat", State: state{Topic: "bench"}}, h)))
	}
	reportCPU(b, cpu()-start)
}

// BenchmarkRestoreRoundAfterRecord is BenchmarkRestoreRound on a history
// whose second message is an instance record, as every suspension and
// transition writes one, and which a machine ran, as durable's history
// cache hands it to the next run: no transcript shows records, so the
// history keeps the primary leaf's transcript from the record on
// (message.History.Transcript) and the restored leaf takes it as it is.
func BenchmarkRestoreRoundAfterRecord(b *testing.B) {
	for _, size := range []int{100, 10_000} {
		b.Run(fmt.Sprintf("history=%d", size), func(b *testing.B) {
			c := roundCharter()
			restoreRounds(b, c, ran(b, c, message.NewHistory(roomy(recorded(history(size))))))
		})
	}
}

// ran returns h as a machine of c left it after a round: what durable's
// history cache hands the machine's next run.
func ran(tb testing.TB, c *machine.Charter, h message.History) message.History {
	m := must(machine.Restore(c, &instance.Instance{ID: "root", Node: "chat", State: state{Topic: "bench"}}, h))
	oneRound(tb, m)
	access.MachineView(m, func(_ *instance.Instance, kept message.History) { h = kept })
	return h
}

// recordedLast returns h with its last message an instance record.
func recordedLast(h []message.Message) []message.Message {
	h[len(h)-1] = suspendRecord
	return h
}

// recorded returns h with its second message an instance record.
func recorded(h []message.Message) []message.Message {
	h[1] = suspendRecord
	return h
}

// suspendRecord is the record of a suspension.
var suspendRecord = message.Message{Role: message.Record, Parts: []message.Part{message.RecordPart("suspended", []byte(`{"suspend_id":"s1"}`))}}

// TestRestoreRoundAllocs keeps the first round after a restore flat in
// history length: the leaf's transcript shares the history and the
// round's messages go into its spare room, so 10,000 messages cost the
// allocations and the bytes of 100. Bytes catch what a count would not:
// a copy of the history is one allocation, at 100 messages as at 10,000,
// but 880 KB at 10,000. The same after a record (a suspension, a
// transition), which no transcript shows, in a history a machine ran (as
// durable's history cache keeps it): the history keeps the transcript
// from there on, where a leaf copied it (3 MB at 10,000). The same from
// a plain slice, with no room past its end, as an application hands its
// own to message.NewHistory: the round's messages wait past it, where
// appending them copied the slice (1.9 MB at 10,000); and from one whose
// last message is a record, whose transcript is the messages before it,
// not a copy of them.
func TestRestoreRoundAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates too: counts are not the library's")
	}
	c := roundCharter()
	for name, shape := range map[string]func([]message.Message) message.History{
		"with room":    func(h []message.Message) message.History { return message.NewHistory(roomy(h)) },
		"after record": func(h []message.Message) message.History { return ran(t, c, message.NewHistory(roomy(recorded(h)))) },
		"plain slice":  message.NewHistory,
		"record last":  func(h []message.Message) message.History { return message.NewHistory(recordedLast(h)) },
	} {
		measure := func(size int) (allocs, bytes float64) {
			h := shape(history(size))
			return perRun(50, func() {
				oneRound(t, must(machine.Restore(c, &instance.Instance{ID: "root", Node: "chat", State: state{Topic: "bench"}}, h)))
			})
		}
		shortAllocs, shortBytes := measure(100)
		longAllocs, longBytes := measure(10_000)
		// A regression allocates at least once more per round; less than
		// half an allocation a round on average is the runtime's own
		// (background work counted while the rounds run).
		if longAllocs > shortAllocs+0.5 || longBytes > shortBytes+256 {
			t.Errorf("%s: restore + round allocates %v times, %v bytes at 10,000 messages; %v, %v at 100", name, longAllocs, longBytes, shortAllocs, shortBytes)
		}
	}
}

// perRun returns what f allocates per call, in allocations and bytes,
// counted as testing.AllocsPerRun counts (after a first call, on one P).
func perRun(runs int, f func()) (allocs, bytes float64) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	f()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / float64(runs), float64(after.TotalAlloc-before.TotalAlloc) / float64(runs)
}

// roomy returns a copy of h with room to grow, like a decoded history.
func roomy(h []message.Message) []message.Message {
	return append(make([]message.Message, 0, len(h)+len(h)/4+16), h...)
}

// TestRoundAllocs keeps the library's cost per round down: one agent and
// tool round (model call, input validation, tool, effects, step
// snapshot) took 82 allocations before inputs skipped jsonschema-go's
// allocations on valid input and untraced runs stopped starting spans,
// and 30 before an untraced run stopped starting its own span and the
// step's prompt context and request moved into its leaf, 24 before a
// step's messages were copied into shared arrays, a reply of tool uses
// ran from its own parts and a handler call stopped being a closure, 21
// before a step's leaf, result and first tool frame became one
// allocation, 18 before tool input was decoded with a pooled decoder.
func TestRoundAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates too: counts are not the library's")
	}
	m := roundMachine(t, 100)
	if allocs := testing.AllocsPerRun(200, func() { oneRound(t, m) }); allocs > 14 {
		t.Errorf("a round allocates %v times, want at most 14", allocs)
	}
}

// loop runs body b.N times, on a fresh machine every `every` iterations
// (built outside the timer) so the history stays near its starting size.
func loop(b *testing.B, every int, fresh func() *machine.Machine, body func(*machine.Machine)) {
	m := fresh()
	b.ReportAllocs()
	b.ResetTimer()
	var used time.Duration // CPU time while the timer runs
	start := cpu()
	for i := range b.N {
		if i%every == every-1 {
			b.StopTimer()
			used += cpu() - start
			m = fresh()
			start = cpu()
			b.StartTimer()
		}
		body(m)
	}
	reportCPU(b, used+cpu()-start)
}

// reportCPU reports used, the CPU time of b's iterations, per iteration
// (cpu-ns/op): it counts the process's every thread (the garbage
// collector's too) and, unlike ns/op, not the time other processes hold
// the cores, which on a loaded machine is most of it.
func reportCPU(b *testing.B, used time.Duration) {
	b.ReportMetric(float64(used)/float64(b.N), "cpu-ns/op")
}

// cpu returns the CPU time, user and system, the process has used.
func cpu() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkWorkers(b *testing.B) {
	fresh := workersMachines(b)
	loop(b, 20, fresh, func(m *machine.Machine) { oneRound(b, m) })
}

// workersMachines returns a function that builds a machine of a primary
// leaf and 100 workers, each calling a tool every round, with 100
// messages of history and its first round run.
func workersMachines(t testing.TB) func() *machine.Machine {
	chat := must(node.New("chat", node.Config[state]{Tools: []node.Tool[state]{echo()}}))
	worker := must(node.New("worker", node.Config[state]{Worker: true, Tools: []node.Tool[state]{echo()}}))
	root := must(node.New("root", node.Config[state]{}))
	c := must(machine.NewCharter(machine.CharterConfig{Model: toolReply("echo"), Nodes: []*node.Node{root, chat, worker}, MaxSteps: 1 << 30}))
	return func() *machine.Machine {
		tree := &instance.Instance{ID: "root", Node: "root", State: state{}}
		tree.Children = append(tree.Children, &instance.Instance{ID: "chat", Node: "chat", State: state{}})
		for i := range 100 {
			tree.Children = append(tree.Children, &instance.Instance{ID: "w" + strconv.Itoa(i), Node: "worker", State: state{}})
		}
		m := must(machine.Restore(c, tree, message.NewHistory(history(100))))
		oneRound(t, m)
		return m
	}
}

// TestWorkersAllocs keeps the library's cost per leaf down in a round of
// 100 workers and a primary: 2,048 allocations a round (20 a leaf) before
// the step's snapshot and messages were carved out of one array each, a
// reply's tool uses stopped being copied and a round reused the last
// one's lists, 1,533 before a step's leaf, result and first tool frame
// became one allocation and tool input was decoded with a pooled decoder
// (719 since). Bytes catch what the count would not: the rounds after
// the workers' transcripts diverged take 220 KB each, where transcripts
// given a quarter's room, all outgrown in the same round, take 318; 175
// KB since a step's leaf and result live in the memory of the last
// round's step, and only its model request and first tool frame (which
// may outlive it) are allocated.
func TestWorkersAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates too: counts are not the library's")
	}
	m := workersMachines(t)()
	allocs, bytes := perRun(19, func() { oneRound(t, m) })
	if allocs > 724 || bytes > 180<<10 {
		t.Errorf("a round of 100 workers allocates %v times, %v bytes; want at most 724, 180 KiB", allocs, bytes)
	}
}

// scriptedPair answers a user message with a suspending tool call and a
// resumed call with text.
type scriptedPair struct{ call, text llm.Response }

func (s *scriptedPair) Generate(_ context.Context, req *llm.Request) (*llm.Response, error) {
	r := s.call
	if last := req.Messages[len(req.Messages)-1]; last.Role == message.Tool {
		r = s.text
	}
	return &r, nil
}

// askCharter returns a charter whose node "desk" calls the tool ask,
// which suspends, and answers with text once the call is resumed.
func askCharter() *machine.Charter {
	ask := node.NewTool("ask", "ask a human", func(ctx *node.ToolContext[state], in echoIn) (string, error) {
		return "", ctx.Suspend("approval")
	})
	n := must(node.New("desk", node.Config[state]{Tools: []node.Tool[state]{ask}}))
	model := &scriptedPair{
		call: toolReply("ask").resp,
		text: llm.Response{Message: message.Message{Role: message.Assistant, Parts: []message.Part{message.Text("done")}}, StopReason: llm.EndTurn},
	}
	return must(machine.NewCharter(machine.CharterConfig{Model: model, Nodes: []*node.Node{n}}))
}

// suspended runs the user's request on m until the tool suspends, and
// returns the suspend ID.
func suspended(b *testing.B, m *machine.Machine) string {
	var id string
	for s, err := range m.Run(context.Background(), machine.UserText("approve")) {
		if err != nil {
			b.Fatal(err)
		}
		id = s.Suspensions[0].SuspendID
	}
	return id
}

// resumed resumes the suspension id of m and runs it to the end.
func resumed(b *testing.B, m *machine.Machine, id string) {
	for _, err := range m.Run(context.Background(), machine.ResumeInput{SuspendID: id, Payload: "yes"}) {
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSuspendCycle is a suspension parked in bytes and resumed in a
// new machine, 1,000 messages of history: Restore an idle machine, run
// the user's request until its tool suspends, serialize.Marshal it,
// serialize.Unmarshal the bytes into a new machine, resume, finish.
func BenchmarkSuspendCycle(b *testing.B) {
	c := askCharter()
	h := message.NewHistory(roomy(history(1000)))
	b.ReportAllocs()
	start := cpu()
	for b.Loop() {
		m := must(machine.Restore(c, &instance.Instance{ID: "root", Node: "desk", State: state{}, Idle: true}, h))
		id := suspended(b, m)
		data := must(serialize.Marshal(m))
		resumed(b, must(serialize.Unmarshal(c, data)), id)
	}
	reportCPU(b, cpu()-start)
}

func BenchmarkSuspendResume(b *testing.B) {
	c := askCharter()
	fresh := func() *machine.Machine {
		return must(machine.Restore(c, &instance.Instance{ID: "root", Node: "desk", State: state{}, Idle: true}, message.NewHistory(history(100))))
	}
	loop(b, 1000, fresh, func(m *machine.Machine) { resumed(b, m, suspended(b, m)) })
}
