package trace

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// ErrInvalidTrace is matched (errors.Is) by every validation error: the
// input is JSON but not a trace policy-language §7.2 can normalise
// (the analysis error invalid_trace).
var ErrInvalidTrace = errors.New("invalid trace")

// MaxErrors is the most validation errors Decode reports; further ones
// are summarised in a last "too many errors" entry.
const MaxErrors = 100

// Error is one validation problem, located by JSON path and input position.
type Error struct {
	// Path is the JSON path of the offending value, e.g.
	// "events[3].tool_calls[0].function". The root is "events" for a list
	// trace and "messages" for the elements of an object trace.
	Path string
	// Offset is the byte offset of the offending value in the input, -1
	// when unknown (a trace built in memory).
	Offset int
	// Line and Col are the 1-based position of Offset (0 when unknown).
	Line, Col int
	// Msg describes the problem.
	Msg string
}

// Error renders `path: msg (line L, col C)`.
func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s: %s (line %d, col %d)", e.Path, e.Msg, e.Line, e.Col)
	}
	return e.Path + ": " + e.Msg
}

// Unwrap makes errors.Is(err, ErrInvalidTrace) true.
func (e *Error) Unwrap() error { return ErrInvalidTrace }

// ErrorList is a list of validation errors in input order.
type ErrorList []*Error

// Error renders one error per line.
func (l ErrorList) Error() string {
	switch len(l) {
	case 0:
		return "no errors"
	case 1:
		return l[0].Error()
	}
	var b strings.Builder
	for i, e := range l {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap returns the errors, so errors.Is and errors.As see each of them.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// Err returns l as an error, or nil when l is empty.
func (l ErrorList) Err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

// Sort orders l by input position (unknown positions last, by path).
func (l ErrorList) Sort() {
	sort.SliceStable(l, func(i, j int) bool {
		a, b := l[i], l[j]
		if (a.Offset < 0) != (b.Offset < 0) {
			return a.Offset >= 0
		}
		return a.Offset < b.Offset
	})
}

// pathElem is one step of a JSON path: a key, or an index when key == "".
type pathElem struct {
	key   string
	index int
}

func renderPath(p []pathElem) string {
	var b strings.Builder
	for i, e := range p {
		if e.key == "" {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(e.index))
			b.WriteByte(']')
			continue
		}
		if i > 0 && !isIdent(e.key) {
			b.WriteString("[")
			b.WriteString(strconv.Quote(e.key))
			b.WriteString("]")
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(e.key)
	}
	return b.String()
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// locate returns the byte offset of the value at path p in data (path
// elements after the pseudo-root name), or -1. It re-scans the input and is
// only called when an error is reported.
func locate(data []byte, root int, p []pathElem) int {
	l := locator{scanner: scanner{data: data}}
	if len(data) >= 3 && data[0] == 0xEF && data[1] == 0xBB && data[2] == 0xBF {
		l.pos = 3
	}
	l.skipSpace()
	// The root element is the events array; for an object trace, step into
	// "messages" first.
	if root == rootMessages {
		p = append([]pathElem{{key: "messages"}}, p...)
	}
	for _, e := range p {
		l.skipSpace()
		if l.pos >= len(data) {
			return -1
		}
		switch data[l.pos] {
		case '[':
			if e.key != "" || !l.seekIndex(e.index) {
				return -1
			}
		case '{':
			if e.key == "" || !l.seekKey(e.key) {
				return -1
			}
		default:
			return -1
		}
	}
	l.skipSpace()
	return l.pos
}

type locator struct{ scanner }

// skip scans over one value without building it.
func (l *locator) skip() bool {
	l.depth = 0
	l.value()
	return l.err == nil
}

func (l *locator) seekIndex(n int) bool {
	l.pos++
	for i := 0; ; i++ {
		l.skipSpace()
		if l.pos >= len(l.data) || l.data[l.pos] == ']' {
			return false
		}
		if i == n {
			return true
		}
		if !l.skip() {
			return false
		}
		l.skipSpace()
		if l.pos >= len(l.data) || l.data[l.pos] != ',' {
			return false
		}
		l.pos++
	}
}

// seekKey positions at the value of the last member named key.
func (l *locator) seekKey(key string) bool {
	l.pos++
	found := -1
	for {
		l.skipSpace()
		if l.pos >= len(l.data) || l.data[l.pos] != '"' {
			break
		}
		k, _ := l.str().(string)
		if l.err != nil {
			return false
		}
		l.skipSpace()
		if l.pos >= len(l.data) || l.data[l.pos] != ':' {
			return false
		}
		l.pos++
		l.skipSpace()
		if k == key {
			found = l.pos
		}
		if !l.skip() {
			return false
		}
		l.skipSpace()
		if l.pos >= len(l.data) || l.data[l.pos] != ',' {
			break
		}
		l.pos++
	}
	if found < 0 {
		return false
	}
	l.pos = found
	return true
}
