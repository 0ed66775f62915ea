package otlp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vigilhq/vigil/ingest"
	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/trace"
	"github.com/vigilhq/vigil/trace/convert"
)

// This file groups mapped spans into conversations (spec §11 items 1, 2,
// 5–8) and writes each conversation's new events through ingest: a new
// conversation is pushed as a trace with session_key "otel:<id>", a
// known one appended to.

// principal is who writes: the key's user (owner) and key.
type principal struct {
	ownerID, userID, keyID string
}

// writer holds the de-duplication state and writes through ingest. It is
// safe for concurrent use: a request locks its conversations (in key
// order), so requests touching the same conversation are serialised.
type writer struct {
	st             store.Store
	ing            *ingest.Ingester
	log            *slog.Logger // nil: no log
	now            func() time.Time
	defaultDataset string

	locks convLocks

	mu        sync.Mutex // guards the caches below
	convs     *lru[string, *convState]
	seen      *lru[string, struct{}] // owner \x00 span id (and log record keys)
	traceConv *lru[string, string]   // owner \x00 trace id → conversation
}

func newWriter(st store.Store, ing *ingest.Ingester, defaultDataset string, cacheSize int) *writer {
	return &writer{
		st: st, ing: ing, now: time.Now, defaultDataset: defaultDataset,
		convs: newLRU[string, *convState](cacheSize), seen: newLRU[string, struct{}](cacheSize * 8),
		traceConv: newLRU[string, string](cacheSize * 4),
	}
}

// convState is what the writer knows of one conversation's trace.
type convState struct {
	traceID, datasetID string
	canon              []canonKey
	toolOut            map[string]bool
	count              int // events stored
	chatSpans          int
	inTokens, outToks  int64
	model, provider    string
	name               string
	finish             []string
	traceIDs           []string
	service            string
	resource           map[string]trace.Value
	lastMeta           string // the metadata last written
}

// result is the outcome of a request.
type result struct {
	rejected int
	errMsgs  []string
	dropped  int
}

func (r *result) reject(format string, args ...any) {
	r.rejected++
	if len(r.errMsgs) < 5 {
		r.errMsgs = append(r.errMsgs, fmt.Sprintf(format, args...))
	}
}

func (r *result) message() string { return strings.Join(r.errMsgs, "; ") }

// group is one conversation's spans in a request.
type group struct {
	dataset, conv string
	spans         []*span
	key           string // owner \x00 dataset \x00 conversation
	st            *convState
	// the planned write
	events  []*trace.Object
	anns    []*store.Annotation
	seenIDs []string
}

// write maps and stores spans. Spans that cannot be mapped are counted
// in the result; an error means nothing of the request was written (or
// only whole conversations before the failing one) and the exporter
// should retry.
func (w *writer) write(ctx context.Context, p principal, headerDataset string, spans []*span) (*result, error) {
	res := &result{}
	var keep []*span
	for _, sp := range spans {
		r, err := convert.FromOTelSpan(&sp.OTelSpan)
		if err != nil {
			res.reject("%v", err)
			continue
		}
		if !r.Relevant || r.Kind == convert.OTelOther {
			res.dropped++
			continue
		}
		sp.res = r
		keep = append(keep, sp)
	}
	// Span ids stored before (by this process or, per the store, by any).
	ids := make([]string, 0, len(keep))
	for _, sp := range keep {
		ids = append(ids, sp.SpanID)
		ids = append(ids, sp.logKeys...)
	}
	if err := w.loadSeen(ctx, p.ownerID, ids); err != nil {
		return nil, err
	}
	// Conversation of each OTel trace: a conversation id on any of its
	// spans applies to all of them.
	w.mu.Lock()
	for _, sp := range keep {
		if c := sp.res.Conversation; c != "" {
			w.traceConv.put(p.ownerID+"\x00"+sp.TraceID, c)
		}
	}
	groups := map[string]*group{}
	for _, sp := range keep {
		conv := sp.res.Conversation
		if conv == "" {
			if c, ok := w.traceConv.get(p.ownerID + "\x00" + sp.TraceID); ok {
				conv = c
			} else {
				conv = sp.TraceID
			}
		}
		ds := DatasetName(headerDataset, sp.dataset, w.defaultDataset)
		k := ds + "\x00" + conv
		g := groups[k]
		if g == nil {
			g = &group{dataset: ds, conv: conv, key: w.convKey(p.ownerID, ds, conv)}
			groups[k] = g
		}
		g.spans = append(g.spans, sp)
	}
	w.mu.Unlock()
	if len(groups) == 0 {
		return res, nil
	}
	list := make([]*group, 0, len(groups))
	for _, g := range groups {
		slices.SortStableFunc(g.spans, func(a, b *span) int { return a.Start.Compare(b.Start) })
		list = append(list, g)
	}
	slices.SortFunc(list, func(a, b *group) int { return strings.Compare(a.key, b.key) })
	// Lock the conversations in key order (no deadlock between requests).
	keys := make([]string, len(list))
	for i, g := range list {
		keys[i] = g.key
	}
	defer w.locks.lock(keys)()
	datasets := map[string]*store.Dataset{} // looked up once per request
	for _, g := range list {
		st, err := w.state(ctx, p.ownerID, g.dataset, g.conv, datasets)
		if err != nil {
			return nil, err
		}
		g.st = st
		w.plan(p, g)
	}
	if err := w.store(ctx, p, list); err != nil {
		return nil, err
	}
	return res, nil
}

