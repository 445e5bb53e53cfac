package mcp_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/mcp"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/postgres/pgtest"
	"github.com/markov-agents/markov/store/sqlite"
	"github.com/markov-agents/markov/store/sqlite/sqlitetest"
)

// rpc is a JSON-RPC client of the Streamable HTTP wire, for the
// requests the Go SDK's client does not send (the tasks extension).
type rpc struct {
	t   *testing.T
	url string
	id  int
}

// rpcReply is a JSON-RPC response.
type rpcReply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// tasksMeta is the _meta of a 2026-07-28 request of a client that
// declares the tasks extension (or not).
func tasksMeta(declare bool) map[string]any {
	caps := map[string]any{"elicitation": map[string]any{"form": map[string]any{}}}
	if declare {
		caps["extensions"] = map[string]any{mcp.TasksExtension: map[string]any{}}
	}
	return map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": caps,
	}
}

func (c *rpc) call(method string, params map[string]any) rpcReply {
	c.t.Helper()
	c.id++
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.id, "method": method, "params": params})
	require.NoError(c.t, err)
	req, err := http.NewRequestWithContext(c.t.Context(), http.MethodPost, c.url, bytes.NewReader(body))
	require.NoError(c.t, err)
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	for _, k := range []string{"name", "taskId"} {
		if v, ok := params[k].(string); ok {
			req.Header.Set("Mcp-Name", v)
		}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	require.Equal(c.t, http.StatusOK, resp.StatusCode, string(b))
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for line := range strings.Lines(string(b)) {
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				b = []byte(data)
			}
		}
	}
	var r rpcReply
	require.NoError(c.t, json.Unmarshal(b, &r), string(b))
	return r
}

// callTool calls tool name with args, declaring the tasks extension.
func (c *rpc) callTool(name string, args map[string]any) map[string]any {
	c.t.Helper()
	r := c.call("tools/call", map[string]any{"name": name, "arguments": args, "_meta": tasksMeta(true)})
	require.Nil(c.t, r.Error)
	return object(c.t, r.Result)
}

// task sends a request of the extension for task id; more adds params.
func (c *rpc) task(method, id string, more map[string]any) rpcReply {
	c.t.Helper()
	p := map[string]any{"taskId": id, "_meta": tasksMeta(true)}
	for k, v := range more {
		p[k] = v
	}
	return c.call(method, p)
}

// get is tasks/get of task id.
func (c *rpc) get(id string) map[string]any {
	c.t.Helper()
	r := c.task("tasks/get", id, nil)
	require.Nil(c.t, r.Error, "%+v", r.Error)
	return object(c.t, r.Result)
}

// until polls task id until its status is status.
func (c *rpc) until(id, status string) map[string]any {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		task := c.get(id)
		if task["status"] == status || time.Now().After(deadline) {
			require.Equal(c.t, status, task["status"], "%v", task)
			return task
		}
		time.Sleep(5 * time.Millisecond) // polling observable state, with a deadline
	}
}

func object(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m), string(raw))
	return m
}

// onlyKey is the one key of m.
func onlyKey(t *testing.T, m any) string {
	t.Helper()
	mm, ok := m.(map[string]any)
	require.True(t, ok, "%v", m)
	require.Len(t, mm, 1)
	for k := range mm {
		return k
	}
	return ""
}

func resultText(t *testing.T, task map[string]any) string {
	t.Helper()
	res := task["result"].(map[string]any)
	return res["content"].([]any)[0].(map[string]any)["text"].(string)
}

// serveTasks serves r over HTTP with the tasks extension; a call is
// answered with a task once it ran wait.
func serveTasks(t *testing.T, r *durable.Runner, wait time.Duration) *rpc {
	t.Helper()
	srv, err := mcp.NewServer(mcp.ServerConfig{Runner: r, Secret: secret, Node: "front", TaskWait: wait, PollInterval: 250 * time.Millisecond})
	require.NoError(t, err)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		_ = srv.Close()
		_ = r.Wait(t.Context())
	})
	return &rpc{t: t, url: hs.URL}
}

// TestTasks: a client that declares the tasks extension gets a task for
// a call that suspends; tasks/get shows the input request, tasks/update
// answers it (a refused answer consumes nothing), the task completes
// with the call's result, and a second server on the same store serves
// the same task. tasks/cancel cancels a task's pending suspension.
func TestTasks(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		db := sqlitetest.Path(t)
		testTasks(t, func() *durable.Runner { return deskRunnerAt(t, db) })
	})
	t.Run("postgres", func(t *testing.T) {
		_, url, schema := pgtest.Open(t)
		testTasks(t, func() *durable.Runner { return deskRunnerOn(t, pgtest.OpenIn(t, url, schema)) })
	})
}

