// Package search is the search-box query language of the trace store
// (explorer-api §7.2): Parse turns a query into a Query, a tree of Text
// terms and typed filters joined by And, Or and Not, with every syntax
// error reported at its code-point position. The stores turn a Query into
// SQL over their trigram indexes; this package holds what both need to
// agree on: the case folding of free text (Fold), the searchable fields of
// an event (Fields), the metadata comparison (Meta.Match, the reference the
// SQL must reproduce) and the highlights of a trace (Highlights).
//
// Non-goals: executing a query (the stores do), ranking, fuzzy matching,
// regular expressions (deliberately absent: they cannot be bounded by an
// index), diacritic folding.
package search

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Node is one node of a query tree: *And, *Or, *Not, *Text or one of the
// filter types (*Is, *Meta, *Source, *Guardrail, *Severity, *Annotation,
// *Tool, *Session, *Dataset, *Time, *IDs, *Indices).
type Node interface {
	// Pos is the code-point offset of the node in the query.
	Pos() int
	// String is the node's canonical form (Query.String).
	String() string
}

// Query is a parsed query. Root is nil for the empty query, which matches
// every trace.
type Query struct {
	Root Node
	// Compat is "filter" or "idfilter" for the compat whole-query forms
	// (filter:<title>:<i>,… and idfilter:<title>:<uuid>,…), with Title the
	// given title; "" otherwise.
	Compat string
	Title  string
}

// String is the canonical form of q: the "parsed" field of a search
// response. Parsing it again gives the same tree.
func (q *Query) String() string {
	if q == nil || q.Root == nil {
		return ""
	}
	return q.Root.String()
}

// Terms returns the free-text terms of q that are not under a Not: the
// terms a matching trace contains and that highlights show.
func (q *Query) Terms() []string {
	var out []string
	var walk func(n Node)
	walk = func(n Node) {
		switch n := n.(type) {
		case *Text:
			out = append(out, n.Value)
		case *And:
			for _, x := range n.X {
				walk(x)
			}
		case *Or:
			for _, x := range n.X {
				walk(x)
			}
		}
	}
	if q != nil && q.Root != nil {
		walk(q.Root)
	}
	return out
}

type pos int

func (p pos) Pos() int { return int(p) }

// And holds when every X holds.
type And struct {
	pos
	X []Node
}

// Or holds when some X holds.
type Or struct {
	pos
	X []Node
}

// Not holds when X does not.
type Not struct {
	pos
	X Node
}

// Text is a free-text term: a case-insensitive substring of one searchable
// field (Fields).
type Text struct {
	pos
	Value  string
	Quoted bool
}

// Is is is:<Name> (or not:<Name> when Neg): annotated, flagged, blocked,
// shared, snippet, gateway, mcp or otel.
type Is struct {
	pos
	Name string
	Neg  bool
}

// IsNames are the values of is: and not:.
var IsNames = []string{"annotated", "flagged", "blocked", "shared", "snippet", "gateway", "mcp", "otel"}

// Source is source:<Value>.
type Source struct {
	pos
	Value string
}

// Guardrail is guardrail:<Value>; Prefix when the value ended in "*"
// (Value is then without it).
type Guardrail struct {
	pos
	Value  string
	Prefix bool
}

// Severity levels in ascending order; Level indexes this list.
var Severities = []string{"info", "warn", "critical"}

// Severity is severity:[Op]<level>, Op one of = >= > <= <.
type Severity struct {
	pos
	Op    string
	Level int
}

// Annotation is annotation:<Value>: an annotation whose content contains
// Value (ASCII case-insensitive).
type Annotation struct {
	pos
	Value string
}

// Tool is tool:<Name>; "*" in Name matches any run of characters. The
// match is case-insensitive (tool names are indexed folded).
type Tool struct {
	pos
	Name string
}

// Session is session:<Key>.
type Session struct {
	pos
	Key string
}

