package gateway

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vigilhq/vigil/ledger"
	"github.com/vigilhq/vigil/store"
)

// This file is session stitching (spec §8.3): calls whose history grows
// are recorded into one trace, matched by the canonical form of their
// events. The index lives in memory (one process).

// session is one stitched trace.
type session struct {
	mu        sync.Mutex // serialises calls of the session (ordering of appends)
	traceID   string
	key       string // "h:<header>" or "p:<ULID>"
	sessionID string
	keySource string // header, prefix or none
	count     int    // events recorded so far (accepted or not)
	tip       string // latest boundary hash
	last      time.Time
	tail      chan struct{} // done of the latest committed call
	// vigil is the trace metadata's vigil object, kept here so that each
	// call's update carries the whole list of calls.
	vigil     map[string]any
	usageIn   int64
	usageOut  int64
	provider  map[string]bool
	continues string
	scope     string // owner and dataset (scopeOf)
	// ident and dataset are the recording identity, to finish the run
	// when the session ends (nil for a session restored from disk in a
	// standalone gateway, which holds no key).
	ident   *Identity
	dataset string
	ended   bool // its run was handed to the recorder to finish
	// events are the events this gateway recorded into the trace, in
	// order (kept only with session_guardrail_scope: session).
	events []event
}

// sessionPlan is where one call's events go.
type sessionPlan struct {
	s         *session
	traceID   string
	sessionID string
	isNew     bool
	k         int // request events already in the trace
	// forkedFrom is set when the call forks another session.
	forkedFrom map[string]any
	base       int // index in the trace of the call's first new event
	// wait is closed when the session's previous record was handed to
	// the recorder; done is closed when this one was.
	wait, done chan struct{}
	// stored are the session's recorded events when the call was
	// planned (session_guardrail_scope: session, header sessions only).
	stored []event
}

// sessions is the stitching index of one gateway.
type sessions struct {
	mu   sync.Mutex
	idle time.Duration
	now  func() time.Time
	// bounds maps scope + boundary hash to the sessions that have it.
	bounds map[string][]*session
	byKey  map[string]*session // scope + "h:" + header
	// ended maps the byKey key of an expired header session to its
	// trace, which a later call with the same header continues (spec
	// §8.3: vigil.continues).
	ended map[string]string
	// responses maps Responses API response ids to their session and
	// recorded output; items maps output item ids to events.
	responses map[string]*session
	items     map[string]event
	// swept is when expire last ran: it walks every session, so it runs
	// at most once a second, not on every call.
	swept time.Time
	// max caps the open sessions (0: no cap): past it, expire ends the
	// least recently active ones, as if idle, down to 9/10 of max.
	max int
	// j persists the index (nil: memory only).
	j *journal
	// finish hands the run of an ended session to the recorder (nil:
	// runs are not finished).
	finish func(s *session)
}

func newSessions(idle time.Duration, now func() time.Time) *sessions {
	return &sessions{idle: idle, now: now, bounds: map[string][]*session{}, byKey: map[string]*session{}, ended: map[string]string{}, responses: map[string]*session{}, items: map[string]event{}}
}

// canonical is the canonical form of an event (spec §8.3): [role, text,
// images, tool_calls, tool_call_id].
func canonical(e event) []any {
	role := str(e["role"])
	text := ""
	var images []any
	switch c := e["content"].(type) {
	case string:
		text = c
	case []any:
		var parts []string
		for _, p := range c {
			o := obj(p)
			if o == nil {
				continue
			}
			if t, ok := o["text"].(string); ok {
				parts = append(parts, t)
			}
			if iu := obj(o["image_url"]); iu != nil {
				images = append(images, imageKey(str(iu["url"])))
			} else if u, ok := o["image_url"].(string); ok {
				images = append(images, imageKey(u))
			}
		}
		text = strings.Join(parts, "\n")
	}
	text = strings.ReplaceAll(text, "\r\n", "\n")
	if images == nil {
		images = []any{}
	}
	calls := []any{}
	for _, tc := range list(e["tool_calls"]) {
		o := obj(tc)
		if o == nil {
			continue
		}
		fn := obj(o["function"])
		var args any = fn["arguments"]
		if s, ok := args.(string); ok {
			if v, err := ledger.Parse([]byte(s)); err == nil {
				args = v
			}
		}
		ab, _ := ledger.Marshal(args)
		calls = append(calls, []any{str(o["id"]), str(fn["name"]), string(ab)})
	}
	return []any{role, text, images, calls, str(e["tool_call_id"])}
}

