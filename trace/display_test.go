package trace

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestDisplay(t *testing.T) {
	tests := []struct{ in, want string }{
		{`"plain"`, "plain"},
		{`null`, "None"},
		{`true`, "True"},
		{`false`, "False"},
		{`42`, "42"},
		{`-0`, "0"},
		{`123456789012345678901234567890`, "123456789012345678901234567890"},
		{`1.50`, "1.5"},
		{`1e5`, "100000.0"},
		{`1e16`, "1e+16"},
		{`1.5e-5`, "1.5e-05"},
		{`0.0001`, "0.0001"},
		{`1e400`, "inf"},
		{`[1, "a", null, [true]]`, "[1, 'a', None, [True]]"},
		{`{"k": "it's", "n": {"x": "say \"hi\"\n"}}`, `{'k': "it's", 'n': {'x': 'say "hi"\n'}}`},
		{`{"a": 1, "b": 2, "a": 3}`, "{'a': 3, 'b': 2}"},
		{`["a'b\"c", "\u0001"]`, `['a\'b"c', '\x01']`},
	}
	for _, tt := range tests {
		v, err := ParseValue([]byte(tt.in))
		if err != nil {
			t.Fatal(err)
		}
		if got := Display(v); got != tt.want {
			t.Errorf("Display(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// TestDisplayLargeObject: an object with many members (a hostile tool
// description) displays in linear time; looking up each member's last
// value was quadratic (100,000 members took about 20 s in Decode).
func TestDisplayLargeObject(t *testing.T) {
	var b strings.Builder
	b.WriteString(`[{"tools": [{"name": "t", "description": {"k0": 0`)
	for i := 1; i < 100000; i++ {
		fmt.Fprintf(&b, `, "k%d": %d`, i, i)
	}
	b.WriteString(`, "k0": "last"}}]}]`)
	start := time.Now()
	tr, err := Decode([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Decode took %v", d)
	}
	desc := tr.Events[0].Tools[0].Description
	if !strings.HasPrefix(desc, "{'k0': 'last', 'k1': 1, ") || !strings.HasSuffix(desc, ", 'k99999': 99999}") {
		t.Errorf("description %.40s...%s", desc, desc[len(desc)-30:])
	}
}
