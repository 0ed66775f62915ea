package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vigilhq/vigil/internal/upconn"
	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/trace"
)

// call is one proxied LLM call.
type call struct {
	g       *Gateway
	id      string // the call id (a ULID), also Vigil-Request-Id
	t0      time.Time
	u       *Upstream
	kind    string
	d       dialect
	p       provider
	in      *callInput
	rules   *rules
	ident   *Identity
	dataset string // recording dataset ("" = not recorded)
	plan    *sessionPlan
	meta    map[string]any // Vigil-Metadata
	stream  bool

	// timings
	upStart, upFirst, upEnd time.Time
	guardOnPath             time.Duration
	result                  string
	heldMax                 time.Duration
	statuses                map[string]map[string]string
	committed               bool // the session index knows the outcome
	// stripUsage: force_stream_usage added include_usage, so the
	// usage-only chunk is not the client's.
	stripUsage bool

	reqOnce  sync.Once
	reqTrace *trace.Trace
	reqErr   error
}

// hopHeaders are not forwarded either way (spec §3.4).
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func (g *Gateway) serveLLM(w http.ResponseWriter, r *http.Request, u *Upstream, pathDataset, sub string) {
	c := &call{g: g, id: store.NewULID(), t0: g.now(), u: u, statuses: map[string]map[string]string{}}
	c.d = dialect{typ: u.Type, native: g.opts.OpenAIErrorNative}
	if r.Method == http.MethodOptions {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	keys, err := ExtractKeys(r, u.Type)
	if err != nil {
		var ke *KeyError
		errors.As(err, &ke)
		writeDetail(w, ke.Status, ke.Detail, keyErrorCode(ke.Status))
		return
	}
	q := url.Values{}
	for k, v := range r.URL.Query() {
		q[k] = append([]string(nil), v...)
	}
	if keys.Header == "query:key" && (keys.Smuggled || u.Auth == AuthInject) {
		q.Set("key", keys.Provider)
		if u.Auth == AuthInject {
			q.Del("key")
		}
	}
	target, kind, status, msg := u.target(r.Method, sub, q)
	switch status {
	case http.StatusNotFound:
		writeDetail(w, status, "no gateway route at "+r.URL.Path, "not_found")
		return
	case http.StatusBadRequest:
		writeDetail(w, status, msg, "invalid_request")
		return
	}
	c.kind = kind
	c.d.responses = kind == "responses"
	if kind == "gemini" {
		c.d.geminiSSE = q.Get("alt") == "sse"
	}
	// Keys (spec §3.1).
	if pathDataset != "" {
		if keys.Vigil == "" && keys.Provider == "" {
			writeDetail(w, http.StatusBadRequest, "Missing LLM Provider API Key", "invalid_request")
			return
		}
		if keys.Vigil == "" {
			writeDetail(w, http.StatusBadRequest, "Missing invariant api key", "invalid_request")
			return
		}
	}
	if keys.Vigil == "" && (g.opts.RequireKey || u.Auth == AuthInject) {
		writeDetail(w, http.StatusBadRequest, "Missing invariant api key", "invalid_request")
		return
	}
	if keys.Vigil != "" {
		if g.opts.Auth == nil {
			writeDetail(w, http.StatusUnauthorized, "Invalid Invariant API key. Please check your API key.", "unauthorized")
			return
		}
		id, err := g.opts.Auth.Authenticate(r.Context(), keys.Vigil)
		switch {
		case errors.Is(err, ErrInvalidKey):
			writeDetail(w, http.StatusUnauthorized, "Invalid Invariant API key. Please check your API key.", "unauthorized")
			return
		case err != nil:
			g.log.Warn("gateway: authenticate", "err", err)
			writeDetail(w, http.StatusServiceUnavailable, "the Vigil store is unavailable: cannot check the Vigil key", "unavailable")
			return
		case !id.CanIngest:
			writeDetail(w, http.StatusForbidden, "forbidden", "forbidden")
			return
		}
		c.ident = id
	}
	if u.Auth == AuthPassthrough && keys.Provider == "" && kind != "models" {
		writeDetail(w, http.StatusBadRequest, "Missing authorization header", "invalid_request")
		return
	}
	if kind == "models" {
		g.passThrough(w, r, c, target, keys)
		return
	}
	// Body (spec §4.2).
	body, err := readAll(http.MaxBytesReader(w, r.Body, g.opts.MaxRequestBytes), r.ContentLength, g.opts.MaxRequestBytes)
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			writeDetail(w, http.StatusRequestEntityTooLarge, "Request body is larger than "+strconv.FormatInt(g.opts.MaxRequestBytes, 10)+" bytes", "too_large")
			return
		}
		writeDetail(w, http.StatusBadRequest, "Request body could not be read", "invalid_request")
		return
	}
	// The body is never modified after this (strings of obj point into it).
	decoded, err := trace.UnmarshalAnyOwned(body)
	obj, _ := decoded.(map[string]any)
	if err != nil || obj == nil {
		writeDetail(w, http.StatusBadRequest, "Request body is not valid JSON", "invalid_json")
		return
	}
	c.p = g.providerFor(kind)
	c.in, err = c.p.request(obj, q)
	if err != nil {
		writeDetail(w, http.StatusBadRequest, "Invalid request body: "+err.Error(), "invalid_request")
		return
	}
	c.stream = c.in.stream
	if kind == "gemini" {
		c.stream = strings.HasSuffix(sub, ":streamGenerateContent")
		c.in.model, _, _ = strings.Cut(sub[strings.LastIndex(sub, "/")+1:], ":")
	}
	if kind == "chat" && c.stream && g.opts.ForceStreamUsage {
		forced, asked, err := forceStreamUsage(body, obj)
		if err != nil {
			writeDetail(w, http.StatusBadRequest, "Invalid request body: "+err.Error(), "invalid_request")
			return
		}
		body, c.stripUsage = forced, !asked
	}
	// Recording and session headers (spec §3.3).
	sessHeader := r.Header.Get("Invariant-Session")
	if sessHeader == "" {
		sessHeader = r.Header.Get("Vigil-Session")
	}
	if sessHeader != "" && !validSession(sessHeader) {
		writeDetail(w, http.StatusBadRequest, "Invariant-Session: want 1 to 128 printable ASCII characters", "invalid_request")
		return
	}
	if mh := r.Header.Get("Vigil-Metadata"); mh != "" {
		if len(mh) > 8<<10 {
			writeDetail(w, http.StatusBadRequest, "Vigil-Metadata: larger than 8 KiB", "invalid_request")
			return
		}
		if err := json.Unmarshal([]byte(mh), &c.meta); err != nil || c.meta == nil {
			writeDetail(w, http.StatusBadRequest, "Vigil-Metadata: not a JSON object", "invalid_request")
			return
		}
		for _, k := range []string{"vigil", "via_gateway", "session_id"} {
			delete(c.meta, k)
		}
	}
	push := true
	switch strings.ToLower(strings.TrimSpace(r.Header.Get("Invariant-Push"))) {
	case "false", "0", "no":
		push = false
	}
	c.dataset = pathDataset
	if c.dataset == "" {
		c.dataset = g.opts.DefaultDataset
	}
	if c.ident == nil || !push || g.opts.Recorder == nil {
		c.dataset = ""
	}
	// Rules (spec §5).
	rs, err := g.resolve(r.Context(), c.ident, pathDataset, DecodeHeaderRules(r.Header.Get("Invariant-Guardrails")))
	if err != nil {
		det := map[string]any{"errors": []any{map[string]any{"key": "", "args": []any{"Failed to load policy: " + err.Error()}, "kwargs": map[string]any{}, "ranges": []string{},
			"guardrail": map[string]any{"id": headerRuleID, "name": headerRuleName, "content": "", "action": "block", "version": 0}}}}
		c.setHeaders(w.Header(), "block", rsVersion(nil))
		writeJSONBytes(w, http.StatusBadRequest, c.d.guardrailBody("request", det))
		return
	}
	c.rules = rs
	c.rules.params = c.params(pathDataset, sessHeader)
	if c.dataset != "" {
		c.plan = g.sessions.plan(c, sessHeader)
	}
	// The upstream request (spec §3.4).
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	if !c.stream {
		var tc context.CancelFunc
		ctx, tc = context.WithTimeoutCause(ctx, u.Timeout, errUpstreamTimeout)
		defer tc()
	}
	h := make(http.Header, len(r.Header)+2)
	copyRequestHeaders(h, r.Header, u, keys)
	// An http:// upstream without a proxy is called over the gateway's
	// own connections, from this goroutine (no dispatch goroutine, no
	// http.Transport reader and writer goroutines); the others through
	// g.hc on a dispatch goroutine.
	var ureq *http.Request
	var tu *url.URL
	pooled := g.pooled[u]
	if pooled {
		tu, err = url.Parse(target)
	} else if ureq, err = http.NewRequestWithContext(ctx, r.Method, target, bytes.NewReader(body)); err == nil {
		ureq.Header = h
		ureq.ContentLength = int64(len(body))
	}
	if err != nil {
		writeJSONBytes(w, http.StatusBadGateway, c.d.upstreamErrorBody(http.StatusBadGateway, "bad upstream URL"))
		return
	}

	// Input check, concurrent with the upstream call (spec §6.2): the
	// request is sent, then the check runs on this goroutine, whose stack
	// is already grown (a new goroutine would grow its stack in the
	// engine on every call), while the upstream works.
	k := 0
	if c.plan != nil {
		k = c.plan.k
	}
	var input *verdict
	before := g.opts.InputCheck == "before"
	if before && len(rs.block) > 0 {
		input = c.inputCheck(ctx, k)
		c.guardOnPath += input.elapsed
		if input.blocked {
			c.blockInput(w, input)
			return
		}
	}
	concurrent := len(rs.block) > 0 && !before
	var x *upconn.Exchange
	var sendErr error
	up := make(chan upstreamResult, 1)
	switch {
	case pooled:
		c.upStart = time.Now()
		x, sendErr = g.up.Send(ctx, r.Method, tu, h, body)
		if concurrent {
			input = c.inputCheck(ctx, k)
		}
	case !concurrent:
		c.dispatch(ureq, up)
	default:
		go c.dispatch(ureq, up)
		// Let the dispatch send the request before the check takes the
		// core (with GOMAXPROCS=1 it would otherwise wait for it).
		runtime.Gosched()
		input = c.inputCheck(ctx, k)
	}
	if input != nil {
		mergeStatuses(c.statuses, "input", input)
		if !before {
			if input.failure != "" && !input.blocked {
				c.result = "fail-open"
			}
			if input.blocked {
				cancel(errBlocked)
				if !pooled {
					c.inputBlockedWait(up, input)
				} else if x != nil {
					x.Abort() // the connection is closed, not reused
				}
				c.blockInput(w, input)
				return
			}
		}
	}
	var res upstreamResult
	switch {
	case !pooled:
		res = <-up
	case sendErr != nil:
		res = c.received(nil, sendErr)
	default:
		res = c.received(x.Receive())
	}
	if input != nil {
		// Added latency = max(0, input evaluation − upstream time to first byte).
		if over := input.elapsed - res.firstByte.Sub(c.upStart); over > 0 {
			c.guardOnPath += over
		}
	}
	if res.err != nil {
		c.upstreamFailed(w, r, res.err, ctx)
		return
	}
	defer res.resp.Body.Close()
	if res.resp.StatusCode < 200 || res.resp.StatusCode > 299 {
		c.upstreamStatus(w, res)
		return
	}
	if c.stream {
		c.serveStream(w, r, res.resp, ctx, cancel)
		return
	}
	c.serveJSON(w, res)
}

