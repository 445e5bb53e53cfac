// Package durabletest is a crash kit for the tests of a charter's own
// tools: it proves them resume-safe by killing the process that runs them.
//
// [Check] runs a conversation with the charter in a child OS process (the
// test binary, run again for this one test) on a store both processes
// reach — a SQLite file, a PostgreSQL schema — once to its end, recording
// every crash point it passes: an effect's start journaled before its
// function runs (node.Effect), a tx effect's function returned before its
// transaction commits (node.EffectTx), and each save of the machine,
// before, during and after it. Then, once per crash point, it runs the
// conversation on a fresh store in a new child, SIGKILLs the child there,
// restarts from the store in the test's own process (Runner.Recover, then
// the inputs that the store does not hold yet, in-doubt effects settled by
// their reconcile hooks or by [Scenario.Decide]) and compares the outcome
// with the uncrashed run's. It reports each effect the outside world saw
// run more or fewer times ([Scenario.World]), each input lost or applied
// twice, each call left pending, and each divergence of the transcript.
//
// A test calls it as any other check:
//
//	func TestPayIsResumeSafe(t *testing.T) {
//		durabletest.Run(t, durabletest.Scenario{
//			Charter:  func(env durabletest.Env) (*machine.Charter, error) { return myCharter(env.Dir) },
//			Store:    durabletest.SQLite,
//			Root:     "desk",
//			Messages: []string{"pay 40"},
//			World:    func(env durabletest.Env) (map[string]int, error) { return countCharges(env.Dir) },
//		})
//	}
//
// The test's process is the parent: in the child, Check runs the
// conversation and exits the process, so Check must be reached the same
// way in both (call it from the test, or a subtest of it, before anything
// else that must not run twice). The child's runner reaches the store
// through a wrapper that sees its saves and effects (and hides its other
// capabilities, which the runner does without); the restart uses the
// store as it is. Time does not move: deadlines are not crossed.
package durabletest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/sqlite"
)

// The environment a child process is told what to do by.
const (
	envTest = "MARKOV_DURABLETEST"      // the test whose scenario the child runs
	envDir  = "MARKOV_DURABLETEST_DIR"  // Env.Dir
	envName = "MARKOV_DURABLETEST_NAME" // Env.Name
	envStop = "MARKOV_DURABLETEST_STOP" // the point to stop at ("": none)
)

// MachineID is the ID of the machine a scenario's conversation runs on.
const MachineID = "durabletest"

// PointKind is a kind of crash point.
type PointKind string

// The kinds of crash point.
const (
	// EffectStarted: an effect's start is journaled and its function has
	// not run. The restart finds it in doubt.
	EffectStarted PointKind = "effect-started"
	// EffectTx: a tx effect's function (node.EffectTx) returned, and its
	// transaction has not committed. The restart finds nothing of it,
	// and the effect runs.
	EffectTx PointKind = "effect-tx"
	// BeforeSave: a save is about to be written. What ran since the last
	// one — a model reply, tools, effects that returned — is in the
	// process only.
	BeforeSave PointKind = "before-save"
	// DuringSave: the kill is sent as the save starts, and lands before,
	// inside or after its commit.
	DuringSave PointKind = "during-save"
	// AfterSave: a save is committed.
	AfterSave PointKind = "after-save"
)

// Point is a crash point: the N-th point of its kind in the uncrashed
// run, from 1.
type Point struct {
	Kind PointKind
	N    int
}

// String returns "KIND N".
func (p Point) String() string { return fmt.Sprintf("%s %d", p.Kind, p.N) }

// Env is where one run of a scenario lives, the same in the child and in
// the restart.
type Env struct {
	// Dir is a directory of the run's own: the SQLite file, the outside
	// world's files.
	Dir string
	// Name is unique to the run, of lowercase letters, digits and
	// underscores: a PostgreSQL schema's name, for one.
	Name string
}

