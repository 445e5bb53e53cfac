// Package instance holds the live tree of node instances a machine runs: each
// Instance names its node, carries its typed state, its children and, when
// parked, its suspension. Instances are plain data: no funcs, fully
// serializable. The package also defines the effects transitions return, the
// suspension records and their lifecycle, and the sentinel errors of
// suspend and resume.
package instance

import (
	"iter"
	"slices"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/message"
)

// Instance is one live node in the tree.
type Instance struct {
	// ID is stable for the instance's life, across transitions.
	ID string
	// Node is the name of the node this instance runs, resolved through the
	// charter.
	Node string
	// State is the node's typed state value (the node's S, held by value).
	// Treat it as immutable: tools and commands replace it through Update.
	State any
	// Children are the instances this one spawned, in spawn order.
	Children []*Instance
	// Packs holds pack states by pack name. Only the root has them.
	Packs map[string]any
	// Suspension is set while the instance waits for external results.
	Suspension *SuspensionState
	// Idle reports that the instance ended its turn and waits for input: it
	// is not called again until a message, a cede or a resume wakes it.
	Idle bool
	// MaxTokensStreak counts consecutive replies cut off by the token limit.
	MaxTokensStreak int
	// Reply is the model's reply to the instance's step in flight: saved
	// at a checkpoint (machine.Machine.SetCheckpoints) after the model
	// replied and before any of its tools ran. The next round runs its
	// tools from it, with no model call and the same tool-use IDs, and
	// clears it. Nil outside a checkpointed round.
	Reply *Reply
}

// Reply is a model's reply to one step, as the executor prepared it (tool
// uses repaired, structured output added): plain data, for a checkpoint to
// save.
type Reply struct {
	Message message.Message
	Stop    llm.StopReason
	Usage   llm.Usage
}

// Clone returns a deep copy of the reply.
func (r *Reply) Clone() *Reply {
	out := *r
	out.Message = r.Message.Clone()
	return &out
}

// Suspended reports whether the instance has a pending suspension.
func (in *Instance) Suspended() bool {
	return in.Suspension != nil && in.Suspension.PendingCount() > 0
}

// IsLeaf reports whether the instance has no children.
func (in *Instance) IsLeaf() bool { return len(in.Children) == 0 }

// Walk yields the tree depth-first, parents before children.
func (in *Instance) Walk() iter.Seq[*Instance] {
	return func(yield func(*Instance) bool) { in.walk(yield) }
}

func (in *Instance) walk(yield func(*Instance) bool) bool {
	if !yield(in) {
		return false
	}
	for _, c := range in.Children {
		if !c.walk(yield) {
			return false
		}
	}
	return true
}

// Leaves yields the instances without children, depth-first.
func (in *Instance) Leaves() iter.Seq[*Instance] {
	return func(yield func(*Instance) bool) {
		for n := range in.Walk() {
			if n.IsLeaf() && !yield(n) {
				return
			}
		}
	}
}

// Find returns the instance with the given ID, or nil.
func (in *Instance) Find(id string) *Instance {
	for n := range in.Walk() {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// Path returns the chain of instances from the root (in) to the instance id,
// inclusive, or nil when id is not in the tree.
func (in *Instance) Path(id string) []*Instance {
	return in.path(func(n *Instance) bool { return n.ID == id })
}

// PathTo returns the chain of instances from the root (in) to target,
// inclusive, or nil when target is not an instance of the tree (a copy of
// one is not). It compares pointers, not IDs: cheaper than Path in a wide
// tree.
func (in *Instance) PathTo(target *Instance) []*Instance {
	return in.path(func(n *Instance) bool { return n == target })
}

// path returns the chain from in to the first instance, depth-first, that
// is, or nil.
func (in *Instance) path(is func(*Instance) bool) []*Instance {
	path := in.pathTo(is, 1)
	if path != nil {
		slices.Reverse(path)
	}
	return path
}

// pathTo returns the path from the instance that is up to in, in at depth
// depth, with room for the ancestors of in: one allocation however deep.
// It looks at a leaf child without a call of its own (a wide tree's
// leaves are most of it).
func (in *Instance) pathTo(is func(*Instance) bool, depth int) []*Instance {
	if is(in) {
		return append(make([]*Instance, 0, depth), in)
	}
	for _, c := range in.Children {
		if len(c.Children) == 0 {
			if is(c) {
				return append(make([]*Instance, 0, depth+1), c, in)
			}
		} else if p := c.pathTo(is, depth+1); p != nil {
			return append(p, in)
		}
	}
	return nil
}

// Pending yields every pending suspended call in the tree, depth-first, in
// suspension order within an instance.
func (in *Instance) Pending() iter.Seq[*SuspendedCall] {
	return func(yield func(*SuspendedCall) bool) {
		for n := range in.Walk() {
			if n.Suspension == nil {
				continue
			}
			for i := range n.Suspension.Calls {
				c := &n.Suspension.Calls[i]
				if c.Status == StatusPending && !yield(c) {
					return
				}
			}
		}
	}
}

// FindCall returns the instance holding the suspension id and the call
// record, or nils.
func (in *Instance) FindCall(suspendID string) (*Instance, *SuspendedCall) {
	for n := range in.Walk() {
		if n.Suspension == nil {
			continue
		}
		for i := range n.Suspension.Calls {
			if n.Suspension.Calls[i].SuspendID == suspendID {
				return n, &n.Suspension.Calls[i]
			}
		}
	}
	return nil, nil
}

// StateCloner deep-copies a state value of the named node.
type StateCloner func(node string, state any) any

// Clone returns a copy of the tree. States and pack states are copied with
// cloneState; nil shares them, which is safe inside the machine because
// state values are replaced, never mutated. Suspension records are deep
// copies.
//
// The copies of the tree's instances are carved out of one array, and
// their children lists out of another (each capped, so an append to one
// moves it out): a wide tree is two allocations, not one per instance.
func (in *Instance) Clone(cloneState StateCloner) *Instance {
	instances, children := 0, 0
	for n := range in.Walk() {
		instances++
		children += len(n.Children)
	}
	c := cloner{instances: make([]Instance, instances), children: make([]*Instance, children), state: cloneState}
	return c.clone(in)
}

// cloner copies a tree into the arrays it carves.
type cloner struct {
	instances []Instance
	children  []*Instance
	state     StateCloner
}

// clone copies in and its subtree.
func (c *cloner) clone(in *Instance) *Instance {
	out := &c.instances[0]
	c.instances = c.instances[1:]
	*out = *in
	if c.state != nil {
		out.State = c.state(in.Node, in.State)
	}
	if in.Children != nil {
		n := len(in.Children)
		out.Children, c.children = c.children[:n:n], c.children[n:]
		for i, ch := range in.Children {
			out.Children[i] = c.clone(ch)
		}
	}
	if in.Packs != nil {
		out.Packs = make(map[string]any, len(in.Packs))
		for k, v := range in.Packs {
			if c.state != nil {
				v = c.state(PackStateKey+k, v)
			}
			out.Packs[k] = v
		}
	}
	if in.Suspension != nil {
		out.Suspension = in.Suspension.Clone()
	}
	if in.Reply != nil {
		out.Reply = in.Reply.Clone()
	}
	return out
}

// PackStateKey prefixes the name a StateCloner receives for a pack state:
// "pack:" + pack name.
const PackStateKey = "pack:"

// cloneParts deep-copies tool-result slots.
func cloneParts(p []message.Part) []message.Part {
	if p == nil {
		return nil
	}
	return message.CloneAll([]message.Message{{Parts: p}})[0].Parts
}
