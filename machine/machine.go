// Package machine runs a tree of node instances: a Charter registers nodes,
// packs and tools; a Machine holds the root instance and the history and
// runs it round by round through the executor, yielding one Step per round
// from the Run iterator. Suspensions live on the tree and are resumed by a
// ResumeInput fed into Run, maybe hours later, in another process.
package machine

import (
	"context"
	"fmt"
	"sync/atomic"

	"go.opentelemetry.io/otel/trace"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/executor"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/access"
	"github.com/markov-agents/markov/internal/frame"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/message"
)

// YieldReason says why a step was yielded.
type YieldReason string

// The reasons a step is yielded.
const (
	// EndTurn: the leaves of the round ended their turn.
	EndTurn YieldReason = "end_turn"
	// ToolUse: tools ran; the model is called again.
	ToolUse YieldReason = "tool_use"
	// MaxTokens: a reply was cut off by the token limit.
	MaxTokens YieldReason = "max_tokens"
	// Cede: an instance ceded to its parent.
	Cede YieldReason = "cede"
	// Command: a command ran (or completed after a resume).
	Command YieldReason = "command"
	// Suspend: something suspended this round; persist the machine and
	// resume it later with a ResumeInput.
	Suspend YieldReason = "suspend"
	// AwaitingResume: nothing can run until a suspension is resumed.
	AwaitingResume YieldReason = "awaiting_resume"
	// Replied (checkpoint mode only, Machine.SetCheckpoints): the model
	// replied to the round's leaves and no tool has run yet; the replies
	// are on the tree (Root, instance.Instance.Reply). Persist the machine:
	// the next step runs their tools, in this run or, after a crash, in the
	// next, with no second model call.
	Replied YieldReason = "reply"
)

// Input is what Run accepts: a message.Message (user input), a
// command.Invocation, a ResumeInput or a CancelInput. Any other value is
// an error.
type Input any

// UserText returns a user message with one text part.
func UserText(s string) message.Message { return message.UserText(s) }

// ResumeInput resolves a pending suspension, found by ID anywhere in the
// tree. A string Payload is the tool result as is; anything else is
// JSON-encoded. IsError marks the result as a failure. By, when set,
// names who decided (a person, a service): the machine's history then
// records a "decided" record with it, beside the result.
//
// FreshTurn turns transcript continuation off (the ACP draft RFC's
// continueTranscript: false): from this resume on, the resumed instance's
// model calls see, instead of its whole earlier transcript, one user
// message with a digest of it (CharterConfig.Digest, DefaultDigest),
// followed by what comes after — the released reply and its results, the
// payload. History keeps everything; a "fresh_turn" record in it, holding
// the digest, marks the cut.
//
// Groups, Digest and Deny make the resume a decision on a governed call
// (instance.WithPolicy): By is the deciding identity's subject and Groups
// the groups or roles it holds; Digest names the call's digest the
// decider saw (SuspendedCall.Digest), required under a policy and
// checked whenever given — another is refused with
// instance.ErrStaleDecision; Deny marks a refusal for the policy's
// quorum. A decision the policy does not allow wraps
// instance.ErrForbidden and changes nothing. Under a quorum a decision
// that does not settle the call is recorded on it
// (SuspendedCall.Decisions) and the call stays pending; the one that
// settles it resolves it with its payload.
//
// Edit, when set, is the call's input as the decider edited it, for a
// call whose policy allows edits (instance.Policy.AllowEdit); any other
// call refuses it with instance.ErrEditNotAllowed. A json.RawMessage
// passes as is, anything else is JSON-encoded. The edit must satisfy the
// tool's or command's input schema (an *instance.InputError naming the
// field, wrapping instance.ErrInvalidInput) and goes with an approval,
// not a refusal; refused, it changes nothing. Accepted, it becomes the
// call's input: the digest is recomputed (SuspendedCall.Digest), the
// decisions recorded on the old input are dropped, the history records
// an "edited" record (EditedRecord), the resume handler gets the edited
// input, and the tool result the model sees starts with a note naming
// the editor and the input the call ran with.
type ResumeInput struct {
	SuspendID string
	Payload   any
	IsError   bool
	By        string
	FreshTurn bool
	Groups    []string
	Digest    string
	Deny      bool
	Edit      any
}

