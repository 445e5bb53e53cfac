package durable_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/memstore"
	"github.com/markov-agents/markov/store/postgres/pgtest"
)

type payIn struct {
	Amount int `json:"amount"`
}

type receipt struct {
	ID string `json:"id"`
}

// effectCharter is a desk whose tool "pay" charges through a journaled
// effect: fn appends a line to the file at log (how often the charge
// ran, across processes), then hang, if set, is called (a child process
// waits there for its SIGKILL); reconcile, if set, is the effect's hook.
func effectCharter(log string, hang func(where string), reconcile func(context.Context, string) (receipt, bool, error)) (*machine.Charter, error) {
	if hang == nil {
		hang = func(string) {}
	}
	// effects:pay:begin
	pay := node.NewTool("pay", "charge a card", func(ctx *node.ToolContext[desk], in payIn) (receipt, error) {
		r, err := node.Effect(ctx, "charge", func(ctx context.Context) (receipt, error) {
			f, err := os.OpenFile(log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
			if err != nil {
				return receipt{}, err
			}
			defer f.Close()
			if _, err := fmt.Fprintln(f, "charged", in.Amount); err != nil {
				return receipt{}, err
			}
			hang("in")
			return receipt{ID: fmt.Sprint("r-", in.Amount)}, nil
		}, node.EffectConfig[receipt]{Input: in, Reconcile: reconcile})
		if err == nil {
			hang("after")
		}
		return r, err // an effect in doubt is a suspension: return it
	})
	// effects:pay:end
	n, err := node.New("desk", node.Config[desk]{Tools: []node.Tool[desk]{pay}})
	if err != nil {
		return nil, err
	}
	model := scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		if last := req.Messages[len(req.Messages)-1]; last.Role == message.Tool {
			hang("saved") // the tool's round is saved, and its effect's done with it
			return scripted.Text("result: " + last.Parts[0].Text), nil
		}
		return scripted.Reply{Calls: []scripted.Call{{ID: "t1", Name: "pay", Input: payIn{Amount: 40}}}}, nil
	})
	return machine.NewCharter(machine.CharterConfig{Model: model, Nodes: []*node.Node{n}})
}

// childEffect runs machine m1 of the effect charter until the charge
// reaches MARKOV_EFFECT_HANG ("in": inside the effect, after its side
// effect; "after": once the effect returned, before the round's save
// records it done; "saved": in the next model call, once that save is
// made), says so and waits there for its SIGKILL.
func childEffect() int {
	return childHanging(func(hang func(string)) (*machine.Charter, error) {
		return effectCharter(os.Getenv("MARKOV_EFFECT_LOG"), hang, nil)
	}, "pay 40")
}

// childHanging runs machine m1 of the charter that charter builds with
// a hang until it calls hang(MARKOV_EFFECT_HANG), with the user's message
// text; there it says so and waits for its SIGKILL.
func childHanging(charter func(hang func(where string)) (*machine.Charter, error), text string) int {
	where := os.Getenv("MARKOV_EFFECT_HANG")
	hang := func(at string) {
		if at == where {
			fmt.Println(at)
			select {}
		}
	}
	return withRunner(func() (*machine.Charter, error) { return charter(hang) },
		func(r *durable.Runner) int {
			ctx := context.Background()
			if _, err := r.Create(ctx, "m1", "desk", nil); err != nil {
				fmt.Fprintln(os.Stderr, "create:", err)
				return 1
			}
			_, err := drain(r.Run(ctx, "m1", machine.UserText(text)))
			fmt.Fprintln(os.Stderr, "run ended:", err)
			return 1
		})
}

