package server

// Backtest (explorer-api §9.4): a rule, or a stored guardrail version, run
// over a dataset's stored traces, either as an SSE stream of per-trace
// frames (…/policy-check/stream) or as one JSON answer that also compares
// with a baseline rule (…/policy-check, the safe-rollout check).
//
// The rule is loaded once; traces are read from the store page by page
// (store.IterTraceEvents: one row per trace, its events already one JSON
// array) and analysed by max_concurrent workers with the
// engine's budgets, so memory stays bounded whatever the dataset size. A
// rule that exhausts a budget is a failure or an error of that trace,
// never of the run. A client that goes away cancels the run: the reader
// and the workers stop at their next step.
//
// With store:true, violations become ledger findings (ledger.md §8.1):
// monitor id = the guardrail's id for policy_id+version, else
// "adhoc:<first 16 hex of sha256(rule text)>" (ledger.md §8.0), with
// context {"backtest": true, ...}, deduplicated on (monitor, run, key) by
// the store, so a rerun updates rather than duplicates.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	_ "github.com/vigilhq/vigil/detect" // registers the detectors rules call, as vigil check does
	"github.com/vigilhq/vigil/monitor"
	"github.com/vigilhq/vigil/policy"
	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/trace"
)

// Backtest limits.
const (
	// backtestWallTime bounds the analysis of one trace by one rule; a
	// trace that runs out is an error frame, the run goes on.
	backtestWallTime = 5 * time.Second
	// backtestMaxConcurrent caps max_concurrent.
	backtestMaxConcurrent = 64
	// backtestMaxListed caps the traces listed by …/policy-check.
	backtestMaxListed = 10000
	// backtestPageSize is how many traces are read per store query.
	backtestPageSize = 256
	// backtestIdleWait is how long the stream waits for the next outcome
	// before it flushes what it wrote: frames go out in batches while
	// the workers keep up, and within this delay when they pause.
	backtestIdleWait = 2 * time.Millisecond
)

// backtestHooks are test hooks; nil in production. beforeTrace runs in a
// worker before each trace is analysed (with the run's context and the
// trace index; a panic in it stands for one in the engine); done runs
// when a run has ended, with the number of traces analysed and the run's
// context error (non-nil when the client went away).
var backtestHooks struct {
	beforeTrace func(ctx context.Context, index int64)
	done        func(analysed int, ctxErr error)
}

// backtestBody is the request of both backtest endpoints.
type backtestBody struct {
	Policy        *string          `json:"policy"`
	Parameters    map[string]any   `json:"parameters"`
	PolicyID      string           `json:"policy_id"`
	Version       int              `json:"version"`
	Query         string           `json:"query"`
	MaxConcurrent int              `json:"max_concurrent"`
	Limit         int              `json:"limit"`
	Store         bool             `json:"store"`
	CompareTo     *backtestRuleRef `json:"compare_to"`
}

// backtestRuleRef names a rule: its text, or a stored guardrail version.
type backtestRuleRef struct {
	Policy   *string `json:"policy"`
	PolicyID string  `json:"policy_id"`
	Version  int     `json:"version"`
}

// backtestRule is a loaded rule with what its findings are filed under.
type backtestRule struct {
	pol       *policy.Policy
	hash      string // sha256 of the rule text, hex
	monitorID string
	monitor   string
	severity  string
	guardrail map[string]any // {id,name,content,action,version}; nil for rule text
	// metadata reports whether the rule reads input.metadata (so the
	// trace metadata must be decoded for it).
	metadata bool
}

// backtest is one prepared run.
type backtest struct {
	s          *Server
	ds         *store.Dataset
	rule       *backtestRule
	baseline   *backtestRule // nil without compare_to
	params     map[string]any
	concurrent int
	limit      int // 0 = all
	store      bool
	// ids, when not nil, are the traces the request's query matched
	// (explorer-api §9.4 query, §7 grammar); nil checks every trace.
	ids []string
}

// backtestOutcome is the result of one trace.
type backtestOutcome struct {
	ID        string
	Index     int64
	Err       string             // analysis error of the rule ("" = success)
	Errors    []policy.Violation // the rule's violations
	Failures  []policy.Failure
	Triggered bool
	// Baseline* are the compare_to rule's result.
	BaseErr       string
	BaseTriggered bool
}

