package sqlstore

// Incremental search indexing. Events are only ever appended to a trace
// (never changed in place), so the index rows of a trace's earlier events
// stay valid when it grows: indexing a pending trace adds the rows of the
// messages after the last one indexed and replaces the name row only when
// the name changed. The rows are exactly those a full rebuild would make
// (searchRows): a new field whose folded text is already among the
// trace's message rows is skipped, like a repeat within one rebuild.
//
// Which messages are new is read from the index itself (the highest msg
// of the trace's rows), so no schema records it. Messages after that one
// whose fields all repeat earlier ones add no row; so that they are not
// read again at every indexing, the store remembers (indexMarks) up to
// which message it indexed each trace, valid while the trace's creation
// time and highest indexed msg are unchanged (another process, a restart
// or a reused id make it fall back to the highest msg: reading again is
// always correct, only slower). A deleted trace loses its rows; a push
// removes any rows left under its ids (an id reused before the indexer
// ran), after listing them, in the lock order the indexer uses.

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"github.com/vigilhq/vigil/search"
	"github.com/vigilhq/vigil/store"
)

// traceIndexState is what the index holds of one trace.
type traceIndexState struct {
	exists   bool
	name     *string // the trace's name (nil: none)
	lastMsg  int64   // highest msg indexed (-1: none)
	created  int64   // the trace's time_created
	from     int64   // read the messages after this one
	readTo   int64   // the last message read (from when none)
	nameRow  *string // the indexed name text (nil: no name row)
	newMsgs  []store.Message
	haveKeys bool // the trace has message rows: dedupe against them
}

// searchKey is a field's dedupe key within a trace.
type searchKey struct {
	tool bool
	text string
}

