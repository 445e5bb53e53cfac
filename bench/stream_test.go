package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/openai"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store/postgres"
	"github.com/markov-agents/markov/store/postgres/pgtest"
)

// The test binary doubles as the watcher process of
// BenchmarkFirstDelta/watch-postgres: with MARKOV_BENCH_WATCH set it
// watches that machine and exits.
func TestMain(m *testing.M) { testkit.Main(m, "MARKOV_BENCH_WATCH", watchChild) }

// fixture is the recorded OpenAI Chat Completions stream the fake
// provider serves.
const fixture = "../llm/openai/testdata/text.sse"

// sseServer serves the fixture to every request, and records when it
// writes the first byte of each stream (unix nanoseconds).
type sseServer struct {
	*httptest.Server
	first atomic.Int64
}

func newSSEServer(b *testing.B) *sseServer {
	body, err := os.ReadFile(fixture)
	if err != nil {
		b.Fatal(err)
	}
	s := &sseServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		s.first.Store(time.Now().UnixNano())
		_, _ = w.Write(body)
	}))
	b.Cleanup(s.Close)
	return s
}

// streamCharter is one node on the OpenAI adapter pointed at url.
func streamCharter(b testing.TB, url string) *machine.Charter {
	c, err := newStreamCharter(url)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

func newStreamCharter(url string) (*machine.Charter, error) {
	model, err := openai.New(openai.Config{APIKey: "test", BaseURL: url, MaxRetries: new(0), IgnoreEnvironment: true,
		DefaultSettings: llm.Settings{Model: "gpt-4.1"}})
	if err != nil {
		return nil, err
	}
	n, err := node.New("chat", node.Config[struct{}]{})
	if err != nil {
		return nil, err
	}
	return machine.NewCharter(machine.CharterConfig{Model: model, Nodes: []*node.Node{n}})
}

// reportPercentiles reports the p50 and p99 of lat, in microseconds.
func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds())
	}
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
	b.ReportMetric(0, "ns/op") // the round trip is not what is measured
}

// BenchmarkFirstDelta measures how long the first text delta of a reply
// takes to reach a listener after the fake provider writes the first
// byte of its SSE stream (a recorded OpenAI stream, through the real
// adapter): the caller of Machine.Events in process, and a
// durable.Runner.Watch caller in another OS process on PostgreSQL
// (LISTEN/NOTIFY). It reports p50 and p99 in microseconds.
func BenchmarkFirstDelta(b *testing.B) {
	b.Run("events", func(b *testing.B) {
		srv := newSSEServer(b)
		c := streamCharter(b, srv.URL)
		ctx := context.Background()
		lat := make([]time.Duration, 0, b.N)
		for b.Loop() {
			m, err := c.NewMachine("chat", nil)
			if err != nil {
				b.Fatal(err)
			}
			seen := false
			for e, err := range m.Events(ctx, machine.UserText("hi")) {
				if err != nil {
					b.Fatal(err)
				}
				if !seen && e.Kind == machine.EventTextDelta {
					lat = append(lat, time.Duration(time.Now().UnixNano()-srv.first.Load()))
					seen = true
				}
			}
		}
		reportPercentiles(b, lat)
	})
	b.Run("watch-postgres", func(b *testing.B) {
		st, _, schema := pgtest.Open(b)
		srv := newSSEServer(b)
		r, err := durable.New(durable.Config{Store: st, Charter: streamCharter(b, srv.URL)})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		id, err := r.Create(ctx, "", "chat", nil)
		if err != nil {
			b.Fatal(err)
		}
		watcher := startWatchChild(b, id, schema)
		run := func() int64 {
			for _, err := range r.Run(ctx, id, machine.UserText("hi")) {
				if err != nil {
					b.Fatal(err)
				}
			}
			return watcher.next(b) // when this run's first live delta reached the watcher
		}
		run() // the watcher is subscribed once it reported a run
		lat := make([]time.Duration, 0, b.N)
		missed := 0
		for b.Loop() {
			at := run()
			if at == 0 {
				missed++
				continue
			}
			lat = append(lat, time.Duration(at-srv.first.Load()))
		}
		reportPercentiles(b, lat)
		b.ReportMetric(float64(missed), "missed")
	})
}

// watchProc is the watcher process; it prints, for each run, the unix
// nanoseconds at which its first live text delta arrived.
type watchProc struct{ sc *bufio.Scanner }

func startWatchChild(b *testing.B, id, schema string) *watchProc {
	cmd := testkit.ChildCommand("MARKOV_BENCH_WATCH="+id, "MARKOV_BENCH_SCHEMA="+schema)
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return &watchProc{sc: bufio.NewScanner(out)}
}

func (w *watchProc) next(b *testing.B) int64 {
	if !w.sc.Scan() {
		b.Fatal("the watcher exited")
	}
	n, err := strconv.ParseInt(strings.TrimSpace(w.sc.Text()), 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// watchChild watches machine id on PostgreSQL and prints, at the end of
// each run (its Done step), when the run's first live text delta arrived
// (unix nanoseconds; 0 if none came live).
func watchChild(id string) int {
	ctx := context.Background()
	st, err := postgres.Open(ctx, postgres.Config{ConnString: os.Getenv(pgtest.EnvVar), Schema: os.Getenv("MARKOV_BENCH_SCHEMA")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer st.Close()
	c, err := newStreamCharter("http://127.0.0.1:1") // the watcher calls no model
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	r, err := durable.New(durable.Config{Store: st, Charter: c})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var first int64
	for e, err := range r.Watch(ctx, id, 0) {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		switch {
		case e.Live && e.Kind == machine.EventTextDelta && first == 0:
			first = time.Now().UnixNano()
		case e.Kind == machine.EventStep && e.Step.Done:
			fmt.Println(first)
			first = 0
		}
	}
	return 0
}
