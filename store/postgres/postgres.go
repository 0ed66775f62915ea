// Package postgres is the PostgreSQL implementation of store.Store, built on
// github.com/jackc/pgx/v5 (pgxpool), for running any number of `vigil serve`
// processes on one database.
//
// Writes run in read-committed transactions; the rows that serialise
// writers are locked with SELECT … FOR UPDATE (the dataset row for trace
// indices, the trace and ledger-session rows for appends and receipt chains,
// spec/ledger.md §7.4). Bulk rows (traces, events, receipts, annotations)
// are written with COPY. Receipts and events are TEXT, never jsonb, so their
// bytes are kept exactly (jsonb rejects \u0000 and reorders keys). Migrations
// (migrations.go) run on Open under an advisory lock, one transaction each,
// so several processes may start at once. Notify/Subscribe use
// LISTEN/NOTIFY, so every process sees every cache invalidation.
//
// Non-goals: search indexes (pg_trgm) and partitioning arrive with the
// features that need them, as new migrations.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/store/internal/sqlstore"
)

// Options tunes Open. The zero value is the default.
type Options struct {
	// MaxConns caps the pool; 0 means the DSN's pool_max_conns, else
	// max(8, 2×CPUs) (writers wait on row locks, not CPU).
	MaxConns int32
}

// Open connects to the database named by dsn (a postgres:// URL or a
// key=value string, as pgx accepts; pool_max_conns and search_path may be
// given there), applies pending migrations and returns the store. opt may
// be nil.
func Open(ctx context.Context, dsn string, opt *Options) (store.Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	switch {
	case opt != nil && opt.MaxConns > 0:
		cfg.MaxConns = opt.MaxConns
	case !strings.Contains(dsn, "pool_max_conns"):
		cfg.MaxConns = int32(max(8, 2*runtime.NumCPU()))
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres %s@%s/%s: %w", cfg.ConnConfig.User, cfg.ConnConfig.Host, cfg.ConnConfig.Database, err)
	}
	bctx, cancel := context.WithCancel(context.Background())
	b := &backend{pool: pool, ctx: bctx, cancel: cancel}
	s, err := sqlstore.Open(ctx, b)
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	return s, nil
}

type backend struct {
	pool   *pgxpool.Pool
	ctx    context.Context // cancelled by Close; ends subscriptions
	cancel context.CancelFunc
	subs   sync.WaitGroup
}

func (b *backend) Kind() string                   { return "postgres" }
func (b *backend) Reader() sqlstore.Querier       { return querier{b.pool} }
func (b *backend) Writer() sqlstore.Querier       { return querier{b.pool} }
func (b *backend) ForUpdate() string              { return " FOR UPDATE" }
func (b *backend) In(col string, n int) string    { return fmt.Sprintf("%s = ANY($%d)", col, n) }
func (b *backend) ListArg(list any) any           { return list }
func (b *backend) Migrations() []string           { return migrations() }
func (b *backend) Ping(ctx context.Context) error { return b.pool.Ping(ctx) }

// PrepareBulk does nothing: pgx caches the statements it sees.
func (b *backend) PrepareBulk(context.Context, string, []string) error { return nil }

// jsonbUnsafe matches JSON text that jsonb cannot hold: a \u0000 escape or
// a lone surrogate escape. JSONStringEquals skips such a row (it matches
// nothing) instead of failing the whole query, so one stored object could
// not break every filtered listing. It errs on the safe side: an escaped
// backslash before "u0000" also counts.
const jsonbUnsafe = `\\u0000|\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F]`

func (b *backend) JSONStringEquals(col string, key, val int) string {
	return fmt.Sprintf("(CASE WHEN (%[1]s) ~ '%[4]s' THEN false ELSE ((%[1]s)::jsonb -> ($%[2]d)::text) = to_jsonb(($%[3]d)::text) END)",
		col, key, val, jsonbUnsafe)
}

func (b *backend) IsUnique(err error) bool {
	var e *pgconn.PgError
	return errors.As(err, &e) && e.Code == "23505"
}

func (b *backend) Lock(ctx context.Context, tx sqlstore.Tx, key int64) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, key)
	return err
}

func (b *backend) Begin(ctx context.Context) (sqlstore.Tx, error) {
	tx, err := b.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return nil, err
	}
	return &txn{querier: querier{tx}, tx: tx}, nil
}

func (b *backend) Notify(ctx context.Context, channel, payload string) error {
	if _, err := b.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, channel, payload); err != nil {
		return fmt.Errorf("notify %s: %w", channel, err)
	}
	return nil
}

