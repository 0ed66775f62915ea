package ask

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/vigilhq/vigil/search"
)

// Plan is a question turned into searches (the explorer-api §7.2 grammar)
// and the other evidence to look for. MakePlan builds it; it depends on
// nothing but the question, the tool names known in the datasets asked
// about and the current time, so the same inputs give the same plan.
type Plan struct {
	// Filters are the search filters: those written in the question
	// (tool:, meta:, after: …), the tools it names, its time range.
	Filters []string
	// Phrases are the quoted phrases; Terms the other words worth
	// searching for (lower case, stop words removed), most specific first.
	Phrases []string
	Terms   []string
	// Excluded are values the question puts outside ("outside
	// example.com", "except bob"): tool-call evidence holding them is
	// left out.
	Excluded []string
	// Tools are the tool names the question mentions.
	Tools []string
	// Roles are the message roles the question names (user, assistant,
	// system, tool); text evidence comes from those messages only.
	Roles []string
	// Errors, Findings and Approvals are the question's intents: it asks
	// about errors, rule violations (findings), or approvals (accepted
	// findings, annotations saying so).
	Errors, Findings, Approvals bool
	// Annotations is set when the question asks about annotations
	// (comments, notes): its terms are also searched in annotations.
	Annotations bool
	// ToolHints are tools one word of the question points at without
	// naming them ("url" for browse_url): their calls rank higher, but
	// the search is not restricted to them.
	ToolHints []string
	// Status are the finding review states the question names
	// ("dismissed", "false positive", "open", "accepted").
	Status []string
}

// statusWords name finding review states.
var statusWords = map[string]string{"dismissed": "dismissed", "dismiss": "dismissed", "false": "dismissed",
	"open": "open", "unresolved": "open", "pending": "open", "accepted": "accepted", "approved": "accepted", "waived": "accepted"}

// stopWords are question words that never make a search term.
var stopWords = toSet(`a about above after again against all am an and any anyone anybody are aren't as at be
because been before being below between both but by can could did didn't do does doesn't doing done down during each
ever every few for from further get got had has have having he her here hers him his how i if in into is isn't it its
itself just me more most my no nor not now of off on once only or other our ours out over own same she should so some
somebody someone something such than that the their theirs them then there these they this those through to too
under until up very was wasn't we were weren't what when where which while who whom whose why will with would you your
yours show list tell find give me which runs run traces trace any anything happened happen happens time times
kind sort ever also please value values ones one many much used use using uses call called calls calling tool tools
agent agents message messages events event did does do say said says`)

// roleWords name message roles.
var roleWords = map[string]string{"user": "user", "users": "user", "assistant": "assistant", "assistants": "assistant",
	"system": "system", "model": "assistant"}

// errorWords, findingWords and approvalWords mark the intents.
var (
	errorWords      = toSet(`error errors failed fail fails failing failure failures exception exceptions crash crashed crashes`)
	findingWords    = toSet(`violation violations violate violated violates violating rule rules guardrail guardrails flagged flag flags finding findings policy policies`)
	approvalWords   = toSet(`approve approved approves approval approvals approving waived waive waiver accepted accept reviewed signed sign-off`)
	excludeWords    = toSet(`outside except excluding exclude besides beyond`)
	annotationWords = toSet(`annotation annotations annotated comment comments commented note notes noted remark remarks`)
)

// irregular maps irregular verb forms to the form tool names use.
var irregular = map[string]string{"sent": "send", "ran": "run", "wrote": "write", "written": "write", "read": "read",
	"made": "make", "got": "get", "found": "find", "paid": "pay", "bought": "buy", "deleted": "delete", "fetched": "fetch",
	"searched": "search", "e-mail": "email", "e-mails": "email", "emails": "email", "emailed": "email", "mailed": "mail"}

func toSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

// Vocabulary is what the datasets asked about call their tools: the tool
// names and the argument keys of their calls (the datasets' tool
// registries).
type Vocabulary struct {
	Tools        []string
	ArgumentKeys []string
}