func (w *writer) convKey(owner, dataset, conv string) string {
	return owner + "\x00" + dataset + "\x00" + conv
}

// state returns the conversation's state, from the cache or rebuilt from
// the stored trace. The caller holds the conversation's lock.
// datasets caches the request's dataset lookups (a nil entry: no such
// dataset yet).
func (w *writer) state(ctx context.Context, owner, dataset, conv string, datasets map[string]*store.Dataset) (*convState, error) {
	key := w.convKey(owner, dataset, conv)
	w.mu.Lock()
	st, ok := w.convs.get(key)
	w.mu.Unlock()
	if ok {
		return st, nil
	}
	st = &convState{toolOut: map[string]bool{}}
	d, known := datasets[dataset]
	if !known {
		var err error
		switch d, err = w.st.GetDatasetByName(ctx, owner, dataset); {
		case errors.Is(err, store.ErrNotFound):
			d = nil
		case err != nil:
			return nil, fmt.Errorf("otlp: dataset %s: %w", dataset, err)
		}
		datasets[dataset] = d
	}
	if d != nil {
		ts, err := w.st.ListTraces(ctx, store.TraceFilter{DatasetID: d.ID, SessionKey: sessionKey(conv), Status: store.RunOpen,
			Order: store.OrderTimeCreatedDesc, Limit: 1, WithMessages: true})
		if err != nil {
			return nil, fmt.Errorf("otlp: find the trace of conversation %s: %w", conv, err)
		}
		if len(ts) > 0 {
			st.load(ts[0])
		}
	}
	w.mu.Lock()
	w.convs.put(key, st)
	w.mu.Unlock()
	return st, nil
}

func sessionKey(conv string) string { return "otel:" + conv }

// load rebuilds the state from a stored trace.
func (st *convState) load(t *store.Trace) {
	st.traceID, st.datasetID, st.count, st.name = t.ID, t.DatasetID, len(t.Messages), t.Name
	for _, m := range t.Messages {
		v, err := trace.ParseValue(m.Data)
		o, ok := v.(*trace.Object)
		if err != nil || !ok {
			st.canon = append(st.canon, canonKey{})
			continue
		}
		st.canon = append(st.canon, canonOf(o))
		if str(o, "role") == "tool" {
			st.toolOut[str(o, "tool_call_id")] = true
		}
	}
	var md struct {
		Model         string   `json:"model"`
		Provider      string   `json:"provider"`
		FinishReasons []string `json:"finish_reasons"`
		Usage         struct {
			In  int64 `json:"input_tokens"`
			Out int64 `json:"output_tokens"`
		} `json:"usage"`
		ChatSpans int      `json:"otel.chat_spans"`
		TraceIDs  []string `json:"otel.trace_ids"`
		Service   string   `json:"service.name"`
	}
	_ = json.Unmarshal(t.Metadata, &md)
	st.model, st.provider, st.finish = md.Model, md.Provider, md.FinishReasons
	st.inTokens, st.outToks, st.chatSpans, st.traceIDs, st.service = md.Usage.In, md.Usage.Out, md.ChatSpans, md.TraceIDs, md.Service
	st.lastMeta = string(st.metadata())
}

