package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/mcp"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/store"
)

// everythingDir holds the pinned reference server (npm ci installs it).
const everythingDir = "testdata/everything"

// everythingBin returns the reference server's command, skipping the test
// when it is not installed (failing it under CI=true).
func everythingBin(tb testing.TB) string {
	bin, err := findEverything()
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatal(err)
		}
		tb.Skip(err)
	}
	return bin
}

// findEverything returns the installed reference server's command.
func findEverything() (string, error) {
	bin, err := filepath.Abs(filepath.Join(everythingDir, "node_modules", ".bin", "mcp-server-everything"))
	if err == nil {
		_, err = os.Stat(bin)
	}
	if err != nil {
		return "", fmt.Errorf("the MCP reference server is not installed: run 'cd mcp/testdata/everything && npm ci' (.ci/run does): %w", err)
	}
	return bin, nil
}

// everything returns a client of the reference server over stdio and the
// tools it offers once its conditional tools (elicitation among them) are
// registered, which it does after the handshake and announces with
// notifications/tools/list_changed.
func everything(bin string, log *slog.Logger, sampling llm.Model) (*mcp.Client, func() error, error) {
	changed := make(chan struct{}, 1)
	c, err := mcp.New(mcp.Config{Name: "every", Command: []string{bin, "stdio"}, Sampling: sampling,
		Logger: slog.New(tee{notify{"mcp tool list changed", changed, ""}, log.Handler()})})
	if err != nil {
		return nil, nil, err
	}
	if _, err := mcp.Tools[desk](context.Background(), c); err != nil {
		return nil, nil, err
	}
	return c, func() error { <-changed; return nil }, nil
}

// tee sends records to both handlers.
type tee struct{ a, b slog.Handler }

func (t tee) Enabled(ctx context.Context, l slog.Level) bool {
	return t.a.Enabled(ctx, l) || t.b.Enabled(ctx, l)
}
func (t tee) Handle(ctx context.Context, r slog.Record) error {
	_ = t.a.Handle(ctx, r)
	if t.b.Enabled(ctx, r.Level) {
		return t.b.Handle(ctx, r)
	}
	return nil
}
func (t tee) WithAttrs(as []slog.Attr) slog.Handler { return tee{t.a.WithAttrs(as), t.b.WithAttrs(as)} }
func (t tee) WithGroup(g string) slog.Handler       { return tee{t.a.WithGroup(g), t.b.WithGroup(g)} }

// TestEverythingTools: the reference server's tools are mounted, and a
// call of one (get-sum) reaches the model.
func TestEverythingTools(t *testing.T) {
	bin := everythingBin(t)
	c, ready, err := everything(bin, slog.Default(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, ready())
	tools, err := mcp.Tools[desk](context.Background(), c)
	require.NoError(t, err)
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name())
	}
	require.Contains(t, names, "every_echo")
	require.Contains(t, names, "every_get-sum")
	require.Contains(t, names, "every_trigger-elicitation-request")
	require.NotContains(t, names, "every_trigger-sampling-request", "offered to a client that declares sampling only")

	require.Contains(t, callTool(t, c, "every_get-sum", map[string]any{"a": 2, "b": 40}), "42")
}

// TestEverythingSampling: a client whose Config.Sampling names a model
// is offered the reference server's trigger-sampling-request; a call of
// it sends the client a sampling/createMessage during the call, which
// the model answers, and the server's result, with the model's text,
// reaches the machine's model.
func TestEverythingSampling(t *testing.T) {
	bin := everythingBin(t)
	var asked []*llm.Request
	model := llm.ModelFunc(func(_ context.Context, req *llm.Request) (*llm.Response, error) {
		asked = append(asked, req)
		return &llm.Response{Message: message.Message{Role: message.Assistant, Parts: []message.Part{message.Text("a sampled haiku")}}, Model: "charter-model"}, nil
	})
	c, ready, err := everything(bin, slog.Default(), model)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, ready())
	require.Contains(t, callTool(t, c, "every_trigger-sampling-request", map[string]any{"prompt": "a haiku", "maxTokens": 30}), "a sampled haiku")
	require.Len(t, asked, 1)
	require.Equal(t, "You are a helpful test server.", asked[0].System)
	require.Equal(t, 30, asked[0].Settings.MaxTokens)
	require.Equal(t, "Resource trigger-sampling-request context: a haiku", asked[0].Messages[0].Text())
}