// Scenario is a conversation with a charter, and how to judge it.
type Scenario struct {
	// Charter builds the charter; its tools act on the world env.Dir
	// holds (or env.Name names). Required.
	Charter func(env Env) (*machine.Charter, error)
	// Store opens the run's store, the same one in the child and the
	// parent (see [SQLite]); the parent's is closed when t ends. Required.
	// It must be an store.EffectJournal.
	Store func(t testing.TB, env Env) store.Store
	// Root is the node the machine starts in. Required.
	Root string
	// Messages are the user's messages, each sent once the run of the one
	// before ended. Required.
	Messages []string
	// World counts the effects as the outside world saw them, by name,
	// after a run (how many lines a log holds, rows a table). Nil: the
	// world is not compared.
	World func(env Env) (map[string]int, error)
	// Decide settles an effect in doubt that its reconcile hook could not
	// (it has none, or it cannot tell) on a restart. Nil: such an effect
	// is reported.
	Decide func(env Env, d instance.InDoubt) (instance.InDoubtDecision, error)
	// Points selects the crash points tried (nil: all).
	Points func(Point) bool
	// Timeout bounds each child process and each restart (one minute if
	// zero).
	Timeout time.Duration
}

// Problem is something a crash broke.
type Problem struct {
	// Point is where the child was killed.
	Point Point
	// What is what went wrong, for a person.
	What string
}

// String returns "at POINT: WHAT".
func (p Problem) String() string { return fmt.Sprintf("at %s: %s", p.Point, p.What) }

// Report is what Check found.
type Report struct {
	// Points are the crash points tried, in the order the uncrashed run
	// passed them.
	Points []Point
	// Problems are the crashes whose outcome differs from the uncrashed
	// run's.
	Problems []Problem
}

// Run is Check, failing t with each problem and each error.
func Run(t *testing.T, sc Scenario) Report {
	t.Helper()
	rep, err := Check(t, sc)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Problems {
		t.Error(p)
	}
	return rep
}

// Check runs the scenario uncrashed, then crashed at each of its crash
// points, and reports what the crashes broke (see the package's doc). An
// error is a scenario that cannot run: a missing field, a child that
// fails without a crash. In the child process, Check runs its part and
// exits the process.
func Check(t *testing.T, sc Scenario) (Report, error) {
	t.Helper()
	if sc.Charter == nil || sc.Store == nil || sc.Root == "" || len(sc.Messages) == 0 {
		return Report{}, fmt.Errorf("%w: Charter, Store, Root and Messages are required", ErrScenario)
	}
	if sc.Timeout <= 0 {
		sc.Timeout = time.Minute
	}
	if os.Getenv(envTest) == t.Name() {
		os.Exit(child(t, sc))
	}
	base := newEnv(t, "base")
	st := sc.Store(t, base)
	lines, err := runChild(t, sc, base, "")
	if err != nil {
		return Report{}, fmt.Errorf("the uncrashed run: %w", err)
	}
	want, err := outcomeOf(t, sc, base, st)
	if err != nil {
		return Report{}, fmt.Errorf("the uncrashed run: %w", err)
	}
	var rep Report
	for _, l := range lines {
		p, ok := parsePoint(l)
		if ok && (sc.Points == nil || sc.Points(p)) {
			rep.Points = append(rep.Points, p)
		}
	}
	for i, p := range rep.Points {
		for _, what := range crash(t, sc, newEnv(t, fmt.Sprintf("p%d", i)), p, want) {
			rep.Problems = append(rep.Problems, Problem{Point: p, What: what})
		}
	}
	return rep, nil
}

