package resumehttp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/durable/fleet"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/resumehttp"
	"github.com/markov-agents/markov/store/postgres/pgtest"
	"github.com/markov-agents/markov/store/sqlite/sqlitetest"
)

// gate holds the model's calls while it is closed: a run can be kept
// going for as long as a test needs.
type gate struct {
	llm.Model
	mu     sync.Mutex
	closed chan struct{} // nil: open
}

func (g *gate) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	g.mu.Lock()
	ch := g.closed
	g.mu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.Model.Generate(ctx, req)
}

// close makes the model's calls wait until open; it returns open.
func (g *gate) close() (open func()) {
	g.mu.Lock()
	g.closed = make(chan struct{})
	g.mu.Unlock()
	return g.open
}

// open lets the model's calls go; it does nothing on an open gate.
func (g *gate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed != nil {
		close(g.closed)
		g.closed = nil
	}
}

// acceptDesk is a charter whose tool "ask" suspends and counts the runs
// of its resume handler, and whose model asks on every user message and
// then says the result; a message "approve …" calls "approve" instead,
// which suspends for a verdict (a typed resume).
func acceptDesk(t testing.TB, g *gate, handled *atomic.Int64) *machine.Charter {
	t.Helper()
	g.Model = scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		last := req.Messages[len(req.Messages)-1]
		for _, p := range last.Parts {
			if p.Kind == message.KindToolResult {
				return scripted.Text("result: " + p.Text), nil
			}
		}
		if strings.HasPrefix(last.Text(), "approve") {
			return scripted.Tool("approve", askIn{What: last.Text()}), nil
		}
		return scripted.Tool("ask", askIn{What: last.Text()}), nil
	})
	approve := node.NewTool("approve", "ask a human for a verdict", func(ctx *node.ToolContext[counter], in askIn) (string, error) {
		return "", ctx.Suspend("verdict on " + in.What)
	}, node.ResumeWith[verdict]())
	ask := node.NewTool("ask", "ask a human", func(ctx *node.ToolContext[counter], in askIn) (string, error) {
		return "", ctx.Suspend("asking about " + in.What)
	}, node.OnResume(func(ctx *node.ToolContext[counter], _ askIn, r node.Resumed[json.RawMessage]) (string, error) {
		handled.Add(1)
		return instance.Decode[string](r.Payload)
	}))
	bump := command.New("bump", "Add to the count.", func(ctx *command.Context[counter], in bumpIn) (string, error) {
		if err := ctx.Update(func(c *counter) { c.Count += in.By }); err != nil {
			return "", err
		}
		return ctx.IdempotencyKey(), nil
	})
	desk, err := node.New("desk", node.Config[counter]{Tools: []node.Tool[counter]{ask, approve}, Commands: []command.Command[counter]{bump}})
	require.NoError(t, err)
	c, err := machine.NewCharter(machine.CharterConfig{Model: g, Nodes: []*node.Node{desk}})
	require.NoError(t, err)
	return c
}

// acceptEnv is a server whose handler accepts inputs (Config.Acceptor)
// on real time.
type acceptEnv struct {
	*env
	acceptor resumehttp.Acceptor
	gate     *gate
	handled  *atomic.Int64
}

// serve starts the handler for runner and acceptor.
func (a *acceptEnv) serve(t testing.TB, r *durable.Runner, acc resumehttp.Acceptor, tune func(*resumehttp.Config)) {
	t.Helper()
	a.env = &env{runner: r, clock: testkit.NewClock(time.Now()), logs: &syncBuffer{}}
	a.acceptor = acc
	a.listen(t, resumehttp.Config{Runner: r, Acceptor: acc, Secret: secret, Clock: time.Now}, tune)
}

