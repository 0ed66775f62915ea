package web_test

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/vigilhq/vigil/web"
)

// TestTraceListSidebarCoversDataset: the hierarchy groups and annotation
// counts count every trace of the dataset (or of the search), not the
// page of 50; the home page shows each dataset's events.
func TestTraceListSidebarCoversDataset(t *testing.T) {
	e := newEnv(t)
	var msgs [][]map[string]any
	var mds []any
	for i := range 120 {
		msgs = append(msgs, []map[string]any{{"role": "user", "content": fmt.Sprintf("run %d %s", i, map[bool]string{true: "needle", false: "hay"}[i%10 == 0])},
			{"role": "assistant", "content": "ok"}})
		root := "bulk"
		if i >= 110 {
			root = "tail" // only on the third page by index
		}
		mds = append(mds, map[string]any{"hierarchy_path": []string{root, "x"}})
	}
	e.api(t, "POST", "/api/v1/push/trace", adminKey, map[string]any{"messages": msgs, "dataset": "big", "metadata": mds}, &map[string]any{})
	var ids struct {
		ID []string `json:"id"`
	}
	e.api(t, "POST", "/api/v1/push/trace", adminKey, map[string]any{"messages": [][]map[string]any{{{"role": "user", "content": "other"}}}, "dataset": "small"}, &ids)
	// Comments on the last traces (never on the first page).
	var list struct {
		Traces []struct {
			ID string `json:"id"`
		} `json:"traces"`
	}
	e.api(t, "GET", "/api/v1/search?q=index:115..119&limit=100&dataset="+datasetID(t, e, "big"), adminKey, nil, &list)
	if len(list.Traces) != 5 {
		t.Fatalf("setup: %d traces with index >= 115", len(list.Traces))
	}
	for _, tr := range list.Traces {
		e.api(t, "POST", "/api/v1/trace/"+tr.ID+"/annotate", adminKey, map[string]any{"content": "look", "address": "messages.0.content:0-3",
			"extra_metadata": map[string]any{"severity": "warn"}}, &map[string]any{})
	}

	b := e.browser(t, adminKey)
	tests := []struct {
		name, path string
		want       []string
		absent     []string
	}{
		{"whole dataset", "/u/admin/big", []string{
			`(?s)>bulk</a> <span class="count">110<`, `(?s)>tail</a> <span class="count">10<`,
			`<span class="pill">user</span> 5<`, `<span class="pill sev-warn">warn</span> 5 traces`}, nil},
		{"search results", "/u/admin/big?q=needle", []string{
			`(?s)>bulk</a> <span class="count">11<`, `(?s)>tail</a> <span class="count">1<`}, []string{`sev-warn">warn</span>`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body, _ := b.get(t, tc.path)
			if code != 200 {
				t.Fatalf("GET %s: %d", tc.path, code)
			}
			side := body[strings.Index(body, `<aside class="side left">`):strings.Index(body, `</aside>`)]
			for _, w := range tc.want {
				if !regexp.MustCompile(w).MatchString(side) {
					t.Errorf("sidebar lacks %s:\n%s", w, side)
				}
			}
			for _, w := range tc.absent {
				if strings.Contains(side, w) {
					t.Errorf("sidebar has %s", w)
				}
			}
		})
	}
	// A large dataset: the counts load after the page (script), or inline
	// on request (without script).
	defer web.SetInlineFacetsMax(100)()
	_, body, _ := b.get(t, "/u/admin/big?q=needle")
	if !strings.Contains(body, `data-facets="/u/admin/big/facets?q=needle"`) || !strings.Contains(body, `href="/u/admin/big?facets=1&amp;q=needle"`) ||
		strings.Contains(body, `<h2>Hierarchy</h2>`) {
		t.Errorf("large dataset: the trace list does not defer its counts")
	}
	for _, p := range []string{"/u/admin/big/facets?q=needle", "/u/admin/big?facets=1&q=needle"} {
		_, body, _ = b.get(t, p)
		if !regexp.MustCompile(`(?s)>bulk</a> <span class="count">11<`).MatchString(body) {
			t.Errorf("%s: no counts", p)
		}
	}
	if code, _, _ := e.browser(t, "").get(t, "/u/admin/big/facets"); code == 200 {
		t.Error("the counts of a private dataset are served signed out")
	}
	if tb := browserTab(t, e); tb != nil {
		tb.login(t, adminKey)
		tb.do(t, "deferred counts", chromedp.Navigate(tb.url("/u/admin/big")), chromedp.WaitVisible(chromedp.CSS(`#facets ul.tree`)))
		if got := tb.text(t, "#facets ul.tree"); !strings.Contains(got, "bulk 110") {
			t.Errorf("deferred counts: %q", got)
		}
	}

	_, body, _ = b.get(t, "/")
	for _, w := range []string{`(?s)>big</a></td>\s*<td class="num">120</td>\s*<td class="num">240</td>`, `(?s)>small</a></td>\s*<td class="num">1</td>\s*<td class="num">1</td>`} {
		if !regexp.MustCompile(w).MatchString(body) {
			t.Errorf("home page lacks %s", w)
		}
	}
}

func datasetID(t *testing.T, e *env, name string) string {
	t.Helper()
	var ds struct {
		ID string `json:"id"`
	}
	e.api(t, "GET", "/api/v1/dataset/byuser/admin/"+name, adminKey, nil, &ds)
	return ds.ID
}

// browserTab is newTab when Chromium is there, else nil (the rest of the
// test runs without it).
func browserTab(t *testing.T, e *env) *tab {
	if os.Getenv("VIGIL_TEST_CHROMIUM") == "" {
		return nil
	}
	return newTab(t, e)
}
