package serialize

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
)

// Resuming a restored machine is equivalent to resuming the original: for
// each scenario, machine A suspends and is resumed in place, phase after
// phase; machine B is A encoded at the suspension, then decoded with a
// fresh charter (model holding the rest of the script, ID sequence
// continued) before every phase. Both must send the model the same
// requests, yield the same steps and end with the same tree and history.

type phase struct {
	// at is the charter time of the phase, after t0.
	at time.Duration
	// inputs derives the phase's inputs from the pending calls.
	inputs func(pending []instance.SuspendedCall) []machine.Input
}

func resumeAll(payload any) func([]instance.SuspendedCall) []machine.Input {
	return func(p []instance.SuspendedCall) []machine.Input {
		var in []machine.Input
		for _, c := range p {
			in = append(in, machine.ResumeInput{SuspendID: c.SuspendID, Payload: payload})
		}
		return in
	}
}

func resumeNth(i int, payload any, isError bool) func([]instance.SuspendedCall) []machine.Input {
	return func(p []instance.SuspendedCall) []machine.Input {
		return []machine.Input{machine.ResumeInput{SuspendID: p[i].SuspendID, Payload: payload, IsError: isError}}
	}
}

// orderCalls returns a reply calling the tools named, the i-th (from 1)
// with tool-use ID tu-i about order i.
func orderCalls(names ...string) scripted.Reply {
	calls := make([]scripted.Call, len(names))
	for i, name := range names {
		calls[i] = call(fmt.Sprintf("tu-%d", i+1), name, refundIn{i + 1})
	}
	return scripted.Tools(calls...)
}

func noInputs([]instance.SuspendedCall) []machine.Input { return nil }

var resumeCases = []struct {
	name   string
	script []scripted.Reply
	// start runs the machine until it suspends.
	start  func(testing.TB, *machine.Machine)
	phases []phase
	// check tests the end state of the original machine.
	check func(testing.TB, *machine.Machine)
}{{
	name:   "single tool suspends",
	script: []scripted.Reply{scripted.Tools(call("tu-1", "request_refund", refundIn{42})), scripted.Text("refunded")},
	start:  userSays("refund 42"),
	phases: []phase{{inputs: resumeAll("approved")}},
	check:  lastSays("refunded"),
}, {
	name:   "one of three calls suspends",
	script: []scripted.Reply{orderCalls("lookup", "request_refund", "lookup"), scripted.Text("done")},
	start:  userSays("refund 2, look up 1 and 3"),
	phases: []phase{{inputs: resumeAll(map[string]any{"approved": true, "by": "ops"})}},
	check:  lastSays("done"),
}, {
	name:   "two suspend, resumed one at a time",
	script: []scripted.Reply{orderCalls("request_refund", "request_refund", "lookup"), scripted.Text("both handled")},
	start:  userSays("refund 1 and 2"),
	phases: []phase{
		{inputs: resumeNth(1, "denied", true)},
		{at: time.Minute, inputs: resumeNth(0, 7, false)},
	},
	check: lastSays("both handled"),
}, {
	name:   "command suspends",
	script: []scripted.Reply{scripted.Text("escalation done")},
	start: func(t testing.TB, m *machine.Machine) {
		run(t, m, 0, command.Invoke("escalate", jobIn{"case-7"}))
	},
	phases: []phase{{inputs: resumeAll(map[string]string{"owner": "ana"})}, {inputs: func([]instance.SuspendedCall) []machine.Input {
		return []machine.Input{machine.UserText("thanks")}
	}}},
	check: lastSays("escalation done"),
}, {
	name:   "whole instance suspended by the caller",
	script: []scripted.Reply{scripted.Text("hello"), scripted.Text("resuming with the note")},
	start: func(t testing.TB, m *machine.Machine) {
		run(t, m, 0, machine.UserText("hi"))
		if _, err := m.Suspend("night shift", instance.WithMetadata(map[string]int{"shift": 3})); err != nil {
			t.Fatal(err)
		}
		run(t, m, 0, machine.UserText("are you there?")) // kept for after the resume
	},
	phases: []phase{{inputs: resumeAll("morning")}},
	check:  lastSays("resuming with the note"),
}, {
	name: "held transition",
	script: []scripted.Reply{
		scripted.Tools(call("tu-1", "request_refund", refundIn{5}), call("tu-2", "transition_to_review", map[string]any{"state": map[string]int{"score": 5}})),
		scripted.Text("reviewing"),
	},
	start:  userSays("refund 5 and hand over"),
	phases: []phase{{inputs: resumeAll("approved")}},
	check: func(t testing.TB, m *machine.Machine) {
		if r := m.Root(); r.Node != "review" || r.State != (reviewState{Score: 5}) {
			t.Errorf("root is %s %v, want review {5}", r.Node, r.State)
		}
	},
}, {
	name: "held spawn",
	script: []scripted.Reply{
		scripted.Tools(call("tu-1", "request_refund", refundIn{5}), call("tu-2", "research", researchIn{[]string{"pricing"}})),
		scripted.Text("noted"), scripted.Text("noted"),
	},
	start:  userSays("refund 5, research pricing"),
	phases: []phase{{inputs: resumeAll("approved")}},
	check: func(t testing.TB, m *machine.Machine) {
		if n := len(m.Root().Children); n != 2 {
			t.Errorf("root has %d children, want 2", n)
		}
	},
}, {
	name: "deadline passes while stored",
	script: []scripted.Reply{
		scripted.Tools(call("tu-1", "wait_for_ci", jobIn{"build-1"}), call("tu-2", "lookup", refundIn{1})),
		scripted.Text("CI timed out"),
	},
	start:  userSays("wait for CI"),
	phases: []phase{{at: 2 * time.Hour, inputs: noInputs}},
	check: func(t testing.TB, m *machine.Machine) {
		h := m.History()
		if r := h[len(h)-2].Parts[0]; !r.IsError || !strings.Contains(r.Text, "timeout") {
			t.Errorf("tool result %+v, want the on-timeout error payload", r)
		}
		lastSays("CI timed out")(t, m)
	},
}, {
	name: "terminal tool in a suspended reply",
	script: []scripted.Reply{
		scripted.Tools(call("tu-1", "request_refund", refundIn{5}), call("tu-2", "finish", nil)),
		scripted.Text("new turn"),
	},
	start: userSays("refund 5 and close"),
	phases: []phase{{inputs: resumeAll("approved")}, {inputs: func([]instance.SuspendedCall) []machine.Input {
		return []machine.Input{machine.UserText("one more thing")}
	}}},
	check: lastSays("new turn"),
}}