func imageKey(u string) string {
	if rest, ok := strings.CutPrefix(u, "data:"); ok {
		if _, data, ok := strings.Cut(rest, ","); ok {
			if b, err := base64.StdEncoding.DecodeString(data); err == nil {
				h := sha256.Sum256(b)
				return hex.EncodeToString(h[:])
			}
		}
	}
	return u
}

// chain returns h_1 … h_n of evs (h_0 is the zero hash).
func chain(evs []event) []string {
	out := make([]string, len(evs)+1)
	h := make([]byte, 32)
	out[0] = hex.EncodeToString(h)
	for i, e := range evs {
		cj, _ := ledger.Marshal(canonical(e))
		sum := sha256.New()
		sum.Write(h)
		sum.Write(cj)
		h = sum.Sum(nil)
		out[i+1] = hex.EncodeToString(h)
	}
	return out
}

func scopeOf(c *call) string {
	return c.ident.UserID + "\x00" + c.dataset + "\x00"
}

// plan decides where the call's events go (spec §8.3) and locks the
// session until the call is recorded (plan.done).
func (ss *sessions) plan(c *call, header string) *sessionPlan {
	mode := c.g.opts.SessionStitching
	scope := scopeOf(c)
	now := ss.now()
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.expire(now)
	evs := c.in.events
	var hs []string
	if mode != "off" {
		hs = chain(evs)
	}
	// previous_response_id continues the trace that recorded it.
	if c.in.previousResponse != "" {
		if s := ss.responses[c.in.previousResponse]; s != nil {
			s.last = now
			// Re-sent instructions are not new events.
			k := 0
			if c.in.instructions {
				k = 1
			}
			return &sessionPlan{s: s, traceID: s.traceID, sessionID: s.sessionID, k: k, base: s.count}
		}
	}
	newSession := func(key, sid, source string) *sessionPlan {
		s := &session{traceID: store.NewID(), key: key, sessionID: sid, keySource: source, last: now, vigil: map[string]any{}, provider: map[string]bool{}, scope: scope, ident: c.ident, dataset: c.dataset}
		return &sessionPlan{s: s, traceID: s.traceID, sessionID: sid, isNew: true}
	}
	switch {
	case mode == "off":
		return newSession("", "", "none")
	case header != "" && (mode == "auto" || mode == "header" || mode == ""):
		s := ss.byKey[scope+"h:"+header]
		if s == nil {
			p := newSession("h:"+header, header, "header")
			ss.byKey[scope+"h:"+header] = p.s
			if prev := ss.ended[scope+"h:"+header]; prev != "" {
				delete(ss.ended, scope+"h:"+header)
				p.s.continues = prev
				p.s.vigil["continues"] = prev
			}
			return p
		}
		k := 0
		for i := len(hs) - 1; i >= 1; i-- {
			if ss.hasBoundary(scope, hs[i], s) {
				k = i
				break
			}
		}
		s.last = now
		p := &sessionPlan{s: s, traceID: s.traceID, sessionID: s.sessionID, k: k, base: s.count}
		if c.g.opts.SessionScope == "session" {
			p.stored = s.events[:len(s.events):len(s.events)]
		}
		return p
	case mode == "header":
		return newSession("", "", "none")
	}
	// Prefix sessions.
	for k := len(hs) - 1; k >= 1; k-- {
		cands := ss.bounds[scope+hs[k]]
		if len(cands) == 0 {
			continue
		}
		var best *session
		for _, s := range cands {
			if best == nil || (s.tip == hs[k]) && (best.tip != hs[k] || s.last.After(best.last)) || (s.tip != hs[k] && best.tip != hs[k] && s.last.After(best.last)) {
				best = s
			}
		}
		if best.tip == hs[k] {
			best.last = now
			best.tip = "" // a concurrent call with the same prefix forks
			return &sessionPlan{s: best, traceID: best.traceID, sessionID: best.sessionID, k: k, base: best.count}
		}
		p := newSession("p:"+store.NewULID(), "", "prefix")
		p.s.sessionID = "vgl-sess-" + strings.TrimPrefix(p.s.key, "p:")
		p.sessionID = p.s.sessionID
		p.forkedFrom = map[string]any{"trace_id": best.traceID, "message_index": k - 1}
		return p
	}
	p := newSession("p:"+store.NewULID(), "", "prefix")
	p.s.sessionID = "vgl-sess-" + strings.TrimPrefix(p.s.key, "p:")
	p.sessionID = p.s.sessionID
	return p
}

