package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"
)

// The speed targets of web-ui.md §7: server time under 50 ms p50 for the
// trace list of a 100,000-trace dataset and for a 1,000-event trace, and
// under 100 KB of JavaScript and CSS per page.

func TestPageWeight(t *testing.T) {
	e := newEnv(t)
	n := e.ui.StaticBytes()
	t.Logf("JavaScript + CSS of every page: %d bytes", n)
	if n >= 100_000 {
		t.Fatalf("JavaScript + CSS weigh %d bytes; the budget is 100 KB", n)
	}
}

// servePage serves path b.N times through the whole handler chain
// (server middleware, session check, UI) and reports the p50.
func servePage(b *testing.B, e *env, path string) {
	b.Helper()
	durs := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("Authorization", "Bearer "+adminKey)
		w := httptest.NewRecorder()
		start := time.Now()
		e.srv.ServeHTTP(w, req)
		durs = append(durs, time.Since(start))
		if w.Code != http.StatusOK {
			b.Fatalf("GET %s: %d %s", path, w.Code, w.Body.String())
		}
	}
	b.StopTimer()
	slices.Sort(durs)
	b.ReportMetric(float64(durs[len(durs)/2].Microseconds())/1000, "p50-ms")
}

func BenchmarkTraceListPage(b *testing.B) {
	e := newEnv(b)
	const total, batch = 100_000, 2_000
	for i := 0; i < total; i += batch {
		traces := make([][]map[string]any, batch)
		md := make([]any, batch)
		for j := range traces {
			n := i + j
			traces[j] = []map[string]any{
				{"role": "user", "content": fmt.Sprintf("question %d about the weather in city %d", n, n%97)},
				{"role": "assistant", "content": fmt.Sprintf("answer %d: it is sunny", n)},
			}
			md[j] = map[string]any{"name": fmt.Sprintf("run %d", n), "hierarchy_path": []string{fmt.Sprintf("group-%d", n%10)}}
		}
		if code := e.api(b, "POST", "/api/v1/push/trace", adminKey, map[string]any{"messages": traces, "dataset": "big", "metadata": md}, nil); code != 200 {
			b.Fatalf("push: %d", code)
		}
	}
	// Index everything first, as a server that has been up a while has.
	for {
		n, err := e.st.IndexPending(context.Background(), 10_000)
		if err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	b.Run("first", func(b *testing.B) { servePage(b, e, "/u/admin/big") })
	b.Run("search", func(b *testing.B) { servePage(b, e, "/u/admin/big?q=%22question+4242+%22") })
	b.Run("filter", func(b *testing.B) { servePage(b, e, "/u/admin/big?q=meta%3Aname%3D%22run+77777%22") })
	b.Run("broad", func(b *testing.B) { servePage(b, e, "/u/admin/big?q=sunny") })                // matches every trace
	b.Run("rare", func(b *testing.B) { servePage(b, e, "/u/admin/big?q=%22question+99999+%22") }) // the last trace only
	// The sidebar counts of the whole dataset and of searches (loaded by
	// the page's script after the list).
	b.Run("facets", func(b *testing.B) { servePage(b, e, "/u/admin/big/facets") })
	b.Run("facets-filter", func(b *testing.B) { servePage(b, e, "/u/admin/big/facets?q=meta%3Aname%3D%22run+77777%22") })
	b.Run("facets-broad", func(b *testing.B) { servePage(b, e, "/u/admin/big/facets?q=sunny") })
}

func BenchmarkTracePage(b *testing.B) {
	e := newEnv(b)
	events := make([]map[string]any, 0, 1000)
	for i := 0; len(events) < 1000; i++ {
		events = append(events,
			map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"id": fmt.Sprint("c", i), "type": "function",
				"function": map[string]any{"name": "lookup", "arguments": map[string]any{"query": fmt.Sprintf("order %d", i), "limit": 5}}}}},
			map[string]any{"role": "tool", "tool_call_id": fmt.Sprint("c", i), "content": fmt.Sprintf(`{"order": %d, "status": "shipped"}`, i)})
	}
	id := e.push(b, adminKey, "one", events, nil)
	for i := 0; i < 50; i++ {
		e.api(b, "POST", "/api/v1/trace/"+id+"/annotate", adminKey, map[string]any{"content": "note", "address": fmt.Sprintf("messages.%d.tool_calls.0.function.arguments.query:0-5", i*20)}, nil)
	}
	servePage(b, e, "/trace/"+id)
}
