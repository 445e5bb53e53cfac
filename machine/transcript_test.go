package machine_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/access"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/serialize"
)

// transcriptRecorder calls the leaf's tool (ask for the instance
// "asker", tick for the others) on every request and keeps the
// transcript each leaf was sent.
type transcriptRecorder struct {
	mu   sync.Mutex
	n    int
	sent map[string][]message.Message
}

func (r *transcriptRecorder) Generate(_ context.Context, req *llm.Request) (*llm.Response, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	r.sent[req.InstanceID] = req.Messages
	name := "tick"
	if req.InstanceID == "asker" {
		name = "ask"
	}
	use := message.ToolUse("toolu_"+strconv.Itoa(r.n), name, []byte(`{"what":"x"}`))
	return &llm.Response{Message: message.Message{Parts: []message.Part{message.Text("on it"), use}}, StopReason: llm.ToolUse}, nil
}

// TestTranscriptsOfManyLeaves checks each leaf's transcript, kept
// incrementally round after round (each leaf taking in the shared
// messages and its own, and a leaf that sat out rounds catching up),
// against history filtered from scratch.
func TestTranscriptsOfManyLeaves(t *testing.T) {
	tick := node.NewTool("tick", "tick", func(*node.ToolContext[empty], askIn) (string, error) { return "ticked", nil })
	chat := mustNode(t, "chat", node.Config[empty]{Tools: []node.Tool[empty]{tick}})
	worker := mustNode(t, "worker", node.Config[empty]{Worker: true, Tools: []node.Tool[empty]{tick, askTool[empty]("ask")}})
	root := mustNode(t, "root", node.Config[empty]{})
	model := &transcriptRecorder{sent: map[string][]message.Message{}}
	c := charterCfg(t, machine.CharterConfig{Model: model, Nodes: []*node.Node{root, chat, worker}, MaxSteps: 1 << 20})
	tree := &instance.Instance{ID: "root", Node: "root", State: empty{}, Children: []*instance.Instance{
		{ID: "chat", Node: "chat", State: empty{}}, {ID: "asker", Node: "worker", State: empty{}},
		{ID: "w1", Node: "worker", State: empty{}}, {ID: "w2", Node: "worker", State: empty{}},
	}}
	// The restored history is shared up to a message for w1 and a record:
	// each leaf sees the shared prefix without reading it, then only what
	// is its own.
	restored := []message.Message{
		message.UserText("hello"), message.UserText("all of you"),
		{Role: message.User, Parts: []message.Part{message.Text("only w1")}, Source: message.Source{To: "w1"}},
		{Role: message.Record, Parts: []message.Part{message.RecordPart("note", nil)}, Source: message.Source{InstanceID: "chat", To: "chat"}},
		message.UserText("and again"),
	}
	m, err := machine.Restore(c, tree, message.NewHistory(restored))
	require.NoError(t, err)
	oneRound := func(inputs ...machine.Input) {
		for _, err := range m.Run(context.Background(), inputs...) {
			require.NoError(t, err)
			break
		}
	}
	check := func(h []message.Message) {
		t.Helper()
		for id, got := range model.sent {
			var want []message.Message
			for i := range h {
				if h[i].VisibleTo(id) {
					want = append(want, h[i])
				}
			}
			require.Equal(t, want, got, "transcript of %s", id)
		}
		clear(model.sent)
	}
	for round := range 6 {
		var inputs []machine.Input
		if round == 3 { // the asker, suspended since round 0, resumes
			inputs = append(inputs, machine.ResumeInput{SuspendID: m.Pending()[0].SuspendID, Payload: "yes"})
		}
		if round%2 == 1 {
			inputs = append(inputs, machine.UserText("more "+strconv.Itoa(round)))
		}
		before := model.n
		oneRound(inputs...)
		require.NotEmpty(t, model.sent)
		check(roundStart(m.History(), before))
	}
	require.Len(t, m.Pending(), 1, "the asker asked again")

	// The history keeps the transcript of the primary leaf, chat, though
	// its first scoped message was for w1: a machine restored from it
	// (durable's history cache hands it over) does not copy chat's.
	access.MachineView(m, func(_ *instance.Instance, h message.History) {
		got, ok := h.Transcript("chat")
		require.True(t, ok, "the history follows the primary leaf")
		var want []message.Message
		for _, msg := range h.Messages() {
			if msg.VisibleTo("chat") {
				want = append(want, msg)
			}
		}
		require.Equal(t, want, got)
	})
}

// roundStart returns the history the round saw: h up to the first reply
// to a model call after the first before.
func roundStart(h []message.Message, before int) []message.Message {
	for i, msg := range h {
		for _, p := range msg.Parts {
			if n, err := strconv.Atoi(strings.TrimPrefix(p.ID, "toolu_")); err == nil && p.Kind == message.KindToolUse && n > before {
				return h[:i]
			}
		}
	}
	return h
}