// testTasks serves the front desk from two servers, each with a runner of
// its own (newRunner) on one database, as two processes would.
func testTasks(t *testing.T, newRunner func() *durable.Runner) {
	c := serveTasks(t, newRunner(), time.Minute)
	other := serveTasks(t, newRunner(), time.Minute)

	// A call done within the wait is answered as usual.
	res := c.callTool(mcp.ConversationTool, map[string]any{"message": "hello", "conversation": "t1"})
	require.Equal(t, "complete", res["resultType"])
	require.Equal(t, "You said: hello", res["content"].([]any)[0].(map[string]any)["text"])

	// One that suspends is answered with a task.
	created := c.callTool(mcp.ConversationTool, map[string]any{"message": "ask color?", "conversation": "t1"})
	require.Equal(t, "task", created["resultType"], "%v", created)
	require.Equal(t, "input_required", created["status"])
	id := created["taskId"].(string)
	require.EqualValues(t, 250, created["pollIntervalMs"])
	require.EqualValues(t, (24 * time.Hour).Milliseconds(), created["ttlMs"])
	key := onlyKey(t, created["inputRequests"])

	got := other.get(id) // another process on the store
	require.Equal(t, "complete", got["resultType"])
	require.Equal(t, "input_required", got["status"])
	ask := got["inputRequests"].(map[string]any)[key].(map[string]any)
	require.Equal(t, "elicitation/create", ask["method"])
	require.Equal(t, "a person must answer: color?", ask["params"].(map[string]any)["message"])

	// A refused answer: an error naming the field, nothing consumed.
	r := c.task("tasks/update", id, map[string]any{"inputResponses": map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"text": 7}}}})
	require.NotNil(t, r.Error)
	require.Equal(t, -32602, r.Error.Code)
	require.Contains(t, r.Error.Message, key+": the answer was refused: text")
	require.Equal(t, "input_required", c.get(id)["status"])

	// The answer, given to the other server.
	r = other.task("tasks/update", id, map[string]any{"inputResponses": map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"text": "purple"}}}})
	require.Nil(t, r.Error)
	require.Equal(t, map[string]any{"resultType": "complete"}, object(t, r.Result))
	done := c.until(id, "completed")
	require.Equal(t, "Done: color? purple", resultText(t, done))

	// An update for a finished task changes nothing.
	r = c.task("tasks/update", id, map[string]any{"inputResponses": map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"text": "red"}}}})
	require.Nil(t, r.Error)
	require.Equal(t, "Done: color? purple", resultText(t, c.get(id)))

	// tasks/cancel cancels the pending suspension.
	created = c.callTool(mcp.ConversationTool, map[string]any{"message": "deploy api", "conversation": "t2"})
	require.Equal(t, "input_required", created["status"])
	cancelID := created["taskId"].(string)
	r = other.task("tasks/cancel", cancelID, nil)
	require.Nil(t, r.Error)
	cancelled := c.until(cancelID, "cancelled")
	require.NotContains(t, cancelled, "inputRequests")
	pending, err := newRunner().Pending(t.Context(), store.Filter{MachineID: mcp.ConversationID("t2")})
	require.NoError(t, err)
	require.Empty(t, pending)
}

