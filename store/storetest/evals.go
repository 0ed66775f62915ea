package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/vigilhq/vigil/store"
)

func init() {
	register("EvalCases", testEvalCases)
}

// testEvalCases covers ListEvalCases: only runs whose metadata has eval
// with a string suite and case count, per owner and suite, oldest first.
func testEvalCases(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	a, b := newUser(t, s, "evala"), newUser(t, s, "evalb")
	t0 := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	mk := func(owner *store.User, i int, md string) string {
		res, err := s.PushTraces(ctx, store.PushRequest{OwnerID: owner.ID, DatasetName: "evals", CreateIfMissing: true,
			Traces: []store.NewTrace{{Metadata: json.RawMessage(md), TimeCreated: t0.Add(time.Duration(i) * time.Minute),
				Messages: events("m", 1)}}})
		must(t, err)
		return res.Traces[0].ID
	}
	r1 := mk(a, 3, `{"eval":{"suite":"s1","case":"c1"}}`)
	r2 := mk(a, 1, `{"eval":{"suite":"s1","case":"c2"},"x":1}`)
	r3 := mk(a, 2, `{"eval":{"suite":"s2","case":"c1"}}`)
	mk(a, 4, `{"eval":{"suite":"s1"}}`)                          // no case
	mk(a, 5, `{"eval":"s1"}`)                                    // not an object
	mk(a, 6, `{"eval":{"suite":"s1","case":7}}`)                 // case not a string
	mk(a, 7, `{"note":"\"eval\" is only mentioned in a value"}`) // matched by text only
	mk(a, 8, `{"nested":{"eval":{"suite":"s1","case":"c9"}}}`)   // not top level
	rb := mk(b, 0, `{"eval":{"suite":"s1","case":"c1"}}`)

	tests := []struct {
		name, owner, suite string
		want               []string
	}{
		{"owner a, every suite", a.ID, "", []string{r2, r3, r1}},
		{"owner a, suite s1", a.ID, "s1", []string{r2, r1}},
		{"owner a, unknown suite", a.ID, "nope", nil},
		{"every owner, suite s1", "", "s1", []string{rb, r2, r1}},
	}
	for _, tc := range tests {
		got, err := s.ListEvalCases(ctx, tc.owner, tc.suite)
		must(t, err)
		var ids []string
		for _, c := range got {
			ids = append(ids, c.RunID)
		}
		if len(ids) != len(tc.want) {
			t.Errorf("%s: ListEvalCases = %v, want %v", tc.name, ids, tc.want)
			continue
		}
		for i := range ids {
			if ids[i] != tc.want[i] {
				t.Errorf("%s: ListEvalCases = %v, want %v", tc.name, ids, tc.want)
				break
			}
		}
	}
	got, err := s.ListEvalCases(ctx, a.ID, "s2")
	must(t, err)
	if len(got) != 1 || got[0].Suite != "s2" || got[0].Case != "c1" || got[0].OwnerID != a.ID || !got[0].TimeCreated.Equal(t0.Add(2*time.Minute)) {
		t.Errorf("ListEvalCases(s2) = %+v", got)
	}
}
