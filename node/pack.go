package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/access"
	"github.com/markov-agents/markov/internal/frame"
)

// Pack is a reusable module with singleton state, kept on the root
// instance, and its own tools and commands. Nodes opt in through
// Config.Packs; only non-worker leaves may write pack state.
type Pack struct {
	stateType   reflect.Type
	name        string
	description string
	initial     any
	// x holds the type-erased tools, commands and state operations.
	x   access.Pack
	evo evolution
	err error
}

// PackTool is a member of a pack with state P: a tool, a command, or the
// pack state's migration.
type PackTool[P any] struct {
	t   *frame.Tool
	cmd *frame.Command
	mig *packMigration[P]
}

type packMigration[P any] struct {
	version int
	fn      func(from int, raw json.RawMessage) (P, error)
}

// PackContext is what a pack tool sees: the pack's state.
type PackContext[P any] struct {
	context.Context
	f *frame.Frame
}

func newPackContext[P any](f *frame.Frame) *PackContext[P] {
	return &PackContext[P]{Context: f.Context, f: f}
}

// State returns a copy of the pack's current state (writes to it are not
// kept; change it through Update).
func (c *PackContext[P]) State() P { return frame.State[P](c.f) }

// Update replaces the pack state with fn applied to a copy. It fails with
// instance.ErrReadOnly when called from a worker leaf.
func (c *PackContext[P]) Update(fn func(*P)) error { return frame.Update(c.f, fn) }

// InstanceID returns the calling instance's ID.
func (c *PackContext[P]) InstanceID() string { return c.f.InstanceID }

// IdempotencyKey returns the call's idempotency key, as
// ToolContext.IdempotencyKey does.
func (c *PackContext[P]) IdempotencyKey() string { return c.f.Key() }

// Suspend returns the suspension to hand back from a pack tool's handler,
// as ToolContext.Suspend does: a pack tool may wait for a person, and
// its resume handler (OnPackResume) updates the pack's state, which
// every node that opts into the pack shares.
func (c *PackContext[P]) Suspend(reason string, opts ...instance.SuspendOption) error {
	return frame.Suspend(reason, opts)
}

// OnPackResume registers a pack tool's resume handler: OnResume for a
// tool of a pack with state P. Its payload type Pay is declared as
// OnResume's is.
func OnPackResume[P, In, Pay, Out any](fn func(ctx *PackContext[P], in In, r Resumed[Pay]) (Out, error)) ToolOption {
	return onResume(newPackContext[P], fn)
}

// NewPackTool returns a pack tool.
func NewPackTool[P, In, Out any](name, description string, fn func(ctx *PackContext[P], in In) (Out, error), opts ...ToolOption) PackTool[P] {
	return PackTool[P]{t: newTool(name, description, newPackContext[P], fn, opts)}
}

// PackCommand makes a command on the pack's state a member of the pack.
func PackCommand[P any](c command.Command[P]) PackTool[P] {
	fc := access.CommandOf(c)
	if fc == nil {
		fc = &frame.Command{Err: errors.New("zero Command")}
	}
	return PackTool[P]{cmd: fc}
}

// PackMigration declares, as a member of a pack, the version of its state
// P as persisted and the migration of states saved at older versions: the
// pack's node.Config.StateVersion and Migrate (see the package
// documentation). A pack has at most one.
func PackMigration[P any](version int, migrate func(from int, raw json.RawMessage) (P, error)) PackTool[P] {
	return PackTool[P]{mig: &packMigration[P]{version: version, fn: migrate}}
}

// NewPack returns a pack with its initial state and members (tools from
// NewPackTool, commands from PackCommand, a PackMigration). Errors in the
// members are reported when a charter is built with the pack.
func NewPack[P any](name, description string, initial P, tools ...PackTool[P]) *Pack {
	p := &Pack{name: name, description: description, initial: initial, x: access.Pack{Ops: frame.OpsFor[P](nil)}, stateType: reflect.TypeFor[P](),
		evo: evolution{owner: "pack " + name}}
	seen := map[string]bool{}
	migrations := 0
	if !ValidName(name) {
		p.err = fmt.Errorf("%w: pack name %q", ErrInvalidNode, name)
	}
	for _, m := range tools {
		err := fmt.Errorf("%w: zero PackTool (build members with NewPackTool, PackCommand or PackMigration)", ErrInvalidNode)
		switch {
		case m.t != nil:
			err = checkTool(m.t, seen)
			p.x.Tools = append(p.x.Tools, m.t)
		case m.cmd != nil:
			err = checkName("command", m.cmd.Name, m.cmd.Err, seen)
			p.x.Commands = append(p.x.Commands, m.cmd)
		case m.mig != nil && migrations > 0:
			err = fmt.Errorf("%w: more than one PackMigration", ErrInvalidNode)
		case m.mig != nil:
			migrations++
			p.evo, err = newEvolution(p.evo.owner, m.mig.version, m.mig.fn, p.x.Ops)
		}
		if err != nil && p.err == nil {
			p.err = fmt.Errorf("pack %s: %w", name, err)
		}
	}
	return p
}

// Name returns the pack's name.
func (p *Pack) Name() string { return p.name }

// Description returns the pack's description.
func (p *Pack) Description() string { return p.description }

// Err returns the pack's construction error, if any.
func (p *Pack) Err() error { return p.err }

// Initial returns a copy of the pack's initial state.
func (p *Pack) Initial() any { return p.x.Ops.Clone(p.initial) }

// StateType returns the pack's state type P.
func (p *Pack) StateType() reflect.Type { return p.stateType }

// StateVersion returns the version of the pack's persisted state
// (PackMigration; 0 without).
func (p *Pack) StateVersion() int { return p.evo.version }

// MigrateState turns a state saved at state version from, below the
// pack's, into a valid state of this pack with its PackMigration; raw is
// the saved state as JSON. Errors wrap ErrMigration and
// instance.ErrInvalidState.
func (p *Pack) MigrateState(from int, raw json.RawMessage) (any, error) {
	return p.evo.migrateState(from, raw)
}

// Tools describes the pack's tools (copies: changing them changes nothing).
func (p *Pack) Tools() []ToolInfo { return toolInfos(p.x.Tools) }

// Commands describes the pack's commands (copies).
func (p *Pack) Commands() []command.Info { return commandInfos(p.x.Commands) }

// PackEffect runs fn, a pack tool's external effect name, through the
// machine's effect journal, as Effect does for a node's tool.
func PackEffect[P, T any](ctx *PackContext[P], name string, fn func(ctx context.Context) (T, error), cfg EffectConfig[T]) (T, error) {
	return frame.Effect(ctx.f, name, fn, effectSpec(cfg))
}

// PackEffectTx runs fn, a pack tool's effect name on the store's own
// database, in one transaction with its journal entry, as EffectTx does
// for a node's tool.
func PackEffectTx[P, T, X any](ctx *PackContext[P], name string, fn func(ctx context.Context, tx X) (T, error)) (T, error) {
	return frame.EffectTx(ctx.f, name, fn)
}
