package gateway

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// Recorder stores the calls the gateway records (spec §8.2). Record must
// not block on the store: recording is never on the response path. It
// reports false when the record was dropped (a full queue). Records of
// one trace are given in order and must be written in that order.
type Recorder interface {
	Record(rec *Record) bool
}

// Record is one call to write: new events of a trace, the trace metadata
// and the violations found.
type Record struct {
	Identity *Identity
	Dataset  string
	// TraceID is the trace, allocated at request start; New says the
	// record creates it (push) rather than appending to it.
	TraceID    string
	New        bool
	SessionKey string
	// Events are the new events, in the trace format.
	Events []map[string]any
	// FirstIndex is the index in the trace of Events[0].
	FirstIndex int
	// Metadata is the whole trace metadata when New, else an RFC 7386
	// merge patch of it.
	Metadata    map[string]any
	Annotations []Annotation
	// Findings are the same violations as Annotations, as ledger
	// findings: a recorder that can write findings stores these and not
	// the annotations.
	Findings []Finding
	CallID   string
	// FinishRun: this record carries no call; it finishes the trace's
	// run (its stitched session ended, spec §8.3), after the trace's
	// earlier records were written.
	FinishRun bool `json:",omitempty"`
	// Finish, when set, runs the call's logging rules (which may add
	// Annotations); a recorder calls it before writing, off the
	// response path.
	Finish func(*Record) `json:"-"`
}

// Annotation is a violation to store with a record: the event index in
// the trace, the rest of the address after "messages.<index>" ("" for
// the event itself), and the annotation's content and metadata.
type Annotation struct {
	Index   int
	Address string
	Content string
	Extra   map[string]any
}

// recordInput is the outcome of a call, for recording.
type recordInput struct {
	out            *callOutput
	blockedAt      string // "request" or "response" when blocked
	verdict        *verdict
	delivered      bool // the blocked content was delivered (passthrough)
	clientGone     bool
	upstreamStatus int
	errBody        []byte
}

