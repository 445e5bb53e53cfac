package serialize

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
)

// Benchmarks on a machine shaped like a long-running agent: a tree of 100
// instances (some suspended) and a history of 1,000 messages — user
// requests, assistant replies with tool calls, tool results, records —
// with IDs like the charter's default (26 base32 characters).

// benchID returns a deterministic ID that looks like a default one.
func benchID(i int) string {
	h := sha256.Sum256(fmt.Appendf(nil, "%d", i))
	return base32.StdEncoding.EncodeToString(h[:])[:26]
}

var benchTexts = []string{
	"Can you check on order 4411? It still hasn't arrived.",
	"Order 4411 shipped on Monday with tracking 1Z999AA10123456784 and should arrive tomorrow.",
	"Thanks! Also, please refund the broken mug from order 4398.",
	"I've requested the refund; a manager needs to approve amounts over $25.",
	"Looking at the account history before answering.",
}

// benchHistory returns n messages of a typical conversation of instance
// root (node support).
func benchHistory(n int, root string) []message.Message {
	h := make([]message.Message, 0, n)
	src := message.Source{InstanceID: root, Node: "support"}
	for i := 0; len(h) < n; i++ {
		tu := "toolu_" + benchID(i)[:20]
		step := []message.Message{
			message.UserText(benchTexts[i%len(benchTexts)]),
			{Role: message.Assistant, Parts: []message.Part{
				message.Text(benchTexts[(i+1)%len(benchTexts)]),
				message.ToolUse(tu, "lookup", json.RawMessage(fmt.Sprintf(`{"order_id":%d}`, 4000+i))),
			}, Source: message.Source{InstanceID: root, Node: "support", To: root}},
			{Role: message.Tool, Parts: []message.Part{message.ToolResult(tu, fmt.Sprintf("order %d: shipped, 2 items, $%d.50", 4000+i, i%90), false)}, Source: message.Source{InstanceID: root, Node: "support", To: root}},
			{Role: message.Assistant, Parts: []message.Part{message.Text(benchTexts[(i+2)%len(benchTexts)])}, Source: src},
		}
		if i%5 == 4 {
			step = append(step, message.Message{Role: message.Record, Parts: []message.Part{message.RecordPart("command", json.RawMessage(`{"command":"note","input":{"job":"vip"},"value":"noted"}`))}, Source: message.Source{InstanceID: root, Node: "support", To: root}})
		}
		h = append(h, step...)
	}
	return h[:n]
}

// benchTree returns a root with n-1 descendants: researchers under
// reviewers under the root, every tenth suspended.
func benchTree(n int) *instance.Instance {
	root := &instance.Instance{
		ID: benchID(-1), Node: "support",
		State: supportState{Orders: []int{4398, 4411, 4412}, Note: "VIP customer", Since: t0, Tags: map[string]string{"tier": "gold", "lang": "en"}},
		Packs: map[string]any{"billing": billingState{Credits: 80, Log: []string{"charged 20"}}, "audit": auditState{Entries: []vaultState{{"e1"}}}},
	}
	parent := root
	for i := 1; i < n; i++ {
		in := &instance.Instance{ID: benchID(i), Node: "researcher", State: researchState{Topic: "pricing of plan " + benchID(i)[:4], Findings: []string{"plans start at $9", "annual discount 20%"}}, Idle: i%3 == 0}
		if i%10 == 0 {
			in.Node, in.State = "review", reviewState{Score: i}
			in.Suspension = &instance.SuspensionState{Calls: []instance.SuspendedCall{{
				SuspendID: benchID(1000 + i), InstanceID: in.ID, ToolUseID: "toolu_" + benchID(2000 + i)[:20], Kind: instance.KindTool, Initiator: instance.ByTool,
				Name: "approve", Input: json.RawMessage(`{"order_id":4398}`), Metadata: json.RawMessage(`{"amount":31.5}`), Reason: "needs approval",
				SuspendedAt: t0, Deadline: t0.Add(24 * time.Hour), Status: instance.StatusPending,
			}}, Reply: &instance.HeldReply{
				Message: message.Message{Role: message.Assistant, Parts: []message.Part{message.ToolUse("toolu_"+benchID(2000 + i)[:20], "approve", json.RawMessage(`{"order_id":4398}`))}, Source: message.Source{InstanceID: in.ID, Node: "review", To: in.ID}},
				Results: []message.Part{{}},
			}}
			root.Children = append(root.Children, in)
			parent = in
			continue
		}
		parent.Children = append(parent.Children, in)
	}
	return root
}

