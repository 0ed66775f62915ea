package monitor

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/vigilhq/vigil/policy"
	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/trace"
)

// Source describes the monitor a violation came from (spec/ledger.md §8.0).
type Source struct {
	// MonitorID is the guardrail id, or a derived id for rules that are
	// not stored guardrails ("adhoc:<hash>", …).
	MonitorID string
	// Monitor is its name.
	Monitor string
	// Severity is the monitor's default severity; "" means warn.
	Severity string
	// Context is the finding's context object (where it arose); nil for
	// none.
	Context json.RawMessage
}

// Citation is one finding citation (spec/ledger.md §8.1).
type Citation struct {
	NodeID  *string `json:"nodeId"`
	Address string  `json:"address"`
}

// Evaluated is the trace a violation was found on: the decoded trace
// (its flattening maps engine indices to stored positions, policy-language
// §11.4) and, per stored event, its ledger node ids (the primary node,
// then one per tool call), which citations name.
type Evaluated struct {
	items   []trace.Item
	nodeIDs [][]string
	// elem maps a trace index to its input element, nil when they are
	// equal (a trace without tools elements).
	elem map[int]int
}

// NewEvaluated prepares t for mapping violations; nodeIDs[i] are the node
// ids of stored event i (nil or short slices are allowed: those citations
// get no node).
func NewEvaluated(t *trace.Trace, nodeIDs [][]string) *Evaluated {
	e := &Evaluated{items: t.Flatten(), nodeIDs: nodeIDs}
	elem, same := map[int]int{}, true
	for _, it := range e.items {
		if it.Kind == trace.ItemToolCall && it.Sub >= 0 {
			continue // a call inside a message has its message's index
		}
		elem[it.Index] = it.Element
		same = same && it.Index == it.Element
	}
	if !same {
		e.elem = elem
	}
	return e
}

// defaultScores are the scores of spec/ledger.md §8.1 by severity.
var defaultScores = map[string]float64{store.SeverityInfo: 0.3, store.SeverityWarn: 0.6, store.SeverityCritical: 1.0}

// NewFinding maps a violation to the finding spec/ledger.md §8.1 describes:
// the key and range addresses mapped to stored positions; title args[0]
// when it is a string, else the rule's message; severity kwargs.severity
// when valid, else the monitor's (warn when unset); score kwargs.score when
// a number in [0,1], else 0.3/0.6/1.0 by severity; citations merged,
// generalisations dropped, sorted, each with its node; the finding's node
// that of its first citation. RunID and OwnerID are the caller's.
func NewFinding(src Source, ev *Evaluated, v policy.Violation) *store.Finding {
	f := &store.Finding{MonitorID: src.MonitorID, Monitor: src.Monitor, Key: ev.StoredKey(v.Key), Severity: src.Severity, Context: src.Context}
	if f.Severity == "" {
		f.Severity = store.SeverityWarn
	}
	if len(v.Args) > 0 {
		if s, ok := v.Args[0].(string); ok {
			f.Title = s
		}
	}
	if f.Title == "" {
		f.Title = v.Message
	}
	var score any
	for _, kv := range v.Kwargs {
		switch kv.Key {
		case "severity":
			if s, ok := kv.Value.(string); ok {
				if _, known := defaultScores[s]; known {
					f.Severity = s
				}
			}
		case "score":
			score = kv.Value
		}
	}
	f.Score = defaultScores[f.Severity]
	switch x := score.(type) {
	case float64:
		if x >= 0 && x <= 1 {
			f.Score = x
		}
	case int64:
		if x == 0 || x == 1 {
			f.Score = float64(x)
		}
	}
	cites := ev.Citations(v.Ranges)
	if len(cites) > 0 && cites[0].NodeID != nil {
		f.NodeID = *cites[0].NodeID
	}
	f.Citations = marshal(cites)
	return f
}

// StoredKey maps the trace indices in a violation key "(R, (V1, …))" to
// stored event positions; a key of another shape is returned unchanged.
func (e *Evaluated) StoredKey(key string) string {
	if e.elem == nil {
		return key
	}
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
	one := strings.HasSuffix(vars, ",") // Python's one-element tuple
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
			if el, ok := e.elem[n]; ok {
				parts[i] = strconv.Itoa(el)
			}
		}
	}
	out := "(" + rule + ", (" + strings.Join(parts, ", ")
	if len(parts) == 1 {
		out += ","
	}
	return out + "))"
}

// Citations maps range addresses to stored addresses and processes them
// as spec/ledger.md §8.1 says: identical addresses merged, an address
// dropped when a more specific one under it is present, sorted by event
// index then address, each with the node whose address is the longest
// whole-segment prefix (none for <root>). An address that does not parse
// or names no event is kept as given, without a node.
func (e *Evaluated) Citations(ranges []string) []Citation {
	addrs := make([]string, 0, len(ranges))
	for _, r := range ranges {
		if a, err := trace.ParseAddress(r); err == nil {
			if s, ok := trace.StoredAddress(e.items, a); ok {
				r = s.String()
			}
		}
		addrs = append(addrs, r)
	}
	slices.Sort(addrs)
	addrs = slices.Compact(addrs)
	kept := addrs[:0:0]
	for _, a := range addrs {
		general := false
		for _, b := range addrs {
			if under(b, a) {
				general = true
				break
			}
		}
		if !general {
			kept = append(kept, a)
		}
	}
	slices.SortStableFunc(kept, func(a, b string) int {
		if c := eventIndex(a) - eventIndex(b); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	out := make([]Citation, len(kept))
	for i, a := range kept {
		out[i] = Citation{NodeID: e.node(a), Address: a}
	}
	return out
}

// under reports whether address b lies strictly under address a: a path
// prefix on whole segments, or a itself with a selector added.
func under(b, a string) bool {
	return len(b) > len(a) && strings.HasPrefix(b, a) && (b[len(a)] == '.' || b[len(a)] == ':')
}

// eventIndex is the event index of a "messages.N…" address; -1 for <root>
// and anything else, which sort first.
func eventIndex(a string) int {
	rest, ok := strings.CutPrefix(a, "messages.")
	if !ok {
		return -1
	}
	n, _ := leadingInt(rest)
	return n
}

// leadingInt parses the integer segment at the start of s (up to '.' or
// ':'), returning -1 when there is none, and the rest after it.
func leadingInt(s string) (int, string) {
	end := strings.IndexAny(s, ".:")
	if end < 0 {
		end = len(s)
	}
	n, err := strconv.Atoi(s[:end])
	if err != nil || n < 0 {
		return -1, s
	}
	return n, s[end:]
}

// node returns the node of a stored address: messages.N.tool_calls.K…
// is the call's node, any other messages.N… the event's primary node; nil
// for <root>, an unknown event or one stored without nodes.
func (e *Evaluated) node(a string) *string {
	i := eventIndex(a)
	if i < 0 || i >= len(e.nodeIDs) || len(e.nodeIDs[i]) == 0 {
		return nil
	}
	ids := e.nodeIDs[i]
	_, rest := leadingInt(strings.TrimPrefix(a, "messages."))
	if call, ok := strings.CutPrefix(rest, ".tool_calls."); ok {
		if k, _ := leadingInt(call); k >= 0 && k+1 < len(ids) {
			return &ids[k+1]
		}
	}
	return &ids[0]
}

// marshal is json.Marshal without HTML escaping, so <root> stays as
// written; v is always encodable.
func marshal(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
