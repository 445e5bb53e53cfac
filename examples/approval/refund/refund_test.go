package refund_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/examples/approval/refund"
	"github.com/markov-agents/markov/llm/anthropic"
	"github.com/markov-agents/markov/llm/openai"
	"github.com/markov-agents/markov/machine"
)

func TestModelFrom(t *testing.T) {
	tests := []struct {
		name     string
		env      map[string]string
		wantType any
		wantDesc string
	}{
		{"nothing set", nil, nil, refund.ScriptedDescription},
		{"anthropic", map[string]string{"ANTHROPIC_API_KEY": "k"}, &anthropic.Model{},
			"anthropic claude-sonnet-4-5 (ANTHROPIC_API_KEY is set; MARKOV_MODEL overrides the model)"},
		{"anthropic wins over openai", map[string]string{"ANTHROPIC_API_KEY": "k", "OPENAI_API_KEY": "k"}, &anthropic.Model{},
			"anthropic claude-sonnet-4-5 (ANTHROPIC_API_KEY is set; MARKOV_MODEL overrides the model)"},
		{"openai", map[string]string{"OPENAI_API_KEY": "k"}, &openai.Model{},
			"openai gpt-4.1-mini (OPENAI_API_KEY is set; MARKOV_MODEL overrides the model)"},
		{"openai compatible server, model override", map[string]string{
			"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://localhost:11434/v1/", "MARKOV_MODEL": "llama3.2",
		}, &openai.Model{}, "openai llama3.2 at http://localhost:11434/v1/ (OPENAI_API_KEY is set; MARKOV_MODEL overrides the model)"},
		{"override alone keeps the scripted model", map[string]string{"MARKOV_MODEL": "x"}, nil, refund.ScriptedDescription},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, desc, err := refund.ModelFrom(func(k string) string { return tt.env[k] })
			require.NoError(t, err)
			require.Equal(t, tt.wantDesc, desc)
			if tt.wantType != nil {
				require.IsType(t, tt.wantType, m)
			} else {
				require.NotNil(t, m)
			}
		})
	}
}

func TestModelFromEnvIgnoresEmptyKeys(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "")
	t.Setenv("OPENAI_API_KEY", "")
	_, desc, err := refund.ModelFromEnv()
	require.NoError(t, err)
	require.Equal(t, refund.ScriptedDescription, desc)
}

// The scripted model is deterministic: two runs give the same transcript.
func TestScriptedModelIsDeterministic(t *testing.T) {
	transcript := func() []string {
		m, err := refund.NewMachine(refund.ScriptedModel())
		require.NoError(t, err)
		var id string
		for step, err := range m.Run(context.Background(), machine.UserText(refund.CustomerRequest)) {
			require.NoError(t, err)
			if step.NeedsResume() {
				id = step.Suspensions[0].SuspendID
			}
		}
		require.NotEmpty(t, id)
		for _, err := range m.Run(context.Background(), machine.ResumeInput{SuspendID: id, Payload: refund.Approval{Approved: true, Manager: "dana"}}) {
			require.NoError(t, err)
		}
		var out []string
		for _, msg := range m.History() {
			for _, p := range msg.Parts {
				out = append(out, fmt.Sprintf("%s %s %s %s %s", msg.Role, p.Kind, p.ID, p.Text, p.Data))
			}
		}
		return out
	}
	first := transcript()
	require.Equal(t, first, transcript())
}

func ExampleNewCharter() {
	charter, err := refund.NewCharter(refund.ScriptedModel())
	if err != nil {
		panic(err)
	}
	m, err := charter.NewMachine(refund.NodeName, nil)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	var suspendID string
	for step, err := range m.Run(ctx, machine.UserText(refund.CustomerRequest)) {
		if err != nil {
			panic(err)
		}
		if step.Reason == machine.Suspend {
			suspendID = step.Suspensions[0].SuspendID
			fmt.Println("suspended:", step.Suspensions[0].Reason)
		}
	}
	for _, err := range m.Run(ctx, machine.ResumeInput{SuspendID: suspendID, Payload: refund.Approval{Approved: true, Manager: "dana"}}) {
		if err != nil {
			panic(err)
		}
	}
	h := m.History()
	fmt.Println(h[len(h)-1].Text())
	fmt.Println(m.Root().State.(refund.Ledger).Refunded)
	// Output:
	// suspended: refund of $89.90 for order A-1042 needs a manager's approval
	// Update on your refund: refund of $89.90 for order A-1042 issued, approved by dana.
	// [A-1042]
}
