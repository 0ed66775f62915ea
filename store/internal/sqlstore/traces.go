package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/vigilhq/vigil/store"
)

const traceCols = `id, dataset_id, idx, owner_id, name, hierarchy_path, metadata, session_key, session_id, key_id, shared, status, ended_at, time_created, time_last_pushed, message_count`

var traceColList = splitCols(traceCols)

// traceScan receives a traces row.
type traceScan struct {
	t               store.Trace
	ds, name, sk, k *string
	hp, md, status  string
	ended           *int64
	tc, tl          int64
}

func (x *traceScan) dest() []any {
	t := &x.t
	return []any{&t.ID, &x.ds, &t.Index, &t.OwnerID, &x.name, &x.hp, &x.md, &x.sk, &t.SessionID, &x.k, &t.Shared, &x.status, &x.ended, &x.tc, &x.tl, &t.MessageCount}
}

func (x *traceScan) finish() (*store.Trace, error) {
	t := &x.t
	t.DatasetID, t.Name, t.SessionKey, t.KeyID = str(x.ds), str(x.name), str(x.sk), str(x.k)
	if err := json.Unmarshal([]byte(x.hp), &t.HierarchyPath); err != nil {
		return nil, fmt.Errorf("trace %s hierarchy_path: %w", t.ID, err)
	}
	t.Metadata = json.RawMessage(x.md)
	t.Status = store.RunStatus(x.status)
	t.EndedAt = fromMicrosPtr(x.ended)
	t.TimeCreated, t.TimeLastPushed = fromMicros(x.tc), fromMicros(x.tl)
	return t, nil
}

func scanTrace(r interface{ Scan(...any) error }) (*store.Trace, error) {
	var x traceScan
	if err := r.Scan(x.dest()...); err != nil {
		return nil, err
	}
	return x.finish()
}

func traceRow(t *store.Trace) []any {
	hp := t.HierarchyPath
	if hp == nil {
		hp = []string{}
	}
	hpj, _ := json.Marshal(hp)
	return []any{t.ID, nullString(t.DatasetID), t.Index, t.OwnerID, nullString(t.Name), string(hpj), objectOrEmpty(t.Metadata),
		nullString(t.SessionKey), t.SessionID, nullString(t.KeyID), t.Shared, string(t.Status), microsPtr(t.EndedAt),
		micros(t.TimeCreated), micros(t.TimeLastPushed), int64(t.MessageCount)}
}

var messageColList = []string{"trace_id", "idx", "message_id", "node_ids", "data"}

func messageRow(traceID string, m *store.Message) []any {
	ids := m.NodeIDs
	if ids == nil {
		ids = []string{}
	}
	return []any{traceID, int64(m.Index), m.ID, nodeIDsJSON(ids), string(m.Data)}
}

// nodeIDsJSON is the JSON array of ids: written directly when every id is
// plain ASCII (ULIDs always are), else by encoding/json.
func nodeIDsJSON(ids []string) string {
	n := 2
	for _, id := range ids {
		for i := 0; i < len(id); i++ {
			if c := id[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
				j, _ := json.Marshal(ids)
				return string(j)
			}
		}
		n += len(id) + 3
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, id...)
		b = append(b, '"')
	}
	return string(append(b, ']'))
}

// parseNodeIDs decodes a node_ids column. The form nodeIDsJSON writes
// (and PostgreSQL's jsonb rendering of it, with spaces) is read directly:
// encoding/json cost more than the rest of a message row when a dataset
// is streamed (IterTraces). Anything else (escapes, non-ASCII, null) goes
// through encoding/json, so the result is always json.Unmarshal's.
func parseNodeIDs(b []byte) ([]string, error) {
	if ids, ok := parsePlainIDs(b); ok {
		return ids, nil
	}
	var ids []string
	err := json.Unmarshal(b, &ids)
	return ids, err
}