// prepareBacktest decodes the body and loads the rules; every input
// error is a 400 (policy_invalid for a rule that does not compile) before
// anything is streamed.
func (s *Server) prepareBacktest(w http.ResponseWriter, r *http.Request, p *principal, compare bool) (*backtest, error) {
	d, err := s.datasetForWrite(r, p)
	if err != nil {
		return nil, err
	}
	var in backtestBody
	if err := s.decodeJSON(w, r, &in, false); err != nil {
		return nil, err
	}
	if in.MaxConcurrent < 0 || in.Limit < 0 {
		return nil, badRequest("max_concurrent and limit must be 0 or more")
	}
	if in.CompareTo != nil && !compare {
		return nil, badRequest("compare_to is accepted by POST /api/v1/dataset/byid/{id}/policy-check, not by the stream")
	}
	bt := &backtest{s: s, ds: d, params: in.Parameters, concurrent: in.MaxConcurrent, limit: in.Limit, store: in.Store}
	if bt.ids, err = s.datasetQueryIDs(r.Context(), d, in.Query); err != nil {
		return nil, err
	}
	if bt.concurrent == 0 {
		bt.concurrent = runtime.GOMAXPROCS(0)
	}
	bt.concurrent = min(bt.concurrent, backtestMaxConcurrent)
	if bt.rule, err = s.backtestRule(r.Context(), d, backtestRuleRef{Policy: in.Policy, PolicyID: in.PolicyID, Version: in.Version}, "policy"); err != nil {
		return nil, err
	}
	if in.CompareTo != nil {
		if bt.baseline, err = s.backtestRule(r.Context(), d, *in.CompareTo, "compare_to"); err != nil {
			return nil, err
		}
	}
	if _, ok := bt.params["metadata"]; ok {
		bt.rule.metadata = false
		if bt.baseline != nil {
			bt.baseline.metadata = false
		}
	}
	return bt, nil
}

// backtestRule resolves and loads ref (field names it in errors).
func (s *Server) backtestRule(ctx context.Context, d *store.Dataset, ref backtestRuleRef, field string) (*backtestRule, error) {
	br := &backtestRule{severity: store.SeverityWarn}
	var src string
	switch {
	case ref.Policy != nil && ref.PolicyID != "":
		return nil, badRequest("%s: give either policy or policy_id (with version), not both", field)
	case ref.PolicyID == "" && ref.Version != 0:
		return nil, badRequest("%s: version is the version of policy_id, which is missing", field)
	case ref.Policy != nil:
		if strings.TrimSpace(*ref.Policy) == "" {
			return nil, badRequest("%s: Policy content must be provided and non-empty", field)
		}
		src = *ref.Policy
	case ref.PolicyID != "":
		gv, err := s.backtestGuardrail(ctx, d, ref, field)
		if err != nil {
			return nil, err
		}
		src = gv.Content
		br.monitorID, br.monitor = gv.GuardrailID, gv.Name
		if gv.Severity != "" {
			br.severity = gv.Severity
		}
		br.guardrail = map[string]any{"id": gv.GuardrailID, "name": gv.Name, "content": gv.Content, "action": gv.Action, "version": gv.Version}
	default:
		return nil, badRequest("%s: give policy (the rule text) or policy_id and version", field)
	}
	sum := sha256.Sum256([]byte(src))
	br.hash = hex.EncodeToString(sum[:])
	if br.monitorID == "" {
		br.monitorID = "adhoc:" + br.hash[:16]
		br.monitor = "backtest " + br.hash[:16]
	}
	// Loaded here rather than through s.rules: a backtest's rule gets a
	// wall-time budget per trace, and one load per run is nothing beside
	// the run.
	pol, err := policy.Load(src, policy.Options{Name: field, WallTime: backtestWallTime})
	if err != nil {
		e := policyInvalid(err)
		e.Extra["field"] = field // which rule: policy or compare_to
		return nil, e
	}
	br.pol = pol
	br.metadata = slices.Contains(pol.Params(), "metadata")
	return br, nil
}