// record builds the call's record, updates the session index and hands
// the record to the recorder; without a recording dataset it only runs
// the logging rules.
func (c *call) record(ri recordInput) {
	g := c.g
	if c.plan == nil {
		if len(c.rules.log) > 0 {
			evs := c.in.events
			if ri.out != nil && len(ri.out.choices) > 0 {
				evs = append(append([]event(nil), evs...), ri.out.choices[0])
			}
			go g.evaluate(context.Background(), c.rules.log, nil, evs, c.rules.params, false)
		}
		return
	}
	p := c.plan
	c.commitSession(ri)
	// Records of a session reach the recorder in the order their calls
	// committed.
	if p.wait != nil {
		<-p.wait
	}
	defer close(p.done)
	now := g.now()
	ts := now.UTC().Format("2006-01-02T15:04:05.000000Z")
	var evs []map[string]any
	for _, e := range c.in.events[p.k:] {
		ev := copyEvent(e)
		ev["timestamp"] = ts
		ev["vigil_call"] = c.id
		if ri.blockedAt == "request" {
			ev["vigil_blocked"] = true
		}
		evs = append(evs, ev)
	}
	var resp event
	if ri.out != nil && len(ri.out.choices) > 0 && ri.upstreamStatus == 0 {
		resp = copyEvent(ri.out.choices[0])
		resp["timestamp"] = ts
		resp["vigil_call"] = c.id
		if ri.blockedAt == "response" {
			resp["vigil_blocked"] = true
		}
		evs = append(evs, resp)
	}
	// The call record (spec §8.1).
	cr := map[string]any{
		"call_id": c.id, "time": ts, "provider": c.u.Type, "upstream": c.u.Name, "model": c.in.model, "stream": c.stream,
		"message_range":    []int{p.base, p.base + len(evs) - 1},
		"latency_ms":       roundMs(now.Sub(c.t0)),
		"guardrail_result": c.finalResult(ri),
		"ruleset_version":  rsVersion(c.rules),
		"request":          c.in.request,
		"guardrails":       c.statuses,
	}
	if c.in.tools != nil {
		cr["tools_hash"] = hashJSON(c.in.tools)
	}
	if !c.upStart.IsZero() {
		end := c.upEnd
		if end.IsZero() {
			end = now
		}
		up := end.Sub(c.upStart)
		cr["upstream_ms"] = roundMs(up)
		cr["overhead_ms"] = roundMs(max(0, now.Sub(c.t0)-up))
		if !c.upFirst.IsZero() {
			cr["ttft_ms"] = roundMs(c.upFirst.Sub(c.t0))
		}
	}
	if c.stream {
		cr["held_ms"] = roundMs(c.heldMax)
	}
	if ri.upstreamStatus != 0 {
		cr["upstream_status"] = ri.upstreamStatus
		cr["error_body"] = string(ri.errBody)
	} else {
		cr["upstream_status"] = 200
	}
	if ri.clientGone {
		cr["client_disconnected"] = true
	}
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if ri.out != nil {
		cr["finish_reason"] = ri.out.finish
		if ri.out.usage != nil {
			cr["usage"] = ri.out.usage
		}
		if len(ri.out.choices) > 1 {
			cr["other_choices"] = ri.out.choices[1:]
		}
		if ri.out.model != "" {
			cr["model"] = ri.out.model
		}
		if ri.out.failed != "" {
			cr["upstream_error"] = ri.out.failed
		}
		for k, v := range ri.out.extra {
			cr[k] = v
		}
		if ri.out.respID != "" {
			cr["response_id"] = ri.out.respID
		}
	}
	var in, out int64
	if ri.out != nil {
		in, out = ri.out.input, ri.out.output
	}
	var blocked map[string]any
	if ri.blockedAt != "" {
		blocked = map[string]any{"call_id": c.id, "location": ri.blockedAt, "errors": errorsOf(ri.verdict)}
	}
	s.apply(cr, blocked, in, out, p.forkedFrom, "")
	g.sessions.j.add(&journalEntry{Kind: "c", Scope: s.scope, Trace: s.traceID, Key: s.key, SessionID: s.sessionID, Source: s.keySource,
		At: now.UnixNano(), Call: cr, Blocked: blocked, UsageIn: in, UsageOut: out, Forked: p.forkedFrom, Continues: s.continues})
	vig := make(map[string]any, len(s.vigil))
	for k, v := range s.vigil {
		vig[k] = v
	}
	md := map[string]any{"vigil": vig, "model": c.in.model,
		"usage": map[string]any{"input_tokens": s.usageIn, "output_tokens": s.usageOut}}
	if ri.out != nil && ri.out.model != "" {
		md["model"] = ri.out.model
	}
	if c.in.tools != nil {
		md["tools"] = c.in.tools
	}
	if p.isNew {
		for k, v := range c.in.request {
			if _, set := md[k]; !set && k != "stream" && k != "tools" {
				md[k] = v
			}
		}
		for k, v := range c.meta {
			md[k] = v
		}
		md["via_gateway"] = true
		md["provider"] = c.u.Type
		if p.sessionID != "" {
			md["session_id"] = p.sessionID
		}
		md["vigil"] = vig
	}
	rec := &Record{Identity: c.ident, Dataset: c.dataset, TraceID: p.traceID, New: p.isNew, SessionKey: s.key,
		Events: evs, FirstIndex: p.base, Metadata: md, CallID: c.id}
	// Violations of the blocking phases.
	loc := func(v *verdict) string {
		if ri.blockedAt != "" {
			return ri.blockedAt
		}
		return "response"
	}
	if ri.verdict != nil {
		rec.Annotations = append(rec.Annotations, c.annotations(ri.verdict, loc(ri.verdict), ri.blockedAt != "", ri.delivered, len(evs))...)
		rec.Findings = append(rec.Findings, c.findings(ri.verdict, loc(ri.verdict), ri.blockedAt != "", ri.delivered)...)
	}
	if len(c.rules.log) > 0 {
		whole := append([]event(nil), c.in.events...)
		if resp != nil {
			whole = append(whole, ri.out.choices[0])
		}
		rules, params := c.rules.log, c.rules.params
		rec.Finish = func(r *Record) {
			v := g.evaluate(context.Background(), rules, nil, whole, params, false)
			r.Annotations = append(r.Annotations, c.annotations(v, "response", false, false, len(evs))...)
			r.Findings = append(r.Findings, c.findings(v, "response", false, false)...)
		}
	}
	if !g.opts.Recorder.Record(rec) {
		g.log.Warn("gateway: record dropped (queue full)", "call_id", c.id, "trace_id", p.traceID)
	}
}

