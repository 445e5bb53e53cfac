package node

import "errors"

// ErrMigration reports a persisted state that a migration (Config.Migrate,
// PackMigration) could not turn into a valid state: the error it returned
// (wrapped), a panic in it, or a migrated state that fails validation. It
// comes with instance.ErrInvalidState.
var ErrMigration = errors.New("node: state migration failed")

// ErrInvalidNode reports a node, tool, pack or transition that cannot be
// built: a bad or duplicate name, an input type without an object schema,
// an initial state that fails validation.
var ErrInvalidNode = errors.New("node: invalid node")