// backtestGuardrail returns version ref.Version (0: the current one) of a
// guardrail of dataset d, or 404.
func (s *Server) backtestGuardrail(ctx context.Context, d *store.Dataset, ref backtestRuleRef, field string) (*store.GuardrailVersion, error) {
	n := ref.Version
	if n < 0 {
		return nil, badRequest("%s: version must be 1 or more", field)
	}
	if n == 0 {
		g, err := s.st.GetGuardrail(ctx, ref.PolicyID)
		if errors.Is(err, store.ErrNotFound) || err == nil && g.DatasetID != d.ID {
			return nil, notFound("%s: Policy not found: no guardrail %s in dataset %s", field, ref.PolicyID, d.ID)
		}
		if err != nil {
			return nil, fmt.Errorf("backtest: guardrail %s: %w", ref.PolicyID, err)
		}
		n = g.Version
	}
	gv, err := s.st.GetGuardrailVersion(ctx, ref.PolicyID, n)
	if errors.Is(err, store.ErrNotFound) || err == nil && gv.DatasetID != d.ID {
		return nil, notFound("%s: Policy not found: no version %d of guardrail %s in dataset %s", field, n, ref.PolicyID, d.ID)
	}
	if err != nil {
		return nil, fmt.Errorf("backtest: guardrail %s version %d: %w", ref.PolicyID, n, err)
	}
	return gv, nil
}

// count returns how many traces the run will check (before it starts;
// traces pushed meanwhile may change the actual number).
func (bt *backtest) count(ctx context.Context) (int, error) {
	n := len(bt.ids)
	if bt.ids == nil {
		var err error
		if n, err = bt.s.st.CountTraces(ctx, store.TraceFilter{DatasetID: bt.ds.ID}); err != nil {
			return 0, fmt.Errorf("backtest: count traces of dataset %s: %w", bt.ds.ID, err)
		}
	}
	if bt.limit > 0 {
		n = min(n, bt.limit)
	}
	return n, nil
}

// run analyses the dataset's traces and calls emit with each outcome in
// completion order, from the calling goroutine, and idle (when not nil)
// when no further outcome came within backtestIdleWait of the last one. It stops early when ctx ends or
// emit or idle fails (that error is returned). Store read errors are
// returned after the outcomes already produced.
func (bt *backtest) run(ctx context.Context, emit func(*backtestOutcome) error, idle func() error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A page of buffer lets the reader query the next page while the
	// workers analyse this one (with a small buffer they idled through
	// every page query).
	jobs := make(chan *store.TraceEvents, backtestPageSize)
	results := make(chan *backtestOutcome, 2*bt.concurrent)
	var readErr error
	go func() { // the reader: one page of traces at a time
		defer close(jobs)
		n := 0
		size := backtestPageSize
		if bt.limit > 0 {
			size = min(size, bt.limit)
		}
		for t, err := range bt.s.st.IterTraceEvents(ctx, bt.ds.ID, store.IterOptions{PageSize: size, IDs: bt.ids}) {
			if err != nil {
				if ctx.Err() == nil {
					readErr = err
				}
				return
			}
			select {
			case jobs <- t:
			case <-ctx.Done():
				return
			}
			if n++; bt.limit > 0 && n >= bt.limit {
				return
			}
		}
	}()
	var wg sync.WaitGroup
	analysed := 0
	var mu sync.Mutex
	for range bt.concurrent {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &backtestWorker{bt: bt}
			for t := range jobs {
				if ctx.Err() != nil {
					continue // drain: the reader stops at its next send
				}
				o := w.safeEvaluate(ctx, t)
				if o == nil { // cancelled mid-trace
					continue
				}
				mu.Lock()
				analysed++
				mu.Unlock()
				select {
				case results <- o:
				case <-ctx.Done():
				}
			}
		}()
	}
	go func() { wg.Wait(); close(results) }()
	var emitErr error
	pending := false // outcomes emitted since idle last ran
	for {
		o, ok := nextOutcome(results, pending && idle != nil)
		if !ok {
			break
		}
		if emitErr != nil || ctx.Err() != nil {
			continue // drain
		}
		if o == nil { // none ready for a while
			pending = false
			emitErr = idle()
		} else {
			pending = true
			emitErr = emit(o)
		}
		if emitErr != nil {
			cancel()
		}
	}
	if h := backtestHooks.done; h != nil {
		h(analysed, ctx.Err())
	}
	if emitErr != nil {
		return emitErr
	}
	return readErr
}

