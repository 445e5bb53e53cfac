package resumehttp_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/resumehttp"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/postgres/pgtest"
	"github.com/markov-agents/markov/store/sqlite/sqlitetest"
)

// twoStores opens two stores, as two processes would, on one database.
type twoStores func(t *testing.T) (store.Store, store.Store)

func twoSQLite(t *testing.T) (store.Store, store.Store) { return sqlitetest.Pair(t) }

func twoPostgres(t *testing.T) (store.Store, store.Store) {
	a, url, schema := pgtest.Open(t)
	return a, pgtest.OpenIn(t, url, schema)
}

// Two servers (two handlers, two runners, two store handles) on one
// database: a signed command delivered to both runs once. The replay
// guard is the database's, so a second delivery, to either server within
// the request's window, is answered 200 with the first one's outcome and
// runs nothing.
func TestReplayRefusedFleetWide(t *testing.T) {
	for name, open := range map[string]twoStores{"sqlite": twoSQLite, "postgres": twoPostgres} {
		t.Run(name, func(t *testing.T) {
			a, b := open(t)
			// The guards judge expiry on the database's clock: sign and
			// check on the real one.
			realTime := func(c *resumehttp.Config) { c.Clock = time.Now }
			ea, eb := newEnvWith(t, a, realTime), newEnvWith(t, b, realTime)
			mid := ea.create(t)
			path := "/machines/" + mid + "/commands/bump"
			at := time.Now()
			deliver := func(e *env, body string) response {
				req := e.request(t, "POST", path, body)
				resumehttp.SignRequest(secret, req, []byte(body), at)
				return do(t, req)
			}
			body := `{"input": {"by": 1}}`
			sum := requireOK[resumehttp.Summary](t, deliver(ea, body))
			require.JSONEq(t, "1", string(sum.Command.Value))
			for _, e := range []*env{eb, ea} {
				again := requireOK[resumehttp.Summary](t, deliver(e, body))
				require.Equal(t, sum, again, "the first outcome")
			}

			// Another request, through the other server, sees one bump.
			sum = requireOK[resumehttp.Summary](t, deliver(eb, `{"input": {"by": 1}, "request_id": "2"}`))
			require.JSONEq(t, "2", string(sum.Command.Value))
		})
	}
}