// parsePlainIDs reads a JSON array of strings without escapes or
// non-ASCII bytes; ok is false for anything else.
func parsePlainIDs(b []byte) (ids []string, ok bool) {
	ws := func(i int) int {
		for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
			i++
		}
		return i
	}
	i := ws(0)
	if i >= len(b) || b[i] != '[' {
		return nil, false
	}
	ids = make([]string, 0, 4)
	if i = ws(i + 1); i < len(b) && b[i] == ']' {
		return ids, ws(i+1) == len(b)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return nil, false
		}
		j := i + 1
		for ; j < len(b) && b[j] != '"'; j++ {
			if c := b[j]; c == '\\' || c < 0x20 || c >= 0x80 {
				return nil, false
			}
		}
		if j >= len(b) {
			return nil, false
		}
		ids = append(ids, string(b[i+1:j]))
		if i = ws(j + 1); i >= len(b) {
			return nil, false
		}
		switch b[i] {
		case ']':
			return ids, ws(i+1) == len(b)
		case ',':
			i = ws(i + 1)
		default:
			return nil, false
		}
	}
}

var receiptColList = []string{"session_id", "seq", "id", "hash", "timestamp", "text"}

func receiptRow(r *store.Receipt) []any {
	return []any{r.SessionID, r.Seq, r.ID, r.Hash, r.Timestamp, r.Text}
}

// prepareMessages copies msgs with indices from first, defaulting ids, and
// rejects duplicate ids within the batch.
func prepareMessages(traceID string, msgs []store.Message, first int) ([]store.Message, error) {
	out := make([]store.Message, len(msgs))
	seen := make(map[string]bool, len(msgs))
	for j, m := range msgs {
		if m.ID == "" {
			m.ID = store.NewULID()
		}
		if seen[m.ID] {
			return nil, fmt.Errorf("trace %s: message id %q appears twice: %w", traceID, m.ID, store.ErrConflict)
		}
		if len(m.Data) == 0 {
			return nil, fmt.Errorf("trace %s: message %d has no data", traceID, first+j)
		}
		seen[m.ID] = true
		m.Index = first + j
		out[j] = m
	}
	return out, nil
}

// seal calls fn and advances sess's tail over the receipts it returns.
func seal(ctx context.Context, fn store.SealFunc, sess *store.Session, t *store.Trace, first int, events []store.Message) ([]store.Receipt, error) {
	if fn == nil || len(events) == 0 {
		return nil, nil
	}
	tcopy := *t
	tcopy.Messages = nil
	scopy := *sess
	recs, err := fn(ctx, store.SealRequest{Session: &scopy, Trace: &tcopy, FirstIndex: first, Events: events})
	if err != nil {
		return nil, fmt.Errorf("seal trace %s: %w", t.ID, err)
	}
	if err := advance(sess, recs); err != nil {
		return nil, fmt.Errorf("seal trace %s: %w", t.ID, err)
	}
	return recs, nil
}

// advance numbers recs from sess's tail and moves the tail past them.
func advance(sess *store.Session, recs []store.Receipt) error {
	for i := range recs {
		r := &recs[i]
		if r.ID == "" || r.Hash == "" || r.Text == "" {
			return fmt.Errorf("receipt %d lacks id, hash or text", i)
		}
		r.SessionID = sess.ID
		r.Seq = sess.Tail.Count
		if sess.Tail.Count == 0 {
			sess.RootHash = r.Hash
		}
		sess.Tail.Count++
		sess.Tail.LastHash = r.Hash
		sess.Tail.LastTimestamp = r.Timestamp
	}
	sess.ReceiptCount = sess.Tail.Count
	return nil
}

// anchor resolves a.AnchorIndex with lookup and fills defaults.
func anchor(a *store.Annotation, traceID, ownerID string, lookup func(i int) (string, bool, error)) error {
	if a.ID == "" {
		a.ID = store.NewID()
	}
	a.TraceID = traceID
	if a.OwnerID == "" {
		a.OwnerID = ownerID
	}
	a.TimeCreated = orNow(a.TimeCreated)
	a.Source = store.AnnotationSource(a.ExtraMetadata)
	if a.MessageID == "" && a.AnchorIndex != nil {
		id, ok, err := lookup(*a.AnchorIndex)
		if err != nil {
			return err
		}
		if ok {
			a.MessageID = id
		} else {
			a.Address = "messages." + strconv.Itoa(*a.AnchorIndex) + a.Address
			a.Resolved = false
		}
	}
	a.AnchorIndex = nil
	return nil
}

