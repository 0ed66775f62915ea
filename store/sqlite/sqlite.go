// Package sqlite is the embedded SQLite implementation of store.Store, built
// on modernc.org/sqlite (pure Go, no CGO). It is the default store of
// `vigil serve`.
//
// Layout: one database file in WAL mode; one writer connection (a
// database/sql pool capped at one connection, whose transactions start with
// BEGIN IMMEDIATE, so writers queue in Go rather than fail with SQLITE_BUSY)
// and a separate read-only pool for reads, which WAL lets run while the
// writer commits. busy_timeout is the first pragma on every connection.
// Migrations (shared with store/postgres, see migrations.go) run on Open, one
// transaction each.
//
// Durability: synchronous=FULL by default, so an acknowledged write survives
// a process crash and a power loss (the WAL is fsynced at every commit).
// Options.Synchronous "NORMAL" trades the power-loss guarantee for speed: it
// still survives a process crash, but the last commits may roll back after
// a power cut.
//
// Non-goals: several processes writing one file (use store/postgres to
// scale out), in-memory databases (the two pools need a file).
package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/store/internal/sqlstore"
)

// Options tunes Open. The zero value is the default.
type Options struct {
	// Synchronous is "FULL" (default: durable across power loss) or
	// "NORMAL" (durable across process crashes only).
	Synchronous string
	// Readers is the size of the read pool; 0 means max(4, GOMAXPROCS).
	Readers int
	// BusyTimeout bounds how long a statement waits for a lock; 0 means
	// 10 s.
	BusyTimeout time.Duration
}

