package trace

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// unmarshalSeeds are documents UnmarshalAnyOwned must decode as
// encoding/json does: fast-path ones (fast) and those it hands over.
var unmarshalSeeds = []struct {
	doc  string
	fast bool // decoded by the scanner, not encoding/json
}{
	{`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":false}`, true},
	{` {"a":1,"b":-0,"c":1.5e3,"d":[],"e":{},"f":null,"g":true,"h":false} `, true},
	{`{"a":1,"a":2}`, true},
	{`"\u00e9\ud83d\ude00\n\t\"\\\/"`, true},
	{`"héllo ✓"`, true},
	{`[1,[2,[3,{"x":[]}]]]`, true},
	{`null`, true},
	{`12345678901234567890`, true},
	{`1e400`, false},
	{`-1e400`, false},
	{`"\ud800"`, false},
	{`"\udc00x"`, false},
	{`"\ud800\u0041"`, false},
	{"\"\xff\"", false},
	{"{\"k\xfe\":1}", false},
	{"\xef\xbb\xbf{}", false},
	{``, false},
	{`   `, false},
	{`{`, false},
	{`{"a":1,}`, false},
	{`[1,]`, false},
	{`[1 2]`, false},
	{`{"a" 1}`, false},
	{`{"a":1}x`, false},
	{`{"a":1}{}`, false},
	{`01`, false},
	{`-`, false},
	{`1.`, false},
	{`1e`, false},
	{`nul`, false},
	{`tru`, false},
	{`"a` + "\x01" + `"`, false},
	{`"\x"`, false},
	{`"\u12"`, false},
	{strings.Repeat("[", 600) + strings.Repeat("]", 600), false},
	{strings.Repeat("[", 20000) + strings.Repeat("]", 20000), false},
}

// checkUnmarshal fails unless UnmarshalAnyOwned(doc) is json.Unmarshal's
// value and error.
func checkUnmarshal(t *testing.T, doc string) {
	t.Helper()
	var want any
	werr := json.Unmarshal([]byte(doc), &want)
	got, gerr := UnmarshalAnyOwned([]byte(doc))
	if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
		t.Fatalf("%q: error %v, encoding/json %v", doc, gerr, werr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: got %#v, encoding/json %#v", doc, got, want)
	}
}

func TestUnmarshalAnyOwned(t *testing.T) {
	for _, tc := range unmarshalSeeds {
		checkUnmarshal(t, tc.doc)
		// The fast path is taken where it should be, and only there.
		if len(tc.doc) == 0 {
			continue
		}
		s := anyScanner{scanner: scanner{data: []byte(tc.doc), src: tc.doc}}
		s.skipSpace()
		s.value()
		s.skipSpace()
		fast := s.err == nil && !s.bail && s.pos == len(tc.doc)
		if fast != tc.fast {
			t.Errorf("%q: fast path %v, want %v", tc.doc, fast, tc.fast)
		}
	}
}

func FuzzUnmarshalAnyOwned(f *testing.F) {
	for _, tc := range unmarshalSeeds {
		f.Add(tc.doc)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		checkUnmarshal(t, doc)
	})
}
