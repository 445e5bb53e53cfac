package tour

import (
	"bytes"
	"context"
	"flag"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/doccheck"
	"github.com/markov-agents/markov/llm/scripted"
)

// TestTour runs the tour: the refund suspends, is parked as bytes, and an
// approval resumes it in a fresh charter to the model's final answer.
func TestTour(t *testing.T) {
	ctx := context.Background()
	// testing:scripted:begin
	model := scripted.New(
		scripted.Tool("request_refund", refund{OrderID: "42"}),
		scripted.Text("Your refund for order 42 is approved."),
	)
	var (
		data    []byte
		pending []instance.SuspendedCall
	)
	require.NoError(t, Park(ctx, NewCharter(model), func(b []byte, p []instance.SuspendedCall) error {
		data, pending = b, p
		return nil
	}))
	require.Len(t, pending, 1)
	require.Equal(t, "needs approval", pending[0].Reason)

	var out strings.Builder
	require.NoError(t, Resume(ctx, NewCharter(model), data, pending[0].SuspendID, &out))
	require.Contains(t, out.String(), "Your refund for order 42 is approved.")
	require.Equal(t, 2, len(model.Requests()), "one model call before the suspension, one after")
	// testing:scripted:end
}

var update = flag.Bool("update", false, "rewrite the README's tour from tour.go")

// TestREADMEShowsTheTour: the README's first Go block is the region
// "tour" of tour.go (doccheck.Region: the marked lines, in order,
// dedented).
func TestREADMEShowsTheTour(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	src, err := os.ReadFile("tour.go")
	require.NoError(t, err)
	block := regexp.MustCompile("(?s)## A short tour\n\n```go\n(.*?)```").FindSubmatch(readme)
	require.NotNil(t, block, "README has no Go block under \"## A short tour\"")
	want, err := doccheck.Region(string(src), "tour")
	require.NoError(t, err)
	if *update {
		i := bytes.Index(readme, block[1])
		out := slices.Concat(readme[:i], []byte(want), readme[i+len(block[1]):])
		require.NoError(t, os.WriteFile("../../README.md", out, 0o644))
		return
	}
	require.Equal(t, want, string(block[1]), "README's tour differs from examples/tour/tour.go; go test ./examples/tour -update rewrites it")
}
