package builtin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/vigilhq/vigil/trace"
)

// Str returns the Go string of a str value (located or not) and "" otherwise.
func Str(v Value) string {
	s, _ := Strip(v).(string)
	return s
}

// IsStr reports whether v is a str.
func IsStr(v Value) bool {
	_, ok := Strip(v).(string)
	return ok
}

// TypeName returns the language type name of v (spec §7.6), or a
// descriptive name for values without one.
func TypeName(v Value) string {
	switch x := Strip(v).(type) {
	case nil:
		return "NoneType"
	case bool:
		return "bool"
	case int64, *big.Int:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case []Value:
		return "list"
	case Tuple:
		return "tuple"
	case *Dict:
		return "dict"
	case *Message:
		return "Message"
	case *ToolCall:
		return "ToolCall"
	case *Function:
		return "Function"
	case *ToolOutput:
		return "ToolOutput"
	case *Tool:
		return "Tool"
	case *ToolParameter:
		return "ToolParameter"
	case *TextChunk:
		return "TextChunk"
	case *Image:
		return "Image"
	case *Contents:
		return "Contents"
	case *Record:
		return x.Type
	case *Violation:
		return "PolicyViolation"
	case *Builtin:
		return "function"
	case *Method:
		return "method"
	case *Module:
		return "module"
	case *Quantifier:
		return "quantifier"
	}
	return fmt.Sprintf("%T", v)
}

// Truthy is Python truthiness (spec §6.2).
func Truthy(v Value) bool {
	switch x := Strip(v).(type) {
	case nil:
		return false
	case bool:
		return x
	case int64:
		return x != 0
	case *big.Int:
		return x.Sign() != 0
	case float64:
		return x != 0
	case string:
		return x != ""
	case []Value:
		return len(x) > 0
	case Tuple:
		return len(x) > 0
	case *Dict:
		return x.Len() > 0
	case *Contents:
		return len(x.Chunks) > 0
	}
	return true
}

// IsTrue reports whether v is exactly the boolean True, located or not:
// the test a body line must pass (spec §10.3). A True read from the trace
// carries its location (§6.9) and counts like a literal True; truthy
// non-booleans (1, "x", [0]) never do. Every line, memoised line and
// one-line predicate of the evaluator decides through this function.
func IsTrue(v Value) bool {
	b, ok := Strip(v).(bool)
	return ok && b
}

// Number returns v as a number: (int, 0, true, false) for bool/int,
// (0, float, true, true) for float.
func Number(v Value) (i int64, f float64, isFloat, ok bool) {
	switch x := Strip(v).(type) {
	case bool:
		if x {
			return 1, 0, false, true
		}
		return 0, 0, false, true
	case int64:
		return x, 0, false, true
	case float64:
		return 0, x, true, true
	}
	return 0, 0, false, false
}

// BigInt returns an int-like value (bool, int64, *big.Int) as a big.Int.
func BigInt(v Value) (*big.Int, bool) {
	switch x := Strip(v).(type) {
	case *big.Int:
		return x, true
	case int64:
		return big.NewInt(x), true
	case bool:
		if x {
			return big.NewInt(1), true
		}
		return big.NewInt(0), true
	}
	return nil, false
}

// IntValue returns b as an int64 when it fits, else b itself: the
// canonical form of an int value.
func IntValue(b *big.Int) Value {
	if b.IsInt64() {
		return b.Int64()
	}
	return b
}

// compareBig compares two numbers at least one of which is a *big.Int;
// ok is false when one is not a number.
func compareBig(a, b Value) (int, bool) {
	af, aIsF := a.(float64)
	bf, bIsF := b.(float64)
	switch {
	case aIsF && bIsF:
		return cmp3(af < bf, af > bf), true
	case aIsF || bIsF:
		x, y := af, bf
		var bi *big.Int
		var ok bool
		if aIsF {
			bi, ok = BigInt(b)
		} else {
			bi, ok = BigInt(a)
		}
		if !ok || math.IsNaN(x+y) {
			return 0, false
		}
		f := new(big.Float).SetInt(bi)
		g := big.NewFloat(0)
		if aIsF {
			if math.IsInf(x, 0) {
				return cmp3(x < 0, x > 0), true
			}
			g.SetFloat64(x)
			return g.Cmp(f), true
		}
		if math.IsInf(y, 0) {
			return cmp3(y > 0, y < 0), true
		}
		g.SetFloat64(y)
		return f.Cmp(g), true
	}
	x, ok1 := BigInt(a)
	y, ok2 := BigInt(b)
	if !ok1 || !ok2 {
		return 0, false
	}
	return x.Cmp(y), true
}