// embeddedEnv: SQLite, the runner as its own acceptor.
func embeddedEnv(t testing.TB, tune func(*resumehttp.Config)) *acceptEnv {
	st := sqlitetest.Open(t, sqlitetest.Path(t))
	a := &acceptEnv{gate: &gate{}, handled: &atomic.Int64{}}
	r, err := durable.New(durable.Config{Store: st, Charter: acceptDesk(t, a.gate, a.handled)})
	require.NoError(t, err)
	a.serve(t, r, r, tune)
	t.Cleanup(func() { _ = r.Wait(context.Background()) })
	return a
}

// fleetEnv: PostgreSQL, a fleet with a worker started in this process.
func fleetEnv(t testing.TB, tune func(*resumehttp.Config)) *acceptEnv {
	st, _, _ := pgtest.Open(t)
	a := &acceptEnv{gate: &gate{}, handled: &atomic.Int64{}}
	f, err := fleet.New(fleet.Config{Store: st, Charter: acceptDesk(t, a.gate, a.handled), BusySnooze: 50 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, f.Start(context.Background()))
	t.Cleanup(func() { _ = f.Stop(context.Background()) })
	a.serve(t, f.Runner(), f, tune)
	return a
}

var acceptEnvs = map[string]func(testing.TB, func(*resumehttp.Config)) *acceptEnv{
	"sqlite": embeddedEnv, "postgres": fleetEnv,
}

// sign signs req at the real time.
func sign(t testing.TB, req *http.Request, body string) *http.Request {
	t.Helper()
	resumehttp.SignRequest(secret, req, []byte(body), time.Now())
	return req
}

func (a *acceptEnv) post(t testing.TB, path, body string, header ...string) response {
	t.Helper()
	req := a.request(t, "POST", path, body)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	return do(t, sign(t, req, body))
}

// awaitRun waits through the acceptor for the run that applies the
// input a 202 accepted to end: it follows the machine's event log from
// its start.
func (a *acceptEnv) awaitRun(t testing.TB, acc durable.Accepted) []machine.Step {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	steps, err := a.acceptor.Await(ctx, acc)
	require.NoError(t, err)
	return steps
}

// settle waits for the run that holds machine mid (one that has logged
// its last step may still hold it, finishing its job) to let it go.
func (a *acceptEnv) settle(t testing.TB, mid string) {
	t.Helper()
	h, err := a.runner.Hold(context.Background(), mid)
	require.NoError(t, err)
	h.Release()
}

// A resume answers 202 with the machine's Location once the result is
// saved; the run goes on and ends; a second result is 409.
func TestAcceptedResume(t *testing.T) {
	for name, open := range acceptEnvs {
		t.Run(name, func(t *testing.T) {
			a := open(t, nil)
			mid, sid := a.start(t, "refund")
			resp := a.post(t, resumePath(sid), `{"payload":"yes"}`)
			require.Equal(t, http.StatusAccepted, resp.Status, "body: %s", resp.Body)
			acc := decode[resumehttp.Acceptance](t, resp)
			require.Equal(t, resumehttp.Acceptance{MachineID: mid, Location: "/machines/" + mid, SuspendID: sid}, acc)
			require.Equal(t, "/machines/"+mid, resp.Header.Get("Location"))
			require.Empty(t, resp.Header.Get("Preference-Applied"))

			requireError(t, a.post(t, resumePath(sid), `{"payload":"again"}`), http.StatusConflict, "already_resolved")
			a.awaitRun(t, durable.Accepted{MachineID: mid, SuspendID: sid})
			requireHistoryText(t, a.env, mid, "result: yes")
			require.EqualValues(t, 1, a.handled.Load())
		})
	}
}

// requireHistoryText checks the last message of machine mid.
func requireHistoryText(t testing.TB, e *env, mid, text string) {
	t.Helper()
	m, _, err := e.runner.Load(context.Background(), mid)
	require.NoError(t, err)
	h := m.History()
	require.Equal(t, text, h[len(h)-1].Text())
}

// Prefer: wait=N answers the run's Summary when it ends in time.
func TestPreferWaitSummary(t *testing.T) {
	for name, open := range acceptEnvs {
		t.Run(name, func(t *testing.T) {
			a := open(t, func(c *resumehttp.Config) { c.MaxWait = 2 * time.Minute })
			mid, sid := a.start(t, "refund")
			resp := a.post(t, resumePath(sid), `{"payload":"yes"}`, "Prefer", "respond-async, wait=120")
			sum := requireOK[resumehttp.Summary](t, resp)
			require.Equal(t, "wait=120", resp.Header.Get("Preference-Applied"))
			require.Equal(t, resumehttp.Summary{MachineID: mid, Steps: []string{"end_turn"}, Done: true, Pending: []string{}, Text: "result: yes"}, sum)
			require.EqualValues(t, 1, a.handled.Load())
		})
	}
}

// Prefer: wait=N answers 202 when the run does not end in time; the
// wait is capped by Config.MaxWait.
func TestPreferWaitTimesOut(t *testing.T) {
	for name, open := range acceptEnvs {
		t.Run(name, func(t *testing.T) {
			a := open(t, func(c *resumehttp.Config) { c.MaxWait = time.Second })
			mid, sid := a.start(t, "refund")
			open := a.gate.close()
			defer open()
			resp := a.post(t, resumePath(sid), `{"payload":"yes"}`, "Prefer", "wait=600")
			require.Equal(t, http.StatusAccepted, resp.Status, "body: %s", resp.Body)
			require.Equal(t, "wait=1", resp.Header.Get("Preference-Applied"))
			require.Equal(t, "/machines/"+mid, resp.Header.Get("Location"))
			open()
			a.awaitRun(t, durable.Accepted{MachineID: mid, SuspendID: sid})
			require.EqualValues(t, 1, a.handled.Load())
		})
	}
}

// 50 signed resumes of one suspension at once: one is accepted, the
// others are 409, and the resume handler ran once.
func TestConcurrentAcceptedResumes(t *testing.T) {
	for name, open := range acceptEnvs {
		for _, wait := range []bool{false, true} {
			t.Run(name+"/wait="+strconv.FormatBool(wait), func(t *testing.T) {
				const n = 50
				a := open(t, func(c *resumehttp.Config) { c.FailureBurst, c.MaxWait = 2*n, 2*time.Minute })
				mid, sid := a.start(t, "race")
				reqs := make([]*http.Request, n)
				for i := range reqs {
					body := `{"payload":"r` + strconv.Itoa(i) + `"}`
					reqs[i] = a.request(t, "POST", resumePath(sid), body)
					if wait {
						reqs[i].Header.Set("Prefer", "wait=120") // ends with the run
					}
					sign(t, reqs[i], body)
				}
				statuses := make([]int, n)
				codes := make([]string, n)
				var wg sync.WaitGroup
				start := make(chan struct{})
				for i, req := range reqs {
					wg.Go(func() {
						<-start
						resp, err := http.DefaultClient.Do(req)
						if err != nil {
							codes[i] = err.Error()
							return
						}
						defer resp.Body.Close()
						b, _ := io.ReadAll(resp.Body)
						statuses[i] = resp.StatusCode
						var eb resumehttp.ErrorBody
						_ = json.Unmarshal(b, &eb)
						codes[i] = eb.Code
					})
				}
				if !wait {
					// The winner's run waits at the gate until every
					// answer is in: the losers are not held for it.
					defer a.gate.close()()
				}
				close(start)
				wg.Wait()
				won, refused := 0, 0
				want := http.StatusAccepted
				if wait {
					want = http.StatusOK
				}
				for i, s := range statuses {
					switch {
					case s == want:
						won++
					case s == http.StatusConflict:
						require.Contains(t, []string{"already_resolved", "conflict"}, codes[i])
						refused++
					default:
						t.Fatalf("client %d: status %d (%s)", i, s, codes[i])
					}
				}
				require.Equal(t, 1, won)
				require.Equal(t, n-1, refused)
				a.gate.open()
				a.awaitRun(t, durable.Accepted{MachineID: mid, SuspendID: sid})
				require.EqualValues(t, 1, a.handled.Load())
				require.Empty(t, a.fingerprint(t, mid).Pending)
			})
		}
	}
}

// GET /machines/{id}: idle before its first run, awaiting_resume while
// suspended, running while a run holds it, done after; unknown is 404.
func TestMachineStatus(t *testing.T) {
	for name, open := range acceptEnvs {
		t.Run(name, func(t *testing.T) {
			a := open(t, nil)
			status := func(id string) resumehttp.MachineStatus {
				return requireOK[resumehttp.MachineStatus](t, a.call(t, "GET", "/machines/"+id, ""))
			}
			fresh := a.create(t)
			require.Equal(t, resumehttp.MachineStatus{MachineID: fresh, Status: "idle", Revision: 1, Pending: []resumehttp.Suspension{}},
				withoutTime(status(fresh)))

			mid, sid := a.start(t, "refund")
			st := status(mid)
			require.Equal(t, "awaiting_resume", st.Status)
			require.Len(t, st.Pending, 1)
			require.Equal(t, sid, st.Pending[0].ID)

			open := a.gate.close()
			defer open()
			require.Equal(t, http.StatusAccepted, a.post(t, resumePath(sid), `{"payload":"yes"}`).Status)
			if name == "sqlite" {
				// Applied when accepted, and held by the run that waits
				// for the model.
				require.Equal(t, "running", status(mid).Status)
			}
			open()
			a.awaitRun(t, durable.Accepted{MachineID: mid, SuspendID: sid})
			a.settle(t, mid)
			st = status(mid)
			require.Equal(t, "done", st.Status)
			require.Empty(t, st.Pending)
			require.Equal(t, "result: yes", st.LastText)
			require.Equal(t, 4, st.Messages) // user, tool use, tool result, text
			// The event log's last entry, where a watch goes on from.
			loaded, err := a.runner.LoadAt(context.Background(), mid)
			require.NoError(t, err)
			require.Positive(t, st.EventSeq)
			require.Equal(t, loaded.EventSeq, st.EventSeq)

			requireError(t, a.call(t, "GET", "/machines/nope", ""), http.StatusNotFound, "unknown_machine")
		})
	}
}

func withoutTime(s resumehttp.MachineStatus) resumehttp.MachineStatus {
	s.UpdatedAt = time.Time{}
	return s
}

// A run held by a fleet worker is running, fleet-wide.
func TestMachineStatusRunningFleet(t *testing.T) {
	a := fleetEnv(t, nil)
	mid, sid := a.start(t, "refund")
	open := a.gate.close()
	defer open()
	require.Equal(t, http.StatusAccepted, a.post(t, resumePath(sid), `{"payload":"yes"}`).Status)
	// The worker holds the machine while the model waits at the gate:
	// watch for the resumption it logs before the model call.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for e, err := range a.runner.Watch(ctx, mid, 0) {
		require.NoError(t, err)
		if e.Kind == machine.EventResumed {
			break
		}
	}
	st := requireOK[resumehttp.MachineStatus](t, a.call(t, "GET", "/machines/"+mid, ""))
	require.Equal(t, "running", st.Status)
	open()
	a.awaitRun(t, durable.Accepted{MachineID: mid, SuspendID: sid})
}

