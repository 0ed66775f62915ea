// Package sqlstore is the SQL implementation of store.Store shared by
// store/sqlite and store/postgres. The SQL it writes is the common subset of
// SQLite 3.35+ and PostgreSQL 13+ ($n placeholders, ON CONFLICT, RETURNING);
// each backend supplies a Backend for what differs: connections and
// transactions, row locks, bulk inserts, list parameters, JSON access,
// unique-violation detection, notifications and its migration list.
//
// Times are stored as integer microseconds since the Unix epoch (UTC) in
// both databases, booleans as the database's boolean (INTEGER 0/1 on
// SQLite), JSON as TEXT: events and receipts are kept byte for byte.
//
// Non-goals: a query builder or ORM; anything a backend can do better alone
// (COPY, LISTEN) stays in the backend.
package sqlstore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"
)

// ErrNoRows is what Row.Scan returns when the query matched nothing; each
// backend maps its driver's own value to it.
var ErrNoRows = errors.New("sqlstore: no rows")

// Querier runs statements; both a transaction and the read pool are one.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (int64, error)
	Query(ctx context.Context, sql string, args ...any) (Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) Row
}

// Rows iterates a result set, as database/sql's and pgx's do.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// Row is a single-row result; Scan returns ErrNoRows when there is none.
type Row interface {
	Scan(dest ...any) error
}

// Tx is a write transaction.
type Tx interface {
	Querier
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
	// BulkInsert inserts rows into table (columns cols) as fast as the
	// backend can: prepared statements on SQLite, COPY on PostgreSQL.
	BulkInsert(ctx context.Context, table string, cols []string, rows [][]any) error
	// RunBatch runs b's writes in order, in as few round trips as the
	// backend can (one pgx batch on PostgreSQL), and returns the first
	// error.
	RunBatch(ctx context.Context, b *Batch) error
}

// Batch is an ordered list of writes for Tx.RunBatch.
type Batch struct {
	Items []BatchItem
}

// BatchItem is one write: a statement (SQL, Args) or, when Table is set,
// rows for BulkInsert.
type BatchItem struct {
	SQL   string
	Args  []any
	Table string
	Cols  []string
	Rows  [][]any
}

// Exec queues a statement.
func (b *Batch) Exec(sql string, args ...any) {
	b.Items = append(b.Items, BatchItem{SQL: sql, Args: args})
}

// Insert queues rows for table; nothing when rows is empty.
func (b *Batch) Insert(table string, cols []string, rows [][]any) {
	if len(rows) > 0 {
		b.Items = append(b.Items, BatchItem{Table: table, Cols: cols, Rows: rows})
	}
}

// RunSequentially runs b one write at a time: the RunBatch of backends
// without pipelining.
func RunSequentially(ctx context.Context, tx Tx, b *Batch) error {
	for _, it := range b.Items {
		if it.Table != "" {
			if err := tx.BulkInsert(ctx, it.Table, it.Cols, it.Rows); err != nil {
				return err
			}
			continue
		}
		if _, err := tx.Exec(ctx, it.SQL, it.Args...); err != nil {
			return err
		}
	}
	return nil
}

// Backend is what a database contributes.
type Backend interface {
	// Kind is "sqlite" or "postgres".
	Kind() string
	// Reader is the pool used for reads outside transactions.
	Reader() Querier
	// Writer runs single-statement writes outside transactions (the one
	// writer connection on SQLite).
	Writer() Querier
	// Begin starts a write transaction. On SQLite it takes the write lock
	// at once (BEGIN IMMEDIATE).
	Begin(ctx context.Context) (Tx, error)
	// ForUpdate is the suffix that locks the selected rows until the
	// transaction ends (" FOR UPDATE"), or "" when Begin already
	// serialises writers.
	ForUpdate() string
	// In returns a condition "col is one of the list in parameter $n";
	// ListArg converts the list (a []string or []int64) to that parameter.
	In(col string, n int) string
	ListArg(list any) any
	// JSONStringEquals returns a condition "the JSON object in column col
	// has a string member named by parameter $key whose value is
	// parameter $val".
	JSONStringEquals(col string, key, val int) string
	// IsUnique reports whether err is a unique-constraint violation.
	IsUnique(err error) bool
	// Lock takes the transaction-scoped lock named key (an advisory lock
	// on PostgreSQL; nothing on SQLite, whose writers are serial), held
	// until tx ends.
	Lock(ctx context.Context, tx Tx, key int64) error
	// PrepareBulk is called once after migrating for each table that
	// BulkInsert writes, so the backend may prepare statements ahead.
	PrepareBulk(ctx context.Context, table string, cols []string) error
	// Migrations is the backend's append-only migration list.
	Migrations() []string
	// Notify and Subscribe implement store.Notifier.
	Notify(ctx context.Context, channel, payload string) error
	Subscribe(ctx context.Context, channel string) (<-chan string, error)
	Ping(ctx context.Context) error
	Close() error
}

// micros is the stored form of a time.
func micros(t time.Time) int64 { return t.UnixMicro() }

// microsPtr stores an optional time.
func microsPtr(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	v := t.UnixMicro()
	return &v
}

// fromMicros reads a stored time.
func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

// fromMicrosPtr reads an optional stored time.
func fromMicrosPtr(v *int64) *time.Time {
	if v == nil {
		return nil
	}
	t := fromMicros(*v)
	return &t
}

// now is the current time at the stored precision.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// orNow returns t truncated to microseconds, or now when t is zero.
func orNow(t time.Time) time.Time {
	if t.IsZero() {
		return now()
	}
	return t.UTC().Truncate(time.Microsecond)
}

// nullString maps "" to NULL.
func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// str reads a nullable string.
func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// params accumulates positional parameters of a dynamic query.
type params struct{ args []any }

// add appends v and returns its placeholder.
func (p *params) add(v any) string {
	p.args = append(p.args, v)
	return "$" + strconv.Itoa(len(p.args))
}

// n is the number of the last parameter added.
func (p *params) n() int { return len(p.args) }

// escapeLike escapes s for a LIKE pattern with ESCAPE '\'.
func escapeLike(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(s)
}
