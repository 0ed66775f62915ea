package server

// The guardrails check API (explorer-api §10): POST /api/v1/policy/check,
// /policy/check/batch and /policy/load, in the shapes and with the error
// prefixes Invariant's Python RemotePolicy and its gateway expect, so they
// work against Vigil with only the base URL changed.
//
// Rules are compiled once and kept in an LRU cache keyed by
// sha256(rule text). Evaluation runs in a bounded pool: at most
// Config.CheckConcurrency evaluations at a time, a bounded number of
// requests waiting for a slot, and 429 (Retry-After) beyond that. Each
// request's evaluation has a wall time (Config.CheckTimeout, 5 s); running
// out is 400 "Excessive Policy: timeout". The engine's own budgets (steps,
// violations, value sizes, allocation) stop a hostile rule with a
// budget_exceeded failure in a 200 result.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"time"

	_ "github.com/vigilhq/vigil/detect" // registers the detectors rules call, as vigil check does
	"github.com/vigilhq/vigil/policy"
	"github.com/vigilhq/vigil/policy/builtin"
	"github.com/vigilhq/vigil/trace"
)

// Check API defaults and limits (explorer-api §10).
const (
	// DefaultCheckTimeout is the evaluation wall time of one check request.
	DefaultCheckTimeout = 5 * time.Second
	// MaxCheckBytes limits a check request body.
	MaxCheckBytes = 16 << 20
	// MaxCheckMessages limits the events of a check request.
	MaxCheckMessages = 10000
)

// The prefixes of 400 details that Invariant's Python client recognises
// (invariant.analyzer.runtime.runtime_errors and remote_policy.py).
const (
	prefixMissingParameter = "Missing Policy Parameter: "
	prefixExcessive        = "Excessive Policy: "
	prefixInputValidation  = "Input Validation Error: "
	prefixLoad             = "Failed to load policy: "
	prefixAnalysis         = "Error during analysis: "
)

// checker serves the check API: the rule cache and the evaluation pool.
type checker struct {
	s       *Server
	rules   *RuleCache
	timeout time.Duration
	// slots holds one token per running evaluation; waiting holds one per
	// request admitted (running or waiting for a slot).
	slots   chan struct{}
	waiting chan struct{}
}

func newChecker(s *Server) *checker {
	workers := s.cfg.CheckConcurrency
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	timeout := s.cfg.CheckTimeout
	if timeout <= 0 {
		timeout = DefaultCheckTimeout
	}
	s.metrics.counter("vigil_check_rule_cache_total", "Check API rule cache lookups by result (hit, miss).", "result")
	s.metrics.counter("vigil_check_rejected_total", "Check API requests refused because the evaluation pool was full.")
	rules := NewRuleCache(s.cfg.RuleCacheSize, policy.Options{Name: "policy"})
	rules.observe = func(hit bool, _ time.Duration) {
		s.metrics.Add("vigil_check_rule_cache_total", 1, map[bool]string{true: "hit", false: "miss"}[hit])
	}
	return &checker{
		s:       s,
		rules:   rules,
		timeout: timeout,
		slots:   make(chan struct{}, workers),
		// Requests beyond the running ones wait for a slot; at most
		// 16 per slot wait, the rest are refused at once.
		waiting: make(chan struct{}, workers*17),
	}
}

// callerUnused are the routes whose handlers ignore the caller beyond the
// access check (their principal argument is unused): the check API, the
// hot path of a guardrail client, skips the per-request reload of an
// admin key's user (authenticateFor).
var callerUnused = map[string]bool{
	"POST /api/v1/policy/check":       true,
	"POST /api/v1/policy/check/batch": true,
	"POST /api/v1/policy/load":        true,
}

// checkRequest is a decoded body of /policy/check, /policy/check/batch or
// /policy/load: {"messages", "policy" | "policies", "parameters"?,
// "from_index"? [V], "dataset_name"? (Invariant's gateway; not used)}.
type checkRequest struct {
	body      []byte
	obj       *trace.Object // the whole body
	policy    *string
	policies  []string
	hasPolicy bool // "policies" is present
	params    map[string]any
	fromIndex *int
}

