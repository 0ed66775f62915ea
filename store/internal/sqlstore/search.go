package sqlstore

// Search (explorer-api §7): the index, built off the write path from the
// list of traces the writes mark (see IndexPending), and the compiler from a search.Query
// to SQL. SQLite answers free-text terms from FTS5 (trigram tokenizer) and
// metadata filters through vigil_meta, a Go function store/sqlite
// registers (search.Meta.Match); PostgreSQL from pg_trgm's GIN index and
// SQL over jsonb that reproduces search.Meta.Match. The storetest search
// table runs every filter on both and must give identical results.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/vigilhq/vigil/search"
	"github.com/vigilhq/vigil/store"
)

// searchColList are the columns searchRows fills.
var searchColList = []string{"trace_id", "msg", "tool", "text"}

// searchRows returns the index rows of a trace's name (when name is not
// "") and of msgs. A field whose folded text repeats one already among
// msgs (a system prompt resent each turn, identical tool outputs) is
// indexed once: a trace matches when any of its fields does, so the
// repeat adds nothing but index writes.
func searchRows(traceID, name string, msgs []store.Message) [][]any {
	var rows [][]any
	if name != "" {
		rows = append(rows, []any{traceID, int64(-1), false, search.Fold(name)})
	}
	type key struct {
		tool bool
		text string
	}
	seen := map[key]bool{}
	for i := range msgs {
		for _, f := range search.Fields(msgs[i].Index, msgs[i].Data) {
			k := key{f.Tool, search.Fold(f.Text)}
			if seen[k] {
				continue
			}
			seen[k] = true
			rows = append(rows, []any{traceID, int64(f.Msg), f.Tool, k.text})
		}
	}
	return rows
}

// The index is built off the write path. Writes only list the traces
// whose index rows must be rebuilt in search_reindex, in the write's own
// transaction (markPendingSQL, markPendingFrom): a push, append, rename
// or delete costs one small row per trace, and a kill -9 loses nothing
// acknowledged. IndexPending (a background loop of the server) drains the
// list in batches of up to indexBatchSize traces, each one transaction
// (and, on SQLite, one insert statement: insertSearchRows); Search first indexes what is pending for the datasets it reads
// (catchUp), so a search sees every committed write.
//
// On PostgreSQL several processes share the list. An indexer claims rows
// with FOR UPDATE (SKIP LOCKED in the background), so no trace is indexed
// twice at once; writers mark with an upsert that locks the row, so a write
// that commits while its trace is being indexed waits for that indexing to
// commit and then lists the trace again. Claims and the list marks of
// DeleteDataset take rows in trace_id order, so they cannot deadlock.

// markPendingSQL lists trace $1 in search_reindex (the DO UPDATE takes the
// row lock a concurrent indexer's claim holds; DO NOTHING would not wait).
const markPendingSQL = `INSERT INTO search_reindex (trace_id) VALUES ($1) ON CONFLICT (trace_id) DO UPDATE SET trace_id = excluded.trace_id`

// markPendingFrom returns the statement that lists in search_reindex the
// traces the condition on traces selects, in id order.
func markPendingFrom(cond string) string {
	return `INSERT INTO search_reindex (trace_id) SELECT id FROM traces WHERE ` + cond +
		` ORDER BY id ON CONFLICT (trace_id) DO UPDATE SET trace_id = excluded.trace_id`
}

// indexBatchSize is how many pending traces one indexing transaction takes.
const indexBatchSize = 500

// IndexPending implements store.SearchIndex: it indexes up to max pending
// traces (max <= 0: one batch) that no other indexer holds.
func (s *Store) IndexPending(ctx context.Context, max int) (int, error) {
	if max <= 0 {
		max = indexBatchSize
	}
	// Most calls find nothing to do (a loop polls five times a second):
	// a read on the reader pool tells, without a write transaction.
	var pending int
	err := s.b.Reader().QueryRow(ctx, `SELECT COUNT(*) FROM (SELECT 1 FROM search_reindex LIMIT 1) p`).Scan(&pending)
	if err != nil {
		return 0, fmt.Errorf("search: pending index rows: %w", err)
	}
	if pending == 0 {
		return 0, nil
	}
	lock := ""
	if s.b.Kind() == "postgres" {
		lock = ` FOR UPDATE SKIP LOCKED`
	}
	done := 0
	for done < max {
		n, err := s.indexBatch(ctx, `SELECT trace_id FROM search_reindex ORDER BY trace_id LIMIT `+
			strconv.Itoa(min(indexBatchSize, max-done))+lock)
		done += n
		if err != nil || n == 0 {
			return done, err
		}
	}
	return done, nil
}

