package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/vigilhq/vigil/policy"
	"github.com/vigilhq/vigil/policy/builtin"
)

// This file maps the violations of a recorded call to ledger findings
// (spec §8.1, ledger.md §8): the monitor is the guardrail, the key and
// range addresses are mapped from the evaluated event list to stored
// positions, and the context says where the violation arose.

// Finding is one violation of a recorded call, to be stored as a ledger
// finding of the call's trace.
type Finding struct {
	// MonitorID is the guardrail's monitor id (ledger.md §8.0): a dataset
	// guardrail's id, gateway-header:<hash> for header rules,
	// gateway-global:<name> for global rules.
	MonitorID string
	Monitor   string
	// Severity is the guardrail's default severity ("" = warn).
	Severity string
	// Violation has its key and ranges at stored trace positions.
	Violation policy.Violation
	// Context is {guardrail, action, location, blocked, delivered?, call_id}.
	Context map[string]any
}

// monitorID is the monitor id of a guardrail (ledger.md §8.0).
func monitorID(gr *Guardrail) string {
	switch {
	case gr.ID == headerRuleID:
		return "gateway-header:" + contentHash(gr.Content)
	case gr.ID == FileRuleID || strings.HasPrefix(gr.ID, "global-"):
		return "gateway-global:" + gr.Name
	}
	return gr.ID
}

// contentHash is the first 16 hex digits of the SHA-256 of a rule text.
func contentHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:8])
}

// findings maps a verdict's errors to findings; index maps an evaluated
// event index to its stored position.
func (c *call) findings(v *verdict, location string, blocked, delivered bool) []Finding {
	if v == nil || len(v.errors) == 0 {
		return nil
	}
	index := c.storedIndex()
	if v.index != nil {
		index = v.index
	}
	var out []Finding
	for i, e := range v.errors {
		if i >= len(v.rules) {
			break
		}
		gr := v.rules[i]
		action := gr.Action
		if action == "" {
			action = "block"
		}
		ctx := map[string]any{"source": "gateway", "location": location, "blocked": blocked, "call_id": c.id, "action": action,
			"guardrail": map[string]any{"id": gr.ID, "name": gr.Name, "version": gr.Version}}
		f := Finding{Context: ctx, MonitorID: monitorID(gr), Monitor: gr.Name, Severity: gr.Severity}
		if delivered {
			ctx["delivered"] = true
		}
		key, _ := e["key"].(string)
		args, _ := e["args"].([]any)
		kwargs, _ := e["kwargs"].(builtin.OrderedMap)
		ranges, _ := e["ranges"].([]string)
		if key == "" {
			// An evaluation failure has no key: one finding per call.
			key = "vigil-failure:" + c.id
		} else {
			key = storedKey(key, index)
		}
		stored := make([]string, 0, len(ranges))
		for _, r := range ranges {
			if i, rest, ok := splitRange(r); ok {
				r = "messages." + strconv.Itoa(index(i)) + rest
			}
			stored = append(stored, r)
		}
		f.Violation = policy.Violation{Key: key, Args: args, Kwargs: kwargs, Ranges: stored}
		if len(args) > 0 {
			f.Violation.Message = toString(args[0])
		}
		out = append(out, f)
	}
	return out
}

// storedIndex returns the map from evaluated event index (request
// events, then the response) to stored trace position.
func (c *call) storedIndex() func(int) int {
	p := c.plan
	n := len(c.in.events)
	return func(i int) int {
		if i < p.k {
			return i
		}
		if i > n {
			i = n
		}
		return p.base + i - p.k
	}
}

// storedKey maps the event indices in a violation key "(R, (V1, …))"
// with index; a key of another shape is returned unchanged.
func storedKey(key string, index func(int) int) string {
	rest, ok := strings.CutPrefix(key, "(")
	if !ok {
		return key
	}
	rule, vars, ok := strings.Cut(rest, ", (")
	if !ok || !strings.HasSuffix(vars, "))") {
		return key
	}
	vars = strings.TrimSuffix(vars, "))")
	if _, err := strconv.Atoi(rule); err != nil || vars == "" {
		return key
	}
	one := strings.HasSuffix(vars, ",")
	parts := strings.Split(strings.TrimSuffix(vars, ","), ", ")
	if one != (len(parts) == 1) {
		return key
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			return key
		}
		if n >= 0 {
			parts[i] = strconv.Itoa(index(n))
		}
	}
	out := "(" + rule + ", (" + strings.Join(parts, ", ")
	if len(parts) == 1 {
		out += ","
	}
	return out + "))"
}
