package syntax

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// Pos is a position in a Source: the offset of a code point from the start
// of the text (after a leading byte-order mark, which NewSource drops).
type Pos int

// NoPos is the position of something absent.
const NoPos Pos = -1

// IsValid reports whether p denotes a position.
func (p Pos) IsValid() bool { return p >= 0 }

// Source is the text of a policy with its name (a file name or a label such
// as "<policy>"). It maps code-point offsets to lines and columns.
type Source struct {
	Name string
	Text string // the text as given, without a leading byte-order mark

	runes      []rune
	offs       []int32 // byte offset in Text of each code point, and of the end
	lineStarts []Pos   // code-point offset of the start of each line
}

// NewSource returns a Source for text. A leading UTF-8 byte-order mark is
// dropped; line breaks are "\n", "\r\n" and a lone "\r" (spec §2.1).
// Invalid UTF-8 bytes count as one code point each (U+FFFD).
func NewSource(name, text string) *Source {
	text = strings.TrimPrefix(text, "\uFEFF")
	s := &Source{Name: name, Text: text}
	n := utf8.RuneCountInString(text)
	s.runes = make([]rune, 0, n)
	s.offs = make([]int32, 0, n+1)
	for i, r := range text {
		s.runes = append(s.runes, r)
		s.offs = append(s.offs, int32(i))
	}
	s.offs = append(s.offs, int32(len(text)))
	s.lineStarts = make([]Pos, 1, 16)
	for i := 0; i < len(s.runes); i++ {
		switch s.runes[i] {
		case '\r':
			if i+1 < len(s.runes) && s.runes[i+1] == '\n' {
				i++
			}
			s.lineStarts = append(s.lineStarts, Pos(i+1))
		case '\n':
			s.lineStarts = append(s.lineStarts, Pos(i+1))
		}
	}
	return s
}

// Runes returns the text as code points; Pos indexes this slice. The caller
// must not modify it.
func (s *Source) Runes() []rune { return s.runes }

// Len returns the length of the text in code points.
func (s *Source) Len() int { return len(s.runes) }

// Position is a resolved position: file name, 1-based line and 1-based
// column counted in code points.
type Position struct {
	Filename string
	Line     int
	Column   int
}

// String renders p as "file:line:col" ("line:col" without a file name).
func (p Position) String() string {
	if p.Filename == "" {
		return fmt.Sprintf("%d:%d", p.Line, p.Column)
	}
	return fmt.Sprintf("%s:%d:%d", p.Filename, p.Line, p.Column)
}

// Position resolves p. Positions outside the text are clamped to it.
func (s *Source) Position(p Pos) Position {
	if p < 0 {
		p = 0
	}
	if int(p) > len(s.runes) {
		p = Pos(len(s.runes))
	}
	i := sort.Search(len(s.lineStarts), func(i int) bool { return s.lineStarts[i] > p }) - 1
	return Position{Filename: s.Name, Line: i + 1, Column: int(p-s.lineStarts[i]) + 1}
}

// Line returns the text of the 1-based line n without its line break, or ""
// when there is no such line.
func (s *Source) Line(n int) string {
	if n < 1 || n > len(s.lineStarts) {
		return ""
	}
	start := s.lineStarts[n-1]
	end := Pos(len(s.runes))
	if n < len(s.lineStarts) {
		end = s.lineStarts[n]
	}
	for end > start && (s.runes[end-1] == '\n' || s.runes[end-1] == '\r') {
		end--
	}
	return string(s.runes[start:end])
}

// Snippet returns the text from p to end as a string (clamped). It
// shares memory with Text: it does not allocate.
func (s *Source) Snippet(p, end Pos) string {
	if p < 0 {
		p = 0
	}
	if int(end) > len(s.runes) {
		end = Pos(len(s.runes))
	}
	if end < p {
		return ""
	}
	return s.Text[s.offs[p]:s.offs[end]]
}

// Error is a load error (or warning) at a position of a policy source.
type Error struct {
	Source *Source // may be nil, then only the offset is known
	Pos    Pos
	Msg    string
}

// Position resolves the error's position.
func (e *Error) Position() Position {
	if e.Source == nil {
		return Position{Line: 1, Column: int(e.Pos) + 1}
	}
	return e.Source.Position(e.Pos)
}

// Error renders the error as "file:line:col: msg", then the source line and
// a caret under the column.
func (e *Error) Error() string {
	p := e.Position()
	if e.Source == nil {
		return fmt.Sprintf("%s: %s", p, e.Msg)
	}
	line := []rune(e.Source.Line(p.Line))
	col := p.Column - 1
	if col > len(line) {
		col = len(line)
	}
	// Show at most a window of the line around the column.
	const half = 60
	if len(line) > 2*half {
		lo, hi := col-half, col+half
		if lo < 0 {
			lo, hi = 0, 2*half
		}
		if hi > len(line) {
			hi = len(line)
		}
		prefix, suffix := "", ""
		if lo > 0 {
			prefix = "..."
		}
		if hi < len(line) {
			suffix = "..."
		}
		col = col - lo + len(prefix)
		line = []rune(prefix + string(line[lo:hi]) + suffix)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s\n", p, e.Msg)
	b.WriteString("    ")
	b.WriteString(strings.Map(func(r rune) rune {
		if r == '\t' {
			return ' '
		}
		return r
	}, string(line)))
	b.WriteString("\n    ")
	b.WriteString(strings.Repeat(" ", col))
	b.WriteString("^")
	return b.String()
}

// Short renders the error on one line, "file:line:col: msg".
func (e *Error) Short() string { return fmt.Sprintf("%s: %s", e.Position(), e.Msg) }

// MaxErrors is the number of errors an ErrorList keeps; later ones are dropped.
const MaxErrors = 100

// ErrorList is a list of errors, in the style of go/scanner.ErrorList.
// The zero value is an empty list ready to use.
type ErrorList []*Error

// Add appends an error unless the list already holds MaxErrors errors.
func (l *ErrorList) Add(src *Source, pos Pos, msg string) {
	if len(*l) >= MaxErrors {
		return
	}
	*l = append(*l, &Error{Source: src, Pos: pos, Msg: msg})
}

// Len returns the number of errors.
func (l ErrorList) Len() int { return len(l) }

// Sort sorts the list by position, then message, and removes exact
// duplicates (same position and message).
func (l *ErrorList) Sort() {
	s := *l
	sort.SliceStable(s, func(i, j int) bool {
		if s[i].Pos != s[j].Pos {
			return s[i].Pos < s[j].Pos
		}
		return s[i].Msg < s[j].Msg
	})
	out := s[:0]
	for i, e := range s {
		if i > 0 && e.Pos == s[i-1].Pos && e.Msg == s[i-1].Msg {
			continue
		}
		out = append(out, e)
	}
	*l = out
}

// Error renders every error, one after the other, each with its source
// line and caret.
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
			b.WriteString("\n")
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Err returns the list as an error (sorted), or nil when it is empty.
func (l ErrorList) Err() error {
	if len(l) == 0 {
		return nil
	}
	l.Sort()
	return l
}

// Unwrap returns the errors, so errors.As finds an *Error in a list.
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}
