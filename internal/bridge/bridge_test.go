package bridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/bridge"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store/sqlite/sqlitetest"
)

type desk struct{}

var secret = []byte(strings.Repeat("s", bridge.MinSecret))

// asked returns a runner on a fresh SQLite store and machine m1, whose
// model asked two questions: a confirmation and a choice.
func asked(t *testing.T) *durable.Runner {
	t.Helper()
	n, err := node.New("desk", node.Config[desk]{Tools: []node.Tool[desk]{node.AskUser[desk](node.AskUserConfig{})}})
	require.NoError(t, err)
	model := scripted.New(
		scripted.Tools(
			scripted.Call{Name: node.AskUserTool, Input: node.AskInput{Question: "Refund?", Kind: node.AskConfirm}},
			scripted.Call{Name: node.AskUserTool, Input: node.AskInput{Question: "Size?", Kind: node.AskChoice, Options: []string{"S", "M"}}},
		),
		scripted.Text("noted"))
	c, err := machine.NewCharter(machine.CharterConfig{Model: model, Nodes: []*node.Node{n}})
	require.NoError(t, err)
	r, err := durable.New(durable.Config{Store: sqlitetest.Open(t, sqlitetest.Path(t)), Charter: c})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = r.Create(ctx, "m1", "desk", nil)
	require.NoError(t, err)
	_, err = drain(r.Run(ctx, "m1", machine.UserText("help")))
	require.NoError(t, err)
	return r
}

func drain(seq iter.Seq2[machine.Step, error]) ([]machine.Step, error) {
	var out []machine.Step
	for s, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, s)
	}
	return out, nil
}

func results(t *testing.T, r *durable.Runner) []string {
	m, _, err := r.Load(context.Background(), "m1")
	require.NoError(t, err)
	var out []string
	for _, msg := range m.History() {
		for _, p := range msg.Parts {
			if p.Kind == message.KindToolResult {
				out = append(out, p.Text)
			}
		}
	}
	return out
}

// TestBridgeRoundTrip: the pending questions become requests with their
// schemas; a token names them; answers (one bad) are refused as a whole
// with nothing consumed; good answers resume; answering again reports the
// suspensions resolved rather than failing.
func TestBridgeRoundTrip(t *testing.T) {
	ctx := context.Background()
	r := asked(t)
	b, err := bridge.New(bridge.Config{Runner: r, Secret: secret})
	require.NoError(t, err)
	reqs, err := b.Requests(ctx, "m1")
	require.NoError(t, err)
	require.Len(t, reqs, 2)
	require.Equal(t, "Refund?", reqs[0].Reason)
	require.JSONEq(t, `{"type":"boolean"}`, string(reqs[0].Schema))
	require.Equal(t, node.AskUserTool, reqs[1].Name)
	m, _, err := r.Load(ctx, "m1")
	require.NoError(t, err)
	pending := m.Pending()
	require.NotEmpty(t, pending[0].ToolUseID)
	require.Equal(t, []string{pending[0].ToolUseID, pending[1].ToolUseID}, []string{reqs[0].ToolUseID, reqs[1].ToolUseID}, "each request names its tool call")

	tok, err := b.Token("m1", reqs)
	require.NoError(t, err)
	c, err := b.Open(tok)
	require.NoError(t, err)
	require.Equal(t, "m1", c.MachineID)
	require.Equal(t, []string{reqs[0].SuspendID, reqs[1].SuspendID}, c.SuspendIDs)

	good := bridge.Answer{SuspendID: reqs[0].SuspendID, Payload: json.RawMessage(`true`)}
	_, err = b.Inputs(ctx, c, []bridge.Answer{good, {SuspendID: reqs[1].SuspendID, Payload: json.RawMessage(`"XL"`)}}, "test")
	var rej *bridge.RejectedError
	require.ErrorAs(t, err, &rej)
	require.Len(t, rej.Violations, 1)
	require.Equal(t, reqs[1].SuspendID, rej.Violations[0].SuspendID)
	require.ErrorIs(t, err, instance.ErrPayloadDecode)
	still, err := b.Requests(ctx, "m1")
	require.NoError(t, err)
	require.Len(t, still, 2, "a rejected set consumes nothing")

	answers := []bridge.Answer{good, {SuspendID: reqs[1].SuspendID, Action: bridge.Decline, Reason: "no size"}}
	applied, err := b.Inputs(ctx, c, answers, "test")
	require.NoError(t, err)
	require.Empty(t, applied.Resolved)
	_, err = drain(r.Run(ctx, "m1", applied.Inputs...))
	require.NoError(t, err)
	got := results(t, r)
	require.Len(t, got, 2)
	require.Equal(t, "true", got[0])
	require.Contains(t, got[1], "no size")

	again, err := b.Inputs(ctx, c, answers, "test")
	require.NoError(t, err, "an answer for a resolved suspension is not an error")
	require.Empty(t, again.Inputs)
	require.Equal(t, []string{reqs[0].SuspendID, reqs[1].SuspendID}, again.Resolved)
}

