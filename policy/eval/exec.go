package eval

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/vigilhq/vigil/policy/builtin"
	"github.com/vigilhq/vigil/policy/syntax"
)

// Program is a compiled policy, ready to analyse traces. It is immutable and
// safe for concurrent use.
type Program struct {
	src    *syntax.Source
	rules  []*rule
	consts []*constant
	params []string // names used as input.NAME, sorted
	// builtins replace registered built-ins for this program (CompileWith)
	builtins map[string]*builtin.Builtin
}

// Params returns the parameter names the policy reads (input.NAME), sorted.
func (p *Program) Params() []string { return p.params }

// NumRules returns the number of rules.
func (p *Program) NumRules() int { return len(p.rules) }

// Options are the budgets and environment of an analysis.
type Options struct {
	// MaxSteps is the per-rule step budget (spec §10.10); 0 means
	// DefaultMaxSteps.
	MaxSteps int64
	// WallTime bounds the whole analysis; 0 means no limit.
	WallTime time.Duration
	// RegexTimeout bounds each regular-expression match; 0 means 1 s.
	RegexTimeout time.Duration
	// Debug receives print() output; nil discards it.
	Debug io.Writer
	// MaxViolations bounds the satisfying bindings one rule may produce
	// in an analysis (before merging) and, separately, the distinct
	// failures it may report: a memory budget for servers. Going past it
	// stops the rule with a budget_exceeded failure; the violations kept
	// are the first ones and Result.Truncated lists the rule. 0 means
	// DefaultMaxViolations (10,000); a negative value means no limit (one
	// violation per satisfying binding, always, as spec §10.4 reads).
	MaxViolations int
	// MaxValueSize bounds one value a rule builds (a string from +, *,
	// an f-string, format, join, lower/upper; a list from a comprehension,
	// +, *, split, keys/values/items, a built-in; the display string of a
	// container), in bytes: a string's bytes, 16 per list or tuple element.
	// Building a larger one stops the rule with budget_exceeded. Values
	// read from the trace are never charged. A container counts its
	// elements deeply (a list holding one list 1,000 times counts those
	// elements 1,000 times). 0 means DefaultMaxValueSize (16 MiB); a
	// negative value means no budget (a repetition * over 16 MiB of
	// string or 2^20 list elements is then a value_error, as it was
	// before this budget).
	MaxValueSize int64
	// MaxAlloc bounds the total size, counted as for MaxValueSize, of the
	// values one rule builds in an analysis; going past it stops the rule
	// with budget_exceeded. 0 means DefaultMaxAlloc (256 MiB); a negative
	// value means no limit.
	MaxAlloc int64
	// Cache keeps results of cacheable built-ins across analyses (spec
	// §13.5); nil means a cache for this analysis only.
	Cache *Cache
	// CheckEvery is how many steps pass between checks of ctx and the
	// wall-time budget; 0 means 256.
	CheckEvery int64
}

// DefaultMaxSteps is the default per-rule step budget (spec §10.10).
const DefaultMaxSteps = 10_000_000

// Result is the result object of spec §11.1.
type Result struct {
	Errors   []Violation `json:"errors"`
	Failures []Failure   `json:"failures"`
	Warnings []string    `json:"warnings"`
	// Truncated lists, in rule order, the rules a budget stopped (each
	// with its budget_exceeded failure): their violations are the ones
	// produced before the budget ran out, so there may be more. Omitted
	// from JSON when empty.
	Truncated []int `json:"truncated,omitempty"`
}

// Violation is one violation (after merging, spec §11.5).
type Violation struct {
	Key    string             `json:"key"`
	Args   []any              `json:"args"`
	Kwargs builtin.OrderedMap `json:"kwargs"`
	Ranges []string           `json:"ranges"`
	// Rule is the rule index; Message the display string of args[0].
	Rule    int    `json:"-"`
	Message string `json:"-"`
	// Events are the trace indices of the events of the binding, for
	// pending-mode filtering and for consumers mapping keys.
	Events []int `json:"-"`
}

