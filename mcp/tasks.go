package mcp

// This file is the tasks extension (io.modelcontextprotocol/tasks,
// SEP-2663) of the server direction. The Go SDK has no tasks and refuses
// the extension's methods before any middleware runs, so the extension
// lives below the SDK's server: a transport wrapper (stdio) and an
// http.Handler wrapper (Streamable HTTP) answer tasks/get, tasks/update
// and tasks/cancel, and turn a call the tool handler answered with a task
// into its CreateTaskResult. A task is its machine's durable state: its ID
// is a signed name of the machine (internal/bridge), so any process on
// the same store and secret serves it, after a restart too.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/bridge"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store"
)

// TasksExtension is the identifier of the MCP tasks extension (SEP-2663).
// A client that declares it in a call's per-request capabilities may be
// answered with a task (see ServerConfig.TaskWait).
const TasksExtension = "io.modelcontextprotocol/tasks"

// The defaults of ServerConfig's task settings.
const (
	// DefaultTaskWait is how long a call runs before it is answered
	// with a task that goes on working.
	DefaultTaskWait = 5 * time.Second
	// DefaultPollInterval is the polling interval a task suggests.
	DefaultPollInterval = time.Second
)

// TaskCancelReason is the reason of the cancellations tasks/cancel makes:
// the cancelled calls' error results read "cancelled: " and it.
const TaskCancelReason = "the MCP client cancelled the task"

// TaskStatus is the status of a task.
type TaskStatus string

// The statuses of a task.
const (
	// TaskWorking: the machine runs.
	TaskWorking TaskStatus = "working"
	// TaskInputRequired: the machine waits for answers; the task's
	// InputRequests ask for them, tasks/update gives them.
	TaskInputRequired TaskStatus = "input_required"
	// TaskCompleted: the run ended; Result is the call's result (an
	// error result too).
	TaskCompleted TaskStatus = "completed"
	// TaskFailed: a fleet gave the machine's run up; Error says why.
	TaskFailed TaskStatus = "failed"
	// TaskCancelled: a suspension of the call was cancelled
	// (tasks/cancel, or an operator).
	TaskCancelled TaskStatus = "cancelled"
)

// Task is a task of the tasks extension as the wire carries it: a
// CreateTaskResult (ResultType "task") and a tasks/get result
// (ResultType "complete").
type Task struct {
	ResultType    string     `json:"resultType"`
	TaskID        string     `json:"taskId"`
	Status        TaskStatus `json:"status"`
	StatusMessage string     `json:"statusMessage,omitempty"`
	// CreatedAt and LastUpdatedAt are RFC 3339 times.
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	// TTLMs is how long the task ID stays good from its creation, in
	// milliseconds.
	TTLMs          int64 `json:"ttlMs"`
	PollIntervalMs int64 `json:"pollIntervalMs,omitempty"`
	// InputRequests are the pending suspensions' elicitations
	// (input_required).
	InputRequests sdk.InputRequestMap `json:"inputRequests,omitempty"`
	// Result is the call's CallToolResult (completed).
	Result json.RawMessage `json:"result,omitempty"`
	// Error is the JSON-RPC error of a failed task.
	Error *jsonrpc.Error `json:"error,omitempty"`
}

// The extension's methods.
const (
	methodTaskGet    = "tasks/get"
	methodTaskUpdate = "tasks/update"
	methodTaskCancel = "tasks/cancel"
)

// codeMissingCapability is the JSON-RPC error of a request the client
// did not declare the extension on (-32021).
const codeMissingCapability = -32021

// taskMeta is the _meta key under which the tool handler hands a task to
// the layer below the SDK's server, which answers the call with it.
const taskMeta = "io.github.markov-agents/task"

// taskRuns are the runs of a server's tasks that go on after the call
// that started them was answered.
type taskRuns struct {
	// wait is ServerConfig.TaskWait, poll its PollInterval, ttl how
	// long a task ID stays good.
	wait, poll, ttl time.Duration
	// ctx ends the runs when the server closes.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// faults holds the error result of a task's run that failed in this
	// process, by machine ID, until the machine runs again.
	faults sync.Map
}

