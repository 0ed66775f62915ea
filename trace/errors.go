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
	// Line and Col are the 1-based position of Offset (0 when unknown);
	// Col counts bytes, as go/scanner and most editors' "col" do.
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

// locTarget is a value to locate: its path and where to store the result.
type locTarget struct {
	root      int
	path      []pathElem
	off       *int // byte offset, -1 when not found (may be nil)
	line, col *int // 1-based position, left alone when not found
}

// locNode is a node of the trie of wanted paths.
type locNode struct {
	keys    map[string]*locNode
	indices map[int]*locNode
	targets []*locTarget
}

func (n *locNode) child(e pathElem) *locNode {
	if e.key == "" {
		if n.indices == nil {
			n.indices = map[int]*locNode{}
		}
		c := n.indices[e.index]
		if c == nil {
			c = &locNode{}
			n.indices[e.index] = c
		}
		return c
	}
	if n.keys == nil {
		n.keys = map[string]*locNode{}
	}
	c := n.keys[e.key]
	if c == nil {
		c = &locNode{}
		n.keys[e.key] = c
	}
	return c
}

// locateAll finds the input position of every target in one pass over
// data: it re-scans the input along a trie of the wanted paths, skipping
// every subtree no target is in, then converts all offsets to line and
// column in one more pass. It is only called when something is reported,
// and costs O(len(data) + total path length) however many targets there
// are.
func locateAll(data []byte, targets []locTarget) {
	if len(targets) == 0 {
		return
	}
	root := &locNode{}
	for i := range targets {
		t := &targets[i]
		n := root
		if t.root == rootMessages {
			n = n.child(pathElem{key: "messages"})
		}
		for _, e := range t.path {
			n = n.child(e)
		}
		n.targets = append(n.targets, t)
	}
	l := locator{scanner: scanner{data: data, src: string(data)}}
	if len(data) >= 3 && data[0] == 0xEF && data[1] == 0xBB && data[2] == 0xBF {
		l.pos = 3
	}
	found := map[*locTarget]int{}
	l.walk(root, found)
	offs := make([]int, 0, len(found))
	for _, off := range found {
		offs = append(offs, off)
	}
	sort.Ints(offs)
	pos := make(map[int][2]int, len(offs))
	line, lineStart, i := 1, 0, 0
	for _, off := range offs {
		for ; i < off && i < len(data); i++ {
			if data[i] == '\n' {
				line++
				lineStart = i + 1
			}
		}
		pos[off] = [2]int{line, off - lineStart + 1}
	}
	for i := range targets {
		t := &targets[i]
		off, ok := found[t]
		if !ok {
			if t.off != nil {
				*t.off = -1
			}
			continue
		}
		if t.off != nil {
			*t.off = off
		}
		p := pos[off]
		*t.line, *t.col = p[0], p[1]
	}
}

type locator struct{ scanner }

// walk records the offset of the value at the current position for n's
// targets, then descends into the members n has children for. It returns
// false when the input ends or is malformed.
func (l *locator) walk(n *locNode, found map[*locTarget]int) bool {
	l.skipSpace()
	if l.pos >= len(l.data) {
		return false
	}
	for _, t := range n.targets {
		found[t] = l.pos
	}
	switch {
	case l.data[l.pos] == '[' && n.indices != nil:
		l.pos++
		for i := 0; ; i++ {
			l.skipSpace()
			if l.pos >= len(l.data) {
				return false
			}
			if l.data[l.pos] == ']' {
				l.pos++
				return true
			}
			if c := n.indices[i]; c != nil {
				if !l.walk(c, found) {
					return false
				}
			} else if !l.skip() {
				return false
			}
			l.skipSpace()
			if l.pos < len(l.data) && l.data[l.pos] == ',' {
				l.pos++
			}
		}
	case l.data[l.pos] == '{' && n.keys != nil:
		l.pos++
		for {
			l.skipSpace()
			if l.pos >= len(l.data) {
				return false
			}
			if l.data[l.pos] == '}' {
				l.pos++
				return true
			}
			k, _ := l.str()
			if l.err != nil {
				return false
			}
			l.skipSpace()
			if l.pos >= len(l.data) || l.data[l.pos] != ':' {
				return false
			}
			l.pos++
			// For a duplicate key the last member wins, as in Object.Get.
			if c := n.keys[k]; c != nil {
				if !l.walk(c, found) {
					return false
				}
			} else if !l.skip() {
				return false
			}
			l.skipSpace()
			if l.pos < len(l.data) && l.data[l.pos] == ',' {
				l.pos++
			}
		}
	default:
		return l.skip()
	}
}

// skip scans over one value without building it.
func (l *locator) skip() bool {
	l.depth = 0
	l.skipSpace()
	l.value()
	return l.err == nil
}
