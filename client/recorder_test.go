package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
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

// TestRecorderBacklog: with the server unreachable, recording stops at
// MaxBuffered receipts with ErrBacklog, and the chain it kept is whole.
func TestRecorderBacklog(t *testing.T) {
	var down atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, `{"detail":"down"}`, http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	c := New(srv.URL, "k", WithRetries(0))
	rec, err := c.NewRecorder(RecorderOptions{Agent: "a", MaxBuffered: 3, FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, run, err := rec.Start(context.Background(), "r")
	if err != nil {
		t.Fatal(err)
	}
	down.Store(true)
	var errs []error
	for i := range 5 {
		errs = append(errs, run.Record(ctx, "log", map[string]any{"i": i}, nil, nil))
	}
	for i, err := range errs {
		if (i < 3) != (err == nil) || (i >= 3 && !errors.Is(err, ErrBacklog)) {
			t.Errorf("record %d: %v", i, err)
		}
	}
	if err := run.Flush(ctx); err == nil {
		t.Error("flush to a server that is down succeeded")
	}
	down.Store(false)
	if err := run.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