// catchUp indexes the pending traces of datasets (nil: of every dataset)
// before a search reads the index. It waits for rows another indexer
// holds (their indexing commits first) and takes at most the rows pending
// when it starts, so writes arriving meanwhile cannot keep it going.
func (s *Store) catchUp(ctx context.Context, datasets []string) error {
	var pending int
	if err := s.b.Reader().QueryRow(ctx, `SELECT COUNT(*) FROM search_reindex`).Scan(&pending); err != nil {
		return fmt.Errorf("search: pending index rows: %w", err)
	}
	if pending == 0 || datasets != nil && len(datasets) == 0 {
		return nil
	}
	claim := `SELECT r.trace_id FROM search_reindex r`
	var args []any
	if datasets != nil {
		claim += ` JOIN traces t ON t.id = r.trace_id WHERE ` + s.b.In("t.dataset_id", 1)
		args = append(args, s.b.ListArg(datasets))
	}
	claim += ` ORDER BY r.trace_id LIMIT ` + strconv.Itoa(indexBatchSize)
	if s.b.Kind() == "postgres" {
		claim += ` FOR UPDATE OF r`
	}
	for done := 0; done < pending; {
		n, err := s.indexBatch(ctx, claim, args...)
		if err != nil {
			return fmt.Errorf("search: index pending traces: %w", err)
		}
		if n == 0 {
			return nil
		}
		done += n
	}
	return nil
}

