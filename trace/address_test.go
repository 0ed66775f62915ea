package trace

import (
	"errors"
	"testing"
)

func TestParseAddress(t *testing.T) {
	tests := []struct {
		in   string
		want string // String() of the parsed address; "" means an error
	}{
		{"<root>", "<root>"},
		{"messages.3", "messages.3"},
		{"messages.3.content:5-10", "messages.3.content:5-10"},
		{"messages.0.content:L2", "messages.0.content:L2"},
		{"messages.0.content.1.image_url.url:bbox-0,0.25,1,0.5", "messages.0.content.1.image_url.url:bbox-0,0.25,1,0.5"},
		{"messages[2].tool_calls[0]", "messages.2.tool_calls.0"},
		{"messages[2].tool_calls[007].function.arguments.to:0-12", "messages.2.tool_calls.7.function.arguments.to:0-12"},
		{"messages.@01HXYZ-ab_c.content:1-2", "messages.@01HXYZ-ab_c.content:1-2"},
		{"messages.1.function.arguments.url:https://x", "messages.1.function.arguments.url:https://x"},
		{"messages.1.arguments.a:b:3-4", "messages.1.arguments.a:b:3-4"},
		{"messages.1.content:L2x", "messages.1.content:L2x"}, // not a selector: part of the key
		{"messages.1.x:bbox-0,0,2,1", "messages.1.x:bbox-0,0,2,1"},
		{"messages.0.content:0-0", "messages.0.content:0-0"},
		{"messages.4.metadata.a", "messages.4.metadata.a"},
		{"messages.0.content:0-2147483647", "messages.0.content:0-2147483647"},
		// issue_17_huge_digit_key: a digit key beyond any list length is a key
		{"messages.0.metadata.99999999999999999999", "messages.0.metadata.99999999999999999999"},
		// errors
		{"", ""},
		{"message.1", ""},
		{"messages", ""},
		{"messages.", ""},
		{"messages..1", ""},
		{"messages.1.", ""},
		{"messages[x]", ""},
		{"messages[1", ""},
		{"messages.1]", ""},
		{"messages.content", ""},
		{"messages.@", ""},
		{"messages.@a b", ""},
		{"messages.1.content:9-3", ""},
		{"messages:1-2", ""},
		{"messagesX", ""},
		// issue_17_range_end_clamped: numbers beyond MaxAddressNumber were
		// clamped to 2^31, so the address pointed elsewhere than it said.
		{"messages.0.content:0-2147483648", ""},
		{"messages.0.content:0-99999999999999999999", ""},
		{"messages.0.content:99999999999999999999-99999999999999999999", ""},
		{"messages.0.content:L99999999999999999999", ""},
		{"messages[99999999999999999999]", ""},
		{"messages.0.tool_calls[2147483648]", ""},
		{"messages.99999999999999999999", ""},
	}
	for _, tt := range tests {
		a, err := ParseAddress(tt.in)
		if tt.want == "" {
			if err == nil {
				t.Errorf("ParseAddress(%q) = %v, want an error", tt.in, a)
			} else if !errors.Is(err, ErrAddress) {
				t.Errorf("ParseAddress(%q) error %v does not match ErrAddress", tt.in, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseAddress(%q): %v", tt.in, err)
			continue
		}
		if got := a.String(); got != tt.want {
			t.Errorf("ParseAddress(%q).String() = %q, want %q", tt.in, got, tt.want)
		}
		// Formatting is a fixed point.
		b, err := ParseAddress(a.String())
		if err != nil || b.String() != a.String() {
			t.Errorf("reparse of %q = %v, %v", a.String(), b, err)
		}
	}
}

func TestParseAddressFields(t *testing.T) {
	a, err := ParseAddress("messages[2].tool_calls.0.function.arguments.to:3-7")
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Steps) != 6 || a.Steps[0].Index != 2 || a.Steps[1].Key != "tool_calls" || a.Steps[1].Index != -1 || a.Steps[2].Index != 0 {
		t.Errorf("steps = %+v", a.Steps)
	}
	if a.Selector.Kind != SelectRange || a.Selector.Start != 3 || a.Selector.End != 7 {
		t.Errorf("selector = %+v", a.Selector)
	}
	b, _ := ParseAddress("messages.0.x:bbox-0.1,0.2,0.3,0.4")
	if b.Selector.Kind != SelectBBox || b.Selector.BBox != [4]float64{0.1, 0.2, 0.3, 0.4} {
		t.Errorf("bbox = %+v", b.Selector)
	}
	var e *AddressError
	_, err = ParseAddress("messages.1..x")
	if !errors.As(err, &e) || e.Offset != 11 {
		t.Errorf("error = %#v, want an AddressError at offset 11", err)
	}
}

func TestAddressBuilders(t *testing.T) {
	a := MessageAddress(3).Key("tool_calls").Index(1).Key("function").Key("arguments").Key("to").Range(0, 12)
	if got, want := a.String(), "messages.3.tool_calls.1.function.arguments.to:0-12"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	base := MessageAddress(1)
	x, y := base.Key("a"), base.Key("b")
	if x.String() != "messages.1.a" || y.String() != "messages.1.b" {
		t.Errorf("builders share storage: %s %s", x, y)
	}
	if RootAddress.String() != "<root>" || !(Address{}).IsZero() {
		t.Error("root or zero address wrong")
	}
}

const resolveTrace = `[
 {"role": "user", "message_id": "m0", "content": "héllo wörld\nsecond line\nthird 😀 line"},
 {"role": "assistant", "content": [{"type": "text", "text": "abc"}, {"type": "image_url", "image_url": {"url": "https://x/y.png"}}],
  "tool_calls": [{"id": "1", "type": "function", "function": {"name": "send", "arguments": "{\"to\": \"eve@evil.com\", \"3\": \"digit key\", \"a:b\": \"colon\"}"}}]},
 {"tools": [{"name": "t", "inputSchema": {"properties": {"q": {"type": "string"}}}}]}
]`

func TestResolve(t *testing.T) {
	tr, err := Decode([]byte(resolveTrace))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		addr string
		want string // Marshal of the value, or the selected text in <>
		err  bool
	}{
		{"messages.0.role", `"user"`, false},
		{"messages.0.content:1-5", "<éllo>", false},
		{"messages.0.content:0-0", "<>", false},
		{"messages.0.content:L1", "<second line>", false},
		{"messages.0.content:L2", "<third 😀 line>", false},
		{"messages.0.content:L3", "", true},
		{"messages.0.content:30-33", "<😀 l>", false},
		{"messages.0.content:30-40", "", true},
		{"messages.@m0.role", `"user"`, false},
		{"messages.@nope.role", "", true},
		{"messages[1].content[0].text:1-3", "<bc>", false},
		{"messages.1.content.1.image_url.url:bbox-0,0,0.5,0.5", `"https://x/y.png"`, false},
		{"messages.1.tool_calls.0.function.arguments.to:4-8", "<evil>", false},
		{"messages.1.tool_calls.0.function.arguments.3", `"digit key"`, false},
		{"messages.1.tool_calls.0.function.arguments.a:b", `"colon"`, false},
		{"messages.1.tool_calls.0.function.arguments.a:b:0-5", "<colon>", false},
		{"messages.1.tool_calls.0.function.name", `"send"`, false},
		{"messages.2.tools.0.inputSchema.properties.q.type", `"string"`, false},
		{"messages.1.tool_calls", `[{"id":"1","type":"function","function":{"name":"send","arguments":{"to":"eve@evil.com","3":"digit key","a:b":"colon"}}}]`, false},
		{"messages.1.tool_calls.0:0-1", "", true},
		{"messages.1.tool_calls.x", "", true},
		{"messages.1.tool_calls.5", "", true},
		{"messages.0.role.x", "", true},
		{"messages.9", "", true},
		{"messages.0.nope", "", true},
	}
	for _, tt := range tests {
		a, err := ParseAddress(tt.addr)
		if err != nil {
			t.Fatalf("ParseAddress(%q): %v", tt.addr, err)
		}
		r, err := tr.Resolve(a)
		if tt.err {
			if err == nil || !errors.Is(err, ErrUnresolved) {
				t.Errorf("Resolve(%q) = %v, %v; want ErrUnresolved", tt.addr, r.Value, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Resolve(%q): %v", tt.addr, err)
			continue
		}
		got := string(Marshal(r.Value))
		if a.Selector.Kind == SelectRange || a.Selector.Kind == SelectLine {
			got = "<" + r.Text + ">"
			s := r.Value.(string)
			if s[r.ByteStart:r.ByteEnd] != r.Text {
				t.Errorf("Resolve(%q): byte range %d-%d does not give the text", tt.addr, r.ByteStart, r.ByteEnd)
			}
		}
		if got != tt.want {
			t.Errorf("Resolve(%q) = %s, want %s", tt.addr, got, tt.want)
		}
	}
	r, err := tr.Resolve(RootAddress)
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := r.Value.([]Value); !ok || len(l) != 3 {
		t.Errorf("<root> = %s", Marshal(r.Value))
	}
}

func TestByteRange(t *testing.T) {
	s := "a😀bé" // code points: a, 😀, b, é ; bytes 1+4+1+2
	tests := []struct {
		start, end int
		bs, be     int
		err        bool
	}{
		{0, 0, 0, 0, false},
		{0, 1, 0, 1, false},
		{1, 2, 1, 5, false},
		{2, 4, 5, 8, false},
		{4, 4, 8, 8, false},
		{3, 5, 0, 0, true},
		{2, 1, 0, 0, true},
		{-1, 1, 0, 0, true},
	}
	for _, tt := range tests {
		bs, be, err := ByteRange(s, tt.start, tt.end)
		if tt.err {
			if !errors.Is(err, ErrRange) {
				t.Errorf("ByteRange(%d,%d) err = %v, want ErrRange", tt.start, tt.end, err)
			}
			continue
		}
		if err != nil || bs != tt.bs || be != tt.be {
			t.Errorf("ByteRange(%d,%d) = %d,%d,%v want %d,%d", tt.start, tt.end, bs, be, err, tt.bs, tt.be)
		}
		if CodePointOffset(s, bs) != tt.start || CodePointOffset(s, be) != tt.end {
			t.Errorf("CodePointOffset does not invert ByteRange(%d,%d)", tt.start, tt.end)
		}
	}
}

func TestStoredAddress(t *testing.T) {
	tr, err := Decode([]byte(`[{"tools": [{"name": "a", "inputSchema": {"properties": {"q": {}}}}, {"name": "b"}]},
		{"role": "user", "content": "hi"},
		{"role": "assistant", "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": {"x": "y"}}}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	items := tr.Flatten()
	tests := []struct{ in, want string }{
		{"messages.0", "messages.0.tools.0"},
		{"messages.1.description", "messages.0.tools.1.description"},
		{"messages.0.inputSchema.0.properties.q", "messages.0.tools.0.inputSchema"},
		{"messages.0.name:0-1", "messages.0.tools.0.name:0-1"},
		{"messages.2.content:0-2", "messages.1.content:0-2"},
		{"messages.3.tool_calls.0.function.arguments.x:0-1", "messages.2.tool_calls.0.function.arguments.x:0-1"},
		{"<root>", "<root>"},
	}
	for _, tt := range tests {
		a, err := ParseAddress(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := StoredAddress(items, a)
		if !ok || got.String() != tt.want {
			t.Errorf("StoredAddress(%s) = %s, %v; want %s", tt.in, got, ok, tt.want)
		}
	}
	if _, ok := StoredAddress(items, MessageAddress(9)); ok {
		t.Error("StoredAddress(messages.9) resolved")
	}
}
