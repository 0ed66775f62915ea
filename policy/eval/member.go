package eval

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/language"

	"github.com/vigilhq/vigil/policy/builtin"
	"github.com/vigilhq/vigil/policy/syntax"
)

func sprintf(format string, args ...any) string {
	if len(args) == 0 {
		return format
	}
	return fmt.Sprintf(format, args...)
}

func itoa(i int) string { return strconv.Itoa(i) }

var strMethods = map[string]bool{"strip": true, "lower": true, "upper": true, "split": true, "splitlines": true, "join": true, "format": true}
var dictMethods = map[string]bool{"keys": true, "values": true, "items": true, "get": true}

var attrs = map[string][]string{
	"Message":       {"role", "content", "tool_calls", "metadata"},
	"ToolCall":      {"function", "type", "id", "metadata"},
	"Function":      {"name", "arguments"},
	"ToolOutput":    {"role", "content", "tool_call_id", "metadata"},
	"Tool":          {"name", "description", "inputSchema", "server"},
	"ToolParameter": {"type", "name", "description", "required", "properties", "additionalProperties", "items", "enum"},
	"TextChunk":     {"type", "text"},
	"Image":         {"type", "image_url"},
}

func noAttr(pos syntax.Pos, v builtin.Value, name string) {
	t := builtin.TypeName(v)
	if a, ok := attrs[t]; ok {
		throw(pos, builtin.AttributeError, "%s has no attribute %s (available: %s)", t, name, strings.Join(a, ", "))
	}
	throw(pos, builtin.AttributeError, "unavailable attribute %s for %s values", name, t)
}

func loc(v builtin.Value, at *builtin.Path, name string, ord int) builtin.Value {
	if at == nil {
		return v
	}
	return builtin.ChildAt(at, name, ord, v)
}

func metadataValue(b *builtin.EventBase) builtin.Value {
	return builtin.Located{V: b.Metadata(), At: b.At.Child("metadata", 0)}
}

// member implements e.name (spec §6.5).
func member(f *frame, pos syntax.Pos, x builtin.Value, name string) builtin.Value {
	switch v := x.(type) {
	case *builtin.Message:
		switch name {
		case "role":
			return loc(v.Role, v.At, "role", 2)
		case "content":
			return v.ContentValue()
		case "tool_calls":
			if v.CallsNull {
				return nil
			}
			out := make([]builtin.Value, len(v.ToolCalls))
			for i, c := range v.ToolCalls {
				out[i] = c
			}
			return builtin.Located{V: out, At: v.At.Child("tool_calls", 4)}
		case "metadata":
			return metadataValue(&v.EventBase)
		}
	case *builtin.ToolCall:
		switch name {
		case "function":
			return v.Function
		case "type":
			return loc(v.Type, v.At, "type", 3)
		case "id":
			return loc(v.ID, v.At, "id", 2)
		case "metadata":
			return metadataValue(&v.EventBase)
		}
	case *builtin.Function:
		switch name {
		case "name":
			return v.NameValue()
		case "arguments":
			return v.ArgsValue()
		}
	case *builtin.ToolOutput:
		switch name {
		case "role":
			return loc(v.Role, v.At, "role", 2)
		case "content":
			return v.ContentValue()
		case "tool_call_id":
			return loc(v.ToolCallID, v.At, "tool_call_id", 4)
		case "metadata":
			return metadataValue(&v.EventBase)
		}
	case *builtin.Tool:
		switch name {
		case "name":
			return loc(v.Name, v.At, "name", 2)
		case "description":
			return loc(v.Description, v.At, "description", 3)
		case "inputSchema":
			out := make([]builtin.Value, len(v.InputSchema))
			for i, p := range v.InputSchema {
				out[i] = p
			}
			return builtin.Located{V: out, At: v.At.Child("inputSchema", 4)}
		case "server":
			return v.Server
		}
	case *builtin.ToolParameter:
		switch name {
		case "type":
			return loc(v.Type, v.At, "type", 0)
		case "name":
			return loc(v.Name, v.At, "name", 1)
		case "description":
			return loc(v.Description, v.At, "description", 2)
		case "required":
			return loc(v.Required, v.At, "required", 3)
		case "properties":
			if v.Properties == nil {
				return nil
			}
			return builtin.Located{V: v.Properties, At: v.At.Child("properties", 4)}
		case "additionalProperties":
			return loc(v.AdditionalProperties, v.At, "additionalProperties", 5)
		case "items":
			return v.Items
		case "enum":
			return loc(v.Enum, v.At, "enum", 7)
		}
	case *builtin.TextChunk:
		switch name {
		case "type":
			return loc(v.Type, v.At, "type", 0)
		case "text":
			return loc(v.Text, v.At, "text", 1)
		}
	case *builtin.Image:
		switch name {
		case "type":
			return loc(v.Type, v.At, "type", 0)
		case "image_url":
			return v.ImageURLValue()
		}
	case *builtin.Contents:
		if name == "text" || name == "image" {
			return &builtin.Method{Recv: v, Name: name}
		}
	case *builtin.Record:
		if fv, ok := v.Get(name); ok {
			return fv
		}
		names := make([]string, len(v.Fields))
		for i, fl := range v.Fields {
			names[i] = fl.Name
		}
		throw(pos, builtin.AttributeError, "%s has no attribute %s (available: %s)", v.Type, name, strings.Join(names, ", "))
	}
	at := builtin.At(x)
	switch v := builtin.Strip(x).(type) {
	case *builtin.Dict:
		if val, ok := v.M[name]; ok {
			return builtin.ChildAt(at, name, keyOrd(v, name), val)
		}
		if dictMethods[name] {
			return &builtin.Method{Recv: x, Name: name}
		}
		throw(pos, builtin.KeyError, "missing key %s", name)
	case string:
		if strings.HasPrefix(strings.TrimSpace(v), "{") {
			if d, err := builtin.DecodeJSON([]byte(v)); err == nil {
				if dd, ok := d.(*builtin.Dict); ok {
					if val, ok := dd.M[name]; ok {
						return val
					}
					if !strMethods[name] {
						throw(pos, builtin.KeyError, "missing key %s in JSON object", name)
					}
				}
			}
		}
		if strMethods[name] {
			return &builtin.Method{Recv: x, Name: name}
		}
		throw(pos, builtin.AttributeError, "unavailable attribute %s for str values", name)
	case nil:
		throw(pos, builtin.AttributeError, "None has no attribute %s", name)
	}
	noAttr(pos, x, name)
	return nil
}