// nextOutcome receives the next outcome; false once results is closed.
// With idle, when none comes within backtestIdleWait it returns nil and
// true instead: the stream calls idle (flushes) when the workers pause,
// not after every frame that happens to find the channel empty.
func nextOutcome(results <-chan *backtestOutcome, idle bool) (*backtestOutcome, bool) {
	if !idle {
		o, ok := <-results
		return o, ok
	}
	select {
	case o, ok := <-results:
		return o, ok
	default:
	}
	t := time.NewTimer(backtestIdleWait)
	defer t.Stop()
	select {
	case o, ok := <-results:
		return o, ok
	case <-t.C:
		return nil, true
	}
}

// backtestWorker analyses traces.
type backtestWorker struct {
	bt *backtest
}

// safeEvaluate is evaluate with a panic (a bug in the engine or a
// detector) turned into that trace's error: the goroutine is not the
// request's, so the server's recovery would not catch it.
func (w *backtestWorker) safeEvaluate(ctx context.Context, te *store.TraceEvents) (o *backtestOutcome) {
	defer func() {
		if v := recover(); v != nil {
			w.bt.s.log.Error("panic in a backtest", "trace", te.Trace.ID, "panic", v, "stack", string(debug.Stack()))
			msg := fmt.Sprintf("internal error analysing trace %s: %v", te.Trace.ID, v)
			o = &backtestOutcome{ID: te.Trace.ID, Index: te.Trace.Index, Err: msg, BaseErr: msg}
		}
	}()
	if h := backtestHooks.beforeTrace; h != nil {
		h(ctx, te.Trace.Index)
	}
	return w.evaluate(ctx, te)
}

// evaluate analyses one trace with the rule (and the baseline); nil when
// ctx ended during it.
func (w *backtestWorker) evaluate(ctx context.Context, te *store.TraceEvents) *backtestOutcome {
	t := te.Trace
	o := &backtestOutcome{ID: t.ID, Index: t.Index}
	tr, err := trace.Decode(te.Events)
	if err != nil {
		o.Err = fmt.Sprintf("invalid_trace: stored trace %s: %v", t.ID, err)
		o.BaseErr = o.Err
		return o
	}
	res, err := w.analyze(ctx, w.bt.rule, t, tr)
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		o.Err = err.Error()
	} else {
		o.Errors, o.Failures, o.Triggered = res.Errors, res.Failures, len(res.Errors) > 0
		if w.bt.store && o.Triggered {
			if err := w.bt.storeFindings(ctx, t, tr, w.bt.rule, res.Errors); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				o.Err = err.Error()
			}
		}
	}
	if w.bt.baseline != nil {
		res, err := w.analyze(ctx, w.bt.baseline, t, tr)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			o.BaseErr = err.Error()
		} else {
			o.BaseTriggered = len(res.Errors) > 0
		}
	}
	return o
}

// analyze runs one rule on tr with the request parameters plus, when the
// rule reads it, the trace metadata as input.metadata.
func (w *backtestWorker) analyze(ctx context.Context, br *backtestRule, t *store.Trace, tr *trace.Trace) (*policy.Result, error) {
	ps := w.bt.params
	if br.metadata {
		md := map[string]any{}
		if len(t.Metadata) > 0 {
			if err := json.Unmarshal(t.Metadata, &md); err != nil {
				return nil, fmt.Errorf("invalid_trace: metadata of trace %s: %w", t.ID, err)
			}
		}
		ps = make(map[string]any, len(w.bt.params)+1)
		for k, v := range w.bt.params {
			ps[k] = v
		}
		ps["metadata"] = md
	}
	return br.pol.Analyze(ctx, tr, ps)
}

// storeFindings files each violation as a finding (ledger.md §8.1),
// mapped by monitor.NewFinding as the monitors map theirs: keys and
// citations at stored event positions (policy-language §11.4), citations
// with their ledger nodes, which it reads from the trace's messages.
func (bt *backtest) storeFindings(ctx context.Context, t *store.Trace, tr *trace.Trace, br *backtestRule, vs []policy.Violation) error {
	full, err := bt.s.st.GetTrace(ctx, t.ID, true)
	if err != nil {
		return fmt.Errorf("read trace %s for its findings: %w", t.ID, err)
	}
	nodeIDs := make([][]string, len(full.Messages))
	for i, m := range full.Messages {
		nodeIDs[i] = m.NodeIDs
	}
	ev, src := monitor.NewEvaluated(tr, nodeIDs), br.source()
	for _, v := range vs {
		f := monitor.NewFinding(src, ev, v)
		f.RunID, f.OwnerID = t.ID, bt.ds.OwnerID
		if _, _, err := bt.s.st.UpsertFinding(ctx, f); err != nil {
			return fmt.Errorf("store finding %s of trace %s: %w", f.Key, t.ID, err)
		}
	}
	return nil
}