// Open opens (creating it if needed) the database file at path, applies
// pending migrations and returns the store. opt may be nil.
func Open(ctx context.Context, path string, opt *Options) (store.Store, error) {
	if opt == nil {
		opt = &Options{}
	}
	if path == "" || strings.ContainsAny(path, "?#") || path == ":memory:" {
		return nil, fmt.Errorf("open sqlite %q: want a file path without '?' or '#'", path)
	}
	sync := strings.ToUpper(opt.Synchronous)
	switch sync {
	case "":
		sync = "FULL"
	case "FULL", "NORMAL":
	default:
		return nil, fmt.Errorf("open sqlite %s: synchronous %q: want FULL or NORMAL", path, opt.Synchronous)
	}
	busy := opt.BusyTimeout
	if busy <= 0 {
		busy = 10 * time.Second
	}
	readers := opt.Readers
	if readers <= 0 {
		readers = max(4, runtime.GOMAXPROCS(0))
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+sync+")")
	q.Add("_pragma", "foreign_keys(0)")
	q.Add("_pragma", "temp_store(MEMORY)")
	q.Add("_pragma", "cache_size(-16000)")
	// Pages read through a memory map rather than one pread each (the
	// WAL's pages are still read with pread; writes never go through it).
	q.Add("_pragma", fmt.Sprintf("mmap_size(%d)", mmapBytes))
	wq := url.Values{"_txlock": {"immediate"}}
	for k, v := range q {
		wq[k] = slices.Clone(v)
	}
	// The writer checkpoints the WAL into the database file after a
	// commit once the WAL holds walCheckpointPages pages. Appends rewrite
	// the same index, trace and session pages commit after commit, so a
	// longer WAL copies each of them to the database file once instead
	// of once per commit or two (at 1000 pages, SQLite's default, the
	// checkpoint was a tenth of ingest's CPU). Its bigger page cache keeps
	// those pages at hand instead of reading them back.
	wq.Add("_pragma", fmt.Sprintf("wal_autocheckpoint(%d)", walCheckpointPages))
	wq.Add("_pragma", fmt.Sprintf("cache_size(-%d)", writerCacheKiB))
	// url.Values.Encode sorts keys: _pragma values keep their order, and
	// busy_timeout is the first of them.
	writer, err := sql.Open("sqlite", path+"?"+wq.Encode())
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	writer.SetMaxOpenConns(1)
	writer.SetMaxIdleConns(1)
	writer.SetConnMaxLifetime(0)
	writer.SetConnMaxIdleTime(0)
	if err := writer.PingContext(ctx); err != nil {
		writer.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	rq := url.Values{}
	for k, v := range q {
		rq[k] = v
	}
	rq.Add("_pragma", "query_only(1)")
	reader, err := sql.Open("sqlite", path+"?"+rq.Encode())
	if err != nil {
		writer.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	reader.SetMaxOpenConns(readers)
	reader.SetMaxIdleConns(readers)
	reader.SetConnMaxIdleTime(5 * time.Minute)
	b := &backend{writer: writer, reader: reader}
	s, err := sqlstore.Open(ctx, b)
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	return s, nil
}

// Writer connection tuning (see Open): the WAL length, in pages, at which
// a commit checkpoints it, and the writer's page cache size in KiB (later
// pragmas override the shared cache_size).
const (
	walCheckpointPages = 16384
	writerCacheKiB     = 65536
	// mmapBytes is how much of the database file each connection maps.
	mmapBytes = 1 << 30
)

type backend struct {
	writer, reader *sql.DB
	hub            sqlstore.Hub
	mu             sync.Mutex
	stmts          map[string]*sql.Stmt // prepared bulk INSERTs on writer
	// readStmts and writeStmts cache the statements run outside
	// transactions (API-key lookups, trace reads, …), so each is parsed
	// once per connection rather than once per call.
	readStmts, writeStmts stmtCache
	// txStmts caches, on the writer connection, the statements run inside
	// transactions.
	txStmts stmtCache
}

func (b *backend) Kind() string             { return "sqlite" }
func (b *backend) Reader() sqlstore.Querier { return cached{b.reader, &b.readStmts} }
func (b *backend) Writer() sqlstore.Querier { return cached{b.writer, &b.writeStmts} }
func (b *backend) ForUpdate() string        { return "" }
func (b *backend) In(col string, n int) string {
	return fmt.Sprintf("%s IN (SELECT value FROM json_each($%d))", col, n)
}
func (b *backend) Migrations() []string { return migrations() }
func (b *backend) Ping(ctx context.Context) error {
	return b.reader.PingContext(ctx)
}

func (b *backend) ListArg(list any) any {
	j, _ := json.Marshal(list)
	return string(j)
}

// JSONStringEquals matches the member by name with json_each: a JSON path
// built from the key ('$."' || key || '"') cannot hold a '"', so such a
// key matched nothing here while PostgreSQL found it.
func (b *backend) JSONStringEquals(col string, key, val int) string {
	return fmt.Sprintf(`EXISTS (SELECT 1 FROM json_each(%s) AS m WHERE m.key = $%d AND m.type = 'text' AND m.value = $%d)`, col, key, val)
}

func (b *backend) IsUnique(err error) bool {
	var e *sqlite.Error
	if errors.As(err, &e) {
		c := e.Code()
		return c == sqlite3.SQLITE_CONSTRAINT_UNIQUE || c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	}
	return false
}

func (b *backend) Lock(context.Context, sqlstore.Tx, int64) error { return nil }

func (b *backend) Begin(ctx context.Context) (sqlstore.Tx, error) {
	tx, err := b.writer.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	return &txn{tx: tx, b: b}, nil
}

func (b *backend) Notify(ctx context.Context, channel, payload string) error {
	return b.hub.Notify(ctx, channel, payload)
}

func (b *backend) Subscribe(ctx context.Context, channel string) (<-chan string, error) {
	return b.hub.Subscribe(ctx, channel)
}

func (b *backend) Close() error {
	b.hub.Close()
	b.mu.Lock()
	for _, st := range b.stmts {
		st.Close()
	}
	b.stmts = nil
	b.mu.Unlock()
	b.readStmts.close()
	b.writeStmts.close()
	b.txStmts.close()
	return errors.Join(b.reader.Close(), b.writer.Close())
}

// checkText refuses a string argument holding a NUL character or invalid
// UTF-8 with store.ErrInvalidText, as PostgreSQL refuses it in a text
// parameter (SQLSTATE 22021): SQLite would keep it, and the two backends
// must accept the same names, ids and texts.
func checkText(args []any) error {
	for i, a := range args {
		var s string
		switch v := a.(type) {
		case string:
			s = v
		case *string:
			if v == nil {
				continue
			}
			s = *v
		default:
			continue
		}
		if strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s) {
			return fmt.Errorf("SQL argument %d: %w", i+1, store.ErrInvalidText)
		}
	}
	return nil
}

// sqlQuerier is what *sql.DB and *sql.Tx share.
type sqlQuerier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

type querier struct{ q sqlQuerier }

func (q querier) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	if err := checkText(args); err != nil {
		return 0, err
	}
	res, err := q.q.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (q querier) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	if err := checkText(args); err != nil {
		return nil, err
	}
	rows, err := q.q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

func (q querier) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Row {
	if err := checkText(args); err != nil {
		return sqlRow{err: err}
	}
	return sqlRow{r: q.q.QueryRowContext(ctx, query, args...)}
}

// stmtCache holds prepared statements by SQL text, up to maxCached.
type stmtCache struct {
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

const maxCached = 512

// get returns the statement for query, preparing it on db on first use; nil
// when the cache is full or preparing failed (the caller then runs the
// query unprepared and sees any error there).
func (c *stmtCache) get(ctx context.Context, db *sql.DB, query string) *sql.Stmt {
	c.mu.Lock()
	st, ok := c.m[query]
	full := len(c.m) >= maxCached
	c.mu.Unlock()
	if ok || full {
		return st
	}
	st, err := db.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[query]; ok {
		st.Close()
		return old
	}
	if c.m == nil {
		c.m = map[string]*sql.Stmt{}
	}
	c.m[query] = st
	return st
}

// lookup returns the cached statement for query, or nil.
func (c *stmtCache) lookup(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[query]
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.m {
		st.Close()
	}
	c.m = nil
}

// cached runs statements on db through its statement cache.
type cached struct {
	db    *sql.DB
	cache *stmtCache
}

func (c cached) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	if err := checkText(args); err != nil {
		return 0, err
	}
	if st := c.cache.get(ctx, c.db, query); st != nil {
		res, err := st.ExecContext(ctx, args...)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	}
	return querier{c.db}.Exec(ctx, query, args...)
}

func (c cached) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	if err := checkText(args); err != nil {
		return nil, err
	}
	if st := c.cache.get(ctx, c.db, query); st != nil {
		rows, err := st.QueryContext(ctx, args...)
		if err != nil {
			return nil, err
		}
		return sqlRows{rows}, nil
	}
	return querier{c.db}.Query(ctx, query, args...)
}

