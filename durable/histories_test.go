package durable_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/serialize"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/memstore"
	"github.com/markov-agents/markov/store/sqlite/sqlitetest"
)

// errFail is the model failure a user message "fail" asks for.
var errFail = errors.New("model failed as asked")

// userModel answers a user message with one call to work, the work's
// result with a final answer, and a user message "fail" with errFail. It
// records the user texts of every request's transcript.
type userModel struct {
	mu   sync.Mutex
	seen [][]string
}

func (u *userModel) model() llm.Model {
	return scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		var users []string
		for _, m := range req.Messages {
			if m.Role == message.User {
				users = append(users, m.Text())
			}
		}
		last := req.Messages[len(req.Messages)-1]
		u.mu.Lock()
		u.seen = append(u.seen, users)
		u.mu.Unlock()
		switch {
		case last.Role == message.User && last.Text() == "fail":
			return scripted.Reply{}, errFail
		case last.Role == message.User:
			return scripted.Reply{Calls: []scripted.Call{{ID: fmt.Sprintf("t%d", len(req.Messages)), Name: "work", Input: empty{}}}}, nil
		}
		return scripted.Reply{Text: "ok"}, nil
	})
}

// lastSeen returns the user texts of the last request's transcript.
func (u *userModel) lastSeen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.seen[len(u.seen)-1]
}

// sqliteHandles opens the SQLite file path twice, as two processes
// would: two connection pools, and no lock in common.
func sqliteHandles(t *testing.T) (store.Store, store.Store) { return sqlitetest.Pair(t) }

// coldHistory is machine id's history as a runner without a history
// cache loads it.
func coldHistory(t *testing.T, s store.Store, c *machine.Charter, id string) []message.Message {
	t.Helper()
	r, err := durable.New(durable.Config{Store: s, Charter: c, HistoryCache: -1})
	require.NoError(t, err)
	m, _, err := r.Load(context.Background(), id)
	require.NoError(t, err)
	return m.History()
}

// runnerPair is two runners, each on its own handle of one SQLite file,
// sharing a charter on a userModel, and machine "m" they created.
type runnerPair struct {
	h1, h2 store.Store
	um     *userModel
	c      *machine.Charter
	a, b   *durable.Runner
}

func newRunnerPair(t *testing.T) runnerPair {
	p := runnerPair{um: &userModel{}}
	p.h1, p.h2 = sqliteHandles(t)
	p.c = newCharter(t, p.um.model())
	var err error
	p.a, err = durable.New(durable.Config{Store: p.h1, Charter: p.c})
	require.NoError(t, err)
	p.b, err = durable.New(durable.Config{Store: p.h2, Charter: p.c})
	require.NoError(t, err)
	_, err = p.a.Create(context.Background(), "m", "desk", nil)
	require.NoError(t, err)
	return p
}

// Two runners on one SQLite file, like two processes, take turns running
// one machine: each run's model sees every user message so far, however
// many the other runner added since this one's last run, and the history
// each runner holds is the one a cold load decodes.
func TestHistoryCacheAcrossRunners(t *testing.T) {
	ctx := context.Background()
	p := newRunnerPair(t)
	h1, um, c, a, b := p.h1, p.um, p.c, p.a, p.b
	var want []string
	for i, r := range []*durable.Runner{a, a, b, a, b, b, a, a} {
		text := fmt.Sprint(i)
		want = append(want, text)
		_, err := drain(r.Run(ctx, "m", machine.UserText(text)))
		require.NoError(t, err, "run %d", i)
		require.Equal(t, want, um.lastSeen(), "run %d", i)
		cold := coldHistory(t, h1, c, "m")
		for _, r := range []*durable.Runner{a, b} {
			m, _, err := r.Load(ctx, "m")
			require.NoError(t, err)
			if d := cmp.Diff(cold, m.History()); d != "" {
				t.Fatalf("run %d: history from the cache differs from a cold load (-cold +cached):\n%s", i, d)
			}
		}
	}
}

// A machine deleted and created again under its ID by another runner,
// with a longer history than the one cached, is loaded whole: nothing of
// the deleted machine's history reaches the model.
func TestHistoryCacheMachineCreatedAgain(t *testing.T) {
	ctx := context.Background()
	p := newRunnerPair(t)
	h2, um, c, a, b := p.h2, p.um, p.c, p.a, p.b
	var err error
	_, err = drain(a.Run(ctx, "m", machine.UserText("old")))
	require.NoError(t, err)

	require.NoError(t, b.Delete(ctx, "m"))
	_, err = b.Create(ctx, "m", "desk", nil)
	require.NoError(t, err)
	for _, text := range []string{"new1", "new2"} {
		_, err = drain(b.Run(ctx, "m", machine.UserText(text)))
		require.NoError(t, err)
	}
	_, err = drain(a.Run(ctx, "m", machine.UserText("new3")))
	require.NoError(t, err)
	require.Equal(t, []string{"new1", "new2", "new3"}, um.lastSeen())
	m, _, err := a.Load(ctx, "m")
	require.NoError(t, err)
	require.Empty(t, cmp.Diff(coldHistory(t, h2, c, "m"), m.History()))
}