var (
	errUpstreamTimeout = errors.New("upstream timed out")
	errBlocked         = errors.New("blocked by a guardrail")
	errClientGone      = errors.New("client disconnected")
)

// validSession checks an Invariant-Session value.
func validSession(s string) bool {
	if len(s) < 1 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// params are the rule parameters input.* (spec §5).
func (c *call) params(dataset, session string) map[string]any {
	user := ""
	if c.ident != nil {
		user = c.ident.Username
	}
	md := map[string]any{}
	for k, v := range c.meta {
		md[k] = v
	}
	return map[string]any{
		"dataset": dataset, "user": user, "session_id": session, "provider": c.u.Type,
		"upstream": c.u.Name, "model": c.in.model, "metadata": md, "action": "block",
	}
}

// requestTrace is the request's events decoded for the engine, once
// per call (the input check and every output check share it; analyses
// only read it).
func (c *call) requestTrace() (*trace.Trace, error) {
	c.reqOnce.Do(func() { c.reqTrace, c.reqErr = toTrace(c.in.events) })
	return c.reqTrace, c.reqErr
}

// upstreamResult is the outcome of dispatch.
type upstreamResult struct {
	resp      *http.Response
	body      []byte // the whole body (non-streaming 2xx and errors)
	err       error
	firstByte time.Time
}

// dispatch sends the upstream request through g.hc; for non-streaming
// calls it also reads the whole body, so that U ends when it is read.
func (c *call) dispatch(req *http.Request, out chan<- upstreamResult) {
	c.upStart = time.Now()
	out <- c.received(c.g.hc.Do(req))
}

// received completes the upstream call whose answer's status and headers
// have just been read (or that failed): c.upFirst is now and, for
// non-streaming calls and errors, the whole body is read (c.upEnd).
//
// On the pooled path the answer is read on the handler's goroutine after
// the concurrent input check, so when the check outlasts the upstream's
// time to first byte, "now" is the end of the check, not when the bytes
// arrived (which cannot be known without a reader goroutine): U then
// includes the part of the check that outlasted the upstream, as it did
// on the dispatch path with GOMAXPROCS=1 (where the dispatch goroutine
// only runs once the check yields the core).
func (c *call) received(resp *http.Response, err error) upstreamResult {
	now := time.Now()
	if err != nil {
		return upstreamResult{err: err, firstByte: now}
	}
	res := upstreamResult{resp: resp, firstByte: now}
	c.upFirst = now
	if !c.stream || resp.StatusCode < 200 || resp.StatusCode > 299 {
		res.body, res.err = readAll(resp.Body, resp.ContentLength, 64<<20)
		c.upEnd = time.Now()
		if res.err != nil {
			resp.Body.Close()
			res.resp = nil
		}
	}
	return res
}

// readAll reads r to the end into a buffer sized for n bytes (a
// Content-Length, -1 when unknown; at most limit preallocated), so that
// a body of known length is read without the buffer regrowing.
func readAll(r io.Reader, n, limit int64) ([]byte, error) {
	if n <= 0 || n > limit {
		return io.ReadAll(r)
	}
	// One more byte, so that the read that sees EOF does not grow it.
	b := make([]byte, 0, n+1)
	for {
		m, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // longer than announced: let append grow it
		}
	}
}

