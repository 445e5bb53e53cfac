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
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	model := scripted.New(scripted.Tool("ask", askIn{"x"}), scripted.Text("ok"))
	c := charterCfg(t, machine.CharterConfig{Model: model, Nodes: []*node.Node{suspendNode(t), doneNode(t)}, TracerProvider: tp})
	m := newMachine(t, c, "desk")
	ids := pendingIDs(run(t, m, machine.UserText("go")))
	run(t, m, machine.ResumeInput{SuspendID: ids[0], Payload: "yes"})

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
	require.Equal(t, ids[0], attrs["markov.suspend"]["markov.suspend_id"])
	require.Equal(t, "explicit", attrs["markov.resume"]["markov.cause"])
	require.Equal(t, "end_turn", attrs["markov.model"]["markov.stop"])
}