func benchMachine(b *testing.B) *machine.Machine {
	root := benchTree(100)
	m, err := machine.Restore(charter(b), root, message.NewHistory(benchHistory(1000, root.ID)))
	if err != nil {
		b.Fatal(err)
	}
	return m
}

func BenchmarkMarshal(b *testing.B) {
	m := benchMachine(b)
	for _, form := range forms {
		b.Run(form.name, func(b *testing.B) {
			var data []byte
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if data, err = form.marshal(m); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(data)), "bytes/machine")
		})
	}
}

func BenchmarkUnmarshal(b *testing.B) {
	m := benchMachine(b)
	c := m.Charter()
	for _, form := range forms {
		b.Run(form.name, func(b *testing.B) {
			data, err := form.marshal(m)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := form.unmarshal(c, data); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(data)), "bytes/machine")
		})
	}
}

// BenchmarkSuspendResumeCycle is one full cycle of a suspended machine
// with a 1,000-message history: decode it, resume the suspension, let the
// model answer with a tool call that suspends again, encode it.
func BenchmarkSuspendResumeCycle(b *testing.B) {
	c, data, id := cycleMachine(b)
	b.ReportAllocs()
	for b.Loop() {
		m, err := Unmarshal(c, data)
		if err != nil {
			b.Fatal(err)
		}
		suspended := false
		for s, err := range m.Run(context.Background(), machine.ResumeInput{SuspendID: id, Payload: "approved"}) {
			if err != nil {
				b.Fatal(err)
			}
			suspended = suspended || s.Reason == machine.Suspend
		}
		if !suspended {
			b.Fatal("the machine did not suspend again")
		}
		if _, err := Marshal(m); err != nil {
			b.Fatal(err)
		}
	}
}

// cycleMachine returns a charter whose model always asks for a refund, and
// a machine with a 1,000-message history suspended in request_refund.
func cycleMachine(b *testing.B) (*machine.Charter, []byte, string) {
	n := 0
	model := llm.ModelFunc(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
		n++
		msg := message.Message{Role: message.Assistant, Parts: []message.Part{
			message.Text("Requesting the refund."),
			message.ToolUse(fmt.Sprintf("toolu_%d", n), "request_refund", json.RawMessage(`{"order_id":4398}`)),
		}}
		return &llm.Response{Message: msg, StopReason: llm.ToolUse}, nil
	})
	c, err := machine.NewCharter(machine.CharterConfig{Model: model, Nodes: buildNodes(), Clock: func() time.Time { return t0 }})
	if err != nil {
		b.Fatal(err)
	}
	root := &instance.Instance{ID: benchID(-1), Node: "support", State: supportState{Orders: []int{}, Since: t0}, Idle: true}
	m, err := machine.Restore(c, root, message.NewHistory(benchHistory(1000, root.ID)))
	if err != nil {
		b.Fatal(err)
	}
	var pending []instance.SuspendedCall
	for s, err := range m.Run(context.Background(), machine.UserText("refund 4398")) {
		if err != nil {
			b.Fatal(err)
		}
		pending = s.Suspensions
	}
	if len(pending) != 1 {
		b.Fatalf("%d pending calls", len(pending))
	}
	data, err := Marshal(m)
	if err != nil {
		b.Fatal(err)
	}
	return c, data, pending[0].SuspendID
}

// BenchmarkStoreSave is what a durable store pays per step: the tree and
// one new message, whatever the length of the history.
func BenchmarkStoreSave(b *testing.B) {
	m := benchMachine(b)
	msg := m.History()[1]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := MarshalTree(m); err != nil {
			b.Fatal(err)
		}
		if _, err := MarshalMessage(msg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStoreLoad rebuilds the machine from its tree and 1,000 message
// blobs.
func BenchmarkStoreLoad(b *testing.B) {
	m := benchMachine(b)
	tree, history := must(MarshalTree(m)), historyBlobs(m)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Assemble(m.Charter(), tree, history); err != nil {
			b.Fatal(err)
		}
	}
}