// MakePlan turns question into a plan. voc names the tools of the
// datasets asked about: a tool is recognised in plain words too ("sent
// e-mail" names send_email), and words that are part of a tool name or
// an argument key are not search terms (every call holds them); now
// resolves time words ("today", "this week"). A part of the question written in the search grammar
// (tool:x, meta:k=v, after:-1d, a quoted phrase) is kept as written; a
// filter that does not parse is an error naming its position.
func MakePlan(question string, voc Vocabulary, now time.Time) (*Plan, error) {
	tools := voc.Tools
	p := &Plan{}
	toks, err := tokenize(question)
	if err != nil {
		return nil, err
	}
	var words []string // plain words, lower case, in order
	for _, t := range toks {
		switch {
		case t.quoted:
			if strings.TrimSpace(t.text) != "" {
				p.Phrases = appendNew(p.Phrases, t.text)
			}
		case t.filter:
			p.Filters = appendNew(p.Filters, t.text)
			if q, err := search.Parse(t.text); err == nil {
				if tf, ok := q.Root.(*search.Tool); ok && utf8.RuneCountInString(tf.Name) >= 3 && !strings.Contains(tf.Name, "*") {
					p.Tools = appendNew(p.Tools, tf.Name) // its filter and text driver follow
				}
			}
		default:
			words = append(words, t.text)
		}
	}
	lower := make([]string, len(words))
	for i, w := range words {
		lower[i] = strings.ToLower(trimPunct(w))
	}
	used := make([]bool, len(lower))
	p.timeRange(lower, used, now)
	p.matchTools(lower, used, tools)
	for i, w := range lower {
		if !used[i] && (slices.Contains(voc.ArgumentKeys, w) || slices.Contains(voc.ArgumentKeys, stem(w))) {
			used[i] = true // an argument key: in every call that has it
		}
	}
	for i, w := range lower {
		if used[i] || w == "" {
			continue
		}
		switch {
		case excludeWords[w] || w == "not" && i+1 < len(lower) && lower[i+1] == "to":
			j := i + 1
			for j < len(lower) && (lower[j] == "to" || lower[j] == "of" || lower[j] == "the" || used[j]) {
				used[j] = true
				j++
			}
			if j < len(lower) {
				p.Excluded = appendNew(p.Excluded, lower[j])
				used[j] = true
			}
			used[i] = true
			continue
		case roleWords[w] != "":
			p.Roles = appendNew(p.Roles, roleWords[w])
			continue
		case errorWords[w]:
			p.Errors = true
			continue
		case annotationWords[w]:
			p.Annotations = true
			continue
		case findingWords[w]:
			p.Findings = true
			continue
		case approvalWords[w]:
			p.Approvals = true
			continue
		}
		if x, ok := irregular[w]; ok {
			w = x
		}
		if st, ok := statusWords[w]; ok {
			p.Status = appendNew(p.Status, st)
		}
		if stopWords[w] || utf8.RuneCountInString(w) < 3 && !isNumber(w) {
			continue
		}
		if st := stem(w); utf8.RuneCountInString(st) >= 4 && !strings.ContainsAny(w, "@./:_-0123456789") {
			w = st // a substring search: "invoic" finds invoice and invoices
		}
		p.Terms = appendNew(p.Terms, w)
	}
	if len(p.Terms) == 0 && len(p.Phrases) == 0 && len(p.Tools) == 0 {
		// Only tool-name words ("which refunds?"): search the tools'
		// names.
		p.Terms = append(p.Terms, p.ToolHints...)
	}
	// Most specific first: longer terms are rarer.
	slices.SortStableFunc(p.Terms, func(a, b string) int { return utf8.RuneCountInString(b) - utf8.RuneCountInString(a) })
	if _, err := search.Parse(p.Query()); err != nil {
		return nil, fmt.Errorf("the search made of the question does not parse: %w", err)
	}
	return p, nil
}

// token is one piece of a question.
type token struct {
	text           string
	quoted, filter bool
}

// tokenize splits a question into quoted phrases, search filters and
// plain words. An unterminated quote is an error naming its position.
func tokenize(q string) ([]token, error) {
	var out []token
	rs := []rune(q)
	for i := 0; i < len(rs); {
		r := rs[i]
		switch {
		case unicode.IsSpace(r):
			i++
		case r == '"' || r == '“' || r == '”':
			j := i + 1
			for j < len(rs) && rs[j] != '"' && rs[j] != '”' && rs[j] != '“' {
				j++
			}
			if j >= len(rs) {
				return nil, fmt.Errorf("question: unterminated quote at position %d", i)
			}
			out = append(out, token{text: string(rs[i+1 : j]), quoted: true})
			i = j + 1
		default:
			j := i
			for j < len(rs) && !unicode.IsSpace(rs[j]) {
				if rs[j] == '"' && j > i && rs[j-1] != '=' && rs[j-1] != ':' {
					break
				}
				if rs[j] == '"' { // a quoted filter value: meta:name="run 12"
					k := j + 1
					for k < len(rs) && rs[k] != '"' {
						k++
					}
					j = k
				}
				j++
			}
			j = min(j, len(rs))
			w := string(rs[i:j])
			out = append(out, token{text: w, filter: isFilter(w)})
			i = j
		}
	}
	return out, nil
}

