package otlp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"time"

	"github.com/vigilhq/vigil/trace"
	"github.com/vigilhq/vigil/trace/convert"
)

// Log records (spec §11 item 9): a GenAI message record is read like the
// span event of the same name and attached to its span. Records that
// arrive before their span wait for it (pending); records whose span was
// already written, or that waited LogWait in vain, are mapped on their
// own as a chat span of their trace. Each record is remembered by a key
// (its span, name, time and body) so that a retried export adds nothing.

// pendingLogs are the records of one span waiting for it.
type pendingLogs struct {
	p        principal
	header   string
	recs     []*logRecord
	deadline time.Time
}

// recordKey identifies a record for retry de-duplication.
func recordKey(r *logRecord) string {
	h := sha256.New()
	h.Write([]byte(r.traceID + "\x00" + r.spanID + "\x00" + r.Name + "\x00" + r.Time.Format(time.RFC3339Nano) + "\x00"))
	h.Write(trace.Marshal(r.Body))
	h.Write(trace.Marshal(attrsObject(r.Attrs)))
	return "log:" + hex.EncodeToString(h.Sum(nil)[:16])
}

func attrsObject(m map[string]trace.Value) *trace.Object {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	o := &trace.Object{}
	for _, k := range keys {
		o.Members = append(o.Members, trace.Member{Key: k, Value: m[k]})
	}
	return o
}

// attachLogs gives spans the records waiting for them.
func (h *Handler) attachLogs(p principal, spans []*span) {
	h.lmu.Lock()
	defer h.lmu.Unlock()
	if len(h.pending) == 0 {
		return
	}
	for _, sp := range spans {
		k := p.ownerID + "\x00" + sp.SpanID
		pl := h.pending[k]
		if pl == nil {
			continue
		}
		delete(h.pending, k)
		attach(sp, pl.recs)
	}
}

func attach(sp *span, recs []*logRecord) {
	slices.SortStableFunc(recs, func(a, b *logRecord) int { return a.Time.Compare(b.Time) })
	for _, r := range recs {
		sp.Events = append(sp.Events, r.OTelEvent)
		sp.logKeys = append(sp.logKeys, recordKey(r))
	}
}

// takeLogs maps the records whose span was written, or that have none,
// and keeps the others waiting.
func (h *Handler) takeLogs(ctx context.Context, p principal, header string, recs []*logRecord) (*result, error) {
	var ids []string
	for _, r := range recs {
		ids = append(ids, recordKey(r), r.spanID)
	}
	if err := h.w.loadSeen(ctx, p.ownerID, ids); err != nil {
		return nil, err
	}
	bySpan := map[string][]*logRecord{}
	var order []string
	for _, r := range recs {
		if h.w.isSeen(p.ownerID + "\x00" + recordKey(r)) {
			continue // a retry
		}
		if _, ok := bySpan[r.spanID]; !ok {
			order = append(order, r.spanID)
		}
		bySpan[r.spanID] = append(bySpan[r.spanID], r)
	}
	var now []*span
	h.lmu.Lock()
	for _, sid := range order {
		rs := bySpan[sid]
		if sid != "" && !h.w.isSeen(p.ownerID+"\x00"+sid) {
			k := p.ownerID + "\x00" + sid
			pl := h.pending[k]
			if pl == nil {
				pl = &pendingLogs{p: p, header: header, deadline: time.Now().Add(h.cfg.LogWait)}
				h.pending[k] = pl
			}
			pl.recs = append(pl.recs, rs...)
			continue
		}
		now = append(now, logSpan(rs))
	}
	h.lmu.Unlock()
	if len(now) == 0 {
		return &result{}, nil
	}
	return h.w.write(ctx, p, header, now)
}

// logSpan is a chat span made of records alone (their span was written
// already, or never came).
func logSpan(recs []*logRecord) *span {
	r0 := recs[0]
	sp := &span{dataset: r0.dataset, service: r0.service, OTelSpan: convert.OTelSpan{
		TraceID: r0.traceID, Name: "gen_ai log records", Start: r0.Time, End: r0.Time, Resource: r0.resource,
		Attrs: map[string]trace.Value{},
	}}
	attach(sp, recs)
	sp.SpanID = sp.logKeys[0] // remembered like a span id
	sp.logKeys = sp.logKeys[1:]
	for _, r := range recs {
		if r.Time.Before(sp.Start) {
			sp.Start = r.Time
		}
		if r.Time.After(sp.End) {
			sp.End = r.Time
		}
	}
	return sp
}

// sweep maps the records that waited LogWait for their span in vain,
// and hourly lets the store forget span ids older than SpanRetention.
func (h *Handler) sweep() {
	defer close(h.done)
	tick := time.NewTicker(max(h.cfg.LogWait/10, 50*time.Millisecond))
	defer tick.Stop()
	var lastPurge time.Time
	for {
		if time.Since(lastPurge) > time.Hour {
			lastPurge = time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if _, err := h.w.st.PurgeOTLPSpans(ctx, lastPurge.Add(-h.cfg.SpanRetention)); err != nil {
				h.log.Warn("otlp: purge remembered span ids", "err", err)
			}
			cancel()
		}
		final := false
		select {
		case <-h.stop:
			final = true
		case <-tick.C:
		}
		now := time.Now()
		var due []*pendingLogs
		h.lmu.Lock()
		for k, pl := range h.pending {
			if final || now.After(pl.deadline) {
				due = append(due, pl)
				delete(h.pending, k)
			}
		}
		h.lmu.Unlock()
		for _, pl := range due {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if _, err := h.w.write(ctx, pl.p, pl.header, []*span{logSpan(pl.recs)}); err != nil {
				h.log.Error("otlp: write log records without their span", "err", err)
			}
			cancel()
		}
		if final {
			return
		}
	}
}
