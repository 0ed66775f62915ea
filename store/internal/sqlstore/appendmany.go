package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/vigilhq/vigil/store"
)

// appendTx, given req's trace and session as locked in tx, seals and anchors its events and
// queues in b the writes of the append (events, receipts, annotations,
// session tail, trace counters and, from AppendMany, its name and
// metadata) and the monitor job. The caller lists the trace for the
// search index when reindex, bumps the dataset's latest trace time when
// events were appended, runs b and records req.Tools.
// With bulk (AppendMany), the trace and session row updates are
// collected there instead of queued one statement each.
// With sealed (AppendMany), the events were prepared and sealed ahead
// (sealAll) and sess's tail already advanced over them.
func (s *Store) appendTx(ctx context.Context, tx Tx, b *Batch, req *store.AppendRequest, t *store.Trace, sess *store.Session, bulk *rowUpdates, sealed *sealedAppend) (res *store.AppendResult, reindex bool, err error) {
	if err := appendable(t, sess); err != nil {
		return nil, false, err
	}
	first := t.MessageCount
	var msgs []store.Message
	var recs []store.Receipt
	if sealed != nil {
		if sealed.err != nil {
			return nil, false, sealed.err
		}
		msgs, recs = sealed.msgs, sealed.recs
	} else {
		if msgs, err = prepareMessages(t.ID, req.Messages, first); err != nil {
			return nil, false, err
		}
		if len(msgs) > 0 {
			if recs, err = seal(ctx, req.Seal, sess, t, first, msgs); err != nil {
				return nil, false, err
			}
		}
	}
	at := orNow(req.Time)
	var annRows [][]any
	for _, a := range req.Annotations {
		err := anchor(a, t.ID, t.OwnerID, func(i int) (string, bool, error) {
			if i >= first && i < first+len(msgs) {
				return msgs[i-first].ID, true, nil
			}
			if i < 0 || i >= first {
				return "", false, nil
			}
			var id string
			if err := tx.QueryRow(ctx, `SELECT message_id FROM messages WHERE trace_id = $1 AND idx = $2`, t.ID, int64(i)).Scan(&id); err != nil {
				return "", false, fmt.Errorf("anchor annotation in trace %s: %w", t.ID, err)
			}
			return id, true, nil
		})
		if err != nil {
			return nil, false, err
		}
		annRows = append(annRows, annotationRow(a))
	}
	renamed := req.Name != nil && *req.Name != t.Name
	if req.Name != nil {
		t.Name = *req.Name
	}
	if req.MetadataMerge != nil {
		if t.Metadata, err = store.MergePatch(t.Metadata, req.MetadataMerge); err != nil {
			return nil, false, fmt.Errorf("append to trace %s: metadata: %w", t.ID, err)
		}
	}
	if len(msgs) > 0 {
		t.MessageCount += len(msgs)
		t.TimeLastPushed = at
	}
	switch {
	case bulk != nil && (req.Name != nil || req.MetadataMerge != nil || len(msgs) > 0):
		bulk.trace(b, t)
	case req.Name != nil || req.MetadataMerge != nil:
		b.Exec(`UPDATE traces SET message_count = $2, time_last_pushed = $3, name = $4, metadata = $5 WHERE id = $1`,
			t.ID, int64(t.MessageCount), micros(t.TimeLastPushed), nullString(t.Name), objectOrEmpty(t.Metadata))
	case len(msgs) > 0:
		b.Exec(`UPDATE traces SET message_count = $2, time_last_pushed = $3 WHERE id = $1`, t.ID, int64(t.MessageCount), micros(at))
	}
	switch {
	case len(recs) > 0 && bulk != nil:
		bulk.tail(b, sess)
	case len(recs) > 0:
		b.Exec(saveTailSQL, saveTailArgs(sess)...)
	}
	rows := make([][]any, len(msgs))
	for i := range msgs {
		rows[i] = messageRow(t.ID, &msgs[i])
	}
	b.Insert("messages", messageColList, rows)
	rrows := make([][]any, len(recs))
	for i := range recs {
		rrows[i] = receiptRow(&recs[i])
	}
	b.Insert("receipts", receiptColList, rrows)
	b.Insert("annotations", annotationColList, annRows)
	if bulk != nil {
		bulk.job(t.DatasetID, t.ID, first, first+len(msgs))
	} else {
		s.enqueueMonitor(b, t.DatasetID, t.ID, first, first+len(msgs), at)
	}
	return &store.AppendResult{Trace: t, Messages: msgs, Receipts: recs}, len(msgs) > 0 || renamed, nil
}