// commitSession updates the session index with the call's outcome: the
// events it adds and, for an accepted call, its boundary. It runs before
// the response's last bytes go out, so that the client's next call finds
// the session; later calls are no-ops.
func (c *call) commitSession(ri recordInput) {
	p := c.plan
	if p == nil || c.committed {
		return
	}
	c.committed = true
	added := c.in.events[p.k:len(c.in.events):len(c.in.events)]
	hasResp := ri.out != nil && len(ri.out.choices) > 0 && ri.upstreamStatus == 0
	if hasResp {
		added = append(added, ri.out.choices[0])
	}
	var boundary []event
	if ri.blockedAt == "" && hasResp && !ri.clientGone {
		boundary = append(append([]event(nil), c.in.events...), ri.out.choices[0])
	}
	var respID string
	var items map[string]event
	if ri.out != nil {
		respID, items = ri.out.respID, ri.out.items
	}
	c.g.sessions.committed(c, p, added, boundary, respID, items)
}

// finalResult is the call's Vigil-Guardrail-Result.
func (c *call) finalResult(ri recordInput) string {
	if ri.blockedAt != "" {
		return "block"
	}
	return c.resultOr()
}

func errorsOf(v *verdict) []map[string]any {
	if v == nil {
		return nil
	}
	return v.errors
}

func roundMs(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000
}

func copyEvent(e event) event {
	out := make(event, len(e)+3)
	for k, v := range e {
		out[k] = v
	}
	return out
}

// annotations map a verdict's errors to annotations on the recorded
// trace: range addresses name evaluated events (request events, then the
// response), mapped to trace positions.
func (c *call) annotations(v *verdict, location string, blocked, delivered bool, nNew int) []Annotation {
	if v == nil {
		return nil
	}
	index := c.storedIndex()
	if v.index != nil {
		index = v.index
	}
	var out []Annotation
	for i, e := range v.errors {
		content := ""
		if args, _ := e["args"].([]any); len(args) > 0 {
			content, _ = args[0].(string)
			if content == "" {
				content = toString(args[0])
			}
		}
		key, _ := e["key"].(string)
		if key != "" {
			key = storedKey(key, index)
		}
		extra := map[string]any{"source": "guardrails-error", "guardrail": e["guardrail"], "location": location,
			"blocked": blocked, "call_id": c.id, "key": key}
		if gr, _ := e["guardrail"].(map[string]any); gr != nil {
			extra["action"] = gr["action"]
		}
		if i < len(v.rules) {
			// What a server needs to file the violation as a finding
			// (the standalone gateway's annotations become findings).
			extra["monitor_id"] = monitorID(v.rules[i])
			if sev := v.rules[i].Severity; sev != "" {
				extra["severity"] = sev
			}
		}
		if delivered {
			extra["delivered"] = true
		}
		ranges, _ := e["ranges"].([]string)
		ranges = mostSpecific(ranges)
		if len(ranges) == 0 {
			out = append(out, Annotation{Index: -1, Content: content, Extra: extra})
			continue
		}
		for _, r := range ranges {
			i, rest, ok := splitRange(r)
			if !ok {
				out = append(out, Annotation{Index: -1, Address: r, Content: content, Extra: extra})
				continue
			}
			out = append(out, Annotation{Index: index(i), Address: rest, Content: content, Extra: extra})
		}
	}
	return out
}

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// splitRange splits "messages.3.content:0-5" into 3 and ".content:0-5".
func splitRange(r string) (int, string, bool) {
	rest, ok := strings.CutPrefix(r, "messages.")
	if !ok {
		return 0, "", false
	}
	num, tail, _ := strings.Cut(rest, ".")
	num, span, hasSpan := strings.Cut(num, ":")
	i, err := strconv.Atoi(num)
	if err != nil {
		return 0, "", false
	}
	switch {
	case hasSpan:
		return i, ":" + span, true
	case tail != "":
		return i, "." + tail, true
	}
	return i, "", true
}

// mostSpecific drops a range that another range extends.
func mostSpecific(rs []string) []string {
	var out []string
	for i, r := range rs {
		extended := false
		for j, o := range rs {
			if i != j && len(o) > len(r) && strings.HasPrefix(o, r) && (o[len(r)] == '.' || o[len(r)] == ':') {
				extended = true
				break
			}
		}
		if !extended {
			out = append(out, r)
		}
	}
	return out
}