func (c cached) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Row {
	if err := checkText(args); err != nil {
		return sqlRow{err: err}
	}
	if st := c.cache.get(ctx, c.db, query); st != nil {
		return sqlRow{r: st.QueryRowContext(ctx, args...)}
	}
	return querier{c.db}.QueryRow(ctx, query, args...)
}

type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { _ = r.Rows.Close() }

// sqlRow is a row, or the error that kept the query from running.
type sqlRow struct {
	r   *sql.Row
	err error
}

func (r sqlRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	err := r.r.Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return sqlstore.ErrNoRows
	}
	return err
}

// txn is a write transaction. Its statements run prepared when the writer
// connection has them (b.txStmts); a statement it has not seen is run
// unprepared and prepared after the transaction ends, when the one writer
// connection is free again (preparing on the pool inside the transaction
// would wait forever for that connection).
type txn struct {
	tx     *sql.Tx
	b      *backend
	unseen []string
}

// prepared returns the cached statement for query bound to the
// transaction, or nil after noting query for preparation.
func (t *txn) prepared(ctx context.Context, query string) *sql.Stmt {
	if st := t.b.txStmts.lookup(query); st != nil {
		return t.tx.StmtContext(ctx, st)
	}
	t.unseen = append(t.unseen, query)
	return nil
}

func (t *txn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	if err := checkText(args); err != nil {
		return 0, err
	}
	if st := t.prepared(ctx, query); st != nil {
		res, err := st.ExecContext(ctx, args...)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	}
	return querier{t.tx}.Exec(ctx, query, args...)
}

func (t *txn) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	if err := checkText(args); err != nil {
		return nil, err
	}
	if st := t.prepared(ctx, query); st != nil {
		rows, err := st.QueryContext(ctx, args...)
		if err != nil {
			return nil, err
		}
		return sqlRows{rows}, nil
	}
	return querier{t.tx}.Query(ctx, query, args...)
}