// AppendMany implements store.Traces: the traces are locked in id order
// (two transactions appending to the same traces cannot deadlock), their
// writes run as one batch, and the tool registry is updated per dataset.
func (s *Store) AppendMany(ctx context.Context, reqs []store.AppendRequest) ([]store.AppendOutcome, error) {
	order := make([]int, len(reqs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(reqs[a].TraceID, reqs[b].TraceID) })
	for k := 1; k < len(order); k++ {
		if id := reqs[order[k]].TraceID; id == reqs[order[k-1]].TraceID {
			return nil, fmt.Errorf("append to traces: trace %s appears twice: %w", id, store.ErrConflict)
		}
	}
	var out []store.AppendOutcome
	err := s.inTx(ctx, func(tx Tx) error {
		out = make([]store.AppendOutcome, len(reqs))
		var b Batch
		var pending []string
		latest := map[string]int64{}
		spans := map[string][]string{}
		var bulk rowUpdates
		tools := map[string][]store.ToolUse{}
		var dsOrder []string
		ids := make([]string, len(order))
		for k, i := range order {
			ids[k] = reqs[i].TraceID
		}
		locked, err := s.lockTraces(ctx, tx, ids)
		if err != nil {
			return err
		}
		sealed := sealAll(ctx, reqs, order, locked)
		for _, i := range order {
			req := &reqs[i]
			l, ok := locked[req.TraceID]
			if !ok {
				out[i].Err = fmt.Errorf("append to trace %s: %w", req.TraceID, store.ErrNotFound)
				continue
			}
			res, reindex, err := s.appendTx(ctx, tx, &b, req, l.t, l.sess, &bulk, &sealed[i])
			switch {
			case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrFinished):
				out[i].Err = err
				continue
			case err != nil:
				return err
			}
			out[i].AppendResult = res
			if len(req.OTLPSpanIDs) > 0 {
				spans[res.Trace.OwnerID] = append(spans[res.Trace.OwnerID], req.OTLPSpanIDs...)
			}
			if reindex {
				pending = append(pending, res.Trace.ID)
			}
			if ds := res.Trace.DatasetID; ds != "" && len(res.Messages) > 0 {
				latest[ds] = max(latest[ds], micros(res.Trace.TimeLastPushed))
			}
			if ds := res.Trace.DatasetID; ds != "" && len(req.Tools) > 0 {
				if _, ok := tools[ds]; !ok {
					dsOrder = append(dsOrder, ds)
				}
				tools[ds] = append(tools[ds], req.Tools...)
			}
		}
		// One statement each for the trace and session rows, the search
		// marks, per dataset and per owner's OTLP span ids, and one bulk
		// insert per table.
		if err := s.flushRowUpdates(&b, &bulk); err != nil {
			return err
		}
		if err := s.flushMonitorJobs(&b, &bulk, orNow(reqs[0].Time)); err != nil {
			return err
		}
		for _, o := range slices.Sorted(maps.Keys(spans)) {
			markOTLPSpans(&b, o, spans[o], orNow(reqs[0].Time))
		}
		if len(pending) > 0 {
			b.Exec(markPendingFrom(s.b.In("id", 1)), s.b.ListArg(pending))
		}
		for _, ds := range slices.Sorted(maps.Keys(latest)) {
			b.Exec(`UPDATE datasets SET latest_trace_time = $2 WHERE id = $1`, ds, latest[ds])
		}
		if err := tx.RunBatch(ctx, coalesce(&b)); err != nil {
			return s.conflict(err, "append to traces")
		}
		slices.Sort(dsOrder)
		for _, ds := range dsOrder {
			if err := s.recordTools(ctx, tx, ds, tools[ds], orNow(reqs[0].Time)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, o := range out {
		if o.AppendResult != nil && len(o.Messages) > 0 {
			t := o.Trace
			s.jobsQueued(ctx, t.DatasetID, recentWrite{t.ID, t.MessageCount - len(o.Messages), o.Messages})
		}
	}
	return out, nil
}

// lockedTrace is a trace and its session as locked by lockTraces.
type lockedTrace struct {
	t    *store.Trace
	sess *store.Session
}

// lockTraces reads the traces ids (sorted) that exist and their sessions,
// locking the rows in id order, in one round trip.
func (s *Store) lockTraces(ctx context.Context, tx Tx, ids []string) (map[string]lockedTrace, error) {
	rows, err := tx.Query(ctx, `SELECT `+prefixed("t", traceColList)+`, `+prefixed("s", sessionColList)+
		` FROM traces t JOIN ledger_sessions s ON s.id = t.session_id WHERE `+s.b.In("t.id", 1)+` ORDER BY t.id`+s.b.ForUpdate(), s.b.ListArg(ids))
	if err != nil {
		return nil, fmt.Errorf("lock traces: %w", err)
	}
	defer rows.Close()
	out := make(map[string]lockedTrace, len(ids))
	for rows.Next() {
		var xt traceScan
		var xs sessionScan
		if err := rows.Scan(append(xt.dest(), xs.dest()...)...); err != nil {
			return nil, fmt.Errorf("lock traces: %w", err)
		}
		t, err := xt.finish()
		if err != nil {
			return nil, fmt.Errorf("lock traces: %w", err)
		}
		out[t.ID] = lockedTrace{t, xs.finish()}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("lock traces: %w", err)
	}
	return out, nil
}

// appendable is nil when events may be appended to trace t in session
// sess, else an ErrFinished error.
func appendable(t *store.Trace, sess *store.Session) error {
	if t.Status != store.RunOpen {
		return fmt.Errorf("append to trace %s: run is %s: %w", t.ID, t.Status, store.ErrFinished)
	}
	if sess.ClosedAt != nil {
		return fmt.Errorf("append to trace %s: session %s is closed: %w", t.ID, sess.ID, store.ErrFinished)
	}
	return nil
}

// sealedAppend is one AppendMany request's events, prepared and sealed
// ahead of its writes (sealAll), or the error doing so.
type sealedAppend struct {
	msgs []store.Message
	recs []store.Receipt
	err  error
}

// sealAll prepares the events of the requests (order: their indices in
// trace id order) whose traces are locked and open, and seals them: the
// message ids are drawn in order, then the receipts of distinct traces,
// whose chains are independent (each from its own session's tail, locked
// by the transaction), are computed on all cores, so the Ed25519
// signatures hold the single writer for a fraction of their CPU time. It
// advances each session's tail as seal does; the chains are the ones
// sealing one trace after the other makes. The requests' Seal functions
// may therefore run concurrently (each on its own request).
func sealAll(ctx context.Context, reqs []store.AppendRequest, order []int, locked map[string]lockedTrace) []sealedAppend {
	out := make([]sealedAppend, len(reqs))
	var jobs []int
	events := 0
	for _, i := range order {
		req := &reqs[i]
		l, ok := locked[req.TraceID]
		if !ok || appendable(l.t, l.sess) != nil {
			continue // appendTx reports it
		}
		x := &out[i]
		if x.msgs, x.err = prepareMessages(l.t.ID, req.Messages, l.t.MessageCount); x.err != nil || len(x.msgs) == 0 || req.Seal == nil {
			continue
		}
		jobs = append(jobs, i)
		events += len(x.msgs)
	}
	work := func(i int) {
		l, x := locked[reqs[i].TraceID], &out[i]
		x.recs, x.err = seal(ctx, reqs[i].Seal, l.sess, l.t, l.t.MessageCount, x.msgs)
	}
	workers := min(runtime.GOMAXPROCS(0), len(jobs))
	if workers < 2 || events < parallelSealEvents {
		for _, i := range jobs {
			work(i)
		}
		return out
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				k := int(next.Add(1)) - 1
				if k >= len(jobs) {
					return
				}
				work(jobs[k])
			}
		})
	}
	wg.Wait()
	return out
}

// parallelSealEvents is the fewest events sealAll signs on several cores
// (below it, starting goroutines costs more than it saves).
const parallelSealEvents = 8