// GET /parked lists a fleet's parked machines, or those the sweeper
// parked on SQLite; 501 on a store that keeps none (memstore).
func TestParkedEndpoint(t *testing.T) {
	requireError(t, memEnv(t).call(t, "GET", "/parked", ""), http.StatusNotImplemented, "not_implemented")
	require.Equal(t, resumehttp.ParkedList{Parked: []resumehttp.ParkedMachine{}},
		requireOK[resumehttp.ParkedList](t, embeddedEnv(t, nil).call(t, "GET", "/parked", "")))
	a := fleetEnv(t, nil)
	require.Equal(t, resumehttp.ParkedList{Parked: []resumehttp.ParkedMachine{}},
		requireOK[resumehttp.ParkedList](t, a.call(t, "GET", "/parked?limit=5", "")))
	requireError(t, a.call(t, "GET", "/parked?limit=x", ""), http.StatusBadRequest, "bad_request")
}

// An Idempotency-Key sets the invocation's ID (the handler's
// IdempotencyKey) and a repeat never runs the command again; a bad key
// is 400 and changes nothing.
func TestIdempotencyKeyHTTP(t *testing.T) {
	for name, open := range acceptEnvs {
		t.Run(name, func(t *testing.T) {
			a := open(t, nil)
			mid := a.create(t)
			path := "/machines/" + mid + "/commands/bump"
			before := a.fingerprint(t, mid)
			for i, bad := range [][]string{
				{"Idempotency-Key", "has space"}, {"Idempotency-Key", ""}, {"Idempotency-Key", strings.Repeat("k", 256)},
				{"Idempotency-Key", "k1", "Idempotency-Key", "k2"}, {"Idempotency-Key", "k/1"},
			} {
				body := `{"input":{"by":1},"request_id":"` + strconv.Itoa(i) + `"}`
				requireError(t, a.post(t, path, body, bad...), http.StatusBadRequest, "bad_request")
			}
			a.requireUnchanged(t, before, mid)

			// A command refused (4xx) changed nothing, its key included: a
			// corrected retry with the key runs. (A fleet refuses at once
			// what no machine of its charter could run.)
			for i, refused := range []struct{ path, body string }{
				{"/machines/" + mid + "/commands/nope", `{"input":{"by":1}}`},
				{path, `{"input":{"by":"one"}}`},
			} {
				resp := a.post(t, refused.path, refused.body, "Idempotency-Key", "k0", "Prefer", "wait=60")
				require.True(t, resp.Status >= 400 && resp.Status < 500, "refused command %d: %d %s", i, resp.Status, resp.Body)
				a.requireUnchanged(t, before, mid)
			}
			requireOK[resumehttp.Summary](t, a.post(t, path, `{"input":{"by":0}}`, "Idempotency-Key", "k0", "Prefer", "wait=60"))
			requireError(t, a.post(t, path, `{"input":{"by":0},"request_id":"again"}`, "Idempotency-Key", "k0"),
				http.StatusConflict, "idempotency_key_reused")

			resp := a.post(t, path, `{"input":{"by":1}}`, "Idempotency-Key", "k1", "Prefer", "wait=60")
			sum := requireOK[resumehttp.Summary](t, resp)
			m, _, err := a.runner.Load(context.Background(), mid)
			require.NoError(t, err)
			require.JSONEq(t, strconv.Quote(m.Root().ID+"/command/k1"), string(sum.Command.Value))

			// A retry with the same key (a new signature: another body).
			requireError(t, a.post(t, path, `{"input":{"by":1},"request_id":"retry"}`, "Idempotency-Key", "k1"),
				http.StatusConflict, "idempotency_key_reused")
			// Another key runs.
			sum = requireOK[resumehttp.Summary](t, a.post(t, path, `{"input":{"by":2}}`, "Idempotency-Key", `"k2"`, "Prefer", "wait=60"))
			require.JSONEq(t, strconv.Quote(m.Root().ID+"/command/k2"), string(sum.Command.Value))
			m, _, err = a.runner.Load(context.Background(), mid)
			require.NoError(t, err)
			require.Equal(t, counter{Count: 3}, m.Root().State)
		})
	}
}