// freshTurnModel asks for approval on a user message, answers a tool
// result with text, and keeps the transcript of its last request.
type freshTurnModel struct {
	mu   sync.Mutex
	sent []message.Message
}

func (f *freshTurnModel) Generate(_ context.Context, req *llm.Request) (*llm.Response, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent = req.Messages
	reply := message.Message{Parts: []message.Part{message.Text("done")}}
	if last := req.Messages[len(req.Messages)-1]; last.Role == message.User && !strings.HasPrefix(last.Text(), "Digest") {
		reply = message.Message{Parts: []message.Part{message.ToolUse("toolu_"+strconv.Itoa(len(req.Messages)), "ask", []byte(`{"what":"x"}`))}}
		return &llm.Response{Message: reply, StopReason: llm.ToolUse}, nil
	}
	return &llm.Response{Message: reply, StopReason: llm.EndTurn}, nil
}

// A fresh-turn resume restarts the agent's transcript with a digest,
// in the machine that resumed and in one restored from its history: the
// transcript a history keeps past its records (message.History.Transcript)
// does not stand in for it.
func TestFreshTurnTranscriptAfterRestore(t *testing.T) {
	model := &freshTurnModel{}
	desk := mustNode(t, "desk", node.Config[empty]{Tools: []node.Tool[empty]{askTool[empty]("ask")}})
	c := charterCfg(t, machine.CharterConfig{Model: model, Nodes: []*node.Node{desk}})
	m, err := c.NewMachine("desk", nil)
	require.NoError(t, err)
	run := func(m *machine.Machine, inputs ...machine.Input) {
		t.Helper()
		for _, err := range m.Run(context.Background(), inputs...) {
			require.NoError(t, err)
		}
	}
	run(m, machine.UserText("approve it"))
	run(m, machine.ResumeInput{SuspendID: m.Pending()[0].SuspendID, Payload: "yes", FreshTurn: true})
	digest := model.sent[0]
	require.True(t, strings.HasPrefix(digest.Text(), "Digest of the conversation"), "the fresh turn opens with the digest: %v", model.sent)
	require.Len(t, model.sent, 3, "the digest, then the resumed call and its result")

	restored, err := machine.Restore(c, m.Root(), message.NewHistory(m.History()))
	require.NoError(t, err)
	for name, m := range map[string]*machine.Machine{"same machine": m, "restored": restored} {
		run(m, machine.UserText("and now?"))
		require.Equal(t, digest, model.sent[0], "%s: the transcript still starts at the digest", name)
		require.Len(t, model.sent, 5, name)
		require.Equal(t, []string{"done", "and now?"}, []string{model.sent[3].Text(), model.sent[4].Text()}, name)
	}
}

// TestWindowedTranscripts checks that a charter's window cuts what each
// step sends the model, turn after turn with tool rounds, to
// message.Window of the leaf's whole transcript, while history keeps
// every message.
func TestWindowedTranscripts(t *testing.T) {
	tick := node.NewTool("tick", "tick", func(*node.ToolContext[empty], askIn) (string, error) { return "ticked", nil })
	chat := mustNode(t, "chat", node.Config[empty]{Tools: []node.Tool[empty]{tick}})
	var sent [][]message.Message
	model := scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		sent = append(sent, req.Messages)
		if req.Messages[len(req.Messages)-1].Role == message.User {
			return scripted.Tools(scripted.Call{Name: "tick", Input: askIn{What: "x"}}, scripted.Call{Name: "tick", Input: askIn{What: "y"}}), nil
		}
		return scripted.Text("done"), nil
	})
	const window = 5
	_, err := machine.NewCharter(machine.CharterConfig{Model: model, Nodes: []*node.Node{chat}, Window: -1})
	require.ErrorIs(t, err, machine.ErrInvalidCharter)
	c := charterCfg(t, machine.CharterConfig{Model: model, Nodes: []*node.Node{chat}, Window: window})
	require.Equal(t, window, c.Window())
	m := newMachine(t, c, "chat")
	for turn := range 6 {
		sent = sent[:0]
		run(t, m, machine.UserText("turn "+strconv.Itoa(turn)))
		require.Len(t, sent, 2, "a tool round and the answer")
		h := m.History()
		// The first request saw the history up to the turn's user message;
		// the second, all but its last message (the answer).
		user := len(h) - 1
		for h[user].Role != message.User {
			user--
		}
		for i, upTo := range []int{user + 1, len(h) - 1} {
			var whole []message.Message
			for _, msg := range h[:upTo] {
				if msg.VisibleTo(m.Root().ID) {
					whole = append(whole, msg)
				}
			}
			require.Equal(t, message.Window(whole, window), sent[i], "turn %d, request %d", turn, i)
			require.LessOrEqual(t, len(sent[i]), window, "turn %d, request %d", turn, i)
		}
	}
	require.Len(t, m.History(), 6*4, "history keeps every message: question, calls, results, answer")
}