// inputBlockedWait waits for the cancelled dispatch to return (the
// cancellation closes its connection at once), so that the call's
// upstream timings are no longer written while the answer reads them.
func (c *call) inputBlockedWait(up <-chan upstreamResult, _ *verdict) {
	if res := <-up; res.resp != nil {
		res.resp.Body.Close()
	}
}

// blockInput answers a request blocked at input and records it.
func (c *call) blockInput(w http.ResponseWriter, v *verdict) {
	mergeStatuses(c.statuses, "input", v)
	c.result = "block"
	c.commitSession(recordInput{blockedAt: "request"})
	h := w.Header()
	c.setHeaders(h, "block", rsVersion(c.rules))
	if c.stream {
		c.writeStreamHeaders(w)
		w.Write(c.d.guardrailEvent("request", v.details(), true))
		c.setTrailers(w.Header(), "block")
		flush(w)
	} else {
		writeJSONBytes(w, http.StatusBadRequest, c.d.guardrailBody("request", v.details()))
	}
	c.record(recordInput{blockedAt: "request", verdict: v})
}

func rsVersion(rs *rules) string {
	if rs == nil {
		return "none"
	}
	return rs.version
}

// copyRequestHeaders copies the client's headers to the upstream request
// except those of spec §3.4, and sets the upstream's key.
func copyRequestHeaders(dst, src http.Header, u *Upstream, keys Keys) {
	for k, vs := range src {
		ck := http.CanonicalHeaderKey(k)
		if strings.HasPrefix(ck, "Invariant-") || strings.HasPrefix(ck, "Vigil-") || strings.HasPrefix(ck, "X-Forwarded-") {
			continue
		}
		switch ck {
		case "Host", "Content-Length", "Accept-Encoding", "X-Real-Ip", "Forwarded", "Cookie":
			if ck == "Cookie" {
				if v := stripSessionCookie(vs); v != "" {
					dst.Set("Cookie", v)
				}
			}
			continue
		}
		dst[ck] = append([]string(nil), vs...)
	}
	for _, h := range hopHeaders {
		dst.Del(h)
	}
	// Provider keys.
	for _, h := range providerKeyHeaders(u.Type) {
		if !strings.HasPrefix(h, "query:") {
			dst.Del(h)
		}
	}
	key := ""
	switch u.Auth {
	case AuthPassthrough:
		key = keys.Provider
	case AuthInject:
		key = u.APIKey
	}
	if key != "" {
		switch {
		case keys.Header != "" && !strings.HasPrefix(keys.Header, "query:") && u.Auth == AuthPassthrough:
			if keys.Header == "Authorization" {
				dst.Set("Authorization", "Bearer "+key)
			} else {
				dst.Set(keys.Header, key)
			}
		default:
			switch u.Type {
			case TypeAzure:
				dst.Set("Api-Key", key)
			case TypeAnthropic:
				dst.Set("X-Api-Key", key)
			case TypeGemini:
				dst.Set("X-Goog-Api-Key", key)
			default:
				dst.Set("Authorization", "Bearer "+key)
			}
		}
	}
	for k, v := range u.Headers {
		dst.Set(k, v)
	}
}

