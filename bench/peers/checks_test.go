package peers

import (
	"context"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cloudwego/eino/components/tool"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/serialize"
)

// TestSharedHistory backs capped and markovPlainRound: machines restored
// from one decoded history, or from one plain slice, run and serialized,
// leave it as it was.
func TestSharedHistory(t *testing.T) {
	c, _ := markovCharter(t, newMarkovModel(false), false)
	h := markovHistory(100)
	for i := range 4 {
		history := capped(h)
		if i >= 2 {
			history = message.NewHistory(h)
		}
		m := ok(machine.Restore(c, deskTree(false), history))(t)
		for range 3 {
			ok(markovRoundOf(m))(t)
		}
		ok(serialize.Marshal(m))(t)
	}
	if !reflect.DeepEqual(h, markovHistory(100)) {
		t.Error("a machine changed the history it was restored from")
	}
}

// TestInputChecks records how far each library checks lookup_order's
// input, as README.md says: markov validates it against the inferred
// schema (a missing required field is an error result the model sees);
// eino's InferTool decodes it with sonic, which rejects a wrong type but
// lets a missing field through as its zero value.
func TestInputChecks(t *testing.T) {
	t.Run("markov", func(t *testing.T) {
		model := newMarkovModel(false)
		model.call.Message.Parts[0].Data = []byte(`{}`)
		c, calls := markovCharter(t, model, false)
		m := ok(machine.Restore(c, deskTree(false), message.History{}))(t)
		for s, err := range m.Run(context.Background()) {
			if err != nil {
				t.Fatal(err)
			}
			res := toolResultPart(s.Messages)
			if !res.IsError || !strings.Contains(res.Text, "order_id") {
				t.Errorf("input {} gave %+v, want an error result naming order_id", res)
			}
			break
		}
		if calls.Load() != 0 {
			t.Error("the handler ran on invalid input")
		}
	})
	t.Run("eino", func(t *testing.T) {
		calls := new(atomic.Int64)
		lookup := einoLookup(t, calls).(tool.InvokableTool)
		ctx := context.Background()
		if _, err := lookup.InvokableRun(ctx, `{"order_id":5}`); err == nil {
			t.Error("a number for order_id was accepted")
		}
		got, err := lookup.InvokableRun(ctx, `{}`)
		if err != nil || got != "order : shipped" {
			t.Errorf("input {} gave %q, %v; want the handler to run with an empty order_id", got, err)
		}
	})
}
