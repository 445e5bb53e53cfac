package mcp

// This file is the server direction: a charter served to MCP clients.
// Its suspensions go out as multi round-trip input requests through the
// protocol layer's suspension bridge (internal/bridge).

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/internal/bridge"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store"
)

// ConversationTool is the name of the tool that sends a user message to a
// machine and returns its answer.
const ConversationTool = "send_message"

// ResumedBy is the attribution (instance.Event.By) of the resumes and
// cancellations an MCP client's answers make.
const ResumedBy = "mcp"

// ServerConfig configures a Server.
type ServerConfig struct {
	// Runner runs the machines the server serves. Required.
	Runner *durable.Runner
	// Secret signs the requestState of input_required results
	// (HMAC-SHA256): at least 32 bytes. Required; every process serving
	// the same store needs the same secret.
	Secret []byte
	// Node is the node new conversations start at. Required.
	Node string
	// Name and Version are the server's implementation as clients see it
	// (the charter's name and "(devel)" when empty).
	Name, Version string
	// TokenTTL is how long a requestState, and a task ID, stays good (a
	// day when zero).
	TokenTTL time.Duration
	// Logger receives what the SDK's server logs (nothing when nil).
	Logger *slog.Logger
	// Now is the clock of requestState expiry (time.Now if nil).
	Now func() time.Time
	// TaskWait is how long a call of a client that declares the tasks
	// extension (TasksExtension) runs before it is answered with a task
	// that goes on working (DefaultTaskWait when zero; negative: at
	// once). A call that suspends is answered with a task at once.
	TaskWait time.Duration
	// PollInterval is the pollIntervalMs a task suggests
	// (DefaultPollInterval when zero).
	PollInterval time.Duration
}

// Server serves a charter to MCP clients: the conversation tool
// (ConversationTool) and one tool per command the charter declares. A
// run that suspends answers input_required: one form elicitation per
// pending suspension and a signed requestState; the client's retry
// resumes the suspensions with the answers and continues the run. See
// docs/MCP.md. It is safe for concurrent use, and holds nothing between
// calls: any process on the same store and secret takes a retry.
type Server struct {
	runner *durable.Runner
	node   string
	bridge *bridge.Bridge
	sdk    *sdk.Server
	logger *slog.Logger
	now    func() time.Time
	tasks  *taskRuns
}

// NewServer returns the server of cfg's charter, or an error wrapping
// ErrInvalidConfig.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.Runner == nil {
		return nil, fmt.Errorf("%w: no Runner", ErrInvalidConfig)
	}
	charter := cfg.Runner.Charter()
	if cfg.Node == "" || charter.Node(cfg.Node) == nil {
		return nil, fmt.Errorf("%w: Node %q is not a node of charter %s", ErrInvalidConfig, cfg.Node, charter.Name())
	}
	b, err := bridge.New(bridge.Config{Runner: cfg.Runner, Secret: cfg.Secret, TokenTTL: cfg.TokenTTL, Now: cfg.Now})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.TaskWait == 0 {
		cfg.TaskWait = DefaultTaskWait
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{runner: cfg.Runner, node: cfg.Node, bridge: b, logger: logger, now: cfg.Now,
		tasks: newTaskRuns(max(cfg.TaskWait, 0), cmp.Or(cfg.PollInterval, DefaultPollInterval), cmp.Or(cfg.TokenTTL, bridge.DefaultTokenTTL))}
	impl := &sdk.Implementation{Name: cmp.Or(cfg.Name, charter.Name()), Version: cmp.Or(cfg.Version, "(devel)")}
	caps := &sdk.ServerCapabilities{Logging: &sdk.LoggingCapabilities{}}
	caps.AddExtension(TasksExtension, map[string]any{})
	s.sdk = sdk.NewServer(impl, &sdk.ServerOptions{Logger: cfg.Logger, Capabilities: caps})
	s.sdk.AddTool(&sdk.Tool{
		Name:        ConversationTool,
		Description: "Send a user message to the agent and get its answer. Name the conversation (a key of your choice: the same key continues it) or a machine_id from an earlier answer; with neither, a new conversation starts.",
		InputSchema: json.RawMessage(conversationSchema),
	}, s.converse)
	for _, d := range charter.Commands() {
		if d.Name == ConversationTool {
			return nil, fmt.Errorf("%w: the charter's command %s has the conversation tool's name", ErrInvalidConfig, d.Name)
		}
		s.sdk.AddTool(&sdk.Tool{
			Name:        d.Name,
			Description: cmp.Or(d.Description, "The command "+d.Name+".") + " Runs on the machine machine_id with the command's input.",
			InputSchema: commandSchema(d.InputSchema),
		}, s.invoke(d.Name))
	}
	return s, nil
}

