package trace

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Address is a path to a part of a trace, optionally with a selector
// (explorer-api §2.3, policy-language §7.7 and §11.4):
//
//	<root>
//	messages.3
//	messages[2].tool_calls[0].function.arguments.to:0-12
//	messages.0.content:L2
//	messages.0.content.1.image_url.url:bbox-0,0,0.5,0.5
//	messages.@01HX.content:5-10
//
// The zero Address is invalid; Root is the trace-level address.
type Address struct {
	// Root marks the trace-level address "<root>" (Steps is empty).
	Root bool
	// Steps are the steps after "messages"; the first selects an event.
	Steps []Step
	// Selector is the optional part after the last ':'.
	Selector Selector
}

// Step is one step of an address path.
type Step struct {
	// Key is the step as written: a field name, a dict key verbatim, or
	// the digits of an index ("" for an @id step).
	Key string
	// Index is the list index when Key is all digits, else -1. On an
	// object the step is looked up by Key, so a dict key "3" resolves too.
	Index int
	// ID is the message id of an @id step (first step only), else "".
	ID string
}

// SelectorKind tells which selector an address has.
type SelectorKind uint8

// Selector kinds.
const (
	SelectNone  SelectorKind = iota // the whole node
	SelectRange                     // :START-END, code points, END exclusive
	SelectLine                      // :L<n>, 0-based line (split on \n)
	SelectBBox                      // :bbox-x1,y1,x2,y2, each in [0,1]
)

// Selector is the part of an address after the path.
type Selector struct {
	Kind SelectorKind
	// Start and End are the code-point range of SelectRange.
	Start, End int
	// Line is the 0-based line number of SelectLine.
	Line int
	// BBox is x1, y1, x2, y2 of SelectBBox.
	BBox [4]float64
	// bboxText keeps the numbers as written, so String round-trips.
	bboxText string
}

// ErrAddress is matched (errors.Is) by every address syntax error.
var ErrAddress = errors.New("invalid address")

// ErrUnresolved is matched (errors.Is) when a well-formed address does not
// point into the trace.
var ErrUnresolved = errors.New("address not resolved")

// AddressError is a syntax error in an address, at a byte offset of it.
type AddressError struct {
	Address string
	Offset  int
	Msg     string
}

// Error renders `address "A": at offset N: msg`.
func (e *AddressError) Error() string {
	return fmt.Sprintf("address %q: at offset %d: %s", e.Address, e.Offset, e.Msg)
}

// Unwrap makes errors.Is(err, ErrAddress) true.
func (e *AddressError) Unwrap() error { return ErrAddress }

// RootAddress is the trace-level address "<root>".
var RootAddress = Address{Root: true}

// smallInts caches the decimal text of small indices (addresses are built
// for every flattened item). It is filled on first use, not at start-up.
var smallInts = sync.OnceValue(func() (s *[1024]string) {
	s = new([1024]string)
	for i := range s {
		s[i] = strconv.Itoa(i)
	}
	return s
})

func itoa(i int) string {
	if i >= 0 && i < 1024 {
		return smallInts()[i]
	}
	return strconv.Itoa(i)
}

// MessageAddress returns the address messages.i.
func MessageAddress(i int) Address {
	return Address{Steps: []Step{{Key: itoa(i), Index: i}}}
}

// Key returns a copy of a extended by a field-name or dict-key step.
func (a Address) Key(k string) Address {
	idx, ok := atoiMax(k)
	if !ok {
		idx = -1
	}
	return a.with(Step{Key: k, Index: idx})
}

// Index returns a copy of a extended by a list-index step.
func (a Address) Index(i int) Address {
	return a.with(Step{Key: itoa(i), Index: i})
}

// Range returns a copy of a with the code-point range [start, end).
func (a Address) Range(start, end int) Address {
	a.Steps = append([]Step(nil), a.Steps...)
	a.Selector = Selector{Kind: SelectRange, Start: start, End: end}
	return a
}

func (a Address) with(s Step) Address {
	steps := make([]Step, len(a.Steps), len(a.Steps)+1)
	copy(steps, a.Steps)
	a.Steps = append(steps, s)
	a.Selector = Selector{}
	return a
}

// Path returns a without its selector.
func (a Address) Path() Address {
	a.Selector = Selector{}
	return a
}

// IsZero reports whether a is the zero (invalid) Address.
func (a Address) IsZero() bool { return !a.Root && len(a.Steps) == 0 }