// callMethod calls a bound string, dict or Contents method (spec §6.8).
func callMethod(f *frame, pos syntax.Pos, m *builtin.Method, args []builtin.Value, kw *builtin.Dict) builtin.Value {
	arg := func(i int, name string, def builtin.Value) builtin.Value {
		if i < len(args) {
			return args[i]
		}
		if kw != nil {
			if v, ok := kw.Get(name); ok {
				return v
			}
		}
		return def
	}
	nargs := len(args)
	if kw != nil {
		nargs += kw.Len()
	}
	maxArgs := func(n int) {
		if nargs > n {
			throw(pos, builtin.TypeError, "%s() takes at most %d arguments (%d given)", m.Name, n, nargs)
		}
	}
	switch r := builtin.Strip(m.Recv).(type) {
	case *builtin.Contents:
		maxArgs(0)
		if m.Name == "text" {
			return builtin.Texts(r)
		}
		return builtin.Images(r)
	case *builtin.Dict:
		at := builtin.At(m.Recv)
		switch m.Name {
		case "keys":
			maxArgs(0)
			f.chargeElems(len(r.Keys))
			out := make([]builtin.Value, len(r.Keys))
			for i, k := range r.Keys {
				out[i] = k
			}
			return out
		case "values":
			maxArgs(0)
			f.chargeElems(len(r.Keys))
			out := make([]builtin.Value, len(r.Keys))
			for i, k := range r.Keys {
				out[i] = builtin.ChildAt(at, k, i, r.M[k])
			}
			return out
		case "items":
			maxArgs(0)
			f.chargeElems(4 * len(r.Keys)) // the list and a pair per entry
			out := make([]builtin.Value, len(r.Keys))
			for i, k := range r.Keys {
				out[i] = builtin.Tuple{k, builtin.ChildAt(at, k, i, r.M[k])}
			}
			return out
		case "get":
			maxArgs(2)
			k, ok := builtin.Strip(arg(0, "key", nil)).(string)
			if !ok {
				if len(args) == 0 {
					throw(pos, builtin.TypeError, "get() missing argument key")
				}
				return arg(1, "default", nil)
			}
			if v, ok := r.M[k]; ok {
				return builtin.ChildAt(at, k, keyOrd(r, k), v)
			}
			return arg(1, "default", nil)
		}
	case string:
		switch m.Name {
		case "lower":
			maxArgs(0)
			f.charge(int64(len(r)))
			return lower(r)
		case "upper":
			maxArgs(0)
			f.charge(int64(len(r)))
			return upper(r)
		case "strip":
			maxArgs(1)
			chars := builtin.Strip(arg(0, "chars", nil))
			if chars == nil {
				return strings.TrimFunc(r, isSpace)
			}
			cs, ok := chars.(string)
			if !ok {
				throw(pos, builtin.TypeError, "strip arg must be None or str")
			}
			return strings.Trim(r, cs)
		case "split":
			maxArgs(2)
			sep := builtin.Strip(arg(0, "sep", nil))
			maxsplit := int64(-1)
			if ms, ok := builtin.Strip(arg(1, "maxsplit", int64(-1))).(int64); ok {
				maxsplit = ms
			}
			var parts []string
			if sep == nil {
				parts = splitWhitespace(r, int(maxsplit))
			} else {
				s, ok := sep.(string)
				if !ok {
					throw(pos, builtin.TypeError, "must be str or None, not %s", builtin.TypeName(sep))
				}
				if s == "" {
					throw(pos, builtin.ValueError, "empty separator")
				}
				n := -1
				if maxsplit >= 0 {
					n = int(maxsplit) + 1
				}
				f.chargeElems(2 * (strings.Count(r, s) + 1)) // parts and the list
				parts = strings.SplitN(r, s, n)
			}
			f.chargeElems(len(parts))
			out := make([]builtin.Value, len(parts))
			for i, p := range parts {
				out[i] = p
			}
			return out
		case "splitlines":
			maxArgs(1)
			keep := builtin.Truthy(arg(0, "keepends", false))
			out := splitlines(r, keep)
			f.chargeElems(len(out))
			return out
		case "join":
			maxArgs(1)
			els, ok := builtin.Elements(arg(0, "iterable", nil))
			if !ok {
				throw(pos, builtin.TypeError, "can only join an iterable")
			}
			size := int64(len(r)) * int64(max(len(els)-1, 0))
			parts := make([]string, len(els))
			for i, e := range els {
				s, ok := builtin.Strip(e).(string)
				if !ok {
					throw(pos, builtin.TypeError, "sequence item %d: expected str instance, %s found", i, builtin.TypeName(e))
				}
				parts[i] = s
				size += int64(len(s))
			}
			f.charge(size)
			return strings.Join(parts, r)
		case "format":
			return format(f, pos, r, args, kw)
		}
	}
	throw(pos, builtin.AttributeError, "unavailable method %s", m.Name)
	return nil
}