// checkInput is the trace of a check request, split into past and pending
// events in pending mode (past is nil otherwise), with the parameters.
type checkInput struct {
	t       *trace.Trace
	past    *trace.Trace
	pending *trace.Trace
	params  map[string]any
}

// readCheck reads a check request body: at most MaxCheckBytes, or the
// server's JSON limit when that is lower.
func (c *checker) readCheck(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	limit := min(int64(MaxCheckBytes), c.s.maxJSON)
	rd, err := c.s.body(w, r, limit)
	if err != nil {
		return nil, err
	}
	// Charged to the in-flight body budget like every JSON body
	// (admission.go); over the limit it is a 413.
	return c.s.readCharged(w, r, rd, limit)
}

// parseCheck decodes a check request body; errors name the member and
// what it should be, or the line and column of malformed JSON. The body
// is parsed once, by the trace package's scanner; decodeInput normalises
// the messages from the parsed value.
func parseCheck(body []byte) (*checkRequest, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, apiErr(http.StatusBadRequest, CodeInvalidJSON, "request body is empty; expected a JSON object")
	}
	// The body is a fresh buffer that nothing writes to again: the
	// parsed strings share it instead of a copy.
	v, err := trace.ParseValueOwned(body)
	if err != nil {
		var se *trace.SyntaxError
		if errors.As(err, &se) && se.Path != "" {
			return nil, utf8Error(se)
		}
		if errors.As(err, &se) {
			return nil, &Error{Status: http.StatusBadRequest, Code: CodeInvalidJSON,
				Detail: fmt.Sprintf("invalid JSON at line %d, column %d: %s", se.Line, se.Col, se.Msg),
				Extra:  map[string]any{"line": se.Line, "position": se.Offset}}
		}
		return nil, apiErr(http.StatusBadRequest, CodeInvalidJSON, "invalid JSON: %v", err)
	}
	obj, ok := v.(*trace.Object)
	if !ok {
		return nil, badRequest("request body must be a JSON object, got %s", trace.TypeName(v))
	}
	req := &checkRequest{body: body, obj: obj}
	if p, ok := obj.Get("policy"); ok && p != nil {
		src, ok := p.(string)
		if !ok {
			return nil, badRequest("policy must be a string, got %s", trace.TypeName(p))
		}
		req.policy = &src
	}
	if ps, ok := obj.Get("policies"); ok && ps != nil {
		list, ok := ps.([]trace.Value)
		if !ok {
			return nil, badRequest("policies must be a list of strings, got %s", trace.TypeName(ps))
		}
		req.hasPolicy = true
		req.policies = make([]string, len(list))
		for i, e := range list {
			if req.policies[i], ok = e.(string); !ok {
				return nil, badRequest("policies[%d] must be a string, got %s", i, trace.TypeName(e))
			}
		}
	}
	if pv, ok := obj.Get("parameters"); ok && pv != nil {
		po, ok := pv.(*trace.Object)
		if !ok {
			return nil, inputError("parameters must be a JSON object, got %s", trace.TypeName(pv))
		}
		req.params = goObject(po)
	}
	if fv, ok := obj.Get("from_index"); ok && fv != nil {
		n, isNum := fv.(trace.Number)
		k, isInt := n.Int64()
		if !isNum || !isInt || k < math.MinInt32 || k > math.MaxInt32 {
			return nil, inputError("from_index must be an integer, got %s", trace.TypeName(fv))
		}
		i := int(k)
		req.fromIndex = &i
	}
	return req, nil
}

// goObject converts a parsed object to the parameter values the engine
// takes: numbers as json.Number (integers stay integers, as in Python).
func goObject(o *trace.Object) map[string]any {
	m := make(map[string]any, o.Len())
	for _, k := range o.Keys() {
		v, _ := o.Get(k)
		m[k] = goParam(v)
	}
	return m
}

