package serialize

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
)

// The test charter: a support agent (root) with tools that suspend in
// every way, a review node, researcher and vault workers, and two packs
// (one with a state type that only encodes through JSON methods).

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)

type supportState struct {
	Orders []int             `json:"orders"`
	Note   string            `json:"note,omitempty"`
	Since  time.Time         `json:"since"`
	Tags   map[string]string `json:"tags,omitempty"`
	Extra  any               `json:"extra"`
}

type reviewState struct {
	Score int `json:"score"`
}

type researchState struct {
	Topic    string   `json:"topic"`
	Findings []string `json:"findings,omitempty"`
}

// vaultState keeps its data in an unexported field, reachable only through
// its JSON methods: it is stored as JSON in the msgpack form.
type vaultState struct{ secret string }

func (v vaultState) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]string{"s": v.secret})
}
func (v *vaultState) UnmarshalJSON(b []byte) error {
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	v.secret = m["s"]
	return nil
}

type billingState struct {
	Credits int      `json:"credits"`
	Log     []string `json:"log,omitempty"`
}

type auditState struct {
	Entries []vaultState `json:"entries"`
}

// ledgerState is at state version 2. Version 0 kept the lines as strings
// under "items"; version 1 renamed them "entries"; version 2 gave entries
// an amount.
type ledgerState struct {
	Entries []ledgerEntry `json:"entries"`
}

type ledgerEntry struct {
	Label  string `json:"label"`
	Amount int    `json:"amount"`
}

// migrateLedger brings a ledger state saved at version 0 or 1 to version
// 2.
func migrateLedger(from int, raw json.RawMessage) (ledgerState, error) {
	var old struct {
		Items   []string `json:"items"`   // version 0
		Entries []string `json:"entries"` // version 1
	}
	if err := json.Unmarshal(raw, &old); err != nil {
		return ledgerState{}, err
	}
	lines := old.Entries
	if from == 0 {
		lines = old.Items
	}
	s := ledgerState{Entries: []ledgerEntry{}}
	for _, l := range lines {
		s.Entries = append(s.Entries, ledgerEntry{Label: l})
	}
	return s, nil
}

type refundIn struct {
	OrderID int `json:"order_id"`
}

type jobIn struct {
	Job string `json:"job"`
}

type chargeIn struct {
	Amount int `json:"amount"`
}

type researchIn struct {
	Topics []string `json:"topics"`
}

// idGen hands out deterministic IDs; clone it to continue a sequence in
// another charter.
type idGen struct {
	mu sync.Mutex
	n  int
}

func (g *idGen) next() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n++
	return fmt.Sprintf("id-%d", g.n)
}

func (g *idGen) clone() *idGen {
	g.mu.Lock()
	defer g.mu.Unlock()
	return &idGen{n: g.n}
}

var errTooMany = errors.New("too many orders")