// SQLite is a Scenario.Store: the SQLite file store.db in env.Dir.
func SQLite(t testing.TB, env Env) store.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(env.Dir, "store.db")})
	if err != nil {
		t.Fatalf("durabletest: open SQLite: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// newEnv returns a fresh Env named after what.
func newEnv(t *testing.T, what string) Env {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return Env{Dir: t.TempDir(), Name: what + "_" + hex.EncodeToString(b)}
}

// crash runs the scenario in a child killed at p on env, restarts it and
// returns how the outcome differs from want.
func crash(t *testing.T, sc Scenario, env Env, p Point, want outcome) []string {
	st := sc.Store(t, env)
	if _, err := runChild(t, sc, env, p.String()); err != nil {
		return []string{err.Error()}
	}
	c, err := sc.Charter(env)
	if err != nil {
		return []string{"charter: " + err.Error()}
	}
	r, err := durable.New(durable.Config{Store: st, Charter: c})
	if err != nil {
		return []string{"runner: " + err.Error()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), sc.Timeout)
	defer cancel()
	if err := converse(ctx, r, sc, env, true); err != nil {
		return []string{"restart: " + err.Error()}
	}
	got, err := outcomeOf(t, sc, env, st)
	if err != nil {
		return []string{err.Error()}
	}
	return got.diff(want)
}

// runChild runs the scenario in a child process on env, stopped at stop
// ("": run to the end), and returns the lines it said. A child told to
// stop is killed once it says it stopped.
func runChild(t *testing.T, sc Scenario, env Env, stop string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), sc.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run="+runPattern(t.Name()), "-test.count=1")
	cmd.Env = append(os.Environ(), envTest+"="+t.Name(), envDir+"="+env.Dir, envName+"="+env.Name, envStop+"="+stop)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	var lines []string
	sc2 := bufio.NewScanner(out)
	for sc2.Scan() {
		l, ok := strings.CutPrefix(sc2.Text(), linePrefix)
		if !ok {
			continue
		}
		lines = append(lines, l)
		if l == "stopped" {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return lines, nil
		}
	}
	err = cmd.Wait()
	switch {
	case stop != "":
		return lines, fmt.Errorf("the child did not reach %s (%v): %s", stop, err, tail(stderr.String()))
	case err != nil || !slices.Contains(lines, "finished"):
		return lines, fmt.Errorf("the child failed (%v): %s%s", err, tail(stderr.String()), strings.Join(lines, "; "))
	}
	return lines, nil
}

// tail is the end of a child's stderr, for an error.
func tail(s string) string {
	if len(s) > 2000 {
		s = "…" + s[len(s)-2000:]
	}
	return s
}

// runPattern is the -test.run pattern that selects the test named name
// (a subtest's name holds its parents', slash-separated) and nothing else.
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// linePrefix starts each line a child says to its parent.
const linePrefix = "durabletest: "

// say tells the parent line.
func say(line string) { fmt.Println(linePrefix + line) }

// parsePoint parses a "point KIND N" line.
func parsePoint(line string) (Point, bool) {
	var p Point
	var kind string
	if _, err := fmt.Sscanf(line, "point %s %d", &kind, &p.N); err != nil {
		return Point{}, false
	}
	p.Kind = PointKind(kind)
	return p, true
}

// child is the child process's part: the conversation on the store the
// parent named, through a watch that says each point and stops at the one
// asked for. It returns the process's exit code.
func child(t *testing.T, sc Scenario) int {
	env := Env{Dir: os.Getenv(envDir), Name: os.Getenv(envName)}
	st := sc.Store(t, env)
	j, ok := st.(store.EffectJournal)
	if !ok {
		say("error: the store is not a store.EffectJournal")
		return 2
	}
	c, err := sc.Charter(env)
	if err != nil {
		say("error: charter: " + err.Error())
		return 2
	}
	r, err := durable.New(durable.Config{Store: &watch{Store: st, j: j, stop: os.Getenv(envStop), seen: map[PointKind]int{}}, Charter: c})
	if err != nil {
		say("error: runner: " + err.Error())
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), sc.Timeout)
	defer cancel()
	if err := converse(ctx, r, sc, env, false); err != nil {
		say("error: " + err.Error())
		return 1
	}
	say("finished")
	return 0
}

// watch is a child's store: it says each crash point it passes, and stops
// the process at the one named stop (it says "stopped" and waits for its
// SIGKILL).
type watch struct {
	store.Store
	j    store.EffectJournal
	stop string

	mu   sync.Mutex
	seen map[PointKind]int
}