func goParam(v trace.Value) any {
	switch x := v.(type) {
	case trace.Number:
		return json.Number(x)
	case []trace.Value:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = goParam(e)
		}
		return out
	case *trace.Object:
		return goObject(x)
	}
	return v
}

// inputError is a 400 with the "Input Validation Error: " prefix.
func inputError(format string, args ...any) *Error {
	return apiErr(http.StatusBadRequest, CodeInvalidRequest, prefixInputValidation+format, args...)
}

// decodeInput normalises the messages and applies from_index.
func decodeInput(req *checkRequest) (*checkInput, error) {
	mv, ok := req.obj.Get("messages")
	if !ok || mv == nil {
		return nil, inputError("messages is required: a list of events")
	}
	t, err := trace.FromValue(mv)
	if err != nil {
		// The slow path, for the error only: decode the messages from
		// their bytes so the error has line and column too.
		var raw struct {
			Messages json.RawMessage `json:"messages"`
		}
		if json.Unmarshal(req.body, &raw) == nil {
			if _, derr := trace.Decode(raw.Messages); derr != nil {
				err = derr
			}
		}
		return nil, inputError("invalid_trace: messages: %v", err)
	}
	if n := len(t.Events); n > MaxCheckMessages {
		return nil, inputError("messages has %d events, more than the %d a check may hold", n, MaxCheckMessages)
	}
	in := &checkInput{t: t, params: req.params}
	if req.fromIndex != nil {
		k := *req.fromIndex
		if k < 0 || k > len(t.Events) {
			return nil, inputError("from_index is %d, want 0 to %d (the number of messages)", k, len(t.Events))
		}
		in.past = &trace.Trace{Events: t.Events[:k]}
		in.pending = &trace.Trace{Events: t.Events[k:]}
	}
	return in, nil
}

// loadError is the 400 of a rule that does not compile: the Python
// client's "Failed to load policy: " prefix, the rendered errors, and
// errors[{line, column, message}].
func loadError(err error) *Error {
	var list policy.ErrorList
	items := []map[string]any{}
	if errors.As(err, &list) {
		for _, e := range list {
			p := e.Position()
			items = append(items, map[string]any{"line": p.Line, "column": p.Column, "message": e.Msg})
		}
	}
	return &Error{Status: http.StatusBadRequest, Code: "policy_invalid", Detail: prefixLoad + err.Error(),
		Extra: map[string]any{"errors": items}}
}

// analysisError maps an analysis that returned no result to its error
// (explorer-api §10).
func (c *checker) analysisError(ctx context.Context, err error) *Error {
	switch {
	case errors.Is(err, policy.ErrMissingParameter):
		return apiErr(http.StatusBadRequest, CodeInvalidRequest, "%s%s", prefixMissingParameter, analysisMsg(err))
	case errors.Is(err, policy.ErrCancelled):
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return apiErr(http.StatusBadRequest, CodeInvalidRequest, "%stimeout (the evaluation ran longer than %s)", prefixExcessive, c.timeout)
		}
		return apiErr(http.StatusBadRequest, CodeInvalidRequest, "%scancelled: %s", prefixExcessive, analysisMsg(err))
	case errors.Is(err, policy.ErrInvalidTrace), errors.Is(err, policy.ErrReservedParameter):
		return apiErr(http.StatusBadRequest, CodeInvalidRequest, "%s%v", prefixInputValidation, err)
	}
	return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Detail: prefixAnalysis + err.Error(), Err: err}
}

// analysisMsg is the message of an *AnalysisError without its code.
func analysisMsg(err error) string {
	var ae *policy.AnalysisError
	if errors.As(err, &ae) {
		return ae.Msg
	}
	return err.Error()
}

// errOverloaded is the refusal of a request the pool cannot take.
var errOverloaded = &Error{Status: http.StatusTooManyRequests, Code: CodeOverloaded,
	Detail: "too many policy checks in progress; retry later"}

