package a2a

// This file is the client half of the package: a remote A2A agent called
// as a tool (Remote, Tool, PackTool), whose long waits suspend the call
// durably. See docs/A2A.md.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/errtext"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store"
)

// Defaults of Config's zero fields.
const (
	DefaultWait            = 5 * time.Second
	DefaultPollMin         = 2 * time.Second
	DefaultPollMax         = 5 * time.Minute
	DefaultMaxPollFailures = 10
	DefaultCallTimeout     = 30 * time.Second
)

// maxResult is the size, in bytes, of the largest result taken from a
// remote agent; a larger one is an error result.
const maxResult = 1 << 20

// Config says how to reach one remote A2A agent and how to wait for its
// tasks.
type Config struct {
	// Name names the agent in metadata and logs, and is the tool's name
	// unless Tool is set: a valid node.ValidName. Required.
	Name string
	// Tool is the tool's name (Name if empty); Description its
	// description for the model (the agent card's description and skills
	// if empty).
	Tool        string
	Description string

	// URL is the agent's base URL: its card is read from
	// URL + CardPath (/.well-known/agent-card.json if empty). Card, when
	// set, is used instead, and URL may be empty.
	URL      string
	CardPath string
	Card     *sdk.AgentCard

	// Header is sent with every request (the card's too), and
	// "Authorization: Bearer <Bearer>" when Bearer is set.
	Header http.Header
	Bearer string
	// HTTPClient makes the requests. Nil means a client that connects to
	// public addresses only — not loopback, private, link-local or
	// unspecified ones, checked after name resolution — unless
	// AllowPrivate; its timeout is CallTimeout. A client given here is
	// used as it is: its own checks apply.
	HTTPClient   *http.Client
	AllowPrivate bool

	// PushURL is where the agent is to post push notifications for the
	// tasks of this tool's calls: the URL at which PushHandler is mounted.
	// Empty, or an agent whose card offers no push notifications: the
	// calls poll instead. It must be an absolute http(s) URL, and name no
	// private host literally unless AllowPrivate.
	PushURL string

	// Wait is how long a call waits, in the call, for a task to finish
	// (or ask for input) before it suspends (DefaultWait if zero).
	Wait time.Duration
	// PollMin and PollMax bound the backoff of the polls (tasks/get) of a
	// suspended call: the first after PollMin, each next twice as late,
	// at most PollMax apart (DefaultPollMin, DefaultPollMax if zero).
	// With push notifications the polls are PollMax apart: they only
	// catch a notification that was lost.
	PollMin, PollMax time.Duration
	// MaxPollFailures is how many polls in a row may fail (the agent is
	// down, or answers garbage) before the call gives up with an error
	// result (DefaultMaxPollFailures if zero).
	MaxPollFailures int
	// CallTimeout bounds every request to the agent (DefaultCallTimeout
	// if zero).
	CallTimeout time.Duration
	// Logger receives the client's log (slog.Default() if nil).
	Logger *slog.Logger
}

// Remote is a remote A2A agent, called through the official Go SDK's
// client, made from the agent's card when first needed. One Remote
// serves every machine of the process; it is safe for concurrent use.
type Remote struct {
	cfg  Config
	log  *slog.Logger
	http *http.Client

	mu     sync.Mutex
	card   *sdk.AgentCard
	client *a2aclient.Client
}