// tickRecorder calls tick on every request and keeps the transcript each
// leaf was sent; the tool use's ID is the leaf's and its transcript's
// length, whichever leaf asks first.
type tickRecorder struct {
	mu   sync.Mutex
	sent map[string][]message.Message
}

func (r *tickRecorder) Generate(_ context.Context, req *llm.Request) (*llm.Response, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent[req.InstanceID] = slices.Clip(req.Messages)
	if len(req.Messages) == 0 {
		r.sent[req.InstanceID] = nil // an empty history, decoded or not
	}
	use := message.ToolUse("toolu_"+req.InstanceID+"_"+strconv.Itoa(len(req.Messages)), "tick", []byte(`{"what":"x"}`))
	return &llm.Response{Message: message.Message{Parts: []message.Part{use}}, StopReason: llm.ToolUse}, nil
}

// TestPlainHistoryTranscripts checks, on random histories of shared
// messages, exchanges scoped to each leaf and records, that a machine
// restored from a plain slice (message.NewHistory, no room past its
// end, as an application hands its own) sends each leaf, round after
// round, the transcript a machine restored from the same history
// decoded by serialize sends it, and that the first is the restored
// history as the leaf sees it (VisibleTo).
func TestPlainHistoryTranscripts(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	kinds := []message.Message{
		message.UserText("hello"),
		{Role: message.Assistant, Parts: []message.Part{message.Text("hi")}},
		{Role: message.Assistant, Parts: []message.Part{message.Text("chat's")}, Source: message.Source{InstanceID: "chat", To: "chat"}},
		{Role: message.User, Parts: []message.Part{message.Text("w1's")}, Source: message.Source{To: "w1"}},
		{Role: message.Record, Parts: []message.Part{message.RecordPart("note", nil)}},
		{Role: message.Record, Parts: []message.Part{message.RecordPart("transition", nil)}, Source: message.Source{InstanceID: "chat", To: "chat"}},
	}
	tick := node.NewTool("tick", "tick", func(*node.ToolContext[empty], askIn) (string, error) { return "ticked", nil })
	charterOf := func(model llm.Model) *machine.Charter {
		chat := mustNode(t, "chat", node.Config[empty]{Tools: []node.Tool[empty]{tick}})
		worker := mustNode(t, "worker", node.Config[empty]{Worker: true, Tools: []node.Tool[empty]{tick}})
		root := mustNode(t, "root", node.Config[empty]{})
		return charterCfg(t, machine.CharterConfig{Model: model, Nodes: []*node.Node{root, chat, worker}, MaxSteps: 1 << 20})
	}
	tree := func() *instance.Instance {
		return &instance.Instance{ID: "root", Node: "root", State: empty{}, Children: []*instance.Instance{
			{ID: "chat", Node: "chat", State: empty{}}, {ID: "w1", Node: "worker", State: empty{}},
		}}
	}
	for try := range 40 {
		msgs := make([]message.Message, rng.IntN(30))
		for i := range msgs {
			msgs[i] = kinds[rng.IntN(len(kinds))]
		}
		plainModel, decodedModel := &tickRecorder{sent: map[string][]message.Message{}}, &tickRecorder{sent: map[string][]message.Message{}}
		plain, err := machine.Restore(charterOf(plainModel), tree(), message.NewHistory(slices.Clip(slices.Clone(msgs))))
		require.NoError(t, err)
		dc := charterOf(decodedModel)
		m, err := machine.Restore(dc, tree(), message.NewHistory(slices.Clone(msgs)))
		require.NoError(t, err)
		decoded, err := serialize.Unmarshal(dc, marshal(t, m))
		require.NoError(t, err)
		for round := range 4 {
			var inputs []machine.Input
			if round == 2 {
				inputs = append(inputs, machine.UserText("more"))
			}
			for _, m := range []*machine.Machine{plain, decoded} {
				for _, err := range m.Run(context.Background(), inputs...) {
					require.NoError(t, err)
					break
				}
			}
			require.Equal(t, decodedModel.sent, plainModel.sent, "try %d, round %d: the transcripts sent from the plain history and the decoded one", try, round)
			if round == 0 {
				for id, got := range plainModel.sent {
					var want []message.Message
					for _, msg := range msgs {
						if msg.VisibleTo(id) {
							want = append(want, msg)
						}
					}
					require.Equal(t, want, got, "try %d: the first transcript of %s", try, id)
				}
			}
			clear(plainModel.sent)
			clear(decodedModel.sent)
		}
	}
}
