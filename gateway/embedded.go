package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigilhq/vigil/ingest"
	"github.com/vigilhq/vigil/monitor"
	"github.com/vigilhq/vigil/server"
	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/trace"
)

// This file joins the gateway to an in-process server (vigil serve):
// keys through the server's authentication cache, dataset guardrails
// through its rule cache (kept fresh by the change feed), and recording
// through its Ingester, the one write path.

// Embedded returns the Authenticator, RuleSource, Compiler and a started
// Recorder of a gateway inside srv. Stop the recorder with Close.
func Embedded(srv *server.Server, rec RecordOptions) (Authenticator, RuleSource, Compiler, *IngestRecorder) {
	r := NewIngestRecorder(srv.Ingester(), srv.Store(), srv.Logger(), rec)
	r.finishRun = srv.FinishRun
	return serverAuth{srv}, &serverRules{srv: srv, ids: map[string]idEntry{}}, srv.Rules(), r
}

type serverAuth struct{ srv *server.Server }

func (a serverAuth) Authenticate(ctx context.Context, key string) (*Identity, error) {
	c, err := a.srv.AuthenticateKey(ctx, key)
	if err != nil {
		if errors.Is(err, server.ErrInvalidKey) {
			return nil, ErrInvalidKey
		}
		return nil, err
	}
	if c == nil || c.User == nil {
		return nil, ErrInvalidKey
	}
	id := &Identity{UserID: c.User.ID, Username: c.User.Username, Key: key, CanIngest: c.CanIngest()}
	if c.Key != nil {
		id.KeyID = c.Key.ID
	}
	return id, nil
}

// serverRules resolves dataset names to ids (cached for a minute) and
// reads the server's per-dataset ruleset cache.
type serverRules struct {
	srv *server.Server
	mu  sync.Mutex
	ids map[string]idEntry
}

type idEntry struct {
	id string
	at time.Time
}

func (s *serverRules) Ruleset(ctx context.Context, id *Identity, dataset string) (*Ruleset, error) {
	k := id.UserID + "\x00" + dataset
	s.mu.Lock()
	e, ok := s.ids[k]
	s.mu.Unlock()
	if !ok || time.Since(e.at) > time.Minute {
		dsID, err := s.srv.DatasetID(ctx, id.UserID, dataset)
		if errors.Is(err, store.ErrNotFound) {
			dsID, err = "", nil
		}
		if err != nil {
			return nil, err
		}
		e = idEntry{dsID, time.Now()}
		s.mu.Lock()
		if len(s.ids) > 100000 {
			clear(s.ids)
		}
		s.ids[k] = e
		s.mu.Unlock()
	}
	if e.id == "" {
		return &Ruleset{Version: "none"}, nil
	}
	dr, err := s.srv.DatasetRulesByID(ctx, e.id)
	if errors.Is(err, store.ErrNotFound) {
		s.mu.Lock()
		delete(s.ids, k)
		s.mu.Unlock()
		return &Ruleset{Version: "none"}, nil
	}
	if err != nil {
		return nil, err
	}
	return rulesetOf(dr), nil
}

// rulesetOf converts the server's ruleset, keeping the enabled
// guardrails whose scope admits LLM routes.
func rulesetOf(dr *server.DatasetRules) *Ruleset {
	rs := &Ruleset{Version: strconv.FormatInt(dr.Version, 10)}
	for _, g := range dr.Guardrails {
		if !g.Enabled || !scopeAdmits(g.Scope, "llm") {
			continue
		}
		gr := &Guardrail{ID: g.ID, Name: g.Name, Content: g.Content, Action: g.Action, Version: g.Version, Severity: g.Severity,
			Policy: dr.Rules[g.ID], Err: dr.Errors[g.ID], StreamFinal: streamFinal(g.ExtraMetadata)}
		if gr.Policy == nil && gr.Err == nil {
			gr.Err = fmt.Errorf("guardrail %s does not compile", g.ID)
		}
		rs.Guardrails = append(rs.Guardrails, gr)
	}
	return rs
}