// processStores runs test on each store a child process can share with
// the test: a SQLite file, and a PostgreSQL schema when
// MARKOV_TEST_POSTGRES is set. open opens a fresh one, and returns with
// it what tells a child process where it is.
func processStores(t *testing.T, test func(t *testing.T, open func(t *testing.T) (store.Store, []string))) {
	t.Run("sqlite", func(t *testing.T) {
		test(t, func(t *testing.T) (store.Store, []string) {
			db := filepath.Join(t.TempDir(), "effect.db")
			return openSQLite(t, db), []string{"MARKOV_DB=" + db}
		})
	})
	t.Run("postgres", func(t *testing.T) {
		test(t, func(t *testing.T) (store.Store, []string) {
			s, _, schema := pgtest.Open(t)
			return s, []string{"MARKOV_PG_SCHEMA=" + schema}
		})
	})
}

// crashedCharge runs the effect child on a fresh store from open until it
// hangs at where, SIGKILLs it, and returns a runner on the store (under
// reconcile) and the charge log.
func crashedCharge(t *testing.T, open func(t *testing.T) (store.Store, []string), where string, reconcile func(context.Context, string) (receipt, bool, error)) (*durable.Runner, string) {
	t.Helper()
	log := filepath.Join(t.TempDir(), "charges.log")
	s, env := open(t)
	child := testkit.ChildCommand(append(env, "MARKOV_CHILD=effect", "MARKOV_EFFECT_LOG="+log, "MARKOV_EFFECT_HANG="+where)...)
	require.NoError(t, testkit.StartChild(child, where))
	require.NoError(t, child.Process.Kill())
	require.Error(t, child.Wait())
	c, err := effectCharter(log, nil, reconcile)
	require.NoError(t, err)
	r, err := durable.New(durable.Config{Store: s, Charter: c})
	require.NoError(t, err)
	return r, log
}

func charges(t *testing.T, log string) int {
	data, err := os.ReadFile(log)
	require.NoError(t, err)
	return strings.Count(string(data), "charged")
}

// finalText runs machine m1 to its end with inputs and returns its final
// answer.
func finalText(t *testing.T, r *durable.Runner, inputs ...machine.Input) string {
	t.Helper()
	steps, err := drain(r.Run(context.Background(), "m1", inputs...))
	require.NoError(t, err)
	last := steps[len(steps)-1]
	require.False(t, last.NeedsResume(), "still waiting: %v", last.Suspensions)
	return last.Messages[len(last.Messages)-1].Text()
}

// A process dies after the round that journaled the charge done is saved:
// the next process does not charge again.
func TestEffectDoneIsNotRunAgain(t *testing.T) {
	processStores(t, func(t *testing.T, open func(t *testing.T) (store.Store, []string)) {
		r, log := crashedCharge(t, open, "saved", nil)
		require.Equal(t, `result: {"id":"r-40"}`, finalText(t, r))
		require.Equal(t, 1, charges(t, log))
	})
}

// A process dies after the charge returned and before the round's save,
// which would have journaled it done (the price of one write per effect):
// the next process finds it in doubt and does not charge blindly; a
// person's "done" takes the receipt.
func TestEffectReturnedUnsavedIsInDoubt(t *testing.T) {
	processStores(t, func(t *testing.T, open func(t *testing.T) (store.Store, []string)) {
		r, log := crashedCharge(t, open, "after", nil)
		steps, err := drain(r.Run(context.Background(), "m1"))
		require.NoError(t, err)
		call := steps[len(steps)-1].Suspensions[0]
		_, ok := instance.InDoubtOf(call.Metadata)
		require.True(t, ok, "an in-doubt suspension: %s", call.Metadata)
		decision := instance.InDoubtDecision{Decision: "done", Result: []byte(`{"id":"r-40"}`)}
		require.Equal(t, `result: {"id":"r-40"}`, finalText(t, r, machine.ResumeInput{SuspendID: call.SuspendID, Payload: decision}))
		require.Equal(t, 1, charges(t, log))
	})
}