func newTaskRuns(wait, poll, ttl time.Duration) *taskRuns {
	ctx, cancel := context.WithCancel(context.Background())
	return &taskRuns{wait: wait, poll: poll, ttl: ttl, ctx: ctx, cancel: cancel}
}

func (t *taskRuns) close() {
	t.cancel()
	t.wg.Wait()
}

// detached is a context with the values of one context and the
// cancellation of another: a task's run keeps the call's values and
// ends with the server, not with the call.
type detached struct {
	context.Context // values
	life            context.Context
}

func (d detached) Deadline() (time.Time, bool) { return d.life.Deadline() }
func (d detached) Done() <-chan struct{}       { return d.life.Done() }
func (d detached) Err() error                  { return d.life.Err() }

// runContext is the context a call's run takes: the call's own, or,
// when the call may be answered with a task, one that outlives it.
func (s *Server) runContext(ctx context.Context, req *sdk.CallToolRequest) context.Context {
	if declaresTasks(req) {
		return detached{Context: ctx, life: s.tasks.ctx}
	}
	return ctx
}

// declaresTasks reports whether the call's per-request capabilities
// declare the tasks extension.
func declaresTasks(req *sdk.CallToolRequest) bool {
	if _, ok := req.Params.Meta[sdk.MetaKeyClientCapabilities]; !ok {
		return false // an older client: its session's capabilities do not count
	}
	caps := req.ClientCapabilities()
	if caps == nil {
		return false
	}
	_, ok := caps.Extensions[TasksExtension]
	return ok
}

// ended is what a task's run said when it ended.
type ended struct {
	out   runOutcome
	fault *sdk.CallToolResult
}

// task runs steps on machine id for a client that declared the tasks
// extension: a run that ends within the task wait with nothing pending
// answers the call as usual; one that suspends, or goes on, answers it
// with a task, and goes on in the background.
func (s *Server) task(ctx context.Context, req *sdk.CallToolRequest, id string, steps iter.Seq2[machine.Step, error]) (*sdk.CallToolResult, error) {
	created := s.now()
	s.tasks.faults.Delete(id)
	done := make(chan ended, 1)
	s.tasks.wg.Go(func() {
		out, fault := collect(id, steps)
		if fault != nil {
			s.tasks.faults.Store(id, fault)
			s.logger.Warn("mcp: a task's run failed", "machine", id, "error", fault.Content[0].(*sdk.TextContent).Text)
		}
		done <- ended{out: out, fault: fault}
	})
	timer := time.NewTimer(s.tasks.wait)
	defer timer.Stop()
	var e *ended
	select {
	case got := <-done:
		e = &got
	case <-timer.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if e != nil && e.fault != nil {
		return e.fault, nil
	}
	taskID, t, err := s.bridge.TaskID(id, created)
	if err != nil {
		return nil, err
	}
	task, err := s.describe(ctx, taskID, t)
	if err != nil {
		return nil, err
	}
	if e != nil && task.Status == TaskCompleted {
		return s.answer(ctx, req, id, e.out) // done within the wait: no task
	}
	task.ResultType = "task"
	b, err := json.Marshal(task)
	if err != nil {
		return nil, err
	}
	return &sdk.CallToolResult{Content: []sdk.Content{}, Meta: sdk.Meta{taskMeta: json.RawMessage(b)}}, nil
}

// describe is the state of task t (ID taskID), read from its machine.
func (s *Server) describe(ctx context.Context, taskID string, t bridge.Task) (Task, error) {
	st, err := s.runner.Status(ctx, t.MachineID)
	if errors.Is(err, store.ErrNotFound) {
		return Task{}, invalidParams("taskId: unknown task: its machine %s is gone", t.MachineID)
	} else if err != nil {
		return Task{}, err
	}
	task := Task{ResultType: "complete", TaskID: taskID, Status: TaskWorking,
		CreatedAt: t.Created.UTC().Format(time.RFC3339Nano), LastUpdatedAt: st.UpdatedAt.UTC().Format(time.RFC3339Nano),
		TTLMs: s.tasks.ttl.Milliseconds(), PollIntervalMs: s.tasks.poll.Milliseconds()}
	cancelled, err := s.runner.Pending(ctx, store.Filter{MachineID: t.MachineID, Status: store.StatusCancelled})
	if err != nil {
		return Task{}, err
	}
	if slices.ContainsFunc(cancelled, func(c store.Suspension) bool { return !c.CreatedAt.Before(t.Created) }) {
		task.Status, task.StatusMessage = TaskCancelled, "a pending input of the call was cancelled"
		return task, nil
	}
	switch st.State {
	case durable.StateAwaitingResume:
		reqs, err := s.bridge.Requests(ctx, t.MachineID)
		if err != nil {
			return Task{}, err
		}
		task.Status, task.InputRequests = TaskInputRequired, inputRequests(reqs, nil)
		task.StatusMessage = fmt.Sprintf("machine %s waits for %d answer(s)", t.MachineID, len(reqs))
	case durable.StateDone:
		task.Status = TaskCompleted
		task.Result, err = json.Marshal(replyResult(t.MachineID, st.LastText, nil))
	case durable.StateParked:
		task.Status, task.StatusMessage = TaskFailed, "the machine's run was given up"
		task.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: cmp.Or(strings.Join(st.Errors, "; "), "the run was given up")}
	case durable.StateIdle:
		if f, ok := s.tasks.faults.Load(t.MachineID); ok {
			task.Status = TaskCompleted
			task.Result, err = json.Marshal(f)
		} else {
			task.StatusMessage = "the run was cut short; it continues when a server on the store starts"
		}
	}
	return task, err
}

