package sqlstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/vigilhq/vigil/store"
)

// Lock keys of Backend.Lock.
const (
	lockMigrations    = 0x76696731 // "vig1"
	lockGuardrailFeed = 0x76696732 // "vig2"
)

// Store implements store.Store over a Backend.
type Store struct {
	b      Backend
	recent *recentWrites
	marks  indexMarks // how far the search indexer read each trace
}

var _ store.Store = (*Store)(nil)

// Open migrates the database to the backend's latest schema (one
// transaction per migration) and returns the store.
func Open(ctx context.Context, b Backend) (*Store, error) {
	if err := migrate(ctx, b); err != nil {
		return nil, err
	}
	for _, t := range []struct {
		name string
		cols []string
	}{
		{"traces", traceColList},
		{"ledger_sessions", sessionColList},
		{"messages", messageColList},
		{"receipts", receiptColList},
		{"annotations", annotationColList},
		{"search_text", searchColList},
	} {
		if err := b.PrepareBulk(ctx, t.name, t.cols); err != nil {
			return nil, err
		}
	}
	return &Store{b: b, recent: newRecentWrites(recentWritesBytes)}, nil
}

// Kind implements store.Store.
func (s *Store) Kind() string { return s.b.Kind() }

// Ping implements store.Store.
func (s *Store) Ping(ctx context.Context) error { return s.b.Ping(ctx) }

// Close implements store.Store.
func (s *Store) Close() error { return s.b.Close() }

// Notify implements store.Notifier.
func (s *Store) Notify(ctx context.Context, channel, payload string) error {
	if err := checkChannel(channel, payload); err != nil {
		return err
	}
	return s.b.Notify(ctx, channel, payload)
}

// Subscribe implements store.Notifier.
func (s *Store) Subscribe(ctx context.Context, channel string) (<-chan string, error) {
	if err := checkChannel(channel, ""); err != nil {
		return nil, err
	}
	return s.b.Subscribe(ctx, channel)
}

func checkChannel(channel, payload string) error {
	if channel == "" || len(channel) > 63 {
		return fmt.Errorf("notify channel %q: want 1 to 63 characters", channel)
	}
	for i, c := range channel {
		if !(c == '_' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return fmt.Errorf("notify channel %q: want ^[a-z_][a-z0-9_]*$", channel)
		}
	}
	if len(payload) > 7000 {
		return fmt.Errorf("notify channel %s: payload of %d bytes exceeds 7000", channel, len(payload))
	}
	return nil
}

// SchemaVersion implements store.Store.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	if err := s.b.Reader().QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("schema version: %w", err)
	}
	return v, nil
}

// migrate applies the backend's pending migrations.
func migrate(ctx context.Context, b Backend) error {
	// Create the bookkeeping table under the migration lock: two
	// PostgreSQL processes running CREATE TABLE IF NOT EXISTS at once can
	// otherwise collide in the catalog.
	tx, err := b.Begin(ctx)
	if err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	if err := b.Lock(ctx, tx, lockMigrations); err != nil {
		_ = tx.Rollback(ctx)
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY,
		applied_at BIGINT NOT NULL)`); err != nil {
		_ = tx.Rollback(ctx)
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	var have int
	if err := b.Reader().QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&have); err != nil {
		return fmt.Errorf("schema version: %w", err)
	}
	if known := len(b.Migrations()); have > known {
		return fmt.Errorf("database schema version %d is newer than this binary's %d: %w", have, known, store.ErrSchemaTooNew)
	}
	for i, m := range b.Migrations() {
		version := i + 1
		if err := applyMigration(ctx, b, version, m); err != nil {
			return fmt.Errorf("migration %d: %w", version, err)
		}
	}
	return nil
}

func applyMigration(ctx context.Context, b Backend, version int, sql string) (err error) {
	tx, err := b.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(ctx)
		}
	}()
	if err := b.Lock(ctx, tx, lockMigrations); err != nil {
		return err
	}
	var one int
	switch err := tx.QueryRow(ctx, `SELECT 1 FROM schema_migrations WHERE version = $1`, version).Scan(&one); {
	case err == nil:
		return tx.Rollback(ctx) // already applied
	case !errors.Is(err, ErrNoRows):
		return err
	}
	if _, err := tx.Exec(ctx, sql); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)`, version, micros(now())); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// inTx runs fn in a write transaction, committing when it returns nil.
func (s *Store) inTx(ctx context.Context, fn func(tx Tx) error) (err error) {
	tx, err := s.b.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if p := recover(); p != nil {
			_ = tx.Rollback(ctx)
			panic(p)
		}
	}()
	if err := fn(tx); err != nil {
		_ = tx.Rollback(ctx)
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// notFound wraps store.ErrNotFound when err is ErrNoRows.
func notFound(err error, what string) error {
	if errors.Is(err, ErrNoRows) {
		return fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// conflict wraps store.ErrConflict when err is a unique violation.
func (s *Store) conflict(err error, what string) error {
	if s.b.IsUnique(err) {
		return fmt.Errorf("%s: %w: %v", what, store.ErrConflict, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