// pushFlushBytes is how many bytes of events and receipts PushTraces
// queues before it writes them (inside the push's transaction).
const pushFlushBytes = 4 << 20

// PushTraces implements store.Traces. It writes in three phases so the
// dataset row, which serialises pushes into one dataset, stays locked only
// briefly: find (or create) the dataset; write sessions, events, receipts
// and annotations; then lock the dataset, assign the indices and write the
// trace rows and the counter. Nothing commits unless everything does.
func (s *Store) PushTraces(ctx context.Context, req store.PushRequest) (*store.PushResult, error) {
	if len(req.Traces) == 0 {
		return nil, errors.New("push: no traces")
	}
	if err := checkObject(req.NewDatasetMetadata, "push: dataset metadata"); err != nil {
		return nil, err
	}
	for i := range req.Traces {
		if err := checkObject(req.Traces[i].Metadata, fmt.Sprintf("push: trace %d metadata", i)); err != nil {
			return nil, err
		}
	}
	var res *store.PushResult
	watched := false // the dataset has an enabled guardrail: jobs were queued
	err := s.inTx(ctx, func(tx Tx) error {
		res = &store.PushResult{}
		at := now()
		dsID, created, err := s.findPushDataset(ctx, tx, req, at)
		if err != nil {
			return err
		}
		res.DatasetCreated = created

		batchIDs := make(map[string]bool, len(req.Traces))
		var b Batch
		pending := 0 // event and receipt bytes queued in b
		for i := range req.Traces {
			nt := &req.Traces[i]
			if req.Prepare != nil {
				if err := req.Prepare(i, nt); err != nil {
					return err
				}
			}
			t, err := s.newTrace(ctx, tx, req, nt, batchIDs, at)
			if err != nil {
				return err
			}
			t.DatasetID = dsID
			if dsID != "" && nt.Index != nil && *nt.Index < 0 {
				return fmt.Errorf("push trace %d: negative index %d", i, *nt.Index)
			}
			sess := newSession(nt.Session, t, req.OwnerID, at)
			t.SessionID = sess.ID
			t.Messages, err = prepareMessages(t.ID, nt.Messages, 0)
			if err != nil {
				return err
			}
			t.MessageCount = len(t.Messages)
			recs, err := seal(ctx, req.Seal, sess, t, 0, t.Messages)
			if err != nil {
				return err
			}
			if nt.Status != "" && nt.Status != store.RunOpen {
				t.Status = nt.Status
				t.EndedAt = &at
				if req.Close != nil {
					if err := closeWith(ctx, req.Close, sess); err != nil {
						return fmt.Errorf("push trace %s: %w", t.ID, err)
					}
				}
			}
			msgs := t.Messages
			var annRows [][]any
			for _, a := range nt.Annotations {
				err := anchor(a, t.ID, req.OwnerID, func(i int) (string, bool, error) {
					if i >= 0 && i < len(msgs) {
						return msgs[i].ID, true, nil
					}
					return "", false, nil
				})
				if err != nil {
					return err
				}
				annRows = append(annRows, annotationRow(a))
			}
			b.Insert("ledger_sessions", sessionColList, [][]any{sessionRow(sess)})
			msgRows := make([][]any, len(msgs))
			for j := range msgs {
				msgRows[j] = messageRow(t.ID, &msgs[j])
			}
			recRows := make([][]any, len(recs))
			for j := range recs {
				recRows[j] = receiptRow(&recs[j])
			}
			b.Insert("messages", messageColList, msgRows)
			b.Insert("receipts", receiptColList, recRows)
			b.Insert("annotations", annotationColList, annRows)
			res.Traces = append(res.Traces, t)
			for j := range msgs {
				pending += len(msgs[j].Data)
			}
			for j := range recs {
				pending += len(recs[j].Text)
			}
			if req.Prepare != nil {
				// The rows hold what is written; the events can go.
				nt.Messages, t.Messages = nil, nil
			}
			// A large push is written as it is sealed, in the same
			// transaction, so its rows and receipts never all sit in
			// memory at once (issue 17: a push's peak memory stays a small
			// multiple of its body).
			if pending >= pushFlushBytes {
				if err := tx.RunBatch(ctx, coalesce(&b)); err != nil {
					return s.conflict(err, "push")
				}
				b, pending = Batch{}, 0
			}
		}
		if err := tx.RunBatch(ctx, coalesce(&b)); err != nil {
			return s.conflict(err, "push")
		}

		// Phase 3: under the dataset lock.
		var tb Batch
		if dsID != "" {
			ds, err := s.lockPushDataset(ctx, tx, req, dsID, &tb)
			if err != nil {
				return err
			}
			start, maxExplicit := ds.NextIndex, int64(-1)
			auto := start
			for i, t := range res.Traces {
				if nt := &req.Traces[i]; nt.Index != nil {
					t.Index = *nt.Index
					maxExplicit = max(maxExplicit, t.Index)
				} else {
					t.Index = auto
					auto++
				}
			}
			if err := indexTaken(ctx, tx, ds, req, res.Traces, start); err != nil {
				return err
			}
			next := max(auto, maxExplicit+1, start)
			tb.Exec(`UPDATE datasets SET next_index = $2, num_traces = num_traces + $3, latest_trace_time = $4 WHERE id = $1`,
				ds.ID, next, int64(len(req.Traces)), micros(at))
			ds.NextIndex = next
			ds.NumTraces += len(req.Traces)
			ds.LatestTraceTime = &at
			res.Dataset = ds
		}
		traceRows := make([][]any, len(res.Traces))
		for i, t := range res.Traces {
			traceRows[i] = traceRow(t)
		}
		tb.Insert("traces", traceColList, traceRows)
		ids := make([]string, len(res.Traces))
		for i, t := range res.Traces {
			ids[i] = t.ID
		}
		tb.Exec(markPendingFrom(s.b.In("id", 1)), s.b.ListArg(ids))
		// Rows left under a reused id by a trace deleted before the
		// indexer ran (after the mark: the indexer's lock order).
		tb.Exec(`DELETE FROM search_text WHERE `+s.b.In("trace_id", 1), s.b.ListArg(ids))
		markOTLPSpans(&tb, req.OwnerID, req.OTLPSpanIDs, at)
		if watched, err = s.queueMonitorJobs(ctx, tx, &tb, res, at); err != nil {
			return err
		}
		if err := tx.RunBatch(ctx, &tb); err != nil {
			return s.conflict(err, "push")
		}
		return s.recordTools(ctx, tx, dsID, req.Tools, at)
	})
	if err != nil {
		return nil, err
	}
	if watched {
		ws := make([]recentWrite, len(res.Traces))
		for i, t := range res.Traces {
			ws[i] = recentWrite{t.ID, 0, t.Messages}
		}
		s.jobsQueued(ctx, res.Dataset.ID, ws...)
	}
	return res, nil
}