// source is the monitor a stored backtest finding comes from: the
// guardrail or the ad-hoc rule, with context {"backtest": true,
// "policy_hash", "guardrail"?}.
func (br *backtestRule) source() monitor.Source {
	c := map[string]any{"backtest": true, "policy_hash": br.hash}
	if br.guardrail != nil {
		c["guardrail"] = br.guardrail
	}
	ctx, _ := marshalNoEscape(c) // plain maps: always encodable
	return monitor.Source{MonitorID: br.monitorID, Monitor: br.monitor, Severity: br.severity, Context: ctx}
}

// backtestFrame is a per-trace frame of the stream.
type backtestFrame struct {
	TraceID   string           `json:"traceId"`
	Index     int64            `json:"index"`
	Status    string           `json:"status"`
	Triggered *bool            `json:"triggered,omitempty"`
	Errors    any              `json:"errors,omitempty"` // []policy.Violation, [] when none; nil on error frames
	Failures  []policy.Failure `json:"failures,omitempty"`
	Error     string           `json:"error,omitempty"`
}

// backtestSummary is the stream's summary.
type backtestSummary struct {
	NumTraces    int   `json:"num_traces"`
	NumTriggered int   `json:"num_triggered"`
	NumErrors    int   `json:"num_errors"`
	NumFailures  int   `json:"num_failures"`
	DurationMS   int64 `json:"duration_ms"`
}

// handleBacktestStream serves POST /api/v1/dataset/byid/{id}/policy-check/stream.
func (s *Server) handleBacktestStream(w http.ResponseWriter, r *http.Request, p *principal) error {
	bt, err := s.prepareBacktest(w, r, p, false)
	if err != nil {
		return err
	}
	start := time.Now()
	n, err := bt.count(r.Context())
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	var buf bytes.Buffer
	frame := func(v any) error {
		buf.Reset()
		buf.WriteString("data: ")
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return fmt.Errorf("backtest: encode frame: %w", err)
		}
		buf.Truncate(buf.Len() - 1) // Encode's newline
		buf.WriteString("\n\n")
		_, err := w.Write(buf.Bytes())
		return err
	}
	if err := frame(map[string]any{"metadata": map[string]any{"num_traces": n, "max_concurrent": bt.concurrent}}); err != nil {
		return err
	}
	if err := rc.Flush(); err != nil {
		return err
	}
	var sum backtestSummary
	sinceFlush := 0
	var clean []byte // appendCleanFrame's buffer
	err = bt.run(r.Context(), func(o *backtestOutcome) error {
		sum.NumTraces++
		f := backtestFrame{TraceID: o.ID, Index: o.Index, Status: "success"}
		switch {
		case o.Err != "":
			sum.NumErrors++
			f.Status, f.Error = "error", o.Err
		default:
			f.Triggered = &o.Triggered
			f.Errors, f.Failures = o.Errors, o.Failures
			if o.Errors == nil {
				f.Errors = []policy.Violation{}
			}
			if o.Triggered {
				sum.NumTriggered++
			}
			if len(o.Failures) > 0 {
				sum.NumFailures++
			}
		}
		if f.Error == "" && len(o.Errors) == 0 && len(o.Failures) == 0 && plainJSONString(o.ID) {
			// The frame of a clean trace, the common one, written
			// directly: the bytes encoding/json would write.
			clean = appendCleanFrame(clean[:0], o.ID, o.Index)
			if _, err := w.Write(clean); err != nil {
				return err
			}
		} else if err := frame(f); err != nil {
			return err
		}
		// Flush at least every 64 frames and whenever the workers pause
		// (idle: no outcome for backtestIdleWait), so frames arrive
		// promptly without a syscall per frame.
		if sinceFlush++; sinceFlush >= 64 {
			sinceFlush = 0
			return rc.Flush()
		}
		return nil
	}, func() error { sinceFlush = 0; return rc.Flush() })
	if err != nil {
		if r.Context().Err() != nil {
			return nil // the client went away; nobody to tell
		}
		// Frames were sent: the error cannot be a status any more. Say it
		// in a last frame, then abort (see handle).
		if frame(map[string]any{"done": false, "error": err.Error()}) == nil {
			_ = rc.Flush()
		}
		return err
	}
	sum.DurationMS = time.Since(start).Milliseconds()
	if err := frame(map[string]any{"done": true, "summary": sum}); err != nil {
		return nil
	}
	_ = rc.Flush()
	return nil
}