// MCP returns the SDK's server, without the tasks extension (the SDK
// refuses its methods): Run and Handler serve it with the extension.
func (s *Server) MCP() *sdk.Server { return s.sdk }

// Run serves the server on transport t — over stdio, &sdk.StdioTransport{}
// — until the client disconnects or ctx ends, with the tasks extension:
// the tasks/* requests are answered below the SDK's server, and a call
// answered with a task gets its CreateTaskResult.
func (s *Server) Run(ctx context.Context, t sdk.Transport) error {
	return s.sdk.Run(ctx, &taskTransport{Transport: t, s: s})
}

// Handler returns the Streamable HTTP handler of the server, in the SDK's
// stateless mode (no sessions: every request stands alone, as the
// 2026-07-28 protocol has it), with the tasks extension.
func (s *Server) Handler() http.Handler {
	get := func(*http.Request) *sdk.Server { return s.sdk }
	return &taskHandler{s: s,
		plain:    sdk.NewStreamableHTTPHandler(get, &sdk.StreamableHTTPOptions{Stateless: true, Logger: s.logger}),
		buffered: sdk.NewStreamableHTTPHandler(get, &sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true, Logger: s.logger}),
	}
}

// Close stops the runs of the tasks this server answered before they
// ended, and waits for them: each machine is left at its last save, and
// its next run (markov's recovery at a server's start) continues it. A
// process calls it on shutdown, after it stopped serving.
func (s *Server) Close() error {
	s.tasks.close()
	return nil
}

// conversationSchema is the conversation tool's input schema.
const conversationSchema = `{"type":"object","properties":{` +
	`"message":{"type":"string","description":"the user message"},` +
	`"conversation":{"type":"string","description":"a key naming the conversation: the same key continues it"},` +
	`"machine_id":{"type":"string","description":"the machine of an earlier answer"}},` +
	`"required":["message"],"additionalProperties":false}`

// conversationInput is the conversation tool's input.
type conversationInput struct {
	Message      string `json:"message"`
	Conversation string `json:"conversation"`
	MachineID    string `json:"machine_id"`
}

// commandInput is a command tool's input.
type commandInput struct {
	MachineID string          `json:"machine_id"`
	Input     json.RawMessage `json:"input"`
}

// commandSchema is the input schema of a command tool whose command
// takes input.
func commandSchema(input json.RawMessage) json.RawMessage {
	if len(input) == 0 {
		input = json.RawMessage(`{"type":"object"}`)
	}
	return json.RawMessage(`{"type":"object","properties":{` +
		`"machine_id":{"type":"string","description":"the machine to run the command on"},` +
		`"input":` + string(input) + `},"required":["machine_id"],"additionalProperties":false}`)
}

// ConversationID is the machine ID of conversation key: the same key
// names the same machine, in every process.
func ConversationID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "mcp_" + hex.EncodeToString(sum[:16])
}

