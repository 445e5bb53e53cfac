package machine

import (
	"fmt"

	"github.com/markov-agents/markov/executor"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/access"
	"github.com/markov-agents/markov/message"
)

// Restore rebuilds a machine from a persisted tree and history (what the
// serialize package decodes). It checks the tree against the charter:
// every node is registered, every state validates, instance and suspend
// IDs are unique, pack states belong to known packs and held replies fit
// their tool uses. Failures wrap ErrInvalidTree. The machine takes
// ownership of root and history, and appends to history in place while
// it has room, past it while it has none. A history knows how far from
// its start each instance sees every message (message.History.SeenBy),
// and past the first record the transcript of one instance
// (message.History.Transcript): the first round does not read what it
// knows again, nor copy the messages, so it costs the same at 10,000
// messages as at 100 whoever built the history — serialize, durable's
// history cache, or message.NewHistory over an application's plain
// slice. What is still in proportion to the history's length:
// NewHistory reads every message once (what each instance sees is known
// only by looking); a slice with no room is copied once, into an array
// with room, by the first read that needs the messages the run appended
// in one slice with it (the second round's transcript, a Marshal); and
// a transcript with a message its instance does not see between two it
// does (a record or a worker's exchange inside the conversation) is
// copied once, by the first round, unless the history kept it (durable's
// cache). See message.History.
func Restore(c *Charter, root *instance.Instance, history message.History) (*Machine, error) {
	if root == nil {
		return nil, fmt.Errorf("%w: no root", ErrInvalidTree)
	}
	ids := map[string]bool{}
	suspends := map[string]bool{}
	for in := range root.Walk() {
		if err := c.checkInstance(in, ids, suspends); err != nil {
			return nil, err
		}
		if in != root && in.Packs != nil {
			return nil, fmt.Errorf("%w: instance %s holds pack states but is not the root", ErrInvalidTree, in.ID)
		}
	}
	for name, s := range root.Packs {
		p := c.Pack(name)
		if p == nil {
			return nil, fmt.Errorf("%w: unknown pack %q", ErrInvalidTree, name)
		}
		if err := access.PackOf(p).Ops.Validate(s); err != nil {
			return nil, fmt.Errorf("%w: pack %s: %w", ErrInvalidTree, name, err)
		}
	}
	for name, p := range c.packs {
		if _, ok := root.Packs[name]; !ok {
			if root.Packs == nil {
				root.Packs = map[string]any{}
			}
			root.Packs[name] = p.Initial()
		}
	}
	return newMachine(c, root, history), nil
}

func (c *Charter) checkInstance(in *instance.Instance, ids, suspends map[string]bool) error {
	if in.ID == "" || ids[in.ID] {
		return fmt.Errorf("%w: empty or duplicate instance ID %q", ErrInvalidTree, in.ID)
	}
	ids[in.ID] = true
	n := c.Node(in.Node)
	if n == nil {
		return fmt.Errorf("%w: instance %s: %w: %q", ErrInvalidTree, in.ID, executor.ErrUnknownNode, in.Node)
	}
	if err := n.ValidateState(in.State); err != nil {
		return fmt.Errorf("%w: instance %s: %w", ErrInvalidTree, in.ID, err)
	}
	for _, ch := range in.Children {
		if ch == nil {
			return fmt.Errorf("%w: instance %s has a nil child", ErrInvalidTree, in.ID)
		}
	}
	s := in.Suspension
	if s == nil {
		return nil
	}
	for _, call := range s.Calls {
		if call.SuspendID == "" || suspends[call.SuspendID] {
			return fmt.Errorf("%w: empty or duplicate suspend ID %q", ErrInvalidTree, call.SuspendID)
		}
		suspends[call.SuspendID] = true
		switch call.Status {
		case instance.StatusPending, instance.StatusResolved, instance.StatusExpired, instance.StatusCancelled:
		default:
			return fmt.Errorf("%w: suspension %s has status %q", ErrInvalidTree, call.SuspendID, call.Status)
		}
	}
	if r := s.Reply; r != nil && len(r.Results) != len(r.Message.ToolUses()) {
		return fmt.Errorf("%w: instance %s: held reply has %d results for %d tool uses",
			ErrInvalidTree, in.ID, len(r.Results), len(r.Message.ToolUses()))
	}
	return nil
}