// admit takes a place for a request among the admitted ones, or refuses
// it with 429 when as many requests already wait. The caller calls leave
// when done.
func (c *checker) admit() error {
	select {
	case c.waiting <- struct{}{}:
		return nil
	default:
		c.s.metrics.Add("vigil_check_rejected_total", 1)
		return errOverloaded
	}
}

// leave gives back the place admit took.
func (c *checker) leave() { <-c.waiting }

// slot waits for an evaluation slot until ctx ends, and at most the
// evaluation wall time: a request that waited that long is refused with
// 429 (the server is busy; its rule is not at fault). The caller calls
// release when done. A free slot is taken without a timer.
func (c *checker) slot(ctx context.Context) error {
	select {
	case c.slots <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(c.timeout)
	defer t.Stop()
	select {
	case c.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		c.s.metrics.Add("vigil_check_rejected_total", 1)
		return errOverloaded
	}
}

// release gives back the slot slot took.
func (c *checker) release() { <-c.slots }

// rule returns the compiled rule for src, from the cache or compiled now
// (and cached). A load error is returned as is.
func (c *checker) rule(src string) (*policy.Policy, error) {
	return c.rules.Load(src)
}

// evaluate compiles src and runs it on in, in an evaluation slot the
// caller holds; ctx carries the evaluation deadline. The error is an
// *Error.
func (c *checker) evaluate(ctx context.Context, src string, in *checkInput) (*policy.Result, *Error) {
	p, err := c.rule(src)
	if err != nil {
		return nil, loadError(err)
	}
	var res *policy.Result
	if in.past != nil {
		res, err = p.AnalyzePending(ctx, in.past, in.pending, in.params)
	} else {
		res, err = p.Analyze(ctx, in.t, in.params)
	}
	if err != nil {
		return nil, c.analysisError(ctx, err)
	}
	return normalizeResult(res), nil
}

// normalizeResult gives res empty lists instead of nil ones: the Python
// client iterates result["errors"], which must never be null.
func normalizeResult(res *policy.Result) *policy.Result {
	if res.Errors == nil {
		res.Errors = []policy.Violation{}
	}
	if res.Failures == nil {
		res.Failures = []policy.Failure{}
	}
	if res.Warnings == nil {
		res.Warnings = []string{}
	}
	return res
}

// begin reads a request's body, admits the request (429 when too many
// wait) and decodes the body, which must hold "policy" (single) or
// "policies" (batch). The body is read before admission, so slow senders
// hold no place in the pool. Unless it fails, the caller calls c.leave
// when the request is over.
func (c *checker) begin(w http.ResponseWriter, r *http.Request, single bool) (req *checkRequest, err error) {
	body, err := c.readCheck(w, r)
	if err != nil {
		return nil, err
	}
	if err = c.admit(); err != nil {
		return nil, err
	}
	switch req, err = parseCheck(body); {
	case err != nil:
	case single && req.policy == nil:
		err = badRequest("policy is required: the rule text")
	case !single && !req.hasPolicy:
		err = badRequest("policies is required: a list of rule texts")
	}
	if err != nil {
		c.leave()
		return nil, err
	}
	return req, nil
}

// handleCheck serves POST /api/v1/policy/check.
func (c *checker) handleCheck(w http.ResponseWriter, r *http.Request, _ *principal) error {
	req, err := c.begin(w, r, true)
	if err != nil {
		return err
	}
	defer c.leave()
	in, err := decodeInput(req)
	if err != nil {
		return err
	}
	if err := c.slot(r.Context()); err != nil {
		return err
	}
	defer c.release()
	ctx, cancel := context.WithTimeout(r.Context(), c.timeout)
	defer cancel()
	res, ae := c.evaluate(ctx, *req.policy, in)
	if ae != nil {
		return ae
	}
	return writeResult(w, res)
}

// writeResult writes a check result as 200 JSON. It is what writeJSON
// would write, byte for byte (TestCheckConformance compares them), built
// by hand: encoding/json would re-validate and re-compact every value
// that marshals itself (the events in args and kwargs), which was a fifth
// of a check's time.
func writeResult(w http.ResponseWriter, res *policy.Result) error {
	bp := resultBufs.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= maxPooledResult {
			resultBufs.Put(bp)
		}
	}()
	buf, err := appendResult((*bp)[:0], res)
	*bp = buf
	if err != nil {
		return fmt.Errorf("encode check result: %w", err)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	// With its length declared the body goes out as is, not chunked.
	h.Set("Content-Length", strconv.Itoa(len(buf)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf)
	return nil
}

// resultBufs are the buffers writeResult encodes into: the response is
// copied out by Write, so a buffer serves the next request. Buffers
// larger than maxPooledResult are left to the collector.
var resultBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

const maxPooledResult = 256 << 10

// appendResult appends the JSON of res and a newline to buf.
func appendResult(buf []byte, res *policy.Result) ([]byte, error) {
	var err error
	buf = append(buf, `{"errors":[`...)
	for i := range res.Errors {
		v := &res.Errors[i]
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"key":`...)
		buf = appendString(buf, v.Key, &err)
		buf = append(buf, `,"args":`...)
		if v.Args == nil {
			buf = append(buf, "null"...)
		} else {
			buf = append(buf, '[')
			for j, a := range v.Args {
				if j > 0 {
					buf = append(buf, ',')
				}
				buf = appendValue(buf, a, &err)
			}
			buf = append(buf, ']')
		}
		buf = append(buf, `,"kwargs":`...)
		buf = appendValue(buf, v.Kwargs, &err)
		buf = append(buf, `,"ranges":`...)
		buf = appendJSON(buf, v.Ranges, &err)
		buf = append(buf, '}')
	}
	buf = append(buf, `],"failures":`...)
	buf = appendJSON(buf, res.Failures, &err)
	buf = append(buf, `,"warnings":`...)
	buf = appendJSON(buf, res.Warnings, &err)
	if len(res.Truncated) > 0 {
		buf = append(buf, `,"truncated":`...)
		buf = appendJSON(buf, res.Truncated, &err)
	}
	buf = append(buf, "}\n"...)
	return buf, err
}

// appendValue appends the JSON of a value of a violation (the JSON forms
// of package builtin: nil, bool, int64, string, []any, OrderedMap, and a
// few others left to appendJSON), walking maps and lists itself instead
// of letting each level marshal and re-compact the next.
func appendValue(buf []byte, v any, errp *error) []byte {
	switch x := v.(type) {
	case nil:
		return append(buf, "null"...)
	case bool:
		return strconv.AppendBool(buf, x)
	case int64:
		return strconv.AppendInt(buf, x, 10)
	case string:
		return appendString(buf, x, errp)
	case []any:
		if x == nil {
			return append(buf, "null"...)
		}
		buf = append(buf, '[')
		for i, e := range x {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendValue(buf, e, errp)
		}
		return append(buf, ']')
	case builtin.OrderedMap:
		buf = append(buf, '{')
		for i, kv := range x {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendString(buf, kv.Key, errp)
			buf = append(buf, ':')
			buf = appendValue(buf, kv.Value, errp)
		}
		return append(buf, '}')
	}
	return appendJSON(buf, v, errp)
}

// appendString appends the JSON of s without HTML escaping, as
// appendJSON does, without boxing s when it needs no escapes.
func appendString(buf []byte, s string, errp *error) []byte {
	if plainASCII(s) {
		buf = append(buf, '"')
		buf = append(buf, s...)
		return append(buf, '"')
	}
	return appendJSON(buf, s, errp)
}

// appendJSON appends the JSON of v without HTML escaping; a value that
// marshals itself is appended as it marshals (those of package builtin
// write compact JSON without HTML escaping). The first error is kept in
// *errp.
func appendJSON(buf []byte, v any, errp *error) []byte {
	switch x := v.(type) {
	case string:
		if plainASCII(x) {
			return appendString(buf, x, errp)
		}
	case []string:
		if x == nil {
			return append(buf, "null"...)
		}
		buf = append(buf, '[')
		for i, e := range x {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendString(buf, e, errp)
		}
		return append(buf, ']')
	}
	if m, ok := v.(json.Marshaler); ok {
		b, err := m.MarshalJSON()
		if err != nil && *errp == nil {
			*errp = err
		}
		return append(buf, b...)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil && *errp == nil {
		*errp = err
	}
	return append(buf, bytes.TrimSuffix(b.Bytes(), []byte("\n"))...)
}

// batchEntry is one policy's result in a batch response.
type batchEntry struct {
	Policy       string             `json:"policy"`
	Success      bool               `json:"success"`
	ErrorMessage string             `json:"error_message"`
	Errors       []policy.Violation `json:"errors"`
	Failures     []policy.Failure   `json:"failures"`
	Warnings     []string           `json:"warnings"`
	Truncated    []int              `json:"truncated,omitempty"`
}

// handleCheckBatch serves POST /api/v1/policy/check/batch: every policy on
// the same messages, concurrently within the pool; a policy that fails to
// load or run is an entry with success false.
func (c *checker) handleCheckBatch(w http.ResponseWriter, r *http.Request, _ *principal) error {
	req, err := c.begin(w, r, false)
	if err != nil {
		return err
	}
	defer c.leave()
	in, err := decodeInput(req)
	if err != nil {
		return err
	}
	if id := r.Header.Get("X-Session-Id"); id != "" {
		c.s.log.Debug("policy batch check", "session_id", id, "policies", len(req.policies))
	}
	ctx, cancel := context.WithTimeout(r.Context(), c.timeout)
	defer cancel()
	out := make([]batchEntry, len(req.policies))
	workers := min(len(req.policies), cap(c.slots))
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out[i] = c.batchOne(ctx, req.policies[i], in)
			}
		}()
	}
	for i := range req.policies {
		next <- i
	}
	close(next)
	wg.Wait()
	writeJSON(w, http.StatusOK, map[string]any{"result": out})
	return nil
}

// batchOne evaluates one policy of a batch; ctx carries the batch's
// evaluation deadline, which also bounds the wait for a slot.
func (c *checker) batchOne(ctx context.Context, src string, in *checkInput) batchEntry {
	var ae *Error
	var res *policy.Result
	if err := c.slot(ctx); err != nil {
		ae = toAPIError(err)
		if errors.Is(err, context.DeadlineExceeded) {
			ae = c.analysisError(ctx, &policy.AnalysisError{Code: policy.ErrCancelled, Msg: err.Error()})
		}
	} else {
		res, ae = c.evaluate(ctx, src, in)
		c.release()
	}
	if ae != nil {
		return batchEntry{Policy: src, ErrorMessage: ae.Detail, Errors: []policy.Violation{}, Failures: []policy.Failure{}, Warnings: []string{}}
	}
	return batchEntry{Policy: src, Success: true, Errors: res.Errors, Failures: res.Failures, Warnings: res.Warnings, Truncated: res.Truncated}
}

// handleLoad serves POST /api/v1/policy/load: compile and cache a rule.
// The success body has no "errors" key, which RemotePolicy reads as a
// failure.
func (c *checker) handleLoad(w http.ResponseWriter, r *http.Request, _ *principal) error {
	req, err := c.begin(w, r, true)
	if err != nil {
		return err
	}
	defer c.leave()
	if err := c.slot(r.Context()); err != nil {
		return err
	}
	defer c.release()
	if _, err := c.rule(*req.policy); err != nil {
		return loadError(err)
	}
	writeJSON(w, http.StatusOK, map[string]bool{"success": true})
	return nil
}

// plainASCII reports whether s is printable ASCII with no quote or
// backslash: its JSON string is s in quotes.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