// indexTaken returns a *store.IndexTakenError when the push gives one
// index to two traces or an explicit index below start (every stored
// trace's index is below the dataset's next index) is stored already, so
// the caller learns which index collides instead of a raw unique-constraint
// error. Only explicit indices below start need a query, over their range.
func indexTaken(ctx context.Context, tx Tx, ds *store.Dataset, req store.PushRequest, traces []*store.Trace, start int64) error {
	seen := make(map[int64]bool, len(traces))
	lo, hi := int64(-1), int64(-1)
	for i, t := range traces {
		if seen[t.Index] {
			return &store.IndexTakenError{Dataset: ds.Name, Index: t.Index, InPush: true}
		}
		seen[t.Index] = true
		if req.Traces[i].Index != nil && t.Index < start {
			if lo < 0 || t.Index < lo {
				lo = t.Index
			}
			hi = max(hi, t.Index)
		}
	}
	if hi < 0 {
		return nil
	}
	rows, err := tx.Query(ctx, `SELECT idx FROM traces WHERE dataset_id = $1 AND idx >= $2 AND idx <= $3 ORDER BY idx`, ds.ID, lo, hi)
	if err != nil {
		return fmt.Errorf("push: check trace indices: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var idx int64
		if err := rows.Scan(&idx); err != nil {
			return fmt.Errorf("push: check trace indices: %w", err)
		}
		if seen[idx] {
			return &store.IndexTakenError{Dataset: ds.Name, Index: idx}
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("push: check trace indices: %w", err)
	}
	return nil
}

// coalesce merges consecutive inserts into the same table, so a push
// writes each table with one bulk insert.
func coalesce(b *Batch) *Batch {
	byTable := map[string]int{}
	var out Batch
	for _, it := range b.Items {
		if it.Table == "" {
			out.Items = append(out.Items, it)
			continue
		}
		if i, ok := byTable[it.Table]; ok {
			out.Items[i].Rows = append(out.Items[i].Rows, it.Rows...)
			continue
		}
		byTable[it.Table] = len(out.Items)
		it.Rows = append([][]any(nil), it.Rows...)
		out.Items = append(out.Items, it)
	}
	return &out
}

// findPushDataset returns the id of the push's dataset, creating it when
// asked ("" for snippets), without locking it.
func (s *Store) findPushDataset(ctx context.Context, tx Tx, req store.PushRequest, at time.Time) (string, bool, error) {
	if req.DatasetName == "" {
		return "", false, nil
	}
	created := false
	if req.CreateIfMissing {
		n, err := tx.Exec(ctx, `INSERT INTO datasets (`+datasetCols+`) VALUES ($1, $2, $3, $4, FALSE, $5, NULL, 0, 0, 0)
			ON CONFLICT (owner_id, name) DO NOTHING`,
			store.NewID(), req.OwnerID, req.DatasetName, objectOrEmpty(req.NewDatasetMetadata), micros(at))
		if err != nil {
			return "", false, fmt.Errorf("create dataset %q: %w", req.DatasetName, err)
		}
		created = n == 1
	}
	var id string
	var num int64
	if err := tx.QueryRow(ctx, `SELECT id, num_traces FROM datasets WHERE owner_id = $1 AND name = $2`, req.OwnerID, req.DatasetName).Scan(&id, &num); err != nil {
		return "", false, notFound(err, fmt.Sprintf("dataset %q", req.DatasetName))
	}
	if req.RequireEmpty && num > 0 {
		return "", false, fmt.Errorf("dataset %q has %d traces: %w", req.DatasetName, num, store.ErrConflict)
	}
	return id, created, nil
}

// lockPushDataset locks the dataset row, re-checks RequireEmpty and queues
// the metadata merge on b.
func (s *Store) lockPushDataset(ctx context.Context, tx Tx, req store.PushRequest, id string, b *Batch) (*store.Dataset, error) {
	ds, err := scanDataset(tx.QueryRow(ctx, `SELECT `+datasetCols+` FROM datasets WHERE id = $1`+s.b.ForUpdate(), id))
	if err != nil {
		return nil, notFound(err, fmt.Sprintf("dataset %q", req.DatasetName))
	}
	if req.RequireEmpty && ds.NumTraces > 0 {
		return nil, fmt.Errorf("dataset %q has %d traces: %w", req.DatasetName, ds.NumTraces, store.ErrConflict)
	}
	if req.MergeMetadata != nil {
		md, err := store.MergeMetadata(ds.Metadata, req.MergeMetadata, false)
		if err != nil {
			return nil, fmt.Errorf("dataset %q metadata: %w", req.DatasetName, err)
		}
		b.Exec(`UPDATE datasets SET metadata = $2 WHERE id = $1`, ds.ID, string(md))
		ds.Metadata = md
	}
	return ds, nil
}

// newTrace builds the trace row of nt (without dataset, index, session or
// messages), choosing its id.
func (s *Store) newTrace(ctx context.Context, tx Tx, req store.PushRequest, nt *store.NewTrace, batch map[string]bool, at time.Time) (*store.Trace, error) {
	id := nt.ID
	if id != "" && req.ReplaceTakenIDs {
		taken := batch[id]
		if !taken {
			var one int
			err := tx.QueryRow(ctx, `SELECT 1 FROM traces WHERE id = $1`, id).Scan(&one)
			switch {
			case err == nil:
				taken = true
			case !errors.Is(err, ErrNoRows):
				return nil, fmt.Errorf("push trace %s: %w", id, err)
			}
		}
		if taken {
			id = ""
		}
	}
	if id == "" {
		id = store.NewID()
	}
	if batch[id] {
		return nil, fmt.Errorf("push trace %s: id appears twice: %w", id, store.ErrConflict)
	}
	batch[id] = true
	tc := at
	if !nt.TimeCreated.IsZero() {
		tc = orNow(nt.TimeCreated)
	}
	hp := nt.HierarchyPath
	if hp == nil {
		hp = []string{}
	}
	return &store.Trace{
		ID:             id,
		OwnerID:        req.OwnerID,
		Name:           nt.Name,
		HierarchyPath:  hp,
		Metadata:       json.RawMessage(objectOrEmpty(nt.Metadata)),
		SessionKey:     nt.SessionKey,
		KeyID:          nt.KeyID,
		Status:         store.RunOpen,
		TimeCreated:    tc,
		TimeLastPushed: tc,
	}, nil
}

// newSession builds the ledger session created with trace t.
func newSession(tmpl *store.Session, t *store.Trace, ownerID string, at time.Time) *store.Session {
	sess := &store.Session{}
	if tmpl != nil {
		*sess = *tmpl
	}
	if sess.ID == "" {
		sess.ID = t.ID
	}
	if sess.RunID == "" {
		sess.RunID = t.ID
	}
	if sess.OwnerID == "" {
		sess.OwnerID = ownerID
	}
	if sess.Signer == "" {
		sess.Signer = "server"
	}
	if sess.CreatedAt.IsZero() {
		sess.CreatedAt = at
	}
	sess.ReceiptCount = 0
	sess.RootHash = ""
	sess.Tail = store.Tail{LastHash: "0"}
	return sess
}

// prefixed returns cols with each name prefixed by alias.
func prefixed(alias string, cols []string) string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = alias + "." + c
	}
	return strings.Join(out, ", ")
}

