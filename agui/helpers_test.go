package agui_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/agui"
	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store/sqlite/sqlitetest"
)

// desk is the state of the test charter's node: how many refunds were
// approved.
type desk struct {
	Refunds int `json:"refunds"`
}

type order struct {
	Order int `json:"order"`
}

// approval is the payload a refund's interrupt asks for.
type approval struct {
	Approved bool   `json:"approved"`
	By       string `json:"by"`
}

// deskReply is the scripted model: "refund N" looks order N up and asks
// for an approval (two tool calls in one reply); "slow" streams a text
// that a gate holds halfway; a tool result is reported ("Done: …");
// anything else is echoed.
func deskReply(req *llm.Request) (scripted.Reply, error) {
	last := req.Messages[len(req.Messages)-1]
	if done, ok := testkit.Reported(last); ok {
		return scripted.Text(done), nil
	}
	text := last.Text()
	var n int
	if _, err := fmt.Sscanf(text, "refund %d", &n); err == nil {
		return scripted.Tools(
			scripted.Call{ID: fmt.Sprintf("lookup-%d", n), Name: "lookup", Input: order{Order: n}},
			scripted.Call{ID: fmt.Sprintf("approve-%d", n), Name: "approve", Input: order{Order: n}}), nil
	}
	if text == "slow" {
		return scripted.Text(slowText), nil
	}
	return scripted.Text("You said: " + text), nil
}

// slowText is the reply to "slow": the gate holds it after its first
// chunk.
const slowText = "The first part, then the rest of it."

// gated streams the scripted model's replies, holding a reply to "slow"
// after its first chunk until release is closed.
type gated struct {
	*scripted.Model
	release chan struct{}
	// held is closed when a reply is held.
	held chan struct{}
}

func (g *gated) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
	slow := req.Messages[len(req.Messages)-1].Text() == "slow"
	return func(yield func(llm.Chunk, error) bool) {
		first := true
		for c, err := range g.Model.Stream(ctx, req) {
			if !yield(c, err) || err != nil {
				return
			}
			if slow && first && c.Kind == llm.ChunkText {
				first = false
				close(g.held)
				select {
				case <-g.release:
				case <-ctx.Done():
					yield(llm.Chunk{}, ctx.Err())
					return
				}
			}
		}
	}
}

func (g *gated) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	return llm.Collect(g.Stream(ctx, req))
}

// fixture is a runner of the test charter on a fresh SQLite file, with
// its gated model.
type fixture struct {
	runner *durable.Runner
	model  *gated
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	lookup := node.NewTool("lookup", "Look an order up.", func(_ *node.ToolContext[desk], in order) (string, error) {
		return fmt.Sprintf("order %d: shoes, 40 EUR", in.Order), nil
	})
	approve := node.NewTool("approve", "Refund an order, once a person approves.", func(ctx *node.ToolContext[desk], in order) (string, error) {
		return "", ctx.Suspend(fmt.Sprintf("refund of order %d needs a manager", in.Order))
	}, node.OnResume(func(ctx *node.ToolContext[desk], in order, r node.Resumed[approval]) (string, error) {
		if r.IsError {
			return "", fmt.Errorf("order %d not refunded: %s", in.Order, r.Text())
		}
		if !r.Payload.Approved {
			return fmt.Sprintf("order %d: refund refused by %s", in.Order, r.Payload.By), nil
		}
		if err := ctx.Update(func(d *desk) { d.Refunds++ }); err != nil {
			return "", err
		}
		return fmt.Sprintf("order %d refunded, approved by %s", in.Order, r.Payload.By), nil
	}))
	n, err := node.New("desk", node.Config[desk]{Tools: []node.Tool[desk]{lookup, approve}})
	require.NoError(t, err)
	g := &gated{Model: scripted.Func(deskReply), release: make(chan struct{}), held: make(chan struct{})}
	ch, err := machine.NewCharter(machine.CharterConfig{Name: "desk", Model: g, Nodes: []*node.Node{n}})
	require.NoError(t, err)
	r, err := durable.New(durable.Config{Store: sqlitetest.Open(t, sqlitetest.Path(t)), Charter: ch})
	require.NoError(t, err)
	return &fixture{runner: r, model: g}
}

// serve serves the endpoint of cfg (Runner and Node filled in) for the
// test.
func (f *fixture) serve(t *testing.T, cfg agui.Config) (*agui.Handler, *httptest.Server) {
	t.Helper()
	cfg.Runner, cfg.Node = f.runner, "desk"
	h, err := agui.New(cfg)
	require.NoError(t, err)
	return h, serve(t, h, h)
}

// serve serves handler, which mounts h, for the test: h closes first,
// so that its runs end and no request waits on them.
func serve(t *testing.T, h *agui.Handler, handler http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(func() {
		h.Close()
		srv.Close()
	})
	return srv
}

// event is one AG-UI event received, with the SSE id it came with.
type event struct {
	ID   string
	Data map[string]any
}

func (e event) Type() string { return e.Data["type"].(string) }

// input is a RunAgentInput.
func input(thread, run, text string, resume ...map[string]any) []byte {
	in := map[string]any{"threadId": thread, "runId": run, "state": map[string]any{}, "tools": []any{}, "context": []any{}, "forwardedProps": map[string]any{},
		"messages": []any{}}
	if text != "" {
		in["messages"] = []any{map[string]any{"id": run + "-m", "role": "user", "content": text}}
	}
	if len(resume) > 0 {
		in["resume"] = resume
	}
	data, _ := json.Marshal(in)
	return data
}

// post posts body and returns the stream's events.
func post(t *testing.T, url string, body []byte) []event {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	var out []event
	for e := range read(t, bufio.NewReader(resp.Body)) {
		out = append(out, e)
	}
	return out
}

// read yields the events of an SSE stream until it ends.
func read(t *testing.T, r *bufio.Reader) iter.Seq[event] {
	return func(yield func(event) bool) {
		var e event
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimRight(line, "\n")
			switch {
			case strings.HasPrefix(line, "id: "):
				e.ID = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e.Data))
			case line == "" && e.Data != nil:
				if !yield(e) {
					return
				}
				e = event{}
			}
		}
	}
}

// types lists the events' types.
func types(evs []event) []string {
	out := make([]string, 0, len(evs))
	for _, e := range evs {
		out = append(out, e.Type())
	}
	return out
}

// only returns the events of type typ.
func only(evs []event, typ string) []event {
	var out []event
	for _, e := range evs {
		if e.Type() == typ {
			out = append(out, e)
		}
	}
	return out
}

// text is the text of the events' TEXT_MESSAGE_CONTENT deltas.
func text(evs []event) string {
	var b strings.Builder
	for _, e := range only(evs, "TEXT_MESSAGE_CONTENT") {
		b.WriteString(e.Data["delta"].(string))
	}
	return b.String()
}

// last is the last event.
func last(t *testing.T, evs []event) event {
	t.Helper()
	require.NotEmpty(t, evs)
	return evs[len(evs)-1]
}