func stripSessionCookie(vs []string) string {
	var keep []string
	for _, v := range vs {
		for _, part := range strings.Split(v, ";") {
			p := strings.TrimSpace(part)
			if p == "" || strings.HasPrefix(p, "vigil_session=") {
				continue
			}
			keep = append(keep, p)
		}
	}
	return strings.Join(keep, "; ")
}

// copyResponseHeaders copies upstream response headers except hop-by-hop
// ones, Content-Length and Content-Encoding.
func copyResponseHeaders(dst, src http.Header) {
	for k, vs := range src {
		switch k {
		case "Content-Length", "Content-Encoding":
			continue
		}
		dst[k] = vs
	}
	for _, h := range hopHeaders {
		dst.Del(h)
	}
}

// setHeaders sets the Vigil response headers known before the body
// (spec §3.5); the timing headers are set by setTimings.
func (c *call) setHeaders(h http.Header, result, version string) {
	h.Set("Vigil-Request-Id", c.id)
	h.Set("Vigil-Guardrail-Result", result)
	h.Set("Vigil-Ruleset", version)
	if c.plan != nil {
		h.Set("Vigil-Trace-Id", c.plan.traceID)
		if c.plan.sessionID != "" {
			h.Set("Vigil-Session", c.plan.sessionID)
		}
	}
	c.setTimings(h, time.Now())
}

