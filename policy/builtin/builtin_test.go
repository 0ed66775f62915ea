package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

func call(t *testing.T, name string, args ...Value) (Value, []string) {
	t.Helper()
	b, ok := Lookup(name)
	if !ok || b.Impl == nil {
		t.Fatalf("no builtin %s", name)
	}
	var marks []string
	c := NewCall(context.Background(), name, args, nil, nil, func(at *Path, s, e int) {
		marks = append(marks, at.String()+":"+Display(int64(s))+"-"+Display(int64(e)))
	})
	v, err := b.Impl(c)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v, marks
}

func TestBuiltins(t *testing.T) {
	loc := Located{V: "My X123Y and X456Y", At: EventPath(0).Child("content", 3)}
	tests := []struct {
		name string
		args []Value
		want string
	}{
		{"any", []Value{[]Value{false, int64(0), "a"}}, "True"},
		{"all", []Value{[]Value{}}, "True"},
		{"len", []Value{"ßx"}, "2"},
		{"max", []Value{int64(3), int64(5)}, "5"},
		{"min", []Value{[]Value{2.5, int64(1)}}, "1"},
		{"sum", []Value{[]Value{int64(1), 2.5}}, "3.5"},
		{"tuple", []Value{[]Value{int64(1)}}, "(1,)"},
		{"match", []Value{`.*X.*`, "aXb"}, "True"},
		{"match", []Value{`X`, "aXb"}, "False"},
		{"find", []Value{`X\d+Y`, loc}, "['X123Y', 'X456Y']"},
		{"json_loads", []Value{`{"b": 1, "a": [1.5, null]}`}, "{'b': 1, 'a': [1.5, None]}"},
		{"links", []Value{"see https://a.example/x?y and http://b.io"}, "['https://a.example/x?y', 'http://b.io']"},
	}
	for _, tt := range tests {
		got, _ := call(t, tt.name, tt.args...)
		if Display(got) != tt.want {
			t.Errorf("%s%v = %s, want %s", tt.name, tt.args, Display(got), tt.want)
		}
	}
	_, marks := call(t, "find", `X\d+Y`, loc)
	if len(marks) != 2 || marks[0] != "messages.0.content:3-8" {
		t.Errorf("find marks = %v", marks)
	}
}

func TestFullMatch(t *testing.T) {
	env := DefaultEnv()
	tests := []struct {
		p, s string
		want bool
	}{
		{"a|b", "ab", false},
		{"a|b", "b", true},
		{`\d+`, "123\n", true},
		{"(?i)rm -rf.*", "RM -RF /", true},
		{"^(?!Peter$).*$", "Peter", false},
		{"^(?!Peter$).*$", "Attacker", true},
	}
	for _, tt := range tests {
		got, err := env.FullMatch(tt.p, tt.s)
		if err != nil || got != tt.want {
			t.Errorf("FullMatch(%q, %q) = %v, %v", tt.p, tt.s, got, err)
		}
	}
	if _, err := env.FullMatch("(", "x"); KindOf(err) != RegexError {
		t.Errorf("invalid regex: %v", err)
	}
	// Unbalanced patterns must not close the anchoring wrapper and match
	// unanchored (Python: "unbalanced parenthesis").
	for _, p := range []string{`a))|((b`, `a)|(b`, `a)`} {
		if got, err := env.FullMatch(p, "xxb"); KindOf(err) != RegexError {
			t.Errorf("FullMatch(%q, \"xxb\") = %v, %v; want a regex_error", p, got, err)
		}
		if got, err := env.MatchStart(p, "xxb"); KindOf(err) != RegexError {
			t.Errorf("MatchStart(%q, \"xxb\") = %v, %v; want a regex_error", p, got, err)
		}
	}
}

func TestDisplay(t *testing.T) {
	tests := []struct {
		v    Value
		want string
	}{
		{1e16, "1e+16"}, {1e-5, "1e-05"}, {1.0, "1.0"}, {123456789.0, "123456789.0"}, {0.0001, "0.0001"},
		{1e22, "1e+22"}, {0.1, "0.1"}, {123456789012345680.0, "1.2345678901234568e+17"}, {1e15, "1000000000000000.0"}, {1.5e-5, "1.5e-05"},
		{-2.5, "-2.5"}, {math.Inf(1), "inf"}, {math.NaN(), "nan"}, {[]Value{"a\nb'"}, `["a\nb'"]`}, {[]Value{"a\n\x00"}, `['a\n\x00']`},
		{Tuple{int64(1)}, "(1,)"}, {[]Value{1.0, Tuple{}, NewDict(0)}, "[1.0, (), {}]"},
		{[]Value{"it's", nil, true}, `["it's", None, True]`}, {Tuple{}, "()"},
		{[]Value{"\u00a0\u00ad\u0085\u200b\U000e0001"}, `['\xa0\xad\x85\u200b\U000e0001']`},
	}
	for _, tt := range tests {
		if got := Display(tt.v); got != tt.want {
			t.Errorf("Display(%#v) = %s, want %s", tt.v, got, tt.want)
		}
	}
}