// plan computes the group's new events and annotations, updating its
// state (which is dropped from the cache if the write fails).
func (w *writer) plan(p principal, g *group) {
	st := g.st
	hasChat := st.chatSpans > 0
	for _, sp := range g.spans {
		if sp.res.Kind == convert.OTelChat {
			hasChat = true
		}
	}
	for _, sp := range g.spans {
		sk := p.ownerID + "\x00" + sp.SpanID
		w.mu.Lock()
		_, dup := w.seen.get(sk)
		w.mu.Unlock()
		if dup || slices.Contains(g.seenIDs, sk) {
			continue // an exporter retry
		}
		g.seenIDs = append(g.seenIDs, sk)
		for _, rk := range sp.logKeys {
			g.seenIDs = append(g.seenIDs, p.ownerID+"\x00"+rk)
		}
		r := sp.res
		if !slices.Contains(st.traceIDs, sp.TraceID) && sp.TraceID != "" {
			st.traceIDs = append(st.traceIDs, sp.TraceID)
		}
		if sp.service != "" {
			st.service = sp.service
		}
		if st.resource == nil {
			st.resource = selectResource(sp.Resource)
		}
		switch r.Kind {
		case convert.OTelChat:
			st.chatSpans++
			g.chat(r.Input, r.Output)
			if r.HasUsage {
				st.inTokens += r.InputTokens
				st.outToks += r.OutputTokens
			}
			st.model = cmpOr(r.Model, st.model)
			st.provider = cmpOr(r.Provider, st.provider)
			for _, f := range r.FinishReasons {
				if !slices.Contains(st.finish, f) {
					st.finish = append(st.finish, f)
				}
			}
		case convert.OTelAgent:
			if r.AgentName != "" && st.name == "" {
				st.name = r.AgentName
			}
			if !hasChat {
				g.chat(r.Input, r.Output)
				st.model = cmpOr(st.model, r.Model)
				st.provider = cmpOr(st.provider, r.Provider)
			}
		case convert.OTelTool:
			if r.ToolOutput != nil {
				g.add(r.ToolOutput)
			}
		}
		for _, gr := range r.Guardrails {
			g.anns = append(g.anns, guardrailAnnotation(p, sp, gr))
		}
	}
}

// chat appends a chat span's input messages that extend the stored
// history, then its output (spec §11 item 3, de-duplication). The stored
// history is matched greedily in order, so a span repeating the whole
// conversation (or the part of it its agent sees) adds only what is new.
func (g *group) chat(input, output []*trace.Object) {
	st := g.st
	pos, k := 0, 0
	for ; k < len(input); k++ {
		key := canonOf(input[k])
		j := pos
		for j < len(st.canon) && st.canon[j] != key {
			j++
		}
		if j == len(st.canon) {
			break
		}
		pos = j + 1
	}
	for _, m := range input[k:] {
		g.add(m)
	}
	for _, m := range output {
		g.add(m)
	}
}

// add appends one event unless it is a tool output whose call already
// has one.
func (g *group) add(m *trace.Object) {
	st := g.st
	if str(m, "role") == "tool" {
		id := str(m, "tool_call_id")
		if id != "" && st.toolOut[id] {
			return
		}
		st.toolOut[id] = true
	}
	st.canon = append(st.canon, canonOf(m))
	g.events = append(g.events, m)
}

// selectResource keeps the resource attributes worth showing.
func selectResource(res map[string]trace.Value) map[string]trace.Value {
	out := map[string]trace.Value{}
	for k, v := range res {
		for _, p := range []string{"service.", "telemetry.sdk.", "deployment.", "host.name", "process.runtime.", "vigil.", "gen_ai."} {
			if strings.HasPrefix(k, p) {
				out[k] = v
				break
			}
		}
	}
	return out
}

func guardrailAnnotation(p principal, sp *span, gr *trace.Object) *store.Annotation {
	result := string(trace.Marshal(gr))
	extra, _ := json.Marshal(map[string]any{"source": "otel-guardrail", "span_id": sp.SpanID, "span_name": sp.Name, "result": json.RawMessage(result)})
	content := "guardrail"
	for _, k := range []string{"gen_ai.guardrail.name", "gen_ai.guardrail.id"} {
		if s := str(gr, k); s != "" {
			content += " " + s
			break
		}
	}
	for _, k := range []string{"gen_ai.guardrail.decision", "gen_ai.guardrail.result", "gen_ai.guardrail.action"} {
		if s := str(gr, k); s != "" {
			content += ": " + s
			break
		}
	}
	return &store.Annotation{UserID: p.userID, Content: content, Address: "<root>", ExtraMetadata: extra}
}

