package cli

// The two-process delegation (#31): markov processes A and B on
// databases of their own; A's tool waits on a task of B's, B's machine
// waits on a person; both are stopped and started again; the person
// answers over B's signed HTTP API; B's task completes, B's push
// notification wakes A's call, and A finishes — each model and tool call
// made once.

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/a2a"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store/postgres/pgtest"
)

// Environment of a delegation child: a2aChildEnv is its role (A or B),
// marksEnv the file it appends a line to for every model and tool call,
// peerEnv (A) the base URL of B's A2A server and pushEnv (A) the URL of
// A's push endpoint.
const (
	a2aChildEnv = "MARKOV_CLI_TEST_A2A"
	marksEnv    = "MARKOV_CLI_TEST_MARKS"
	peerEnv     = "MARKOV_CLI_TEST_PEER"
	pushEnv     = "MARKOV_CLI_TEST_PUSH"
)

// mark appends line to the marks file: one line per model or tool call,
// from every process.
func mark(line string) {
	f, err := os.OpenFile(os.Getenv(marksEnv), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	if _, err := f.WriteString(line + "\n"); err != nil {
		panic(err)
	}
}

// delegationModel is a model that calls tool with input, then answers
// prefix and the tool's result; it marks each call.
func delegationModel(role, tool string, input any) llm.Model {
	return scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		if done, ok := testkit.Reported(req.Messages[len(req.Messages)-1]); ok {
			mark(role + " model: answer")
			return scripted.Text(role + " " + done), nil
		}
		mark(role + " model: call " + tool)
		return scripted.Tool(tool, input), nil
	})
}

// bCharter is B's: its approve tool waits for a person, decided in the
// console or over the HTTP API (auth-required for an A2A client).
func bCharter() (*machine.Charter, error) {
	approve := node.NewTool("approve", "Wait for a person's approval.", func(ctx *node.ToolContext[struct{}], _ struct{}) (string, error) {
		mark("B tool: approve")
		return "", ctx.Suspend("approve the request from A", instance.WithMetadata(map[string]any{a2a.DecidedElsewhere: true}))
	})
	n, err := node.New("desk", node.Config[struct{}]{Instructions: "Approve requests.", Tools: []node.Tool[struct{}]{approve}})
	if err != nil {
		return nil, err
	}
	return machine.NewCharter(machine.CharterConfig{Name: "bdesk", Model: delegationModel("B", "approve", struct{}{}), Nodes: []*node.Node{n}})
}

// aCharter is A's: its agent_b tool is B, reached over A2A, with push
// notifications to A's endpoint; its polls are 10 minutes apart, so that
// only a push notification finishes the call within the test.
func aCharter(ctx context.Context) (*machine.Charter, error) {
	remote, err := a2a.NewRemote(a2a.Config{Name: "agent_b", URL: os.Getenv(peerEnv), PushURL: os.Getenv(pushEnv), AllowPrivate: true,
		Wait: 300 * time.Millisecond, PollMin: 10 * time.Minute, PollMax: 10 * time.Minute})
	if err != nil {
		return nil, err
	}
	tool, err := a2a.Tool[struct{}](ctx, remote)
	if err != nil {
		return nil, err
	}
	n, err := node.New("desk", node.Config[struct{}]{Instructions: "Delegate to B.", Tools: []node.Tool[struct{}]{tool}})
	if err != nil {
		return nil, err
	}
	return machine.NewCharter(machine.CharterConfig{Name: "adesk", Model: delegationModel("A", "agent_b", a2a.Request{Message: "please approve"}),
		Nodes: []*node.Node{n}, Hooks: machine.Hooks{OnResolved: a2a.CancelHook(remote)}})
}