// Failure is a rule failure (spec §10.9).
type Failure struct {
	Rule    int    `json:"rule"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// Analysis error codes (spec §11.7), matched with errors.Is.
var (
	ErrInvalidTrace      = errors.New("invalid_trace")
	ErrMissingParameter  = errors.New("missing_parameter")
	ErrReservedParameter = errors.New("reserved_parameter")
	ErrCancelled         = errors.New("cancelled")
)

// AnalysisError is an analysis that failed (spec §11.7). Code is one of the
// sentinels above.
type AnalysisError struct {
	Code error
	Msg  string
}

// Error returns "code: message".
func (e *AnalysisError) Error() string { return e.Code.Error() + ": " + e.Msg }

// Unwrap returns the code sentinel.
func (e *AnalysisError) Unwrap() error { return e.Code }

// Mode selects normal or pending analysis.
type Mode struct {
	// PendingFrom is P of spec §12 (number of past events); -1 for a
	// normal analysis.
	PendingFrom int
	// Restrict lets rules whose bindings can only hold events through
	// free variables skip combinations with no new event entirely (a
	// Monitor uses it; failures of old events are then not re-reported).
	Restrict bool
	// Memo, when not nil, keeps the outcomes of single-variable lines
	// between analyses of a growing trace with the same parameters (a
	// Monitor passes the same Memo to every analysis). Nil means a fresh
	// memo for this analysis.
	Memo *Memo
}

// Memo holds line outcomes per event across analyses of one growing trace
// with fixed parameters. It must not be shared between traces, parameter
// sets or programs, nor used concurrently.
type Memo struct {
	tabs  map[*line][]memoEntry
	marks []mark
}

// NewMemo returns an empty memo.
func NewMemo() *Memo { return &Memo{tabs: map[*line][]memoEntry{}} }

type mark struct {
	at         *builtin.Path
	start, end int // start < 0: object range
}

type frame struct {
	an     *analysis
	slots  []builtin.Value
	marks  []mark
	order  []int
	markFn func(*builtin.Path, int, int) // f.mark, see markFunc
}

func (f *frame) mark(at *builtin.Path, start, end int) {
	f.marks = append(f.marks, mark{at: at, start: start, end: end})
}

// markFunc returns f.mark as a func value, made once per frame (a method
// value passed to a built-in escapes: one allocation per call).
func (f *frame) markFunc() func(*builtin.Path, int, int) {
	if f.markFn == nil {
		f.markFn = f.mark
	}
	return f.markFn
}

type budgetError struct {
	wall bool
	msg  string
}

type cancelError struct{ err error }

type analysis struct {
	ctx       context.Context
	prog      *Program
	model     *Model
	params    *builtin.Dict
	env       *builtin.Env
	opts      Options
	mode      Mode
	constVals []builtin.Value
	constErr  []*rtError
	constDone []uint8
	steps     int64
	polls     int64 // calls of poll
	ruleSteps int64
	deadline  time.Time
	failures  []Failure
	failSeen  map[Failure]bool
	warnings  []string
	warnSeen  map[string]bool
	cur       *rule
	wallOut   bool
	truncated []int
	// budgets resolved from Options (limit)
	maxViolations int64
	maxValue      int64
	maxAlloc      int64
	allocated     int64 // by the current rule
	ruleFailures  int64 // distinct failures of the current rule
	memo          *Memo
	cache         *Cache
	// forms are the JSON forms of the events that violations name, made
	// once per analysis: an event named by many violations (the call2 of
	// every call before it) shares one read-only form.
	forms map[builtin.Event]any
}

// jsonForm is builtin.JSONForm, made once per analysis for an event.
func (an *analysis) jsonForm(v builtin.Value) any {
	e, ok := v.(builtin.Event)
	if !ok {
		return builtin.JSONForm(v)
	}
	if f, ok := an.forms[e]; ok {
		return f
	}
	f := builtin.JSONForm(v)
	if an.forms == nil {
		an.forms = map[builtin.Event]any{}
	}
	an.forms[e] = f
	return f
}

// Run analyses model with params (a dict of JSON values, nil for none).
// It returns a result, or an *AnalysisError (missing or reserved
// parameter, cancellation). Runtime errors are rule failures in the
// result; budgets exhausted are budget_exceeded failures.
func (p *Program) Run(ctx context.Context, model *Model, params *builtin.Dict, opts Options, mode Mode) (res *Result, err error) {
	if params == nil {
		params = builtin.NewDict(0)
	}
	if _, ok := params.M["data"]; ok {
		return nil, &AnalysisError{Code: ErrReservedParameter, Msg: "the parameter name 'data' is reserved"}
	}
	for _, n := range p.params {
		if _, ok := params.M[n]; !ok {
			return nil, &AnalysisError{Code: ErrMissingParameter, Msg: fmt.Sprintf("missing policy parameter '%s' (the policy uses input.%s)", n, n)}
		}
	}
	if opts.MaxSteps <= 0 {
		opts.MaxSteps = DefaultMaxSteps
	}
	if opts.CheckEvery <= 0 {
		opts.CheckEvery = 256
	}
	env := builtin.DefaultEnv()
	if opts.RegexTimeout > 0 {
		env.RegexTimeout = opts.RegexTimeout
	}
	env.Debug = opts.Debug
	an := &analysis{ctx: ctx, prog: p, model: model, params: params, env: env, opts: opts, mode: mode,
		constVals: make([]builtin.Value, len(p.consts)), constErr: make([]*rtError, len(p.consts)), constDone: make([]uint8, len(p.consts)),
		failSeen: map[Failure]bool{}, warnSeen: map[string]bool{}, memo: mode.Memo}
	if an.memo == nil {
		an.memo = NewMemo()
	}
	an.maxViolations = limit(int64(opts.MaxViolations), DefaultMaxViolations)
	an.maxValue = limit(opts.MaxValueSize, DefaultMaxValueSize)
	an.maxAlloc = limit(opts.MaxAlloc, DefaultMaxAlloc)
	an.cache = opts.Cache
	if an.cache == nil {
		an.cache = NewCache(0)
	}
	env.Warn = an.warn
	if opts.WallTime > 0 {
		an.deadline = time.Now().Add(opts.WallTime)
	}
	for _, w := range model.Warnings {
		an.warn(w)
	}
	res = &Result{Errors: []Violation{}, Failures: []Failure{}, Warnings: []string{}}
	defer func() {
		if r := recover(); r != nil {
			if c, ok := r.(*cancelError); ok {
				res, err = nil, &AnalysisError{Code: ErrCancelled, Msg: c.err.Error()}
				return
			}
			rule := -1
			if an.cur != nil {
				rule = an.cur.index
			}
			where := ""
			if an.cur != nil {
				where = " at " + an.prog.src.Position(an.cur.pos).String()
			}
			res, err = nil, fmt.Errorf("policy: internal error in rule %d%s: %v", rule, where, r)
		}
	}()
	if err := ctx.Err(); err != nil {
		return nil, &AnalysisError{Code: ErrCancelled, Msg: err.Error()}
	}
	for _, r := range p.rules {
		an.cur = r
		res.Errors = append(res.Errors, an.runRule(r)...)
	}
	res.Failures = append(res.Failures, an.failures...)
	res.Warnings = append(res.Warnings, an.warnings...)
	res.Truncated = an.truncated
	return res, nil
}

func (an *analysis) warn(msg string) {
	if !an.warnSeen[msg] {
		an.warnSeen[msg] = true
		an.warnings = append(an.warnings, msg)
	}
}

func (an *analysis) fail(rule int, pos syntax.Pos, kind builtin.ErrorKind, msg string) {
	p := an.prog.src.Position(pos)
	fl := Failure{Rule: rule, Line: p.Line, Column: p.Column, Kind: string(kind), Message: msg}
	if an.failSeen[fl] {
		return
	}
	if kind != builtin.BudgetExceeded {
		// failures whose messages differ per binding (a missing key named
		// by the trace) would otherwise grow with the bindings
		if an.ruleFailures >= an.maxViolations {
			panic(&budgetError{msg: fmt.Sprintf("rule reported more than %d distinct failures", an.maxViolations)})
		}
		an.ruleFailures++
	}
	an.failSeen[fl] = true
	an.failures = append(an.failures, fl)
}

// poll checks the context and the wall-time budget every CheckEvery
// calls without counting steps: loops inside one line (comprehensions)
// call it so that a long line can still be stopped.
func (an *analysis) poll() {
	an.polls++
	if an.polls%an.opts.CheckEvery != 0 {
		return
	}
	if err := an.ctx.Err(); err != nil {
		panic(&cancelError{err})
	}
	if !an.deadline.IsZero() && time.Now().After(an.deadline) {
		panic(&budgetError{wall: true, msg: fmt.Sprintf("analysis exceeded its wall-time budget of %s", an.opts.WallTime)})
	}
}

func (an *analysis) step() {
	an.steps++
	an.ruleSteps++
	if an.ruleSteps > an.opts.MaxSteps {
		panic(&budgetError{msg: fmt.Sprintf("rule exceeded its evaluation budget of %d steps", an.opts.MaxSteps)})
	}
	if an.steps%an.opts.CheckEvery == 0 {
		if err := an.ctx.Err(); err != nil {
			panic(&cancelError{err})
		}
		if !an.deadline.IsZero() && time.Now().After(an.deadline) {
			panic(&budgetError{wall: true, msg: fmt.Sprintf("analysis exceeded its wall-time budget of %s", an.opts.WallTime)})
		}
	}
}

type hit struct {
	order []int
	v     Violation
	marks []mark
}

// runRule evaluates one rule and returns its violations, sorted in binding
// order and merged by key.
func (an *analysis) runRule(r *rule) []Violation {
	an.ruleSteps, an.allocated, an.ruleFailures = 0, 0, 0
	if an.wallOut {
		an.fail(r.index, r.pos, builtin.BudgetExceeded, fmt.Sprintf("analysis exceeded its wall-time budget of %s", an.opts.WallTime))
		an.truncated = append(an.truncated, r.index)
		return nil
	}
	// A rule that cannot bind (or, restricted, bind a new event) costs
	// no frame. Selecting spends no budget, so nothing here panics.
	if an.emptyFree(r.body) || an.nothingNew(r) {
		return nil
	}
	return an.execRule(r)
}

// execRule is runRule past its early returns.
func (an *analysis) execRule(r *rule) (out []Violation) {
	var hits []hit
	defer func() {
		if rec := recover(); rec != nil {
			b, ok := rec.(*budgetError)
			if !ok {
				panic(rec)
			}
			if b.wall {
				an.wallOut = true
			}
			an.fail(r.index, r.pos, builtin.BudgetExceeded, b.msg)
			an.truncated = append(an.truncated, r.index)
			out = mergeHits(hits)
		}
	}()
	f := &frame{an: an, slots: make([]builtin.Value, r.layout.nslots), order: make([]int, len(r.body.free))}
	lastBind := -1
	for i, st := range r.body.plan {
		if st.kind == stepBind {
			lastBind = i
		}
	}
	ctx := &execCtx{top: true, rule: r, lastBind: lastBind}
	ctx.yield = func() bool {
		if h, ok := an.violation(f, r); ok {
			if int64(len(hits)) >= an.maxViolations {
				panic(&budgetError{msg: fmt.Sprintf("rule produced more than %d violations; the first %d are kept", an.maxViolations, an.maxViolations)})
			}
			hits = append(hits, h)
		}
		return true
	}
	ctx.onFalse = func() bool { return true }
	an.exec(f, r.body, 0, ctx)
	return mergeHits(hits)
}

// nothingNew reports, for a restricted pending analysis, that no free
// variable of a rule can hold a new event, so the rule cannot report.
func (an *analysis) nothingNew(r *rule) bool {
	if !an.mode.Restrict || an.mode.PendingFrom < 0 || !r.pendingSafe {
		return false
	}
	for i := range r.body.plan {
		st := &r.body.plan[i]
		if st.kind != stepBind {
			continue
		}
		var base []builtin.Value
		if st.toolName != "" {
			base = an.model.toolSelect(st.toolName, st.v.typ)
		} else {
			base = an.model.Select(st.v.typ)
		}
		if n := len(base); n > 0 && IndexOf(base[n-1]) >= an.mode.PendingFrom {
			return false
		}
	}
	return true
}

type execCtx struct {
	top      bool
	rule     *rule
	lastBind int
	yield    func() bool
	onFalse  func() bool
}

func (an *analysis) emptyFree(b *body) bool {
	for _, v := range b.free {
		if len(an.model.Select(v.typ)) == 0 {
			return true
		}
	}
	return false
}

// exec runs the plan of b from step i (spec §10.2). It returns false when
// the caller asked to stop.
func (an *analysis) exec(f *frame, b *body, i int, x *execCtx) bool {
	if i == len(b.plan) {
		return x.yield()
	}
	st := &b.plan[i]
	nmarks := len(f.marks)
	defer func() {
		if x.top {
			f.marks = f.marks[:nmarks]
		}
	}()
	switch st.kind {
	case stepBind:
		cands := an.candidates(f, st, x, i)
		slot := st.v.slot
		for j, c := range cands {
			// binding a variable is a step (spec §10.10 counts the free
			// declaration line under each binding): a body of free
			// variables alone still spends its budget and polls the clock
			an.step()
			f.slots[slot] = c
			if x.top {
				// binding order: position in the variable's full range
				// (events: their sequence position; other values are never
				// filtered, so j is that position)
				f.order[st.v.order] = j
				if e, ok := c.(builtin.Event); ok {
					f.order[st.v.order] = e.Seq()
				}
			}
			if !an.exec(f, b, i+1, x) {
				f.slots[slot] = nil
				return false
			}
		}
		f.slots[slot] = nil
		return true
	case stepCond:
		if st.memo && x.top {
			return an.memoCond(f, b, i, x, st)
		}
		v, ok := an.evalLine(f, st.line, x)
		if !ok {
			return true
		}
		if !builtin.IsTrue(v) {
			return x.onFalse()
		}
		return an.exec(f, b, i+1, x)
	case stepAssign:
		v, ok := an.evalLine(f, st.line, x)
		if !ok {
			return true
		}
		f.slots[st.v.slot] = v
		r := an.exec(f, b, i+1, x)
		f.slots[st.v.slot] = nil
		return r
	case stepDerive:
		v, ok := an.evalLine(f, st.line, x)
		if !ok {
			return true
		}
		var sel []builtin.Value
		if builtin.Strip(v) != nil {
			sel = appendSelect(nil, st.v.typ, v)
		}
		for j, e := range sel {
			f.slots[st.v.slot] = e
			if x.top {
				f.order = append(f.order, j)
			}
			r := an.exec(f, b, i+1, x)
			if x.top {
				f.order = f.order[:len(f.order)-1]
			}
			if !r {
				f.slots[st.v.slot] = nil
				return false
			}
		}
		f.slots[st.v.slot] = nil
		return true
	}
	return true
}

// memoEntry is the outcome of a line that depends on one event variable
// only, for one event: evaluated once per analysis.
type memoEntry struct {
	state        uint8 // 0 not evaluated, 1 True, 2 not True or failed
	mstart, mend int32 // its marks: Memo.marks[mstart:mend]
}

// memoCond evaluates a single-variable line through the per-analysis memo
// (spec §13.5 applies the same idea to detector calls): the result and the
// marks it made are reused for every binding with the same event.
func (an *analysis) memoCond(f *frame, b *body, i int, x *execCtx, st *step) bool {
	e, ok := f.slots[st.v.slot].(builtin.Event)
	if !ok || e.Seq() >= len(an.model.Seq) || (st.line.traceDep && an.mode.Memo != nil) {
		v, ok := an.evalLine(f, st.line, x)
		if !ok {
			return true
		}
		if !builtin.IsTrue(v) {
			return x.onFalse()
		}
		return an.exec(f, b, i+1, x)
	}
	tab := an.memo.tabs[st.line]
	if n := len(an.model.Seq); len(tab) < n {
		switch {
		case cap(tab) >= n:
			tab = tab[:n]
		case tab == nil:
			tab = make([]memoEntry, n)
		default:
			tab = append(tab, make([]memoEntry, n-len(tab))...)
		}
		an.memo.tabs[st.line] = tab
	}
	me := &tab[e.Seq()]
	if me.state == 0 {
		n := len(f.marks)
		v, ok := an.evalLine(f, st.line, x)
		me.state = 2
		if ok && builtin.IsTrue(v) {
			me.state = 1
		}
		if len(f.marks) > n {
			me.mstart = int32(len(an.memo.marks))
			an.memo.marks = append(an.memo.marks, f.marks[n:]...)
			me.mend = int32(len(an.memo.marks))
		}
	} else if me.mend > me.mstart {
		f.marks = append(f.marks, an.memo.marks[me.mstart:me.mend]...)
	}
	if me.state != 1 {
		return x.onFalse()
	}
	return an.exec(f, b, i+1, x)
}

// evalLine evaluates a line. In a rule body a runtime error is recorded as
// a failure and stops the branch (ok false); elsewhere it propagates to the
// enclosing rule line.
func (an *analysis) evalLine(f *frame, ln *line, x *execCtx) (v builtin.Value, ok bool) {
	an.step()
	if !x.top {
		return ln.fn(f), true
	}
	defer func() {
		if r := recover(); r != nil {
			e, isRT := r.(*rtError)
			if !isRT {
				panic(r)
			}
			an.fail(x.rule.index, e.pos, e.kind, e.msg)
			v, ok = nil, false
		}
	}()
	return ln.fn(f), true
}

// candidates returns the values a free variable ranges over at a bind step,
// using the tool-name index, flow constraints (by position) and, in a
// restricted pending analysis, the new events only.
func (an *analysis) candidates(f *frame, st *step, x *execCtx, i int) []builtin.Value {
	v := st.v
	var base []builtin.Value
	if st.toolName != "" {
		base = an.model.toolSelect(st.toolName, v.typ)
	} else {
		base = an.model.Select(v.typ)
	}
	if !eventTypes[v.typ] {
		return base
	}
	lo, hi := -1, len(an.model.Seq) // exclusive bounds on Seq
	exact := -2
	var immPrev, immNext []string
	for _, fc := range st.flows {
		isA := fc.a == v
		other := fc.b
		if !isA {
			other = fc.a
		}
		ov := f.slots[other.slot]
		if oe, ok := ov.(builtin.Event); ok {
			s := oe.Seq()
			switch {
			case isA && fc.immediate:
				exact = mergeExact(exact, s-1)
			case isA:
				hi = min(hi, s)
			case fc.immediate:
				exact = mergeExact(exact, s+1)
			default:
				lo = max(lo, s)
			}
			continue
		}
		// other unbound: some value of its range must exist on the other side
		ob := an.model.Select(other.typ)
		if len(ob) == 0 {
			return nil
		}
		switch {
		case isA && fc.immediate:
			immNext = append(immNext, other.typ)
		case isA:
			hi = min(hi, ob[len(ob)-1].(builtin.Event).Seq())
		case fc.immediate:
			immPrev = append(immPrev, other.typ)
		default:
			lo = max(lo, ob[0].(builtin.Event).Seq())
		}
	}
	if exact == -3 {
		return nil
	}
	if exact >= -1 {
		lo, hi = max(lo, exact-1), min(hi, exact+1)
	}
	restrict := an.mode.Restrict && x.top && i == x.lastBind && an.mode.PendingFrom >= 0 && x.rule.pendingSafe
	if restrict {
		for _, fv := range x.rule.body.free {
			if fv != v {
				if e, ok := f.slots[fv.slot].(builtin.Event); ok && e.TraceIndex() >= an.mode.PendingFrom {
					restrict = false
				}
			}
		}
	}
	if lo < 0 && hi >= len(an.model.Seq) && immPrev == nil && immNext == nil && !restrict {
		return base
	}
	start := firstAfter(base, lo)
	out := base[start:]
	end := sort.Search(len(out), func(j int) bool { return out[j].(builtin.Event).Seq() >= hi })
	out = out[:end]
	if restrict {
		k := sort.Search(len(out), func(j int) bool { return out[j].(builtin.Event).TraceIndex() >= an.mode.PendingFrom })
		out = out[k:]
	}
	if immPrev != nil || immNext != nil {
		filtered := make([]builtin.Value, 0, len(out))
		for _, c := range out {
			s := c.(builtin.Event).Seq()
			ok := true
			for _, t := range immPrev {
				if s == 0 || builtin.TypeName(an.model.Seq[s-1]) != t {
					ok = false
				}
			}
			for _, t := range immNext {
				if s+1 >= len(an.model.Seq) || builtin.TypeName(an.model.Seq[s+1]) != t {
					ok = false
				}
			}
			if ok {
				filtered = append(filtered, c)
			}
		}
		out = filtered
	}
	return out
}

func mergeExact(cur, s int) int {
	if cur == -2 || cur == s {
		return s
	}
	return -3 // contradictory
}

// toolSelect returns the values of type t (ToolCall or ToolOutput) whose
// tool call is named name, in trace order (cached, extended on Append).
func (m *Model) toolSelect(name, t string) []builtin.Value {
	key := [2]string{name, t}
	s := m.toolSel[key]
	if s == nil {
		s = &selection{}
		m.toolSel[key] = s
	}
	ps := m.byTool[name]
	for ; s.upTo < len(ps); s.upTo++ {
		if e := m.Seq[ps[s.upTo]]; builtin.TypeName(e) == t {
			s.vals = append(s.vals, e)
		}
	}
	return s.vals
}

// violation builds the violation of a satisfying binding of a rule body.
func (an *analysis) violation(f *frame, r *rule) (hit, bool) {
	vars := r.body.vars
	// the events and the binding order in one allocation
	ints := make([]int, len(vars)+len(f.order))
	events := ints[:0:len(vars)]
	newEvent := an.mode.PendingFrom < 0
	for _, v := range vars {
		if idx := IndexOf(f.slots[v.slot]); idx >= 0 {
			events = append(events, idx)
			if idx >= an.mode.PendingFrom {
				newEvent = true
			}
		}
	}
	if !newEvent {
		return hit{}, false
	}
	// the key, "(rule, (idx, ...))" as Python writes the tuple
	var kb [64]byte
	key := append(kb[:0], '(')
	key = strconv.AppendInt(key, int64(r.index), 10)
	key = append(key, ", ("...)
	for i, v := range vars {
		if i > 0 {
			key = append(key, ", "...)
		}
		key = strconv.AppendInt(key, int64(IndexOf(f.slots[v.slot])), 10)
	}
	if len(vars) == 1 {
		key = append(key, ',')
	}
	key = append(key, "))"...)
	nmarks := len(f.marks)
	an.ruleSteps-- // the head is no body line: evalLine's step is undone first
	an.steps--
	headVal, ok := an.evalLine(f, &line{fn: r.head}, &execCtx{top: true, rule: r})
	f.marks = f.marks[:nmarks]
	if !ok {
		return hit{}, false
	}
	order := ints[len(vars):]
	copy(order, f.order)
	h := hit{order: order}
	h.v.Rule = r.index
	h.v.Key = string(key)
	h.v.Events = events
	if hv, ok := headVal.(*builtin.Violation); ok {
		// a violation's arguments are written out whole (JSON, text):
		// their size counts against the rule's memory budget, before
		// JSONForm copies them
		room := an.maxAlloc - an.allocated
		for _, a := range hv.Args {
			an.chargeTotal(outputSize(a, room))
		}
		for _, k := range hv.Kwargs.Keys {
			an.chargeTotal(outputSize(hv.Kwargs.M[k], room))
		}
	}
	var args []builtin.Value
	kwargs := builtin.OrderedMap{}
	switch hv := headVal.(type) {
	case *builtin.Violation:
		args = hv.Args
		for _, k := range hv.Kwargs.Keys {
			if k != "ranges" {
				kwargs = append(kwargs, builtin.KV{Key: k, Value: an.jsonForm(hv.Kwargs.M[k])})
			}
		}
	case string:
		args = []builtin.Value{hv}
	default:
		args = []builtin.Value{f.display(headVal)}
	}
	h.v.Args = make([]any, len(args))
	for i, a := range args {
		h.v.Args[i] = an.jsonForm(a)
	}
	if len(args) > 0 {
		h.v.Message = builtin.Display(args[0])
	}
	h.v.Kwargs = kwargs
	// ranges: object ranges of located variables, then the path's marks
	ms := make([]mark, 0, len(vars)+len(f.marks))
	for _, v := range vars {
		if at := builtin.At(f.slots[v.slot]); at != nil {
			ms = append(ms, mark{at: at, start: -1})
		}
	}
	ms = append(ms, f.marks...)
	h.marks = ms
	return h, true
}

func mergeHits(hits []hit) []Violation {
	slices.SortStableFunc(hits, func(a, b hit) int { return cmpOrder(a.order, b.order) })
	var out []Violation
	byKey := map[string]int{}
	var marks [][]mark
	for _, h := range hits {
		if i, ok := byKey[h.v.Key]; ok {
			marks[i] = append(marks[i], h.marks...)
			continue
		}
		byKey[h.v.Key] = len(out)
		out = append(out, h.v)
		marks = append(marks, h.marks)
	}
	for i := range out {
		out[i].Ranges = renderRanges(marks[i])
	}
	return out
}

// cmpOrder compares binding orders: element by element, then the shorter
// first.
func cmpOrder(a, b []int) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return cmp.Compare(a[i], b[i])
		}
	}
	return cmp.Compare(len(a), len(b))
}

type sortedMark struct {
	ords []int
	m    mark
	s    string
}

func renderRanges(ms []mark) []string {
	sm := make([]sortedMark, len(ms))
	// the ords of every mark in one allocation
	depth := 0
	for _, m := range ms {
		for q := m.at; q != nil; q = q.Parent {
			depth++
		}
	}
	ords := make([]int, depth)
	var buf [96]byte
	for i, m := range ms {
		b := m.at.AppendString(buf[:0])
		if m.start >= 0 {
			b = append(b, ':')
			b = strconv.AppendInt(b, int64(m.start), 10)
			b = append(b, '-')
			b = strconv.AppendInt(b, int64(m.end), 10)
		}
		n := 0
		for q := m.at; q != nil; q = q.Parent {
			n++
		}
		o := ords[:n:n]
		ords = ords[n:]
		for q := m.at; q != nil; q = q.Parent {
			n--
			o[n] = q.Ord
		}
		sm[i] = sortedMark{ords: o, m: m, s: string(b)}
	}
	slices.SortStableFunc(sm, func(a, b sortedMark) int {
		if c := cmpOrder(a.ords, b.ords); c != 0 {
			return c
		}
		if a.m.start != b.m.start {
			return cmp.Compare(a.m.start, b.m.start)
		}
		return cmp.Compare(a.m.end, b.m.end)
	})
	out := make([]string, 0, len(sm))
	if len(sm) <= 16 {
		// a few ranges: look for repeats in out itself
		for _, m := range sm {
			if !slices.Contains(out, m.s) {
				out = append(out, m.s)
			}
		}
		return out
	}
	seen := make(map[string]bool, len(sm))
	for _, m := range sm {
		if !seen[m.s] {
			seen[m.s] = true
			out = append(out, m.s)
		}
	}
	return out
}

// forall implements the forall quantifier (spec §10.7).
func (an *analysis) forall(f *frame, b *body) bool {
	if an.emptyFree(b) {
		return true
	}
	result := true
	an.exec(f, b, 0, &execCtx{
		yield:   func() bool { return true },
		onFalse: func() bool { result = false; return false },
	})
	return result
}

// count implements count(min, max) (spec §10.7); a bound < 0 is absent.
func (an *analysis) count(f *frame, b *body, lo, hi int64) bool {
	if an.emptyFree(b) {
		return lo <= 0
	}
	var n int64
	decided, result := false, false
	an.exec(f, b, 0, &execCtx{
		yield: func() bool {
			n++
			for _, v := range b.vars {
				if at := builtin.At(f.slots[v.slot]); at != nil {
					f.mark(at, -1, -1)
				}
			}
			if hi >= 0 && n > hi {
				decided, result = true, false
				return false
			}
			if hi < 0 && lo >= 0 && n >= lo {
				decided, result = true, true
				return false
			}
			return true
		},
		onFalse: func() bool { return true },
	})
	if decided {
		return result
	}
	return (lo < 0 || n >= lo) && (hi < 0 || n <= hi)
}

// constant returns the value of a top-level constant, evaluated once per
// analysis.
func (an *analysis) constant(k *constant, pos syntax.Pos) builtin.Value {
	switch an.constDone[k.index] {
	case 2:
		if e := an.constErr[k.index]; e != nil {
			panic(e)
		}
		return an.constVals[k.index]
	case 1:
		throw(pos, builtin.ValueError, "constant %s refers to itself", k.name)
	}
	an.constDone[k.index] = 1
	cf := &frame{an: an, slots: make([]builtin.Value, k.layout.nslots)}
	func() {
		defer func() {
			if r := recover(); r != nil {
				e, ok := r.(*rtError)
				if !ok {
					an.constDone[k.index] = 0
					panic(r)
				}
				an.constErr[k.index] = e
			}
		}()
		an.constVals[k.index] = builtin.Strip(k.fn(cf))
	}()
	an.constDone[k.index] = 2
	if e := an.constErr[k.index]; e != nil {
		panic(e)
	}
	return an.constVals[k.index]
}

// callValue calls fn (spec §6.7).
func callValue(f *frame, pos syntax.Pos, fn builtin.Value, args []builtin.Value, kw *builtin.Dict, kwnames []string) builtin.Value {
	switch g := fn.(type) {
	case *builtin.Builtin:
		return f.callBuiltin(pos, g, args, kw, kwnames)
	case *builtin.Method:
		return callMethod(f, pos, g, args, kw)
	case *predValue:
		return f.an.callPredicate(f, pos, g.p, args, kw)
	}
	throw(pos, builtin.TypeError, "'%s' object is not callable", builtin.TypeName(fn))
	return nil
}

func (f *frame) callBuiltinName(pos syntax.Pos, name string, args []builtin.Value, kw *builtin.Dict) builtin.Value {
	b, ok := f.an.prog.builtins[name]
	if !ok {
		b, ok = builtin.Lookup(name)
	}
	if !ok || b.Impl == nil {
		throw(pos, builtin.DetectorUnavailable, "detector %s is not available", name)
	}
	var names []string
	if kw != nil {
		names = kw.Keys
	}
	return f.callBuiltin(pos, b, args, kw, names)
}

func (f *frame) callBuiltin(pos syntax.Pos, b *builtin.Builtin, args []builtin.Value, kw *builtin.Dict, kwnames []string) builtin.Value {
	if err := b.CheckArity(len(args), kwnames); err != nil {
		throwErr(pos, err)
	}
	if b.Impl == nil {
		throw(pos, builtin.DetectorUnavailable, "detector %s is not available in this build", b.Name)
	}
	if an := f.an; an != nil {
		switch {
		case b.Name == "print" && an.env.Debug != nil:
			for _, a := range args {
				f.display(a) // print displays its arguments: bounded first
			}
		case !b.Core || b.Name == "text" || b.Name == "image":
			// detectors read their arguments whole; text() and image()
			// flatten them
			an.chargeTotal(argsInputSize(args, kw, an.maxAlloc-an.allocated))
		}
	}
	var v builtin.Value
	var err error
	if cacheable(b) {
		v, err = f.an.cache.call(f, b, args, kw, func(mark func(*builtin.Path, int, int)) (builtin.Value, error) {
			return f.runBuiltin(b, args, kw, mark)
		})
	} else {
		v, err = f.runBuiltin(b, args, kw, f.markFunc())
	}
	if err != nil {
		throwErr(pos, err)
	}
	switch v.(type) { // lists from text(), find(), tuple(), detectors
	case []builtin.Value, builtin.Tuple:
		f.chargeDeep(v)
	}
	return v
}

// runBuiltin runs built-in b with its marks going to mark. A built-in is
// code from another package (detect): its panic is a detector_error of
// this binding, never a crash of the analysis.
func (f *frame) runBuiltin(b *builtin.Builtin, args []builtin.Value, kw *builtin.Dict, mark func(*builtin.Path, int, int)) (v builtin.Value, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, builtin.Errorf(builtin.DetectorError, "%s failed: %v", b.Name, r)
		}
	}()
	return b.Impl(builtin.NewCall(f.an.ctx, b.Name, args, kw, f.an.env, mark))
}

// callPredicate evaluates a predicate call (spec §10.5).
func (an *analysis) callPredicate(f *frame, pos syntax.Pos, p *predicate, args []builtin.Value, kw *builtin.Dict) builtin.Value {
	pf := &frame{an: an, slots: make([]builtin.Value, p.layout.nslots), marks: f.marks}
	n := len(args)
	if kw != nil {
		n += kw.Len()
	}
	if n != len(p.params) || len(args) > len(p.params) {
		throw(pos, builtin.TypeError, "%s() takes %d arguments (%d given)", p.name, len(p.params), n)
	}
	for i, a := range args {
		pf.slots[p.params[i].slot] = a
	}
	if kw != nil {
		for _, k := range kw.Keys {
			found := false
			for i, prm := range p.params {
				if prm.name == k {
					if i < len(args) {
						throw(pos, builtin.TypeError, "%s() got multiple values for argument '%s'", p.name, k)
					}
					pf.slots[prm.slot] = kw.M[k]
					found = true
				}
			}
			if !found {
				throw(pos, builtin.TypeError, "%s() got an unexpected keyword argument '%s'", p.name, k)
			}
		}
	}
	var result bool
	if p.value != nil {
		an.step()
		result = builtin.IsTrue(p.value(pf))
	} else if p.body != nil && !an.emptyFree(p.body) {
		an.exec(pf, p.body, 0, &execCtx{
			yield:   func() bool { result = true; return false },
			onFalse: func() bool { return true },
		})
	}
	f.marks = pf.marks
	return result
}