// A run that fails after adding a message it did not save leaves nothing
// of it to the next run, warm or cold.
func TestHistoryCacheAfterFailedRun(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		um := &userModel{}
		c := newCharter(t, um.model())
		r, err := durable.New(durable.Config{Store: s, Charter: c})
		require.NoError(t, err)
		_, err = r.Create(ctx, "m", "desk", nil)
		require.NoError(t, err)
		_, err = drain(r.Run(ctx, "m", machine.UserText("one")))
		require.NoError(t, err)
		_, err = drain(r.Run(ctx, "m", machine.UserText("fail")))
		require.ErrorIs(t, err, errFail)
		_, err = drain(r.Run(ctx, "m", machine.UserText("two")))
		require.NoError(t, err)
		require.Equal(t, []string{"one", "two"}, um.lastSeen())
		m, _, err := r.Load(ctx, "m")
		require.NoError(t, err)
		require.Empty(t, cmp.Diff(coldHistory(t, s, c, "m"), m.History()))
	})
}

// countingStore counts the history entries its loads return.
type countingStore struct {
	store.Store
	mu      sync.Mutex
	entries int
}

func (s *countingStore) LoadTail(ctx context.Context, id string, from int) (*store.Snapshot, error) {
	snap, err := s.Store.(store.TailLoader).LoadTail(ctx, id, from)
	if err == nil {
		s.mu.Lock()
		s.entries += len(snap.History)
		s.mu.Unlock()
	}
	return snap, err
}

func (s *countingStore) take() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.entries
	s.entries = 0
	return n
}

// atRest stores machine id at rest with size messages of history.
func atRest(t *testing.T, s store.Store, c *machine.Charter, id string, size int) {
	t.Helper()
	m, err := machine.Restore(c, &instance.Instance{ID: "root", Node: "desk", State: desk{}}, message.NewHistory(testkit.History(size)))
	require.NoError(t, err)
	tree, err := serialize.MarshalTree(m)
	require.NoError(t, err)
	sv := store.Save{MachineID: id, Tree: tree}
	for _, msg := range testkit.History(size) {
		b, err := serialize.MarshalMessage(msg)
		require.NoError(t, err)
		sv.Append = append(sv.Append, b)
	}
	_, err = s.Save(context.Background(), sv)
	require.NoError(t, err)
}

// A warm run — the runner ran the machine last — reads no history entry
// and allocates as much with 10,000 messages of history as with 100;
// after another runner's run, it reads that run's entries only.
func TestHistoryCacheWarmLoadIsFlat(t *testing.T) {
	ctx := context.Background()
	um := &userModel{}
	c := newCharter(t, um.model())
	s := &countingStore{Store: memstore.New()}
	r, err := durable.New(durable.Config{Store: s, Charter: c})
	require.NoError(t, err)
	allocs := map[int]float64{}
	for _, size := range []int{100, 10_000} {
		id := fmt.Sprint("m", size)
		atRest(t, s, c, id, size)
		_, err := drain(r.Run(ctx, id, machine.UserText("first")))
		require.NoError(t, err)
		require.Equal(t, size, s.take(), "the cold run reads the whole history")
		allocs[size] = testing.AllocsPerRun(20, func() {
			if _, err := drain(r.Run(ctx, id, machine.UserText("again"))); err != nil {
				t.Fatal(err)
			}
		})
		require.Zero(t, s.take(), "warm runs read no history entry")

		other, err := durable.New(durable.Config{Store: s, Charter: c, HistoryCache: -1})
		require.NoError(t, err)
		_, err = drain(other.Run(ctx, id, machine.UserText("elsewhere")))
		require.NoError(t, err)
		s.take()
		_, err = drain(r.Run(ctx, id, machine.UserText("back")))
		require.NoError(t, err)
		require.Equal(t, 4, s.take(), "the run after another runner's reads its 4 messages")
		require.True(t, slices.Contains(um.lastSeen(), "elsewhere"))
	}
	require.LessOrEqual(t, allocs[10_000], allocs[100]*1.1, "allocations per warm run: %v", allocs)
}

// A runner whose cache is smaller than one history loads it whole every
// time.
func TestHistoryCacheBudget(t *testing.T) {
	ctx := context.Background()
	um := &userModel{}
	c := newCharter(t, um.model())
	s := &countingStore{Store: memstore.New()}
	r, err := durable.New(durable.Config{Store: s, Charter: c, HistoryCache: 100})
	require.NoError(t, err)
	atRest(t, s, c, "m", 100)
	for i := range 3 {
		_, err := drain(r.Run(ctx, "m", machine.UserText(strings.Repeat("x", i+1))))
		require.NoError(t, err)
		require.Equal(t, 100+4*i, s.take(), "run %d", i)
	}
}