func TestUsable(t *testing.T) {
	b, _ := Lookup("moderated")
	if err := b.Usable(); !errors.Is(err, ErrNoProvider) || err.Error() != "detector moderated has no provider (configure detectors.base_url)" {
		t.Errorf("moderated usable: %v", err)
	}
	b, _ = Lookup("len")
	if err := b.Usable(); err != nil {
		t.Error(err)
	}
}

// TestDictOrd: Ord gives a key's position in small and large dicts, also
// after the dict grew.
func TestDictOrd(t *testing.T) {
	for _, n := range []int{3, 100} {
		d := NewDict(n)
		for i := range n {
			d.Set(Display(int64(i)), int64(i))
		}
		d.Set("1", "again") // a repeated key keeps its first position
		for i := range n {
			if got := d.Ord(Display(int64(i))); got != i {
				t.Errorf("n=%d: Ord(%d) = %d", n, i, got)
			}
		}
		d.Set("new", 1)
		if got := d.Ord("new"); got != n {
			t.Errorf("n=%d: Ord(new) = %d, want %d", n, got, n)
		}
		if got := d.Ord("absent"); got != 0 {
			t.Errorf("n=%d: Ord(absent) = %d, want 0", n, got)
		}
	}
}

func TestPathString(t *testing.T) {
	ev := EventPath(3)
	calls := ev.Child("tool_calls", 4)
	long := calls
	for i := 0; i < 30; i++ { // longer than String's stack buffer
		long = long.Child("arguments_with_a_long_name", 0)
	}
	for _, c := range []struct {
		p    *Path
		want string
	}{
		{nil, "messages"},
		{ev, "messages.3"},
		{calls.Index(12), "messages.3.tool_calls.12"},
		{calls.Index(0).Child("function", 1).Child("arguments", 1).Child("to", 0), "messages.3.tool_calls.0.function.arguments.to"},
		{long, "messages.3.tool_calls" + strings.Repeat(".arguments_with_a_long_name", 30)},
	} {
		if got := c.p.String(); got != c.want {
			t.Errorf("String() = %q, want %q", got, c.want)
		}
		if got := string(c.p.AppendString([]byte("x:"))); got != "x:"+c.want {
			t.Errorf("AppendString = %q, want %q", got, "x:"+c.want)
		}
	}
}

// TestWrappedMatchCache checks that MatchStart and FullMatch give the same
// answers on a cached wrapper as on the first call, that the two kinds of
// the same pattern do not share a wrapper, and that an invalid pattern
// stays an error.
func TestWrappedMatchCache(t *testing.T) {
	env := DefaultEnv()
	for _, c := range []struct {
		pattern, s  string
		start, full bool
		errStart    bool
	}{
		{pattern: "ab", s: "abc", start: true, full: false},
		{pattern: "abc", s: "abc\n", start: true, full: true},
		{pattern: "^(?!Peter$).*$", s: "Peter", start: false, full: false},
		{pattern: "^(?!Peter$).*$", s: "eve@evil.example", start: true, full: true},
		{pattern: "(?i)A.B", s: "a\nbx", start: false, full: false},
		{pattern: "(?i)A.B", s: "a\nb", start: false, full: true},
		{pattern: "a)|(b", s: "b", errStart: true},
	} {
		for range 2 {
			got, err := env.MatchStart(c.pattern, c.s)
			if (err != nil) != c.errStart || got != c.start {
				t.Errorf("MatchStart(%q, %q) = %v, %v; want %v (error %v)", c.pattern, c.s, got, err, c.start, c.errStart)
			}
			got, err = env.FullMatch(c.pattern, c.s)
			if (err != nil) != c.errStart || got != c.full {
				t.Errorf("FullMatch(%q, %q) = %v, %v; want %v (error %v)", c.pattern, c.s, got, err, c.full, c.errStart)
			}
		}
	}
}

// TestMetadataForm: the JSON form of an event's metadata built directly
// is the JSON form of its Metadata dict, with trace_idx appended or
// replacing the user's own in place.
func TestMetadataForm(t *testing.T) {
	user := func(kv ...any) *Dict {
		d := NewDict(len(kv) / 2)
		for i := 0; i < len(kv); i += 2 {
			d.Set(kv[i].(string), kv[i+1])
		}
		return d
	}
	for _, md := range []*Dict{nil, user(), user("a", int64(1), "b", "x"),
		user("trace_idx", "mine", "z", []Value{"q", user("n", nil)}), user("a", 1.5, "trace_idx", int64(-1))} {
		direct := &EventBase{Index: 7, UserMetadata: md}
		viaDict := &EventBase{Index: 7, UserMetadata: md}
		got, err := json.Marshal(metadataForm(direct))
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(jsonForm(viaDict.Metadata(), true))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("metadataForm = %s, want %s", got, want)
		}
		if again, _ := json.Marshal(metadataForm(viaDict)); string(again) != string(want) {
			t.Errorf("metadataForm after Metadata = %s, want %s", again, want)
		}
	}
}