// converse is the conversation tool.
func (s *Server) converse(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	var in conversationInput
	if err := decodeArgs(req.Params.Arguments, &in); err != nil {
		return errorResult(err.Error()), nil
	}
	if in.Message == "" && req.Params.RequestState == "" {
		return errorResult("message is required"), nil
	}
	if in.Conversation != "" && in.MachineID != "" {
		return errorResult("give conversation or machine_id, not both"), nil
	}
	if in.Conversation != "" {
		in.MachineID = ConversationID(in.Conversation)
	}
	if req.Params.RequestState != "" {
		return s.retry(ctx, req, in.MachineID)
	}
	switch {
	case in.Conversation != "":
		if _, err := s.runner.Create(ctx, in.MachineID, s.node, nil); err != nil && !errors.Is(err, store.ErrConflict) {
			return nil, err
		}
	case in.MachineID == "":
		id, err := s.runner.Create(ctx, "", s.node, nil)
		if err != nil {
			return nil, err
		}
		in.MachineID = id
	default:
		if _, _, err := s.runner.Load(ctx, in.MachineID); err != nil {
			return errorResult("machine_id " + in.MachineID + ": " + err.Error()), nil
		}
	}
	return s.finish(ctx, req, in.MachineID, s.runner.Run(s.runContext(ctx, req), in.MachineID, machine.UserText(in.Message)))
}

// invoke returns the tool of command name.
func (s *Server) invoke(name string) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		var in commandInput
		if err := decodeArgs(req.Params.Arguments, &in); err != nil {
			return errorResult(err.Error()), nil
		}
		if req.Params.RequestState != "" {
			return s.retry(ctx, req, in.MachineID)
		}
		if in.MachineID == "" {
			return errorResult("machine_id is required"), nil
		}
		inv := command.Invocation{Name: name}
		if len(in.Input) > 0 {
			inv.Input = in.Input
		}
		run, err := s.runner.Invoke(s.runContext(ctx, req), in.MachineID, inv)
		if err != nil {
			return errorResult(err.Error()), nil
		}
		return s.finish(ctx, req, in.MachineID, run.Steps())
	}
}

// decodeArgs decodes a tool's arguments into v, refusing unknown fields.
func decodeArgs(args json.RawMessage, v any) error {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("arguments: %w", err)
	}
	return nil
}

// invalidParams is the protocol error of a retry the server refuses.
func invalidParams(format string, args ...any) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(format, args...)}
}

// retry applies the answers of a client's retry (inputResponses and the
// echoed requestState) and continues the run. A requestState the bridge
// refuses, or one for another machine than the arguments name, is a
// protocol error; answers a schema refuses give input_required again,
// nothing consumed.
func (s *Server) retry(ctx context.Context, req *sdk.CallToolRequest, machineID string) (*sdk.CallToolResult, error) {
	c, err := s.bridge.Open(req.Params.RequestState)
	if err != nil {
		return nil, invalidParams("requestState: %v", err)
	}
	if machineID != "" && machineID != c.MachineID {
		return nil, invalidParams("requestState: issued for another machine than the arguments name")
	}
	reqs, err := s.bridge.Requests(ctx, c.MachineID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, invalidParams("requestState: machine %s: %v", c.MachineID, err)
	} else if err != nil {
		return nil, err
	}
	applied, violations, err := s.answers(ctx, c, reqs, req.Params.InputResponses)
	if err != nil {
		return nil, err
	}
	if len(violations) > 0 {
		return s.inputRequired(req, c.MachineID, reqs, violations)
	}
	var steps iter.Seq2[machine.Step, error]
	if len(applied.Inputs) > 0 {
		steps = s.runner.Run(s.runContext(ctx, req), c.MachineID, applied.Inputs...)
	}
	return s.finish(ctx, req, c.MachineID, steps)
}