// a2aChildMain runs the command line os.Args[1:] as process A or B.
func a2aChildMain() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var charter *machine.Charter
	var err error
	switch role := os.Getenv(a2aChildEnv); role {
	case "A":
		charter, err = aCharter(ctx)
	case "B":
		charter, err = bCharter()
	default:
		err = fmt.Errorf("role %q", role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	c := &CLI{Name: "markov", Charter: charter, Node: "desk", Stdout: os.Stdout, Stderr: os.Stderr}
	return c.Main(ctx, os.Args[1:])
}

// delegation is the test's two parties: the arguments that choose their
// databases, and their addresses.
type delegation struct {
	t            *testing.T
	aDB, bDB     []string
	aAddr, bAddr string
	marks        string
}

// start starts the test binary as role's command line args.
func (d *delegation) start(role string, args ...string) *child {
	d.t.Helper()
	return startChildEnv(d.t, []string{a2aChildEnv + "=" + role, marksEnv + "=" + d.marks,
		peerEnv + "=http://" + d.bAddr, pushEnv + "=http://" + d.aAddr + "/a2a/push"}, args...)
}

// cmd runs role's command line args to its end and returns its stdout.
func (d *delegation) cmd(role string, args ...string) string {
	d.t.Helper()
	c := d.start(role, args...)
	<-c.done
	require.NoError(d.t, c.err, "%s %v: %s", role, args, c.out.String())
	return c.out.String()
}

// pending returns the suspensions pending in the database db of role
// (none while the command's output is not a list: nothing is pending, or
// the database is busy).
func (d *delegation) pending(role string, db []string) []Call {
	c := d.start(role, append([]string{"pending", "-o", "json"}, db...)...)
	<-c.done
	out := c.out.String()
	var calls []Call
	if i := strings.Index(out, "["); c.err == nil && i >= 0 && json.Unmarshal([]byte(out[i:]), &calls) == nil {
		return calls
	}
	return nil
}

// freeAddr returns a loopback address no one listens on now.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

// TestDelegationAcrossRestarts is the two-process delegation
// (the person answers in B's console),
// on two SQLite files, and on two PostgreSQL schemas (fleets: the inputs,
// signals and deadlines are River jobs the serve processes' workers run).
func TestDelegationAcrossRestarts(t *testing.T) {
	t.Run("SQLite", func(t *testing.T) {
		dir := t.TempDir()
		testDelegation(t, []string{"--store", filepath.Join(dir, "a.db")}, []string{"--store", filepath.Join(dir, "b.db")})
	})
	t.Run("PostgreSQL", func(t *testing.T) {
		url := pgtest.URL(t)
		testDelegation(t, []string{"--store", url, "--schema", pgtest.Schema(t, url)}, []string{"--store", url, "--schema", pgtest.Schema(t, url)})
	})
}

func testDelegation(t *testing.T, aDB, bDB []string) {
	d := &delegation{t: t, aDB: aDB, bDB: bDB, aAddr: freeAddr(t), bAddr: freeAddr(t), marks: filepath.Join(t.TempDir(), "marks")}
	bArgs := append([]string{"a2a", "--addr", d.bAddr, "--node", "desk", "--allow-private-push"}, bDB...)
	aArgs := append([]string{"serve", "--addr", d.aAddr, "--a2a-push", "/a2a/push"}, aDB...)
	serving := regexp.MustCompile(`^serving `)

	b := d.start("B", bArgs...)
	b.waitFor(serving, time.Minute)
	a := d.start("A", aArgs...)
	a.waitFor(serving, time.Minute)

	// A's machine calls B: B's machine waits on a person, its task is
	// auth-required, A's call waits on the task.
	d.cmd("A", append([]string{"create", "--id", "a1", "desk"}, aDB...)...)
	d.cmd("A", append([]string{"run", "a1", "go"}, aDB...)...)
	var bWait, aWait Call
	require.Eventually(t, func() bool {
		bp, ap := d.pending("B", d.bDB), d.pending("A", d.aDB)
		if len(bp) == 1 && len(ap) == 1 && strings.Contains(ap[0].Reason, "waits for an authorization") {
			bWait, aWait = bp[0], ap[0]
			return true
		}
		return false
	}, time.Minute, 200*time.Millisecond)
	t.Logf("A waits: %s (%s); B waits: %s (%s)", aWait.SuspendID, aWait.Reason, bWait.SuspendID, bWait.Reason)

	// Both stop, and start again.
	a.terminate(time.Minute)
	b.terminate(time.Minute)
	b = d.start("B", bArgs...)
	b.waitFor(serving, time.Minute)
	a = d.start("A", aArgs...)
	a.waitFor(serving, time.Minute)

	// The person answers in B's console (markov serve on B's database),
	// as a person does: the decide page, then its form.
	human := d.start("B", append([]string{"serve", "--addr", "127.0.0.1:0", "--console", "--console-identity-header", "X-Test-User"}, bDB...)...)
	addr := human.waitFor(regexp.MustCompile(`^serving the machines of .* on http://(\S+) `), time.Minute)[1]
	consoleDecide(t, "http://"+addr+"/ui/suspensions/"+bWait.SuspendID, "dana", url.Values{"value": {"approved by dana"}})

	// B's task completes (the restarted a2a process brings it up to
	// date: no execution follows it any more), its push notification
	// wakes A's call, A finishes — long before the call's first poll,
	// ten minutes after it suspended.
	require.Eventually(t, func() bool {
		raw, err := os.ReadFile(d.marks)
		return err == nil && strings.Contains(string(raw), "A model: answer")
	}, 2*time.Minute, 200*time.Millisecond)
	require.Contains(t, d.cmd("A", append([]string{"inspect", "a1"}, aDB...)...), "assistant: A Done: B Done: approved by dana")

	// B's task is completed, seen by an A2A client.
	c := bClient(t, "http://"+d.bAddr)
	list, err := c.ListTasks(t.Context(), &sdk.ListTasksRequest{})
	require.NoError(t, err)
	require.Len(t, list.Tasks, 1, "one message from A's call, one task")
	require.Equal(t, sdk.TaskStateCompleted, list.Tasks[0].Status.State)

	// Every model and tool call once.
	raw, err := os.ReadFile(d.marks)
	require.NoError(t, err)
	require.Equal(t, []string{"A model: call agent_b", "B model: call approve", "B tool: approve", "B model: answer", "A model: answer"},
		strings.Split(strings.TrimSpace(string(raw)), "\n"))
	require.NotContains(t, d.cmd("A", append([]string{"pending", "-o", "json"}, aDB...)...), "suspend_id", "nothing pending in A")
	require.NotContains(t, d.cmd("B", append([]string{"pending", "-o", "json"}, bDB...)...), "suspend_id", "nothing pending in B")
	for _, p := range []*child{a, b, human} {
		p.terminate(time.Minute)
	}
	require.Contains(t, a.out.String(), "A2A push notifications in at /a2a/push")
}

// consoleDecide approves the suspension whose console page is page as
// person who (signed in by the identity header): it reads the page's
// decide form — its CSRF token and the digest of what is decided — and
// posts it with the fields.
func consoleDecide(t *testing.T, page, who string, fields url.Values) {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	client := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(req *http.Request) (int, string) {
		req.Header.Set("X-Test-User", who)
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	req, err := http.NewRequest(http.MethodGet, page, nil)
	require.NoError(t, err)
	status, body := do(req)
	require.Equal(t, http.StatusOK, status, body)
	form := url.Values{"_decision": {"true"}}
	for _, name := range []string{"csrf", "digest"} {
		m := regexp.MustCompile(`name="` + name + `" value="([^"]+)"`).FindStringSubmatch(body)
		require.NotNil(t, m, "the decide form's %s", name)
		form.Set(name, html.UnescapeString(m[1]))
	}
	maps.Copy(form, fields)
	req, err = http.NewRequest(http.MethodPost, page+"/resume", strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	status, body = do(req)
	require.Contains(t, []int{http.StatusOK, http.StatusSeeOther}, status, body)
	require.NotContains(t, body, "Nothing was decided")
}

// bClient is an a2a-go client of the A2A server at url.
func bClient(t *testing.T, url string) *a2aclient.Client {
	t.Helper()
	card, err := agentcard.DefaultResolver.Resolve(t.Context(), url)
	require.NoError(t, err)
	c, err := a2aclient.NewFromCard(t.Context(), card)
	require.NoError(t, err)
	return c
}
