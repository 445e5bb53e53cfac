package machine_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
)

func TestSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	id := suspendAndResume(t, sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))

	count := map[string]int{}
	attrs := map[string]map[string]string{}
	for _, s := range rec.Ended() {
		count[s.Name()]++
		a := map[string]string{}
		for _, kv := range s.Attributes() {
			a[string(kv.Key)] = kv.Value.String()
		}
		attrs[s.Name()] = a
	}
	require.Equal(t, map[string]int{
		"markov.run": 2, "markov.step": 2, "markov.model": 2, "markov.tool": 1, "markov.suspend": 1, "markov.resume": 1,
	}, count)
	require.Equal(t, "suspended", attrs["markov.tool"]["markov.outcome"])
	require.Equal(t, id, attrs["markov.suspend"]["markov.suspend_id"])
	require.Equal(t, "explicit", attrs["markov.resume"]["markov.cause"])
	require.Equal(t, "end_turn", attrs["markov.model"]["markov.stop"])
}

// countingSampler drops every span and counts the ones it was asked about.
type countingSampler struct{ asked map[string]int }

func (s *countingSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	s.asked[p.Name]++
	return sdktrace.SamplingResult{Decision: sdktrace.Drop}
}

func (s *countingSampler) Description() string { return "counting" }

// TestSpansSampledOut checks that a provider dropping spans still decides
// on every one: only an untraced run (no provider) skips inner spans.
func TestSpansSampledOut(t *testing.T) {
	sampler := &countingSampler{asked: map[string]int{}}
	suspendAndResume(t, sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler)))
	require.Equal(t, map[string]int{
		"markov.run": 2, "markov.step": 2, "markov.model": 2, "markov.tool": 1, "markov.suspend": 1, "markov.resume": 1,
	}, sampler.asked)
}

// suspendAndResume runs a tool call that suspends, then resumes it, on a
// charter tracing to tp; it returns the suspend ID.
func suspendAndResume(t *testing.T, tp *sdktrace.TracerProvider) string {
	t.Helper()
	model := scripted.New(scripted.Tool("ask", askIn{"x"}), scripted.Text("ok"))
	c := charterCfg(t, machine.CharterConfig{Model: model, Nodes: []*node.Node{suspendNode(t), doneNode(t)}, TracerProvider: tp})
	m := newMachine(t, c, "desk")
	ids := pendingIDs(run(t, m, machine.UserText("go")))
	run(t, m, machine.ResumeInput{SuspendID: ids[0], Payload: "yes"})
	return ids[0]
}