// scopeAdmits reports whether a guardrail scope ({"kinds": [...]}, null
// for every kind) admits kind.
func scopeAdmits(scope json.RawMessage, kind string) bool {
	if len(scope) == 0 || string(scope) == "null" {
		return true
	}
	var s struct {
		Kinds []string `json:"kinds"`
	}
	if json.Unmarshal(scope, &s) != nil || len(s.Kinds) == 0 {
		return true
	}
	for _, k := range s.Kinds {
		if k == kind {
			return true
		}
	}
	return false
}

func streamFinal(extra json.RawMessage) bool {
	var m struct {
		StreamCheck string `json:"stream_check"`
	}
	return json.Unmarshal(extra, &m) == nil && m.StreamCheck == "final"
}

// RecordOptions are gateway.record (spec §8.2).
type RecordOptions struct {
	QueueSize int  // default 10000
	Block     bool // on_full block: wait up to 1 s, then drop
	// Linger is the longest a queued record waits for others to share
	// its write (default 200ms); Quiet ends the wait early once no
	// record arrived for that long (default 20ms). Writing many calls in
	// one transaction amortises the commit (an fsync under
	// synchronous=FULL), and writing when the gateway is quiet keeps the
	// writer off the core that serves the next request.
	Linger, Quiet time.Duration
}

// IngestRecorder writes records through an Ingester from one writer
// goroutine, in order, behind a bounded queue.
type IngestRecorder struct {
	ing     *ingest.Ingester
	st      store.Store
	log     *slog.Logger
	q       chan *Record
	block   bool
	done    chan struct{}
	dropped atomic.Uint64
	written atomic.Uint64
	maxLen  atomic.Int64
	once    sync.Once
	mu      sync.Mutex
	idle    *sync.Cond
	pending int
	// kick asks the writer to write what it holds now (Flush).
	kick          chan struct{}
	linger, quiet time.Duration
	// finishRun finishes a trace's run (the server's, with its ledger
	// close); nil: runs are left open.
	finishRun func(ctx context.Context, traceID string) error
}

// NewIngestRecorder starts a recorder writing through ing.
func NewIngestRecorder(ing *ingest.Ingester, st store.Store, log *slog.Logger, o RecordOptions) *IngestRecorder {
	if o.QueueSize <= 0 {
		o.QueueSize = 10000
	}
	if log == nil {
		log = slog.Default()
	}
	if o.Linger <= 0 {
		o.Linger = 200 * time.Millisecond
	}
	if o.Quiet <= 0 {
		o.Quiet = 20 * time.Millisecond
	}
	r := &IngestRecorder{ing: ing, st: st, log: log, q: make(chan *Record, o.QueueSize), block: o.Block, done: make(chan struct{}),
		kick: make(chan struct{}, 1), linger: o.Linger, quiet: o.Quiet}
	r.idle = sync.NewCond(&r.mu)
	go r.run()
	return r
}

// Record queues rec; false when the queue is full (dropped).
func (r *IngestRecorder) Record(rec *Record) bool {
	r.mu.Lock()
	r.pending++
	depth := int64(r.pending)
	r.mu.Unlock()
	// The queue depth: records handed over and not yet written (queued,
	// or in the writer's batch).
	if depth > r.maxLen.Load() {
		r.maxLen.Store(depth)
	}
	ok := false
	select {
	case r.q <- rec:
		ok = true
	default:
		if r.block {
			select {
			case r.q <- rec:
				ok = true
			case <-time.After(time.Second):
			}
		}
	}
	if !ok {
		r.dropped.Add(1)
		r.finished()
	}
	return ok
}

func (r *IngestRecorder) finished() {
	r.mu.Lock()
	r.pending--
	if r.pending == 0 {
		r.idle.Broadcast()
	}
	r.mu.Unlock()
}

// Flush waits until every queued record is written.
func (r *IngestRecorder) Flush() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
	r.mu.Lock()
	for r.pending > 0 {
		r.idle.Wait()
	}
	r.mu.Unlock()
}

// Stats are the recorder's counters: records written, dropped
// (vigil_trace_write_dropped_total) and the largest queue depth seen.
func (r *IngestRecorder) Stats() (written, dropped uint64, maxQueue int64) {
	return r.written.Load(), r.dropped.Load(), r.maxLen.Load()
}

