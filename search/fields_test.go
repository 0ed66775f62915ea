package search

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestFold(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"Hello", "hello"},
		{"ÉCOLE", "école"},
		{"Straẞe", "straße"},
		{"ſ", "s"}, // long s folds to s
		{"K", "k"}, // Kelvin sign
		{"ΣΑΣ ς", "σασ σ"},
		{"a\x00b", "a\uFFFDb"},
	} {
		got := Fold(c.in)
		if got != c.want {
			t.Errorf("Fold(%q) = %q, want %q", c.in, got, c.want)
		}
		if utf8.RuneCountInString(got) != utf8.RuneCountInString(c.in) {
			t.Errorf("Fold(%q) changed the code-point count", c.in)
		}
	}
}

func TestFields(t *testing.T) {
	ev := `{"role":"assistant","content":[{"type":"text","text":"one"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"two"}],
		"tool_calls":[{"function":{"name":"send","arguments":{"b":"<é>","a":1}}},{"function":{"name":"raw","arguments":"{\"x\": 1}"}}],"error":"boom"}`
	var got []string
	for _, f := range Fields(3, []byte(ev)) {
		if f.Msg != 3 {
			t.Errorf("field %+v: msg", f)
		}
		s := f.Text
		if f.Tool {
			s = "tool:" + s
		}
		got = append(got, s)
	}
	want := []string{"one\ntwo", "tool:send", `{"a":1,"b":"<é>"}`, "tool:raw", `{"x": 1}`, "boom"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("Fields = %q, want %q", got, want)
	}
	if f := Fields(0, []byte(`not json`)); f != nil {
		t.Errorf("Fields(bad) = %v", f)
	}
}

// TestHighlights compares the highlights of testdata/highlights.json
// (events) for a few term lists with golden addresses.
func TestHighlights(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "highlights.json"))
	if err != nil {
		t.Fatal(err)
	}
	var events []json.RawMessage
	if err := json.Unmarshal(data, &events); err != nil {
		t.Fatal(err)
	}
	msgs := make([][]byte, len(events))
	for i, e := range events {
		msgs[i] = e
	}
	for _, c := range []struct {
		terms []string
		want  string
	}{
		{[]string{"héllo"}, "messages.0.content:0-5=héllo messages.0.content:12-17=héllo"},
		{[]string{"WORLD"}, "messages.0.content:6-11=WORLD"},
		{[]string{"two"}, "messages.1.content.2.text:4-7=two"},
		{[]string{"ema"}, "messages.2.tool_calls.0.function.name:5-8=ema messages.2.tool_calls.0.function.arguments.to:4-7=ema"},
		{[]string{"denied"}, "messages.3.error:11-17=denied"},
		{[]string{"🙂x"}, "messages.0.content:18-20=🙂x"},
		{[]string{"zzz"}, ""},
	} {
		var got []string
		for _, h := range Highlights(msgs, c.terms) {
			got = append(got, h.Address+"="+h.Term)
		}
		if g := strings.Join(got, " "); g != c.want {
			t.Errorf("Highlights(%q) = %q, want %q", c.terms, g, c.want)
		}
	}
	many := Highlights([][]byte{[]byte(`{"role":"user","content":"` + strings.Repeat("ab ", 500) + `"}`)}, []string{"ab"})
	if len(many) != MaxHighlights {
		t.Errorf("%d highlights, want the cap %d", len(many), MaxHighlights)
	}
}

func TestMetaMatch(t *testing.T) {
	md := []byte(`{"env":"prod","n":5,"s":"7","big":1e400,"f":true,"z":null,"a":{"b":[10,"x"]},"a.b":"lit","u":"ÉA"}`)
	for _, c := range []struct {
		filter string
		want   bool
	}{
		{"meta:env", true}, {"meta:z", false}, {"meta:missing", false},
		{"meta:env=prod", true}, {"meta:env!=prod", false}, {"meta:env<q", true},
		{"meta:n=5", true}, {"meta:n=5.0", true}, {"meta:n>=5e0", true}, {"meta:n<5", false},
		{"meta:s>6", true}, {"meta:s=7", true}, {`meta:s="7"`, true}, {`meta:n="5"`, false},
		{"meta:big>1e99", true},
		{"meta:env=5", false}, {"meta:n=prod", false},
		{"meta:f=true", true}, {"meta:f!=true", false}, {"meta:f>false", false}, {"meta:env=true", false},
		{"meta:z=null", true}, {"meta:z!=null", false}, {"meta:env=null", false},
		{"meta:a.b.0=10", true}, {"meta:a.b.-1=x", true}, {"meta:a.b.2", false},
		{"meta:a.b=lit", true}, {`meta:"a"."b"=lit`, false},
		{"meta:env%RO", true}, {"meta:u%éa", false}, {"meta:u%ÉA", true}, {"meta:n%5", false},
	} {
		q, err := Parse(c.filter)
		if err != nil {
			t.Fatalf("%s: %v", c.filter, err)
		}
		if got := q.Root.(*Meta).Match(md); got != c.want {
			t.Errorf("%s on %s = %v, want %v", c.filter, md, got, c.want)
		}
	}
	if m, err := ParseMeta("meta:n=5"); err != nil || !m.Match([]byte(`{"n":5}`)) {
		t.Errorf("ParseMeta: %v", err)
	}
	if _, err := ParseMeta("hello"); err == nil {
		t.Error("ParseMeta(hello) succeeded")
	}
}

// FuzzHighlights checks that Highlights never panics on any event JSON
// and term, and that every highlight is an address whose range lies inside
// a string of the event holding the term (folded).
func FuzzHighlights(f *testing.F) {
	data, err := os.ReadFile(filepath.Join("testdata", "highlights.json"))
	if err != nil {
		f.Fatal(err)
	}
	var events []json.RawMessage
	if err := json.Unmarshal(data, &events); err != nil {
		f.Fatal(err)
	}
	for _, e := range events {
		f.Add([]byte(e), "o")
		f.Add([]byte(e), "ÉL")
	}
	f.Add([]byte(`{"content":[{"type":"text","text":"a\u0000b"}]}`), "\x00")
	f.Fuzz(func(t *testing.T, ev []byte, term string) {
		for _, h := range Highlights([][]byte{ev}, []string{term}) {
			addr, rng, ok := strings.Cut(h.Address, ":")
			if !ok || !strings.HasPrefix(addr, "messages.0.") {
				t.Fatalf("highlight address %q", h.Address)
			}
			a, b, _ := strings.Cut(rng, "-")
			var start, end int
			if _, err := fmt.Sscan(a, &start); err != nil {
				t.Fatalf("range %q", rng)
			}
			if _, err := fmt.Sscan(b, &end); err != nil || end-start != utf8.RuneCountInString(Fold(term)) {
				t.Fatalf("range %q for term %q", rng, term)
			}
		}
		Fields(0, ev)
	})
}