// NewRemote returns the remote agent cfg describes; it reads the card on
// first use. A Config it cannot use fails with ErrInvalidConfig (or
// ErrForbiddenAddress for a PushURL naming a private host).
func NewRemote(cfg Config) (*Remote, error) {
	if cfg.Tool == "" {
		cfg.Tool = cfg.Name
	}
	switch {
	case !node.ValidName(cfg.Name):
		return nil, fmt.Errorf("%w: Name %q is not a valid name", ErrInvalidConfig, cfg.Name)
	case !node.ValidName(cfg.Tool):
		return nil, fmt.Errorf("%w: Tool %q is not a valid name", ErrInvalidConfig, cfg.Tool)
	case cfg.URL == "" && cfg.Card == nil:
		return nil, fmt.Errorf("%w: agent %s: set URL or Card", ErrInvalidConfig, cfg.Name)
	case cfg.Wait < 0 || cfg.PollMin < 0 || cfg.PollMax < 0 || cfg.MaxPollFailures < 0 || cfg.CallTimeout < 0:
		return nil, fmt.Errorf("%w: agent %s: Wait, PollMin, PollMax, MaxPollFailures and CallTimeout must not be negative", ErrInvalidConfig, cfg.Name)
	}
	if cfg.URL != "" {
		if err := checkURL("URL", cfg.URL, cfg.AllowPrivate); err != nil {
			return nil, err
		}
	}
	if cfg.PushURL != "" {
		if err := checkURL("PushURL", cfg.PushURL, cfg.AllowPrivate); err != nil {
			return nil, err
		}
	}
	cfg.Wait = cmpOr(cfg.Wait, DefaultWait)
	cfg.PollMin = cmpOr(cfg.PollMin, DefaultPollMin)
	cfg.PollMax = max(cmpOr(cfg.PollMax, DefaultPollMax), cfg.PollMin)
	cfg.MaxPollFailures = cmpOr(cfg.MaxPollFailures, DefaultMaxPollFailures)
	cfg.CallTimeout = cmpOr(cfg.CallTimeout, DefaultCallTimeout)
	r := &Remote{cfg: cfg, log: cfg.Logger, http: cfg.HTTPClient}
	if r.log == nil {
		r.log = slog.Default()
	}
	r.log = r.log.With("a2a_agent", cfg.Name)
	if r.http == nil {
		r.http = guardedClient(cfg.CallTimeout)
		if cfg.AllowPrivate {
			r.http = &http.Client{Timeout: cfg.CallTimeout}
		}
	}
	return r, nil
}

// cmpOr returns v, or def when v is zero.
func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Name returns the agent's name (Config.Name).
func (r *Remote) Name() string { return r.cfg.Name }

// Request is a tool call's input: the message for the remote agent.
type Request struct {
	Message string         `json:"message" jsonschema:"the message for the agent"`
	Data    map[string]any `json:"data,omitempty" jsonschema:"structured data sent with the message, if the agent takes any"`
}

// TaskMetadata is the metadata of a suspension waiting on a remote task:
// enough for a person to see what the agent asks, and for any process to
// take the call up again.
type TaskMetadata struct {
	// Remote is the agent's Config.Name, Agent its name on its card.
	Remote string `json:"remote"`
	Agent  string `json:"agent,omitempty"`
	// TaskID and ContextID name the remote task.
	TaskID    string `json:"task_id"`
	ContextID string `json:"context_id,omitempty"`
	// State is the task's state when the call suspended, as A2A names it
	// (TASK_STATE_INPUT_REQUIRED, TASK_STATE_AUTH_REQUIRED,
	// TASK_STATE_WORKING, ...).
	State string `json:"state"`
	// Question is the agent's status message: what it asks, for an
	// input-required or auth-required task.
	Question string `json:"question,omitempty"`
	// Answer marks a question: the payload is the answer, sent on to the
	// task. A suspension without it waits for the task, and takes any
	// payload as a nudge to look at the task now.
	Answer bool `json:"answer,omitempty"`
	// Asked identifies the last question asked (its status message's ID,
	// or its time): a task that still shows it after the answer was sent
	// has not taken the answer up yet.
	Asked string `json:"asked,omitempty"`
	// Event is the event a push notification for the task signals (empty
	// without push notifications).
	Event string `json:"event,omitempty"`
	// Polls counts the polls since the state last changed; Failures the
	// failed polls in a row.
	Polls    int `json:"polls,omitempty"`
	Failures int `json:"failures,omitempty"`
}

// wake is the payload that wakes a waiting call: a poll (its deadline's
// on-timeout payload) or a push notification (the signal's payload).
type wake struct {
	Poll   bool   `json:"poll,omitempty"`
	TaskID string `json:"task_id,omitempty"`
	State  string `json:"state,omitempty"`
}

// Tool returns the remote agent as a tool of nodes with state S, reading
// its card first (for the description). A call sends the model's message
// to the agent; see docs/A2A.md for how it waits.
func Tool[S any](ctx context.Context, r *Remote) (node.Tool[S], error) {
	desc, err := r.description(ctx)
	if err != nil {
		return node.Tool[S]{}, err
	}
	return node.NewTool(r.cfg.Tool, desc,
		func(ctx *node.ToolContext[S], in Request) (string, error) {
			return r.finish(ctx.Suspend, r.first(ctx, ctx.IdempotencyKey(), in))
		},
		node.OnResume(func(ctx *node.ToolContext[S], _ Request, res node.Resumed[json.RawMessage]) (string, error) {
			return r.finish(ctx.Suspend, r.resume(ctx, res.Resolution))
		})), nil
}