// taskParams are the params of the extension's requests.
type taskParams struct {
	TaskID         string               `json:"taskId"`
	InputResponses sdk.InputResponseMap `json:"inputResponses"`
	Meta           requestMeta          `json:"_meta"`
}

// requestMeta is the part of a request's _meta the extension reads.
type requestMeta struct {
	Capabilities *struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	} `json:"io.modelcontextprotocol/clientCapabilities"`
}

// declares reports whether m declares the tasks extension.
func (m requestMeta) declares() bool {
	if m.Capabilities == nil {
		return false
	}
	_, ok := m.Capabilities.Extensions[TasksExtension]
	return ok
}

// isTaskMethod reports whether method is one of the extension's.
func isTaskMethod(method string) bool {
	return method == methodTaskGet || method == methodTaskUpdate || method == methodTaskCancel
}

// serveTask answers req, a request of the extension.
func (s *Server) serveTask(ctx context.Context, req *jsonrpc.Request) *jsonrpc.Response {
	res, err := s.taskRequest(ctx, req)
	if err != nil {
		var we *jsonrpc.Error
		if !errors.As(err, &we) {
			s.logger.Error("mcp: "+req.Method, "error", err)
			we = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		}
		return &jsonrpc.Response{ID: req.ID, Error: we}
	}
	b, err := json.Marshal(res)
	if err != nil {
		return &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}}
	}
	return &jsonrpc.Response{ID: req.ID, Result: b}
}

// ack is the empty result of tasks/update and tasks/cancel.
type ack struct {
	ResultType string `json:"resultType"`
}

// taskRequest is the result of req, a request of the extension, or its
// error (a *jsonrpc.Error for the client's mistakes).
func (s *Server) taskRequest(ctx context.Context, req *jsonrpc.Request) (any, error) {
	var p taskParams
	params := req.Params
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, invalidParams("params: %v", err)
	}
	if !p.Meta.declares() {
		data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{TasksExtension: map[string]any{}}}})
		return nil, &jsonrpc.Error{Code: codeMissingCapability, Message: "Missing required client capability: " + TasksExtension, Data: data}
	}
	if p.TaskID == "" {
		return nil, invalidParams("taskId is required")
	}
	t, err := s.bridge.OpenTask(p.TaskID)
	if errors.Is(err, bridge.ErrTokenExpired) {
		return nil, invalidParams("taskId: task has expired: %v", err)
	} else if err != nil {
		return nil, invalidParams("taskId: task not found: %v", err)
	}
	switch req.Method {
	case methodTaskGet:
		return s.describe(ctx, p.TaskID, t)
	case methodTaskUpdate:
		return ack{"complete"}, s.update(ctx, t, p.InputResponses)
	default:
		return ack{"complete"}, s.cancelTask(ctx, t)
	}
}