// SignalInput resumes every pending call of the machine that waits for
// Event (instance.WithEvent), each with Payload, with cause
// instance.CauseEvent; a machine with none is left as is (no error). A
// call whose deadline has passed is expired instead, and one whose
// payload schema refuses Payload stays pending. SuspendID, when set,
// restricts the signal to that one call (package durable's fleet accepts
// a signal per suspension). FreshTurn and By are as in ResumeInput.
type SignalInput struct {
	Event     string
	Payload   any
	SuspendID string
	By        string
	FreshTurn bool
}

// CancelInput cancels a pending suspension: a tool call gets the error
// result "cancelled: Reason", a command completes with that text, and a
// parked instance wakes. Its status becomes cancelled. By, as in
// ResumeInput, names who cancelled it in the history. A person who
// cancels a governed call (instance.WithPolicy) — By set, with the
// Groups they hold — must be one its policy allows to decide, or the
// cancellation wraps instance.ErrForbidden and changes nothing; a
// cancellation naming nobody is the service's own and is not checked.
type CancelInput struct {
	SuspendID string
	Reason    string
	By        string
	Groups    []string
}

// Step is what one round (or one command) produced.
type Step struct {
	Reason YieldReason
	// Done marks the last step of this Run.
	Done bool
	// Messages were added to history in this step (the caller's own input
	// messages excepted; input deferred behind a held reply is reported
	// when the released reply brings it into history).
	Messages []message.Message
	// Held are model replies parked with a suspension in this step: they
	// enter history, and Messages, with their results once every call is
	// resolved. A chat UI can show their text meanwhile.
	Held []message.Message
	// Suspensions are the pending calls, for Suspend and AwaitingResume
	// steps and for the last step when anything is still pending.
	Suspensions []instance.SuspendedCall
	// Command is the result of a Command step.
	Command *command.Result
	// CedeContent is what the first cede of the step handed up.
	CedeContent any
	// Cedes are every cede of the step, in leaf order: those of the round,
	// after those a resume released since the last step (a held cede).
	Cedes []Ceded
	// Events are the suspension lifecycle events of the step.
	Events []instance.Event
	// Usage sums the tokens of the round's model calls.
	Usage llm.Usage
	// Root is a deep copy of the tree after the step.
	Root *instance.Instance
}

// Ceded is one instance handing its result to its parent.
type Ceded struct {
	// InstanceID and Node name the instance that ceded (now removed).
	InstanceID string
	Node       string
	// To is the parent's instance ID.
	To string
	// Content is what it handed up.
	Content any
}

// NeedsResume reports whether the run ended waiting for suspensions to be
// resolved: the step is the last one and calls are pending.
func (s Step) NeedsResume() bool { return s.Done && len(s.Suspensions) > 0 }

// Machine is a charter plus a root instance plus history: the unit of
// persistence. A Machine is not safe for concurrent use: run it from one
// goroutine at a time (Run refuses to start twice).
//
// Run, Root, History, Pending and Suspend are the contract
// (docs/ARCHITECTURE.md §3). Three more methods serve persistence:
// Charter names what the machine is encoded and decoded against; Apply
// lets a durable runner apply inputs and save them before any model call,
// so that two processes racing to resume one suspension conflict first;
// Expire lets a sweeper resolve deadlines at the time its own clock
// tells. Everything they and the contract's accessors return is a copy or
// immutable.
type Machine struct {
	charter *Charter
	root    *instance.Instance
	history message.History
	running atomic.Bool
	// atBoundary is set while Run hands a step to the caller, who may then
	// call Suspend.
	atBoundary atomic.Bool
	leaves     map[string]*leafCache
	// fresh indexes what history gained since the last round's
	// transcripts were built.
	fresh freshIndex
	// unreported is what Apply added that the next Run reports.
	unreported *report
	// listener hears the run while Events runs it (nil otherwise).
	listener *listener
	// checkpoints is checkpoint mode (SetCheckpoints).
	checkpoints bool
	// checkID checks suspend IDs beyond the tree (SetSuspendIDCheck);
	// journal is the effect journal (SetEffectJournal).
	checkID func(ctx context.Context, id string) error
	journal instance.EffectJournal
	// admitFn is m.admit as an executor.Admission, made once: a method
	// value allocates each time it is taken, and a round takes one per
	// leaf.
	admitFn executor.Admission
	// noExpiry turns the machine's own judging of deadlines off
	// (SetExpiry).
	noExpiry bool
	// links are the span links to the suspensions resolved since the
	// last run started, for the next run's span.
	links []trace.Link
	// decided are the decisions applied since TakeDecisions.
	decided []Decided
	// decider decides suspensions at once (SetDecider); ruled holds its
	// rulings until the calls are recorded.
	decider Decider
	ruled   rulings
	// reqs and added are the last round's step requests and messages,
	// whose arrays the next round reuses.
	reqs  []executor.StepRequest
	added []message.Message
	// spares hold the memory of the last steps of the standard
	// executor, whose results the machine has applied: the next steps
	// reuse it (step).
	spares []any
}