// PackTool is Tool for a pack with state P: every node that opts into
// the pack (node.NewPack) can call the agent.
func PackTool[P any](ctx context.Context, r *Remote) (node.PackTool[P], error) {
	desc, err := r.description(ctx)
	if err != nil {
		return node.PackTool[P]{}, err
	}
	return node.NewPackTool(r.cfg.Tool, desc,
		func(ctx *node.PackContext[P], in Request) (string, error) {
			return r.finish(ctx.Suspend, r.first(ctx, ctx.IdempotencyKey(), in))
		},
		node.OnPackResume(func(ctx *node.PackContext[P], _ Request, res node.Resumed[json.RawMessage]) (string, error) {
			return r.finish(ctx.Suspend, r.resume(ctx, res.Resolution))
		})), nil
}

// description returns the tool's description: Config.Description, or
// the card's description and skills.
func (r *Remote) description(ctx context.Context) (string, error) {
	_, card, err := r.connect(ctx)
	if err != nil {
		return "", err
	}
	if r.cfg.Description != "" {
		return r.cfg.Description, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Send a message to the remote agent %s", card.Name)
	if card.Description != "" {
		fmt.Fprintf(&b, ": %s", card.Description)
	}
	for _, s := range card.Skills {
		fmt.Fprintf(&b, "\n- %s: %s", s.Name, s.Description)
	}
	return b.String(), nil
}

// connect returns the client and the card, reading the card and making
// the client first when there is none.
func (r *Remote) connect(ctx context.Context) (*a2aclient.Client, *sdk.AgentCard, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.client != nil {
		return r.client, r.card, nil
	}
	card := r.cfg.Card
	if card == nil {
		var opts []agentcard.ResolveOption
		if r.cfg.CardPath != "" {
			opts = append(opts, agentcard.WithPath(r.cfg.CardPath))
		}
		for k, h := range r.headers() {
			for _, v := range h {
				opts = append(opts, agentcard.WithRequestHeader(k, v))
			}
		}
		var err error
		card, err = (&agentcard.Resolver{Client: r.http}).Resolve(ctx, r.cfg.URL, opts...)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %s: agent card: %v", ErrRemote, r.cfg.Name, err)
		}
	}
	c, err := a2aclient.NewFromCard(ctx, card,
		a2aclient.WithJSONRPCTransport(r.http), a2aclient.WithRESTTransport(r.http),
		a2aclient.WithCallInterceptors(headerInterceptor{h: r.headers()}))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %v", ErrRemote, r.cfg.Name, err)
	}
	r.card, r.client = card, c
	return c, card, nil
}

// headers returns the headers every request carries.
func (r *Remote) headers() http.Header {
	h := r.cfg.Header.Clone()
	if r.cfg.Bearer != "" {
		if h == nil {
			h = http.Header{}
		}
		h.Set("Authorization", "Bearer "+r.cfg.Bearer)
	}
	return h
}

// headerInterceptor adds h to every request of the client, as service
// parameters (HTTP headers in the HTTP bindings).
type headerInterceptor struct {
	a2aclient.PassthroughInterceptor
	h http.Header
}

func (i headerInterceptor) Before(ctx context.Context, req *a2aclient.Request) (context.Context, any, error) {
	for k, v := range i.h {
		req.ServiceParams.Append(k, v...)
	}
	return ctx, nil, nil
}

// outcome is what one step of a call came to: a result, a suspension to
// ask for, or an error result.
type outcome struct {
	text string
	err  error
	wait *waitFor
}

// waitFor is a suspension a call asks for.
type waitFor struct {
	reason string
	meta   TaskMetadata
	opts   []instance.SuspendOption
}

// suspendFunc is a tool context's Suspend.
type suspendFunc func(reason string, opts ...instance.SuspendOption) error

