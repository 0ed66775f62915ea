package storetest

import (
	"fmt"
	"testing"

	"github.com/vigilhq/vigil/store"
)

func init() {
	register("TraceEvents", testTraceEvents)
}

func testTraceEvents(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	var msgs []store.Message
	for i := range 12 {
		msgs = append(msgs, event(fmt.Sprint("e", i), "user", fmt.Sprint("text ", i)))
	}
	res, err := s.PushTraces(ctx, store.PushRequest{OwnerID: u.ID, DatasetName: "d", CreateIfMissing: true, Traces: []store.NewTrace{{Messages: msgs}}})
	must(t, err)
	id := res.Traces[0].ID
	full, err := s.GetTrace(ctx, id, true)
	must(t, err)
	tests := []struct {
		name     string
		from, to int
		want     []int // indices
	}{
		{"middle", 3, 6, []int{3, 4, 5}},
		{"start", 0, 2, []int{0, 1}},
		{"past the end", 10, 500, []int{10, 11}},
		{"beyond", 12, 20, nil},
		{"empty range", 5, 5, nil},
		{"negative from", -3, 1, []int{0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.TraceEvents(ctx, id, tc.from, tc.to)
			must(t, err)
			if len(got) != len(tc.want) {
				t.Fatalf("TraceEvents(%d, %d): %d events, want %d", tc.from, tc.to, len(got), len(tc.want))
			}
			for i, m := range got {
				w := full.Messages[tc.want[i]]
				if m.Index != tc.want[i] || m.ID != w.ID || string(m.Data) != string(w.Data) || fmt.Sprint(m.NodeIDs) != fmt.Sprint(w.NodeIDs) {
					t.Errorf("event %d = %+v, want %+v", i, m, w)
				}
			}
		})
	}
	_, err = s.TraceEvents(ctx, "no-such-trace", 0, 10)
	wantErr(t, err, store.ErrNotFound)
}
