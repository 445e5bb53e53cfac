package node_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/node"
)

type cart struct {
	Entries []string `json:"entries"`
}

func migrateCart(from int, raw json.RawMessage) (cart, error) {
	var old struct {
		Items []string `json:"items"`
	}
	err := json.Unmarshal(raw, &old)
	return cart{Entries: old.Items}, err
}

func TestStateVersionNeedsMigrate(t *testing.T) {
	for name, cfg := range map[string]node.Config[cart]{
		"version without migrate": {StateVersion: 1},
		"migrate without version": {Migrate: migrateCart},
		"negative version":        {StateVersion: -1, Migrate: migrateCart},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := node.New("cart", cfg)
			require.ErrorIs(t, err, node.ErrInvalidNode)
		})
	}
}

func TestMigrateState(t *testing.T) {
	errEmpty := errors.New("empty cart")
	n, err := node.New("cart", node.Config[cart]{
		StateVersion: 2,
		Migrate:      migrateCart,
		Validate: func(c cart) error {
			if len(c.Entries) == 0 {
				return errEmpty
			}
			return nil
		},
		Initial: cart{Entries: []string{"x"}},
	})
	require.NoError(t, err)
	require.Equal(t, 2, n.StateVersion())

	got, err := n.MigrateState(0, json.RawMessage(`{"items":["first"]}`))
	require.NoError(t, err)
	require.Equal(t, cart{Entries: []string{"first"}}, got)

	// A migrated state is validated.
	_, err = n.MigrateState(1, json.RawMessage(`{"items":[]}`))
	require.ErrorIs(t, err, node.ErrMigration)
	require.ErrorIs(t, err, instance.ErrInvalidState)
	require.ErrorIs(t, err, errEmpty)

	// Migrate's own errors are wrapped.
	_, err = n.MigrateState(0, json.RawMessage(`[`))
	require.ErrorIs(t, err, node.ErrMigration)
	require.ErrorIs(t, err, instance.ErrInvalidState)

	// Only older versions migrate.
	for _, from := range []int{-1, 2, 3} {
		_, err = n.MigrateState(from, json.RawMessage(`{"items":["first"]}`))
		require.ErrorIs(t, err, node.ErrMigration, "from %d", from)
	}
}

func TestPackMigration(t *testing.T) {
	for name, members := range map[string][]node.PackTool[cart]{
		"version without migrate": {node.PackMigration[cart](1, nil)},
		"migrate without version": {node.PackMigration(0, migrateCart)},
		"two migrations":          {node.PackMigration(1, migrateCart), node.PackMigration(2, migrateCart)},
	} {
		t.Run(name, func(t *testing.T) {
			require.ErrorIs(t, node.NewPack("cart", "", cart{}, members...).Err(), node.ErrInvalidNode)
		})
	}

	p := node.NewPack("cart", "", cart{}, node.PackMigration(1, migrateCart))
	require.NoError(t, p.Err())
	require.Equal(t, 1, p.StateVersion())
	got, err := p.MigrateState(0, json.RawMessage(`{"items":["first"]}`))
	require.NoError(t, err)
	require.Equal(t, cart{Entries: []string{"first"}}, got)
	_, err = p.MigrateState(1, json.RawMessage(`{}`))
	require.ErrorIs(t, err, node.ErrMigration)

	require.Equal(t, 0, node.NewPack("plain", "", cart{}).StateVersion())
}