// pass says the next point of kind and reports whether it is the stop.
func (w *watch) pass(kind PointKind) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen[kind]++
	p := Point{Kind: kind, N: w.seen[kind]}
	say("point " + p.String())
	if p.String() != w.stop {
		return false
	}
	say("stopped")
	return true
}

// Save implements store.Store, passing the save's points.
func (w *watch) Save(ctx context.Context, sv store.Save) (int64, error) {
	if w.pass(BeforeSave) {
		select {}
	}
	during := w.pass(DuringSave)
	rev, err := w.Store.Save(ctx, sv)
	if during || w.pass(AfterSave) {
		select {}
	}
	return rev, err
}

// BeginEffect implements store.EffectJournal, passing EffectStarted when
// it creates the entry.
func (w *watch) BeginEffect(ctx context.Context, e store.Effect) (store.Effect, bool, error) {
	got, created, err := w.j.BeginEffect(ctx, e)
	if created && w.pass(EffectStarted) {
		select {}
	}
	return got, created, err
}

// RunEffectTx implements store.TxEffectJournal with the store's, passing
// EffectTx once fn returned, before the commit; a store without one
// refuses, as the runner would (instance.ErrEffectTx).
func (w *watch) RunEffectTx(ctx context.Context, e store.Effect, fn func(ctx context.Context, tx any) ([]byte, error)) (store.Effect, bool, error) {
	tj, ok := w.j.(store.TxEffectJournal)
	if !ok {
		return store.Effect{}, false, fmt.Errorf("%w: effect %s: the store (%T) runs no transactions", instance.ErrEffectTx, e.Name, w.Store)
	}
	return tj.RunEffectTx(ctx, e, func(ctx context.Context, tx any) ([]byte, error) {
		out, err := fn(ctx, tx)
		if err == nil && w.pass(EffectTx) {
			select {}
		}
		return out, err
	})
}

// EndEffect implements store.EffectJournal.
func (w *watch) EndEffect(ctx context.Context, key string, status store.EffectStatus, result []byte) error {
	return w.j.EndEffect(ctx, key, status, result)
}

// ForgetEffect implements store.EffectJournal.
func (w *watch) ForgetEffect(ctx context.Context, key string) error {
	return w.j.ForgetEffect(ctx, key)
}

// converse runs the scenario's conversation on r: the machine created if
// the store does not hold it, the messages it does not hold yet sent one
// by one, effects in doubt settled after each run. A restart first
// continues a run cut short (Runner.Recover).
func converse(ctx context.Context, r *durable.Runner, sc Scenario, env Env, restart bool) error {
	if restart {
		if _, err := r.Recover(ctx); err != nil {
			return err
		}
	}
	m, _, err := r.Load(ctx, MachineID)
	if errors.Is(err, store.ErrNotFound) {
		if _, err := r.Create(ctx, MachineID, sc.Root, nil); err != nil {
			return err
		}
		m, _, err = r.Load(ctx, MachineID)
	}
	if err != nil {
		return err
	}
	if err := settle(ctx, r, sc, env); err != nil {
		return err
	}
	sent := len(userTexts(m.History()))
	if sent > len(sc.Messages) {
		return fmt.Errorf("the machine holds %d user messages, the conversation %d", sent, len(sc.Messages))
	}
	for _, msg := range sc.Messages[sent:] {
		if err := drain(r.Run(ctx, MachineID, machine.UserText(msg))); err != nil {
			return err
		}
		if err := settle(ctx, r, sc, env); err != nil {
			return err
		}
	}
	return nil
}

// settle decides each effect of the machine in doubt with sc.Decide, and
// runs the machine on with the decision, until none is.
func settle(ctx context.Context, r *durable.Runner, sc Scenario, env Env) error {
	for {
		m, _, err := r.Load(ctx, MachineID)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(m.Pending(), func(c instance.SuspendedCall) bool { _, ok := instance.InDoubtOf(c.Metadata); return ok })
		if i < 0 {
			return nil
		}
		call := m.Pending()[i]
		d, _ := instance.InDoubtOf(call.Metadata)
		if sc.Decide == nil {
			return fmt.Errorf("%w: effect %s (%s)", ErrInDoubt, d.Effect, call.Reason)
		}
		dec, err := sc.Decide(env, d)
		if err != nil {
			return fmt.Errorf("decide effect %s: %w", d.Effect, err)
		}
		run, err := r.Resume(ctx, machine.ResumeInput{SuspendID: call.SuspendID, Payload: dec, By: "durabletest"})
		if err != nil {
			return err
		}
		if err := drain(run.Steps()); err != nil {
			return err
		}
	}
}