// update applies the answers of a tasks/update to task t's machine:
// answers for suspensions that are not pending are ignored; the others
// are checked against their forms and schemas first, and one refused
// refuses the update with nothing consumed. Each accepted input is saved
// before update returns; the run goes on in the background.
func (s *Server) update(ctx context.Context, t bridge.Task, responses sdk.InputResponseMap) error {
	if _, err := s.runner.Status(ctx, t.MachineID); errors.Is(err, store.ErrNotFound) {
		return invalidParams("taskId: unknown task: its machine %s is gone", t.MachineID)
	}
	reqs, err := s.bridge.Requests(ctx, t.MachineID)
	if err != nil {
		return err
	}
	c := bridge.Continuation{MachineID: t.MachineID}
	for _, r := range reqs {
		c.SuspendIDs = append(c.SuspendIDs, r.SuspendID)
	}
	maps.DeleteFunc(responses, func(id string, _ sdk.InputResponse) bool { return !slices.Contains(c.SuspendIDs, id) })
	applied, violations, err := s.answers(ctx, c, reqs, responses)
	if err != nil {
		return err
	}
	if len(violations) > 0 {
		var msgs []string
		for _, id := range slices.Sorted(maps.Keys(violations)) {
			msgs = append(msgs, id+": the answer was refused: "+violations[id])
		}
		return invalidParams("inputResponses: %s", strings.Join(msgs, "; "))
	}
	for _, in := range applied.Inputs {
		if err := s.accept(ctx, in); err != nil {
			return err
		}
	}
	return nil
}

// cancelTask cancels the pending suspensions of task t's machine.
func (s *Server) cancelTask(ctx context.Context, t bridge.Task) error {
	if _, err := s.runner.Status(ctx, t.MachineID); errors.Is(err, store.ErrNotFound) {
		return invalidParams("taskId: unknown task: its machine %s is gone", t.MachineID)
	}
	reqs, err := s.bridge.Requests(ctx, t.MachineID)
	if err != nil {
		return err
	}
	for _, r := range reqs {
		if err := s.accept(ctx, machine.CancelInput{SuspendID: r.SuspendID, Reason: TaskCancelReason, By: ResumedBy}); err != nil {
			return err
		}
	}
	return nil
}

// accept saves input in, a resume or a cancellation, and leaves its run
// to the runner's background; a suspension resolved meanwhile (another
// answer was first) is no error.
func (s *Server) accept(ctx context.Context, in machine.Input) error {
	var err error
	switch in := in.(type) {
	case machine.ResumeInput:
		_, err = s.runner.AcceptResume(ctx, in)
	case machine.CancelInput:
		_, err = s.runner.AcceptCancel(ctx, in)
	}
	if errors.Is(err, instance.ErrAlreadyResolved) || errors.Is(err, instance.ErrUnknownSuspendID) {
		return nil
	}
	return err
}

// createTaskResult is the CreateTaskResult a tool handler's result
// carries under taskMeta, if it carries one.
func createTaskResult(result json.RawMessage) (json.RawMessage, bool) {
	if !bytes.Contains(result, []byte(taskMeta)) {
		return nil, false
	}
	var r struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(result, &r) != nil {
		return nil, false
	}
	t, ok := r.Meta[taskMeta]
	return t, ok
}

// taskTransport is a transport whose connections answer the extension's
// requests and turn a task a tool handler returned into its
// CreateTaskResult.
type taskTransport struct {
	sdk.Transport
	s *Server
}