var lockTraceSQL = `SELECT ` + prefixed("t", traceColList) + `, ` + prefixed("s", sessionColList) +
	` FROM traces t JOIN ledger_sessions s ON s.id = t.session_id WHERE t.id = $1`

// lockTrace reads trace id and its session, locking both rows, in one
// round trip.
func (s *Store) lockTrace(ctx context.Context, tx Tx, id string) (*store.Trace, *store.Session, error) {
	var xt traceScan
	var xs sessionScan
	if err := tx.QueryRow(ctx, lockTraceSQL+s.b.ForUpdate(), id).Scan(append(xt.dest(), xs.dest()...)...); err != nil {
		return nil, nil, notFound(err, "trace "+id)
	}
	t, err := xt.finish()
	if err != nil {
		return nil, nil, err
	}
	return t, xs.finish(), nil
}

// AppendEvents implements store.Traces. Round trips on PostgreSQL: the
// locking read, one batch of writes, the tool registry when tools were
// used, commit.
func (s *Store) AppendEvents(ctx context.Context, req store.AppendRequest) (*store.AppendResult, error) {
	if len(req.Messages) == 0 {
		return nil, fmt.Errorf("append to trace %s: no messages", req.TraceID)
	}
	var res *store.AppendResult
	err := s.inTx(ctx, func(tx Tx) error {
		t, sess, err := s.lockTrace(ctx, tx, req.TraceID)
		if err != nil {
			return err
		}
		var b Batch
		if res, _, err = s.appendTx(ctx, tx, &b, &req, t, sess, nil, nil); err != nil {
			return err
		}
		b.Exec(markPendingSQL, res.Trace.ID)
		if res.Trace.DatasetID != "" {
			b.Exec(`UPDATE datasets SET latest_trace_time = $2 WHERE id = $1`, res.Trace.DatasetID, micros(res.Trace.TimeLastPushed))
		}
		if err := tx.RunBatch(ctx, &b); err != nil {
			return s.conflict(err, "append to trace "+res.Trace.ID)
		}
		return s.recordTools(ctx, tx, res.Trace.DatasetID, req.Tools, orNow(req.Time))
	})
	if err != nil {
		return nil, err
	}
	s.jobsQueued(ctx, res.Trace.DatasetID, recentWrite{res.Trace.ID, res.Trace.MessageCount - len(res.Messages), res.Messages})
	return res, nil
}
