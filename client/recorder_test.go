package client

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestLLMCallPath(t *testing.T) {
	for path, want := range map[string]bool{
		"/v1/chat/completions": true, "/openai/deployments/x/chat/completions": true, "/v1/responses": true,
		"/v1/messages": true, "/v1beta/models/gemini-2.0-flash:generateContent": true, "/v1/embeddings": true,
		"/v1/models": false, "/healthz": false, "/v1/files": false,
	} {
		if got := LLMCallPath(path); got != want {
			t.Errorf("LLMCallPath(%q) = %v, want %v", path, got, want)
		}
	}
}

// TestTransportWithoutRun: requests outside a run pass through untouched.
func TestTransportWithoutRun(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(append([]byte(`{"echo":`), append(b, '}')...))
	}))
	defer srv.Close()
	hc := &http.Client{Transport: Transport(nil, nil)}
	req, _ := http.NewRequestWithContext(context.Background(), "POST", srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"m"}`))
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); string(b) != `{"echo":{"model":"m"}}` {
		t.Errorf("body %q", b)
	}
	if RunFrom(req.Context()) != nil {
		t.Error("a run appeared")
	}
}