// indexBatch claims the search_reindex rows claim selects and, in the
// same transaction, brings their traces' index rows up to date
// (indexIncremental: new messages and a changed name; deleted traces lose
// theirs) and removes the claimed rows. It returns how many it claimed.
func (s *Store) indexBatch(ctx context.Context, claim string, args ...any) (int, error) {
	var ids []string
	var marks map[string]indexMark
	err := s.inTx(ctx, func(tx Tx) error {
		marks = nil
		rows, err := tx.Query(ctx, claim, args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil || len(ids) == 0 {
			return err
		}
		// Read through the pool: a write to a claimed trace commits only
		// after this transaction (it waits for the claimed row), so the
		// committed state is the state to index.
		list := s.b.ListArg(ids)
		var b Batch
		if marks, err = s.indexIncremental(ctx, &b, ids, list); err != nil {
			return err
		}
		b.Exec(`DELETE FROM search_reindex WHERE `+s.b.In("trace_id", 1), list)
		return tx.RunBatch(ctx, &b)
	})
	if err != nil {
		return 0, fmt.Errorf("search index: %w", err)
	}
	s.marks.set(marks)
	return len(ids), nil
}

// indexRows returns the index rows a full rebuild makes of the traces in
// list (a ListArg) that exist, reading only the columns searchRows needs
// (the reference SearchIndexDiff checks the incremental index against).
func (s *Store) indexRows(ctx context.Context, list any) ([][]any, error) {
	var index [][]any
	rows, err := s.b.Reader().Query(ctx, `SELECT id, name FROM traces WHERE `+s.b.In("id", 1), list)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var id string
		var name *string
		if err := rows.Scan(&id, &name); err != nil {
			rows.Close()
			return nil, err
		}
		if name != nil {
			index = append(index, searchRows(id, *name, nil)...)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = s.b.Reader().Query(ctx, `SELECT trace_id, idx, data FROM messages WHERE `+s.b.In("trace_id", 1)+` ORDER BY trace_id, idx`, list)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var cur string
	var msgs []store.Message
	flush := func() {
		if len(msgs) > 0 {
			index = append(index, searchRows(cur, "", msgs)...)
		}
		msgs = msgs[:0]
	}
	for rows.Next() {
		var id string
		var idx int64
		var data []byte
		if err := rows.Scan(&id, &idx, &data); err != nil {
			return nil, err
		}
		if id != cur {
			flush()
			cur = id
		}
		msgs = append(msgs, store.Message{Index: int(idx), Data: data})
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	flush()
	return index, nil
}

// insertSearchRows queues the insert of rows into search_text. SQLite
// gets them in one statement (a JSON array): FTS5 writes the terms it
// holds to a new segment at every statement of a transaction, so the
// 50-row inserts of Tx.BulkInsert made hundreds of small segments per
// batch and merging them cost more than the terms themselves.
func (s *Store) insertSearchRows(b *Batch, rows [][]any) error {
	if len(rows) == 0 {
		return nil
	}
	if s.b.Kind() != "sqlite" {
		b.Insert("search_text", searchColList, rows)
		return nil
	}
	js, err := json.Marshal(rows)
	if err != nil {
		return fmt.Errorf("encode index rows: %w", err)
	}
	b.Exec(`INSERT INTO search_text (trace_id, msg, tool, text) SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), `+
		`json_extract(value, '$[2]'), json_extract(value, '$[3]') FROM json_each($1)`, string(js))
	return nil
}

// searchCursor is the decoded NextCursor: the sort key and id of the last
// trace of the page.
type searchCursor struct {
	K  int64  `json:"k"`
	ID string `json:"id"`
}

var searchOrderCol = map[store.TraceOrder]struct {
	col  string
	desc bool
}{
	store.OrderIndex:              {"t.idx", false},
	store.OrderIndexDesc:          {"t.idx", true},
	store.OrderTimeCreated:        {"t.time_created", false},
	store.OrderTimeCreatedDesc:    {"t.time_created", true},
	store.OrderTimeLastPushed:     {"t.time_last_pushed", false},
	store.OrderTimeLastPushedDesc: {"t.time_last_pushed", true},
}

// Search implements store.Searcher.
func (s *Store) Search(ctx context.Context, req store.SearchRequest) (*store.SearchResult, error) {
	q, err := search.Parse(req.Query)
	if err != nil {
		return nil, fmt.Errorf("search %q: %w", req.Query, err)
	}
	_, ok := searchOrderCol[req.Order]
	if !ok {
		return nil, fmt.Errorf("search: unknown order %d", req.Order)
	}
	if req.Now.IsZero() {
		req.Now = time.Now()
	}
	limit := req.Limit
	if limit <= 0 {
		limit = 50
	}
	if err := s.catchUp(ctx, req.DatasetIDs); err != nil {
		return nil, err
	}
	if win, ok, err := s.searchWindow(ctx, req, q, limit); err != nil || ok {
		return win, err
	}
	c, from, cond, err := s.searchWhere(&req, q, false)
	if err != nil {
		return nil, err
	}
	res := &store.SearchResult{Total: -1}
	if !req.NoTotal {
		cp := c.p
		var n int
		err := s.b.Reader().QueryRow(ctx, `SELECT COUNT(*) FROM (SELECT 1`+from+cond+` LIMIT `+cp.add(int64(store.MaxSearchTotal+1))+`) x`, cp.args...).Scan(&n)
		if err != nil {
			return nil, fmt.Errorf("search %q: count: %w", req.Query, err)
		}
		res.Total, res.TotalIsEstimate = min(n, store.MaxSearchTotal), n > store.MaxSearchTotal
	}
	ts, next, err := s.searchPage(ctx, &req, c, from, cond, limit)
	if err != nil {
		return nil, err
	}
	res.NextCursor = next
	if req.WithMessages {
		if err := s.loadMessages(ctx, ts); err != nil {
			return nil, fmt.Errorf("search %q: %w", req.Query, err)
		}
	}
	res.Traces = ts
	return res, nil
}

// searchPage runs the page query of a search: the matches of from and
// cond after req.Cursor in req.Order, at most limit, and the cursor of the
// next page ("" = none).
func (s *Store) searchPage(ctx context.Context, req *store.SearchRequest, c *compiler, from, cond string, limit int) ([]*store.Trace, string, error) {
	ord := searchOrderCol[req.Order]
	if req.Cursor != "" {
		var cur searchCursor
		raw, err := base64.RawURLEncoding.DecodeString(req.Cursor)
		if err != nil || json.Unmarshal(raw, &cur) != nil || cur.ID == "" {
			return nil, "", fmt.Errorf("search cursor %q: %w", req.Cursor, store.ErrInvalidCursor)
		}
		cmp := ">"
		if ord.desc {
			cmp = "<"
		}
		k := c.p.add(cur.K)
		id := c.p.add(cur.ID)
		keyset := `(` + ord.col + ` ` + cmp + ` ` + k + ` OR ` + ord.col + ` = ` + k + ` AND t.id > ` + id + `)`
		if cond == "" {
			cond = ` WHERE ` + keyset
		} else {
			cond += ` AND ` + keyset
		}
	}
	dir := ""
	if ord.desc {
		dir = " DESC"
	}
	sql := `SELECT ` + prefixed("t", splitCols(traceCols)) + from + cond +
		` ORDER BY ` + ord.col + dir + `, t.id LIMIT ` + c.p.add(int64(limit+1))
	ts, err := s.queryTraces(ctx, sql, c.p.args...)
	if err != nil {
		return nil, "", fmt.Errorf("search %q: %w", req.Query, err)
	}
	if len(ts) > limit {
		ts = ts[:limit]
		last := ts[limit-1]
		k := last.Index
		switch ord.col {
		case "t.time_created":
			k = micros(last.TimeCreated)
		case "t.time_last_pushed":
			k = micros(last.TimeLastPushed)
		}
		raw, _ := json.Marshal(searchCursor{k, last.ID})
		return ts, base64.RawURLEncoding.EncodeToString(raw), nil
	}
	return ts, "", nil
}

// searchWindowSize is how many traces, in index order, the window plan
// checks the free-text terms of a page of limit traces on before it
// falls back to the index: 1,020 for the UI's pages of 50.
func searchWindowSize(limit int) int { return max(20*(limit+1), 100) }

// searchWindow answers a page of an index-ordered, uncounted search of
// one dataset: it checks the whole query, free-text terms included, on
// the next searchWindowSize(limit) traces from the cursor on (their
// indices bound the scan) instead of collecting every trace the trigram
// index holds for a term, so a common term costs a page of traces, not
// the whole dataset. ok is false when the plan does not apply (res nil)
// or the window holds too few matches for a full page (res non-nil: the
// matches are sparse); the caller then runs the full plan. Both plans
// give the same page.
func (s *Store) searchWindow(ctx context.Context, req store.SearchRequest, q *search.Query, limit int) (res *store.SearchResult, ok bool, err error) {
	ord := searchOrderCol[req.Order]
	if !req.NoTotal || len(req.DatasetIDs) != 1 || ord.col != "t.idx" || q.Root == nil {
		return nil, false, nil
	}
	bq := `SELECT idx FROM traces WHERE dataset_id = $1`
	args := []any{req.DatasetIDs[0]}
	cmp, dir := ">", ""
	if ord.desc {
		cmp, dir = "<", " DESC"
	}
	if req.Cursor != "" {
		var cur searchCursor
		raw, err := base64.RawURLEncoding.DecodeString(req.Cursor)
		if err != nil || json.Unmarshal(raw, &cur) != nil || cur.ID == "" {
			return nil, false, fmt.Errorf("search cursor %q: %w", req.Cursor, store.ErrInvalidCursor)
		}
		bq += ` AND idx ` + cmp + ` $2`
		args = append(args, cur.K)
	}
	bq += ` ORDER BY idx` + dir + ` LIMIT 1 OFFSET ` + strconv.Itoa(searchWindowSize(limit))
	var bound int64
	bounded := true
	if err := s.b.Reader().QueryRow(ctx, bq, args...).Scan(&bound); errors.Is(err, ErrNoRows) {
		bounded = false // the window reaches the end of the dataset
	} else if err != nil {
		return nil, false, fmt.Errorf("search %q: window: %w", req.Query, err)
	}
	c, from, cond, err := s.searchWhere(&req, q, true)
	if err != nil {
		return nil, false, err
	}
	if bounded {
		op := `<` // the window: the traces before the bound
		if ord.desc {
			op = `>`
		}
		w := `t.idx ` + op + ` ` + c.p.add(bound)
		if cond == "" {
			cond = ` WHERE ` + w
		} else {
			cond += ` AND ` + w
		}
	}
	ts, next, err := s.searchPage(ctx, &req, c, from, cond, limit)
	if err != nil {
		return nil, false, err
	}
	if bounded && next == "" {
		return nil, false, nil // too few matches in the window: the full plan
	}
	if req.WithMessages {
		if err := s.loadMessages(ctx, ts); err != nil {
			return nil, false, fmt.Errorf("search %q: %w", req.Query, err)
		}
	}
	return &store.SearchResult{Traces: ts, Total: -1, NextCursor: next}, true, nil
}

// searchWhere compiles the access rules of req and query q into the FROM
// clause and WHERE condition ("" = none) on traces t that select every
// match; c holds the parameters. scanDriver checks every free-text term
// per candidate instead of driving the search from the trigram index
// (the window plan of Search).
func (s *Store) searchWhere(req *store.SearchRequest, q *search.Query, scanDriver bool) (c *compiler, from, cond string, err error) {
	c = &compiler{s: s, req: req}
	var where []string
	switch {
	case req.AllOwners:
	case req.Public:
		where = append(where, `(t.owner_id = `+c.p.add(req.OwnerID)+` OR t.dataset_id IN (SELECT id FROM datasets WHERE is_public))`)
	default:
		where = append(where, `t.owner_id = `+c.p.add(req.OwnerID))
	}
	if req.DatasetIDs != nil {
		c.p.add(s.b.ListArg(req.DatasetIDs))
		where = append(where, s.b.In("t.dataset_id", c.p.n()))
	}
	if q.Root != nil {
		// The longest positive top-level term drives the search through
		// the index; the other top-level terms are verified per candidate.
		conj := []search.Node{q.Root}
		if a, ok := q.Root.(*search.And); ok {
			conj = a.X
		}
		driver := -1
		for i, n := range conj {
			if scanDriver {
				break
			}
			if t, ok := n.(*search.Text); ok && utf8.RuneCountInString(search.Fold(t.Value)) >= 3 &&
				(driver < 0 || utf8.RuneCountInString(t.Value) > utf8.RuneCountInString(conj[driver].(*search.Text).Value)) {
				driver = i
			}
		}
		for i, n := range conj {
			if t, ok := n.(*search.Text); ok && i != driver {
				where = append(where, c.textScan(t.Value))
				continue
			}
			if i == driver && c.pg() {
				// An array from an InitPlan: PostgreSQL then drives from
				// the trigram index whatever its statistics say (right
				// after a bulk load, before ANALYZE, a semi-join plan
				// scanned every trace).
				f := search.Fold(n.(*search.Text).Value)
				where = append(where, `t.id = ANY(ARRAY(SELECT DISTINCT s.trace_id FROM search_text s WHERE s.text LIKE `+
					c.p.add("%"+escapeLike(f)+"%")+` ESCAPE '\'))`)
				continue
			}
			w, err := c.node(n)
			if err != nil {
				return nil, "", "", err
			}
			where = append(where, w)
		}
	}
	from = ` FROM traces t`
	md := `vigil_jsonb(t.metadata)`
	if c.metaPaths > 1 {
		// Several comparisons: parse the metadata once per row (OFFSET 0
		// keeps PostgreSQL from inlining the subquery). One comparison
		// parses it in place, which lets the planner filter first.
		from += `, LATERAL (SELECT vigil_jsonb(t.metadata) AS md OFFSET 0) m`
		md = `m.md`
	}
	if len(where) > 0 {
		cond = ` WHERE ` + strings.ReplaceAll(strings.Join(where, ` AND `), metadataMarker, md)
	}
	return c, from, cond, nil
}

// compiler turns query nodes into SQL conditions on traces t.
type compiler struct {
	s   *Store
	req *store.SearchRequest
	p   params
	// metaPaths counts the metadata paths the SQL reads (PostgreSQL),
	// each through metadataMarker.
	metaPaths int
}

// metadataMarker stands for the parsed metadata in compiled SQL until
// Search knows how many comparisons read it (no user text is ever part
// of the SQL, so the marker cannot collide).
const metadataMarker = "{{METADATA}}"

func (c *compiler) pg() bool { return c.s.b.Kind() == "postgres" }

func (c *compiler) node(n search.Node) (string, error) {
	switch n := n.(type) {
	case *search.And, *search.Or:
		var xs []search.Node
		sep := ` AND `
		if a, ok := n.(*search.And); ok {
			xs = a.X
		} else {
			xs, sep = n.(*search.Or).X, ` OR `
		}
		parts := make([]string, len(xs))
		for i, x := range xs {
			w, err := c.node(x)
			if err != nil {
				return "", err
			}
			parts[i] = w
		}
		return `(` + strings.Join(parts, sep) + `)`, nil
	case *search.Not:
		w, err := c.node(n.X)
		if err != nil {
			return "", err
		}
		return `NOT COALESCE(` + w + `, FALSE)`, nil
	case *search.Text:
		return c.textIndexed(n.Value), nil
	case *search.Is:
		w := c.is(n.Name)
		if n.Neg {
			return `NOT ` + w, nil
		}
		return w, nil
	case *search.Meta:
		return c.meta(n), nil
	case *search.Source:
		if n.Value == "user" {
			return c.annotation(`a.source IN ('', 'user')`), nil
		}
		return c.annotation(`a.source = ` + c.p.add(n.Value)), nil
	case *search.Guardrail:
		name, id := c.annJSON("guardrail", "name"), c.annJSON("guardrail", "id")
		if c.pg() {
			name = `(` + name + `) COLLATE "C"`
		}
		var w string
		if n.Prefix {
			pat := c.p.add(escapeLike(search.LowerASCII(n.Value)) + "%")
			w = `(lower(` + name + `) LIKE ` + pat + ` ESCAPE '\' OR ` + id + ` LIKE ` + c.p.add(escapeLike(n.Value)+"%") + ` ESCAPE '\')`
			if !c.pg() { // SQLite's LIKE ignores ASCII case; ids must match exactly
				w = `(lower(` + name + `) LIKE ` + pat + ` ESCAPE '\' OR substr(` + id + `, 1, ` + c.p.add(int64(utf8.RuneCountInString(n.Value))) + `) = ` + c.p.add(n.Value) + `)`
			}
		} else {
			w = `(lower(` + name + `) = ` + c.p.add(search.LowerASCII(n.Value)) + ` OR ` + id + ` = ` + c.p.add(n.Value) + `)`
		}
		return c.annotation(`a.source = 'guardrails-error' AND ` + w), nil
	case *search.Severity:
		op := n.Op
		return c.annotation(c.severityBucket() + ` ` + op + ` ` + c.p.add(int64(n.Level))), nil
	case *search.Annotation:
		return c.annotation(c.contains(`lower(a.content)`, c.p.add(search.LowerASCII(n.Value)))), nil
	case *search.Tool:
		pat := escapeLike(search.Fold(n.Name))
		pat = strings.ReplaceAll(pat, "*", "%")
		return `EXISTS (SELECT 1 FROM search_text s WHERE s.trace_id = t.id AND s.tool AND s.text LIKE ` + c.p.add(pat) + ` ESCAPE '\')`, nil
	case *search.Session:
		m := &search.Meta{Path: []string{"session_id"}, Quoted: []bool{true}, Op: "=", Value: n.Key, Kind: search.KindString}
		return `(t.session_key = ` + c.p.add(n.Key) + ` OR ` + c.meta(m) + `)`, nil
	case *search.Dataset:
		ref := n.Ref
		user, name, hasUser := strings.Cut(ref, "/")
		w := `d.id = ` + c.p.add(ref)
		if hasUser {
			w += ` OR d.name = ` + c.p.add(name) + ` AND d.owner_id IN (SELECT id FROM users WHERE username = ` + c.p.add(user) + `)`
		} else {
			w += ` OR d.name = ` + c.p.add(ref) + ` AND d.owner_id = ` + c.p.add(c.req.CallerID)
		}
		return `t.dataset_id IN (SELECT d.id FROM datasets d WHERE ` + w + `)`, nil
	case *search.Time:
		col, op := "t.time_created", "<"
		if n.Updated() {
			col = "t.time_last_pushed"
		}
		if n.After() {
			op = ">="
		}
		return col + ` ` + op + ` ` + c.p.add(micros(n.At(c.req.Now))), nil
	case *search.IDs:
		c.p.add(c.s.b.ListArg(n.IDs))
		return c.s.b.In("t.id", c.p.n()), nil
	case *search.Indices:
		var singles []int64
		var parts []string
		for _, r := range n.Ranges {
			if r[0] == r[1] {
				singles = append(singles, r[0])
			} else {
				parts = append(parts, `t.idx BETWEEN `+c.p.add(r[0])+` AND `+c.p.add(r[1]))
			}
		}
		if singles != nil {
			c.p.add(c.s.b.ListArg(singles))
			parts = append(parts, c.s.b.In("t.idx", c.p.n()))
		}
		return `(t.dataset_id IS NOT NULL AND (` + strings.Join(parts, ` OR `) + `))`, nil
	}
	return "", fmt.Errorf("search: cannot compile %T", n)
}

// contains is "needle (a parameter) occurs in haystack".
func (c *compiler) contains(haystack, needle string) string {
	if c.pg() {
		return `strpos(` + haystack + `, ` + needle + `) > 0`
	}
	return `instr(` + haystack + `, ` + needle + `) > 0`
}

// textIndexed is a free-text term answered from the trigram index (terms
// of three code points or more), else by scanning the trace's fields.
func (c *compiler) textIndexed(term string) string {
	f := search.Fold(term)
	if utf8.RuneCountInString(f) < 3 {
		return c.textScan(term)
	}
	if c.pg() {
		return `t.id IN (SELECT s.trace_id FROM search_text s WHERE s.text LIKE ` + c.p.add("%"+escapeLike(f)+"%") + ` ESCAPE '\')`
	}
	return `t.id IN (SELECT s.trace_id FROM search_fts f JOIN search_text s ON s.id = f.rowid WHERE search_fts MATCH ` +
		c.p.add(`"`+strings.ReplaceAll(f, `"`, `""`)+`"`) + `)`
}

// textScan checks a free-text term against the fields of each candidate.
func (c *compiler) textScan(term string) string {
	return `EXISTS (SELECT 1 FROM search_text s WHERE s.trace_id = t.id AND ` + c.contains("s.text", c.p.add(search.Fold(term))) + `)`
}

func (c *compiler) annotation(cond string) string {
	return `EXISTS (SELECT 1 FROM annotations a WHERE a.trace_id = t.id AND ` + cond + `)`
}

// annJSON is the text at path in the annotation's extra_metadata.
func (c *compiler) annJSON(path ...string) string {
	if c.pg() {
		return `(vigil_jsonb(a.extra_metadata) #>> '{` + strings.Join(path, ",") + `}')`
	}
	return `json_extract(a.extra_metadata, '$.` + strings.Join(path, ".") + `')`
}

// severityBucket is the annotation's severity as 0 (info), 1 (warn), 2
// (critical) or NULL (explorer-api §2.2).
func (c *compiler) severityBucket() string {
	num := func(v string) string {
		return `CASE WHEN ` + v + ` < 0 OR ` + v + ` > 1 THEN NULL WHEN ` + v + ` < 0.45 THEN 0 WHEN ` + v + ` < 0.8 THEN 1 ELSE 2 END`
	}
	word := func(v string) string {
		return `CASE ` + v + ` WHEN 'info' THEN 0 WHEN 'warn' THEN 1 WHEN 'critical' THEN 2 END`
	}
	if c.pg() {
		v := `vigil_jsonb(a.extra_metadata) -> 'severity'`
		return `(CASE jsonb_typeof(` + v + `) WHEN 'string' THEN ` + word(`(`+v+` #>> '{}')`) +
			` WHEN 'number' THEN ` + num(`(`+v+` #>> '{}')::numeric`) + ` END)`
	}
	v := `json_extract(a.extra_metadata, '$.severity')`
	return `(CASE json_type(a.extra_metadata, '$.severity') WHEN 'text' THEN ` + word(v) +
		` WHEN 'integer' THEN ` + num(v) + ` WHEN 'real' THEN ` + num(v) + ` END)`
}

func (c *compiler) is(name string) string {
	switch name {
	case "annotated":
		return c.annotation(`TRUE`)
	case "flagged":
		return c.annotation(`a.source IN ('guardrails-error', 'mcp-pin')`)
	case "blocked":
		return c.meta(&search.Meta{Path: []string{"vigil", "blocked_calls"}, Quoted: []bool{true, true}, Op: ">", Value: "0", Kind: search.KindNumber})
	case "shared":
		return `t.shared`
	case "snippet":
		return `t.dataset_id IS NULL`
	case "gateway":
		return c.meta(&search.Meta{Path: []string{"via_gateway"}, Quoted: []bool{true}, Op: "=", Value: "true", Kind: search.KindBool})
	case "mcp":
		return c.meta(&search.Meta{Path: []string{"source"}, Quoted: []bool{true}, Op: "=", Value: "mcp", Kind: search.KindString})
	case "otel":
		return `t.session_key LIKE 'otel:%'`
	}
	return `FALSE`
}

// meta compiles a metadata filter: vigil_meta (search.Meta.Match) on
// SQLite, the same semantics over jsonb on PostgreSQL.
func (c *compiler) meta(m *search.Meta) string {
	pre := c.metaPrefilter(m)
	if !c.pg() {
		w := `vigil_meta(t.metadata, ` + c.p.add(m.String()) + `)`
		if pre != "" {
			w = `CASE WHEN ` + pre + ` THEN 0 ELSE ` + w + ` END`
		}
		return w + ` = 1`
	}
	if pre != "" {
		return `(CASE WHEN ` + pre + ` THEN FALSE ELSE ` + c.metaJSON(m) + ` END)`
	}
	return c.metaJSON(m)
}

// metaPrefilter is a condition on the metadata text under which m cannot
// match, "" when there is none: for a string equality or containment,
// the value does not occur in the text, which has no escape (without a
// backslash, every JSON string's value is in the text as it is; SQLite's
// lower() and lower() under "C" fold ASCII only, as LowerASCII). It
// spares parsing the metadata of the rows that cannot match.
func (c *compiler) metaPrefilter(m *search.Meta) string {
	if m.Value == "" || (m.Op != "%" && (m.Op != "=" || m.Kind != search.KindString)) {
		return ""
	}
	find := func(hay, needle string) string {
		if c.pg() {
			return `strpos(` + hay + `, ` + needle + `) = 0`
		}
		return `instr(` + hay + `, ` + needle + `) = 0`
	}
	hay, val := `t.metadata`, m.Value
	if m.Op == "%" {
		hay, val = `lower(t.metadata)`, search.LowerASCII(m.Value)
		if c.pg() {
			hay = `lower(t.metadata COLLATE "C")`
		}
	}
	v := c.p.add(val)
	return `(` + find(hay, v) + ` AND ` + find(`t.metadata`, `'\'`) + `)`
}

// metaJSON is the PostgreSQL form of a metadata filter over jsonb.
func (c *compiler) metaJSON(m *search.Meta) string {
	var alts []string
	for _, path := range m.Paths() {
		if (m.Kind == search.KindNull && m.Op != "=" && m.Op != "" && m.Op != "%") ||
			(m.Kind == search.KindBool && m.Op != "=" && m.Op != "!=" && m.Op != "" && m.Op != "%") {
			alts = append(alts, `FALSE`) // no order on null and booleans
			continue
		}
		c.p.add(path)
		c.metaPaths++
		v := `(` + metadataMarker + ` #> ` + "$" + strconv.Itoa(c.p.n()) + `::text[])`
		typ := `jsonb_typeof` + v
		str := `((` + v + ` #>> '{}') COLLATE "C")`
		var w string
		switch {
		case m.Op == "":
			w = typ + ` <> 'null'`
		case m.Op == "%":
			w = `(` + typ + ` = 'string' AND strpos(lower` + str + `, ` + c.p.add(search.LowerASCII(m.Value)) + `) > 0)`
		case m.Kind == search.KindNull && m.Op == "=":
			w = typ + ` = 'null'`
		case m.Kind == search.KindBool && (m.Op == "=" || m.Op == "!="):
			w = `(` + typ + ` = 'boolean' AND ` + str + ` ` + sqlOp(m.Op) + ` ` + c.p.add(m.Value) + `)`
		case m.Kind == search.KindNull || m.Kind == search.KindBool:
			w = `FALSE` // no order on null and booleans
		case m.Kind == search.KindNumber:
			w = `(CASE WHEN ` + typ + ` = 'number' THEN ` + str + `::numeric WHEN ` + typ + ` = 'string' AND ` + str + ` ~ ` +
				c.p.add(search.NumberRx.String()) + ` THEN ` + str + `::numeric END) ` + sqlOp(m.Op) + ` ` + c.p.add(m.Value) + `::numeric`
		default:
			w = `(` + typ + ` = 'string' AND ` + str + ` ` + sqlOp(m.Op) + ` ` + c.p.add(m.Value) + `)`
		}
		alts = append(alts, `COALESCE(`+w+`, FALSE)`)
	}
	return `(` + strings.Join(alts, ` OR `) + `)`
}

func sqlOp(op string) string {
	if op == "!=" {
		return "<>"
	}
	return op
}