// finish returns o as a tool handler does, suspending through suspend.
func (r *Remote) finish(suspend suspendFunc, o outcome) (string, error) {
	if o.wait == nil {
		return o.text, o.err
	}
	opts := append([]instance.SuspendOption{instance.WithMetadata(o.wait.meta), instance.WithID(suspendID(o.wait.meta.TaskID))}, o.wait.opts...)
	return "", suspend(o.wait.reason, opts...)
}

// first is a call's first step: it sends the message, registering a push
// notification config when push notifications are on, and waits a
// little for the task.
func (r *Remote) first(ctx context.Context, key string, in Request) outcome {
	c, card, err := r.connect(ctx)
	if err != nil {
		return outcome{err: err}
	}
	meta := TaskMetadata{Remote: r.cfg.Name, Agent: card.Name}
	parts := []*sdk.Part{sdk.NewTextPart(in.Message)}
	if len(in.Data) > 0 {
		parts = append(parts, sdk.NewDataPart(in.Data))
	}
	msg := sdk.NewMessage(sdk.MessageRoleUser, parts...)
	if key != "" {
		msg.ID = key // a retry of the call sends the same message
	}
	req := &sdk.SendMessageRequest{Message: msg, Config: &sdk.SendMessageConfig{ReturnImmediately: true}}
	if r.cfg.PushURL != "" && card.Capabilities.PushNotifications {
		token := rand.Text()
		meta.Event = pushEvent(token)
		req.Config.PushConfig = &sdk.PushConfig{URL: r.cfg.PushURL, Token: token}
	}
	return r.send(ctx, c, meta, req)
}

// send sends req and settles the call with the task it starts or
// continues.
func (r *Remote) send(ctx context.Context, c *a2aclient.Client, meta TaskMetadata, req *sdk.SendMessageRequest) outcome {
	res, err := r.sendMessage(ctx, c, req)
	for delay := inProgressDelay; err != nil && inProgress(err) && delay <= maxInProgressDelay; delay *= 2 {
		// The agent is still ending the task's previous execution (it
		// asked for input a moment ago): it took nothing; send again.
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return outcome{err: ctx.Err()}
		case <-t.C:
		}
		res, err = r.sendMessage(ctx, c, req)
	}
	if err != nil {
		return outcome{err: r.fault("send the message", err)}
	}
	switch v := res.(type) {
	case *sdk.Message:
		return r.result(messageText(v))
	case *sdk.Task:
		return r.settle(ctx, c, meta, v)
	}
	return outcome{err: fmt.Errorf("%w: %s: an answer that is neither a task nor a message", ErrRemote, r.cfg.Name)}
}

// The waits before a message the agent refused as "task execution is
// already in progress" is sent again: 50 ms, doubling, 1.6 s at most
// (3.15 s in all).
const (
	inProgressDelay    = 50 * time.Millisecond
	maxInProgressDelay = 1600 * time.Millisecond
)

// sendMessage sends req once, within Config.CallTimeout.
func (r *Remote) sendMessage(ctx context.Context, c *a2aclient.Client, req *sdk.SendMessageRequest) (sdk.SendMessageResult, error) {
	cctx, cancel := context.WithTimeout(ctx, r.cfg.CallTimeout)
	defer cancel()
	return c.SendMessage(cctx, req)
}

// inProgress reports whether err is an agent's refusal of a message for
// a task whose previous execution is still ending — a2a-go's servers
// answer "task execution is already in progress" for a moment after a
// task asked for input — which took nothing, so the message may be sent
// again. The SDK does not export the error, so its text tells.
func inProgress(err error) bool {
	return strings.Contains(err.Error(), "task execution is already in progress")
}