// metadata is the trace metadata the state describes (spec §11 item 7).
func (st *convState) metadata() json.RawMessage {
	md := map[string]any{"source": "otel", "otel.trace_ids": st.traceIDs, "otel.chat_spans": st.chatSpans}
	if st.model != "" {
		md["model"] = st.model
	}
	if st.provider != "" {
		md["provider"] = st.provider
	}
	if st.chatSpans > 0 && (st.inTokens > 0 || st.outToks > 0) {
		md["usage"] = map[string]int64{"input_tokens": st.inTokens, "output_tokens": st.outToks}
	}
	if len(st.finish) > 0 {
		md["finish_reasons"] = st.finish
	}
	if st.service != "" {
		md["service.name"] = st.service
	}
	if len(st.resource) > 0 {
		o := &trace.Object{}
		keys := make([]string, 0, len(st.resource))
		for k := range st.resource {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			o.Set(k, st.resource[k])
		}
		md["otel.resource"] = json.RawMessage(trace.Marshal(o))
	}
	b, _ := json.Marshal(md)
	return b
}

// store writes the planned groups: new conversations in one push per
// dataset, known ones appended. A failed write drops the states of the
// groups not written, so they are rebuilt from the store.
func (w *writer) store(ctx context.Context, p principal, groups []*group) (err error) {
	written := map[*group]bool{}
	defer func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, g := range groups {
			if !written[g] {
				w.convs.remove(w.convKey(p.ownerID, g.dataset, g.conv))
				continue
			}
			for _, k := range g.seenIDs {
				w.seen.put(k, struct{}{})
			}
		}
	}()
	now := w.now()
	pushes := map[string][]*group{}
	var order []string
	var appends []*group
	for _, g := range groups {
		switch {
		case len(g.seenIDs) == 0:
			written[g] = true
		case g.st.traceID == "":
			if _, ok := pushes[g.dataset]; !ok {
				order = append(order, g.dataset)
			}
			pushes[g.dataset] = append(pushes[g.dataset], g)
		default:
			appends = append(appends, g)
		}
	}
	// All appends (events, annotations, name and metadata) in one store
	// transaction.
	outs, err := w.appendGroups(ctx, p, appends, now)
	if err != nil {
		return err
	}
	var firstErr error
	for i, g := range appends {
		switch err := outs[i]; {
		case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrFinished):
			// The trace was deleted or its run finished: start a new one.
			w.replan(p, g)
			if _, ok := pushes[g.dataset]; !ok {
				order = append(order, g.dataset)
			}
			pushes[g.dataset] = append(pushes[g.dataset], g)
		case err != nil:
			if firstErr == nil {
				firstErr = err
			}
		default:
			written[g] = true
		}
	}
	if firstErr != nil {
		return firstErr
	}
	for _, ds := range order {
		if err := w.pushGroups(ctx, p, ds, pushes[ds], now); err != nil {
			return err
		}
		for _, g := range pushes[ds] {
			written[g] = true
		}
	}
	return nil
}

// spanIDs returns the span ids (and log record keys) of groups, without
// their owner prefix, which their write records (store.OTLPSpans).
func spanIDs(p principal, groups ...*group) []string {
	var ids []string
	for _, g := range groups {
		for _, k := range g.seenIDs {
			ids = append(ids, strings.TrimPrefix(k, p.ownerID+"\x00"))
		}
	}
	return ids
}

// replan plans a group again on a fresh state (its trace is gone).
func (w *writer) replan(p principal, g *group) {
	g.st = &convState{toolOut: map[string]bool{}}
	w.mu.Lock()
	w.convs.put(w.convKey(p.ownerID, g.dataset, g.conv), g.st)
	w.mu.Unlock()
	g.events, g.anns, g.seenIDs = nil, nil, nil
	w.plan(p, g)
}

func eventsJSON(evs []*trace.Object) []byte {
	vals := make([]trace.Value, len(evs))
	for i, e := range evs {
		vals[i] = e
	}
	return trace.Marshal(vals)
}

func (w *writer) pushGroups(ctx context.Context, p principal, dataset string, groups []*group, now time.Time) error {
	var warn ingest.Warnings
	tools := map[string]*store.ToolUse{}
	var blobs []*store.Blob
	traces := make([]store.NewTrace, len(groups))
	for i, g := range groups {
		id := store.NewID()
		pe, err := ingest.Prepare(eventsJSON(g.events), ingest.TraceOptions{TraceIdx: i, TraceID: id}, &warn)
		if err != nil {
			return fmt.Errorf("otlp: conversation %s: %w", g.conv, err)
		}
		ingest.MergeTools(tools, pe.Tools)
		blobs = append(blobs, pe.Images.Blobs...)
		md := g.st.metadata()
		traces[i] = store.NewTrace{ID: id, Name: g.st.name, Metadata: md, SessionKey: sessionKey(g.conv), KeyID: p.keyID,
			TimeCreated: now, Messages: pe.Messages, Annotations: g.anns}
		g.st.lastMeta = string(md)
	}
	created, _ := json.Marshal(map[string]string{"created_on": now.UTC().Format("2006-01-02 15:04:05")})
	res, err := w.ing.Push(ctx, ingest.PushRequest{PushRequest: store.PushRequest{
		OwnerID: p.ownerID, DatasetName: dataset, CreateIfMissing: true, NewDatasetMetadata: created,
		Traces: traces, Tools: ingest.ToolList(tools), OTLPSpanIDs: spanIDs(p, groups...),
	}, Blobs: blobs})
	if err != nil {
		return fmt.Errorf("otlp: push to dataset %s: %w", dataset, err)
	}
	for i, g := range groups {
		g.st.traceID, g.st.count = res.Traces[i].ID, len(g.events)
		if res.Dataset != nil {
			g.st.datasetID = res.Dataset.ID
		}
	}
	return nil
}