// String formats a in the canonical dot form (brackets become dots):
// "messages.2.tool_calls.0:3-5", "<root>".
func (a Address) String() string {
	if a.Root {
		return "<root>"
	}
	var b strings.Builder
	b.WriteString("messages")
	for _, s := range a.Steps {
		b.WriteByte('.')
		if s.ID != "" {
			b.WriteByte('@')
			b.WriteString(s.ID)
		} else {
			b.WriteString(s.Key)
		}
	}
	switch a.Selector.Kind {
	case SelectRange:
		fmt.Fprintf(&b, ":%d-%d", a.Selector.Start, a.Selector.End)
	case SelectLine:
		fmt.Fprintf(&b, ":L%d", a.Selector.Line)
	case SelectBBox:
		b.WriteString(":bbox-")
		if a.Selector.bboxText != "" {
			b.WriteString(a.Selector.bboxText)
		} else {
			for i, f := range a.Selector.BBox {
				if i > 0 {
					b.WriteByte(',')
				}
				b.WriteString(strconv.FormatFloat(f, 'f', -1, 64))
			}
		}
	}
	return b.String()
}

// MarshalText implements encoding.TextMarshaler (the String form).
func (a Address) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler (ParseAddress).
func (a *Address) UnmarshalText(b []byte) error {
	p, err := ParseAddress(string(b))
	if err != nil {
		return err
	}
	*a = p
	return nil
}

// ParseAddress parses the full address grammar of explorer-api §2.3:
// "<root>", or "messages" followed by steps (".i", "[i]", ".key", and
// ".@id" as the first step) and an optional selector (":S-E", ":Ln",
// ":bbox-x1,y1,x2,y2"). The selector starts at the last ':' whose suffix
// is a valid selector; any other ':' belongs to a key. Errors match
// ErrAddress and name the offset.
func ParseAddress(s string) (Address, error) {
	if s == "<root>" {
		return RootAddress, nil
	}
	fail := func(off int, format string, args ...any) (Address, error) {
		return Address{}, &AddressError{Address: s, Offset: off, Msg: fmt.Sprintf(format, args...)}
	}
	if !strings.HasPrefix(s, "messages") {
		return fail(0, `want "<root>" or a path starting with "messages"`)
	}
	var a Address
	path := s
	for i := len(s) - 1; i >= len("messages"); i-- {
		if s[i] != ':' {
			continue
		}
		if sel, ok, big := parseSelector(s[i+1:]); ok {
			if big != "" {
				return fail(i+1, "selector number %s is too large (the largest is %d)", big, MaxAddressNumber)
			}
			a.Selector = sel
			path = s[:i]
			break
		}
	}
	i := len("messages")
	if i == len(path) {
		return fail(i, `want a step after "messages" (".N" or "[N]")`)
	}
	for i < len(path) {
		switch path[i] {
		case '.':
			j := i + 1
			for j < len(path) && path[j] != '.' && path[j] != '[' && path[j] != ']' {
				j++
			}
			seg := path[i+1 : j]
			if seg == "" {
				if j < len(path) && path[j] == ']' {
					return fail(j, "unexpected ']'")
				}
				return fail(i+1, "empty step")
			}
			if seg[0] == '@' && len(a.Steps) == 0 {
				id := seg[1:]
				if !isMessageID(id) {
					return fail(i+1, "invalid message id %q (want letters, digits, '_' or '-')", id)
				}
				a.Steps = append(a.Steps, Step{ID: id, Index: -1})
			} else {
				st := Step{Key: seg, Index: -1}
				if n, ok := atoiMax(seg); ok {
					st.Index = n // too large: a key only, as no list is that long
				} else if len(a.Steps) == 0 && isDigits(seg) {
					return fail(i+1, "message index %s is too large (the largest is %d)", seg, MaxAddressNumber)
				}
				a.Steps = append(a.Steps, st)
			}
			i = j
		case '[':
			j := strings.IndexByte(path[i:], ']')
			if j < 0 {
				return fail(i, "unclosed '['")
			}
			seg := path[i+1 : i+j]
			if !isDigits(seg) {
				return fail(i+1, "want a list index inside [], got %q", seg)
			}
			n, ok := atoiMax(seg)
			if !ok {
				return fail(i+1, "list index %s is too large (the largest is %d)", seg, MaxAddressNumber)
			}
			a.Steps = append(a.Steps, Step{Key: trimZeros(seg), Index: n})
			i += j + 1
		default:
			if path[i] == ':' {
				return fail(i, "invalid selector %q (want START-END, L<line> or bbox-x1,y1,x2,y2)", path[i+1:])
			}
			return fail(i, "unexpected %q, want '.' or '['", path[i])
		}
	}
	if a.Steps[0].ID == "" && a.Steps[0].Index < 0 {
		return fail(len("messages")+1, "the first step must be a message index or @id, got %q", a.Steps[0].Key)
	}
	if a.Selector.Kind == SelectRange && a.Selector.Start > a.Selector.End {
		return fail(len(path)+1, "range start %d is after its end %d", a.Selector.Start, a.Selector.End)
	}
	return a, nil
}