// Dataset is dataset:<Ref> (name, user/name or id).
type Dataset struct {
	pos
	Ref string
}

// Time is after:, before:, updated-after: or updated-before:.
type Time struct {
	pos
	Key string // the filter name
	// Abs is the time, or zero when the value was relative (Ago).
	Abs time.Time
	Ago time.Duration
	Raw string
}

// Updated reports whether t bounds time_last_pushed (else time_created).
func (t *Time) Updated() bool { return strings.HasPrefix(t.Key, "updated-") }

// After reports whether t is a lower bound (>=); else it is < .
func (t *Time) After() bool { return strings.HasSuffix(t.Key, "after") }

// At is the bound for a request made at now.
func (t *Time) At(now time.Time) time.Time {
	if t.Abs.IsZero() {
		return now.Add(-t.Ago)
	}
	return t.Abs
}

// IDs is id:<uuid>,….
type IDs struct {
	pos
	IDs []string
}

// Indices is index:<n>,<a>..<b>,…; each range is inclusive.
type Indices struct {
	pos
	Ranges [][2]int64
}

// quote renders s as a quoted string when it needs quoting.
func quote(s string, force bool) string {
	if !force && s != "" && !strings.ContainsFunc(s, unicode.IsSpace) && !strings.Contains(s, `"`) && s != "OR" && s != "AND" &&
		!strings.HasPrefix(s, "-") && !strings.HasPrefix(s, "(") && !strings.HasSuffix(s, ")") && !isFilterLike(s) {
		return s
	}
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		if r == '"' || r == '\\' {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return b.String()
}

// isFilterLike reports whether a bare word would parse as a filter.
func isFilterLike(s string) bool {
	k, _, ok := strings.Cut(s, ":")
	return ok && filterKeys[k]
}

func (n *And) String() string  { return join(n.X, " ") }
func (n *Or) String() string   { return join(n.X, " OR ") }
func (n *Not) String() string  { return "-" + group(n.X) }
func (n *Text) String() string { return quote(n.Value, n.Quoted) }
func (n *Is) String() string {
	if n.Neg {
		return "not:" + n.Name
	}
	return "is:" + n.Name
}
func (n *Source) String() string { return "source:" + quote(n.Value, false) }
func (n *Guardrail) String() string {
	if n.Prefix {
		return "guardrail:" + quote(n.Value+"*", false)
	}
	return "guardrail:" + quote(n.Value, strings.HasSuffix(n.Value, "*"))
}
func (n *Severity) String() string   { return "severity:" + n.Op + Severities[n.Level] }
func (n *Annotation) String() string { return "annotation:" + quote(n.Value, false) }
func (n *Tool) String() string       { return "tool:" + quote(n.Name, false) }
func (n *Session) String() string    { return "session:" + quote(n.Key, false) }
func (n *Dataset) String() string    { return "dataset:" + quote(n.Ref, false) }
func (n *Time) String() string       { return n.Key + ":" + n.Raw }
func (n *IDs) String() string        { return "id:" + strings.Join(n.IDs, ",") }
func (n *Indices) String() string {
	parts := make([]string, len(n.Ranges))
	for i, r := range n.Ranges {
		if r[0] == r[1] {
			parts[i] = strconv.FormatInt(r[0], 10)
		} else {
			parts[i] = fmt.Sprintf("%d..%d", r[0], r[1])
		}
	}
	return "index:" + strings.Join(parts, ",")
}

// group renders n, parenthesised when it is an And or Or.
func group(n Node) string {
	switch n.(type) {
	case *And, *Or:
		return "(" + n.String() + ")"
	}
	return n.String()
}

// join renders xs separated by sep; an Or inside is parenthesised (AND
// binds tighter than OR, and an Or inside an Or is flattened by the parser).
func join(xs []Node, sep string) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		if _, isOr := x.(*Or); isOr {
			parts[i] = "(" + x.String() + ")"
		} else {
			parts[i] = x.String()
		}
	}
	return strings.Join(parts, sep)
}