// indexIncremental queues in b the index changes of the claimed traces
// ids (a ListArg of them is list): the rows of deleted traces are
// removed, a changed name row replaced, and the rows of the messages not
// yet indexed inserted. It reads the committed state through the pool
// (the claim keeps other indexers off these traces).
// It returns the marks to remember once the transaction commits.
func (s *Store) indexIncremental(ctx context.Context, b *Batch, ids []string, list any) (map[string]indexMark, error) {
	st := make(map[string]*traceIndexState, len(ids))
	for _, id := range ids {
		st[id] = &traceIndexState{lastMsg: -1}
	}
	r := s.b.Reader()
	rows, err := r.Query(ctx, `SELECT id, name, time_created FROM traces WHERE `+s.b.In("id", 1), list)
	if err != nil {
		return nil, fmt.Errorf("read traces: %w", err)
	}
	for rows.Next() {
		var id string
		var name *string
		var created int64
		if err := rows.Scan(&id, &name, &created); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read traces: %w", err)
		}
		if x := st[id]; x != nil {
			x.exists, x.name, x.created = true, name, created
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read traces: %w", err)
	}
	// The index's state: the highest msg and the name row of each trace
	// (both read from the (trace_id, msg) index, not the trace's rows).
	rows, err = r.Query(ctx, `SELECT trace_id, MAX(msg) FROM search_text WHERE `+s.b.In("trace_id", 1)+` GROUP BY trace_id`, list)
	if err != nil {
		return nil, fmt.Errorf("read index state: %w", err)
	}
	for rows.Next() {
		var id string
		var last int64
		if err := rows.Scan(&id, &last); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read index state: %w", err)
		}
		if x := st[id]; x != nil {
			x.lastMsg, x.haveKeys = last, last >= 0
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read index state: %w", err)
	}
	rows, err = r.Query(ctx, `SELECT trace_id, text FROM search_text WHERE msg = -1 AND `+s.b.In("trace_id", 1), list)
	if err != nil {
		return nil, fmt.Errorf("read index state: %w", err)
	}
	for rows.Next() {
		var id, name string
		if err := rows.Scan(&id, &name); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read index state: %w", err)
		}
		if x := st[id]; x != nil {
			x.nameRow = &name
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read index state: %w", err)
	}
	// Deleted traces lose their rows; changed names are replaced.
	var gone, renamed []string
	var out [][]any
	for _, id := range ids {
		x := st[id]
		if !x.exists {
			gone = append(gone, id)
			continue
		}
		want := ""
		if x.name != nil {
			want = search.Fold(*x.name)
		}
		switch {
		case x.nameRow != nil && (x.name == nil || *x.nameRow != want):
			renamed = append(renamed, id)
			if x.name != nil {
				out = append(out, []any{id, int64(-1), false, want})
			}
		case x.nameRow == nil && x.name != nil:
			out = append(out, []any{id, int64(-1), false, want})
		}
	}
	if len(gone) > 0 {
		b.Exec(`DELETE FROM search_text WHERE `+s.b.In("trace_id", 1), s.b.ListArg(gone))
	}
	if len(renamed) > 0 {
		b.Exec(`DELETE FROM search_text WHERE msg = -1 AND `+s.b.In("trace_id", 1), s.b.ListArg(renamed))
	}
	// The messages after the last indexed one, by a range read of each
	// live trace.
	var liveIDs []string
	var liveLast []int64
	for _, id := range ids {
		if x := st[id]; x.exists {
			x.from = s.marks.from(id, x.created, x.lastMsg)
			x.readTo = x.from
			liveIDs, liveLast = append(liveIDs, id), append(liveLast, x.from)
		}
	}
	if len(liveIDs) == 0 {
		return nil, s.insertSearchRows(b, out)
	}
	if s.b.Kind() == "postgres" {
		rows, err = r.Query(ctx, `SELECT m.trace_id, m.idx, m.data FROM unnest($1::text[], $2::bigint[]) AS p(id, last) `+
			`JOIN messages m ON m.trace_id = p.id AND m.idx > p.last ORDER BY m.trace_id, m.idx`, liveIDs, liveLast)
	} else {
		pairs := make([][]any, len(liveIDs))
		for i := range liveIDs {
			pairs[i] = []any{liveIDs[i], liveLast[i]}
		}
		rows, err = r.Query(ctx, `SELECT m.trace_id, m.idx, m.data FROM json_each($1) p `+
			`JOIN messages m ON m.trace_id = json_extract(p.value, '$[0]') AND m.idx > json_extract(p.value, '$[1]') ORDER BY m.trace_id, m.idx`,
			s.b.ListArg(pairs))
	}
	if err != nil {
		return nil, fmt.Errorf("read new messages: %w", err)
	}
	for rows.Next() {
		var id string
		var idx int64
		var data []byte
		if err := rows.Scan(&id, &idx, &data); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read new messages: %w", err)
		}
		if x := st[id]; x != nil && x.exists && idx > x.from {
			x.newMsgs = append(x.newMsgs, store.Message{Index: int(idx), Data: data})
			x.readTo = idx
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read new messages: %w", err)
	}
	// The new fields, and which of them the index already holds.
	type cand struct {
		id  string
		msg int64
		key searchKey
	}
	var cands []cand
	var dedupeIDs, dedupeTexts []string
	for _, id := range ids {
		x := st[id]
		seen := map[searchKey]bool{}
		for i := range x.newMsgs {
			for _, f := range search.Fields(x.newMsgs[i].Index, x.newMsgs[i].Data) {
				k := searchKey{f.Tool, search.Fold(f.Text)}
				if seen[k] {
					continue
				}
				seen[k] = true
				cands = append(cands, cand{id, int64(f.Msg), k})
				if x.haveKeys {
					dedupeTexts = append(dedupeTexts, k.text)
				}
			}
		}
		if x.haveKeys && len(seen) > 0 {
			dedupeIDs = append(dedupeIDs, id)
		}
	}
	held := map[string]map[searchKey]bool{}
	if len(dedupeIDs) > 0 {
		rows, err := r.Query(ctx, `SELECT trace_id, tool, text FROM search_text WHERE `+s.b.In("trace_id", 1)+
			` AND msg >= 0 AND `+s.b.In("text", 2), s.b.ListArg(dedupeIDs), s.b.ListArg(dedupeTexts))
		if err != nil {
			return nil, fmt.Errorf("read indexed fields: %w", err)
		}
		for rows.Next() {
			var id string
			var k searchKey
			if err := rows.Scan(&id, &k.tool, &k.text); err != nil {
				rows.Close()
				return nil, fmt.Errorf("read indexed fields: %w", err)
			}
			if held[id] == nil {
				held[id] = map[searchKey]bool{}
			}
			held[id][k] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("read indexed fields: %w", err)
		}
	}
	marks := map[string]indexMark{}
	for _, id := range liveIDs {
		x := st[id]
		marks[id] = indexMark{created: x.created, maxMsg: x.lastMsg, readTo: x.readTo}
	}
	for _, c := range cands {
		if held[c.id][c.key] {
			continue
		}
		out = append(out, []any{c.id, c.msg, c.key.tool, c.key.text})
		if m := marks[c.id]; c.msg > m.maxMsg {
			m.maxMsg = c.msg
			marks[c.id] = m
		}
	}
	return marks, s.insertSearchRows(b, out)
}

// indexMark is how far this process indexed a trace: the messages up to
// readTo, leaving maxMsg the highest msg of its rows, when the trace was
// created at created.
type indexMark struct {
	created, maxMsg, readTo int64
}

// maxIndexMarks bounds the marks kept; past it they are dropped (traces
// then read from their highest indexed msg again).
const maxIndexMarks = 1 << 16

// indexMarks are the store's indexMark of recently indexed traces.
type indexMarks struct {
	mu sync.Mutex
	m  map[string]indexMark
}

// from returns after which message to read trace id, created at created
// and whose highest indexed msg is maxMsg.
func (im *indexMarks) from(id string, created, maxMsg int64) int64 {
	im.mu.Lock()
	defer im.mu.Unlock()
	if m, ok := im.m[id]; ok && m.created == created && m.maxMsg == maxMsg && m.readTo > maxMsg {
		return m.readTo
	}
	return maxMsg
}

// set remembers marks (after the indexing transaction committed).
func (im *indexMarks) set(marks map[string]indexMark) {
	im.mu.Lock()
	defer im.mu.Unlock()
	if im.m == nil || len(im.m)+len(marks) > maxIndexMarks {
		im.m = make(map[string]indexMark, len(marks))
	}
	maps.Copy(im.m, marks)
}