// A resume whose payload the call's schema rejects is refused when it is
// accepted (400 payload_decode), by the fleet too, which checks it
// against the machine's tree before it queues it: it used to answer 202
// and let the job drop it, the suspension still pending. A good payload
// then resumes the call.
func TestTypedResumeRefusedOnAcceptance(t *testing.T) {
	for name, open := range acceptEnvs {
		t.Run(name, func(t *testing.T) {
			a := open(t, nil)
			mid, sid := a.start(t, "approve refund 7")
			before := a.fingerprint(t, mid)
			for body, message := range map[string]string{
				`{"payload": "yes"}`:               "payload: expected object, got string",
				`{"payload": {"approved": "yes"}}`: "payload: approved: expected boolean, got string",
				`{}`:                               "payload: missing",
			} {
				eb := requireError(t, a.post(t, resumePath(sid), body, "Prefer", "wait=60"), http.StatusBadRequest, "payload_decode")
				require.Equal(t, message, eb.Error)
				a.requireUnchanged(t, before, mid)
			}
			st := requireOK[resumehttp.MachineStatus](t, a.call(t, "GET", "/machines/"+mid, ""))
			require.Zero(t, st.Queued, "nothing was queued")

			sum := requireOK[resumehttp.Summary](t, a.post(t, resumePath(sid), `{"payload": {"approved":true}}`, "Prefer", "wait=60"))
			require.Equal(t, `result: {"approved":true}`, sum.Text)
		})
	}
}

