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
// twice, each call left pending, and each divergence of the transcript
// or of the machine's state (each instance's node, state and packs).
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
// store as it is. Crash points are tried [Scenario.Parallel] at a time,
// each on a store of its own.
//
// # Turns
//
// A conversation is more than messages: [Scenario.Turns] holds a
// manager's decision on a pending call ([Resume]), a command ([Invoke]),
// the test's own action through the runner, such as a signed HTTP resume
// ([Do]), and time passing ([Advance]). The child notes each turn it
// begins in Env.Dir with the machine's revision, and each it ends; the
// restart sends the turn it was killed in again only when the machine's
// revision has not moved since (the store does not hold its input), then
// the turns after it.
//
// # Time
//
// Deadlines are crossed on the scenario's own clock, Env.Now, which the
// charter reads (machine.CharterConfig.Clock): it starts at
// [Scenario.Start] and moves only by Advance turns, each followed by a
// sweep (durable.Runner.Sweep) that resolves the suspensions due by their
// on-timeout action, so the sweep's saves are crash points like any
// other. A child and the restart are separate processes, and a
// testing/synctest bubble does not span processes: each process keeps its
// own clock and replays the Advance turns the conversation had begun, so
// both read the same time at the same turn — the deterministic jump a
// bubble gives, without one. A sweep killed before its save left its
// claim on the suspension; the restart sweeps again once that claim
// lapsed (the clock moved durable.DefaultLease further), as a sweeper
// would after a crash. Tests that move time within one process — the
// sweeper's ticks, a charter on time.Now — use testing/synctest instead
// (examples/deadlines' TestTheDeadlineInABubble).
package durabletest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/testkit"
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

// EachSaveOnce is a Scenario.Points for a long conversation: every
// effect's start, and each save once, at a kind taken in turn (the first
// save before it, the second during it, the third after it, …). A third
// of the save points, every save and every kind among them.
func EachSaveOnce(p Point) bool {
	switch p.Kind {
	case BeforeSave:
		return p.N%3 == 1
	case DuringSave:
		return p.N%3 == 2
	case AfterSave:
		return p.N%3 == 0
	}
	return true
}

// Env is where one run of a scenario lives, the same in the child and in
// the restart.
type Env struct {
	// Dir is a directory of the run's own: the SQLite file, the outside
	// world's files.
	Dir string
	// Name is unique to the run, of lowercase letters, digits and
	// underscores: a PostgreSQL schema's name, for one.
	Name string
	// Now is the scenario's clock: Scenario.Start, moved forward by the
	// Advance turns run so far. A charter whose deadlines the scenario
	// crosses reads it (machine.CharterConfig.Clock: env.Now).
	Now func() time.Time
}

// Scenario is a conversation with a charter, and how to judge it.
type Scenario struct {
	// Charter builds the charter; its tools act on the world env.Dir
	// holds (or env.Name names). Required.
	Charter func(env Env) (*machine.Charter, error)
	// Store opens the run's store, the same one in the child and the
	// parent (see [SQLite]); the parent's is closed when t ends. Required.
	// The parent calls it from several goroutines at once (Parallel).
	// It must be an store.EffectJournal.
	Store func(t testing.TB, env Env) store.Store
	// Root is the node the machine starts in. Required.
	Root string
	// Messages are the user's messages, each sent once the run of the one
	// before ended: the first turns of the conversation, [Say] turns.
	Messages []string
	// Turns are the conversation's turns after its Messages: messages,
	// decisions, commands, time passing ([Say], [Resume], [Invoke],
	// [Advance], [Do]). Messages and Turns must not both be empty. The
	// conversation notes in Env.Dir each turn it begins, with the
	// machine's revision then, and each it ends: a restart sends again the
	// turn it was killed in only if the machine's revision has not moved
	// since it began (the store does not hold its input).
	Turns []Turn
	// Start is where the scenario's clock (Env.Now) starts, in every
	// process (DefaultStart if zero).
	Start time.Time
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
	// Parallel is how many crash points are tried at once, each in its
	// own child process and store (runtime.GOMAXPROCS if zero).
	Parallel int
}

// turns are the scenario's Messages as Say turns, then its Turns.
func (sc Scenario) turns() []Turn {
	out := make([]Turn, 0, len(sc.Messages)+len(sc.Turns))
	for _, m := range sc.Messages {
		out = append(out, Say(m))
	}
	return append(out, sc.Turns...)
}