// upper and lower use Python's full Unicode case mapping ("ß".upper() is
// "SS", final sigma in lower), with an ASCII fast path. A cases.Caser is
// stateful, so each call makes its own.
func upper(s string) string {
	if isASCII(s) {
		return strings.ToUpper(s)
	}
	return cases.Upper(language.Und).String(s)
}

func lower(s string) string {
	if isASCII(s) {
		return strings.ToLower(s)
	}
	return cases.Lower(language.Und).String(s)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func splitWhitespace(s string, maxsplit int) []string {
	var out []string
	i := 0
	for {
		for i < len(s) {
			r, n := utf8.DecodeRuneInString(s[i:])
			if !isSpace(r) {
				break
			}
			i += n
		}
		if i >= len(s) {
			return out
		}
		if maxsplit >= 0 && len(out) == maxsplit {
			out = append(out, strings.TrimRightFunc(s[i:], isSpace))
			return out
		}
		j := i
		for j < len(s) {
			r, n := utf8.DecodeRuneInString(s[j:])
			if isSpace(r) {
				break
			}
			j += n
		}
		out = append(out, s[i:j])
		i = j
	}
}

func isLineBreak(r rune) bool {
	switch r {
	case '\n', '\r', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
		return true
	}
	return false
}

func splitlines(s string, keep bool) []builtin.Value {
	out := []builtin.Value{}
	start := 0
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !isLineBreak(r) {
			i += n
			continue
		}
		end := i + n
		if r == '\r' && end < len(s) && s[end] == '\n' {
			end++
		}
		if keep {
			out = append(out, s[start:end])
		} else {
			out = append(out, s[start:i])
		}
		start, i = end, end
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

func format(f *frame, pos syntax.Pos, s string, args []builtin.Value, kw *builtin.Dict) builtin.Value {
	var b strings.Builder
	auto, manual := 0, false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch == '}' {
			if i+1 < len(s) && s[i+1] == '}' {
				b.WriteByte('}')
				i++
				continue
			}
			throw(pos, builtin.ValueError, "single '}' encountered in format string")
		}
		if ch != '{' {
			b.WriteByte(ch)
			continue
		}
		if i+1 < len(s) && s[i+1] == '{' {
			b.WriteByte('{')
			i++
			continue
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			throw(pos, builtin.ValueError, "single '{' encountered in format string")
		}
		field := s[i+1 : i+j]
		i += j
		if strings.ContainsAny(field, "!:.[") {
			throw(pos, builtin.ValueError, "format specs, conversions and field access are not supported")
		}
		var v builtin.Value
		switch {
		case field == "":
			if manual {
				throw(pos, builtin.ValueError, "cannot switch from manual field specification to automatic field numbering")
			}
			if auto >= len(args) {
				throw(pos, builtin.KeyError, "format index %d out of range", auto)
			}
			v = args[auto]
			auto++
		case field[0] >= '0' && field[0] <= '9':
			if auto > 0 {
				throw(pos, builtin.ValueError, "cannot switch from automatic field numbering to manual field specification")
			}
			manual = true
			n, err := strconv.Atoi(field)
			if err != nil || n >= len(args) {
				throw(pos, builtin.KeyError, "format index %s out of range", field)
			}
			v = args[n]
		default:
			var ok bool
			if kw != nil {
				v, ok = kw.Get(field)
			}
			if !ok {
				throw(pos, builtin.KeyError, "missing key %s", field)
			}
		}
		d := f.display(v)
		f.fits(int64(b.Len()) + int64(len(d)))
		b.WriteString(d)
	}
	f.charge(int64(b.Len()))
	return b.String()
}