func (ss *sessions) hasBoundary(scope, h string, s *session) bool {
	for _, x := range ss.bounds[scope+h] {
		if x == s {
			return true
		}
	}
	return false
}

// committed records the outcome of a planned call: the events added and,
// for an accepted call, the boundary over request + response.
func (ss *sessions) committed(c *call, p *sessionPlan, added []event, boundary []event, respID string, items map[string]event) {
	scope := scopeOf(c)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := p.s
	s.count += len(added)
	if c.g.opts.SessionScope == "session" && s.keySource == "header" {
		s.events = append(s.events, added...)
	}
	s.last = ss.now()
	p.wait, p.done = s.tail, make(chan struct{})
	s.tail = p.done
	h := ""
	if boundary != nil && c.g.opts.SessionStitching != "off" {
		hs := chain(boundary)
		h = hs[len(hs)-1]
		ss.bounds[scope+h] = append(ss.bounds[scope+h], s)
		s.tip = h
	}
	ss.j.add(&journalEntry{Kind: "b", Scope: scope, Trace: s.traceID, Key: s.key, SessionID: s.sessionID, Source: s.keySource,
		At: s.last.UnixNano(), Count: s.count, Hash: h, Response: respID})
	if respID != "" {
		ss.responses[respID] = s
	}
	for id, e := range items {
		ss.items[id] = e
	}
}

// item returns a recorded Responses output item.
func (ss *sessions) item(id string) event {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.items[id]
}

// expire drops sessions idle longer than the idle timeout.
func (ss *sessions) expire(now time.Time) {
	if now.Sub(ss.swept) < time.Second {
		return
	}
	ss.swept = now
	idle := func(s *session) bool { return now.Sub(s.last) >= ss.idle }
	if cut, ok := ss.evictBefore(); ok {
		idle = func(s *session) bool { return now.Sub(s.last) >= ss.idle || !s.last.After(cut) }
	}
	end := func(s *session) {
		if !s.ended && ss.finish != nil {
			s.ended = true
			ss.finish(s)
		}
	}
	for k, list := range ss.bounds {
		keep := list[:0]
		for _, s := range list {
			if !idle(s) {
				keep = append(keep, s)
			} else {
				end(s)
			}
		}
		if len(keep) == 0 {
			delete(ss.bounds, k)
		} else {
			ss.bounds[k] = keep
		}
	}
	for k, s := range ss.byKey {
		if idle(s) {
			end(s)
			delete(ss.byKey, k)
			if len(ss.ended) > 100000 {
				clear(ss.ended) // a later call starts a trace that names no predecessor
			}
			ss.ended[k] = s.traceID
		}
	}
	for k, s := range ss.responses {
		if idle(s) {
			end(s)
			delete(ss.responses, k)
		}
	}
	if len(ss.items) > 100000 {
		clear(ss.items) // item_reference falls back to a placeholder event
	}
}

// evictBefore reports, when the index holds more than max sessions, the
// activity time at or before which sessions are ended to bring it back
// to 9/10 of max: the least recently active go first. Each session keeps
// its trace's call records (a few KB) for the idle timeout, so without a
// cap the index grows with the call rate (30 min of new sessions).
func (ss *sessions) evictBefore() (time.Time, bool) {
	if ss.max <= 0 {
		return time.Time{}, false
	}
	// A cheap upper bound first: a session is listed once per boundary.
	n := len(ss.byKey) + len(ss.responses)
	for _, list := range ss.bounds {
		n += len(list)
	}
	if n <= ss.max {
		return time.Time{}, false
	}
	all := make(map[*session]struct{}, n)
	for _, list := range ss.bounds {
		for _, s := range list {
			all[s] = struct{}{}
		}
	}
	for _, s := range ss.byKey {
		all[s] = struct{}{}
	}
	for _, s := range ss.responses {
		all[s] = struct{}{}
	}
	if len(all) <= ss.max {
		return time.Time{}, false
	}
	lasts := make([]time.Time, 0, len(all))
	for s := range all {
		lasts = append(lasts, s.last)
	}
	slices.SortFunc(lasts, func(a, b time.Time) int { return a.Compare(b) })
	return lasts[len(lasts)-ss.max*9/10-1], true
}
