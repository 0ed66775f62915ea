package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/vigilhq/vigil/policy"
	"github.com/vigilhq/vigil/trace"
)

// This file resolves the rules of a request (spec §5) and evaluates them
// (spec §6), recording per rule whether it ran, matched, was skipped or
// failed.

// Header rule ids and names (spec §5).
const (
	headerRuleID   = "guardrails-from-header"
	headerRuleName = "guardrails from request header"
	// FileRuleID and FileRuleName name the guardrails_file rule.
	FileRuleID   = "guardrails-from-gateway-config-file"
	FileRuleName = "guardrails from gateway configuration file"
)

// rules are the guardrails of one request, split by action.
type rules struct {
	block, log []*Guardrail
	version    string
	params     map[string]any
	// engineParams are params converted for the engine (ruleParams).
	engineParams *policy.Params
	paramsOnce   sync.Once
	// streamFinal: a blocking rule is non-monotone (buffer mode).
	streamFinal bool
}

func (rs *rules) empty() bool { return len(rs.block) == 0 && len(rs.log) == 0 }

// result returns the Vigil-Guardrail-Result of a call with no failure
// and no block.
func (rs *rules) passResult() string {
	switch {
	case rs.empty():
		return "none"
	case len(rs.block) == 0:
		return "log"
	}
	return "pass"
}

// resolve builds the rules of a request: global, dataset and header
// rules, with blocking and logging rules split and duplicates (same
// content) evaluated once, as blocking. A header rule that does not
// compile is returned as the error (a policy load error).
func (g *Gateway) resolve(ctx context.Context, id *Identity, dataset, header string) (*rules, error) {
	rs := &rules{version: "none"}
	var all []*Guardrail
	all = append(all, g.Global()...)
	mode := g.opts.HeaderGuardrails
	if header == "" || mode == "ignore" {
		header = ""
	}
	var hdr *Guardrail
	if header != "" {
		p, err := g.compiler.Load(header)
		if err != nil {
			return nil, err
		}
		hdr = &Guardrail{ID: headerRuleID, Name: headerRuleName, Content: header, Action: "block", Policy: p}
	}
	if id != nil && dataset != "" && g.opts.Rules != nil && !(hdr != nil && mode == "replace") {
		r, err := g.opts.Rules.Ruleset(ctx, id, dataset)
		if err != nil {
			// Rules that cannot be obtained are an evaluation failure.
			all = append(all, &Guardrail{ID: "dataset-rules", Name: "dataset " + dataset, Action: "block", Err: fmt.Errorf("dataset rules unavailable: %w", err)})
		} else if r != nil {
			rs.version = r.Version
			all = append(all, r.Guardrails...)
		}
	}
	if hdr != nil {
		all = append(all, hdr)
	}
	seen := map[string]int{} // content → index in block
	for _, gr := range all {
		if gr.Action == "block" || gr.Action == "" {
			if i, ok := seen[gr.Content]; ok && gr.Err == nil && gr.Content != "" {
				_ = i
				continue
			}
			seen[gr.Content] = len(rs.block)
			rs.block = append(rs.block, gr)
			if gr.StreamFinal {
				rs.streamFinal = true
			}
		}
	}
	for _, gr := range all {
		if gr.Action == "log" {
			if _, ok := seen[gr.Content]; ok {
				continue
			}
			rs.log = append(rs.log, gr)
		}
	}
	return rs, nil
}

// Rule statuses recorded per call and phase.
const (
	ruleRan     = "ran"     // evaluated, no violation
	ruleMatched = "matched" // evaluated, violations
	ruleSkipped = "skipped" // not evaluated (say, output rules after an upstream error)
	ruleError   = "error"   // evaluation failed
)

// verdict is the outcome of evaluating a phase.
type verdict struct {
	// errors are the violations, each an Error object with its guardrail.
	errors []map[string]any
	// rules[i] is the guardrail of errors[i].
	rules []*Guardrail
	// blocked: a blocking violation, or a failure under fail-closed.
	blocked bool
	// failure is the reason of an evaluation failure ("" when none).
	failure string
	// statuses maps guardrail id to its status.
	statuses map[string]string
	elapsed  time.Duration
	// index maps an evaluated event index to its stored position when
	// the evaluated list is not the request then the response (session
	// scope); nil: the call's usual mapping.
	index func(int) int
}