func init() {
	access.MachineView = func(v any, fn func(*instance.Instance, message.History)) {
		m := v.(*Machine)
		m.history.Messages() // joins, once, what the machine appended past a plain slice: readers of the copy find one array
		fn(m.root, m.history)
	}
}

func newMachine(c *Charter, root *instance.Instance, history message.History) *Machine {
	return &Machine{charter: c, root: root, history: history, leaves: map[string]*leafCache{}, fresh: freshIndex{from: history.Len()}}
}

// Charter returns the machine's charter.
func (m *Machine) Charter() *Charter { return m.charter }

// Root returns a deep copy of the instance tree.
func (m *Machine) Root() *instance.Instance { return m.root.Clone(m.charter.cloneState) }

// History returns a deep copy of the history.
func (m *Machine) History() []message.Message { return message.CloneAll(m.history.Messages()) }

// Pending returns a deep copy of every unresolved suspension in the tree.
func (m *Machine) Pending() []instance.SuspendedCall {
	var out []instance.SuspendedCall
	for c := range m.root.Pending() {
		out = append(out, c.Clone())
	}
	return out
}

// Suspend parks the primary leaf at this step boundary: the whole instance
// waits until a ResumeInput names the returned suspend ID. A payload given
// with the resume reaches the instance as a message. Call it between runs,
// or inside a Run loop's body: the run then stops after that step, with a
// last AwaitingResume step, unless workers still have work.
func (m *Machine) Suspend(reason string, opts ...instance.SuspendOption) (string, error) {
	if m.running.CompareAndSwap(false, true) {
		defer m.running.Store(false)
	} else if !m.atBoundary.Load() {
		return "", ErrRunning
	}
	leaf := primaryLeaf(m.charter.nodes, m.root)
	if leaf == nil {
		return "", ErrNoPrimary
	}
	err := instance.NewSuspendRequest(reason, opts...)
	sr, ok := err.(*instance.SuspendRequest)
	if !ok {
		return "", err
	}
	call := frame.NewCall(sr, m.charter.now(), m.charter.newID, leaf.ID, instance.KindInstance, instance.ByCaller, "", nil)
	if err := m.admit(context.Background(), leaf.Node, &call, sr.ID != ""); err != nil {
		return "", err
	}
	addCalls(leaf, call)
	m.charter.met.Created(context.Background(), string(call.Kind))
	return call.SuspendID, nil
}

// SetSuspendIDCheck sets the check of suspend IDs that handlers and
// callers choose (instance.WithID) beyond the machine's own tree, which
// the machine checks itself. A durable runner sets one that asks its
// store, where suspend IDs are unique across machines, so that a clash
// refuses the suspension when it is asked for — a tool call gets an
// error result naming the ID, a command or Suspend fails with the error
// — instead of failing the save after the run. check must be safe for
// concurrent use (tools of one reply may run concurrently); nil checks
// the tree only.
func (m *Machine) SetSuspendIDCheck(check func(ctx context.Context, id string) error) {
	m.checkID = check
}

// claimID checks a suspend ID chosen for a new suspension of root ("":
// none was chosen): unused in root, and accepted by the machine's check.
func (m *Machine) claimID(ctx context.Context, root *instance.Instance, id string) error {
	if id == "" {
		return nil
	}
	if _, c := root.FindCall(id); c != nil {
		return errDuplicateID(id)
	}
	if m.checkID != nil {
		if err := m.checkID(ctx, id); err != nil {
			return fmt.Errorf("suspend ID %q: %w", id, err)
		}
	}
	return nil
}

// SetEffectJournal sets the journal the machine's handlers' effects
// (node.Effect, command.Effect) write; nil, the default, lets effects
// just run. A durable runner sets one backed by its store when the store
// is a store.EffectJournal.
func (m *Machine) SetEffectJournal(j instance.EffectJournal) { m.journal = j }
