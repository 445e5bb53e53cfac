package console_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/console"
	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/sqlite"
)

// secret is the console's sign-in secret in the tests.
const secret = "console-test-secret-0123456789-abcdef"

type desk struct {
	Refunds int `json:"refunds"`
}

type refundIn struct {
	Order  int `json:"order"`
	Amount int `json:"amount"`
}

// verdict is the approval payload: a yes-no schema with a note and tags.
type verdict struct {
	Approved bool     `json:"approved"`
	Note     string   `json:"note,omitempty" jsonschema:"a word for the customer"`
	Tags     []string `json:"tags,omitempty"`
}

// refundModel asks for approval of "refund order N" and, once the result
// is in, answers with it.
func refundModel() *scripted.Model { return scripted.Func(refundReply) }

func refundReply(req *llm.Request) (scripted.Reply, error) {
	last := req.Messages[len(req.Messages)-1]
	for _, p := range last.Parts {
		if p.Kind == message.KindToolResult {
			switch {
			case p.IsError:
				return scripted.Text("Refund failed: " + p.Text), nil
			case strings.Contains(p.Text, `"approved":true`):
				return scripted.Text("Refund approved: " + p.Text), nil
			}
			return scripted.Text("Refund declined: " + p.Text), nil
		}
	}
	var order int
	_, _ = fmt.Sscanf(last.Text(), "refund order %d", &order)
	return scripted.Tool("approve_refund", refundIn{Order: order, Amount: 100 * order}), nil
}

// gate is a refund model a test can take down (its calls fail with an
// error naming an internal address) or hold (its calls wait until
// released).
type gate struct {
	mu   sync.Mutex
	down int           // how many calls still fail
	hold chan struct{} // closed to release held calls; nil: no hold
}

// downErr is what a call of a gate that is down fails with.
const downErr = "model endpoint http://10.0.0.7:11434/v1 refused the connection"

func (g *gate) model() *scripted.Model {
	return scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		g.mu.Lock()
		hold, down := g.hold, g.down > 0
		if down {
			g.down--
		}
		g.mu.Unlock()
		if hold != nil {
			<-hold
		}
		if down {
			return scripted.Reply{}, errors.New(downErr)
		}
		return refundReply(req)
	})
}

// failNext makes the next n calls fail.
func (g *gate) failNext(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.down = n
}

// holdCalls makes calls wait until the returned release is called.
func (g *gate) holdCalls() (release func()) {
	ch := make(chan struct{})
	g.mu.Lock()
	g.hold = ch
	g.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			g.hold = nil
			g.mu.Unlock()
			close(ch)
		})
	}
}

func newCharter(t testing.TB) *machine.Charter {
	t.Helper()
	c, err := buildCharter()
	require.NoError(t, err)
	return c
}

func buildCharter() (*machine.Charter, error) { return charterWith(refundModel()) }

// charterWith is the refund charter on model.
func charterWith(model llm.Model) (*machine.Charter, error) { return charterAt(model, nil) }

// charterAt is the refund charter on model and clock (time.Now if nil).
func charterAt(model llm.Model, clock func() time.Time) (*machine.Charter, error) {
	approve := node.NewTool("approve_refund", "ask a manager to approve a refund",
		func(ctx *node.ToolContext[desk], in refundIn) (string, error) {
			return "", ctx.Suspend(fmt.Sprintf("refund %d for order %d", in.Amount, in.Order),
				instance.WithMetadata(map[string]any{"customer": "ada@example.com"}), instance.WithTimeout(time.Hour))
		}, node.ResumeWith[verdict]())
	d, err := node.New("desk", node.Config[desk]{
		Tools:       []node.Tool[desk]{approve},
		Transitions: []node.Transition[desk]{node.To[desk]("archive", "archive the case")},
	})
	if err != nil {
		return nil, err
	}
	a, err := node.New("archive", node.Config[desk]{Transitions: []node.Transition[desk]{node.To[desk]("desk", "reopen")}})
	if err != nil {
		return nil, err
	}
	return machine.NewCharter(machine.CharterConfig{Model: model, Nodes: []*node.Node{d, a}, Clock: clock})
}

// stack is a console served by httptest, over a runner on a SQLite file
// unless its config names a runner.
type stack struct {
	path   string
	runner *durable.Runner
	srv    *httptest.Server
}

func newStack(t testing.TB, cfg console.Config) *stack {
	t.Helper()
	path := ""
	if cfg.Runner == nil {
		path = filepath.Join(t.TempDir(), "console.db")
		cfg.Runner = openRunner(t, path)
	}
	if cfg.Charter == nil {
		cfg.Charter = newCharter(t)
	}
	if cfg.Secret == nil && cfg.IdentityHeader == "" {
		cfg.Secret = []byte(secret)
	}
	c, err := console.New(cfg)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/ui/", c)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() }) // open event streams too
	return &stack{path: path, runner: cfg.Runner, srv: srv}
}