// Connect connects the underlying transport.
func (t *taskTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &taskConn{Connection: c, s: t.s}, nil
}

// taskConn is a connection of a taskTransport.
type taskConn struct {
	sdk.Connection
	s *Server
}

// Read returns the next message that is not a request of the extension;
// those it answers itself, each on a goroutine of its own.
func (c *taskConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			return nil, err
		}
		req, ok := msg.(*jsonrpc.Request)
		if !ok || !isTaskMethod(req.Method) {
			return msg, nil
		}
		if !req.IsCall() {
			continue // a notification: nothing to answer
		}
		c.s.tasks.wg.Go(func() {
			if err := c.Connection.Write(ctx, c.s.serveTask(ctx, req)); err != nil {
				c.s.logger.Warn("mcp: answer "+req.Method, "error", err)
			}
		})
	}
}

// Write writes msg, a call's response with the CreateTaskResult of the
// task its handler returned.
func (c *taskConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if resp, ok := msg.(*jsonrpc.Response); ok && resp.Error == nil {
		if t, ok := createTaskResult(resp.Result); ok {
			msg = &jsonrpc.Response{ID: resp.ID, Result: t, Extra: resp.Extra}
		}
	}
	return c.Connection.Write(ctx, msg)
}

// maxTaskBody is the largest request body the HTTP layer reads to tell a
// request of the extension, or a call that may be answered with a task:
// a larger one goes to the SDK as it is.
const maxTaskBody = 4 << 20

// taskHandler is the HTTP layer of the extension: it answers the
// extension's requests, serves a call that declares the extension with
// a JSON response (so its task can be put in), and passes the rest to
// the SDK's handler as they are.
type taskHandler struct {
	s               *Server
	plain, buffered http.Handler
}

func (h *taskHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		h.plain.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxTaskBody+1))
	r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
	if err != nil || len(body) > maxTaskBody {
		h.plain.ServeHTTP(w, r)
		return
	}
	msg, err := jsonrpc.DecodeMessage(body)
	req, ok := msg.(*jsonrpc.Request)
	switch {
	case err != nil || !ok:
		h.plain.ServeHTTP(w, r)
	case isTaskMethod(req.Method):
		h.answer(w, r, req)
	case req.Method == "tools/call" && declaresParams(req.Params):
		h.call(w, r)
	default:
		h.plain.ServeHTTP(w, r)
	}
}

// answer writes the response to req, a request of the extension.
func (h *taskHandler) answer(w http.ResponseWriter, r *http.Request, req *jsonrpc.Request) {
	if !req.IsCall() {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	b, err := jsonrpc.EncodeMessage(h.s.serveTask(r.Context(), req))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// call serves a call that declares the extension: the SDK's JSON
// response, with the CreateTaskResult of a task put in.
func (h *taskHandler) call(w http.ResponseWriter, r *http.Request) {
	rec := &recorder{header: http.Header{}, code: http.StatusOK}
	h.buffered.ServeHTTP(rec, r)
	body := rec.body.Bytes()
	if rec.code == http.StatusOK && strings.HasPrefix(rec.header.Get("Content-Type"), "application/json") {
		if msg, err := jsonrpc.DecodeMessage(body); err == nil {
			if resp, ok := msg.(*jsonrpc.Response); ok && resp.Error == nil {
				if t, ok := createTaskResult(resp.Result); ok {
					if b, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: resp.ID, Result: t}); err == nil {
						body = b
					}
				}
			}
		}
	}
	maps.Copy(w.Header(), rec.header)
	w.Header().Del("Content-Length")
	w.WriteHeader(rec.code)
	_, _ = w.Write(body)
}

// declaresParams reports whether a request's params declare the tasks
// extension in their per-request capabilities.
func declaresParams(params json.RawMessage) bool {
	var p struct {
		Meta requestMeta `json:"_meta"`
	}
	return json.Unmarshal(params, &p) == nil && p.Meta.declares()
}

// recorder is a response writer that keeps the response.
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) WriteHeader(code int)        { r.code = code }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
