package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store/postgres/pgtest"
)

// TestMakeDue: a run or deadline job whose scheduled time has passed is
// made available by any fleet process (makeDue), not only on River's
// leader's scheduler tick — a leader that dies keeps its term about 15 s
// — while one still to come, and another kind's, stay scheduled.
func TestMakeDue(t *testing.T) {
	st, _, _ := pgtest.Open(t)
	n, err := node.New("desk", node.Config[struct{}]{})
	require.NoError(t, err)
	charter, err := machine.NewCharter(machine.CharterConfig{Model: scripted.New(), Nodes: []*node.Node{n}})
	require.NoError(t, err)
	f, err := New(Config{Store: st, Charter: charter})
	require.NoError(t, err)
	ctx := context.Background()
	past, future := time.Now().Add(-time.Minute), time.Now().Add(time.Hour)
	insert := func(args river.JobArgs, at time.Time) int64 {
		t.Helper()
		res, err := f.client.Insert(ctx, args, &river.InsertOpts{ScheduledAt: at})
		require.NoError(t, err)
		return res.Job.ID
	}
	due := insert(runArgs{MachineID: "m1"}, past)
	dueExpire := insert(expireArgs{MachineID: "m2", SuspendID: "s2"}, past)
	later := insert(runArgs{MachineID: "m3"}, future)
	state := func(id int64) string {
		t.Helper()
		var s string
		require.NoError(t, st.Pool().QueryRow(ctx, `SELECT state FROM `+st.Schema()+`.river_job WHERE id = $1`, id).Scan(&s))
		return s
	}
	_, err = st.Pool().Exec(ctx, `UPDATE `+st.Schema()+`.river_job SET state = 'scheduled' WHERE id = ANY($1)`, []int64{due, dueExpire, later})
	require.NoError(t, err)

	require.NoError(t, f.makeDue(ctx))
	require.Equal(t, "available", state(due))
	require.Equal(t, "available", state(dueExpire))
	require.Equal(t, "scheduled", state(later))
}