// A run that ends after an effect returned and before the save that
// would journal it done (here its context is cancelled) journals it done
// as it ends: the call runs again on the next run, and the effect does
// not. On every store.
func TestEffectEndedWithoutSave(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		if _, ok := s.(store.EffectJournal); !ok {
			t.Skip("no effect journal")
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		log := filepath.Join(t.TempDir(), "charges.log")
		c, err := effectCharter(log, func(where string) {
			if where == "after" {
				cancel()
			}
		}, nil)
		require.NoError(t, err)
		r, err := durable.New(durable.Config{Store: s, Charter: c})
		require.NoError(t, err)
		_, err = r.Create(context.Background(), "m1", "desk", nil)
		require.NoError(t, err)
		_, err = drain(r.Run(ctx, "m1", machine.UserText("pay 40")))
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, 1, charges(t, log))

		c, err = effectCharter(log, nil, nil)
		require.NoError(t, err)
		r, err = durable.New(durable.Config{Store: s, Charter: c})
		require.NoError(t, err)
		require.Equal(t, `result: {"id":"r-40"}`, finalText(t, r))
		require.Equal(t, 1, charges(t, log))
	})
}

// A process dies between the charge and its journal's done: the next
// process finds the charge in doubt and does not run it blindly; a
// person's decision settles it — retry runs it again, done takes the
// given result, fail gives the call up.
func TestEffectInDoubt(t *testing.T) {
	processStores(t, func(t *testing.T, open func(t *testing.T) (store.Store, []string)) {
		testEffectInDoubt(t, open)
	})
}

func testEffectInDoubt(t *testing.T, open func(t *testing.T) (store.Store, []string)) {
	for _, tc := range []struct {
		decision instance.InDoubtDecision
		answer   string
		charges  int
	}{
		{instance.InDoubtDecision{Decision: "retry"}, `result: {"id":"r-40"}`, 2},
		{instance.InDoubtDecision{Decision: "done", Result: []byte(`{"id":"r-from-the-bank"}`)}, `result: {"id":"r-from-the-bank"}`, 1},
		{instance.InDoubtDecision{Decision: "fail", Error: "the bank says no"}, "result: effect charge failed: the bank says no", 1},
	} {
		t.Run(tc.decision.Decision, func(t *testing.T) {
			r, log := crashedCharge(t, open, "in", nil)
			ctx := context.Background()
			steps, err := drain(r.Run(ctx, "m1"))
			require.NoError(t, err)
			last := steps[len(steps)-1]
			require.True(t, last.NeedsResume())
			call := last.Suspensions[0]
			d, ok := instance.InDoubtOf(call.Metadata)
			require.True(t, ok, "an in-doubt suspension: %s", call.Metadata)
			require.Equal(t, "charge", d.Effect)
			require.Equal(t, 1, charges(t, log), "not run blindly")

			// A decision that does not fit is refused; the call waits on.
			_, err = runSteps(r.Resume(ctx, machine.ResumeInput{SuspendID: call.SuspendID, Payload: map[string]any{"decision": "maybe"}}))
			var pe *instance.PayloadError
			require.ErrorAs(t, err, &pe)

			require.Equal(t, tc.answer, finalText(t, r, machine.ResumeInput{SuspendID: call.SuspendID, Payload: tc.decision, By: "ops"}))
			require.Equal(t, tc.charges, charges(t, log))
		})
	}
}

// A reconcile hook settles an effect in doubt: found, its result is the
// call's and the charge is not made again; not found, the charge runs;
// a hook that panics cannot tell, and a person decides.
func TestEffectReconcile(t *testing.T) {
	processStores(t, testEffectReconcile)
}

func testEffectReconcile(t *testing.T, open func(t *testing.T) (store.Store, []string)) {
	found := func(_ context.Context, key string) (receipt, bool, error) {
		return receipt{ID: "r-found:" + strings.TrimPrefix(key, strings.Split(key, "/")[0])}, true, nil
	}
	r, log := crashedCharge(t, open, "in", found)
	require.Equal(t, `result: {"id":"r-found:/t1/charge"}`, finalText(t, r))
	require.Equal(t, 1, charges(t, log))

	r, log = crashedCharge(t, open, "in", func(context.Context, string) (receipt, bool, error) { return receipt{}, false, nil })
	require.Equal(t, `result: {"id":"r-40"}`, finalText(t, r))
	require.Equal(t, 2, charges(t, log))

	r, log = crashedCharge(t, open, "in", func(context.Context, string) (receipt, bool, error) { panic("the bank's API is down") })
	steps, err := drain(r.Run(context.Background(), "m1"))
	require.NoError(t, err)
	d, ok := instance.InDoubtOf(steps[len(steps)-1].Suspensions[0].Metadata)
	require.True(t, ok)
	require.Contains(t, d.Reconcile, "the bank's API is down")
	require.Equal(t, 1, charges(t, log))
}