// parseSelector parses a selector. ok says s has a selector's shape; big
// is then a number in it beyond MaxAddressNumber ("" when none is).
func parseSelector(s string) (sel Selector, ok bool, big string) {
	switch {
	case strings.HasPrefix(s, "L"):
		if isDigits(s[1:]) {
			n, fits := atoiMax(s[1:])
			if !fits {
				return Selector{}, true, s[1:]
			}
			return Selector{Kind: SelectLine, Line: n}, true, ""
		}
	case strings.HasPrefix(s, "bbox-"):
		parts := strings.Split(s[5:], ",")
		if len(parts) != 4 {
			return Selector{}, false, ""
		}
		sel := Selector{Kind: SelectBBox, bboxText: s[5:]}
		for i, p := range parts {
			if !isDecimal(p) {
				return Selector{}, false, ""
			}
			f, err := strconv.ParseFloat(p, 64)
			if err != nil || f > 1 {
				return Selector{}, false, ""
			}
			sel.BBox[i] = f
		}
		return sel, true, ""
	default:
		a, b, cut := strings.Cut(s, "-")
		if cut && isDigits(a) && isDigits(b) {
			start, ok1 := atoiMax(a)
			end, ok2 := atoiMax(b)
			switch {
			case !ok1:
				return Selector{}, true, a
			case !ok2:
				return Selector{}, true, b
			}
			return Selector{Kind: SelectRange, Start: start, End: end}, true, ""
		}
	}
	return Selector{}, false, ""
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isDecimal(s string) bool {
	a, b, frac := strings.Cut(s, ".")
	return isDigits(a) && (!frac || isDigits(b))
}

func trimZeros(s string) string {
	t := strings.TrimLeft(s, "0")
	if t == "" {
		return "0"
	}
	return t
}

// MaxAddressNumber is the largest index, line or range end an address may
// hold; ParseAddress rejects a larger one (it was clamped, so an annotation
// silently pointed elsewhere than it said).
const MaxAddressNumber = 1<<31 - 1

// atoiMax parses a string of ASCII digits; ok is false when it is empty,
// holds another byte or exceeds MaxAddressNumber.
func atoiMax(s string) (n int, ok bool) {
	if s == "" {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
		if n > MaxAddressNumber {
			return 0, false
		}
	}
	return n, true
}

func isMessageID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// Resolved is what an address points to.
type Resolved struct {
	// Value is the node at the address path.
	Value Value
	// Text is the selected text when the address has a range or line
	// selector (a substring of Value, which is then a string).
	Text string
	// Start and End are the selected code-point range ([0, len) for a
	// line selector: the line's range); ByteStart and ByteEnd the same in
	// bytes of the UTF-8 string. All zero without a text selector.
	Start, End         int
	ByteStart, ByteEnd int
}

// Resolve finds what a points to in the stored trace t: the first step
// selects Events[i] (or the event whose "message_id" member is the @id),
// later steps walk object members (the last member with that key) and
// array indices of the stored form. "<root>" resolves to the whole trace
// (Encode's value). Errors match ErrUnresolved and name the failing step.
func (t *Trace) Resolve(a Address) (Resolved, error) {
	if a.Root {
		v, err := ParseValue(t.Encode())
		if err != nil {
			return Resolved{}, err
		}
		if a.Selector.Kind != SelectNone {
			return Resolved{}, fmt.Errorf("%s: %w: a selector needs a string target", a, ErrUnresolved)
		}
		return Resolved{Value: v}, nil
	}
	if len(a.Steps) == 0 {
		return Resolved{}, fmt.Errorf("empty address: %w", ErrUnresolved)
	}
	unresolved := func(k int, format string, args ...any) (Resolved, error) {
		p := Address{Steps: a.Steps[:k+1]}
		return Resolved{}, fmt.Errorf("%s: %w at %s: %s", a, ErrUnresolved, p, fmt.Sprintf(format, args...))
	}
	var cur Value
	first := a.Steps[0]
	if first.ID != "" {
		found := false
		for _, e := range t.Events {
			if id, ok := e.Get("message_id"); ok && id == first.ID {
				cur, found = e.Raw, true
				break
			}
		}
		if !found {
			return unresolved(0, "no event has message_id %q", first.ID)
		}
	} else {
		if first.Index < 0 || first.Index >= len(t.Events) {
			return unresolved(0, "the trace has %d events", len(t.Events))
		}
		cur = t.Events[first.Index].Raw
	}
	for k := 1; k < len(a.Steps); k++ {
		st := a.Steps[k]
		switch v := cur.(type) {
		case *Object:
			nv, ok := v.Get(st.Key)
			if !ok {
				return unresolved(k, "no member %q", st.Key)
			}
			cur = nv
		case []Value:
			if st.Index < 0 {
				return unresolved(k, "%q is not an index into an array", st.Key)
			}
			if st.Index >= len(v) {
				return unresolved(k, "index %d out of range (length %d)", st.Index, len(v))
			}
			cur = v[st.Index]
		default:
			return unresolved(k, "cannot step into %s", TypeName(cur))
		}
	}
	r := Resolved{Value: cur}
	if a.Selector.Kind == SelectNone {
		return r, nil
	}
	s, ok := cur.(string)
	if !ok {
		return Resolved{}, fmt.Errorf("%s: %w: selector on %s, want a string", a, ErrUnresolved, TypeName(cur))
	}
	switch a.Selector.Kind {
	case SelectRange:
		bs, be, err := ByteRange(s, a.Selector.Start, a.Selector.End)
		if err != nil {
			return Resolved{}, fmt.Errorf("%s: %w: %v", a, ErrUnresolved, err)
		}
		r.Start, r.End, r.ByteStart, r.ByteEnd, r.Text = a.Selector.Start, a.Selector.End, bs, be, s[bs:be]
	case SelectLine:
		bs, be, ok := lineBytes(s, a.Selector.Line)
		if !ok {
			return Resolved{}, fmt.Errorf("%s: %w: line %d out of range (%d lines)", a, ErrUnresolved, a.Selector.Line, strings.Count(s, "\n")+1)
		}
		r.ByteStart, r.ByteEnd, r.Text = bs, be, s[bs:be]
		r.Start = utf8.RuneCountInString(s[:bs])
		r.End = r.Start + utf8.RuneCountInString(r.Text)
	case SelectBBox:
		// A bounding box selects a region of an image; the value is the
		// image reference itself.
	}
	return r, nil
}

// ErrRange is matched (errors.Is) by ByteRange errors.
var ErrRange = errors.New("invalid code-point range")

// ByteRange converts the code-point range [start, end) of s to byte
// offsets. It fails when start > end or end exceeds the code-point length.
func ByteRange(s string, start, end int) (byteStart, byteEnd int, err error) {
	if start < 0 || start > end {
		return 0, 0, fmt.Errorf("%w: %d-%d", ErrRange, start, end)
	}
	cp := 0
	byteStart, byteEnd = -1, -1
	for i := range s {
		if cp == start {
			byteStart = i
		}
		if cp == end {
			byteEnd = i
			break
		}
		cp++
	}
	if cp == start && byteStart < 0 {
		byteStart = len(s)
	}
	if cp == end && byteEnd < 0 {
		byteEnd = len(s)
	}
	if byteStart < 0 || byteEnd < 0 {
		return 0, 0, fmt.Errorf("%w: %d-%d beyond the string's %d code points", ErrRange, start, end, utf8.RuneCountInString(s))
	}
	return byteStart, byteEnd, nil
}

// CodePointOffset converts a byte offset in s (at a rune boundary) to a
// code-point offset.
func CodePointOffset(s string, byteOff int) int {
	if byteOff > len(s) {
		byteOff = len(s)
	}
	return utf8.RuneCountInString(s[:byteOff])
}

func lineBytes(s string, n int) (int, int, bool) {
	start := 0
	for range n {
		i := strings.IndexByte(s[start:], '\n')
		if i < 0 {
			return 0, 0, false
		}
		start += i + 1
	}
	end := strings.IndexByte(s[start:], '\n')
	if end < 0 {
		return start, len(s), true
	}
	return start, start + end, true
}