// isFilter reports whether w is one search filter of the §7.2 grammar.
func isFilter(w string) bool {
	k, _, ok := strings.Cut(w, ":")
	if !ok || k == "" || strings.HasPrefix(w, "-") {
		return false
	}
	q, err := search.Parse(w)
	if err != nil || q.Root == nil {
		return false
	}
	_, text := q.Root.(*search.Text)
	return !text
}

// timeRange recognises time words and adds after:/before: filters.
func (p *Plan) timeRange(w []string, used []bool, now time.Time) {
	day := now.UTC().Truncate(24 * time.Hour)
	date := func(t time.Time) string { return t.Format("2006-01-02") }
	units := map[string]string{"minute": "m", "minutes": "m", "hour": "h", "hours": "h", "day": "d", "days": "d",
		"week": "w", "weeks": "w"}
	mark := func(from, to int) {
		for k := from; k < to; k++ {
			used[k] = true
		}
	}
	for i := 0; i < len(w); i++ {
		switch w[i] {
		case "today":
			p.Filters = appendNew(p.Filters, "after:"+date(day))
			mark(i, i+1)
		case "yesterday":
			p.Filters = appendNew(p.Filters, "after:"+date(day.AddDate(0, 0, -1)), "before:"+date(day))
			mark(i, i+1)
		case "this", "last", "past":
			if i+1 >= len(w) {
				continue
			}
			if u, ok := units[w[i+1]]; ok { // "last week", "past day", "this hour"
				p.Filters = appendNew(p.Filters, "after:-1"+u)
				mark(i, i+2)
				continue
			}
			if w[i+1] == "month" {
				p.Filters = appendNew(p.Filters, "after:-30d")
				mark(i, i+2)
				continue
			}
			if i+2 < len(w) && isNumber(w[i+1]) { // "last 3 days"
				if u, ok := units[w[i+2]]; ok {
					p.Filters = appendNew(p.Filters, "after:-"+w[i+1]+u)
					mark(i, i+3)
				}
			}
		}
	}
}

// matchTools finds the tools a question names: a word equal to a tool
// name, or consecutive words that spell one ("send email", "sent
// e-mails" for send_email). Words naming tools are not search terms.
func (p *Plan) matchTools(w []string, used []bool, tools []string) {
	norm := make([]string, len(w))
	for i, x := range w {
		if y, ok := irregular[x]; ok {
			x = y
		}
		norm[i] = stem(x)
	}
	for _, tool := range tools {
		parts := toolParts(tool)
		if len(parts) == 0 {
			continue
		}
		for i := range w {
			if w[i] == strings.ToLower(tool) {
				p.Tools = appendNew(p.Tools, tool)
				used[i] = true
				break
			}
			if len(parts) < 2 || used[i] || !slices.Contains(parts, norm[i]) && (i+1 >= len(w) || !slices.Contains(parts, norm[i]+norm[i+1])) {
				continue
			}
			// Every part within a few words, in any order ("refunds were
			// issued"), a part also spelt as two words ("look up").
			end := min(len(w), i+len(parts)+3)
			var hit []int
			for _, part := range parts {
				found := false
				for k := i; k < end && !found; k++ {
					switch {
					case norm[k] == part:
						hit, found = append(hit, k), true
					case k+1 < end && norm[k]+norm[k+1] == part:
						hit, found = append(hit, k, k+1), true
					}
				}
				if !found {
					hit = nil
					break
				}
			}
			if hit != nil {
				p.Tools = appendNew(p.Tools, tool)
				for _, k := range hit {
					used[k] = true
				}
				break
			}
		}
	}
	// A word that is a part of exactly one tool's name hints at it.
	for i, x := range norm {
		if used[i] || stopWords[w[i]] || len(x) < 3 {
			continue
		}
		var owner string
		n := 0
		for _, tool := range tools {
			if slices.Contains(toolParts(tool), x) {
				owner, n = tool, n+1
			}
		}
		if n > 0 {
			// Tool-name words are in every call of the tool: as search
			// terms they would match much and mean little.
			used[i] = true
		}
		if n == 1 && !slices.Contains(p.Tools, owner) {
			p.ToolHints = appendNew(p.ToolHints, owner)
		}
	}
	// Identifiers the datasets do not list still look like tool names.
	for i, x := range w {
		if !used[i] && strings.Contains(x, "_") && !strings.ContainsAny(x, "@./:") && len(x) > 3 {
			p.Tools = appendNew(p.Tools, x)
			used[i] = true
		}
	}
	for _, t := range p.Tools {
		p.Filters = appendNew(p.Filters, "tool:"+quoteValue(t))
		if utf8.RuneCountInString(t) >= 3 && !strings.Contains(t, "*") {
			// The name as text too: the stores drive a search from a
			// text term's index and only verify the tool: filter.
			p.Filters = appendNew(p.Filters, strconv.Quote(t))
		}
	}
}