func buildNodes() []*node.Node {
	billing := node.NewPack("billing", "credits", billingState{Credits: 100},
		node.NewPackTool("charge", "charge credits", func(ctx *node.PackContext[billingState], in chargeIn) (string, error) {
			err := ctx.Update(func(s *billingState) {
				s.Credits -= in.Amount
				s.Log = append(s.Log, fmt.Sprintf("charged %d", in.Amount))
			})
			return "charged", err
		}))
	audit := node.NewPack("audit", "audit trail", auditState{})
	support := must(node.New("support", node.Config[supportState]{
		Instructions: "Help customers.",
		Initial:      supportState{Orders: []int{}, Since: t0},
		Validate: func(s supportState) error {
			if len(s.Orders) > 100 {
				return errTooMany
			}
			return nil
		},
		Tools: []node.Tool[supportState]{
			node.NewTool("request_refund", "refund an order", func(ctx *node.ToolContext[supportState], in refundIn) (string, error) {
				if err := ctx.Update(func(s *supportState) { s.Orders = append(s.Orders, in.OrderID) }); err != nil {
					return "", err
				}
				return "", ctx.Suspend("needs approval", instance.WithMetadata(in))
			}),
			node.NewTool("lookup", "look an order up", func(ctx *node.ToolContext[supportState], in refundIn) (string, error) {
				return fmt.Sprintf("order %d: shipped", in.OrderID), nil
			}),
			node.NewTool("wait_for_ci", "wait for a CI job", func(ctx *node.ToolContext[supportState], in jobIn) (string, error) {
				return "", ctx.Suspend("ci running", instance.WithTimeout(time.Hour),
					instance.OnTimeoutResume(map[string]string{"job": in.Job, "status": "timeout"}, true))
			}),
			node.NewTool("confirm", "ask the customer to confirm", func(ctx *node.ToolContext[supportState], in refundIn) (string, error) {
				return "", ctx.Suspend("customer confirmation", instance.WithTimeout(time.Hour),
					instance.OnTimeoutResume(confirmation{Confirmed: false, Comment: "no answer"}, false))
			}, node.ResumeWith[confirmation]()),
			node.NewTool("finish", "end the conversation", func(ctx *node.ToolContext[supportState], _ struct{}) (string, error) {
				return "finished", nil
			}, node.Terminal()),
		},
		Transitions: []node.Transition[supportState]{
			node.To[supportState]("review", "hand over to review"),
			node.NewTransition("research", "spawn researchers", func(ctx *node.TransitionContext[supportState], in researchIn) (instance.Effect, error) {
				children := []instance.Child{}
				for _, t := range in.Topics {
					children = append(children, instance.Child{Node: "researcher", State: researchState{Topic: t}})
				}
				children = append(children, instance.Child{Node: "vault", State: vaultState{secret: "k-" + strings.Join(in.Topics, "+")}})
				return instance.Spawn(children...), nil
			}),
		},
		Commands: []command.Command[supportState]{
			command.New("escalate", "escalate to a human", func(ctx *command.Context[supportState], in jobIn) (string, error) {
				return "", ctx.Suspend("escalated: "+in.Job, instance.WithMetadata(map[string]int{"level": 2}))
			}),
			command.New("sign_off", "wait for a sign-off", func(ctx *command.Context[supportState], in jobIn) (string, error) {
				return "", ctx.Suspend("sign-off of " + in.Job)
			}, command.ResumeWith[confirmation]()),
			command.New("note", "set the note", func(ctx *command.Context[supportState], in jobIn) (string, error) {
				return "noted", ctx.Update(func(s *supportState) { s.Note = in.Job })
			}),
		},
		Packs: []*node.Pack{billing, audit},
	}))
	review := must(node.New("review", node.Config[reviewState]{
		Instructions: "Review the case.",
		Tools: []node.Tool[reviewState]{
			node.NewTool("approve", "ask for approval", func(ctx *node.ToolContext[reviewState], in refundIn) (string, error) {
				return "", ctx.Suspend("approval")
			}),
		},
	}))
	researcher := must(node.New("researcher", node.Config[researchState]{
		Instructions: "Research the topic.",
		Worker:       true,
		Transitions:  []node.Transition[researchState]{node.Ceder[researchState]("hand back findings")},
	}))
	vault := must(node.New("vault", node.Config[vaultState]{Instructions: "Keep the secret.", Worker: true}))
	ledger := must(node.New("ledger", node.Config[ledgerState]{
		Instructions: "Keep the books.",
		Initial:      ledgerState{Entries: []ledgerEntry{}},
		StateVersion: 2,
		Migrate:      migrateLedger,
	}))
	return []*node.Node{support, review, researcher, vault, ledger}
}

