package sqlstore

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestNodeIDsJSON(t *testing.T) {
	for _, ids := range [][]string{{}, {"01KDVDN90RBSAH00000000RUN1"}, {"a", "b-c_d"}, {"q\"uote", "<tag>"}, {"é", "\x01"}} {
		want, _ := json.Marshal(ids)
		if got := nodeIDsJSON(ids); got != string(want) {
			t.Errorf("%q: %s, want %s", ids, got, want)
		}
	}
}

// nodeIDCases are node_ids texts: the forms the stores write and others.
var nodeIDCases = []string{
	`[]`, `["01KDVDN90RBSAH00000000RUN1"]`, `["a","b-c_d"]`, `["a", "b"]`, ` [ "a" , "b" ] `,
	`["q\"uote"]`, `["é"]`, `["\u0001"]`, `null`, `[1]`, `["a",]`, `["a"`, `["a"]x`, `[`, ``, `["a" "b"]`, `{}`,
}

// TestParseNodeIDs: parseNodeIDs agrees with json.Unmarshal, error or not.
func TestParseNodeIDs(t *testing.T) {
	for _, in := range nodeIDCases {
		checkNodeIDs(t, []byte(in))
	}
}

func FuzzParseNodeIDs(f *testing.F) {
	for _, in := range nodeIDCases {
		f.Add([]byte(in))
	}
	f.Fuzz(checkNodeIDs)
}

func checkNodeIDs(t *testing.T, in []byte) {
	var want []string
	werr := json.Unmarshal(in, &want)
	got, err := parseNodeIDs(in)
	if (err != nil) != (werr != nil) {
		t.Fatalf("%q: error %v, json.Unmarshal's %v", in, err, werr)
	}
	if err == nil && (!slices.Equal(got, want) || (got == nil) != (want == nil)) {
		t.Fatalf("%q: %q, json.Unmarshal gives %q", in, got, want)
	}
}
