package storetest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/vigilhq/vigil/store"
)

func init() {
	register("SearchWindowPlan", testSearchWindowPlan)
}

// testSearchWindowPlan pages through index-ordered searches of one
// dataset without a total (the UI's trace list: a store may then check
// the terms on the first traces in order instead of the index) and with
// one, in both directions, with small pages: every page must be the same.
func testSearchWindowPlan(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	var nt []store.NewTrace
	want := map[string]int{}
	for i := range 400 {
		text := fmt.Sprintf("common entry %d", i)
		if i == 5 || i == 390 {
			text += " rarest"
		}
		if i%7 == 0 {
			text += " middling"
		}
		md := `{"k":"a"}`
		if i%2 == 0 {
			md = `{"k":"b"}`
		}
		if i == 0 {
			md = `{"k":"\u0062"}` // "b", escaped: no prefilter may drop it
		}
		nt = append(nt, store.NewTrace{Name: fmt.Sprint(i), Metadata: []byte(md), Messages: []store.Message{event(fmt.Sprint("m", i), "user", text)}})
	}
	res, err := s.PushTraces(ctx, store.PushRequest{OwnerID: u.ID, DatasetName: "w", CreateIfMissing: true, Traces: nt})
	must(t, err)
	for i := range 400 {
		want["common"]++
		if i == 5 || i == 390 {
			want["rarest"]++
			want[`"rarest" common`]++
		}
		if i%7 == 0 {
			want["middling"]++
			if i%2 == 0 {
				want["middling meta:k=b"]++
			}
			if i != 5 && i != 390 {
				want["middling -rarest"]++
			}
		}
	}
	want["nowhere-to-be-found"] = 0
	for q, n := range want {
		for _, order := range []store.TraceOrder{store.OrderIndex, store.OrderIndexDesc} {
			for _, limit := range []int{2, 9} {
				page := func(noTotal bool) []string {
					var ids []string
					cursor := ""
					for range 1000 {
						r, err := s.Search(ctx, store.SearchRequest{Query: q, OwnerID: u.ID, DatasetIDs: []string{res.Dataset.ID},
							Order: order, Limit: limit, Cursor: cursor, NoTotal: noTotal})
						must(t, err)
						if len(r.Traces) > limit || (r.NextCursor != "" && len(r.Traces) != limit) {
							t.Fatalf("%q limit %d: a page of %d traces, next %q", q, limit, len(r.Traces), r.NextCursor)
						}
						for _, tr := range r.Traces {
							ids = append(ids, tr.Name)
						}
						if cursor = r.NextCursor; cursor == "" {
							break
						}
					}
					return ids
				}
				a, b := page(true), page(false)
				if !slices.Equal(a, b) || len(a) != n {
					t.Errorf("%q order %d limit %d: without total %d traces %v, with total %d traces %v; want %d", q, order, limit, len(a), head(a), len(b), head(b), n)
				}
			}
		}
	}
}

func head(s []string) []string { return s[:min(len(s), 8)] }