// answers turns a client's inputResponses for the pending suspensions
// reqs into the machine's inputs, through the bridge: every answer is
// checked against its form and its schema first. The violations, by
// suspend ID, refuse the set (nothing is consumed); a response that is
// not an elicitation result, or for a suspension c does not name, is a
// protocol error.
func (s *Server) answers(ctx context.Context, c bridge.Continuation, reqs []bridge.Request, responses sdk.InputResponseMap) (bridge.Applied, map[string]string, error) {
	pending := map[string]bridge.Request{}
	for _, r := range reqs {
		pending[r.SuspendID] = r
	}
	violations := map[string]string{}
	var answers []bridge.Answer
	for id, resp := range responses {
		er, ok := resp.(*sdk.ElicitResult)
		if !ok {
			return bridge.Applied{}, nil, invalidParams("inputResponses[%s]: not an elicitation result", id)
		}
		a := bridge.Answer{SuspendID: id, Action: bridge.Action(er.Action)}
		if r, ok := pending[id]; ok && slices.Contains(c.SuspendIDs, id) && (a.Action == bridge.Accept || a.Action == "") {
			p, err := formFor(r.Schema).payload(er.Content)
			if err != nil {
				violations[id] = err.Error()
				continue
			}
			a.Payload = p
		}
		answers = append(answers, a)
	}
	applied, err := s.bridge.Inputs(ctx, c, answers, ResumedBy)
	if rej, ok := errors.AsType[*bridge.RejectedError](err); ok {
		for _, v := range rej.Violations {
			violations[v.SuspendID] = bridge.ViolationText(v.Err)
		}
	} else if errors.Is(err, bridge.ErrNotInToken) || errors.Is(err, bridge.ErrInvalidAnswer) {
		return bridge.Applied{}, nil, invalidParams("inputResponses: %v", err)
	} else if err != nil {
		return bridge.Applied{}, nil, err
	}
	return applied, violations, nil
}

// finish runs steps (nil: nothing to run) on machine id and answers the
// call: input_required when the machine has pending suspensions, its
// answer otherwise.
func (s *Server) finish(ctx context.Context, req *sdk.CallToolRequest, id string, steps iter.Seq2[machine.Step, error]) (*sdk.CallToolResult, error) {
	if steps != nil && declaresTasks(req) {
		return s.task(ctx, req, id, steps)
	}
	out, fault := collect(id, steps)
	if fault != nil {
		return fault, nil
	}
	return s.answer(ctx, req, id, out)
}

// collect runs steps (nil: nothing to run) on machine id: what they
// said, or the error result of a run that failed.
func collect(id string, steps iter.Seq2[machine.Step, error]) (runOutcome, *sdk.CallToolResult) {
	var out runOutcome
	if steps == nil {
		return out, nil
	}
	for st, err := range steps {
		if errors.Is(err, durable.ErrRejected) {
			break // another answer was first: show the current state
		}
		if err != nil {
			return out, errorResult(fmt.Sprintf("machine %s: %v", id, err))
		}
		out.step(st)
	}
	return out, nil
}

// answer is the result of a call whose run said out: input_required
// when machine id has pending suspensions, its answer otherwise.
func (s *Server) answer(ctx context.Context, req *sdk.CallToolRequest, id string, out runOutcome) (*sdk.CallToolResult, error) {
	m, _, err := s.runner.Load(ctx, id)
	if err != nil {
		return nil, err
	}
	if out.answer == "" {
		out.answer = bridge.LastAnswer(m.History())
	}
	if reqs, err := s.bridge.Requests(ctx, id); err != nil {
		return nil, err
	} else if len(reqs) > 0 {
		return s.inputRequired(req, id, reqs, nil)
	}
	return replyResult(id, out.answer, out.result), nil
}

// replyResult is the result of a call whose run on machine id ended with
// nothing pending: its answer, and a command's result.
func replyResult(id, answer string, result any) *sdk.CallToolResult {
	return &sdk.CallToolResult{
		Content:           []sdk.Content{&sdk.TextContent{Text: answer}},
		StructuredContent: Reply{MachineID: id, Answer: answer, Result: result},
	}
}

// Reply is the structured content of a call that ran to its end.
type Reply struct {
	// MachineID is the machine the call ran: name it (machine_id) to
	// continue.
	MachineID string `json:"machine_id"`
	// Answer is the text of the machine's last reply.
	Answer string `json:"answer"`
	// Result is a command's result, when the call ran one.
	Result any `json:"result,omitempty"`
}

