package durable

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/serialize"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/memstore"
	"github.com/markov-agents/markov/store/postgres/pgtest"
	"github.com/markov-agents/markov/store/sqlite"
)

type benchState struct {
	N int `json:"n"`
}

type benchIn struct {
	Text string `json:"text"`
}

// benchModel calls the tool named by the last message: "ask" for user
// input, "echo" otherwise, and ends the turn after a resumed ask.
type benchModel struct{}

func (benchModel) Generate(_ context.Context, req *llm.Request) (*llm.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	id := "t" + strconv.Itoa(len(req.Messages))
	switch {
	case last.Role == message.User:
		return &llm.Response{Message: message.Message{Parts: []message.Part{message.ToolUse(id, "ask", []byte(`{"text":"ok?"}`))}}, StopReason: llm.ToolUse}, nil
	case last.Parts[0].SuspendID != "":
		return &llm.Response{Message: message.Message{Parts: []message.Part{message.Text("done")}}, StopReason: llm.EndTurn}, nil
	}
	return &llm.Response{Message: message.Message{Parts: []message.Part{message.ToolUse(id, "echo", []byte(`{"text":"hi"}`))}}, StopReason: llm.ToolUse}, nil
}

// stepModel calls echo on a user message and ends the turn on the tool's
// result: a run through one tool round.
type stepModel struct{}

func (stepModel) Generate(_ context.Context, req *llm.Request) (*llm.Response, error) {
	if req.Messages[len(req.Messages)-1].Role == message.User {
		return &llm.Response{Message: message.Message{Parts: []message.Part{message.ToolUse("t1", "echo", []byte(`{"text":"hi"}`))}}, StopReason: llm.ToolUse}, nil
	}
	return &llm.Response{Message: message.Message{Parts: []message.Part{message.Text("done")}}, StopReason: llm.EndTurn}, nil
}

func benchCharter(b *testing.B) *machine.Charter { return modelCharter(b, benchModel{}, 0) }

// modelCharter is the benchmarks' charter (node desk with tools echo and
// ask) on model, with a window of window messages (0: none).
func modelCharter(b *testing.B, model llm.Model, window int) *machine.Charter {
	echo := node.NewTool("echo", "", func(_ *node.ToolContext[benchState], in benchIn) (string, error) { return in.Text, nil })
	ask := node.NewTool("ask", "", func(ctx *node.ToolContext[benchState], _ benchIn) (string, error) { return "", ctx.Suspend("approval") })
	n, err := node.New("desk", node.Config[benchState]{Tools: []node.Tool[benchState]{echo, ask}})
	if err != nil {
		b.Fatal(err)
	}
	c, err := machine.NewCharter(machine.CharterConfig{Model: model, Nodes: []*node.Node{n}, MaxSteps: 1 << 30, Window: window})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

func benchStores(b *testing.B) map[string]func() store.Store {
	out := map[string]func() store.Store{
		"memstore": func() store.Store { return memstore.New() },
		"sqlite": func() store.Store {
			s, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(b.TempDir(), "bench.db")})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		},
	}
	if os.Getenv(pgtest.EnvVar) != "" {
		out["postgres"] = func() store.Store {
			s, _, _ := pgtest.Open(b)
			return s
		}
	}
	return out
}

// history returns n messages of a finished conversation.
var history = testkit.History

// echoHistory returns size messages of a finished conversation and an
// echo call with its result after them: benchModel's next reply calls
// echo again, so every round of a machine restored from it is a tool
// round that adds two messages.
func echoHistory(size int) []message.Message {
	return append(history(size),
		message.Message{Role: message.Assistant, Parts: []message.Part{message.ToolUse("t0", "echo", []byte(`{"text":"hi"}`))}},
		message.Message{Role: message.Tool, Parts: []message.Part{message.ToolResult("t0", "hi", false)}})
}