// Subscribe takes a connection out of the pool for the subscription's
// lifetime and LISTENs on it.
func (b *backend) Subscribe(ctx context.Context, channel string) (<-chan string, error) {
	pc, err := b.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", channel, err)
	}
	conn := pc.Hijack()
	// channel was validated as ^[a-z_][a-z0-9_]*$ and is quoted anyway.
	if _, err := conn.Exec(ctx, `LISTEN "`+channel+`"`); err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("subscribe %s: %w", channel, err)
	}
	out := make(chan string, 64)
	lctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(b.ctx, cancel)
	b.subs.Add(1)
	go func() {
		defer b.subs.Done()
		defer stop()
		defer cancel()
		defer close(out)
		defer conn.Close(context.Background())
		for {
			n, err := conn.WaitForNotification(lctx)
			if err != nil {
				return // ctx ended or the connection broke
			}
			select {
			case out <- n.Payload:
			default: // a slow reader loses invalidations, never blocks
			}
		}
	}()
	return out, nil
}

func (b *backend) Close() error {
	b.cancel()
	b.subs.Wait()
	b.pool.Close()
	return nil
}

// pgQuerier is what *pgxpool.Pool and pgx.Tx share.
type pgQuerier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

type querier struct{ q pgQuerier }

func (q querier) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := q.q.Exec(ctx, sql, args...)
	if err != nil {
		return 0, pgErr(err)
	}
	return tag.RowsAffected(), nil
}

func (q querier) Query(ctx context.Context, sql string, args ...any) (sqlstore.Rows, error) {
	rows, err := q.q.Query(ctx, sql, args...)
	if err != nil {
		return nil, pgErr(err)
	}
	return rows, nil
}

func (q querier) QueryRow(ctx context.Context, sql string, args ...any) sqlstore.Row {
	return row{q.q.QueryRow(ctx, sql, args...)}
}

type row struct{ r pgx.Row }

func (r row) Scan(dest ...any) error {
	err := r.r.Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return sqlstore.ErrNoRows
	}
	return pgErr(err)
}

// pgErr marks PostgreSQL's refusal of a NUL character or invalid UTF-8 in
// a text parameter (SQLSTATE 22021, 22P05) with store.ErrInvalidText, so
// the caller gets a 400 rather than a 500.
func pgErr(err error) error {
	var e *pgconn.PgError
	if errors.As(err, &e) && (e.Code == "22021" || e.Code == "22P05") {
		return invalidTextError{err}
	}
	return err
}

type invalidTextError struct{ err error }

func (e invalidTextError) Error() string   { return e.err.Error() }
func (e invalidTextError) Unwrap() []error { return []error{store.ErrInvalidText, e.err} }

type txn struct {
	querier
	tx pgx.Tx
}

func (t *txn) Commit(ctx context.Context) error { return pgErr(t.tx.Commit(ctx)) }

// Rollback ignores ctx cancellation so a cancelled request still releases
// its transaction.
func (t *txn) Rollback(ctx context.Context) error {
	return t.tx.Rollback(context.WithoutCancel(ctx))
}

// RunBatch sends b's statements (and inserts below copyThreshold rows, as
// multi-row INSERTs) in pgx batches, one round trip each; a larger insert
// flushes the pending batch and goes through COPY, keeping b's order.
func (t *txn) RunBatch(ctx context.Context, b *sqlstore.Batch) error {
	var pb pgx.Batch
	flush := func() error {
		if pb.Len() == 0 {
			return nil
		}
		err := t.tx.SendBatch(ctx, &pb).Close()
		pb = pgx.Batch{}
		return pgErr(err)
	}
	for _, it := range b.Items {
		switch {
		case it.Table == "":
			pb.Queue(it.SQL, it.Args...)
		case len(it.Rows) < copyThreshold:
			q, args := insertSQL(it.Table, it.Cols, it.Rows)
			pb.Queue(q, args...)
		default:
			if err := flush(); err != nil {
				return err
			}
			if _, err := t.tx.CopyFrom(ctx, pgx.Identifier{it.Table}, it.Cols, pgx.CopyFromRows(it.Rows)); err != nil {
				return pgErr(err)
			}
		}
	}
	return flush()
}

// copyThreshold is the row count from which COPY beats one multi-row
// INSERT (COPY costs an extra round trip to describe the table).
const copyThreshold = 16

func (t *txn) BulkInsert(ctx context.Context, table string, cols []string, rows [][]any) error {
	if len(rows) == 0 {
		return nil
	}
	if len(rows) >= copyThreshold {
		_, err := t.tx.CopyFrom(ctx, pgx.Identifier{table}, cols, pgx.CopyFromRows(rows))
		return pgErr(err)
	}
	q, args := insertSQL(table, cols, rows)
	_, err := t.tx.Exec(ctx, q, args...)
	return pgErr(err)
}

// insertSQL renders one multi-row INSERT of rows with $n parameters.
func insertSQL(table string, cols []string, rows [][]any) (string, []any) {
	var sb strings.Builder
	fmt.Fprintf(&sb, "INSERT INTO %s (%s) VALUES ", table, strings.Join(cols, ", "))
	args := make([]any, 0, len(rows)*len(cols))
	for i, r := range rows {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteByte('(')
		for j := range r {
			if j > 0 {
				sb.WriteString(", ")
			}
			args = append(args, r[j])
			fmt.Fprintf(&sb, "$%d", len(args))
		}
		sb.WriteByte(')')
	}
	return sb.String(), args
}