// settle waits up to Config.Wait for task to finish or ask for input,
// polling, then decides.
func (r *Remote) settle(ctx context.Context, c *a2aclient.Client, meta TaskMetadata, task *sdk.Task) outcome {
	deadline := time.Now().Add(r.cfg.Wait)
	for delay := 50 * time.Millisecond; running(meta, task); delay *= 2 {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		t := time.NewTimer(min(delay, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return outcome{err: ctx.Err()}
		case <-t.C:
		}
		next, err := r.get(ctx, c, task.ID)
		if err != nil {
			break // the suspension's polls try again
		}
		task = next
	}
	return r.decide(meta, task)
}

// running reports whether task goes on by itself: it works, or it still
// shows the question meta says was answered.
func running(meta TaskMetadata, task *sdk.Task) bool {
	switch s := task.Status.State; s {
	case sdk.TaskStateSubmitted, sdk.TaskStateWorking, sdk.TaskStateUnspecified:
		return true
	case sdk.TaskStateInputRequired:
		return meta.Asked != "" && asked(task) == meta.Asked
	}
	return false
}

// asked identifies the status of task: its message's ID, or its time.
func asked(task *sdk.Task) string {
	if m := task.Status.Message; m != nil && m.ID != "" {
		return m.ID
	}
	if ts := task.Status.Timestamp; ts != nil {
		return ts.UTC().Format(time.RFC3339Nano)
	}
	return ""
}

// get is tasks/get.
func (r *Remote) get(ctx context.Context, c *a2aclient.Client, id sdk.TaskID) (*sdk.Task, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.CallTimeout)
	defer cancel()
	task, err := c.GetTask(ctx, &sdk.GetTaskRequest{ID: id})
	switch {
	case err != nil:
		return nil, r.fault("get task "+string(id), err)
	case task == nil || task.ID != id:
		return nil, fmt.Errorf("%w: %s: tasks/get for %s answered another task", ErrRemote, r.cfg.Name, id)
	}
	return task, nil
}

// decide turns the task's state into the call's outcome: its result, an
// error result, or a suspension — a question for input-required, a wait
// otherwise.
func (r *Remote) decide(meta TaskMetadata, task *sdk.Task) outcome {
	state := task.Status.State
	stale := running(meta, task)
	if string(state) != meta.State {
		meta.Polls = 0
	}
	meta.TaskID, meta.ContextID, meta.State = string(task.ID), task.ContextID, string(state)
	meta.Question = statusText(task.Status.Message)
	who := meta.Agent
	if who == "" {
		who = r.cfg.Name
	}
	switch state {
	case sdk.TaskStateCompleted:
		return r.result(taskText(task))
	case sdk.TaskStateFailed, sdk.TaskStateRejected, sdk.TaskStateCanceled:
		verb := map[sdk.TaskState]string{sdk.TaskStateFailed: "failed", sdk.TaskStateRejected: "rejected", sdk.TaskStateCanceled: "cancelled"}[state]
		return outcome{err: errors.New(strings.TrimSuffix(fmt.Sprintf("the agent %s %s the task: %s", who, verb, meta.Question), ": "))}
	case sdk.TaskStateInputRequired:
		if stale {
			return r.waiting(fmt.Sprintf("waiting for the agent %s to take the answer up", who), meta)
		}
		meta.Asked, meta.Answer = asked(task), true
		w := &waitFor{reason: fmt.Sprintf("the agent %s asks: %s", who, cmpOr(meta.Question, "(no question given)")), meta: meta}
		if schema := askedSchema(task.Status.Message); schema != nil {
			w.opts = append(w.opts, instance.WithPayloadSchema(schema))
		}
		return outcome{wait: w}
	}
	reason := fmt.Sprintf("waiting for the agent %s to finish its task", who)
	if state == sdk.TaskStateAuthRequired {
		reason = fmt.Sprintf("the agent %s waits for an authorization: %s", who, cmpOr(meta.Question, "(no detail given)"))
	}
	return r.waiting(reason, meta)
}

// waiting returns the suspension of a call waiting for its task to go
// on: woken by the task's push notification (meta.Event), or by the next
// poll at its deadline.
func (r *Remote) waiting(reason string, meta TaskMetadata) outcome {
	meta.Answer = false
	delay := r.cfg.PollMax
	if meta.Event == "" {
		delay = r.cfg.PollMin << min(meta.Polls, 30)
		if delay <= 0 || delay > r.cfg.PollMax {
			delay = r.cfg.PollMax
		}
	}
	w := &waitFor{reason: reason, meta: meta, opts: []instance.SuspendOption{
		instance.WithTimeout(delay), instance.OnTimeoutResume(wake{Poll: true}, false)}}
	if meta.Event != "" {
		w.opts = append(w.opts, instance.WithEvent(meta.Event))
	}
	return outcome{wait: w}
}

