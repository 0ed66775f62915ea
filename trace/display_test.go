package trace

import "testing"

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