// toolParts splits a tool name on _, -, . and camel case, stemmed.
func toolParts(name string) []string {
	var parts []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			parts = append(parts, stem(strings.ToLower(string(cur))))
			cur = cur[:0]
		}
	}
	for i, r := range name {
		switch {
		case r == '_' || r == '-' || r == '.':
			flush()
		case unicode.IsUpper(r) && i > 0:
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
	}
	flush()
	return parts
}

// stem removes a plural or verb ending so that word forms meet.
func stem(w string) string {
	for _, suf := range []string{"ing", "ed", "es", "s"} {
		if strings.HasSuffix(w, suf) && len(w)-len(suf) >= 3 {
			w = strings.TrimSuffix(w, suf)
			break
		}
	}
	if strings.HasSuffix(w, "e") && len(w) >= 4 {
		w = strings.TrimSuffix(w, "e")
	}
	return w
}

// trimPunct removes sentence punctuation around a word, keeping what
// belongs to values (example.com, /etc/passwd, 4.5, a@b.c).
func trimPunct(w string) string {
	w = strings.TrimLeft(w, "([{'‘`")
	w = strings.TrimRight(w, ")]}?!,;:.'’`")
	if strings.HasSuffix(w, "'s") {
		w = strings.TrimSuffix(w, "'s")
	}
	return w
}

func isNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// quoteValue quotes a filter value when the grammar needs it.
func quoteValue(v string) string {
	if v == "" || strings.ContainsAny(v, " \t\n\"()") {
		return strconv.Quote(v)
	}
	return v
}

func appendNew(list []string, xs ...string) []string {
	for _, x := range xs {
		if !slices.Contains(list, x) {
			list = append(list, x)
		}
	}
	return list
}

// base is the filters and phrases every search of the plan has.
func (p *Plan) base() []string {
	out := slices.Clone(p.Filters)
	for _, ph := range p.Phrases {
		out = append(out, strconv.Quote(ph))
	}
	return out
}

// Query is the plan's main search: its filters and phrases, and any of
// its terms (all of them when it has one).
func (p *Plan) Query() string {
	parts := p.base()
	switch len(p.Terms) {
	case 0:
	case 1:
		parts = append(parts, textValue(p.Terms[0]))
	default:
		var or []string
		for _, t := range p.Terms {
			or = append(or, textValue(t))
		}
		parts = append(parts, "("+strings.Join(or, " OR ")+")")
	}
	return strings.Join(parts, " ")
}

// strictQuery is the plan's search with every term required; "" when it
// equals Query (fewer than two terms).
func (p *Plan) strictQuery() string {
	if len(p.Terms) < 2 {
		return ""
	}
	parts := p.base()
	for _, t := range p.Terms {
		parts = append(parts, textValue(t))
	}
	return strings.Join(parts, " ")
}

// errorQuery is the plan's search for failed runs: its filters and
// phrases and a word that error texts hold; "" unless it asks about
// errors.
func (p *Plan) errorQuery() string {
	if !p.Errors {
		return ""
	}
	return strings.Join(append(p.base(), "(error OR fail OR timeout OR exception OR denied OR refused OR invalid)"), " ")
}

// annotationQuery is the plan's search of annotations: its filters and
// phrases, and any term in an annotation; "" unless it asks about them.
func (p *Plan) annotationQuery() string {
	if !p.Annotations || len(p.Terms) == 0 {
		return ""
	}
	var or []string
	for _, t := range p.Terms {
		or = append(or, "annotation:"+quoteValue(t))
	}
	return strings.Join(append(p.base(), "("+strings.Join(or, " OR ")+")"), " ")
}

// textValue writes a free-text term so the grammar reads it as text.
func textValue(t string) string {
	if t == "OR" || t == "AND" || strings.ContainsAny(t, " \t\"()") || strings.HasPrefix(t, "-") || isFilter(t) {
		return strconv.Quote(t)
	}
	return t
}