// resume takes a suspended call up again: a poll or a push notification
// looks at the task; an answer to a question goes to the task; an error
// resolution abandons it (and cancels the task).
func (r *Remote) resume(ctx context.Context, res instance.Resolution) outcome {
	meta, err := instance.Decode[TaskMetadata](res.Metadata)
	if err != nil {
		return outcome{err: fmt.Errorf("a2a suspension metadata: %w", err)}
	}
	c, _, err := r.connect(ctx)
	if err != nil {
		if res.IsError || meta.Answer {
			return outcome{err: err}
		}
		return r.retry(meta, err)
	}
	switch {
	case res.IsError:
		r.cancel(ctx, c, sdk.TaskID(meta.TaskID))
		return outcome{err: errors.New(strings.TrimSuffix("the call to the agent "+r.cfg.Name+" was abandoned: "+res.Text(), ": "))}
	case meta.Answer:
		msg := sdk.NewMessage(sdk.MessageRoleUser, answerPart(res.Payload))
		msg.TaskID, msg.ContextID = sdk.TaskID(meta.TaskID), meta.ContextID
		return r.send(ctx, c, meta, &sdk.SendMessageRequest{Message: msg, Config: &sdk.SendMessageConfig{ReturnImmediately: true}})
	}
	meta.Polls++
	task, err := r.get(ctx, c, sdk.TaskID(meta.TaskID))
	if err != nil {
		return r.retry(meta, err)
	}
	meta.Failures = 0
	return r.decide(meta, task)
}

// retry suspends the call again after a failed poll, or gives up with an
// error result after Config.MaxPollFailures in a row or when the agent
// says the task is gone.
func (r *Remote) retry(meta TaskMetadata, err error) outcome {
	meta.Failures++
	if meta.Failures > r.cfg.MaxPollFailures || final(err) {
		return outcome{err: fmt.Errorf("gave up on the task %s of the agent %s after %d failed polls: %w", meta.TaskID, r.cfg.Name, meta.Failures, err)}
	}
	r.log.Warn("a2a poll failed", "task", meta.TaskID, "failures", meta.Failures, "err", err)
	return r.waiting(fmt.Sprintf("waiting for the agent %s (the last poll failed: %s)", cmpOr(meta.Agent, r.cfg.Name), errtext.Clip(err.Error(), 200)), meta)
}

// final reports whether err is an answer no later poll changes: the task
// is unknown, or the client may not see it.
func final(err error) bool {
	for _, e := range []error{sdk.ErrTaskNotFound, sdk.ErrUnauthenticated, sdk.ErrUnauthorized, sdk.ErrMethodNotFound} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// cancel asks the agent to cancel task id, logging a failure: the call
// ends either way.
func (r *Remote) cancel(ctx context.Context, c *a2aclient.Client, id sdk.TaskID) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.CallTimeout)
	defer cancel()
	if _, err := c.CancelTask(ctx, &sdk.CancelTaskRequest{ID: id}); err != nil {
		r.log.Warn("a2a cancel failed", "task", id, "err", err)
	}
}

// fault turns err, met doing what, into an ErrRemote, keeping the SDK's
// error (errors.Is finds sdk.ErrTaskNotFound and the like).
func (r *Remote) fault(what string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %s: %s: no answer within %s", ErrRemote, r.cfg.Name, what, r.cfg.CallTimeout)
	}
	return fmt.Errorf("%w: %s: %s: %w", ErrRemote, r.cfg.Name, what, err)
}

// result is the outcome of a finished task whose text is text.
func (r *Remote) result(text string) outcome {
	if len(text) > maxResult {
		return outcome{err: fmt.Errorf("%w: %s: a result of %d bytes, over the limit of %d", ErrRemote, r.cfg.Name, len(text), maxResult)}
	}
	return outcome{text: text}
}

// CancelHook returns a charter hook (machine.Hooks.OnResolved) that
// cancels the remote task of a call of any of remotes whose suspension
// was cancelled (from resumehttp, the console, Runner.AcceptCancel): the
// cancellation resolves the call without its resume handler, so the
// hook is how the remote agent hears of it. A failed cancel is logged.
func CancelHook(remotes ...*Remote) func(context.Context, instance.Event) {
	return func(ctx context.Context, e instance.Event) {
		if e.Type != instance.EventCancelled {
			return
		}
		id, ok := taskOf(e.SuspendID)
		if !ok {
			return
		}
		for _, r := range remotes {
			if r.cfg.Tool != e.Name {
				continue
			}
			c, _, err := r.connect(ctx)
			if err != nil {
				r.log.Warn("a2a cancel failed", "task", id, "err", err)
				return
			}
			r.cancel(ctx, c, id)
			return
		}
	}
}

