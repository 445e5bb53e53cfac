package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/markov-agents/markov/store"
)

// River (github.com/riverqueue/river) distributes the work of a fleet of
// processes sharing the database (package durable/fleet). Its tables live
// in the store's schema and are brought up to date by [Open] after the
// store's own migrations, so River UI can be pointed at the database with
// that schema on its search path (docs/FLEET.md).

// migrateRiver applies River's pending migrations to schema, each in a
// transaction of its own (a migration may not use an enum value added in
// the same transaction), under a session advisory lock so that processes
// starting together migrate once.
func (s *Store) migrateRiver(ctx context.Context, schema string) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	key := s.lockKey("\x00river-migrations")
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		conn.Hijack().Close(context.WithoutCancel(ctx))
		return fmt.Errorf("river migrations: lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, key)
	m, err := rivermigrate.New(riverpgxv5.New(s.pool), &rivermigrate.Config{
		Schema: schema,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return fmt.Errorf("river migrator: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}
	s.river = m
	return nil
}

// pingRiver reports, wrapping [store.ErrSchemaVersion], River migrations
// this process's River expects that the schema does not hold (its tables
// were rolled back or replaced since [Open] migrated them): the fleet's
// job client would fail on them.
func (s *Store) pingRiver(ctx context.Context) error {
	res, err := s.river.Validate(ctx, nil)
	if err != nil {
		return fmt.Errorf("postgres: ping: river migrations: %w", err)
	}
	if !res.OK {
		return fmt.Errorf("%w: postgres: river: %s", store.ErrSchemaVersion, strings.Join(res.Messages, "; "))
	}
	return nil
}

// Pool is the connection pool of the store, for a fleet's River client
// and its own queries in the store's schema.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Schema is the schema holding the store's tables (and River's).
func (s *Store) Schema() string { return s.schema }
