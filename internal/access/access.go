// Package access hands the executor and the machine the plumbing that node
// and command keep unexported — the type-erased tools, commands and state
// operations of a node or pack, and the handler of a tool or command
// value — and hands serialize and durable a machine's live tree. node,
// command and machine install the accessors in their init functions, so
// that no exported identifier of theirs mentions an internal type and no
// exported method hands out live state.
package access

import (
	"context"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/frame"
	"github.com/markov-agents/markov/message"
)

// Node is the plumbing of a *node.Node.
type Node struct {
	// Tools are what the model sees on the node, in order: own tools,
	// update_state, transitions.
	Tools []*frame.Tool
	// Own are the node's own tools (what descendants see as ancestor
	// tools).
	Own      []*frame.Tool
	Commands []*frame.Command
	Ops      frame.StateOps
}

// Pack is the plumbing of a *node.Pack.
type Pack struct {
	Tools    []*frame.Tool
	Commands []*frame.Command
	Ops      frame.StateOps
}

// The accessors, installed by the packages that own the values. Each takes
// the public value as any (a *node.Node, a *node.Pack, a node.Tool[S], a
// command.Command[S]), which must not be nil or zero unless said.
var (
	// NodeOf returns the plumbing of a *node.Node.
	NodeOf func(n any) *Node
	// PackOf returns the plumbing of a *node.Pack.
	PackOf func(p any) *Pack
	// ToolOf returns the type-erased form of a node.Tool[S]; a zero Tool
	// gives a tool whose Err says so.
	ToolOf func(t any) *frame.Tool
	// CommandOf returns the type-erased form of a command.Command[S]; a
	// zero Command gives nil.
	CommandOf func(c any) *frame.Command
	// MachineView calls fn with the live tree and history of a
	// *machine.Machine, without copying them (for serialize's encoders,
	// durable's saves and its history cache, which clips what it hands
	// on). fn must not modify the tree or the messages, nor retain the
	// tree.
	MachineView func(m any, fn func(root *instance.Instance, history message.History))
	// Stepper returns the step function of an executor.Executor that is
	// the standard one, nil for any other: it runs the step req (a
	// *executor.StepRequest) in the scratch memory *spare, which it
	// allocates when nil and reuses otherwise, and returns the step's
	// result (a *executor.StepResult), which lives in that memory: the
	// caller reuses *spare only once it will never read the result again.
	Stepper func(exec any) func(ctx context.Context, req any, spare *any) (any, error)
)
