package server

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/client"
)

// searchFixture pushes dataset "shop" (three traces) and one snippet
// through the API.
func searchFixture(t *testing.T, ts *testServer) {
	t.Helper()
	ctx := context.Background()
	_, err := ts.c.Push(ctx, client.PushRequest{Dataset: "shop", Messages: [][]any{
		{map[string]any{"role": "user", "content": "Where is my Order 42? order order"},
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "c1", "type": "function",
				"function": map[string]any{"name": "lookup_order", "arguments": map[string]any{"id": "42"}}}}}},
		{map[string]any{"role": "user", "content": "refund please"}},
		{map[string]any{"role": "user", "content": "naïve Café order"}},
	}, Metadata: []map[string]any{{"env": "prod"}, {"env": "dev"}, {"env": "prod"}},
		Annotations: [][]client.AnnotationCreate{{{Content: "bad", Address: "messages.0.content:0-5",
			ExtraMetadata: map[string]any{"source": "guardrails-error", "severity": "critical"}}}, nil, nil}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.c.Push(ctx, client.PushRequest{Messages: [][]any{{map[string]any{"role": "user", "content": "order snippet"}}}}); err != nil {
		t.Fatal(err)
	}
}

func TestSearchAPI(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		searchFixture(t, ts)
		ctx := context.Background()
		res, err := ts.c.Search(ctx, "ORDER meta:env=prod", client.SearchOptions{Datasets: []string{"shop"}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Total != 2 || len(res.Traces) != 2 || res.Parsed != "ORDER meta:env=prod" || res.NextCursor != nil {
			t.Fatalf("search = %+v", res)
		}
		h := res.Traces[0]
		if h.Index != 0 || h.Dataset == nil || h.Dataset.Name != "shop" || h.Dataset.User != "admin" ||
			h.MaxSeverity == nil || *h.MaxSeverity != "critical" || h.AnnotationsBySource["guardrails-error"] != 1 || h.MessageCount != 2 {
			t.Errorf("hit 0 = %+v", h)
		}
		var addrs []string
		for a, hl := range h.Highlights {
			if hl.Content != "ORDER" || hl.Source != "search" {
				t.Errorf("highlight %s = %+v", a, hl)
			}
			addrs = append(addrs, a)
		}
		slices.Sort(addrs)
		want := []string{"messages.0.content:12-17", "messages.0.content:22-27", "messages.0.content:28-33", "messages.1.tool_calls.0.function.name:7-12"}
		if !slices.Equal(addrs, want) {
			t.Errorf("highlights = %q, want %q", addrs, want)
		}
		if res.Traces[1].Index != 2 || res.Traces[1].Highlights["messages.0.content:11-16"].Content != "ORDER" {
			t.Errorf("hit 1 = %+v", res.Traces[1])
		}

		// Every dataset, newest first, in pages.
		page1, err := ts.c.Search(ctx, "order", client.SearchOptions{Limit: 2, NoHighlights: true})
		if err != nil {
			t.Fatal(err)
		}
		// The snippet was pushed last: it comes first.
		if page1.Total != 3 || len(page1.Traces) != 2 || page1.NextCursor == nil || page1.Traces[0].Highlights != nil || page1.Traces[0].Dataset != nil {
			t.Fatalf("page 1 = %+v", page1)
		}
		page2, err := ts.c.Search(ctx, "order", client.SearchOptions{Limit: 2, Cursor: *page1.NextCursor})
		if err != nil || len(page2.Traces) != 1 || page2.NextCursor != nil || page2.Traces[0].ID == page1.Traces[1].ID {
			t.Fatalf("page 2 = %+v, %v", page2, err)
		}

		// Bad input: 400 with the position, unknown dataset 404.
		for _, c := range []struct {
			path, code string
			status     int
			position   float64
		}{
			{"/api/v1/search?q=" + url.QueryEscape("café (order"), "query_invalid", 400, 5},
			{"/api/v1/search?q=" + url.QueryEscape("is:nope"), "query_invalid", 400, 3},
			{"/api/v1/search?q=x&sort=bogus", "invalid_request", 400, -1},
			{"/api/v1/search?q=x&limit=0", "invalid_request", 400, -1},
			{"/api/v1/search?q=x&cursor=zz", "invalid_request", 400, -1},
			{"/api/v1/search?q=x&dataset=nope", "not_found", 404, -1},
			{"/api/v1/dataset/byuser/admin/shop/s?query=" + url.QueryEscape(`"open`), "query_invalid", 400, 0},
			{"/api/v1/dataset/byuser/admin/shop/traces?query=" + url.QueryEscape("a OR"), "query_invalid", 400, 2},
		} {
			status, body := ts.do(t, "GET", c.path, adminKey, nil)
			m, _ := decode(t, body).(map[string]any)
			if status != c.status || m["code"] != c.code {
				t.Errorf("GET %s = %d %s, want %d %s", c.path, status, body, c.status, c.code)
				continue
			}
			if c.position >= 0 && m["position"] != c.position {
				t.Errorf("GET %s: position %v, want %v", c.path, m["position"], c.position)
			}
		}
		// A hostile query is refused quickly rather than run.
		status, body := ts.do(t, "GET", "/api/v1/search?q="+url.QueryEscape(strings.Repeat("(", 5000)), adminKey, nil)
		if status != 400 || !strings.Contains(string(body), "query_invalid") {
			t.Errorf("hostile query: %d %s", status, body)
		}
	})
}

