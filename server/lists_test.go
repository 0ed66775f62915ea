package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/vigilhq/vigil/store"
)

// pagingStore is a real store that records the Limit of every ListTraces
// call, so a test can see the list endpoints read in pages.
type pagingStore struct {
	store.Store
	limits []int
}

func (p *pagingStore) ListTraces(ctx context.Context, f store.TraceFilter) ([]*store.Trace, error) {
	p.limits = append(p.limits, f.Limit)
	return p.Store.ListTraces(ctx, f)
}

// TestListEndpointsStream checks that …/indices and …/traces read the
// dataset in pages of listPageSize (never one unbounded query building the
// whole response; issue 17) and that paging changes nothing in what they
// answer: every trace once, in index order, with limit, offset and
// indices applied across page boundaries.
func TestListEndpointsStream(t *testing.T) {
	old := listPageSize
	listPageSize = 4
	t.Cleanup(func() { listPageSize = old })
	ps := &pagingStore{Store: openSQLite(t)}
	ts := newTestServer(t, ps)
	const n = 11
	req := pushBatch("paged", n, 2)
	for i := 0; i < n; i++ {
		req.Metadata = append(req.Metadata, map[string]any{"name": fmt.Sprintf("t%d", i)})
	}
	if _, err := ts.c.Push(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	type row struct {
		Index int64  `json:"index"`
		Name  string `json:"name"`
	}
	seq := func(from, to int) []int64 {
		var out []int64
		for i := from; i < to; i++ {
			out = append(out, int64(i))
		}
		return out
	}
	tests := []struct {
		name, path string
		want       []int64
	}{
		{"indices", "/indices", seq(0, n)},
		{"traces", "/traces", seq(0, n)},
		{"traces_limit_across_pages", "/traces?limit=6", seq(0, 6)},
		{"traces_offset_limit", "/traces?offset=3&limit=5", seq(3, 8)},
		{"traces_offset_to_end", "/traces?offset=9", seq(9, n)},
		{"traces_offset_past_end", "/traces?offset=20", nil},
		{"traces_indices", "/traces?indices=1,5,6,7,8,10", []int64{1, 5, 6, 7, 8, 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps.limits = nil
			code, body := ts.do(t, "GET", "/api/v1/dataset/byuser/admin/paged"+tt.path, adminKey, nil)
			if code != http.StatusOK {
				t.Fatalf("%d %s", code, body)
			}
			var rows []row
			if err := json.Unmarshal(body, &rows); err != nil {
				t.Fatalf("not a JSON list: %v: %s", err, body)
			}
			var got []int64
			for _, r := range rows {
				if r.Name != fmt.Sprintf("t%d", r.Index) {
					t.Errorf("row %d has name %q", r.Index, r.Name)
				}
				got = append(got, r.Index)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("indices %v, want %v", got, tt.want)
			}
			for _, l := range ps.limits {
				if l <= 0 || l > listPageSize {
					t.Errorf("ListTraces read with limit %d, want pages of at most %d (all limits: %v)", l, listPageSize, ps.limits)
				}
			}
			if len(tt.want) > listPageSize && len(ps.limits) < 2 {
				t.Errorf("%d traces read in %d queries", len(tt.want), len(ps.limits))
			}
		})
	}
}