// drain runs steps to their end, returning the first error.
func drain(steps func(func(machine.Step, error) bool)) error {
	for _, err := range steps {
		if err != nil {
			return err
		}
	}
	return nil
}

// outcome is what a run of the scenario left.
type outcome struct {
	users      []string // the user's messages, as the machine holds them
	transcript []string // each message, with what a crash must not change
	pending    []string // the calls left pending, by reason
	world      map[string]int
}

// outcomeOf reads the outcome of the run on env from its store.
func outcomeOf(t *testing.T, sc Scenario, env Env, st store.Store) (outcome, error) {
	c, err := sc.Charter(env)
	if err != nil {
		return outcome{}, err
	}
	r, err := durable.New(durable.Config{Store: st, Charter: c})
	if err != nil {
		return outcome{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), sc.Timeout)
	defer cancel()
	m, _, err := r.Load(ctx, MachineID)
	if err != nil {
		return outcome{}, err
	}
	o := outcome{users: userTexts(m.History())}
	for _, msg := range m.History() {
		o.transcript = append(o.transcript, describe(msg))
	}
	for _, c := range m.Pending() {
		o.pending = append(o.pending, c.Name+": "+c.Reason)
	}
	if sc.World != nil {
		if o.world, err = sc.World(env); err != nil {
			return outcome{}, fmt.Errorf("world: %w", err)
		}
	}
	return o, nil
}

// userTexts are the texts of the user's messages in history.
func userTexts(history []message.Message) []string {
	var out []string
	for _, m := range history {
		if m.Role == message.User && slices.ContainsFunc(m.Parts, func(p message.Part) bool { return p.Kind == message.KindText }) {
			out = append(out, m.Text())
		}
	}
	return out
}

// describe is msg without what differs between runs (suspend IDs).
func describe(msg message.Message) string {
	var b strings.Builder
	b.WriteString(string(msg.Role))
	for _, p := range msg.Parts {
		fmt.Fprintf(&b, " [%s %s %q %s %v]", p.Kind, p.Name, p.Text, p.Data, p.IsError)
	}
	return b.String()
}

// diff says how o differs from want, the uncrashed run's outcome.
func (o outcome) diff(want outcome) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(union(o.world, want.world))) {
		if got, w := o.world[name], want.world[name]; got != w {
			out = append(out, fmt.Sprintf("effect %s ran %d times, %d in the uncrashed run", name, got, w))
		}
	}
	if !slices.Equal(o.users, want.users) {
		out = append(out, fmt.Sprintf("the user's messages are %q, %q in the uncrashed run (an input lost or applied twice)", o.users, want.users))
	}
	for _, p := range o.pending {
		if !slices.Contains(want.pending, p) {
			out = append(out, "a call is left pending: "+p)
		}
	}
	if !slices.Equal(o.transcript, want.transcript) {
		i := 0
		for i < min(len(o.transcript), len(want.transcript)) && o.transcript[i] == want.transcript[i] {
			i++
		}
		got, w := "(none)", "(none)"
		if i < len(o.transcript) {
			got = o.transcript[i]
		}
		if i < len(want.transcript) {
			w = want.transcript[i]
		}
		out = append(out, fmt.Sprintf("the transcript diverges at message %d: %s, uncrashed %s", i, got, w))
	}
	return out
}

// union is the keys of a and b, each with a count of 1.
func union(a, b map[string]int) map[string]int {
	out := map[string]int{}
	for k := range a {
		out[k] = 1
	}
	for k := range b {
		out[k] = 1
	}
	return out
}
