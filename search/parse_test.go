package search

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// parseCases map a query to its canonical form (Query.String), which
// shows the tree: AND binds tighter than OR, "-" tighter than AND.
var parseCases = []struct{ in, want string }{
	{"", ""},
	{"   ", ""},
	{"hello", "hello"},
	{"  hello  ", "hello"},
	{"hello world", "hello world"},
	{"hello AND world", "hello world"},
	{"a OR b c", "a OR b c"},
	{"a b OR c", "a b OR c"},
	{"(a OR b) c", "(a OR b) c"},
	{"a (b OR (c OR d))", "a (b OR c OR d)"},
	{"-a", "-a"},
	{"-(a b)", "-(a b)"},
	{"-(a OR b) c", "-(a OR b) c"},
	{"or and", "or and"}, // keywords are upper case only
	{`"hello world"`, `"hello world"`},
	{`"say \"hi\" \\ ok"`, `"say \"hi\" \\ ok"`},
	{`"a\b"`, `"a\\b"`},
	{"http://x", "http://x"},
	{"foo:bar", "foo:bar"},
	{"(a b)", "a b"},
	{"(foo)", "foo"},
	{"f(x)", `"f(x)"`},
	{"(f(x))", `"f(x)"`},
	{"(a) b)", `a "b)"`},
	{"a)", `"a)"`}, // no group open: part of the word
	{"a ) b", `a ")" b`},
	{"x-y", "x-y"},
	{"is:annotated", "is:annotated"},
	{"not:flagged", "not:flagged"},
	{"-is:annotated", "-is:annotated"},
	{"meta:env", "meta:env"},
	{"meta:env=prod", "meta:env=prod"},
	{"meta:env==prod", "meta:env=prod"},
	{"meta:n>=3.5", "meta:n>=3.5"},
	{"meta:n<-34", "meta:n<-34"},
	{`meta:name="run 12"`, `meta:name="run 12"`},
	{`meta:n="12"`, `meta:n="12"`},
	{`meta:"a.b".c!=x`, `meta:"a.b".c!=x`},
	{"meta:a.b%Foo", "meta:a.b%Foo"},
	{"meta:flag=true", "meta:flag=true"},
	{"(meta:x)", "meta:x"},
	{"(meta:x=1)", "meta:x=1"},
	{"source:user", "source:user"},
	{"guardrail:No*", "guardrail:No*"},
	{`guardrail:"No*"`, `guardrail:"No*"`},
	{"severity:>=WARN", "severity:>=warn"},
	{"severity:critical", "severity:=critical"},
	{"annotation:good", "annotation:good"},
	{"tool:send_*", "tool:send_*"},
	{"session:h:run-42", "session:h:run-42"},
	{"dataset:u/alpha", "dataset:u/alpha"},
	{"after:2025-01-01", "after:2025-01-01"},
	{"updated-before:-3d", "updated-before:-3d"},
	{"before:2025-06-01T10:30:00Z", "before:2025-06-01T10:30:00Z"},
	{"id:0190B3C4-0000-7000-8000-000000000001", "id:0190b3c4-0000-7000-8000-000000000001"},
	{"index:1,5..7", "index:1,5..7"},
	{"filter:My title:1,2", "index:1,2"},
	{"idfilter:t:0190b3c4-0000-7000-8000-000000000001", "id:0190b3c4-0000-7000-8000-000000000001"},
	{"hello\tworld\nOR x", "hello world OR x"},
	{"naïve café", "naïve café"},
}

func TestParse(t *testing.T) {
	for _, c := range parseCases {
		q, err := Parse(c.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.in, err)
			continue
		}
		if got := q.String(); got != c.want {
			t.Errorf("Parse(%q) = %q, want %q", c.in, got, c.want)
			continue
		}
		// The canonical form parses to itself.
		q2, err := Parse(c.want)
		if err != nil || q2.String() != c.want {
			t.Errorf("Parse(%q) (canonical of %q) = %v, %v", c.want, c.in, q2, err)
		}
	}
}