// appendGroups appends the groups' new events and annotations to their
// traces and updates their names and metadata, in one AppendMany; it
// returns each group's outcome (ErrNotFound, ErrFinished or nil).
func (w *writer) appendGroups(ctx context.Context, p principal, groups []*group, now time.Time) ([]error, error) {
	errs := make([]error, len(groups))
	var reqs []ingest.AppendRequest
	var idx []int
	metas := make([]string, len(groups))
	for i, g := range groups {
		st := g.st
		req := ingest.AppendRequest{Trace: &store.Trace{ID: st.traceID, OwnerID: p.ownerID, DatasetID: st.datasetID},
			Annotations: g.anns, Time: now, OTLPSpanIDs: spanIDs(p, g)}
		if len(g.events) > 0 {
			var warn ingest.Warnings
			pe, err := ingest.Prepare(eventsJSON(g.events), ingest.TraceOptions{FirstIndex: st.count, StrictTimestamps: true, DefaultTime: now, TraceID: st.traceID, Path: "otlp"}, &warn)
			if err != nil {
				return nil, fmt.Errorf("otlp: conversation %s: %w", g.conv, err)
			}
			req.Events = pe
		}
		if md := st.metadata(); string(md) != st.lastMeta {
			req.MetadataMerge, metas[i] = md, string(md)
			if st.name != "" {
				req.Name = &st.name
			}
		}
		if (req.Events == nil || len(req.Events.Messages) == 0) && len(req.Annotations) == 0 && req.MetadataMerge == nil && len(req.OTLPSpanIDs) == 0 {
			continue
		}
		reqs = append(reqs, req)
		idx = append(idx, i)
	}
	if len(reqs) == 0 {
		return errs, nil
	}
	outs, err := w.ing.AppendMany(ctx, reqs)
	if err != nil {
		return nil, fmt.Errorf("otlp: append to %d traces: %w", len(reqs), err)
	}
	for k, o := range outs {
		i := idx[k]
		if o.Err != nil {
			errs[i] = o.Err
			continue
		}
		st := groups[i].st
		st.count += len(o.Messages)
		if metas[i] != "" {
			st.lastMeta = metas[i]
		}
	}
	return errs, nil
}

// DatasetName resolves a request's dataset (spec §11): the Vigil-Dataset
// header, else the resource's vigil.dataset or service.name, else def;
// characters outside [A-Za-z0-9_-] become "-", and it is cut to 100
// characters.
func DatasetName(header, resource, def string) string {
	name := cmpOr(strings.TrimSpace(header), resource, def, "otel")
	b := []byte(name)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			b[i] = '-'
		}
	}
	if len(b) > 100 {
		b = b[:100]
	}
	return string(b)
}

func cmpOr(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}

// loadSeen reads from the store which of ids (span ids and log record
// keys of ownerID) not known to be stored in memory were stored, and
// remembers them.
func (w *writer) loadSeen(ctx context.Context, ownerID string, ids []string) error {
	var ask []string
	w.mu.Lock()
	for _, id := range ids {
		if _, ok := w.seen.get(ownerID + "\x00" + id); !ok {
			ask = append(ask, id)
		}
	}
	w.mu.Unlock()
	if len(ask) == 0 {
		return nil
	}
	seen, err := w.st.SeenOTLPSpans(ctx, ownerID, ask)
	if err != nil {
		return fmt.Errorf("otlp: %w", err)
	}
	w.mu.Lock()
	for id := range seen {
		w.seen.put(ownerID+"\x00"+id, struct{}{})
	}
	w.mu.Unlock()
	return nil
}

// isSeen reports whether a span id or record key (with its owner) was
// written.
func (w *writer) isSeen(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.seen.get(key)
	return ok
}
