package search

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Fold is the case folding of free text: each code point maps to one code
// point (simple case folding, as lower(upper(r))), so offsets in the folded
// text are offsets in the original; NUL becomes U+FFFD (PostgreSQL text
// cannot hold NUL). Stores index Fold(field) and search for Fold(term).
func Fold(s string) string {
	return strings.Map(foldRune, s)
}

func foldRune(r rune) rune {
	if r == 0 {
		return utf8.RuneError
	}
	if r < utf8.RuneSelf {
		if r >= 'A' && r <= 'Z' {
			return r + 32
		}
		return r
	}
	return unicode.ToLower(unicode.ToUpper(r))
}

// Field is one searchable field of a trace (explorer-api §7.2).
type Field struct {
	// Msg is the message index, -1 for the trace name.
	Msg int
	// Tool is true for a tool call's function.name (tool: also uses it).
	Tool bool
	// Text is the field's text, unfolded.
	Text string
}

// event is what Fields reads of a stored event.
type event struct {
	Content   json.RawMessage `json:"content"`
	Error     json.RawMessage `json:"error"`
	ToolCalls []struct {
		Function struct {
			Name      json.RawMessage `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// Fields returns the searchable fields of message msg (its event JSON):
// the text of content (a string, or the text parts joined with "\n"), each
// tool call's function.name and arguments (a string, or compact JSON), and
// a string error. A field that does not decode is skipped.
func Fields(msg int, data []byte) []Field {
	var e event
	if json.Unmarshal(data, &e) != nil {
		return nil
	}
	var out []Field
	if s, ok := contentText(e.Content); ok {
		out = append(out, Field{Msg: msg, Text: s})
	}
	for _, tc := range e.ToolCalls {
		var name string
		if json.Unmarshal(tc.Function.Name, &name) == nil && name != "" {
			out = append(out, Field{Msg: msg, Tool: true, Text: name})
		}
		if s, ok := argumentsText(tc.Function.Arguments); ok {
			out = append(out, Field{Msg: msg, Text: s})
		}
	}
	var es string
	if json.Unmarshal(e.Error, &es) == nil && es != "" {
		out = append(out, Field{Msg: msg, Text: es})
	}
	return out
}

func contentText(raw json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, s != ""
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return "", false
	}
	var texts []string
	for _, p := range parts {
		if p.Type == "text" {
			texts = append(texts, p.Text)
		}
	}
	j := strings.Join(texts, "\n")
	return j, j != ""
}

func argumentsText(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, s != ""
	}
	// Compact JSON with escapes resolved (no \u00e9, no HTML escaping), so
	// that a term matches what a reader sees; objects come out with their
	// keys sorted.
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return "", false
	}
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if e.Encode(v) != nil {
		return "", false
	}
	return strings.TrimSuffix(b.String(), "\n"), true
}

// Highlight is one free-text match: an address with a code-point range
// (explorer-api §2.3) and the term that matched.
type Highlight struct {
	Address string
	Term    string
}

// MaxHighlights is the most highlights per trace.
const MaxHighlights = 100

// Highlights finds the occurrences of terms in the messages of a trace
// (msgs[i] is the event JSON of message i), at most MaxHighlights, in
// message order. Addresses point at strings: content (or the text part
// holding the match), tool-call names, string arguments or the string
// values inside object arguments, and error.
func Highlights(msgs [][]byte, terms []string) []Highlight {
	var folded []string
	for _, t := range terms {
		if f := Fold(t); f != "" {
			folded = append(folded, f)
		}
	}
	if len(folded) == 0 {
		return nil
	}
	var out []Highlight
	emit := func(addr, text string) bool {
		ft := Fold(text)
		for i, term := range folded {
			for off := 0; ; {
				k := strings.Index(ft[off:], term)
				if k < 0 {
					break
				}
				start := utf8.RuneCountInString(ft[:off+k])
				end := start + utf8.RuneCountInString(term)
				out = append(out, Highlight{addr + ":" + strconv.Itoa(start) + "-" + strconv.Itoa(end), terms[i]})
				if len(out) >= MaxHighlights {
					return false
				}
				off += k + len(term)
			}
		}
		return true
	}
	for i, data := range msgs {
		base := "messages." + strconv.Itoa(i)
		var e event
		if json.Unmarshal(data, &e) != nil {
			continue
		}
		if !walkContent(base+".content", e.Content, emit) {
			return out
		}
		for j, tc := range e.ToolCalls {
			fn := base + ".tool_calls." + strconv.Itoa(j) + ".function"
			var name string
			if json.Unmarshal(tc.Function.Name, &name) == nil && !emit(fn+".name", name) {
				return out
			}
			var args any
			if json.Unmarshal(tc.Function.Arguments, &args) == nil && !walkStrings(fn+".arguments", args, emit) {
				return out
			}
		}
		var es string
		if json.Unmarshal(e.Error, &es) == nil && !emit(base+".error", es) {
			return out
		}
	}
	return out
}

func walkContent(addr string, raw json.RawMessage, emit func(addr, text string) bool) bool {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return emit(addr, s)
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return true
	}
	for k, p := range parts {
		if p.Type == "text" && !emit(addr+"."+strconv.Itoa(k)+".text", p.Text) {
			return false
		}
	}
	return true
}

// walkStrings emits every string inside v (object values, array items).
func walkStrings(addr string, v any, emit func(addr, text string) bool) bool {
	switch x := v.(type) {
	case string:
		return emit(addr, x)
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if strings.ContainsAny(k, ".[]") {
				continue // not addressable as a key step
			}
			if !walkStrings(addr+"."+k, x[k], emit) {
				return false
			}
		}
	case []any:
		for i, y := range x {
			if !walkStrings(addr+"."+strconv.Itoa(i), y, emit) {
				return false
			}
		}
	}
	return true
}