// clock is a new clock for one process of the scenario, at its start,
// and env with it as its Now. It moves only by the Advance turns the
// process runs or replays.
func (sc Scenario) clock(env Env) (*testkit.Clock, Env) {
	start := sc.Start
	if start.IsZero() {
		start = DefaultStart
	}
	c := testkit.NewClock(start)
	env.Now = c.Now
	return c, env
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
	if sc.Charter == nil || sc.Store == nil || sc.Root == "" || len(sc.Messages)+len(sc.Turns) == 0 {
		return Report{}, fmt.Errorf("%w: Charter, Store, Root and Messages or Turns are required", ErrScenario)
	}
	if sc.Timeout <= 0 {
		sc.Timeout = time.Minute
	}
	if sc.Parallel <= 0 {
		sc.Parallel = runtime.GOMAXPROCS(0)
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
	found := make([][]string, len(rep.Points))
	var wg sync.WaitGroup
	sem := make(chan struct{}, sc.Parallel)
	for i, p := range rep.Points {
		env := newEnv(t, fmt.Sprintf("p%d", i))
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			found[i] = crash(t, sc, env, p, want)
		})
	}
	wg.Wait()
	for i, p := range rep.Points {
		for _, what := range found[i] {
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
	clk, env := sc.clock(env)
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
	if err := converse(ctx, r, sc, env, clk, true); err != nil {
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
	clk, env := sc.clock(Env{Dir: os.Getenv(envDir), Name: os.Getenv(envName)})
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
	claimer, _ := st.(store.ExpiryClaimer)
	w := &watch{Store: st, j: j, claimer: claimer, stop: os.Getenv(envStop), seen: map[PointKind]int{}}
	r, err := durable.New(durable.Config{Store: w, Charter: c})
	if err != nil {
		say("error: runner: " + err.Error())
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), sc.Timeout)
	defer cancel()
	if err := converse(ctx, r, sc, env, clk, false); err != nil {
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
	j       store.EffectJournal
	claimer store.ExpiryClaimer // nil: the store sweeps nothing
	stop    string

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

// ClaimExpired implements store.ExpiryClaimer, for Advance's sweeps.
func (w *watch) ClaimExpired(ctx context.Context, now time.Time, limit int, lease time.Duration) ([]store.Suspension, error) {
	if w.claimer == nil {
		return nil, fmt.Errorf("%w: the store is not a store.ExpiryClaimer", ErrScenario)
	}
	return w.claimer.ClaimExpired(ctx, now, limit, lease)
}

// EndEffect implements store.EffectJournal.
func (w *watch) EndEffect(ctx context.Context, key string, status store.EffectStatus, result []byte) error {
	return w.j.EndEffect(ctx, key, status, result)
}

// ForgetEffect implements store.EffectJournal.
func (w *watch) ForgetEffect(ctx context.Context, key string) error {
	return w.j.ForgetEffect(ctx, key)
}

// outcome is what a run of the scenario left.
type outcome struct {
	users      []string // the user's messages, as the machine holds them
	transcript []string // each message, with what a crash must not change
	pending    []string // the calls left pending, by reason
	tree       []string // each instance's node and state, packs, in tree order
	world      map[string]int
}

// outcomeOf reads the outcome of the run on env from its store.
func outcomeOf(t *testing.T, sc Scenario, env Env, st store.Store) (outcome, error) {
	_, env = sc.clock(env)
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
	names := instanceNames(m)
	for _, msg := range m.History() {
		o.transcript = append(o.transcript, names.Replace(describe(msg)))
	}
	for _, c := range m.Pending() {
		o.pending = append(o.pending, names.Replace(c.Name+": "+c.Reason))
	}
	for in := range m.Root().Walk() {
		state, err := json.Marshal(in.State)
		if err != nil {
			return outcome{}, err
		}
		packs, err := json.Marshal(in.Packs)
		if err != nil {
			return outcome{}, err
		}
		o.tree = append(o.tree, names.Replace(fmt.Sprintf("%s %s %s", in.Node, state, packs)))
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

// instanceNames replaces each instance ID of m with the instance's place
// in the order IDs first appear (the history's sources, then the tree):
// IDs are random (machine.CharterConfig.NewID), and differ between runs,
// where a spawn's result names them.
func instanceNames(m *machine.Machine) *strings.Replacer {
	var ids []string
	add := func(id string) {
		if id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	for _, msg := range m.History() {
		add(msg.Source.InstanceID)
		add(msg.Source.To)
	}
	for in := range m.Root().Walk() {
		add(in.ID)
	}
	var pairs []string
	for i, id := range ids {
		pairs = append(pairs, id, fmt.Sprintf("instance#%d", i+1))
	}
	return strings.NewReplacer(pairs...)
}

// describe is msg without what differs between runs (suspend IDs,
// instance IDs but the place of each).
func describe(msg message.Message) string {
	var b strings.Builder
	b.WriteString(string(msg.Role))
	fmt.Fprintf(&b, " from %s %s to %s", msg.Source.Node, msg.Source.InstanceID, msg.Source.To)
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
	if !slices.Equal(o.tree, want.tree) {
		out = append(out, fmt.Sprintf("the machine's state is %q, %q in the uncrashed run", o.tree, want.tree))
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
