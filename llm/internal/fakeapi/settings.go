package fakeapi

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/message"
)

// CheckSettings requires a request's settings to be merged over the
// adapter's defaults (llm.Settings.Merge) and sent as the body's model,
// token limit and temperature. The body field maxTokens carries the token
// limit, which is defaultMaxTokens when neither the request nor the
// defaults set one (nil: the field is absent).
func (a Adapter[C, M]) CheckSettings(t *testing.T, maxTokens string, defaultMaxTokens any) {
	t.Helper()
	tests := []struct {
		name              string
		defaults, request llm.Settings
		model             string
		maxTokens         any
		temperature       any // nil: absent
	}{
		{
			name:     "defaults only",
			defaults: llm.Settings{Model: "model-a", MaxTokens: 1000, Temperature: llm.Temperature(0.2)},
			model:    "model-a", maxTokens: 1000.0, temperature: 0.2,
		},
		{
			name:     "node overrides max tokens",
			defaults: llm.Settings{Model: "model-a", MaxTokens: 1000, Temperature: llm.Temperature(0.2)},
			request:  llm.Settings{MaxTokens: 2000},
			model:    "model-a", maxTokens: 2000.0, temperature: 0.2,
		},
		{
			name:     "node overrides model and temperature",
			defaults: llm.Settings{Model: "model-a", MaxTokens: 1000},
			request:  llm.Settings{Model: "model-b", Temperature: llm.Temperature(0)},
			model:    "model-b", maxTokens: 1000.0, temperature: 0.0,
		},
		{
			name:     "no max tokens anywhere",
			defaults: llm.Settings{Model: "model-a"},
			model:    "model-a", maxTokens: defaultMaxTokens,
		},
		{
			name:    "model only from the request",
			request: llm.Settings{Model: "model-c", MaxTokens: 300},
			model:   "model-c", maxTokens: 300.0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := a.NewServer(t, Reply{File: TextReply})
			m := a.NewModel(t, srv, a.edit(func(f fields) { *f.DefaultSettings = tt.defaults }))
			_, err := m.Generate(context.Background(), &llm.Request{
				Messages: []message.Message{message.UserText("Hi")},
				Settings: tt.request,
			})
			require.NoError(t, err)
			body := srv.LastBody(t)
			want := map[string]any{"model": tt.model, maxTokens: tt.maxTokens, "temperature": tt.temperature}
			got := map[string]any{"model": body["model"], maxTokens: body[maxTokens], "temperature": body["temperature"]}
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("settings (-want +got):\n%s", d)
			}
		})
	}
}
