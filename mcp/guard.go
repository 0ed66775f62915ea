package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/vigilhq/vigil/policy"
	"github.com/vigilhq/vigil/trace"
)

// Rule is one guardrail the proxy applies (spec/gateway.md §5 with kind
// mcp): a compiled policy, whether it blocks, and the identity the
// guardrail error objects carry. Servers and Clients are the scope globs
// (case-insensitive, * and ?); empty matches every name.
type Rule struct {
	ID      string
	Name    string
	Content string
	Action  string // "block" or "log"
	Version int
	Servers []string
	Clients []string
	Policy  *policy.Policy
}

// LoadRule compiles a guardrail; a compile error names the guardrail.
func LoadRule(id, name, content, action string) (*Rule, error) {
	p, err := policy.Load(content, policy.Options{Name: name, WallTime: 2 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("guardrail %q: %w", name, err)
	}
	if action == "" {
		action = "block"
	}
	return &Rule{ID: id, Name: name, Content: content, Action: action, Policy: p}, nil
}

// applies reports whether the rule's scope admits the session's server
// and client names.
func (r *Rule) applies(server, client string) bool {
	return globsMatch(r.Servers, server) && globsMatch(r.Clients, client)
}

func globsMatch(globs []string, name string) bool {
	if len(globs) == 0 {
		return true
	}
	for _, g := range globs {
		if ok, _ := path.Match(strings.ToLower(g), strings.ToLower(name)); ok {
			return true
		}
	}
	return false
}

// GuardError is a guardrail error object (explorer-api §2.7) with the
// guardrail that raised it.
type GuardError struct {
	Key       string          `json:"key"`
	Args      []any           `json:"args"`
	Kwargs    json.RawMessage `json:"kwargs"`
	Ranges    []string        `json:"ranges"`
	Guardrail map[string]any  `json:"guardrail"`
}

// Guard holds the blocking rules of a session. Logging rules are not run
// inline: recorded sessions go through ingest, whose monitors evaluate
// the dataset's guardrails on every stored event without delaying the
// session (spec/gateway.md §6.5).
type Guard struct {
	// Rules are the rules at start; SetRules replaces them while
	// sessions run.
	Rules []*Rule
	mu    sync.RWMutex
	// FailOpen continues when an evaluation fails; the default (false)
	// blocks with "Vigil: guardrail evaluation failed: <reason>".
	FailOpen bool
	// Timeout bounds one evaluation (default 2 s).
	Timeout time.Duration
	// Unavailable, when set, is why the rules could not be obtained:
	// every check fails with it (blocking unless FailOpen).
	Unavailable string
}

// SetRules replaces the rules (a changed dataset ruleset) and clears
// Unavailable: later checks of every session use them.
func (g *Guard) SetRules(rules []*Rule) {
	g.mu.Lock()
	g.Rules, g.Unavailable = rules, ""
	g.mu.Unlock()
}

func (g *Guard) unavailable() bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.Unavailable != ""
}

// blocking returns the blocking rules that apply to the names.
func (g *Guard) blocking(server, client string) []*Rule {
	if g == nil {
		return nil
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	var out []*Rule
	for _, r := range g.Rules {
		if r.Action == "block" && r.applies(server, client) {
			out = append(out, r)
		}
	}
	return out
}

// monitors holds a session's incremental evaluation state: the decoded
// events (aligned with the session's events) and, per rule, a
// policy.Monitor that has seen a prefix of them. Checking a new event
// costs work proportional to that event, not to the session's length.
// The session serialises its use (Session.checkMu).
type monitors struct {
	past []*trace.Event
	mons map[*Rule]*ruleMonitor
}

type ruleMonitor struct {
	m *policy.Monitor
	n int // events of past the monitor has seen
}

// check evaluates the blocking rules on the session's recorded events
// followed by the pending ones in pending mode: only violations whose
// binding holds a pending event are reported (each once per session).
// An evaluation failure is an error object of its own unless FailOpen.
// params gives the rules' input parameters; it is called only when a
// rule's monitor is created (the first check of the session).
func (g *Guard) check(ctx context.Context, ms *monitors, rules []*Rule, recorded, pending []json.RawMessage, params func() map[string]any) []GuardError {
	if g == nil {
		return nil
	}
	fail := func(reason string) []GuardError {
		if g.FailOpen {
			return nil
		}
		return []GuardError{{Key: "vigil-eval-failure", Args: []any{"Vigil: guardrail evaluation failed: " + reason}, Kwargs: json.RawMessage("{}"), Ranges: []string{},
			Guardrail: map[string]any{"id": "vigil-gateway", "name": "guardrail evaluation", "content": "", "action": "block", "version": 0}}}
	}
	g.mu.RLock()
	unavailable := g.Unavailable
	g.mu.RUnlock()
	if unavailable != "" {
		return fail(unavailable)
	}
	if len(rules) == 0 {
		return nil
	}
	// Decode what is new; a recorded event may replace a checked one (a
	// blocked call is recorded marked), which changes nothing the rules
	// see.
	from := len(recorded)
	if len(ms.past) > from {
		ms.past = ms.past[:from]
	}
	for i := len(ms.past); i < from+len(pending); i++ {
		ev := pending[max(0, i-from)]
		if i < from {
			ev = recorded[i]
		}
		t, err := policy.DecodeTrace(append(append([]byte{'['}, ev...), ']'))
		if err != nil {
			return fail(fmt.Sprintf("event %d: %v", i, err))
		}
		ms.past = append(ms.past, t.Events...)
	}
	if ms.mons == nil {
		ms.mons = map[*Rule]*ruleMonitor{}
	}
	timeout := g.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var out []GuardError
	for _, r := range rules {
		rm := ms.mons[r]
		if rm == nil || rm.n > from {
			m, err := r.Policy.NewMonitor(params())
			if err != nil {
				if f := fail(err.Error()); f != nil {
					return f
				}
				continue
			}
			rm = &ruleMonitor{m: m}
			ms.mons[r] = rm
		}
		if rm.n < from {
			// Events recorded without a check (errors, pin blocks):
			// seen, not judged.
			if _, err := rm.m.Append(ctx, ms.past[rm.n:from]...); err != nil {
				if f := fail(err.Error()); f != nil {
					return f
				}
				continue
			}
			rm.n = from
		}
		res, err := rm.m.Append(ctx, ms.past[from:]...)
		rm.n = len(ms.past)
		if err != nil {
			if f := fail(err.Error()); f != nil {
				return f
			}
			continue
		}
		for _, v := range res.Errors {
			kw, err := json.Marshal(v.Kwargs)
			if err != nil || string(kw) == "null" {
				kw = []byte("{}")
			}
			ranges := v.Ranges
			if ranges == nil {
				ranges = []string{}
			}
			out = append(out, GuardError{Key: v.Key, Args: v.Args, Kwargs: kw, Ranges: ranges,
				Guardrail: map[string]any{"id": r.ID, "name": r.Name, "content": r.Content, "action": r.Action, "version": r.Version}})
		}
	}
	return out
}