// TestTaskWorking: a call that outlives the task wait is answered with a
// working task, which completes when its run ends.
func TestTaskWorking(t *testing.T) {
	gate := make(chan struct{})
	n, err := node.New("front", node.Config[frontDesk]{})
	require.NoError(t, err)
	model := scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		if req.Messages[len(req.Messages)-1].Text() == "slow" {
			<-gate
		}
		return scripted.Text("finally"), nil
	})
	ch, err := machine.NewCharter(machine.CharterConfig{Name: "front", Model: model, Nodes: []*node.Node{n}})
	require.NoError(t, err)
	st, err := sqlite.Open(t.Context(), sqlite.Config{Path: sqlitetest.Path(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	r, err := durable.New(durable.Config{Store: st, Charter: ch})
	require.NoError(t, err)
	c := serveTasks(t, r, time.Millisecond)

	created := c.callTool(mcp.ConversationTool, map[string]any{"message": "slow", "conversation": "w"})
	require.Equal(t, "task", created["resultType"])
	require.Equal(t, "working", created["status"])
	id := created["taskId"].(string)
	require.Equal(t, "working", c.get(id)["status"])
	close(gate)
	require.Equal(t, "finally", resultText(t, c.until(id, "completed")))
}

// TestTaskRequestsRefused: requests of the extension the server refuses,
// each with the JSON-RPC error the extension names; nothing changes.
func TestTaskRequestsRefused(t *testing.T) {
	r := deskRunner(t)
	c := serveTasks(t, r, time.Minute)
	created := c.callTool(mcp.ConversationTool, map[string]any{"message": "ask size?", "conversation": "bad"})
	id := created["taskId"].(string)
	key := onlyKey(t, created["inputRequests"])

	// One character of the signature changed (the last one may carry
	// bits no decoding reads).
	tampered := []byte(id)
	if i := len(tampered) - 3; tampered[i] == 'A' {
		tampered[i] = 'B'
	} else {
		tampered[i] = 'A'
	}

	state := c.call("tools/call", map[string]any{"name": mcp.ConversationTool, "arguments": map[string]any{"message": "ask x", "conversation": "mrtr"}, "_meta": tasksMeta(false)})
	require.Nil(t, state.Error)
	requestState := object(t, state.Result)["requestState"].(string)

	for name, tc := range map[string]struct {
		method string
		params map[string]any
		code   int
		text   string
	}{
		"undeclared":    {"tasks/get", map[string]any{"taskId": id, "_meta": tasksMeta(false)}, -32021, "Missing required client capability"},
		"no task":       {"tasks/get", map[string]any{"_meta": tasksMeta(true)}, -32602, "taskId is required"},
		"unknown":       {"tasks/get", map[string]any{"taskId": "eyJ2IjoxfQ.AAAA", "_meta": tasksMeta(true)}, -32602, "task not found"},
		"tampered":      {"tasks/update", map[string]any{"taskId": string(tampered), "_meta": tasksMeta(true), "inputResponses": map[string]any{key: map[string]any{"action": "cancel"}}}, -32602, "task not found"},
		"requestState":  {"tasks/cancel", map[string]any{"taskId": requestState, "_meta": tasksMeta(true)}, -32602, "not a task token"},
		"bad params":    {"tasks/get", map[string]any{"taskId": 7, "_meta": tasksMeta(true)}, -32602, "params"},
		"bad response":  {"tasks/update", map[string]any{"taskId": id, "_meta": tasksMeta(true), "inputResponses": map[string]any{key: map[string]any{"nothing": true}}}, -32602, "params"},
		"not a form":    {"tasks/update", map[string]any{"taskId": id, "_meta": tasksMeta(true), "inputResponses": map[string]any{key: map[string]any{"roots": []any{}}}}, -32602, "not an elicitation result"},
		"unknown verb":  {"tasks/update", map[string]any{"taskId": id, "_meta": tasksMeta(true), "inputResponses": map[string]any{key: map[string]any{"action": "maybe"}}}, -32602, "maybe"},
		"missing field": {"tasks/update", map[string]any{"taskId": id, "_meta": tasksMeta(true), "inputResponses": map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{}}}}, -32602, "the answer was refused"},
	} {
		t.Run(name, func(t *testing.T) {
			r := c.call(tc.method, tc.params)
			require.NotNil(t, r.Error, "%s", r.Result)
			require.Equal(t, tc.code, r.Error.Code, r.Error.Message)
			require.Contains(t, r.Error.Message, tc.text)
		})
	}
	got := c.get(id)
	require.Equal(t, "input_required", got["status"], "nothing was consumed")
	require.Equal(t, key, onlyKey(t, got["inputRequests"]))

	// A task whose machine is gone is unknown.
	require.NoError(t, r.Delete(t.Context(), mcp.ConversationID("bad")))
	res := c.task("tasks/get", id, nil)
	require.NotNil(t, res.Error)
	require.Equal(t, -32602, res.Error.Code)
	require.Contains(t, res.Error.Message, "unknown task")
}

// FuzzTaskRequest: no params of a request of the extension make the
// server panic or answer anything but a JSON-RPC result or error.
func FuzzTaskRequest(f *testing.F) {
	r := deskRunnerAt(f, sqlitetest.Path(f))
	srv, err := mcp.NewServer(mcp.ServerConfig{Runner: r, Secret: secret, Node: "front"})
	if err != nil {
		f.Fatal(err)
	}
	meta := `"_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
	for _, p := range []string{`{` + meta + `}`, `{"taskId":"x",` + meta + `}`, `{"taskId":"eyJ2IjoxLCJrIjoidGFzayJ9.AAAA",` + meta + `}`,
		`{"taskId":"a.b","inputResponses":{"k":{"action":"accept"}},` + meta + `}`, `[]`, `null`, `{"taskId":{}}`} {
		f.Add("tasks/get", p)
		f.Add("tasks/update", p)
	}
	h := srv.Handler()
	f.Fuzz(func(t *testing.T, method, params string) {
		if !strings.HasPrefix(method, "tasks/") {
			return
		}
		body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": json.RawMessage(params)})
		if err != nil {
			return // params is not JSON
		}
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			return // the SDK refused the message
		}
		var reply rpcReply
		if err := json.Unmarshal(rec.Body.Bytes(), &reply); err != nil || (reply.Error == nil) == (reply.Result == nil) {
			t.Fatalf("answer %q: %v", rec.Body.String(), err)
		}
	})
}
