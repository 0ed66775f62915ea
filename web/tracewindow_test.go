package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestLongTraceReadsOnePage: the viewer of a long trace reads the events
// of the page it shows, with every annotation for the navigator; a page
// past the end shows the last one; a trace the caller cannot read is 404.
func TestLongTraceReadsOnePage(t *testing.T) {
	e := newEnv(t)
	var events []map[string]any
	for i := range 1203 {
		events = append(events, map[string]any{"role": "user", "content": fmt.Sprintf("event %d", i)})
	}
	tid := e.push(t, adminKey, "long", events, nil)
	e.api(t, "POST", "/api/v1/trace/"+tid+"/annotate", adminKey, map[string]any{"content": "late", "address": "messages.1100.content:0-5"}, &map[string]any{})
	admin, err := e.srv.AuthenticateKey(context.Background(), adminKey)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		from, to int
		filled   []int // indices with their event
		null     []int
	}{
		{0, 500, []int{0, 499}, []int{500, 1100, 1202}},
		{1000, 1500, []int{1000, 1202}, []int{0, 999}},
		{2000, 2500, nil, []int{0, 1202}},
	}
	for _, tc := range tests {
		body, err := e.srv.TraceWindow(httptest.NewRequest("GET", "/", nil), admin, tid, tc.from, tc.to)
		if err != nil {
			t.Fatal(err)
		}
		var tr struct {
			Messages    []json.RawMessage `json:"messages"`
			Annotations []struct {
				Address string `json:"address"`
			} `json:"annotations"`
		}
		if err := json.Unmarshal(body, &tr); err != nil {
			t.Fatal(err)
		}
		if len(tr.Messages) != 1203 || len(tr.Annotations) != 1 || tr.Annotations[0].Address != "messages.1100.content:0-5" {
			t.Fatalf("window %d-%d: %d messages, annotations %+v", tc.from, tc.to, len(tr.Messages), tr.Annotations)
		}
		for _, i := range tc.filled {
			if !strings.Contains(string(tr.Messages[i]), fmt.Sprintf(`"event %d"`, i)) {
				t.Errorf("window %d-%d: event %d = %s", tc.from, tc.to, i, tr.Messages[i])
			}
		}
		for _, i := range tc.null {
			if string(tr.Messages[i]) != "null" {
				t.Errorf("window %d-%d: event %d read: %.60s", tc.from, tc.to, i, tr.Messages[i])
			}
		}
	}
	other := e.newUser(t, "other", "full")
	oc, err := e.srv.AuthenticateKey(context.Background(), other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.TraceWindow(httptest.NewRequest("GET", "/", nil), oc, tid, 0, 500); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("another user's window: %v, want not found", err)
	}

	b := e.browser(t, adminKey)
	_, body, _ := b.get(t, "/trace/"+tid+"?page=99")
	if !strings.Contains(body, `id="messages.1202"`) || strings.Contains(body, `id="messages.999"`) || !strings.Contains(body, "1203 events") {
		t.Error("a page past the end does not show the last page")
	}
	if _, body, _ = b.get(t, "/trace/"+tid); !strings.Contains(body, `href="/trace/`+tid+`?page=2#messages.1100.content%3A0-5"`) {
		t.Error("the navigator of page 0 does not reach the annotation on page 2")
	}
	if code, _, _ := e.browser(t, other).get(t, "/trace/"+tid); code != 404 {
		t.Errorf("another user's trace page: %d, want 404", code)
	}
}