// TestBridgeRefusesAnswers: answers the token does not cover, or that
// cannot apply, are refused with their sentinels.
func TestBridgeRefusesAnswers(t *testing.T) {
	ctx := context.Background()
	r := asked(t)
	b, err := bridge.New(bridge.Config{Runner: r, Secret: secret})
	require.NoError(t, err)
	reqs, err := b.Requests(ctx, "m1")
	require.NoError(t, err)
	tok, err := b.Token("m1", reqs[:1])
	require.NoError(t, err)
	c, err := b.Open(tok)
	require.NoError(t, err)
	_, err = b.Inputs(ctx, c, []bridge.Answer{{SuspendID: reqs[1].SuspendID, Payload: json.RawMessage(`"S"`)}}, "")
	require.ErrorIs(t, err, bridge.ErrNotInToken)
	_, err = b.Inputs(ctx, c, []bridge.Answer{{SuspendID: reqs[0].SuspendID, Action: "maybe"}}, "")
	require.ErrorIs(t, err, bridge.ErrInvalidAnswer)
	a := bridge.Answer{SuspendID: reqs[0].SuspendID, Payload: json.RawMessage(`true`)}
	_, err = b.Inputs(ctx, c, []bridge.Answer{a, a}, "")
	require.ErrorIs(t, err, bridge.ErrInvalidAnswer)
	// Cancel applies as a cancellation.
	applied, err := b.Inputs(ctx, c, []bridge.Answer{{SuspendID: reqs[0].SuspendID, Action: bridge.Cancel, Reason: "gone"}}, "")
	require.NoError(t, err)
	require.IsType(t, machine.CancelInput{}, applied.Inputs[0])
}

// TestTokenRefused: a token tampered with, signed with another secret,
// truncated or stale is refused with a *TokenError.
func TestTokenRefused(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	r := asked(t)
	b, err := bridge.New(bridge.Config{Runner: r, Secret: secret, TokenTTL: time.Hour, Now: clock})
	require.NoError(t, err)
	tok, err := b.Token("m1", []bridge.Request{{SuspendID: "s1"}})
	require.NoError(t, err)
	other, err := bridge.New(bridge.Config{Runner: r, Secret: []byte(strings.Repeat("t", 32)), Now: clock})
	require.NoError(t, err)

	body, sig, _ := strings.Cut(tok, ".")
	flipped := []byte(body)
	flipped[3] ^= 1
	for name, bad := range map[string]string{
		"tampered":      string(flipped) + "." + sig,
		"other secret":  func() string { s, _ := other.Token("m1", nil); return s }(),
		"no signature":  body,
		"truncated":     tok[:len(tok)-2],
		"empty":         "",
		"huge":          strings.Repeat("a", bridge.MaxToken+1),
		"not base64url": "!!!." + sig,
	} {
		_, err := b.Open(bad)
		var te *bridge.TokenError
		require.ErrorAs(t, err, &te, name)
		require.ErrorIs(t, err, bridge.ErrBadToken, name)
	}
	now = now.Add(time.Hour)
	_, err = b.Open(tok)
	require.ErrorIs(t, err, bridge.ErrTokenExpired)

	_, err = bridge.New(bridge.Config{Runner: r, Secret: []byte("short")})
	require.ErrorIs(t, err, bridge.ErrInvalidConfig)
	_, err = bridge.New(bridge.Config{Secret: secret})
	require.True(t, errors.Is(err, bridge.ErrInvalidConfig))
}

// TestTaskID: a task ID names its machine and creation, and is refused
// tampered with, signed with another secret, past its expiry, or when it
// is a continuation token; a task ID is no continuation token either.
func TestTaskID(t *testing.T) {
	r := asked(t)
	now := time.Date(2026, 11, 28, 10, 0, 0, 123456789, time.UTC)
	clock := func() time.Time { return now }
	b, err := bridge.New(bridge.Config{Runner: r, Secret: secret, TokenTTL: time.Hour, Now: clock})
	require.NoError(t, err)
	id, task, err := b.TaskID("m1", now)
	require.NoError(t, err)
	require.Equal(t, now.Truncate(time.Millisecond), task.Created)
	got, err := b.OpenTask(id)
	require.NoError(t, err)
	require.Equal(t, "m1", got.MachineID)
	require.True(t, got.Created.Equal(task.Created), "%s != %s", got.Created, task.Created)

	other, err := bridge.New(bridge.Config{Runner: r, Secret: []byte(strings.Repeat("o", bridge.MinSecret)), Now: clock})
	require.NoError(t, err)
	_, err = other.OpenTask(id)
	require.ErrorIs(t, err, bridge.ErrBadToken)
	_, err = b.OpenTask(id[:len(id)-2] + "xx")
	require.ErrorIs(t, err, bridge.ErrBadToken)
	token, err := b.Token("m1", nil)
	require.NoError(t, err)
	_, err = b.OpenTask(token)
	require.ErrorIs(t, err, bridge.ErrBadToken)
	_, err = b.Open(id)
	require.ErrorIs(t, err, bridge.ErrBadToken)

	now = now.Add(2 * time.Hour)
	_, err = b.OpenTask(id)
	require.ErrorIs(t, err, bridge.ErrTokenExpired)
}
