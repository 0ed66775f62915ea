package syntax

import (
	"errors"
	"strings"
	"testing"
)

func TestSourcePosition(t *testing.T) {
	src := NewSource("p.policy", "\uFEFFab\r\ncé\rd\n\nx")
	tests := []struct {
		pos        Pos
		line, col  int
		lineText   string
		wantString string
	}{
		{0, 1, 1, "ab", "p.policy:1:1"},
		{1, 1, 2, "ab", "p.policy:1:2"},
		{4, 2, 1, "cé", "p.policy:2:1"},
		{5, 2, 2, "cé", "p.policy:2:2"},
		{7, 3, 1, "d", "p.policy:3:1"},
		{9, 4, 1, "", "p.policy:4:1"},
		{10, 5, 1, "x", "p.policy:5:1"},
		{11, 5, 2, "x", "p.policy:5:2"},
		{99, 5, 2, "x", "p.policy:5:2"},
	}
	for _, tt := range tests {
		p := src.Position(tt.pos)
		if p.Line != tt.line || p.Column != tt.col || p.String() != tt.wantString {
			t.Errorf("Position(%d) = %v, want %d:%d", tt.pos, p, tt.line, tt.col)
		}
		if got := src.Line(p.Line); got != tt.lineText {
			t.Errorf("Line(%d) = %q, want %q", p.Line, got, tt.lineText)
		}
	}
}

func TestErrorRendering(t *testing.T) {
	_, err := ParseString("rules.policy", "raise \"x\" if:\n\t(m: Message)\n\tm.content == é\n\tlen(m.content) > \n")
	if err == nil {
		t.Fatal("no error")
	}
	want := `rules.policy:3:15: invalid character 'é'
     m.content == é
                  ^
rules.policy:4:19: expected expression, found end of line
     len(m.content) > 
                      ^`
	if got := err.Error(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 2 {
		t.Fatalf("errors.As ErrorList: %v", err)
	}
	var one *Error
	if !errors.As(err, &one) || one.Position().Line != 3 {
		t.Fatalf("errors.As *Error: %v", one)
	}
	if got := one.Short(); got != "rules.policy:3:15: invalid character 'é'" {
		t.Errorf("Short() = %q", got)
	}
}

func TestErrorListCapAndSort(t *testing.T) {
	src := NewSource("", strings.Repeat("x\n", 200))
	var l ErrorList
	for i := 150; i >= 0; i-- {
		l.Add(src, Pos(2*i), "m")
	}
	l.Add(src, 300, "m") // duplicate of an existing error: dropped by the cap anyway
	if l.Len() != MaxErrors {
		t.Fatalf("len = %d, want %d", l.Len(), MaxErrors)
	}
	l = append(l, &Error{Source: src, Pos: 300, Msg: "m"})
	err := l.Err()
	got := err.(ErrorList)
	if len(got) != MaxErrors {
		t.Errorf("duplicates kept: %d", len(got))
	}
	for i := 1; i < len(got); i++ {
		if got[i-1].Pos > got[i].Pos {
			t.Fatalf("not sorted at %d", i)
		}
	}
	if (ErrorList{}).Err() != nil {
		t.Error("empty list is an error")
	}
}

// TestManyErrors checks that a policy full of errors reports at most
// MaxErrors of them and terminates.
func TestManyErrors(t *testing.T) {
	_, err := ParseString("", strings.Repeat("raise 1 if:\n    a b\n", 300))
	var l ErrorList
	if !errors.As(err, &l) || len(l) != MaxErrors {
		t.Fatalf("got %d errors", len(l))
	}
}

func TestDeepNesting(t *testing.T) {
	for _, src := range []string{
		"X := " + strings.Repeat("(", 5000) + strings.Repeat(")", 5000) + "\n",
		"X := " + strings.Repeat("-", 5000) + "1\n",
		"X := " + strings.Repeat("not ", 5000) + "1\n",
		"X := " + strings.Repeat("[{", 5000) + "\n",
	} {
		_, err := ParseString("", src)
		var l ErrorList
		if !errors.As(err, &l) || !strings.Contains(l[0].Msg, "nested too deeply") && !strings.Contains(l[0].Msg, "never closed") {
			t.Errorf("err = %.200v", err)
		}
		if len(err.Error()) > 1000 {
			t.Errorf("error message of %d bytes", len(err.Error()))
		}
	}
}

func TestParseExpr(t *testing.T) {
	for _, tt := range []struct{ in, want, err string }{
		{"1 + 2 *\n 3", "(+ 1 (* 2 3))", ""},
		{"a b", "a", "expected end of expression, found identifier b"},
		{"", "(bad)", "expected expression, found end of file"},
	} {
		x, err := ParseExpr(NewSource("", tt.in))
		if got := ExprString(x); got != tt.want {
			t.Errorf("ParseExpr(%q) = %s, want %s", tt.in, got, tt.want)
		}
		if (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
			t.Errorf("ParseExpr(%q) error = %v, want %q", tt.in, err, tt.err)
		}
	}
}

func TestInvalidUTF8(t *testing.T) {
	src := NewSource("", "X := \"a\xffb\"\nY := \xfe\n")
	f, err := Parse(src)
	if err == nil || !strings.Contains(err.Error(), "2:6: invalid character") {
		t.Fatalf("err = %v", err)
	}
	c := f.Stmts[0].(*ConstDecl)
	if v := c.Value.(*BasicLit).Value; v != "a\uFFFDb" {
		t.Errorf("value = %q, want a, U+FFFD, b", v)
	}
}