// Equal is == (spec §6.2): never fails.
func Equal(a, b Value) bool {
	a, b = Strip(a), Strip(b)
	if _, ok := a.(*big.Int); ok {
		r, ok := compareBig(a, b)
		return ok && r == 0
	}
	if _, ok := b.(*big.Int); ok {
		r, ok := compareBig(a, b)
		return ok && r == 0
	}
	ai, af, afl, aok := Number(a)
	bi, bf, bfl, bok := Number(b)
	if aok || bok {
		if !aok || !bok {
			return false
		}
		switch {
		case !afl && !bfl:
			return ai == bi
		case afl && bfl:
			return af == bf
		default:
			// int and float: exactly, as Python does (2**53 + 1 != 2.0**53).
			r, ok := compareBig(a, b)
			return ok && r == 0
		}
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []Value:
		y, ok := b.([]Value)
		return ok && equalSeq(x, y)
	case Tuple:
		y, ok := b.(Tuple)
		return ok && equalSeq(x, y)
	case *Dict:
		y, ok := b.(*Dict)
		if !ok || x.Len() != y.Len() {
			return false
		}
		for _, k := range x.Keys {
			yv, ok := y.M[k]
			if !ok || !Equal(x.M[k], yv) {
				return false
			}
		}
		return true
	case *Contents:
		y, ok := b.(*Contents)
		return ok && (x == y || equalSeq(x.Chunks, y.Chunks))
	}
	return a == b
}

func equalSeq(x, y []Value) bool {
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if !Equal(x[i], y[i]) {
			return false
		}
	}
	return true
}

// Elements returns the elements of an iterable value with their locations
// (list, tuple, dict keys, Contents chunks, str code points), or false.
func Elements(v Value) ([]Value, bool) {
	at := At(v)
	switch x := Strip(v).(type) {
	case []Value:
		if _, ok := v.(Located); !ok {
			return x, true
		}
		out := make([]Value, len(x))
		for i, e := range x {
			out[i] = locate(e, at.Index(i))
		}
		return out, true
	case Tuple:
		return []Value(x), true
	case *Dict:
		out := make([]Value, len(x.Keys))
		for i, k := range x.Keys {
			out[i] = k
		}
		return out, true
	case *Contents:
		return x.Chunks, true
	case string:
		out := make([]Value, 0, len(x))
		for _, r := range x {
			out = append(out, string(r))
		}
		return out, true
	}
	return nil, false
}

// Texts implements text() for one argument (spec §13.1): the strings of v,
// located where v is.
func Texts(v Value) []Value {
	var out []Value
	eachText(v, func(t Value) { out = append(out, t) })
	return out
}

// TextSize returns the total length in bytes of the strings Texts(v)
// would list, without listing them.
func TextSize(v Value) int {
	n := 0
	eachText(v, func(t Value) { n += len(Str(t)) })
	return n
}

// eachText calls fn with each string of v, in the order of Texts.
func eachText(v Value, fn func(Value)) {
	switch x := Strip(v).(type) {
	case string:
		fn(v)
	case *Contents:
		for _, c := range x.Chunks {
			if t, ok := c.(*TextChunk); ok {
				fn(locate(t.Text, t.At.Child("text", 1)))
			}
		}
	case *Message:
		eachText(x.contentValue(), fn)
	case *ToolOutput:
		if _, isDict := x.Content.(*Dict); !isDict {
			eachText(x.contentValue(), fn)
		}
	case []Value, Tuple:
		els, _ := Elements(v)
		for _, e := range els {
			eachText(e, fn)
		}
	}
}

// Images implements image() for one argument.
func Images(v Value) []Value {
	var out []Value
	appendImages(&out, v)
	return out
}

func appendImages(out *[]Value, v Value) {
	switch x := Strip(v).(type) {
	case string:
		if strings.HasPrefix(x, "data:image/png;base64,") || strings.HasPrefix(x, "data:image/jpeg;base64,") {
			*out = append(*out, v)
		}
	case *Image:
		*out = append(*out, x.URLValue())
	case *Contents:
		for _, c := range x.Chunks {
			if im, ok := c.(*Image); ok {
				*out = append(*out, im.URLValue())
			}
		}
	case *Message:
		appendImages(out, x.contentValue())
	case *ToolOutput:
		appendImages(out, x.contentValue())
	case []Value, Tuple:
		els, _ := Elements(v)
		for _, e := range els {
			appendImages(out, e)
		}
	}
}