func (t *txn) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Row {
	if err := checkText(args); err != nil {
		return sqlRow{err: err}
	}
	if st := t.prepared(ctx, query); st != nil {
		return sqlRow{r: st.QueryRowContext(ctx, args...)}
	}
	return querier{t.tx}.QueryRow(ctx, query, args...)
}

// done prepares the statements the transaction ran unprepared.
func (t *txn) done(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	for _, q := range t.unseen {
		t.b.txStmts.get(ctx, t.b.writer, q)
	}
	t.unseen = nil
}

func (t *txn) Commit(ctx context.Context) error {
	err := t.tx.Commit()
	t.done(ctx)
	return err
}

// RunBatch runs b statement by statement: SQLite has no round trips to save.
func (t *txn) RunBatch(ctx context.Context, b *sqlstore.Batch) error {
	return sqlstore.RunSequentially(ctx, t, b)
}
func (t *txn) Rollback(ctx context.Context) error {
	err := t.tx.Rollback()
	t.done(ctx)
	return err
}

// BulkInsert inserts rows with multi-row INSERT statements of bulkRows
// rows, then single-row ones for the rest. Both shapes are prepared once per
// table on the writer connection and reused by every transaction. The
// statements use ? placeholders: modernc binds $n by name, which costs
// O(parameters) per parameter.
func (t *txn) BulkInsert(ctx context.Context, table string, cols []string, rows [][]any) error {
	for _, r := range rows {
		if err := checkText(r); err != nil {
			return err
		}
	}
	i := 0
	if len(rows) >= bulkRows {
		stmt, err := t.stmt(ctx, table, cols, bulkRows)
		if err != nil {
			return err
		}
		args := make([]any, 0, bulkRows*len(cols))
		for ; i+bulkRows <= len(rows); i += bulkRows {
			args = args[:0]
			for _, r := range rows[i : i+bulkRows] {
				args = append(args, r...)
			}
			if _, err := stmt.ExecContext(ctx, args...); err != nil {
				return err
			}
		}
	}
	if i == len(rows) {
		return nil
	}
	stmt, err := t.stmt(ctx, table, cols, 1)
	if err != nil {
		return err
	}
	for ; i < len(rows); i++ {
		if _, err := stmt.ExecContext(ctx, rows[i]...); err != nil {
			return err
		}
	}
	return nil
}

// bulkRows is the row count of the multi-row INSERT shape.
const bulkRows = 50

// stmt returns the INSERT of n rows into table: the statement prepared by
// PrepareBulk, bound to tx, or one prepared on tx alone for a table
// PrepareBulk did not see. (Preparing on the writer pool inside a
// transaction would wait forever for its only connection.)
func (t *txn) stmt(ctx context.Context, table string, cols []string, n int) (*sql.Stmt, error) {
	q := insertSQL(table, cols, n)
	t.b.mu.Lock()
	st := t.b.stmts[q]
	t.b.mu.Unlock()
	if st != nil {
		return t.tx.StmtContext(ctx, st), nil
	}
	return t.tx.PrepareContext(ctx, q)
}

// PrepareBulk prepares the two INSERT shapes of table on the writer
// connection, outside any transaction.
func (b *backend) PrepareBulk(ctx context.Context, table string, cols []string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stmts == nil {
		b.stmts = map[string]*sql.Stmt{}
	}
	for _, n := range []int{1, bulkRows} {
		q := insertSQL(table, cols, n)
		if b.stmts[q] != nil {
			continue
		}
		st, err := b.writer.PrepareContext(ctx, q)
		if err != nil {
			return fmt.Errorf("prepare insert into %s: %w", table, err)
		}
		b.stmts[q] = st
	}
	return nil
}

func insertSQL(table string, cols []string, n int) string {
	var sb strings.Builder
	sb.WriteString("INSERT INTO ")
	sb.WriteString(table)
	sb.WriteString(" (")
	sb.WriteString(strings.Join(cols, ", "))
	sb.WriteString(") VALUES ")
	for i := range n {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteByte('(')
		for j := range cols {
			if j > 0 {
				sb.WriteString(", ")
			}
			sb.WriteByte('?')
		}
		sb.WriteByte(')')
	}
	return sb.String()
}