// setTimings sets Vigil-Overhead-Ms, Vigil-Upstream-Ms and
// Vigil-Guardrails-Ms for a first byte sent at now.
func (c *call) setTimings(h http.Header, now time.Time) {
	var up time.Duration
	if !c.upStart.IsZero() {
		end := c.upEnd
		if c.stream || end.IsZero() {
			end = c.upFirst
		}
		if !end.IsZero() {
			up = end.Sub(c.upStart)
		}
	}
	over := now.Sub(c.t0) - up
	if over < 0 {
		over = 0
	}
	h.Set("Vigil-Overhead-Ms", ms(over))
	h.Set("Vigil-Upstream-Ms", ms(up))
	h.Set("Vigil-Guardrails-Ms", ms(c.guardOnPath))
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64)
}

func flush(w http.ResponseWriter) {
	_ = http.NewResponseController(w).Flush()
}

// upstreamFailed answers an upstream that could not be reached or timed
// out (spec §7.4), or records a client that went away.
func (c *call) upstreamFailed(w http.ResponseWriter, r *http.Request, err error, ctx context.Context) {
	if r.Context().Err() != nil {
		c.record(recordInput{clientGone: true})
		return
	}
	status, msg := http.StatusBadGateway, "upstream "+c.u.Name+" unreachable"
	if errors.Is(context.Cause(ctx), errUpstreamTimeout) || errors.Is(err, context.DeadlineExceeded) {
		status, msg = http.StatusGatewayTimeout, "upstream "+c.u.Name+" timed out"
	}
	c.g.log.Warn("gateway: upstream", "upstream", c.u.Name, "err", err)
	c.commitSession(recordInput{upstreamStatus: status})
	c.setHeaders(w.Header(), c.resultOr(), rsVersion(c.rules))
	if c.stream {
		c.writeStreamHeaders(w)
		w.Write(c.d.upstreamErrorEvent(status, msg, true))
		c.setTrailers(w.Header(), c.resultOr())
		flush(w)
	} else {
		writeJSONBytes(w, status, c.d.upstreamErrorBody(status, msg))
	}
	c.record(recordInput{upstreamStatus: status, errBody: []byte(msg)})
}