// RecorderStats returns the recorder's counters (RecorderStats).
func (r *IngestRecorder) RecorderStats() RecordStats {
	r.mu.Lock()
	pending := r.pending
	r.mu.Unlock()
	return RecordStats{Written: r.written.Load(), Dropped: r.dropped.Load(), MaxQueue: r.maxLen.Load(), Pending: pending}
}

// Close writes what is queued and stops the writer.
func (r *IngestRecorder) Close() {
	r.once.Do(func() { close(r.q) })
	<-r.done
}

// maxBatch is the most records the writer takes at once, and
// txRecords the most new traces it pushes in one transaction: between
// two transactions it lets the gateway's requests run.
const (
	maxBatch  = 1024
	txRecords = 128
)

// run writes records in order. A record waits up to linger for others
// (until quiet passes with no new record, the batch is full or Flush
// asks): consecutive new traces of one owner and dataset go into one
// push transaction, so that the commit is paid once for many calls.
func (r *IngestRecorder) run() {
	defer close(r.done)
	t := time.NewTimer(time.Hour)
	t.Stop()
	closed := false
	for !closed {
		rec, ok := <-r.q
		if !ok {
			return
		}
		batch := []*Record{rec}
		deadline := time.Now().Add(r.linger)
	collect:
		for len(batch) < maxBatch {
			// Take what is already queued without a timer.
			select {
			case x, ok := <-r.q:
				if !ok {
					closed = true
					break collect
				}
				batch = append(batch, x)
				continue
			case <-r.kick:
				break collect
			default:
			}
			wait := min(r.quiet, time.Until(deadline))
			if wait <= 0 {
				break
			}
			t.Reset(wait)
			select {
			case x, ok := <-r.q:
				t.Stop()
				if !ok {
					closed = true
					break collect
				}
				batch = append(batch, x)
			case <-r.kick:
				t.Stop()
				break collect
			case <-t.C:
				break collect
			}
		}
		r.writeBatch(batch)
	}
	// Closed: write what is left.
	var rest []*Record
	for x := range r.q {
		rest = append(rest, x)
	}
	if len(rest) > 0 {
		r.writeBatch(rest)
	}
}

// writeBatch runs the records' logging rules and writes them in order.
func (r *IngestRecorder) writeBatch(batch []*Record) {
	for _, x := range batch {
		if x.Finish != nil {
			x.Finish(x)
		}
	}
	for i := 0; i < len(batch); {
		j := i + 1
		switch {
		case batch[i].New && !batch[i].FinishRun:
			for j < len(batch) && j-i < txRecords && batch[j].New && !batch[j].FinishRun &&
				batch[j].Identity.UserID == batch[i].Identity.UserID && batch[j].Dataset == batch[i].Dataset {
				j++
			}
			r.writeAll(batch[i:j])
		case !batch[i].FinishRun:
			// Appends to distinct traces (a trace once per transaction).
			seen := map[string]bool{batch[i].TraceID: true}
			for j < len(batch) && j-i < txRecords && !batch[j].New && !batch[j].FinishRun && !seen[batch[j].TraceID] {
				seen[batch[j].TraceID] = true
				j++
			}
			r.appendAll(batch[i:j])
		default:
			r.writeAll(batch[i:j])
		}
		i = j
		if i < len(batch) {
			// Let requests that arrived meanwhile run: a sleep (unlike
			// Gosched) lets the scheduler poll the network.
			time.Sleep(20 * time.Microsecond)
		}
	}
}

// writeAll writes one record, or several new traces in one push; a
// failed push is retried record by record, so one bad record loses only
// itself.
func (r *IngestRecorder) writeAll(recs []*Record) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	defer func() {
		for range recs {
			r.finished()
		}
	}()
	if len(recs) > 1 {
		if err := r.pushAll(ctx, recs); err == nil {
			r.written.Add(uint64(len(recs)))
			return
		}
	}
	for _, rec := range recs {
		if err := r.write(ctx, rec); err != nil {
			r.log.Error("gateway: record call", "call_id", rec.CallID, "trace_id", rec.TraceID, "err", err)
		} else {
			r.written.Add(1)
		}
	}
}