// suspendIDPrefix starts the suspend IDs of calls waiting on remote tasks.
const suspendIDPrefix = "a2a-"

// suspendID returns a new suspend ID for a call waiting on task: random,
// and naming the task (so that CancelHook, which sees only the ID, can
// cancel it) when that fits in store.MaxIDLen.
func suspendID(task string) string {
	id := suspendIDPrefix + rand.Text()[:16]
	if named := id + "-" + base64.RawURLEncoding.EncodeToString([]byte(task)); len(named) <= store.MaxIDLen {
		return named
	}
	return id
}

// taskOf returns the task a suspendID names.
func taskOf(id string) (sdk.TaskID, bool) {
	rest, ok := strings.CutPrefix(id, suspendIDPrefix)
	if !ok || len(rest) < 17 || rest[16] != '-' {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(rest[17:])
	if err != nil || len(b) == 0 {
		return "", false
	}
	return sdk.TaskID(b), true
}

// pushEvent returns the event a push notification carrying token
// signals. Only a hash of the token is kept (in the suspension's
// metadata), so whoever can read the metadata cannot forge a
// notification.
func pushEvent(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "a2a.push." + hex.EncodeToString(sum[:20])
}

// answerPart is the part that carries an answer: a JSON string's text as
// a text part, any other JSON value as a data part.
func answerPart(payload json.RawMessage) *sdk.Part {
	var s string
	if json.Unmarshal(payload, &s) == nil {
		return sdk.NewTextPart(s)
	}
	var v any
	if json.Unmarshal(payload, &v) != nil {
		return sdk.NewTextPart(string(payload))
	}
	return sdk.NewDataPart(v)
}

// schemaKeys are the keys under which a question's data part may carry
// the JSON Schema of the answer.
var schemaKeys = []string{"schema", "payloadSchema", "payload_schema"}

// askedSchema returns the JSON Schema of the answer that the data part of
// an input-required status message carries, or nil.
func askedSchema(m *sdk.Message) json.RawMessage {
	if m == nil {
		return nil
	}
	for _, p := range m.Parts {
		d, ok := p.Content.(sdk.Data)
		if !ok {
			continue
		}
		obj, ok := d.Value.(map[string]any)
		if !ok {
			continue
		}
		for _, k := range schemaKeys {
			if s, ok := obj[k].(map[string]any); ok {
				if raw, err := json.Marshal(s); err == nil {
					return raw
				}
			}
		}
	}
	return nil
}

// statusText renders a status message for a person: its text parts, or
// all its parts when it has no text (a question's schema is not text).
func statusText(m *sdk.Message) string {
	if m == nil {
		return ""
	}
	var texts []*sdk.Part
	for _, p := range m.Parts {
		if p != nil && p.Text() != "" {
			texts = append(texts, p)
		}
	}
	if len(texts) == 0 {
		return partsText(m.Parts)
	}
	return partsText(texts)
}

// taskText renders a finished task for the model: its artifacts' parts,
// or its status message when it has no artifact.
func taskText(t *sdk.Task) string {
	var parts []string
	for _, a := range t.Artifacts {
		if a == nil {
			continue
		}
		if s := partsText(a.Parts); s != "" {
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return messageText(t.Status.Message)
	}
	return strings.Join(parts, "\n")
}

// messageText renders a message's parts (empty for nil).
func messageText(m *sdk.Message) string {
	if m == nil {
		return ""
	}
	return partsText(m.Parts)
}

// partsText renders parts: text as it is, data as JSON, a file as a line
// naming it.
func partsText(ps []*sdk.Part) string {
	var out []string
	for _, p := range ps {
		if p == nil {
			continue
		}
		switch c := p.Content.(type) {
		case sdk.Text:
			out = append(out, string(c))
		case sdk.Data:
			if raw, err := json.Marshal(c.Value); err == nil {
				out = append(out, string(raw))
			}
		case sdk.URL:
			out = append(out, fmt.Sprintf("[file %s %s %s]", p.Filename, p.MediaType, c))
		case sdk.Raw:
			out = append(out, fmt.Sprintf("[file %s %s, %d bytes]", p.Filename, p.MediaType, len(c)))
		}
	}
	return strings.Join(out, "\n")
}