// TestEverythingElicitationAcrossProcesses: in a first process, the
// model calls the reference server's trigger-elicitation-request and the
// machine (on SQLite) suspends with the server's form; that process
// stops, with its server. A second process answers: its server gets the
// answer, and the tool's result reaches the model.
func TestEverythingElicitationAcrossProcesses(t *testing.T) {
	everythingBin(t)
	db := filepath.Join(t.TempDir(), "every.db")
	out, err := testkit.ChildCommand(childEnv + "=ask " + db).Output()
	require.NoError(t, err)
	var asked struct {
		ID     string
		Reason string
		Schema json.RawMessage
		Meta   mcp.InputMetadata
	}
	require.NoError(t, json.Unmarshal(out, &asked), string(out))
	require.Equal(t, "Please provide inputs for the following fields:", asked.Reason)
	require.Contains(t, string(asked.Schema), `"required":["name"]`)
	require.Equal(t, "every", asked.Meta.Server)
	require.Equal(t, "trigger-elicitation-request", asked.Meta.Tool)

	out, err = testkit.ChildCommand(childEnv + "=answer " + db + " " + asked.ID).Output()
	require.NoError(t, err)
	var answered struct {
		Results []string
		Reply   string
	}
	require.NoError(t, json.Unmarshal(out, &answered), string(out))
	require.Len(t, answered.Results, 1)
	require.Contains(t, answered.Results[0], "User provided the requested information")
	require.Contains(t, answered.Results[0], "- Name: Ada Lovelace")
	require.Contains(t, answered.Results[0], "- Favorite Integer: 7")
	require.Equal(t, "thanks", answered.Reply)
}

// everythingChild plays one process of
// TestEverythingElicitationAcrossProcesses and prints what it saw as JSON.
func everythingChild(args []string) int {
	if err := everythingStep(args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func everythingStep(args []string) error {
	bin, err := findEverything()
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	c, ready, err := everything(bin, log, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := ready(); err != nil {
		return err
	}
	// Each process's model plays its part of the conversation: the call,
	// then the reply to its result.
	reply := scripted.Tool("every_trigger-elicitation-request", map[string]any{})
	if args[0] == "answer" {
		reply = scripted.Text("thanks")
	}
	r, closeStore, err := newRunner(c, args[1], reply)
	if err != nil {
		return err
	}
	defer closeStore()
	ctx := context.Background()
	enc := json.NewEncoder(os.Stdout)
	switch args[0] {
	case "ask":
		if _, err := r.Create(ctx, "m1", "desk", nil); err != nil {
			return err
		}
		steps, err := drain(r.Run(ctx, "m1", machine.UserText("ask me")))
		if err != nil {
			return err
		}
		sus := steps[len(steps)-1].Suspensions
		if len(sus) != 1 {
			return fmt.Errorf("%d suspensions, want 1", len(sus))
		}
		meta, err := instance.Decode[mcp.InputMetadata](sus[0].Metadata)
		if err != nil {
			return err
		}
		return enc.Encode(map[string]any{"ID": sus[0].SuspendID, "Reason": sus[0].Reason, "Schema": sus[0].PayloadSchema, "Meta": meta})
	case "answer":
		pending, err := r.Pending(ctx, store.Filter{})
		if err != nil || len(pending) != 1 || pending[0].ID != args[2] {
			return fmt.Errorf("pending %v (%v), want %s", pending, err, args[2])
		}
		if _, err := resumeSteps(ctx, r, machine.ResumeInput{SuspendID: args[2],
			Payload: map[string]any{"name": "Ada Lovelace", "check": true, "integer": 7}}); err != nil {
			return err
		}
		m, _, err := r.Load(ctx, "m1")
		if err != nil {
			return err
		}
		h := m.History()
		reply := h[len(h)-1].Text()
		got, err := resultsOf(r)
		if err != nil {
			return err
		}
		return enc.Encode(map[string]any{"Results": got, "Reply": reply})
	}
	return fmt.Errorf("unknown role %q", strings.Join(args, " "))
}
