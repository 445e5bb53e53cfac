// Package executor is the seam between the machine and what runs on one
// instance: a leaf's inference step (system prompt, tool list, model call,
// tool execution, suspension collection), a resolved tool call's resume
// handler, and a command. The machine owns the tree; an Executor never
// writes it and returns effects as data that the machine applies.
//
// New returns the standard implementation, which a charter uses unless
// machine.CharterConfig.Executor names another. A replacement usually wraps
// the standard one, to observe, limit or record what runs.
package executor

import (
	"context"
	"encoding/json"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/message"
)

// Executor runs the work of one instance for the machine: one inference
// step of one leaf, the resume handler of one resolved tool call, one
// command.
//
// The contract:
//
//   - Read-only inputs. A request's tree (Root and Instance, which is in
//     it), transcript and reply belong to the machine: an implementation
//     reads them during the call and neither modifies nor retains them.
//   - Effects as data. State updates, pack writes, transitions,
//     suspensions and resumes are returned, not applied; the machine
//     applies them in leaf order after the round. A transition in a result
//     is validated and normalized (target nodes known, states decoded and
//     valid, spawn IDs assigned and free, at most one primary leaf), with
//     the errors of this package.
//   - Concurrency. Step is called concurrently for the leaves of a round,
//     so an implementation is safe for concurrent use. Each call returns
//     only after every goroutine it started has finished, save a tool
//     handler abandoned after its timeout (which then writes nothing the
//     result holds).
//   - Errors. A tool that fails, times out or panics is a result the model
//     sees, not an error. A returned error is for infrastructure and misuse
//     (the model call failed, an unknown command, a command's invalid
//     effect); the machine then changes nothing for that round or input.
//   - Checkpoints. A step splits in two at the model's reply: a request
//     with ReplyOnly returns once the model has replied, before any tool
//     runs, and a request with Reply continues from that reply, maybe in
//     another process, with no model call. Splitting a step this way yields
//     the result the whole step would have.
//   - Growth. Later versions add fields to the request and result types,
//     never methods to this interface. A new request field is optional:
//     its zero value keeps the behaviour before it, and an implementation
//     that ignores it stays correct (an event sink, say, then hears
//     nothing). A wrapper passes requests on unchanged, so it keeps up.
type Executor interface {
	// Step runs one inference step of the leaf req.Instance.
	Step(ctx context.Context, req *StepRequest) (*StepResult, error)
	// Resume turns the resolution of a suspended tool call into the call's
	// result, through the tool's resume handler when it has one.
	Resume(ctx context.Context, req *ResumeRequest) (*ResumeResult, error)
	// Command runs the command req.Name on req.Instance.
	Command(ctx context.Context, req *CommandRequest) (*CommandResult, error)
}

// StepRequest asks for one inference step of one leaf.
type StepRequest struct {
	// Root is the instance tree, Instance the leaf in it that steps.
	Root, Instance *instance.Instance
	// Transcript is the leaf's view of history, oldest first: what the
	// model is sent.
	Transcript []message.Message
	// ReplyOnly ends the step once the model has replied: the result
	// holds Reply and nothing else, and no tool has run. A checkpointing
	// caller saves the reply and continues with a request that carries it.
	ReplyOnly bool
	// Reply, when set, is the model's reply to this step from an earlier
	// request with ReplyOnly (the same leaf, tree and transcript): the
	// model is not called again, and the reply's tools run as if it had
	// just arrived.
	Reply *Reply
	// Admit, when set, admits every suspension a handler of the step asks
	// for.
	Admit Admission
	// Journal is the machine's effect journal, which handlers' effects
	// (node.Effect) write (nil: effects just run).
	Journal instance.EffectJournal
	// Events, when set, hears the step as it happens: the reply's text and
	// thinking as it streams (llm.Stream: as the model streams it, or one
	// delta per block from a model that does not stream) and each tool
	// call as it starts and finishes. Nil (nobody listens) calls the
	// model's Generate and reports nothing.
	Events Sink
}

// Reply is the model's reply to one step as the executor prepared it: an
// assistant message attributed to the leaf, its tool uses repaired (see
// the package's repair rules in docs/ARCHITECTURE.md §4), the structured
// output part added. It is plain data, for a checkpoint to save; the
// machine keeps a saved one on the instance (instance.Instance.Reply).
type Reply = instance.Reply