func (v *verdict) details() map[string]any {
	return map[string]any{"errors": v.errors}
}

// evaluate runs gs over past ++ pending in pending mode (all events when
// past is empty and whole is set).
func (g *Gateway) evaluate(ctx context.Context, gs []*Guardrail, past, pending []event, params map[string]any, blocking bool) *verdict {
	start := time.Now()
	v := &verdict{statuses: make(map[string]string, len(gs))}
	if len(gs) == 0 {
		return v
	}
	pt, err1 := toTrace(past)
	nt, err2 := toTrace(pending)
	if err := errors.Join(err1, err2); err != nil {
		for _, gr := range gs {
			v.fail(g, gr, "invalid trace: "+err.Error(), blocking)
		}
		v.elapsed = time.Since(start)
		return v
	}
	g.evaluateTraces(ctx, v, gs, pt, nt, policy.NewParams(params), blocking, false)
	v.elapsed = time.Since(start)
	return v
}

// evaluateTraces is evaluate on decoded traces, filling v. With newOnly
// the evaluation is policy.AnalyzeNew: combinations of past events only
// are not enumerated, so a rule failure that only past events cause is
// not reported again (the caller has evaluated those events already).
// Violations are the same either way: a pending-mode violation must
// involve a pending event.
func (g *Gateway) evaluateTraces(ctx context.Context, v *verdict, gs []*Guardrail, pt, nt *trace.Trace, params *policy.Params, blocking, newOnly bool) {
	for _, gr := range gs {
		if gr.Err != nil || gr.Policy == nil {
			reason := "rule does not compile"
			if gr.Err != nil {
				reason = gr.Err.Error()
			}
			v.fail(g, gr, reason, blocking)
			continue
		}
		res, err := g.analyze(ctx, gr.Policy, pt, nt, params, newOnly)
		if err != nil {
			v.fail(g, gr, err.Error(), blocking)
			continue
		}
		status := ruleRan
		if len(res.Failures) > 0 {
			status = ruleError // a runtime error in a binding: no violation (rule_failure)
		}
		for _, e := range res.Errors {
			status = ruleMatched
			v.errors = append(v.errors, g.errorObject(gr, e.Key, e.Args, e.Kwargs, e.Ranges))
			v.rules = append(v.rules, gr)
			if blocking {
				v.blocked = true
			}
		}
		v.statuses[gr.ID] = status
	}
}

// evaluateOn runs gs with the request's events decoded once (the call's
// request trace), split at k into past and pending, then extra events
// as pending after all of them (the draft or final response). The
// extra events are evaluated at the cost of the new events
// (policy.AnalyzeNew): the request's events were evaluated by the
// input check of the same rules, which reported their failures.
func (c *call) evaluateOn(ctx context.Context, gs []*Guardrail, k int, extra []event) *verdict {
	g := c.g
	start := time.Now()
	v := &verdict{statuses: make(map[string]string, len(gs))}
	if len(gs) == 0 {
		return v
	}
	rt, err := c.requestTrace()
	var xt *trace.Trace
	if err == nil && extra != nil {
		xt, err = toTrace(extra)
	}
	if err != nil {
		for _, gr := range gs {
			v.fail(g, gr, "invalid trace: "+err.Error(), true)
		}
		v.elapsed = time.Since(start)
		return v
	}
	past, pending := rt, xt
	if extra == nil {
		past, pending = &trace.Trace{Events: rt.Events[:k]}, &trace.Trace{Events: rt.Events[k:]}
	}
	g.evaluateTraces(ctx, v, gs, past, pending, c.ruleParams(), true, extra != nil)
	v.elapsed = time.Since(start)
	return v
}

// ruleParams are the call's rule parameters converted for the engine,
// once for all its checks.
func (c *call) ruleParams() *policy.Params {
	rs := c.rules
	rs.paramsOnce.Do(func() { rs.engineParams = policy.NewParams(rs.params) })
	return rs.engineParams
}

// analyze evaluates one rule with the evaluation timeout, recovering a
// panic into an error.
func (g *Gateway) analyze(ctx context.Context, p *policy.Policy, past, pending *trace.Trace, params *policy.Params, newOnly bool) (res *policy.Result, err error) {
	ctx, cancel := context.WithTimeout(ctx, g.opts.EvalTimeout)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, fmt.Errorf("engine panic: %v", r)
		}
	}()
	if newOnly {
		res, err = p.AnalyzeNewParams(ctx, past, pending, params)
	} else {
		res, err = p.AnalyzePendingParams(ctx, past, pending, params)
	}
	if err != nil && ctx.Err() == context.DeadlineExceeded {
		err = fmt.Errorf("evaluation longer than %s", g.opts.EvalTimeout)
	}
	return res, err
}

