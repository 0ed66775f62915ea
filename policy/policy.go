// Package policy is the Vigil rule engine: it loads policies written in the
// Invariant policy language (spec/policy-language.md) and evaluates them on
// traces, whole (Analyze), against history (AnalyzePending) or
// incrementally as events arrive (Monitor).
//
// The facade is a pipeline in the shape of expr's Compile:
//
//	syntax.Parse → check.Check → eval.Compile → (*Policy).Analyze
//
// Goals: the spec's semantics exactly (the conformance suite in testdata
// passes), positions on every error, budgets instead of caps, and speed —
// loading takes microseconds and analysing a 10,000-event trace takes
// milliseconds.
//
// Non-goals: decoding traces (package trace), the detectors themselves
// (package detect, which registers them in package builtin), storing
// results (package store).
package policy

import (
	"context"
	"errors"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/vigilhq/vigil/policy/builtin"
	"github.com/vigilhq/vigil/policy/check"
	"github.com/vigilhq/vigil/policy/eval"
	"github.com/vigilhq/vigil/policy/syntax"
	"github.com/vigilhq/vigil/trace"
)

// Re-exported types, so that most callers import only this package.
type (
	// Source is a policy text with its name.
	Source = syntax.Source
	// Error is a load error with its position.
	Error = syntax.Error
	// ErrorList is the list of load errors of a policy.
	ErrorList = syntax.ErrorList
	// Result is the result object of spec §11.1.
	Result = eval.Result
	// Violation is one violation of a result.
	Violation = eval.Violation
	// Failure is a rule failure (spec §10.9).
	Failure = eval.Failure
	// AnalysisError is an analysis that failed (spec §11.7).
	AnalysisError = eval.AnalysisError
)

// Analysis error codes, matched with errors.Is (spec §11.7).
var (
	ErrInvalidTrace      = eval.ErrInvalidTrace
	ErrMissingParameter  = eval.ErrMissingParameter
	ErrReservedParameter = eval.ErrReservedParameter
	ErrCancelled         = eval.ErrCancelled
)

// ErrLoad is wrapped by every error Load returns; the wrapped ErrorList
// holds each load error with its position.
var ErrLoad = errors.New("policy load error")

// Options configure loading and analysis. The zero value uses the
// defaults.
type Options struct {
	// Name is the file name used in error positions ("policy" if empty).
	Name string
	// MaxSteps is the per-rule evaluation budget in steps (spec §10.10):
	// one step is one body line, or one value bound to a free variable,
	// under one binding. 0 means eval.DefaultMaxSteps (10,000,000), which
	// a 1,000-message trace with two free Message variables fits.
	MaxSteps int64
	// WallTime bounds each analysis; 0 means no limit. A server should set
	// one: the rule running out and every later rule then stop with
	// budget_exceeded.
	WallTime time.Duration
	// RegexTimeout bounds each regular-expression match; 0 means 1 s.
	RegexTimeout time.Duration
	// MaxViolations bounds the violations (satisfying bindings, before
	// merging) and, separately, the distinct failures one rule may
	// produce in an analysis. Going past it stops the rule with a
	// budget_exceeded failure; the first violations are kept and
	// Result.Truncated lists the rule. 0 means eval.DefaultMaxViolations
	// (10,000); a negative value means no limit.
	MaxViolations int
	// MaxValueSize bounds one value a rule builds (strings from +, *,
	// f-strings, format, join; lists from comprehensions, +, *, split,
	// built-ins), in bytes: a string's bytes, 16 per list element. Values
	// read from the trace are not counted. Building a larger value stops
	// the rule with budget_exceeded. 0 means eval.DefaultMaxValueSize
	// (16 MiB); a negative value means no budget (a repetition over
	// 16 MiB or 2^20 elements is then a value_error).
	MaxValueSize int64
	// MaxAlloc bounds the total size (counted as for MaxValueSize) of the
	// values one rule builds in an analysis; going past it stops the rule
	// with budget_exceeded. 0 means eval.DefaultMaxAlloc (256 MiB); a
	// negative value means no limit.
	MaxAlloc int64
	// Debug receives the output of print(); nil discards it.
	Debug io.Writer
	// Detectors replace, for this policy only, the registered built-ins
	// of the same names (package detect registers the defaults): a
	// caller's own model providers, or deterministic test doubles. Fields
	// left empty are taken from the registered declaration, as with
	// builtin.Register. Nil uses the registry alone.
	Detectors []builtin.Builtin
}

// Policy is a loaded policy. It is safe for concurrent use.
type Policy struct {
	src   *syntax.Source
	prog  *eval.Program
	opts  Options
	cache *eval.Cache
	// Warnings are the load-time warnings (the policy loaded).
	Warnings ErrorList
}