// runOutcome is what a run's steps said.
type runOutcome struct {
	answer string
	result any
}

func (o *runOutcome) step(st machine.Step) {
	if a := bridge.LastAnswer(st.Messages); a != "" {
		o.answer = a
	}
	if st.Command != nil && st.Command.Suspension == nil {
		o.result = st.Command.Value
	}
}

// inputRequired is the input_required result of reqs, machine id's
// pending suspensions: one form elicitation per suspension, keyed by its
// suspend ID, its message the reason (and why the last answer was
// refused), and the signed requestState. A client of an older protocol
// is answered by the SDK's shim, which asks it with elicitation/create
// and calls the tool again once. When the shim cannot ask — the client
// declared no elicitation, or it is on stateless HTTP, where the server
// cannot send a request — or has asked already, the answer is a waiting
// result instead.
func (s *Server) inputRequired(req *sdk.CallToolRequest, id string, reqs []bridge.Request, violations map[string]string) (*sdk.CallToolResult, error) {
	if ip := req.Session.InitializeParams(); legacy(ip) && (req.Params.RequestState != "" || ip.Capabilities == nil || ip.Capabilities.Elicitation == nil) {
		return waiting(id, reqs, violations), nil
	}
	token, err := s.bridge.Token(id, reqs)
	if err != nil {
		return nil, err
	}
	return &sdk.CallToolResult{InputRequests: inputRequests(reqs, violations), RequestState: token}, nil
}

// inputRequests are the input requests of the pending suspensions reqs:
// one form elicitation per suspension, keyed by its suspend ID.
func inputRequests(reqs []bridge.Request, violations map[string]string) sdk.InputRequestMap {
	ir := sdk.InputRequestMap{}
	for _, r := range reqs {
		ir[r.SuspendID] = &sdk.ElicitParams{Mode: "form", Message: prompt(r, violations), RequestedSchema: formFor(r.Schema).schema}
	}
	return ir
}

// prompt is the elicitation message of r: its reason, and why the last
// answer was refused.
func prompt(r bridge.Request, violations map[string]string) string {
	msg := cmp.Or(r.Reason, r.Name+" needs an answer")
	if v, ok := violations[r.SuspendID]; ok {
		msg += "\n\nThe answer was refused: " + v
	}
	return msg
}

// legacy reports whether a client that initialized with ip speaks a
// protocol older than 2026-07-28 (no multi round-trip requests); a
// client of the 2026 protocol does not initialize.
func legacy(ip *sdk.InitializeParams) bool {
	return ip != nil && ip.ProtocolVersion != "" && ip.ProtocolVersion < mrtrVersion
}

// Waiting is the structured content of a call whose machine waits for
// input an older client cannot be asked for (see ServerConfig).
type Waiting struct {
	MachineID string    `json:"machine_id"`
	Status    string    `json:"status"` // "input_required"
	Pending   []Pending `json:"pending"`
}

// Pending is one suspension a Waiting result lists.
type Pending struct {
	SuspendID string          `json:"suspend_id"`
	Reason    string          `json:"reason"`
	Schema    json.RawMessage `json:"schema,omitempty"`
	Refused   string          `json:"refused,omitempty"`
}

// waiting is the result for an older client of a machine that waits.
func waiting(id string, reqs []bridge.Request, violations map[string]string) *sdk.CallToolResult {
	w := Waiting{MachineID: id, Status: "input_required"}
	lines := []string{"machine " + id + " waits for input:"}
	for _, r := range reqs {
		w.Pending = append(w.Pending, Pending{SuspendID: r.SuspendID, Reason: r.Reason, Schema: r.Schema, Refused: violations[r.SuspendID]})
		lines = append(lines, "- "+r.SuspendID+": "+prompt(r, violations))
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.Join(lines, "\n")}}, StructuredContent: w}
}

// errorResult is a tool error result with text msg.
func errorResult(msg string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: msg}}, IsError: true}
}