// historyBlobs returns the history of m as MarshalMessage writes it.
func historyBlobs(m *machine.Machine) [][]byte {
	var blobs [][]byte
	for _, msg := range m.History() {
		blobs = append(blobs, must(MarshalMessage(msg)))
	}
	return blobs
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// fixture is a charter with a scripted model and deterministic IDs and
// clock.
type fixture struct {
	model *scripted.Model
	ids   *idGen
	c     *machine.Charter
	clk   *testkit.Clock
}

// setClock sets the charter's time to t0 + d.
func (f *fixture) setClock(d time.Duration) { f.clk.Set(t0.Add(d)) }

func newFixture(t testing.TB, ids *idGen, replies ...scripted.Reply) *fixture {
	t.Helper()
	if ids == nil {
		ids = &idGen{}
	}
	f := &fixture{model: scripted.New(replies...), ids: ids, clk: testkit.NewClock(t0)}
	c, err := machine.NewCharter(machine.CharterConfig{
		Name:         "test",
		Instructions: "You are a test agent.",
		Model:        f.model,
		Nodes:        buildNodes(),
		Clock:        f.clk.Now,
		NewID:        ids.next,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
	return f
}

// charter returns a charter for decoding only (its model is never called).
func charter(t testing.TB) *machine.Charter { return newFixture(t, nil).c }

func call(id, name string, input any) scripted.Call {
	return scripted.Call{ID: id, Name: name, Input: input}
}

// run runs m with inputs to the end (or for max steps when max > 0) and
// returns the steps.
func run(t testing.TB, m *machine.Machine, max int, inputs ...machine.Input) []machine.Step {
	t.Helper()
	var steps []machine.Step
	for s, err := range m.Run(context.Background(), inputs...) {
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		steps = append(steps, s)
		if max > 0 && len(steps) == max {
			break
		}
	}
	return steps
}

// Scenarios: deterministic machines, the golden files' contents.

// plainMachine: a finished conversation with every kind of message a run
// produces: text, thinking with a signature, tool use and results (one an
// error), a command record, silent input.
func plainMachine(t testing.TB) *machine.Machine {
	f := newFixture(t, nil,
		scripted.Reply{Thinking: "Let me look.", Signature: "sig-abc", Calls: []scripted.Call{call("tu-1", "lookup", refundIn{7}), call("tu-2", "nope", nil)}},
		scripted.Text("Order 7 has shipped."),
	)
	m := must(f.c.NewMachine("support", nil))
	run(t, m, 0, machine.UserText("where is order 7?"))
	run(t, m, 0, command.Invoke("note", jobIn{"vip"}), message.Message{Role: message.User, Parts: []message.Part{message.Text("fyi")}, Silent: true})
	return m
}

// suspendedMachine: one reply of three calls, two suspended (one with a
// deadline and an on-timeout payload) and one completed.
func suspendedMachine(t testing.TB) *machine.Machine {
	f := newFixture(t, nil, scripted.Tools(
		call("tu-1", "request_refund", refundIn{42}),
		call("tu-2", "lookup", refundIn{42}),
		call("tu-3", "wait_for_ci", jobIn{"build-9"}),
	))
	m := must(f.c.NewMachine("support", nil))
	run(t, m, 0, machine.UserText("refund 42 once CI passes"))
	return m
}

// confirmation is the payload of typed resumes.
type confirmation struct {
	Confirmed bool   `json:"confirmed"`
	Comment   string `json:"comment,omitempty"`
}

// typedMachine: a typed tool suspension (with an on-timeout payload) and a
// typed command suspension, both recording their payload schemas.
func typedMachine(t testing.TB) *machine.Machine {
	f := newFixture(t, nil, scripted.Tools(call("tu-1", "confirm", refundIn{42})))
	m := must(f.c.NewMachine("support", nil))
	run(t, m, 0, machine.UserText("refund 42 if the customer confirms"))
	run(t, m, 0, command.Invoke("sign_off", jobIn{"refund-42"}))
	return m
}

// workersMachine: the root spawned two researcher workers and a vault
// worker, and charged the billing pack, in one reply.
func workersMachine(t testing.TB) *machine.Machine {
	f := newFixture(t, nil, scripted.Tools(
		call("tu-1", "charge", chargeIn{5}),
		call("tu-2", "research", researchIn{[]string{"pricing", "refunds"}}),
	))
	m := must(f.c.NewMachine("support", supportState{Orders: []int{1, 2}, Since: t0, Tags: map[string]string{"tier": "gold", "lang": "en"}, Extra: map[string]any{"n": 1.5, "ok": true}}))
	run(t, m, 1, machine.UserText("research pricing and refunds"))
	return m
}

// versionedMachine: a node at state version 2, suspended with a held
// transition to a state of the same node (both states carry the version).
func versionedMachine(t testing.TB) *machine.Machine {
	tu := message.ToolUse("tu-1", "post", json.RawMessage(`{"amount":5}`))
	root := &instance.Instance{
		ID: "root", Node: "ledger",
		State: ledgerState{Entries: []ledgerEntry{{Label: "tea", Amount: 3}}},
		Suspension: &instance.SuspensionState{
			Calls: []instance.SuspendedCall{{
				SuspendID: "s-1", InstanceID: "root", ToolUseID: "tu-1", Kind: instance.KindTool, Initiator: instance.ByTool,
				Name: "post", Input: json.RawMessage(`{"amount":5}`), Reason: "needs approval", SuspendedAt: t0, Status: instance.StatusPending,
			}},
			Reply: &instance.HeldReply{
				Message:    message.Message{Role: message.Assistant, Parts: []message.Part{tu}, Source: message.Source{InstanceID: "root", Node: "ledger", To: "root"}},
				Results:    []message.Part{{}},
				Transition: &instance.Effect{Kind: instance.EffectGoto, Target: "ledger", State: ledgerState{Entries: []ledgerEntry{{Label: "cake", Amount: 5}}}},
			},
		},
	}
	return must(machine.Restore(charter(t), root, message.NewHistory([]message.Message{message.UserText("post 5 for cake")})))
}

var scenarios = []struct {
	name  string
	build func(testing.TB) *machine.Machine
}{
	{"plain", plainMachine},
	{"suspended", suspendedMachine},
	{"workers", workersMachine},
	{"versioned", versionedMachine},
	{"typed", typedMachine},
}

// cmpOpts compare trees and histories: unexported state fields included,
// empty and nil alike.
var cmpOpts = cmp.Options{
	cmpopts.EquateEmpty(),
	cmp.AllowUnexported(vaultState{}),
}

// sameMachine reports differences between two machines' trees and
// histories.
func sameMachine(t testing.TB, want, got *machine.Machine, opts ...cmp.Option) {
	t.Helper()
	if d := cmp.Diff(want.Root(), got.Root(), cmpOpts, cmp.Options(opts)); d != "" {
		t.Errorf("tree differs (-want +got):\n%s", d)
	}
	if d := cmp.Diff(want.History(), got.History(), cmpOpts, cmp.Options(opts)); d != "" {
		t.Errorf("history differs (-want +got):\n%s", d)
	}
}

func diff(want, got any) string { return cmp.Diff(want, got, cmpOpts) }