// URLValue returns the located URL string of an image chunk.
func (im *Image) URLValue() Value {
	if im.At == nil {
		return im.URL
	}
	return Located{V: im.URL, At: im.At.Child("image_url", 1).Child("url", 0)}
}

// ImageURLValue returns the image_url attribute: a dict {"url": ...}.
func (im *Image) ImageURLValue() Value {
	d := NewDict(1)
	d.Set("url", im.URL)
	if im.At == nil {
		return d
	}
	return Located{V: d, At: im.At.Child("image_url", 1)}
}

// contentValue returns the located content, made on first use: most
// rules read the content of few events, or none, so building it for every
// event up front would cost an allocation per event for nothing. It is
// safe for concurrent use (a Model may be analysed concurrently).
func (m *Message) contentValue() Value {
	m.contentOnce.Do(func() {
		if m.LocatedContent == nil {
			m.LocatedContent = fieldValue(m.Content, m.At, "content", 3)
		}
	})
	return m.LocatedContent
}

func (o *ToolOutput) contentValue() Value {
	o.contentOnce.Do(func() {
		if o.LocatedContent == nil {
			o.LocatedContent = fieldValue(o.Content, o.At, "content", 3)
		}
	})
	return o.LocatedContent
}

func fieldValue(v Value, at *Path, name string, ord int) Value {
	if at == nil {
		return v
	}
	return ChildAt(at, name, ord, v)
}

// LocateContent makes the located content of an event (Message or
// ToolOutput) now rather than on first use. Reading m.content makes it
// once in any case; later reads allocate nothing.
func LocateContent(e Event) {
	switch x := e.(type) {
	case *Message:
		x.contentValue()
	case *ToolOutput:
		x.contentValue()
	}
}

// ContentValue returns the located content of a message.
func (m *Message) ContentValue() Value { return m.contentValue() }

// ContentValue returns the located content of a tool output.
func (o *ToolOutput) ContentValue() Value { return o.contentValue() }

// Display returns the display string of v (Python str(), spec §6.4).
func Display(v Value) string {
	switch x := Strip(v).(type) {
	case string:
		return x
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case int64:
		return strconv.FormatInt(x, 10)
	case *big.Int:
		return x.String()
	case float64:
		return FormatFloat(x)
	case []Value:
		return reprSeq("[", "]", x, false)
	case Tuple:
		return reprSeq("(", ")", x, len(x) == 1)
	case *Dict:
		if x == nil {
			return "None"
		}
		var b strings.Builder
		b.WriteByte('{')
		for i, k := range x.Keys {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(Repr(k))
			b.WriteString(": ")
			b.WriteString(Repr(x.M[k]))
		}
		b.WriteByte('}')
		return b.String()
	case Displayer:
		return x.Display()
	case *Builtin:
		return "<built-in function " + x.Name + ">"
	case *Method:
		return "<method " + x.Name + " of " + TypeName(x.Recv) + ">"
	case *Module:
		return "<module '" + x.Name + "'>"
	case *Quantifier:
		return "<quantifier " + x.Name + ">"
	}
	b, err := json.Marshal(JSONForm(v))
	if err != nil {
		return TypeName(v)
	}
	return string(b)
}

func reprSeq(open, close string, xs []Value, trailing bool) string {
	var b strings.Builder
	b.WriteString(open)
	for i, e := range xs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(Repr(e))
	}
	if trailing {
		b.WriteByte(',')
	}
	b.WriteString(close)
	return b.String()
}