// On every store, a journaled effect runs once and its entry ends done; a
// second effect of the same name in one call is refused.
func TestEffectJournaled(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		if _, ok := s.(store.EffectJournal); !ok {
			t.Skip("no effect journal")
		}
		log := filepath.Join(t.TempDir(), "charges.log")
		c, err := effectCharter(log, nil, nil)
		require.NoError(t, err)
		r, err := durable.New(durable.Config{Store: s, Charter: c})
		require.NoError(t, err)
		_, err = r.Create(context.Background(), "m1", "desk", nil)
		require.NoError(t, err)
		require.Equal(t, `result: {"id":"r-40"}`, finalText(t, r, machine.UserText("pay 40")))
		require.Equal(t, 1, charges(t, log))
		m, _, err := r.Load(context.Background(), "m1")
		require.NoError(t, err)
		e, created, err := s.(store.EffectJournal).BeginEffect(context.Background(), store.Effect{Key: m.Root().ID + "/t1/charge", MachineID: "m1"})
		require.NoError(t, err)
		require.False(t, created)
		require.Equal(t, store.EffectDone, e.Status)
		require.JSONEq(t, `{"id":"r-40"}`, string(e.Result))
	})
}

// writeCounter counts the writes a runner makes to its store: saves and
// effect-journal writes (it hides the store's other capabilities, which
// the runner does without).
type writeCounter struct {
	store.Store
	j                   store.EffectJournal
	saves, begins, ends int
}

func (w *writeCounter) Save(ctx context.Context, sv store.Save) (int64, error) {
	w.saves++
	return w.Store.Save(ctx, sv)
}

func (w *writeCounter) BeginEffect(ctx context.Context, e store.Effect) (store.Effect, bool, error) {
	w.begins++
	return w.j.BeginEffect(ctx, e)
}

func (w *writeCounter) EndEffect(ctx context.Context, key string, status store.EffectStatus, result []byte) error {
	w.ends++
	return w.j.EndEffect(ctx, key, status, result)
}

func (w *writeCounter) ForgetEffect(ctx context.Context, key string) error {
	return w.j.ForgetEffect(ctx, key)
}

// A journaled effect costs one durable write beside the run's saves (its
// start); its done rides on the save of its call's result.
func TestEffectOneWrite(t *testing.T) {
	s := memstore.New()
	w := &writeCounter{Store: s, j: s}
	c, err := effectCharter(filepath.Join(t.TempDir(), "charges.log"), nil, nil)
	require.NoError(t, err)
	r, err := durable.New(durable.Config{Store: w, Charter: c})
	require.NoError(t, err)
	_, err = r.Create(context.Background(), "m1", "desk", nil)
	require.NoError(t, err)
	require.Equal(t, `result: {"id":"r-40"}`, finalText(t, r, machine.UserText("pay 40")))
	require.Equal(t, 1, w.begins, "writes of the effect's start")
	require.Equal(t, 0, w.ends, "writes of the effect's end")
	require.Equal(t, 4, w.saves, "the create, the reply's checkpoint, the tool round, the final answer")
	m, _, err := r.Load(context.Background(), "m1")
	require.NoError(t, err)
	e, _, err := s.BeginEffect(context.Background(), store.Effect{Key: m.Root().ID + "/t1/charge", MachineID: "m1"})
	require.NoError(t, err)
	require.Equal(t, store.EffectDone, e.Status)
}
