package web

import (
	"encoding/json"
	"strings"
	"testing"
)

// render writes segments as text with [address ... ] around highlights.
func render(segs []*seg) string {
	var b strings.Builder
	for _, s := range segs {
		if s.Mark == nil {
			b.WriteString(s.Text)
			continue
		}
		b.WriteString("[" + s.Mark.Address + " ")
		b.WriteString(render(s.Kids))
		b.WriteString("]")
	}
	return b.String()
}

func TestSegment(t *testing.T) {
	m := func(a string, s, e int) *mark { return &mark{Address: a, Start: s, End: e} }
	tests := []struct {
		name  string
		text  string
		base  int
		marks []*mark
		want  string
	}{
		{"none", "hello", 0, nil, "hello"},
		{"one", "hello world", 0, []*mark{m("a", 6, 11)}, "hello [a world]"},
		{"nested", "abcdefgh", 0, []*mark{m("outer", 1, 7), m("inner", 3, 5)}, "a[outer bc[inner de]fg]h"},
		{"same range twice", "abcd", 0, []*mark{m("x", 1, 3), m("y", 1, 3)}, "a[x [y bc]]d"},
		{"overlap splits", "abcdef", 0, []*mark{m("x", 0, 4), m("y", 2, 6)}, "[x ab[y cd]][y ef]"},
		{"code points not bytes", "héllo wörld", 0, []*mark{m("w", 6, 11)}, "héllo [w wörld]"},
		{"emoji", "a😀b", 0, []*mark{m("e", 1, 2)}, "a[e 😀]b"},
		{"clipped to piece", "fghij", 5, []*mark{m("x", 3, 7)}, "[x fg]hij"},
		{"outside piece", "abc", 10, []*mark{m("x", 0, 5)}, "abc"},
		{"empty range", "abc", 0, []*mark{m("x", 1, 1)}, "abc"},
		{"beyond end", "abc", 0, []*mark{m("x", 1, 99)}, "a[x bc]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := render(segment([]rune(tt.text), tt.base, tt.marks)); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseAddress(t *testing.T) {
	tests := []struct {
		in         string
		ok         bool
		path, kind string
		start, end int
	}{
		{"messages.2.content:10-14", true, "messages.2.content", "range", 10, 14},
		{"messages[2].tool_calls[0].function.arguments.to:0-3", true, "messages.2.tool_calls.0.function.arguments.to", "range", 0, 3},
		{"messages.1.content:L2", true, "messages.1.content", "line", 2, 0},
		{"messages.0.content.1.image_url.url:bbox-0.1,0.2,0.5,0.6", true, "messages.0.content.1.image_url.url", "bbox", 0, 0},
		{"messages.3.tool_calls.0.function.arguments.url:http://x", true, "messages.3.tool_calls.0.function.arguments.url:http://x", "", 0, 0},
		{"messages.3", true, "messages.3", "", 0, 0},
		{"<root>", false, "", "", 0, 0},
	}
	for _, tt := range tests {
		a, ok := parseAddress(tt.in)
		if ok != tt.ok || a.Path != tt.path || a.Kind != tt.kind || a.Start != tt.start || a.End != tt.end {
			t.Errorf("parseAddress(%q) = %+v, %v", tt.in, a, ok)
		}
	}
}

func TestLineDiff(t *testing.T) {
	got := lineDiff("a\nb\nc", "a\nx\nc\nd")
	var b strings.Builder
	for _, l := range got {
		b.WriteString(map[string]string{"": " ", "add": "+", "del": "-"}[l.Op] + l.Text + "|")
	}
	if want := " a|-b|+x| c|+d|"; b.String() != want {
		t.Errorf("diff %q, want %q", b.String(), want)
	}
}

func TestColourRule(t *testing.T) {
	lines := colourRule("raise \"x\" if:\n    (call: ToolCall)  # note\n    call.n > 3\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines", len(lines))
	}
	classes := map[string]string{}
	for _, l := range lines {
		for _, s := range l.Spans {
			classes[strings.TrimSpace(s.Text)] = s.Class
		}
	}
	for text, want := range map[string]string{"raise": "kw", `"x"`: "str", "if": "kw", "ToolCall": "ident", "# note": "cmt", "3": "num", ">": "op"} {
		if classes[text] != want {
			t.Errorf("%q: class %q, want %q (%v)", text, classes[text], want, classes)
		}
	}
}

func FuzzAddressAndSegment(f *testing.F) {
	for _, s := range []string{"messages.2.content:10-14", "messages.0:L3", "messages.x:bbox-0,0,1,1", "messages.1.a:b:0-2", "<root>", "messages[", ""} {
		f.Add(s, "héllo wörld 😀 text", 3, 9)
	}
	f.Fuzz(func(t *testing.T, addr, text string, s, e int) {
		if a, ok := parseAddress(addr); ok && !strings.HasPrefix(a.Path, "messages") {
			t.Fatalf("path %q of %q", a.Path, addr)
		}
		runes := []rune(text)
		segs := segment(runes, 0, []*mark{{Start: s, End: e, Address: addr}, {Start: e / 2, End: s * 2, Address: "b"}})
		var b strings.Builder
		var flat func([]*seg)
		flat = func(ss []*seg) {
			for _, x := range ss {
				b.WriteString(x.Text)
				flat(x.Kids)
			}
		}
		flat(segs)
		if b.String() != string(runes) {
			t.Fatalf("segments of %q spell %q", text, b.String())
		}
	})
}

// FuzzBuildEvent renders arbitrary events with arbitrary highlights: it
// must never panic, and the text it shows must be the event's text.
func FuzzBuildEvent(f *testing.F) {
	for _, s := range []string{
		`{"role":"user","content":"hello"}`,
		`{"role":"assistant","content":null,"tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":{"a":"b","c":[1,2]}}}]}`,
		`{"role":"tool","tool_call_id":"1","content":[{"type":"text","text":"x"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA"}}]}`,
		`{"type":"function","function":{"name":"g","arguments":"not json"}}`,
		`[1,2]`, `"str"`, `{"content":{"weird":true}}`, `{"content":"local_img_link: /api/v1/trace/image/_/t/x.png"}`,
	} {
		f.Add(s, "messages.0.content:0-3")
	}
	f.Fuzz(func(t *testing.T, raw, addr string) {
		ms := newMarks()
		ms.add(addr, "user", "", "t")
		ms.add("messages.0.content:L0", "search", "", "t")
		evs := buildEvents([]json.RawMessage{json.RawMessage(raw)}, 0, 1, ms)
		if len(evs) != 1 {
			t.Fatalf("%d events from one", len(evs))
		}
	})
}
