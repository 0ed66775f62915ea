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
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"time"

	_ "github.com/vigilhq/vigil/detect" // registers the detectors rules call, as vigil check does
	"github.com/vigilhq/vigil/policy"
	"github.com/vigilhq/vigil/trace"
)

// Check API defaults and limits (explorer-api §10).
const (
	// DefaultCheckCacheSize is the number of compiled rules the check API
	// keeps (guardrails.cache_size).
	DefaultCheckCacheSize = 1024
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
	rules   *ruleCache
	timeout time.Duration
	// slots holds one token per running evaluation; waiting holds one per
	// request admitted (running or waiting for a slot).
	slots   chan struct{}
	waiting chan struct{}
}

func newChecker(s *Server) *checker {
	size := s.cfg.CheckCacheSize
	if size <= 0 {
		size = DefaultCheckCacheSize
	}
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
	return &checker{
		s:       s,
		rules:   newRuleCache(size),
		timeout: timeout,
		slots:   make(chan struct{}, workers),
		// Requests beyond the running ones wait for a slot; at most
		// 16 per slot wait, the rest are refused at once.
		waiting: make(chan struct{}, workers*17),
	}
}

// checkRequest is the body of /policy/check and /policy/check/batch.
type checkRequest struct {
	Messages   json.RawMessage `json:"messages"`
	Policy     *string         `json:"policy"`
	Policies   []string        `json:"policies"`
	Parameters json.RawMessage `json:"parameters"`
	FromIndex  *int            `json:"from_index"`
	// DatasetName is accepted from Invariant's gateway and not used.
	DatasetName *string `json:"dataset_name"`
}

// checkInput is a decoded check request: the trace split into past and
// pending events (past is nil outside pending mode) and the parameters.
type checkInput struct {
	t       *trace.Trace
	past    *trace.Trace
	pending *trace.Trace
	params  map[string]any
}

// readCheck reads and decodes a check request body (at most
// MaxCheckBytes, or the server's JSON limit when that is lower).
func (c *checker) readCheck(w http.ResponseWriter, r *http.Request) (*checkRequest, error) {
	limit := min(int64(MaxCheckBytes), c.s.maxJSON)
	rd, err := c.s.body(w, r, limit)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 && r.ContentLength <= limit {
		buf.Grow(int(min(r.ContentLength, maxBodyPrealloc)))
	}
	if _, err := buf.ReadFrom(rd); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge,
				Detail: fmt.Sprintf("request body larger than %d bytes (the check API's limit)", limit)}
		}
		return nil, badRequest("read request body: %v", err)
	}
	if len(bytes.TrimSpace(buf.Bytes())) == 0 {
		return nil, apiErr(http.StatusBadRequest, CodeInvalidJSON, "request body is empty; expected a JSON object")
	}
	var req checkRequest
	if err := unmarshalBody(buf.Bytes(), &req); err != nil {
		return nil, err
	}
	return &req, nil
}

// inputError is a 400 with the "Input Validation Error: " prefix.
func inputError(format string, args ...any) *Error {
	return apiErr(http.StatusBadRequest, CodeInvalidRequest, prefixInputValidation+format, args...)
}