// appendAll writes records that append to distinct existing traces
// (their events and metadata patches) in one AppendMany transaction. A
// record that cannot be prepared, or whose trace the transaction could
// not append to, is written on its own as write does (which reports its
// error); when the transaction fails as a whole every record is.
func (r *IngestRecorder) appendAll(recs []*Record) {
	if len(recs) == 1 {
		r.writeAll(recs)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	now := time.Now()
	var reqs []ingest.AppendRequest
	var batched, alone []*Record
	for _, rec := range recs {
		req, err := r.prepareAppend(ctx, rec, now)
		if err != nil {
			alone = append(alone, rec)
			continue
		}
		reqs = append(reqs, req)
		batched = append(batched, rec)
	}
	if len(reqs) > 0 {
		outs, err := r.ing.AppendMany(ctx, reqs)
		if err != nil {
			alone = append(alone, batched...)
		} else {
			for i, o := range outs {
				rec := batched[i]
				if o.Err != nil {
					alone = append(alone, rec)
					continue
				}
				if err := r.storeFindings(ctx, rec); err != nil {
					r.log.Error("gateway: store findings", "call_id", rec.CallID, "trace_id", rec.TraceID, "err", err)
				}
				r.written.Add(1)
				r.finished()
			}
		}
	}
	// In order, each on its own.
	slices.SortStableFunc(alone, func(a, b *Record) int { return slices.Index(recs, a) - slices.Index(recs, b) })
	for _, rec := range alone {
		r.writeAll([]*Record{rec})
	}
}

// prepareAppend reads the trace rec appends to and prepares its events
// and metadata patch as one AppendMany request.
func (r *IngestRecorder) prepareAppend(ctx context.Context, rec *Record, now time.Time) (ingest.AppendRequest, error) {
	md, err := json.Marshal(rec.Metadata)
	if err != nil {
		return ingest.AppendRequest{}, err
	}
	t, err := r.st.GetTrace(ctx, rec.TraceID, false)
	if err != nil {
		return ingest.AppendRequest{}, fmt.Errorf("trace %s: %w", rec.TraceID, err)
	}
	req := ingest.AppendRequest{Trace: t, Time: now, MetadataMerge: md}
	if len(rec.Events) == 0 {
		return req, nil
	}
	ids, err := r.st.MessageIDs(ctx, rec.TraceID)
	if err != nil {
		return ingest.AppendRequest{}, fmt.Errorf("trace %s: %w", rec.TraceID, err)
	}
	t.Messages = make([]store.Message, len(ids))
	for i, id := range ids {
		t.Messages[i] = store.Message{ID: id, Index: i}
	}
	events, err := json.Marshal(rec.Events)
	if err != nil {
		return ingest.AppendRequest{}, err
	}
	pe, err := ingest.PrepareAppend(t, events, now, "messages", new(ingest.Warnings))
	if err != nil {
		return ingest.AppendRequest{}, fmt.Errorf("prepare append to %s: %w", rec.TraceID, err)
	}
	req.Events = pe
	return req, nil
}

// pushAll pushes new traces of one owner and dataset in one transaction.
func (r *IngestRecorder) pushAll(ctx context.Context, recs []*Record) error {
	req := ingest.PushRequest{PushRequest: store.PushRequest{OwnerID: recs[0].Identity.UserID, DatasetName: recs[0].Dataset, CreateIfMissing: true}}
	tools := map[string]*store.ToolUse{}
	now := time.Now()
	for _, rec := range recs {
		events, err := json.Marshal(rec.Events)
		if err != nil {
			return err
		}
		md, err := json.Marshal(rec.Metadata)
		if err != nil {
			return err
		}
		pe, err := ingest.Prepare(events, ingest.TraceOptions{TraceID: rec.TraceID}, new(ingest.Warnings))
		if err != nil {
			return err
		}
		ingest.MergeTools(tools, pe.Tools)
		req.Blobs = append(req.Blobs, pe.Images.Blobs...)
		req.Traces = append(req.Traces, store.NewTrace{ID: rec.TraceID, Metadata: md, SessionKey: rec.SessionKey, KeyID: rec.Identity.KeyID,
			TimeCreated: now, Messages: pe.Messages})
	}
	req.Tools = ingest.ToolList(tools)
	if _, err := r.ing.Push(ctx, req); err != nil {
		return err
	}
	for _, rec := range recs {
		if err := r.storeFindings(ctx, rec); err != nil {
			r.log.Error("gateway: store findings", "call_id", rec.CallID, "trace_id", rec.TraceID, "err", err)
		}
	}
	return nil
}

func (r *IngestRecorder) write(ctx context.Context, rec *Record) error {
	if rec.FinishRun {
		if r.finishRun == nil {
			return nil
		}
		return r.finishRun(ctx, rec.TraceID)
	}
	events, err := json.Marshal(rec.Events)
	if err != nil {
		return err
	}
	md, err := json.Marshal(rec.Metadata)
	if err != nil {
		return err
	}
	now := time.Now()
	if rec.New {
		pe, err := ingest.Prepare(events, ingest.TraceOptions{TraceID: rec.TraceID}, new(ingest.Warnings))
		if err != nil {
			return fmt.Errorf("prepare trace %s: %w", rec.TraceID, err)
		}
		_, err = r.ing.Push(ctx, ingest.PushRequest{PushRequest: store.PushRequest{
			OwnerID: rec.Identity.UserID, DatasetName: rec.Dataset, CreateIfMissing: true,
			Traces: []store.NewTrace{{ID: rec.TraceID, Metadata: md, SessionKey: rec.SessionKey, KeyID: rec.Identity.KeyID,
				TimeCreated: now, Messages: pe.Messages}},
			Tools: ingest.ToolList(pe.Tools),
		}, Blobs: pe.Images.Blobs})
		if err != nil {
			return fmt.Errorf("push trace %s: %w", rec.TraceID, err)
		}
		return r.storeFindings(ctx, rec)
	}
	t, err := r.st.GetTrace(ctx, rec.TraceID, false)
	if err != nil {
		return fmt.Errorf("trace %s: %w", rec.TraceID, err)
	}
	ids, err := r.st.MessageIDs(ctx, rec.TraceID)
	if err != nil {
		return fmt.Errorf("trace %s: %w", rec.TraceID, err)
	}
	t.Messages = make([]store.Message, len(ids))
	for i, id := range ids {
		t.Messages[i] = store.Message{ID: id, Index: i}
	}
	if len(rec.Events) > 0 {
		pe, err := ingest.PrepareAppend(t, events, now, "messages", new(ingest.Warnings))
		if err != nil {
			return fmt.Errorf("prepare append to %s: %w", rec.TraceID, err)
		}
		if _, err := r.ing.Append(ctx, ingest.AppendRequest{Trace: t, Events: pe, Time: now}); err != nil {
			return fmt.Errorf("append to trace %s: %w", rec.TraceID, err)
		}
	}
	if _, err := r.st.UpdateTrace(ctx, rec.TraceID, store.TraceUpdate{MetadataMerge: md}); err != nil {
		return fmt.Errorf("metadata of trace %s: %w", rec.TraceID, err)
	}
	return r.storeFindings(ctx, rec)
}

// storeFindings stores the violations of rec as ledger findings of its
// trace (spec §8.1), citations with the ledger nodes of the stored
// events; the store de-duplicates them on (monitor, trace, key).
func (r *IngestRecorder) storeFindings(ctx context.Context, rec *Record) error {
	if len(rec.Findings) == 0 {
		return nil
	}
	t, err := r.st.GetTrace(ctx, rec.TraceID, true)
	if err != nil {
		return fmt.Errorf("read trace %s for its findings: %w", rec.TraceID, err)
	}
	nodeIDs := make([][]string, len(t.Messages))
	for i, m := range t.Messages {
		nodeIDs[i] = m.NodeIDs
	}
	// Keys and ranges are already at stored positions.
	ev := monitor.NewEvaluated(&trace.Trace{}, nodeIDs)
	for _, gf := range rec.Findings {
		ctxJSON, err := json.Marshal(gf.Context)
		if err != nil {
			return fmt.Errorf("finding context: %w", err)
		}
		f := monitor.NewFinding(monitor.Source{MonitorID: gf.MonitorID, Monitor: gf.Monitor, Severity: gf.Severity, Context: ctxJSON}, ev, gf.Violation)
		f.RunID, f.OwnerID = rec.TraceID, t.OwnerID
		if _, _, err := r.st.UpsertFinding(ctx, f); err != nil {
			return fmt.Errorf("store finding %s of %s on trace %s: %w", f.Key, f.MonitorID, rec.TraceID, err)
		}
	}
	return nil
}
