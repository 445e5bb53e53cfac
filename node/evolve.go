package node

import (
	"encoding/json"
	"fmt"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/frame"
)

// evolution is the persisted version of a node's or pack's state type and
// its migration from older versions.
type evolution struct {
	owner   string // "node cart", "pack notes"
	version int
	migrate func(from int, raw json.RawMessage) (any, error)
}

// newEvolution checks a declared state version and migration (both or
// neither) and wraps the migration: its errors and panics become
// ErrMigration, and the state it returns is validated with ops.
func newEvolution[S any](owner string, version int, fn func(int, json.RawMessage) (S, error), ops frame.StateOps) (evolution, error) {
	e := evolution{owner: owner, version: version}
	switch {
	case version < 0:
		return e, fmt.Errorf("%w: %s: negative state version %d", ErrInvalidNode, owner, version)
	case version > 0 && fn == nil:
		return e, fmt.Errorf("%w: %s: state version %d without a migration", ErrInvalidNode, owner, version)
	case version == 0 && fn != nil:
		return e, fmt.Errorf("%w: %s: a migration without a state version above 0", ErrInvalidNode, owner)
	case fn == nil:
		return e, nil
	}
	e.migrate = func(from int, raw json.RawMessage) (v any, err error) {
		defer func() {
			if r := recover(); r != nil {
				v, err = nil, fmt.Errorf("%w: %w: %s, from state version %d: migration panicked: %v", instance.ErrInvalidState, ErrMigration, owner, from, r)
			}
		}()
		s, err := fn(from, raw)
		if err != nil {
			return nil, fmt.Errorf("%w: %w: %s, from state version %d: %w", instance.ErrInvalidState, ErrMigration, owner, from, err)
		}
		if err := ops.Validate(s); err != nil {
			return nil, fmt.Errorf("%w: %s, from state version %d: %w", ErrMigration, owner, from, err)
		}
		return s, nil
	}
	return e, nil
}

// migrateState runs the migration on a state saved at version from.
func (e *evolution) migrateState(from int, raw json.RawMessage) (any, error) {
	if e.migrate == nil || from < 0 || from >= e.version {
		return nil, fmt.Errorf("%w: %w: %s is at state version %d and migrates none from %d", instance.ErrInvalidState, ErrMigration, e.owner, e.version, from)
	}
	return e.migrate(from, raw)
}