// decodeInput decodes the messages, the parameters and from_index.
func decodeInput(req *checkRequest) (*checkInput, error) {
	if len(req.Messages) == 0 || bytes.Equal(bytes.TrimSpace(req.Messages), []byte("null")) {
		return nil, inputError("messages is required: a list of events")
	}
	t, err := trace.Decode(req.Messages)
	if err != nil {
		return nil, inputError("invalid_trace: messages: %v", err)
	}
	if n := len(t.Events); n > MaxCheckMessages {
		return nil, inputError("messages has %d events, more than the %d a check may hold", n, MaxCheckMessages)
	}
	in := &checkInput{t: t}
	if p := bytes.TrimSpace(req.Parameters); len(p) > 0 && !bytes.Equal(p, []byte("null")) {
		dec := json.NewDecoder(bytes.NewReader(p))
		dec.UseNumber() // integers stay integers, as in Python
		if err := dec.Decode(&in.params); err != nil {
			return nil, inputError("parameters must be a JSON object: %v", err)
		}
	}
	if req.FromIndex != nil {
		k := *req.FromIndex
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
// it with 429 when as many requests already wait. The caller calls the
// returned function when done.
func (c *checker) admit() (func(), error) {
	select {
	case c.waiting <- struct{}{}:
		return func() { <-c.waiting }, nil
	default:
		c.s.metrics.Add("vigil_check_rejected_total", 1)
		return nil, errOverloaded
	}
}

// slot waits for an evaluation slot until ctx ends.
func (c *checker) slot(ctx context.Context) (func(), error) {
	select {
	case c.slots <- struct{}{}:
		return func() { <-c.slots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// rule returns the compiled rule for src, from the cache or compiled now
// (and cached). A load error is returned as is.
func (c *checker) rule(src string) (*policy.Policy, error) {
	key := sha256Sum(src)
	if p := c.rules.get(key); p != nil {
		c.s.metrics.Add("vigil_check_rule_cache_total", 1, "hit")
		return p, nil
	}
	c.s.metrics.Add("vigil_check_rule_cache_total", 1, "miss")
	p, err := policy.Load(src, policy.Options{Name: "policy"})
	if err != nil {
		return nil, err
	}
	return c.rules.add(key, p), nil
}

// evaluate compiles src and runs it on in within an evaluation slot. ctx
// carries the request's evaluation deadline. The error is an *Error.
func (c *checker) evaluate(ctx context.Context, src string, in *checkInput) (*policy.Result, *Error) {
	release, err := c.slot(ctx)
	if err != nil {
		return nil, c.analysisError(ctx, &policy.AnalysisError{Code: policy.ErrCancelled, Msg: err.Error()})
	}
	defer release()
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

// handleCheck serves POST /api/v1/policy/check.
func (c *checker) handleCheck(w http.ResponseWriter, r *http.Request, _ *principal) error {
	done, err := c.admit()
	if err != nil {
		return err
	}
	defer done()
	req, err := c.readCheck(w, r)
	if err != nil {
		return err
	}
	if req.Policy == nil {
		return badRequest("policy is required: the rule text")
	}
	in, err := decodeInput(req)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), c.timeout)
	defer cancel()
	res, ae := c.evaluate(ctx, *req.Policy, in)
	if ae != nil {
		return ae
	}
	writeJSON(w, http.StatusOK, res)
	return nil
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
	done, err := c.admit()
	if err != nil {
		return err
	}
	defer done()
	req, err := c.readCheck(w, r)
	if err != nil {
		return err
	}
	if req.Policies == nil {
		return badRequest("policies is required: a list of rule texts")
	}
	in, err := decodeInput(req)
	if err != nil {
		return err
	}
	if id := r.Header.Get("X-Session-Id"); id != "" {
		c.s.log.Debug("policy batch check", "session_id", id, "policies", len(req.Policies))
	}
	ctx, cancel := context.WithTimeout(r.Context(), c.timeout)
	defer cancel()
	out := make([]batchEntry, len(req.Policies))
	workers := min(len(req.Policies), cap(c.slots))
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out[i] = c.batchOne(ctx, req.Policies[i], in)
			}
		}()
	}
	for i := range req.Policies {
		next <- i
	}
	close(next)
	wg.Wait()
	writeJSON(w, http.StatusOK, map[string]any{"result": out})
	return nil
}

func (c *checker) batchOne(ctx context.Context, src string, in *checkInput) batchEntry {
	res, ae := c.evaluate(ctx, src, in)
	if ae != nil {
		return batchEntry{Policy: src, ErrorMessage: ae.Detail, Errors: []policy.Violation{}, Failures: []policy.Failure{}, Warnings: []string{}}
	}
	return batchEntry{Policy: src, Success: true, Errors: res.Errors, Failures: res.Failures, Warnings: res.Warnings, Truncated: res.Truncated}
}

// handleLoad serves POST /api/v1/policy/load: compile and cache a rule.
// The success body has no "errors" key, which RemotePolicy reads as a
// failure.
func (c *checker) handleLoad(w http.ResponseWriter, r *http.Request, _ *principal) error {
	done, err := c.admit()
	if err != nil {
		return err
	}
	defer done()
	req, err := c.readCheck(w, r)
	if err != nil {
		return err
	}
	if req.Policy == nil {
		return badRequest("policy is required: the rule text")
	}
	ctx, cancel := context.WithTimeout(r.Context(), c.timeout)
	defer cancel()
	release, err := c.slot(ctx)
	if err != nil {
		return errOverloaded
	}
	defer release()
	if _, err := c.rule(*req.Policy); err != nil {
		return loadError(err)
	}
	writeJSON(w, http.StatusOK, map[string]bool{"success": true})
	return nil
}

// sha256Sum is the cache key of a rule text.
func sha256Sum(src string) [32]byte { return sha256.Sum256([]byte(src)) }

// ruleCache is an LRU cache of compiled rules keyed by sha256(rule text).
// It is safe for concurrent use.
type ruleCache struct {
	mu  sync.Mutex
	max int
	ll  *list.List // front: most recently used; values are *ruleEntry
	m   map[[32]byte]*list.Element
}

type ruleEntry struct {
	key [32]byte
	p   *policy.Policy
}

func newRuleCache(max int) *ruleCache {
	return &ruleCache{max: max, ll: list.New(), m: make(map[[32]byte]*list.Element, max)}
}

// get returns the cached rule for key, or nil.
func (c *ruleCache) get(key [32]byte) *policy.Policy {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok {
		return nil
	}
	c.ll.MoveToFront(e)
	return e.Value.(*ruleEntry).p
}

// add caches p under key, evicting the least recently used rule beyond
// the cache's size, and returns the cached rule (an earlier one when two
// requests compiled the same text at once).
func (c *ruleCache) add(key [32]byte, p *policy.Policy) *policy.Policy {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*ruleEntry).p
	}
	c.m[key] = c.ll.PushFront(&ruleEntry{key: key, p: p})
	for c.ll.Len() > c.max {
		old := c.ll.Back()
		c.ll.Remove(old)
		delete(c.m, old.Value.(*ruleEntry).key)
	}
	return p
}

// len returns the number of cached rules.
func (c *ruleCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}