// appendCleanFrame appends the SSE frame of a trace without violations,
// failures or error, as encoding/json writes its backtestFrame; id must be
// plainJSONString.
func appendCleanFrame(b []byte, id string, index int64) []byte {
	b = append(b, `data: {"traceId":"`...)
	b = append(b, id...)
	b = append(b, `","index":`...)
	b = strconv.AppendInt(b, index, 10)
	return append(b, `,"status":"success","triggered":false,"errors":[]}`+"\n\n"...)
}

// plainJSONString reports whether s is printable ASCII that encoding/json
// writes as is between quotes (no '"', '\\' or control character).
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// backtestCompareTrace is one trace listed by …/policy-check.
type backtestCompareTrace struct {
	ID                string             `json:"id"`
	Index             int64              `json:"index"`
	Triggered         bool               `json:"triggered"`
	BaselineTriggered bool               `json:"baseline_triggered"`
	Errors            []policy.Violation `json:"errors"`
	Error             string             `json:"error,omitempty"`
	BaselineError     string             `json:"baseline_error,omitempty"`
}

// backtestCompareSummary is the summary of …/policy-check.
type backtestCompareSummary struct {
	NumTraces         int   `json:"num_traces"`
	NumTriggered      int   `json:"num_triggered"`
	BaselineTriggered int   `json:"baseline_triggered"`
	NewlyTriggered    int   `json:"newly_triggered"`
	NoLongerTriggered int   `json:"no_longer_triggered"`
	NumErrors         int   `json:"num_errors"`
	DurationMS        int64 `json:"duration_ms"`
	// Truncated is set when more traces triggered than are listed.
	Truncated bool `json:"truncated,omitempty"`
}

// handleBacktestCompare serves POST /api/v1/dataset/byid/{id}/policy-check.
func (s *Server) handleBacktestCompare(w http.ResponseWriter, r *http.Request, p *principal) error {
	bt, err := s.prepareBacktest(w, r, p, true)
	if err != nil {
		return err
	}
	start := time.Now()
	var sum backtestCompareSummary
	listed := []backtestCompareTrace{}
	byIndex := func(a, b backtestCompareTrace) int {
		if a.Index != b.Index {
			return int(a.Index - b.Index)
		}
		return strings.Compare(a.ID, b.ID)
	}
	err = bt.run(r.Context(), func(o *backtestOutcome) error {
		sum.NumTraces++
		if o.Err != "" || o.BaseErr != "" {
			sum.NumErrors++
		}
		if o.Triggered {
			sum.NumTriggered++
		}
		if o.BaseTriggered {
			sum.BaselineTriggered++
		}
		if bt.baseline != nil {
			if o.Triggered && !o.BaseTriggered && o.BaseErr == "" {
				sum.NewlyTriggered++
			}
			if o.BaseTriggered && !o.Triggered && o.Err == "" {
				sum.NoLongerTriggered++
			}
		}
		if !o.Triggered && !o.BaseTriggered && o.Err == "" && o.BaseErr == "" {
			return nil
		}
		errs := o.Errors
		if errs == nil {
			errs = []policy.Violation{}
		}
		listed = append(listed, backtestCompareTrace{ID: o.ID, Index: o.Index, Triggered: o.Triggered,
			BaselineTriggered: o.BaseTriggered, Errors: errs, Error: o.Err, BaselineError: o.BaseErr})
		if len(listed) >= 2*backtestMaxListed { // keep the lowest indices, bounded
			slices.SortFunc(listed, byIndex)
			listed = listed[:backtestMaxListed]
			sum.Truncated = true
		}
		return nil
	}, nil)
	if err != nil {
		return err
	}
	if r.Context().Err() != nil {
		return nil
	}
	slices.SortFunc(listed, byIndex)
	if len(listed) > backtestMaxListed {
		listed, sum.Truncated = listed[:backtestMaxListed], true
	}
	sum.DurationMS = time.Since(start).Milliseconds()
	writeJSON(w, http.StatusOK, map[string]any{"summary": sum, "traces": listed})
	return nil
}
