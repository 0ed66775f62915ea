package server

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestSplitArray: splitArray gives what json.Unmarshal into
// []json.RawMessage gives, for valid JSON.
func TestSplitArray(t *testing.T) {
	for _, in := range []string{
		`[]`, ` [ ] `, `[1]`, `[ [1,2] , {"a":"]},[\"\\"} ,"x",null ]`,
		"[\n\t[{\"role\":\"user\",\"content\":\"a,b]\"}],\r\n[] ]",
		`[[{"s":"\\\\"}],[{"t":"\\\""}]]`, `[true,false,-1.5e3,"",{}]`,
	} {
		var want []json.RawMessage
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		var got []json.RawMessage
		if !splitArray([]byte(in), &got) {
			t.Fatalf("%s: not split", in)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d elements, want %d", in, len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Errorf("%s: element %d = %s, want %s", in, i, got[i], want[i])
			}
		}
	}
	for _, in := range []string{`{}`, `"[1]"`, `1`} {
		var got []json.RawMessage
		if splitArray([]byte(in), &got) {
			t.Errorf("%s: split", in)
		}
	}
}

// TestSplitObject: splitObject gives what json.Unmarshal into
// map[string]json.RawMessage gives, or declines.
func TestSplitObject(t *testing.T) {
	for _, in := range []string{
		`{}`, ` { } `, `{"a":1}`, `{"messages":[[{"role":"user","content":"}{,\"]"}]] , "dataset" : "d","x":null}`,
		"{\n\"a\" :\t[1,{\"b\":[]}] ,\r\n\"a\":\"last wins\"}", `{"m":{"n":{"o":"\\"}},"p":true}`,
	} {
		var want map[string]json.RawMessage
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		got, ok := splitObject([]byte(in))
		if !ok || len(got) != len(want) {
			t.Fatalf("%s: %v %d members, want %d", in, ok, len(got), len(want))
		}
		for k, v := range want {
			if !bytes.Equal(got[k], v) {
				t.Errorf("%s: %q = %s, want %s", in, k, got[k], v)
			}
		}
	}
	for _, in := range []string{`[]`, `null`, `"{}"`, `{"a\u0062":1}`} {
		if _, ok := splitObject([]byte(in)); ok {
			t.Errorf("%s: split", in)
		}
	}
}