// Load parses and checks a policy. On failure the error wraps ErrLoad and
// an ErrorList (errors.As) with every load error, each rendered as
// file:line:col, the source line and a caret.
func Load(src string, opts Options) (*Policy, error) {
	name := opts.Name
	if name == "" {
		name = "policy"
	}
	s := syntax.NewSource(name, src)
	file, err := syntax.Parse(s)
	if err != nil {
		return nil, &loadError{err}
	}
	u := Universe()
	var overrides map[string]*builtin.Builtin
	if len(opts.Detectors) > 0 {
		overrides = map[string]*builtin.Builtin{}
		for _, d := range opts.Detectors {
			b := builtin.Merge(d)
			if d.Available == nil && d.Impl != nil {
				b.Available = func() bool { return true } // the caller provides it
			}
			overrides[b.Name] = b
		}
		u = universeWith(overrides)
	}
	checked, err := check.Check(file, u)
	if err != nil {
		return nil, &loadError{err}
	}
	prog, err := eval.CompileWith(checked, overrides)
	if err != nil {
		return nil, &loadError{err}
	}
	return &Policy{src: s, prog: prog, opts: opts, cache: eval.NewCache(0), Warnings: checked.Warnings}, nil
}

type loadError struct{ err error }

// Error returns the load errors, each with its position and source line.
func (e *loadError) Error() string { return e.err.Error() }

// Unwrap returns ErrLoad and the ErrorList.
func (e *loadError) Unwrap() []error { return []error{ErrLoad, e.err} }

// Source returns the policy source.
func (p *Policy) Source() *Source { return p.src }

// Params returns the names of the parameters the policy reads (input.NAME).
func (p *Policy) Params() []string { return p.prog.Params() }

func (p *Policy) evalOptions() eval.Options {
	return eval.Options{MaxSteps: p.opts.MaxSteps, WallTime: p.opts.WallTime, RegexTimeout: p.opts.RegexTimeout, Debug: p.opts.Debug, Cache: p.cache,
		MaxViolations: p.opts.MaxViolations, MaxValueSize: p.opts.MaxValueSize, MaxAlloc: p.opts.MaxAlloc}
}

// Params converts parameters to the engine's values. Values are Go values
// as decoded by encoding/json (nil, bool, float64 or json.Number, string,
// []any, map[string]any) or already engine values.
func params(ps map[string]any) *builtin.Dict {
	d := builtin.NewDict(len(ps))
	keys := make([]string, 0, len(ps))
	for k := range ps {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		d.Set(k, goValue(ps[k]))
	}
	return d
}

func goValue(v any) builtin.Value {
	switch x := v.(type) {
	case int:
		return int64(x)
	case int64, float64, string, bool, nil:
		return x
	case []string:
		out := make([]builtin.Value, len(x))
		for i, s := range x {
			out[i] = s
		}
		return out
	case []any:
		out := make([]builtin.Value, len(x))
		for i, e := range x {
			out[i] = goValue(e)
		}
		return out
	case map[string]any:
		return params(x)
	}
	return builtin.FromJSON(v)
}

// Analyze evaluates every rule on the trace (spec §10). It returns the
// result, or an *AnalysisError (errors.Is with ErrMissingParameter,
// ErrReservedParameter, ErrCancelled).
func (p *Policy) Analyze(ctx context.Context, t *trace.Trace, ps map[string]any) (*Result, error) {
	return p.prog.Run(ctx, eval.NewModel(t), params(ps), p.evalOptions(), eval.Mode{PendingFrom: -1})
}

// AnalyzeJSON decodes a trace (any shape trace.Decode accepts) and
// analyses it; a trace that cannot be normalised is the analysis error
// invalid_trace.
func (p *Policy) AnalyzeJSON(ctx context.Context, data []byte, ps map[string]any) (*Result, error) {
	t, err := DecodeTrace(data)
	if err != nil {
		return nil, err
	}
	return p.Analyze(ctx, t, ps)
}

// DecodeTrace decodes a trace for analysis, mapping decoding errors to the
// analysis error invalid_trace.
func DecodeTrace(data []byte) (*trace.Trace, error) {
	t, err := trace.Decode(data)
	if err != nil {
		return nil, &AnalysisError{Code: ErrInvalidTrace, Msg: err.Error()}
	}
	return t, nil
}

// AnalyzePending checks the pending events against the past ones (spec
// §12): past ++ pending is normalised as one trace, and a violation is
// reported only when its binding holds an event of pending.
func (p *Policy) AnalyzePending(ctx context.Context, past, pending *trace.Trace, ps map[string]any) (*Result, error) {
	return p.analyzePending(ctx, past, pending, params(ps))
}

// Params are rule parameters converted for the engine once, for several
// analyses with the same parameters (the input and output checks of one
// gateway call). They are only read, so they may be shared by analyses
// running at the same time.
type Params struct{ d *builtin.Dict }

// NewParams converts ps as the Analyze methods do.
func NewParams(ps map[string]any) *Params { return &Params{d: params(ps)} }

// AnalyzePendingParams is AnalyzePending with prepared parameters.
func (p *Policy) AnalyzePendingParams(ctx context.Context, past, pending *trace.Trace, ps *Params) (*Result, error) {
	return p.analyzePending(ctx, past, pending, ps.d)
}