func lastSays(s string) func(testing.TB, *machine.Machine) {
	return func(t testing.TB, m *machine.Machine) {
		t.Helper()
		h := m.History()
		if got := h[len(h)-1].Text(); got != s {
			t.Errorf("last message says %q, want %q", got, s)
		}
		if p := m.Pending(); len(p) != 0 {
			t.Errorf("still pending: %v", p)
		}
	}
}

func userSays(s string) func(testing.TB, *machine.Machine) {
	return func(t testing.TB, m *machine.Machine) { run(t, m, 0, machine.UserText(s)) }
}

func TestResumeAfterRestoreIsEquivalent(t *testing.T) {
	for _, tc := range resumeCases {
		t.Run(tc.name, func(t *testing.T) {
			a := newFixture(t, nil, tc.script...)
			ma := must(a.c.NewMachine("support", nil))
			tc.start(t, ma)
			if len(ma.Pending()) == 0 {
				t.Fatal("nothing suspended")
			}
			snapshot := a.model.Calls()
			ids := a.ids.clone()
			data := must(Marshal(ma))

			var stepsA [][]machine.Step
			for _, ph := range tc.phases {
				a.setClock(ph.at)
				stepsA = append(stepsA, run(t, ma, 0, ph.inputs(ma.Pending())...))
			}

			consumed := snapshot
			var mb *machine.Machine
			var requestsB []*llm.Request
			for i, ph := range tc.phases {
				b := newFixture(t, ids.clone(), tc.script[consumed:]...)
				b.setClock(ph.at)
				var err error
				if mb, err = Unmarshal(b.c, data); err != nil {
					t.Fatal(err)
				}
				steps := run(t, mb, 0, ph.inputs(mb.Pending())...)
				if d := cmp.Diff(stepsA[i], steps, cmpOpts); d != "" {
					t.Errorf("phase %d: steps differ (-original +restored):\n%s", i, d)
				}
				requestsB = append(requestsB, b.model.Requests()...)
				consumed += b.model.Calls()
				ids = b.ids
				data = must(Marshal(mb))
			}
			requestsA := a.model.Requests()[snapshot:]
			if len(requestsA) == 0 {
				t.Error("the model was never called after the resume")
			}
			// Concurrent leaves call the model in any order.
			byLeaf := func(x, y *llm.Request) int { return strings.Compare(x.InstanceID, y.InstanceID) }
			slices.SortStableFunc(requestsA, byLeaf)
			slices.SortStableFunc(requestsB, byLeaf)
			if d := cmp.Diff(requestsA, requestsB, cmpOpts); d != "" {
				t.Errorf("model requests differ (-original +restored):\n%s", d)
			}
			sameMachine(t, ma, mb)
			tc.check(t, ma)
		})
	}
}