func (c *call) resultOr() string {
	if c.result != "" {
		return c.result
	}
	return c.rules.passResult()
}

// upstreamStatus passes a non-2xx upstream response through verbatim
// (spec §4.2); output rules are skipped.
func (c *call) upstreamStatus(w http.ResponseWriter, res upstreamResult) {
	c.statuses["output"] = skipAll(c.rules.block)
	c.commitSession(recordInput{upstreamStatus: res.resp.StatusCode})
	h := w.Header()
	copyResponseHeaders(h, res.resp.Header)
	c.setHeaders(h, c.resultOr(), rsVersion(c.rules))
	h.Set("Content-Length", strconv.Itoa(len(res.body)))
	w.WriteHeader(res.resp.StatusCode)
	w.Write(res.body)
	eb := res.body
	if len(eb) > 64<<10 {
		eb = eb[:64<<10]
	}
	c.record(recordInput{upstreamStatus: res.resp.StatusCode, errBody: eb})
}

// serveJSON checks a complete non-streaming response and sends it
// unchanged, or the guardrail error (spec §6.3).
func (c *call) serveJSON(w http.ResponseWriter, res upstreamResult) {
	var out *callOutput
	var perr error
	if c.plan != nil || !c.rules.empty() {
		out, perr = c.p.response(res.body)
	}
	var v *verdict
	if len(c.rules.block) > 0 {
		if perr != nil {
			v = &verdict{statuses: map[string]string{}}
			for _, gr := range c.rules.block {
				v.fail(c.g, gr, "response is not valid JSON: "+perr.Error(), true)
			}
		} else {
			v = c.checkChoices(out.choices)
		}
		c.guardOnPath += v.elapsed
		mergeStatuses(c.statuses, "output", v)
	}
	h := w.Header()
	if v != nil && v.blocked {
		c.result = "block"
		c.commitSession(recordInput{out: out, blockedAt: "response"})
		c.setHeaders(h, "block", rsVersion(c.rules))
		writeJSONBytes(w, http.StatusBadRequest, c.d.guardrailBody("response", v.details()))
		c.record(recordInput{out: out, blockedAt: "response", verdict: v})
		return
	}
	if v != nil && v.failure != "" {
		c.result = "fail-open"
	}
	if out == nil {
		out = &callOutput{}
	}
	c.commitSession(recordInput{out: out})
	copyResponseHeaders(h, res.resp.Header)
	c.setHeaders(h, c.resultOr(), rsVersion(c.rules))
	h.Set("Content-Length", strconv.Itoa(len(res.body)))
	w.WriteHeader(res.resp.StatusCode)
	w.Write(res.body)
	c.record(recordInput{out: out, verdict: v})
}

// checkChoices runs the blocking rules on each choice separately, in
// pending mode over the request events.
func (c *call) checkChoices(choices []event) *verdict {
	if len(choices) == 0 {
		return c.evaluateOn(context.Background(), c.rules.block, len(c.in.events), nil)
	}
	var all *verdict
	for _, ch := range choices {
		v := c.evaluateOn(context.Background(), c.rules.block, 0, []event{ch})
		if all == nil {
			all = v
			continue
		}
		all.errors = append(all.errors, v.errors...)
		all.rules = append(all.rules, v.rules...)
		all.blocked = all.blocked || v.blocked
		if all.failure == "" {
			all.failure = v.failure
		}
		for k, s := range v.statuses {
			if s != ruleRan {
				all.statuses[k] = s
			}
		}
		all.elapsed += v.elapsed
	}
	return all
}

// passThrough proxies GET models: not guarded, not recorded.
func (g *Gateway) passThrough(w http.ResponseWriter, r *http.Request, c *call, target string, keys Keys) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, target, nil)
	if err != nil {
		writeJSONBytes(w, http.StatusBadGateway, c.d.upstreamErrorBody(http.StatusBadGateway, "bad upstream URL"))
		return
	}
	copyRequestHeaders(req.Header, r.Header, c.u, keys)
	resp, err := g.hc.Do(req)
	if err != nil {
		writeJSONBytes(w, http.StatusBadGateway, c.d.upstreamErrorBody(http.StatusBadGateway, "upstream "+c.u.Name+" unreachable"))
		return
	}
	defer resp.Body.Close()
	copyResponseHeaders(w.Header(), resp.Header)
	w.Header().Set("Vigil-Request-Id", c.id)
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}