// fail records an evaluation failure of gr: under fail-closed a blocking
// rule's failure is a blocking violation (spec §6.6).
func (v *verdict) fail(g *Gateway, gr *Guardrail, reason string, blocking bool) {
	g.evalFailures.Add(1)
	v.statuses[gr.ID] = ruleError
	if v.failure == "" {
		v.failure = reason
	}
	if !blocking {
		return
	}
	if !g.opts.FailOpen {
		v.blocked = true
		v.errors = append(v.errors, g.errorObject(gr, "", []any{"Vigil: guardrail evaluation failed: " + reason}, nil, []string{}))
		v.rules = append(v.rules, gr)
	}
}

// errorObject is an Error object (API §10) with its guardrail.
func (g *Gateway) errorObject(gr *Guardrail, key string, args []any, kwargs any, ranges []string) map[string]any {
	content := gr.Content
	if g.opts.HideRuleContent {
		content = ""
	}
	if ranges == nil {
		ranges = []string{}
	}
	if kwargs == nil {
		kwargs = map[string]any{}
	}
	if args == nil {
		args = []any{}
	}
	return map[string]any{
		"key": key, "args": args, "kwargs": kwargs, "ranges": ranges,
		"guardrail": map[string]any{"id": gr.ID, "name": gr.Name, "content": content, "action": gr.Action, "version": gr.Version},
	}
}

// toTrace decodes events as a trace. The events are converted to trace
// values directly (what decoding their JSON would give: object members
// in key order, as json.Marshal writes a map), without the JSON round
// trip; a value of another Go type takes the round trip.
func toTrace(evs []event) (*trace.Trace, error) {
	if len(evs) == 0 {
		return &trace.Trace{}, nil
	}
	arr := make([]trace.Value, len(evs))
	for i, e := range evs {
		v, ok := traceValue(e)
		if !ok {
			return toTraceJSON(evs)
		}
		arr[i] = v
	}
	t, err := trace.FromValue(arr)
	if t == nil {
		return nil, err
	}
	return t, nil
}

// traceValue converts a decoded JSON value to a trace value; false when
// v holds a type encoding/json does not decode to.
func traceValue(v any) (trace.Value, bool) {
	switch x := v.(type) {
	case nil, bool:
		return x, true
	case string:
		if !utf8.ValidString(x) {
			return nil, false // json.Marshal would replace the bad bytes
		}
		return x, true
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return nil, false // json.Marshal fails
		}
		return trace.Number(trace.AppendFloat(nil, x)), true
	case json.Number:
		return trace.Number(x), x != ""
	case []any:
		out := make([]trace.Value, len(x))
		for i, e := range x {
			ev, ok := traceValue(e)
			if !ok {
				return nil, false
			}
			out[i] = ev
		}
		return out, true
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			if !utf8.ValidString(k) {
				return nil, false
			}
			keys = append(keys, k)
		}
		slices.Sort(keys)
		o := &trace.Object{Members: make([]trace.Member, len(keys))}
		for i, k := range keys {
			ev, ok := traceValue(x[k])
			if !ok {
				return nil, false
			}
			o.Members[i] = trace.Member{Key: k, Value: ev}
		}
		return o, true
	}
	return nil, false
}

// toTraceJSON decodes events as a trace through their JSON.
func toTraceJSON(evs []event) (*trace.Trace, error) {
	b, err := json.Marshal(evs)
	if err != nil {
		return nil, err
	}
	t, err := trace.Decode(b)
	if t == nil {
		return nil, err
	}
	return t, nil
}

// mergeStatuses adds the statuses of v under phase.
func mergeStatuses(dst map[string]map[string]string, phase string, v *verdict) {
	if v == nil || len(v.statuses) == 0 {
		return
	}
	dst[phase] = v.statuses
}

// skipAll marks every rule of gs skipped.
func skipAll(gs []*Guardrail) map[string]string {
	m := make(map[string]string, len(gs))
	for _, gr := range gs {
		m[gr.ID] = ruleSkipped
	}
	return m
}