func TestSearchCompatAndSavedQueries(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		searchFixture(t, ts)
		ctx := context.Background()
		r, err := ts.c.SearchDatasetCompat(ctx, "admin", "shop", "order")
		if err != nil {
			t.Fatal(err)
		}
		e := r.Result["order"]
		if !slices.Equal(e.Traces, []int{0, 2}) || e.Description != "search result" || len(r.Result) != 1 {
			t.Errorf("compat = %+v", r)
		}
		if r.Mappings["2"]["messages.0.content:11-16"].Content != "order" || len(r.Mappings) != 2 {
			t.Errorf("mappings = %+v", r.Mappings)
		}
		for q, want := range map[string]struct {
			title, desc string
			idx         []int
		}{
			"is:annotated":        {"is:annotated", "filtered result", []int{0}},
			"order -is:annotated": {"order -is:annotated", "filtered search result", []int{2}},
			"filter:Picked:1,2":   {"Picked", "filtered result", []int{1, 2}},
			"":                    {"", "search result", []int{0, 1, 2}},
		} {
			r, err := ts.c.SearchDatasetCompat(ctx, "admin", "shop", q)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Result[want.title]; got.Description != want.desc || !slices.Equal(got.Traces, want.idx) {
				t.Errorf("compat %q = %+v, want %+v", q, r.Result, want)
			}
		}

		// ?query= on the trace list filters (it used to be ignored).
		ds, err := ts.c.GetDatasetByName(ctx, "admin", "shop")
		if err != nil {
			t.Fatal(err)
		}
		rows, err := ts.c.FilterTraces(ctx, ds.ID, "meta:env=dev OR café", 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 2 || rows[0].Index != 1 || rows[1].Index != 2 {
			t.Errorf("filtered trace list = %+v", rows)
		}
		if rows, err := ts.c.FilterTraces(ctx, ds.ID, "nothing-matches-this", 0); err != nil || len(rows) != 0 {
			t.Errorf("empty filtered list = %+v, %v", rows, err)
		}

		// Saved queries: must parse, show in the dataset with counts, delete.
		sq, err := ts.c.SaveQuery(ctx, "admin", "shop", "prod orders", "order meta:env=prod")
		if err != nil || sq.ID == "" || sq.Query != "order meta:env=prod" {
			t.Fatalf("SaveQuery = %+v, %v", sq, err)
		}
		_, err = ts.c.SaveQuery(ctx, "admin", "shop", "broken", "(")
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Code != "query_invalid" {
			t.Errorf("SaveQuery(bad) err = %v", err)
		}
		qs, err := ts.c.DatasetQueries(ctx, ds.ID)
		if err != nil {
			t.Fatal(err)
		}
		counts := map[string]int{}
		for _, q := range qs {
			if q.Count == nil {
				t.Errorf("query %s has no count", q.Name)
				continue
			}
			counts[q.Name] = *q.Count
		}
		wantCounts := map[string]int{"All": 3, "Annotated": 1, "Unannotated": 2, "Flagged": 1, "prod orders": 2}
		if len(counts) != len(wantCounts) {
			t.Errorf("queries = %+v", qs)
		}
		for k, v := range wantCounts {
			if counts[k] != v {
				t.Errorf("count of %s = %d, want %d", k, counts[k], v)
			}
		}
		if err := ts.c.DeleteQuery(ctx, sq.ID); err != nil {
			t.Fatal(err)
		}
		if err := ts.c.DeleteQuery(ctx, sq.ID); !client.IsNotFound(err) {
			t.Errorf("second delete: %v", err)
		}
	})
}

// TestSearchVisibility checks that a search returns only what the caller
// may read: a member sees their own and public traces, not another
// member's private ones.
func TestSearchVisibility(t *testing.T) {
	ts := newTestServer(t, openSQLite(t))
	ctx := context.Background()
	searchFixture(t, ts) // admin's private dataset
	if st, body := ts.do(t, "POST", "/api/v1/users", adminKey, `{"username": "mia"}`); st != 200 {
		t.Fatalf("create user: %d %s", st, body)
	}
	k, err := ts.c.CreateKey(ctx, client.KeyCreate{Name: "mia", Scope: "full", User: "mia"})
	if err != nil {
		t.Fatal(err)
	}
	mia := client.New(ts.URL, k.Key, client.WithRetries(0))
	if _, err := mia.Push(ctx, client.PushRequest{Dataset: "mine", Messages: [][]any{{map[string]any{"role": "user", "content": "my order"}}}}); err != nil {
		t.Fatal(err)
	}
	res, err := mia.Search(ctx, "order", client.SearchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Total != 1 || res.Traces[0].Dataset.Name != "mine" {
		t.Errorf("mia's search = %+v", res)
	}
	if _, err := mia.Search(ctx, "order", client.SearchOptions{Datasets: []string{"admin/shop"}}); !client.IsNotFound(err) {
		t.Errorf("search in another user's private dataset: %v", err)
	}
	// Anonymous callers get nothing without anonymous_read_public.
	status, body := ts.do(t, "GET", "/api/v1/search?q=order", "", nil)
	if status != 200 || !strings.Contains(string(body), `"total":0`) {
		t.Errorf("anonymous search = %d %s", status, body)
	}
}