// StepResult is what one step did, not yet applied.
type StepResult struct {
	// Reply is the model's reply (ReplyOnly: all the result holds).
	Reply Reply
	// Results holds one tool result per tool use of the reply, in tool-use
	// order; a suspended call's slot is the zero Part.
	Results []message.Part
	// State is the leaf's state after the tools ran; StateChanged reports
	// a write.
	State        any
	StateChanged bool
	// Packs holds the pack states the leaf's tools wrote, by pack name.
	Packs map[string]any
	// Transition is the validated transition of the reply, if any.
	Transition *instance.Effect
	// Suspended lists the calls that suspended, in tool-use order.
	Suspended []instance.SuspendedCall
	// Terminal reports a terminal tool: the turn ends after its result.
	Terminal bool
}

// HoldsReply reports whether tool calls of the reply are pending, so the
// reply must be held until they are resolved.
func (r *StepResult) HoldsReply() bool {
	for i := range r.Suspended {
		if r.Suspended[i].Kind == instance.KindTool {
			return true
		}
	}
	return false
}

// ResumeRequest asks for the result of a suspended tool call that a resume
// resolved.
type ResumeRequest struct {
	// Root is the instance tree, Instance the instance in it that made the
	// call.
	Root, Instance *instance.Instance
	// Call is the suspended call.
	Call instance.SuspendedCall
	// Resolution is the payload it was resolved with.
	Resolution instance.Resolution
	// Admit is as in StepRequest, for a handler that suspends again.
	Admit Admission
	// Journal is as in StepRequest.
	Journal instance.EffectJournal
}

// Admission is asked about every suspension a handler asks for, once the
// executor has built its record and before it is part of any result: the
// machine checks there a suspend ID the handler chose (chosen:
// instance.WithID) beyond the tree, which the executor checks itself, and
// runs the charter's OnSuspend hook. It may change call.Metadata; any
// other change is ignored. An error refuses the suspension: a tool call
// gets an error result with its text, so the run goes on and nothing of
// the suspension is recorded; a command fails with it. It is called on
// the goroutines tool calls run on.
type Admission func(ctx context.Context, node string, call *instance.SuspendedCall, chosen bool) error

// ResumeResult is the outcome of a resolved tool call.
type ResumeResult struct {
	// Result is the tool result for the call's slot (its ToolUseID),
	// unless Again is set.
	Result message.Part
	// State is the instance's state after the resume handler;
	// StateChanged reports a write.
	State        any
	StateChanged bool
	// Pack names the pack whose state a pack tool's resume handler wrote;
	// PackState is that state.
	Pack      string
	PackState any
	// Again is set when the resume handler suspended again: the call's
	// slot stays pending under this new call.
	Again *instance.SuspendedCall
}

// CommandRequest asks to run a command on an instance.
type CommandRequest struct {
	// Root is the instance tree, Instance the command's target in it.
	Root, Instance *instance.Instance
	// Name names a command of the instance's node or of its packs.
	Name string
	// Input is the command's input as JSON.
	Input json.RawMessage
	// InvocationID is the caller's stable ID of this invocation
	// (command.Invocation.ID), the same on every retry of it: the
	// handler's idempotency key is built from it, and is empty without
	// it.
	InvocationID string
	// Admit is as in StepRequest, for a command that suspends.
	Admit Admission
	// Journal is as in StepRequest.
	Journal instance.EffectJournal
}

// CommandResult is what a command did, not yet applied.
type CommandResult struct {
	// Value is the handler's result (nil when the command suspended).
	Value any
	// State is the instance's state after the command; StateChanged
	// reports a write.
	State        any
	StateChanged bool
	// Pack names the pack a pack command wrote; PackState is its state.
	Pack      string
	PackState any
	// Transition is the validated transition the command requested.
	Transition *instance.Effect
	// Suspended is set when the command suspended.
	Suspended *instance.SuspendedCall
	// Resumes are the pending suspensions the command resolves, in the
	// order it asked.
	Resumes []CommandResume
}

// CommandResume is a command's request to resolve a pending suspension
// (command.Context.Resume).
type CommandResume struct {
	SuspendID string
	Payload   any
	IsError   bool
}
