package scripted_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/message"
)

// TestKeepRequests checks that a capped model keeps only its latest
// requests, and one that keeps none keeps nothing, while both count
// every call.
func TestKeepRequests(t *testing.T) {
	ask := func(i int) *llm.Request {
		return &llm.Request{Messages: []message.Message{message.UserText("q" + strconv.Itoa(i))}}
	}
	reply := func(*llm.Request) (scripted.Reply, error) { return scripted.Text("a"), nil }
	for _, tc := range []struct {
		keep int
		want []string
	}{
		{keep: 0, want: []string{"q0", "q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8", "q9"}},
		{keep: 3, want: []string{"q7", "q8", "q9"}},
		{keep: 1, want: []string{"q9"}},
		{keep: -1, want: nil},
	} {
		t.Run(strconv.Itoa(tc.keep), func(t *testing.T) {
			m := scripted.Func(reply).Configure(scripted.Config{KeepRequests: tc.keep})
			for i := range 10 {
				_, err := m.Generate(context.Background(), ask(i))
				require.NoError(t, err)
			}
			var got []string
			for _, r := range m.Requests() {
				got = append(got, r.Messages[0].Parts[0].Text)
			}
			require.Equal(t, tc.want, got)
			require.Equal(t, 10, m.Calls())
		})
	}
}