// AnalyzeNewParams is AnalyzeNew with prepared parameters.
func (p *Policy) AnalyzeNewParams(ctx context.Context, past, pending *trace.Trace, ps *Params) (*Result, error) {
	pd := NewPending(past, pending)
	return p.prog.Run(ctx, pd.model, ps.d, p.evalOptions(), eval.Mode{PendingFrom: pd.from, Restrict: true})
}

func (p *Policy) analyzePending(ctx context.Context, past, pending *trace.Trace, ps *builtin.Dict) (*Result, error) {
	m := eval.NewModel(past)
	n := m.Len()
	if pending != nil {
		m.Append(pending.Events)
	}
	return p.prog.Run(ctx, m, ps, p.evalOptions(), eval.Mode{PendingFrom: n})
}

// AnalyzeNew is AnalyzePending at the cost of the new events: rules whose
// bindings hold events only through free variables skip every combination
// without a pending event, as Monitor.Append does. A failure that only
// past events cause is not reported. Durable monitors, which evaluate each
// stored write once, use it.
func (p *Policy) AnalyzeNew(ctx context.Context, past, pending *trace.Trace, ps map[string]any) (*Result, error) {
	return p.AnalyzeNewPending(ctx, NewPending(past, pending), ps)
}

// Pending is a trace split into past and pending events (spec §12),
// normalised once for the AnalyzeNewPending of several policies in turn.
// It is not safe for concurrent use: the selections it caches fill in as
// rules read them.
type Pending struct {
	model *eval.Model
	from  int
}

// NewPending normalises past ++ pending as one trace.
func NewPending(past, pending *trace.Trace) *Pending {
	m := eval.NewModel(past)
	n := m.Len()
	if pending != nil {
		m.Append(pending.Events)
	}
	return &Pending{model: m, from: n}
}

// AnalyzeNewPending is AnalyzeNew on a prepared trace.
func (p *Policy) AnalyzeNewPending(ctx context.Context, pd *Pending, ps map[string]any) (*Result, error) {
	return p.prog.Run(ctx, pd.model, params(ps), p.evalOptions(), eval.Mode{PendingFrom: pd.from, Restrict: true})
}

// Monitor evaluates a policy incrementally on a growing trace and reports
// each violation once (spec §12). It is safe for concurrent use; calls are
// serialised.
type Monitor struct {
	mu     sync.Mutex
	p      *Policy
	params *builtin.Dict
	model  *eval.Model
	memo   *eval.Memo
	seen   map[string]bool
	failed map[Failure]bool
	// checked is the number of events whose violations were reported
	checked int
}

// NewMonitor returns a monitor for p with the given parameters. It fails
// with an *AnalysisError if a parameter the policy uses is missing.
func (p *Policy) NewMonitor(ps map[string]any) (*Monitor, error) {
	m := &Monitor{p: p, params: params(ps), model: eval.NewModel(nil), memo: eval.NewMemo(), seen: map[string]bool{}, failed: map[Failure]bool{}}
	if _, err := p.prog.Run(context.Background(), eval.NewModel(nil), m.params, p.evalOptions(), eval.Mode{PendingFrom: 0}); err != nil {
		return nil, err
	}
	return m, nil
}

// Append adds events to the monitored trace and returns the violations
// they cause that no earlier call returned (by key). Work is proportional
// to the new events for rules whose events are all bound by free variables.
// Failures are reported once per monitor, like violations.
func (m *Monitor) Append(ctx context.Context, events ...*trace.Event) (*Result, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.model.Append(events)
	// events of an Append that failed (cancelled) are checked again with
	// the next one
	res, err := m.p.prog.Run(ctx, m.model, m.params, m.p.evalOptions(), eval.Mode{PendingFrom: m.checked, Restrict: true, Memo: m.memo})
	if err != nil {
		return nil, err
	}
	m.checked = m.model.Len()
	m.model.Warnings = m.model.Warnings[:0]
	return m.dedup(res), nil
}

// Check runs pending mode on past ++ pending with the monitor's parameters
// and returns the violations whose keys no earlier Check or Append of this
// monitor returned (spec §12). Callers pass a growing trace whose prefix
// never changes.
func (m *Monitor) Check(ctx context.Context, past, pending *trace.Trace) (*Result, error) {
	mod := eval.NewModel(past)
	n := mod.Len()
	if pending != nil {
		mod.Append(pending.Events)
	}
	res, err := m.p.prog.Run(ctx, mod, m.params, m.p.evalOptions(), eval.Mode{PendingFrom: n})
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dedup(res), nil
}

func (m *Monitor) dedup(res *Result) *Result {
	out := res.Errors[:0]
	for _, v := range res.Errors {
		if !m.seen[v.Key] { // keys start with the rule index
			m.seen[v.Key] = true
			out = append(out, v)
		}
	}
	res.Errors = out
	fs := res.Failures[:0]
	for _, f := range res.Failures {
		if !m.failed[f] {
			m.failed[f] = true
			fs = append(fs, f)
		}
	}
	res.Failures = fs
	return res
}

// Len returns the number of normalised events the monitor has seen.
func (m *Monitor) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.model.Len()
}