func openRunner(t testing.TB, path string) *durable.Runner {
	t.Helper()
	return openRunnerOn(t, path, newCharter(t))
}

// openRunnerOn is a runner of charter on the SQLite file at path; it
// waits for its runs in the background at the end of the test.
func openRunnerOn(t testing.TB, path string, charter *machine.Charter) *durable.Runner {
	t.Helper()
	_, r := openWith(t, path, durable.Config{Charter: charter})
	return r
}

// openWith is a runner of cfg (its Store the SQLite file at path) and
// the store; it waits for its runs in the background at the end of the
// test.
func openWith(t testing.TB, path string, cfg durable.Config) (*sqlite.Store, *durable.Runner) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	cfg.Store = st
	r, err := durable.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = r.Wait(ctx)
	})
	return st, r
}

// suspend creates machine id on r and runs it to its approval
// suspension, returning the suspend ID.
func suspend(ctx context.Context, r *durable.Runner, id string, order int) (string, error) {
	if _, err := r.Create(ctx, id, "desk", nil); err != nil {
		return "", err
	}
	for st, err := range r.Run(ctx, id, machine.UserText(fmt.Sprintf("refund order %d", order))) {
		if err != nil {
			return "", err
		}
		if len(st.Suspensions) > 0 && st.Done {
			return st.Suspensions[0].SuspendID, nil
		}
	}
	return "", fmt.Errorf("machine %s did not suspend", id)
}

// park suspends a new machine id on s's runner for a refund of order and
// returns the suspend ID, failing t on error.
func (s *stack) park(t testing.TB, id string, order int) string {
	t.Helper()
	sid, err := suspend(context.Background(), s.runner, id, order)
	require.NoError(t, err)
	return sid
}

// parked is a stack of the default config with machine id parked (see
// park), and its suspend ID.
func parked(t testing.TB, id string, order int) (*stack, string) {
	t.Helper()
	s := newStack(t, console.Config{})
	return s, s.park(t, id, order)
}

// requireStatus requires the suspension id to be in status want.
func (s *stack) requireStatus(t testing.TB, id string, want store.Status) {
	t.Helper()
	sus, err := s.runner.Suspension(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, want, sus.Status)
}

// TestMain lets the test binary be the other process of the cross-process
// test: with MARKOV_CONSOLE_CHILD set it suspends one machine in the
// SQLite file MARKOV_DB and exits.
func TestMain(m *testing.M) { testkit.Main(m, "MARKOV_CONSOLE_CHILD", child) }

func child(id string) int {
	return testkit.Child[*sqlite.Store, *machine.Charter, *durable.Runner]{
		Open: func() (*sqlite.Store, error) {
			return sqlite.Open(context.Background(), sqlite.Config{Path: os.Getenv("MARKOV_DB")})
		},
		Charter: buildCharter,
		Runner: func(st *sqlite.Store, c *machine.Charter) (*durable.Runner, error) {
			return durable.New(durable.Config{Store: st, Charter: c})
		},
	}.Run(func(r *durable.Runner) int {
		if _, err := suspend(context.Background(), r, id, 77); err != nil {
			fmt.Fprintln(os.Stderr, "suspend:", err)
			return 1
		}
		return 0
	})
}

// client is a cookie-keeping HTTP client that does not follow redirects.
type client struct {
	t    testing.TB
	base string
	http *http.Client
}

// signedIn is a new client of s signed in as name.
func signedIn(t testing.TB, s *stack, name string) *client {
	t.Helper()
	c := newClient(t, s)
	c.signIn(name)
	return c
}

func newClient(t testing.TB, s *stack) *client {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &client{t: t, base: s.srv.URL, http: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// get returns the status and body of a page.
func (c *client) get(path string) (int, string) {
	c.t.Helper()
	res, err := c.http.Get(c.base + path)
	require.NoError(c.t, err)
	defer res.Body.Close()
	var b strings.Builder
	_, err = fmt.Fprint(&b, readAll(c.t, res))
	require.NoError(c.t, err)
	return res.StatusCode, b.String()
}

func readAll(t testing.TB, res *http.Response) string {
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := res.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}

// post submits a form with the CSRF token of the page at from; it returns
// the status, the Location header and the body.
func (c *client) post(from, path string, form url.Values) (int, string, string) {
	c.t.Helper()
	_, page := c.get(from)
	m := csrfRe.FindStringSubmatch(page)
	require.NotNil(c.t, m, "no CSRF token on %s", from)
	form.Set("csrf", m[1])
	res, err := c.http.PostForm(c.base+path, form)
	require.NoError(c.t, err)
	defer res.Body.Close()
	return res.StatusCode, res.Header.Get("Location"), readAll(c.t, res)
}

func (c *client) signIn(name string) {
	c.t.Helper()
	status, loc, _ := c.post("/ui/login", "/ui/login", url.Values{"name": {name}, "secret": {secret}})
	require.Equal(c.t, http.StatusSeeOther, status)
	require.Equal(c.t, "/ui/", loc)
}
