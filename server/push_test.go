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
