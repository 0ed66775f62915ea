package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/vigilhq/vigil/store"
)

// splitCols turns a column list into names.
func splitCols(cols string) []string {
	parts := strings.Split(cols, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// GetTrace implements store.Traces.
func (s *Store) GetTrace(ctx context.Context, id string, withMessages bool) (*store.Trace, error) {
	t, err := scanTrace(s.b.Reader().QueryRow(ctx, `SELECT `+traceCols+` FROM traces WHERE id = $1`, id))
	if err != nil {
		return nil, notFound(err, "trace "+id)
	}
	if withMessages {
		if err := s.loadMessages(ctx, []*store.Trace{t}); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// MessageIDs implements store.Traces.
func (s *Store) MessageIDs(ctx context.Context, traceID string) ([]string, error) {
	var n int
	if err := s.b.Reader().QueryRow(ctx, `SELECT message_count FROM traces WHERE id = $1`, traceID).Scan(&n); err != nil {
		return nil, notFound(err, "trace "+traceID)
	}
	rows, err := s.b.Reader().Query(ctx, `SELECT message_id FROM messages WHERE trace_id = $1 ORDER BY idx`, traceID)
	if err != nil {
		return nil, fmt.Errorf("message ids of trace %s: %w", traceID, err)
	}
	defer rows.Close()
	out := make([]string, 0, n)
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("message ids of trace %s: %w", traceID, err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("message ids of trace %s: %w", traceID, err)
	}
	return out, nil
}

// traceWhere renders f's conditions.
func (s *Store) traceWhere(p *params, f store.TraceFilter) string {
	var where []string
	if f.DatasetID != "" {
		where = append(where, `dataset_id = `+p.add(f.DatasetID))
	}
	if f.OwnerID != "" {
		where = append(where, `owner_id = `+p.add(f.OwnerID))
	}
	if f.Snippets {
		where = append(where, `dataset_id IS NULL`)
	}
	if f.IDs != nil {
		p.add(s.b.ListArg(f.IDs))
		where = append(where, s.b.In("id", p.n()))
	}
	if f.Indices != nil {
		p.add(s.b.ListArg(f.Indices))
		where = append(where, s.b.In("idx", p.n()))
	}
	if f.SessionKey != "" {
		where = append(where, `session_key = `+p.add(f.SessionKey))
	}
	if f.AfterIndex != nil {
		where = append(where, `idx > `+p.add(*f.AfterIndex))
	}
	if f.Status != "" {
		where = append(where, `status = `+p.add(string(f.Status)))
	}
	for _, b := range []struct {
		col, op string
		t       *time.Time
	}{
		{"time_created", ">=", f.CreatedFrom}, {"time_created", "<", f.CreatedBefore},
		{"time_last_pushed", ">=", f.PushedFrom}, {"time_last_pushed", "<", f.PushedBefore},
	} {
		if b.t != nil {
			where = append(where, b.col+" "+b.op+" "+p.add(micros(*b.t)))
		}
	}
	if len(where) == 0 {
		return ""
	}
	return ` WHERE ` + strings.Join(where, ` AND `)
}

var traceOrders = map[store.TraceOrder]string{
	store.OrderIndex:              ` ORDER BY idx, id`,
	store.OrderIndexDesc:          ` ORDER BY idx DESC, id`,
	store.OrderTimeCreated:        ` ORDER BY time_created, id`,
	store.OrderTimeCreatedDesc:    ` ORDER BY time_created DESC, id`,
	store.OrderTimeLastPushed:     ` ORDER BY time_last_pushed, id`,
	store.OrderTimeLastPushedDesc: ` ORDER BY time_last_pushed DESC, id`,
}

// ListTraces implements store.Traces.
func (s *Store) ListTraces(ctx context.Context, f store.TraceFilter) ([]*store.Trace, error) {
	order, ok := traceOrders[f.Order]
	if !ok {
		return nil, fmt.Errorf("list traces: unknown order %d", f.Order)
	}
	var p params
	q := `SELECT ` + traceCols + ` FROM traces` + s.traceWhere(&p, f) + order + limitOffset(&p, f.Limit, f.Offset)
	out, err := s.queryTraces(ctx, q, p.args...)
	if err != nil {
		return nil, err
	}
	if f.WithMessages {
		if err := s.loadMessages(ctx, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *Store) queryTraces(ctx context.Context, q string, args ...any) ([]*store.Trace, error) {
	rows, err := s.b.Reader().Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list traces: %w", err)
	}
	defer rows.Close()
	var out []*store.Trace
	for rows.Next() {
		t, err := scanTrace(rows)
		if err != nil {
			return nil, fmt.Errorf("list traces: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list traces: %w", err)
	}
	return out, nil
}

// CountTraces implements store.Traces.
func (s *Store) CountTraces(ctx context.Context, f store.TraceFilter) (int, error) {
	f.AfterIndex = nil
	var p params
	var n int
	if err := s.b.Reader().QueryRow(ctx, `SELECT COUNT(*) FROM traces`+s.traceWhere(&p, f), p.args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count traces: %w", err)
	}
	return n, nil
}

// loadMessages fills in the messages of ts with one query.
func (s *Store) loadMessages(ctx context.Context, ts []*store.Trace) error {
	if len(ts) == 0 {
		return nil
	}
	byID := make(map[string]*store.Trace, len(ts))
	ids := make([]string, len(ts))
	for i, t := range ts {
		byID[t.ID] = t
		ids[i] = t.ID
		t.Messages = make([]store.Message, 0, t.MessageCount)
	}
	rows, err := s.b.Reader().Query(ctx, `SELECT trace_id, idx, message_id, node_ids, data FROM messages WHERE `+s.b.In("trace_id", 1)+` ORDER BY trace_id, idx`,
		s.b.ListArg(ids))
	if err != nil {
		return fmt.Errorf("load messages: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var tid string
		var nodes, data []byte // scanned as bytes: one copy of each event, not two
		var m store.Message
		var idx int64
		if err := rows.Scan(&tid, &idx, &m.ID, &nodes, &data); err != nil {
			return fmt.Errorf("load messages: %w", err)
		}
		m.Index = int(idx)
		if m.NodeIDs, err = parseNodeIDs(nodes); err != nil {
			return fmt.Errorf("trace %s message %d node ids: %w", tid, idx, err)
		}
		m.Data = json.RawMessage(data)
		if t := byID[tid]; t != nil {
			t.Messages = append(t.Messages, m)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load messages: %w", err)
	}
	return nil
}

// iterPage returns the query of the page of IterTraces and
// IterTraceEvents after index after: cols of the dataset's traces with
// opt's filters, in index order.
func (s *Store) iterPage(cols, datasetID string, after int64, size int, opt store.IterOptions) (string, []any) {
	var p params
	q := `SELECT ` + cols + ` FROM traces WHERE dataset_id = ` + p.add(datasetID) + ` AND idx > ` + p.add(after)
	if opt.IDs != nil {
		p.add(s.b.ListArg(opt.IDs))
		q += ` AND ` + s.b.In("id", p.n())
	}
	if opt.OnlyAnnotated {
		q += ` AND EXISTS (SELECT 1 FROM annotations a WHERE a.trace_id = traces.id)`
	}
	q += ` ORDER BY idx LIMIT ` + p.add(int64(size))
	return q, p.args
}

// IterTraces implements store.Traces.
func (s *Store) IterTraces(ctx context.Context, datasetID string, opt store.IterOptions) iter.Seq2[*store.Trace, error] {
	size := opt.PageSize
	if size <= 0 {
		size = 100
	}
	return func(yield func(*store.Trace, error) bool) {
		after := int64(-1)
		for {
			q, args := s.iterPage(traceCols, datasetID, after, size, opt)
			page, err := s.queryTraces(ctx, q, args...)
			if err == nil {
				err = s.loadMessages(ctx, page)
			}
			if err == nil {
				err = s.loadAnnotations(ctx, page)
			}
			if err != nil {
				yield(nil, fmt.Errorf("export dataset %s: %w", datasetID, err))
				return
			}
			n := len(page)
			if n == 0 {
				return
			}
			after = page[n-1].Index
			for i, t := range page {
				// Drop each trace once yielded, so a page's events are
				// collectable while the rest are written and while the
				// next page loads: an export holds about one page.
				page[i] = nil
				if !yield(t, nil) {
					return
				}
			}
			if n < size {
				return
			}
		}
	}
}

// IterTraceEvents implements store.Traces: per page one query, each
// trace's events joined in index order by the database (string_agg, in
// SQLite since 3.44 and in PostgreSQL), so a trace is one row, not one per
// event, and only the trace columns an analysis needs (traceEventCols).
func (s *Store) IterTraceEvents(ctx context.Context, datasetID string, opt store.IterOptions) iter.Seq2[*store.TraceEvents, error] {
	size := opt.PageSize
	if size <= 0 {
		size = 100
	}
	return func(yield func(*store.TraceEvents, error) bool) {
		after := int64(-1)
		for {
			q, args := s.iterPage(traceEventCols+`, `+s.eventsAgg(), datasetID, after, size, opt)
			page, err := s.queryTraceEvents(ctx, q, args...)
			if err != nil {
				yield(nil, fmt.Errorf("read dataset %s: %w", datasetID, err))
				return
			}
			n := len(page)
			if n == 0 {
				return
			}
			after = page[n-1].Trace.Index
			for i, te := range page {
				page[i] = nil // collectable once yielded, as in IterTraces
				if !yield(te, nil) {
					return
				}
			}
			if n < size {
				return
			}
		}
	}
}

// eventsAgg is the expression of a traces row's events as one JSON array
// text, in index order. SQLite aggregates the rows of a subquery ordered
// by the primary key (trace_id, idx), which its planner reads in that
// order without sorting (an aggregate's own ORDER BY always sorts there,
// a quarter of the read's cost; a subquery with ORDER BY under an
// aggregate is never flattened, so its order is the aggregate's input
// order). PostgreSQL keeps the aggregate's ORDER BY, the order it
// guarantees.
func (s *Store) eventsAgg() string {
	if s.b.Kind() == "sqlite" {
		return `'[' || coalesce((SELECT string_agg(m.data, ',') FROM (SELECT data FROM messages WHERE trace_id = traces.id ORDER BY idx) m), '') || ']'`
	}
	return `'[' || coalesce((SELECT string_agg(m.data, ',' ORDER BY m.idx) FROM messages m WHERE m.trace_id = traces.id), '') || ']'`
}

// traceEventCols are the columns IterTraceEvents reads of each trace:
// what analysing its events needs, not the whole row.
const traceEventCols = `id, dataset_id, idx, owner_id, metadata, message_count`

func (s *Store) queryTraceEvents(ctx context.Context, q string, args ...any) ([]*store.TraceEvents, error) {
	rows, err := s.b.Reader().Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list trace events: %w", err)
	}
	defer rows.Close()
	var out []*store.TraceEvents
	for rows.Next() {
		t := &store.Trace{}
		var ds *string
		var md, events []byte
		if err := rows.Scan(&t.ID, &ds, &t.Index, &t.OwnerID, &md, &t.MessageCount, &events); err != nil {
			return nil, fmt.Errorf("list trace events: %w", err)
		}
		t.DatasetID, t.Metadata = str(ds), json.RawMessage(md)
		out = append(out, &store.TraceEvents{Trace: t, Events: events}) // the driver's copies, ours to keep
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list trace events: %w", err)
	}
	return out, nil
}

// UpdateTrace implements store.Traces.
func (s *Store) UpdateTrace(ctx context.Context, id string, up store.TraceUpdate) (*store.Trace, error) {
	var t *store.Trace
	err := s.inTx(ctx, func(tx Tx) error {
		var err error
		t, err = scanTrace(tx.QueryRow(ctx, `SELECT `+traceCols+` FROM traces WHERE id = $1`+s.b.ForUpdate(), id))
		if err != nil {
			return notFound(err, "trace "+id)
		}
		if up.Name != nil {
			t.Name = *up.Name
		}
		if up.HierarchyPath != nil {
			t.HierarchyPath = *up.HierarchyPath
			if t.HierarchyPath == nil {
				t.HierarchyPath = []string{}
			}
		}
		if up.Shared != nil {
			t.Shared = *up.Shared
		}
		if up.MetadataMerge != nil {
			t.Metadata, err = store.MergePatch(t.Metadata, up.MetadataMerge)
			if err != nil {
				return fmt.Errorf("update trace %s: %w", id, err)
			}
		}
		hp, _ := json.Marshal(t.HierarchyPath)
		_, err = tx.Exec(ctx, `UPDATE traces SET name = $2, hierarchy_path = $3, shared = $4, metadata = $5 WHERE id = $1`,
			id, nullString(t.Name), string(hp), t.Shared, objectOrEmpty(t.Metadata))
		if err != nil {
			return fmt.Errorf("update trace %s: %w", id, err)
		}
		if up.Name != nil {
			if _, err := tx.Exec(ctx, markPendingSQL, id); err != nil {
				return fmt.Errorf("update trace %s: %w", id, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// DeleteTrace implements store.Traces.
func (s *Store) DeleteTrace(ctx context.Context, id string, closeFn store.CloseFunc) error {
	return s.inTx(ctx, func(tx Tx) error {
		t, err := scanTrace(tx.QueryRow(ctx, `SELECT `+traceCols+` FROM traces WHERE id = $1`+s.b.ForUpdate(), id))
		if err != nil {
			return notFound(err, "trace "+id)
		}
		if closeFn != nil {
			if err := s.closeOpenSessions(ctx, tx, `id = $1`, t.SessionID, closeFn); err != nil {
				return fmt.Errorf("delete trace %s: %w", id, err)
			}
		}
		for _, q := range []string{
			`DELETE FROM annotations WHERE trace_id = $1`,
			`DELETE FROM messages WHERE trace_id = $1`,
			markPendingSQL,
			`DELETE FROM traces WHERE id = $1`,
		} {
			if _, err := tx.Exec(ctx, q, id); err != nil {
				return fmt.Errorf("delete trace %s: %w", id, err)
			}
		}
		if t.DatasetID != "" {
			if _, err := tx.Exec(ctx, `UPDATE datasets SET num_traces = num_traces - 1 WHERE id = $1`, t.DatasetID); err != nil {
				return fmt.Errorf("delete trace %s: %w", id, err)
			}
		}
		return nil
	})
}

// FinishRun implements store.Traces.
func (s *Store) FinishRun(ctx context.Context, traceID string, status store.RunStatus, at time.Time, closeFn store.CloseFunc) (*store.Trace, error) {
	if status != store.RunCompleted && status != store.RunFailed {
		return nil, fmt.Errorf("finish run %s: status %q is not completed or failed", traceID, status)
	}
	var t *store.Trace
	err := s.inTx(ctx, func(tx Tx) error {
		var err error
		t, err = scanTrace(tx.QueryRow(ctx, `SELECT `+traceCols+` FROM traces WHERE id = $1`+s.b.ForUpdate(), traceID))
		if err != nil {
			return notFound(err, "run "+traceID)
		}
		if t.Status != store.RunOpen {
			return fmt.Errorf("finish run %s: already %s: %w", traceID, t.Status, store.ErrFinished)
		}
		end := orNow(at)
		t.Status, t.EndedAt = status, &end
		if _, err := tx.Exec(ctx, `UPDATE traces SET status = $2, ended_at = $3 WHERE id = $1`, traceID, string(status), micros(end)); err != nil {
			return fmt.Errorf("finish run %s: %w", traceID, err)
		}
		if closeFn != nil {
			if err := s.closeOpenSessions(ctx, tx, `id = $1`, t.SessionID, closeFn); err != nil {
				return fmt.Errorf("finish run %s: %w", traceID, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}