func TestParseNodes(t *testing.T) {
	q, err := Parse(`meta:a.b>=1e2 -guardrail:x* severity:<info hello`)
	if err != nil {
		t.Fatal(err)
	}
	and := q.Root.(*And)
	m := and.X[0].(*Meta)
	if m.Kind != KindNumber || m.Op != ">=" || len(m.Paths()) != 2 || m.Num.String() != "100" {
		t.Errorf("meta = %+v paths %v", m, m.Paths())
	}
	if g := and.X[1].(*Not).X.(*Guardrail); !g.Prefix || g.Value != "x" {
		t.Errorf("guardrail = %+v", g)
	}
	if s := and.X[2].(*Severity); s.Op != "<" || s.Level != 0 {
		t.Errorf("severity = %+v", s)
	}
	if got := q.Terms(); len(got) != 1 || got[0] != "hello" {
		t.Errorf("Terms = %q", got)
	}
	if q, _ := Parse("a -b (c OR -d)"); strings.Join(q.Terms(), ",") != "a,c" {
		t.Errorf("Terms of negations = %q", q.Terms())
	}
	now := time.Date(2025, 6, 10, 0, 0, 0, 0, time.UTC)
	q, _ = Parse("after:-2w")
	if got := q.Root.(*Time).At(now); !got.Equal(now.Add(-14 * 24 * time.Hour)) {
		t.Errorf("after:-2w at %v = %v", now, got)
	}
	q, _ = Parse("filter:a:b:1")
	if q.Compat != "filter" || q.Title != "a:b" {
		t.Errorf("compat = %q title %q", q.Compat, q.Title)
	}
}

// errorCases are queries that do not parse, with the code-point position
// of the error and a part of its message.
var errorCases = []struct {
	in  string
	pos int
	msg string
}{
	{"(a", 0, "never closed"},
	{"a (b", 2, "never closed"},
	{"a)b (", 4, "empty group"},
	{"()", 0, "empty group"},
	{"a OR", 2, "OR needs a term after"},
	{"OR a", 0, "OR needs a term before"},
	{"a AND", 2, "AND needs a term after"},
	{"a AND OR b", 2, "AND needs a term after"},
	{"-", 0, "- needs a term"},
	{"a - b", 2, "- needs a term"},
	{"--a", 0, "- needs a term"},
	{`"abc`, 0, "unterminated"},
	{`é "abc`, 2, "unterminated"},
	{`""`, 0, "empty phrase"},
	{`"a"b`, 3, "expected a space"},
	{`ab"c"`, 2, "unexpected"},
	{"is:bogus", 3, "unknown is: value"},
	{"née is:x", 7, "unknown is: value"},
	{"is:", 0, "needs a value"},
	{"tool:", 0, "needs a value"},
	{"meta:", 5, "needs a key"},
	{"meta:a!b", 6, "unknown operator"},
	{"meta:a=", 6, "needs a value"},
	{"severity:>=bad", 11, "unknown severity"},
	{"after:yesterday", 6, "not an RFC 3339"},
	{"id:abc", 3, "not a UUID"},
	{"index:1,x", 8, "not an index"},
	{"index:5..2", 6, "ends before"},
	{"index:-1", 6, "not an index"},
	{"a filter:t:1", 2, "only as the whole query"},
	{"filter:t", 0, "filter:<title>:<list>"},
	{"filter:t:", 9, "needs a list"},
	{"idfilter:t:zz", 11, "not a UUID"},
	{strings.Repeat("abc ", 33), 128, "more than 32 terms"},
	{"a bc d ef gh", 10, "more than 4 terms shorter than 3"},
	{`"ab" "Σ" x y ok "é"`, 13, "more than 4 terms shorter than 3"},
	{strings.Repeat("(", 17) + "a" + strings.Repeat(")", 17), 16, "nesting deeper"},
	{strings.Repeat("x", MaxLength+1), MaxLength, "exceeds the limit"},
	{"ok \xff", 3, "invalid UTF-8"},
	{"meta:" + strings.Repeat("a.", 16) + "a", 37, "longer than 16"},
}

func TestParseErrors(t *testing.T) {
	for _, c := range errorCases {
		_, err := Parse(c.in)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("Parse(%q) err = %v, want *Error", c.in, err)
			continue
		}
		if e.Pos != c.pos || !strings.Contains(e.Msg, c.msg) {
			t.Errorf("Parse(%q) = %v, want position %d: …%s…", c.in, e, c.pos, c.msg)
		}
	}
}

// FuzzParse checks that Parse never panics, that every error is an
// *Error inside the query, and that the canonical form of what parses
// parses to itself.
func FuzzParse(f *testing.F) {
	for _, c := range parseCases {
		f.Add(c.in)
	}
	for _, c := range errorCases {
		if len(c.in) < 200 {
			f.Add(c.in)
		}
	}
	f.Fuzz(func(t *testing.T, in string) {
		q, err := Parse(in)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse(%q) err %T %v, want *Error", in, err, err)
			}
			if n := utf8.RuneCountInString(in); e.Pos < 0 || e.Pos > n {
				t.Fatalf("Parse(%q) error position %d outside 0..%d", in, e.Pos, n)
			}
			return
		}
		s := q.String()
		q2, err := Parse(s)
		if err != nil {
			t.Fatalf("canonical form %q of %q does not parse: %v", s, in, err)
		}
		if s2 := q2.String(); s2 != s {
			t.Fatalf("canonical form of %q: %q then %q", in, s, s2)
		}
	})
}
