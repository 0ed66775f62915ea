package trace

import (
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// TestBoxedValues checks that decoded strings and numbers are
// ordinary Values: type switches, ==, map keys and DeepEqual see them as
// the runtime's own conversions, across several slabs and a GC.
func TestBoxedValues(t *testing.T) {
	var b strings.Builder
	var want []any
	b.WriteString("[")
	for i := range 300 { // several slabs of every size
		if i > 0 {
			b.WriteString(",")
		}
		if i%3 == 2 {
			fmt.Fprintf(&b, "%d.5", i)
			want = append(want, Number(fmt.Sprintf("%d.5", i)))
		} else {
			fmt.Fprintf(&b, `"s%d"`, i)
			want = append(want, fmt.Sprintf("s%d", i))
		}
	}
	b.WriteString("]")
	v, err := ParseValue([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	got, ok := v.([]Value)
	if !ok || len(got) != len(want) {
		t.Fatalf("got %T of %d values, want %d", v, len(got), len(want))
	}
	seen := map[any]int{}
	for i, g := range got {
		if g != want[i] || !reflect.DeepEqual(g, want[i]) {
			t.Errorf("value %d = %#v, want %#v", i, g, want[i])
		}
		switch x := g.(type) {
		case string:
			if x != want[i].(string) {
				t.Errorf("value %d: string %q", i, x)
			}
		case Number:
			if x != want[i].(Number) {
				t.Errorf("value %d: number %q", i, x)
			}
		default:
			t.Errorf("value %d has type %T", i, g)
		}
		seen[g] = i
	}
	if len(seen) != len(want) {
		t.Errorf("%d distinct map keys, want %d", len(seen), len(want))
	}
}

// TestParseEscapedStrings decodes strings with escapes, several in one
// document so that the scratch buffer of one is reused by the next.
func TestParseEscapedStrings(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`"a\nb"`, "a\nb"},
		{`"plain prefix then \"quote\""`, `plain prefix then "quote"`},
		{`"caf\u00e9 \u6771"`, "café 東"},
		{`"é\t東"`, "é\t東"},
		{`"\ud83d\ude00!"`, "😀!"},
		{`"\ud800x"`, "\xed\xa0\x80x"}, // lone surrogate kept as WTF-8
		{`"\\\/\b\f\r"`, "\\/\b\f\r"},
		{`"a much longer prefix than sixteen bytes before the escape\n"`, "a much longer prefix than sixteen bytes before the escape\n"},
	} {
		doc := "[" + c.in + `,"x\ty",` + c.in + "]"
		v, err := ParseValue([]byte(doc))
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		got := v.([]Value)
		if got[0] != c.want || got[1] != "x\ty" || got[2] != c.want {
			t.Errorf("%s = %q, want %q", doc, got, []string{c.want, "x\ty", c.want})
		}
	}
}