// A signed resume delivered again — to the same server or, on a fleet,
// through any server of the database — gets the first delivery's outcome
// (200 with its Acceptance and Location) and runs nothing; while the first
// is still being served, a redelivery is told to retry (409
// redelivery_pending, Retry-After). A refused first delivery's refusal is
// its outcome too.
func TestRedeliveryGetsTheFirstOutcome(t *testing.T) {
	for name, open := range acceptEnvs {
		t.Run(name, func(t *testing.T) {
			a := open(t, func(c *resumehttp.Config) { c.MaxWait = 2 * time.Minute; c.Clock = time.Now })
			mid, sid := a.start(t, "refund")
			body := `{"payload":"yes"}`
			at := time.Now()
			deliver := func(header ...string) response {
				req := a.request(t, "POST", resumePath(sid), body)
				for i := 0; i+1 < len(header); i += 2 {
					req.Header.Add(header[i], header[i+1])
				}
				resumehttp.SignRequest(secret, req, []byte(body), at)
				return do(t, req)
			}
			first := deliver()
			require.Equal(t, http.StatusAccepted, first.Status, "body: %s", first.Body)
			for range 3 {
				again := deliver()
				require.Equal(t, http.StatusOK, again.Status, "body: %s", again.Body)
				require.JSONEq(t, string(first.Body), string(again.Body))
				require.Equal(t, "/machines/"+mid, again.Header.Get("Location"))
			}
			a.awaitRun(t, durable.Accepted{MachineID: mid, SuspendID: sid})
			require.EqualValues(t, 1, a.handled.Load(), "the resume handler ran once")

			// A refusal is an outcome too.
			other := `{"payload":"again"}`
			req := a.request(t, "POST", resumePath(sid), other)
			resumehttp.SignRequest(secret, req, []byte(other), at)
			refused := do(t, req)
			requireError(t, refused, http.StatusConflict, "already_resolved")
			req = a.request(t, "POST", resumePath(sid), other)
			resumehttp.SignRequest(secret, req, []byte(other), at)
			require.Equal(t, refused.Body, do(t, req).Body)

			// In progress: a first delivery waiting for its run.
			mid2, sid2 := a.start(t, "refund")
			open := a.gate.close()
			defer open()
			sid = sid2
			waiting := make(chan response, 1)
			go func() { waiting <- deliver("Prefer", "wait=120") }()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for e, err := range a.runner.Watch(ctx, mid2, 0) {
				require.NoError(t, err)
				if e.Kind == machine.EventResumed {
					break
				}
			}
			pending := deliver("Prefer", "wait=120")
			requireError(t, pending, http.StatusConflict, "redelivery_pending")
			require.Equal(t, "1", pending.Header.Get("Retry-After"))
			open()
			sum := requireOK[resumehttp.Summary](t, <-waiting)
			require.Equal(t, sum, requireOK[resumehttp.Summary](t, deliver("Prefer", "wait=120")))
		})
	}
}
