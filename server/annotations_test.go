package server

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestAnnotationJSONContentKeepsNumbers: a non-string content is stored as
// its compact JSON text, with numbers as written (decoding to float64
// turned 12345678901234567890 into 12345678901234567000).
func TestAnnotationJSONContentKeepsNumbers(t *testing.T) {
	ts := newTestServer(t, openSQLite(t))
	_, body := ts.do(t, "POST", "/api/v1/push/trace", adminKey, `{"messages": [[{"role": "user", "content": "x"}]]}`)
	var pr struct{ ID []string }
	json.Unmarshal(body, &pr)
	st, body := ts.do(t, "POST", "/api/v1/trace/"+pr.ID[0]+"/annotate", adminKey,
		`{"content": {"run": 12345678901234567890, "score": 0.1000000000000000000001}, "address": "messages.0"}`)
	var a struct{ Content string }
	if err := json.Unmarshal(body, &a); err != nil || st != 200 {
		t.Fatalf("annotate: %d %s", st, body)
	}
	if want := `{"run":12345678901234567890,"score":0.1000000000000000000001}`; a.Content != want {
		t.Errorf("content = %s, want %s", a.Content, want)
	}
	if !strings.Contains(string(body), "12345678901234567890") {
		t.Errorf("response lost the digits: %s", body)
	}
}
