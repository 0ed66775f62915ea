package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"net/url"
	"strings"
	"testing"
	"testing/iotest"
)

// readAllFrames splits input with the SSE reader, reading one byte at a
// time when oneByte is set (events split across TCP reads).
func readAllFrames(t testing.TB, input []byte, oneByte bool) []*frame {
	var r io.Reader = bytes.NewReader(input)
	if oneByte {
		r = iotest.OneByteReader(r)
	}
	sr := newSSEReader(r)
	var out []*frame
	for {
		f, err := sr.next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			if err == errFrameTooLarge {
				return out
			}
			t.Fatalf("next: %v", err)
		}
		out = append(out, f)
	}
}

func TestSSEReader(t *testing.T) {
	tests := []struct {
		name, in string
		events   []string // event name + "|" + data of each frame
	}{
		{"openai", "data: {\"a\":1}\n\ndata: [DONE]\n\n", []string{"|{\"a\":1}", "|[DONE]"}},
		{"crlf", "event: ping\r\ndata: {}\r\n\r\ndata: x\r\n\r\n", []string{"ping|{}", "|x"}},
		{"multi-line data", "data: a\ndata: b\n\n", []string{"|a\nb"}},
		{"comment", ": keepalive\n\ndata: y\n\n", []string{"|", "|y"}},
		{"unterminated last", "data: a\n\ndata: b", []string{"|a", "|b"}},
		{"no space", "data:z\n\n", []string{"|z"}},
	}
	for _, tt := range tests {
		for _, one := range []bool{false, true} {
			fs := readAllFrames(t, []byte(tt.in), one)
			var got []string
			var raw []byte
			for _, f := range fs {
				got = append(got, f.event+"|"+string(f.data))
				raw = append(raw, f.raw...)
			}
			if strings.Join(got, ",") != strings.Join(tt.events, ",") {
				t.Errorf("%s (one byte %v): %q, want %q", tt.name, one, got, tt.events)
			}
			if string(raw) != tt.in {
				t.Errorf("%s: frames do not reassemble the input: %q", tt.name, raw)
			}
		}
	}
}

// FuzzSSEReader: the reader never panics, and its frames reassemble the
// input byte for byte (pass-through keeps the framing), whatever the
// read sizes.
func FuzzSSEReader(f *testing.F) {
	for _, s := range []string{"data: {\"a\":1}\n\ndata: [DONE]\n\n", "event: x\r\ndata: y\r\n\r\n", "\r\r\n\n", ": c\n\n", "data: a\r"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, one := range []bool{false, true} {
			var raw []byte
			for _, fr := range readAllFrames(t, in, one) {
				raw = append(raw, fr.raw...)
			}
			if len(bytes.TrimSpace(in)) > 0 && !bytes.Equal(raw, in) && !bytes.Equal(bytes.TrimRight(in, "\r\n \t"), bytes.TrimRight(raw, "\r\n \t")) {
				t.Fatalf("reassembled %q, want %q", raw, in)
			}
		}
	})
}

func TestDecodeHeaderRules(t *testing.T) {
	tests := []struct{ in, want string }{
		{`raise "x" if:\n    (m: Message)`, "raise \"x\" if:\n    (m: Message)"},
		{`a\tb\\c\'d\"e`, "a\tb\\c'd\"e"},
		{`\x41\u00e9\U0001F600\101`, "Aé😀A"},
		{`keep \d and \w`, `keep \d and \w`},
		{"line\\\ncont", "linecont"},
		{`trailing\`, `trailing\`},
	}
	for _, tt := range tests {
		if got := DecodeHeaderRules(tt.in); got != tt.want {
			t.Errorf("DecodeHeaderRules(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzDecodeHeaderRules(f *testing.F) {
	for _, s := range []string{`a\nb`, `\x4`, `\u12`, `\777`, `\`, `\U0011FFFF`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := DecodeHeaderRules(s)
		if !strings.Contains(s, `\`) && out != s {
			t.Fatalf("changed a string without escapes: %q -> %q", s, out)
		}
	})
}

// FuzzProviderRequest: every provider's request conversion and stream
// parser survive any JSON (a request never crashes the server).
func FuzzProviderRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"x","content":"r"}]}]}`,
		`{"contents":[{"role":"model","parts":[{"functionCall":{"name":"f","args":{}}}]},{"parts":[{"functionResponse":{"name":"f","response":{}}}]}]}`,
		`{"input":[{"type":"function_call","call_id":"c","name":"n","arguments":"{}"},{"type":"item_reference","id":"x"},{"type":"reasoning","summary":[{"text":"t"}]}]}`,
		`{"messages":[null,1,"x"]}`, `{"input":5}`,
	} {
		f.Add([]byte(s))
	}
	g, _ := New(Options{})
	f.Fuzz(func(t *testing.T, in []byte) {
		var body map[string]any
		if json.Unmarshal(in, &body) != nil || body == nil {
			return
		}
		for _, kind := range []string{"chat", "responses", "messages", "gemini"} {
			p := g.providerFor(kind)
			if ci, err := p.request(body, url.Values{}); err == nil {
				canonical(event{"role": "x", "content": ci.events})
				chain(ci.events)
			}
			p.response(in)
			st := p.stream()
			st.feed(&frame{raw: in, data: in})
			st.finish()
			st.draft()
			st.output()
		}
	})
}