// BenchmarkSaveStep measures a durable step: one tool round (echo) and its
// save (tree snapshot plus the two new history messages), with a short and a long
// history: the cost must not grow with history length. (The round is
// timed too: stopping the timer around it would cost more than the round,
// a stop-the-world memory read each time.)
func BenchmarkSaveStep(b *testing.B) {
	c := benchCharter(b)
	ctx := context.Background()
	for name, open := range benchStores(b) {
		for _, size := range []int{100, 10_000} {
			b.Run(fmt.Sprintf("%s/history=%d", name, size), func(b *testing.B) {
				r, err := New(Config{Store: open(), Charter: c})
				if err != nil {
					b.Fatal(err)
				}
				m, err := machine.Restore(c, &instance.Instance{ID: "root", Node: "desk", State: benchState{}}, message.NewHistory(echoHistory(size)))
				if err != nil {
					b.Fatal(err)
				}
				s := &session{r: r, id: "m", m: m}
				if err := s.save(ctx); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.ResetTimer()
				defer reportCPU(b, cpuTime())
				for range b.N {
					for _, err := range m.Run(ctx) {
						if err != nil {
							b.Fatal(err)
						}
						break
					}
					if err := s.save(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkBareTx is what BenchmarkSaveStep's sqlite runs compare with:
// one transaction writing the same bytes — a step's tree and a new
// revision over the stored ones (a transaction that changes nothing
// writes nothing, and syncs nothing) and its two new history messages —
// to a bare SQLite database with
// the pragmas the store uses (WAL, synchronous=FULL, BEGIN IMMEDIATE),
// with none of the store's bookkeeping (revision check, history length,
// suspension index).
func BenchmarkBareTx(b *testing.B) {
	c := benchCharter(b)
	ctx := context.Background()
	for _, size := range []int{100, 10_000} {
		b.Run(fmt.Sprintf("sqlite/history=%d", size), func(b *testing.B) {
			tree, msgs := stepBytes(b, c, size)
			db := bareDB(b)
			seq := 0
			b.ReportAllocs()
			b.ResetTimer()
			defer reportCPU(b, cpuTime())
			for range b.N {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				seq++
				if _, err := tx.ExecContext(ctx, `UPDATE m SET rev = ?, tree = ? WHERE id = 1`, seq, tree); err != nil {
					b.Fatal(err)
				}
				for _, data := range msgs {
					seq++
					if _, err := tx.ExecContext(ctx, `INSERT INTO h VALUES (?, ?)`, seq, data); err != nil {
						b.Fatal(err)
					}
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// stepBytes returns what a step's save writes for a machine with a
// history of size messages: the tree after one round, and the round's
// new history messages, encoded.
func stepBytes(b *testing.B, c *machine.Charter, size int) (tree []byte, msgs [][]byte) {
	m, err := machine.Restore(c, &instance.Instance{ID: "root", Node: "desk", State: benchState{}}, message.NewHistory(echoHistory(size)))
	if err != nil {
		b.Fatal(err)
	}
	var added []message.Message
	for s, err := range m.Run(context.Background()) {
		if err != nil {
			b.Fatal(err)
		}
		added = s.Messages
		break
	}
	if tree, err = serialize.MarshalTree(m); err != nil {
		b.Fatal(err)
	}
	for _, msg := range added {
		data, err := serialize.MarshalMessage(msg)
		if err != nil {
			b.Fatal(err)
		}
		msgs = append(msgs, data)
	}
	return tree, msgs
}

// bareDB opens a bare SQLite database with the store's pragmas, a table m
// holding one tree and a table h for history messages.
func bareDB(b *testing.B) *sql.DB {
	db, err := sql.Open("sqlite", filepath.Join(b.TempDir(), "bare.db")+"?_txlock=immediate&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	for _, q := range []string{`CREATE TABLE m (id INTEGER PRIMARY KEY, rev INTEGER, tree BLOB)`, `CREATE TABLE h (seq INTEGER PRIMARY KEY, data BLOB)`, `INSERT INTO m VALUES (1, 0, x'')`} {
		if _, err := db.Exec(q); err != nil {
			b.Fatal(err)
		}
	}
	return db
}

// BenchmarkResume measures durable resumes: find the machine by suspend
// ID, load, apply, save, run to the end, save.
func BenchmarkResume(b *testing.B) {
	c := benchCharter(b)
	ctx := context.Background()
	for name, open := range benchStores(b) {
		b.Run(name, func(b *testing.B) {
			r, ids := benchMachines(b, c, open(), b.N)
			for i, id := range ids {
				for s, err := range r.Run(ctx, id, machine.UserText("approve")) {
					if err != nil {
						b.Fatal(err)
					}
					if s.Done {
						ids[i] = s.Suspensions[0].SuspendID
					}
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				run, err := r.Resume(ctx, machine.ResumeInput{SuspendID: ids[i], Payload: "yes"})
				if err != nil {
					b.Fatal(err)
				}
				for _, err := range run.Steps() {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "resumes/s")
		})
	}
}

// BenchmarkDurableStep measures a durable step as a caller of Run sees it:
// a user message to a machine at rest — load, apply the message and save,
// one agent+tool round (the model's reply, the echo tool), the final
// answer, and their saves. Each iteration uses a fresh machine.
func BenchmarkDurableStep(b *testing.B) {
	c := modelCharter(b, stepModel{}, 0)
	ctx := context.Background()
	for name, open := range benchStores(b) {
		b.Run(name, func(b *testing.B) {
			r, ids := benchMachines(b, c, open(), b.N)
			b.ReportAllocs()
			b.ResetTimer()
			defer reportCPU(b, cpuTime())
			for _, id := range ids {
				for _, err := range r.Run(ctx, id, machine.UserText("work")) {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// benchMachines returns a Runner on st and n machines it created at node
// desk.
func benchMachines(b *testing.B, c *machine.Charter, st store.Store, n int) (*Runner, []string) {
	r, err := New(Config{Store: st, Charter: c})
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]string, n)
	for i := range ids {
		if ids[i], err = r.Create(context.Background(), "m"+strconv.Itoa(i), "desk", nil); err != nil {
			b.Fatal(err)
		}
	}
	return r, ids
}

// reportCPU reports the process's CPU time per iteration since start
// (cpu-ns/op): other processes competing for the cores disturb it less
// than wall time.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the CPU time (user + system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLoadRound measures a durable load and its first round on a
// machine at rest with a long history: a user message to it — load
// (tree, history and suspension index), the agent+tool round, the final
// answer, and their saves. Cold runs load the whole history (a Runner
// without a history cache, as after a restart); warm ones load the tree
// and the entries saved since the runner's last run of the machine (a
// Runner with the default cache, which a first run filled); cold runs of
// a charter with a window of 100 messages (machine.CharterConfig.Window)
// load the end of the history that holds the window. Each machine takes
// a few runs only, so that its history grows by a tenth at most.
func BenchmarkLoadRound(b *testing.B) {
	for name, open := range benchStores(b) {
		for _, size := range []int{100, 10_000} {
			for _, mode := range []struct {
				name   string
				cache  int64
				window int
			}{{"cold", -1, 0}, {"warm", 0, 0}, {"cold/window=100", -1, 100}} {
				b.Run(fmt.Sprintf("%s/history=%d/%s", name, size, mode.name), func(b *testing.B) {
					c := modelCharter(b, stepModel{}, mode.window)
					r, ids := historyMachines(b, c, open(), size, b.N, mode.cache)
					b.ReportAllocs()
					b.ResetTimer()
					defer reportCPU(b, cpuTime())
					for _, id := range ids {
						runTo(b, r, id)
					}
				})
			}
		}
	}
}

// historyMachines returns a Runner on st with a history cache of cache
// bytes, and the machine ID each of n runs takes: machines at rest with
// size messages of history, each taken by at most size/40 runs (4
// messages each). With a cache, the runner has run each machine once.
func historyMachines(b *testing.B, c *machine.Charter, st store.Store, size, n int, cache int64) (*Runner, []string) {
	r, err := New(Config{Store: st, Charter: c, HistoryCache: cache})
	if err != nil {
		b.Fatal(err)
	}
	per := max(1, size/40)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "m" + strconv.Itoa(i/per)
		if i%per != 0 {
			continue
		}
		m, err := machine.Restore(c, &instance.Instance{ID: "root", Node: "desk", State: benchState{}}, message.NewHistory(history(size)))
		if err != nil {
			b.Fatal(err)
		}
		if err := (&session{r: r, id: ids[i], m: m}).save(context.Background()); err != nil {
			b.Fatal(err)
		}
		if cache >= 0 {
			runTo(b, r, ids[i])
		}
	}
	return r, ids
}

// runTo runs machine id with a user message to the end of its turn.
func runTo(b *testing.B, r *Runner, id string) {
	for _, err := range r.Run(context.Background(), id, machine.UserText("work")) {
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStatus measures Runner.Status of a machine at rest with a
// long history, from a Runner without a history cache (as the console or
// the CLI of another process sees it): the tree, the suspension index and
// the end of the history back to the last reply.
func BenchmarkStatus(b *testing.B) {
	c := modelCharter(b, stepModel{}, 0)
	for name, open := range benchStores(b) {
		for _, size := range []int{100, 10_000} {
			b.Run(fmt.Sprintf("%s/history=%d", name, size), func(b *testing.B) {
				r, ids := historyMachines(b, c, open(), size, 1, -1)
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if _, err := r.Status(context.Background(), ids[0]); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