// Repr is Python repr() for the values that have one (strings quoted).
func Repr(v Value) string {
	s, ok := Strip(v).(string)
	if !ok {
		return Display(v)
	}
	q := byte('\'')
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		q = '"'
	}
	var b strings.Builder
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == rune(q):
			b.WriteByte('\\')
			b.WriteByte(q)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			fmt.Fprintf(&b, `\x%02x`, r)
		case !isPrintable(r):
			if r <= 0xff {
				fmt.Fprintf(&b, `\x%02x`, r) // Python: \xhh up to U+00FF
			} else if r <= 0xffff {
				fmt.Fprintf(&b, `\u%04x`, r)
			} else {
				fmt.Fprintf(&b, `\U%08x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(q)
	return b.String()
}

func isPrintable(r rune) bool {
	if r == ' ' {
		return true
	}
	return strconv.IsPrint(r)
}

// FormatFloat renders a float as Python repr does.
func FormatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	exp := int(math.Floor(math.Log10(math.Abs(f))))
	// Verify exponent using the shortest repr in 'e' format.
	es := strconv.FormatFloat(f, 'e', -1, 64)
	if i := strings.IndexByte(es, 'e'); i >= 0 {
		exp, _ = strconv.Atoi(es[i+1:])
	}
	if exp < -4 || exp >= 16 {
		mant, ex, _ := strings.Cut(es, "e")
		n, _ := strconv.Atoi(ex)
		sign := "+"
		if n < 0 {
			sign = "-"
			n = -n
		}
		return fmt.Sprintf("%se%s%02d", mant, sign, n)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsRune(s, '.') {
		s += ".0"
	}
	return s
}

// RuneLen returns the number of code points of s.
func RuneLen(s string) int { return utf8.RuneCountInString(s) }

// JSONForm converts v to plain Go data for encoding/json following the
// result serialisation of spec §11.1 (events in their JSON form of §7.3,
// patterns and functions as their display string). Dicts become
// OrderedMap to keep key order.
func JSONForm(v Value) any { return jsonForm(v, true) }

// ContentKey is a deep rendering of v for caches (spec §13.5): like its
// JSON form but without locations, so equal values in different places of
// a trace (two identical messages) have the same key.
func ContentKey(v Value) string {
	return string(AppendContentKey(nil, v))
}

// AppendContentKey appends ContentKey(v) to b.
func AppendContentKey(b []byte, v Value) []byte {
	b = append(b, TypeName(v)...)
	b = append(b, ':')
	form := jsonForm(v, false)
	if out, ok := appendJSONForm(b, form); ok {
		return out
	}
	j, err := marshalNoEscape(form)
	if err != nil {
		return append(b, Display(v)...)
	}
	return append(b, j...)
}

// appendJSONForm appends v, a value of jsonForm, as marshalNoEscape
// writes it, without reflection; false for a value it does not write
// itself (the caller takes marshalNoEscape).
func appendJSONForm(b []byte, v any) ([]byte, bool) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), true
	case bool:
		return strconv.AppendBool(b, x), true
	case int64:
		return strconv.AppendInt(b, x, 10), true
	case string:
		return appendJSONString(b, x, false), true
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return b, false
		}
		return trace.AppendFloat(b, x), true
	case []any:
		if x == nil {
			return append(b, "null"...), true
		}
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = appendJSONForm(b, e); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	case OrderedMap:
		// MarshalJSON: keys as json.Marshal writes them (HTML escaped),
		// values as marshalNoEscape.
		b = append(b, '{')
		for i, kv := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, kv.Key, true)
			b = append(b, ':')
			var ok bool
			if b, ok = appendJSONForm(b, kv.Value); !ok {
				return b, false
			}
		}
		return append(b, '}'), true
	}
	return b, false
}

// appendJSONString appends s quoted as encoding/json writes a string,
// with or without HTML escaping.
func appendJSONString(b []byte, s string, escapeHTML bool) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && (!escapeHTML || (c != '<' && c != '>' && c != '&')) {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

func jsonForm(v Value, withIndex bool) any {
	JSONForm := func(v Value) any { return jsonForm(v, withIndex) }
	meta := func(e *EventBase) any {
		if withIndex {
			return metadataForm(e)
		}
		if e.UserMetadata == nil {
			return OrderedMap{}
		}
		return jsonForm(e.UserMetadata, false)
	}
	switch x := Strip(v).(type) {
	case nil, bool, int64, string:
		return x
	case *big.Int:
		return json.Number(x.String())
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return FormatFloat(x)
		}
		return x
	case []Value:
		return jsonSeq(x)
	case Tuple:
		return jsonSeq(x)
	case *Dict:
		if x == nil {
			return nil
		}
		m := OrderedMap{}
		for _, k := range x.Keys {
			m = append(m, KV{k, JSONForm(x.M[k])})
		}
		return m
	case *Message:
		var calls any
		if !x.CallsNull {
			cs := make([]any, len(x.ToolCalls))
			for i, c := range x.ToolCalls {
				cs[i] = JSONForm(c)
			}
			calls = cs
		}
		return OrderedMap{{"metadata", meta(&x.EventBase)}, {"server", x.Server}, {"role", x.Role}, {"content", JSONForm(x.Content)}, {"tool_calls", calls}}
	case *ToolCall:
		return OrderedMap{{"metadata", meta(&x.EventBase)}, {"server", x.Server}, {"id", x.ID}, {"type", typeForm(x.Type)}, {"function", JSONForm(x.Function)}}
	case *Function:
		return OrderedMap{{"name", x.Name}, {"arguments", JSONForm(x.Args())}}
	case *ToolOutput:
		return OrderedMap{{"metadata", meta(&x.EventBase)}, {"server", x.Server}, {"role", x.Role}, {"content", JSONForm(x.Content)}, {"tool_call_id", x.ToolCallID}}
	case *Tool:
		ps := make([]any, len(x.InputSchema))
		for i, p := range x.InputSchema {
			ps[i] = JSONForm(p)
		}
		return OrderedMap{{"metadata", meta(&x.EventBase)}, {"server", x.Server}, {"name", x.Name}, {"description", x.Description}, {"inputSchema", ps}}
	case *ToolParameter:
		return OrderedMap{{"type", JSONForm(x.Type)}, {"name", x.Name}, {"description", x.Description}, {"required", x.Required}, {"properties", JSONForm(x.Properties)}, {"additionalProperties", x.AdditionalProperties}, {"items", JSONForm(x.Items)}, {"enum", JSONForm(x.Enum)}}
	case *TextChunk:
		return OrderedMap{{"type", x.Type}, {"text", x.Text}}
	case *Image:
		return OrderedMap{{"type", x.Type}, {"image_url", OrderedMap{{"url", x.URL}}}}
	case *Contents:
		return jsonSeq(x.Chunks)
	case *Record:
		m := OrderedMap{}
		for _, f := range x.Fields {
			m = append(m, KV{f.Name, JSONForm(f.Value)})
		}
		return m
	case *Violation:
		return Display(x)
	}
	return Display(v)
}

// metadataForm is jsonForm(e.Metadata(), true), the event's metadata with
// its trace_idx, built without the intermediate Dict when Metadata has
// not made it yet.
func metadataForm(e *EventBase) any {
	if e.metadata != nil {
		return jsonForm(e.metadata, true)
	}
	u := e.UserMetadata
	m := make(OrderedMap, 0, u.Len()+1)
	idx := false
	if u != nil {
		for _, k := range u.Keys {
			if k == "trace_idx" { // Metadata's Set replaces it in place
				m = append(m, KV{k, int64(e.Index)})
				idx = true
				continue
			}
			m = append(m, KV{k, jsonForm(u.M[k], true)})
		}
	}
	if !idx {
		m = append(m, KV{"trace_idx", int64(e.Index)})
	}
	return m
}

// boxedFunction is the usual type of a tool call, boxed once.
var boxedFunction any = "function"

// typeForm is the JSON form of a tool call's type, without boxing the
// usual "function" anew.
func typeForm(t string) any {
	if t == "function" {
		return boxedFunction
	}
	return t
}

func jsonSeq(xs []Value) []any {
	out := make([]any, len(xs))
	for i, e := range xs {
		out[i] = JSONForm(e)
	}
	return out
}

// KV is one entry of an OrderedMap.
type KV struct {
	Key   string
	Value any
}

// OrderedMap is a JSON object that keeps its key order when marshalled.
type OrderedMap []KV

// MarshalJSON implements json.Marshaler.
func (m OrderedMap) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, kv := range m {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(kv.Key)
		b.Write(k)
		b.WriteByte(':')
		v, err := marshalNoEscape(kv.Value)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func marshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// FromJSON converts decoded JSON (from a json.Decoder with UseNumber) to a
// value without location: objects become *Dict in key order when decoded by
// DecodeJSON, numbers become int64 or float64.
func FromJSON(x any) Value {
	switch t := x.(type) {
	case json.Number:
		return numberValue(string(t))
	case float64:
		if t == math.Trunc(t) && math.Abs(t) < 1<<53 {
			return int64(t)
		}
		return t
	case []any:
		out := make([]Value, len(t))
		for i, e := range t {
			out[i] = FromJSON(e)
		}
		return out
	case map[string]any:
		d := NewDict(len(t))
		for k, v := range t {
			d.Set(k, FromJSON(v))
		}
		return d
	}
	return x
}

func numberValue(s string) Value {
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i
		}
		if b, ok := new(big.Int).SetString(s, 10); ok {
			return b
		}
	}
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

// DecodeJSON parses JSON text into a value, keeping object key order (a
// repeated key keeps its first position and last value).
func DecodeJSON(data []byte) (Value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("extra data after JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (Value, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '[':
			out := []Value{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				out = append(out, v)
			}
			_, err := dec.Token()
			return out, err
		case '{':
			d := NewDict(4)
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				d.Set(k, v)
			}
			_, err := dec.Token()
			return d, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case json.Number:
		return numberValue(string(t)), nil
	case string:
		return t, nil
	case bool:
		return t, nil
	case nil:
		return nil, nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}
