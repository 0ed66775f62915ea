package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// These tests use a stand-in HTTP server to check the client's transport
// behaviour (retries, errors, batching). The end-to-end tests against the
// real server live in package server and cmd/vigil.

func TestAPIErrorDecoding(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(404)
		io.WriteString(w, `{"detail": "Trace not found", "code": "not_found"}`)
	}))
	defer hs.Close()
	c := New(hs.URL+"/api/v1/", "k", WithRetries(0))
	_, err := c.GetTrace(context.Background(), "x", false)
	var ae *APIError
	if !errors.As(err, &ae) || ae.StatusCode != 404 || ae.Code != "not_found" || ae.Detail != "Trace not found" || ae.Path != "/api/v1/trace/x" {
		t.Fatalf("error = %#v", err)
	}
	if !IsNotFound(err) {
		t.Error("IsNotFound false")
	}
}

func TestRetriesIdempotentOnly(t *testing.T) {
	var calls atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		if r.Header.Get("Authorization") != "Bearer secret" {
			t.Errorf("auth header %q", r.Header.Get("Authorization"))
		}
		if n < 3 {
			w.WriteHeader(503)
			io.WriteString(w, `{"detail": "busy", "code": "not_ready"}`)
			return
		}
		io.WriteString(w, `{"username": "admin"}`)
	}))
	defer hs.Close()
	c := New(hs.URL, "secret", WithBackoff(time.Millisecond, 4*time.Millisecond))
	id, err := c.Identity(context.Background())
	if err != nil || id.Username != "admin" || calls.Load() != 3 {
		t.Fatalf("GET with retries: %v %+v after %d calls", err, id, calls.Load())
	}
	// POST push is not retried.
	calls.Store(0)
	_, err = c.Push(context.Background(), PushRequest{Messages: [][]any{{}}})
	if err == nil || calls.Load() != 1 {
		t.Fatalf("POST retried: %v after %d calls", err, calls.Load())
	}
	// ... unless it carries an Idempotency-Key: then the server replays it.
	calls.Store(0)
	_, err = c.Push(WithIdempotencyKey(context.Background(), "k1"), PushRequest{Messages: [][]any{{}}})
	if err != nil || calls.Load() != 3 {
		t.Fatalf("keyed POST: %v after %d calls, want success after 3", err, calls.Load())
	}
	// Retries stop when the context ends.
	calls.Store(-100)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	slow := New(hs.URL, "secret", WithBackoff(50*time.Millisecond, time.Second), WithRetries(10))
	if _, err := slow.Identity(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ctx deadline: %v", err)
	}
}

func TestEnvConfig(t *testing.T) {
	t.Setenv("VIGIL_URL", "")
	t.Setenv("INVARIANT_API_ENDPOINT", "http://inv:1")
	t.Setenv("INVARIANT_API_URL", "http://inv:2")
	t.Setenv("VIGIL_API_KEY", "")
	t.Setenv("INVARIANT_API_KEY", "ik")
	if EnvURL() != "http://inv:1" || EnvKey() != "ik" {
		t.Fatalf("invariant env: %s %s", EnvURL(), EnvKey())
	}
	t.Setenv("VIGIL_URL", "http://vigil:3")
	t.Setenv("VIGIL_API_KEY", "vk")
	if c := NewFromEnv(); c.BaseURL() != "http://vigil:3" || c.key != "vk" {
		t.Fatalf("vigil env: %s %s", c.BaseURL(), c.key)
	}
}

func TestPusherBatchesAndFlushes(t *testing.T) {
	var mu sync.Mutex
	var batches []int
	release := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		var req PushRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Dataset != "d" {
			t.Errorf("push body: %v %+v", err, req)
		}
		mu.Lock()
		batches = append(batches, len(req.Messages))
		mu.Unlock()
		ids := make([]string, len(req.Messages))
		json.NewEncoder(w).Encode(map[string]any{"id": ids})
	}))
	defer hs.Close()
	c := New(hs.URL, "k")
	p := c.NewPusher(PusherOptions{Dataset: "d", BatchSize: 10, MaxBuffered: 20, FlushInterval: time.Hour, Concurrency: 1})
	ctx := context.Background()
	// With the server blocked, the buffer fills: 20 buffered + 1 batch in
	// flight + 1 batch being assembled, then Add blocks (bounded memory).
	added := 0
	for i := 0; i < 100; i++ {
		actx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
		err := p.Add(actx, PushTrace{Messages: []any{map[string]any{"role": "user"}}, Metadata: map[string]any{"i": i}})
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		added++
	}
	if added < 20 || added > 50 {
		t.Fatalf("Add accepted %d traces before blocking; want a bound near MaxBuffered+2 batches", added)
	}
	close(release)
	for i := 0; i < 5; i++ { // a partial batch, flushed by Close
		if err := p.Add(ctx, PushTrace{Messages: []any{}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if p.Pushed() != added+5 {
		t.Fatalf("pushed %d, want %d", p.Pushed(), added+5)
	}
	if err := p.Add(ctx, PushTrace{}); !errors.Is(err, ErrPusherClosed) {
		t.Fatalf("Add after Close: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, n := range batches {
		if n > 10 {
			t.Fatalf("batch of %d traces > BatchSize", n)
		}
	}
}

func TestPusherReportsErrors(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(400)
		io.WriteString(w, `{"detail": "messages must not be empty", "code": "invalid_request"}`)
	}))
	defer hs.Close()
	var failed atomic.Int32
	p := New(hs.URL, "k").NewPusher(PusherOptions{BatchSize: 2, OnError: func(err error, n int) { failed.Add(int32(n)) }})
	for i := 0; i < 3; i++ {
		p.Add(context.Background(), PushTrace{})
	}
	err := p.Close(context.Background())
	var ae *APIError
	if !errors.As(err, &ae) || ae.StatusCode != 400 || failed.Load() != 3 {
		t.Fatalf("Close error %v, %d failed", err, failed.Load())
	}
}

func TestParseURL(t *testing.T) {
	for _, tt := range []struct {
		in, want, err string
	}{
		{"", DefaultURL, ""},
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080", ""},
		{"https://vigil.example.com/", "https://vigil.example.com", ""},
		{"http://127.0.0.1:8080/api/v1/", "http://127.0.0.1:8080", ""},
		{"http://example.com/vigil/api/v1", "http://example.com/vigil", ""},
		{"127.0.0.1:8080", "http://127.0.0.1:8080", ""},
		{"localhost:8080", "http://localhost:8080", ""},
		{":8080", "http://127.0.0.1:8080", ""},
		{"http://:9000", "http://127.0.0.1:9000", ""},
		{" localhost:8080/ ", "http://localhost:8080", ""},
		{"[::1]:8080", "http://[::1]:8080", ""},
		{"ftp://example.com", "", `scheme "ftp" is not http or https`},
		{"http://", "", "has no host"},
		{"localhost:80x0", "", `server URL "localhost:80x0": invalid port`},
		{"http://u:p@example.com", "", "only scheme, host, port and path"},
		{"http://example.com/?a=1", "", "only scheme, host, port and path"},
	} {
		got, err := ParseURL(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseURL(%q) = %q, %v; want error containing %q", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseURL(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// TestURLWithoutScheme: "127.0.0.1:PORT" reaches the server over http
// (it failed with a URL-parser message), and a bad address fails every
// call with ParseURL's message instead of sending anything.
func TestURLWithoutScheme(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"username": "admin"}`)
	}))
	defer hs.Close()
	hostPort := strings.TrimPrefix(hs.URL, "http://")
	_, port, _ := strings.Cut(hostPort, ":")
	for _, addr := range []string{hostPort, "localhost:" + port, ":" + port} {
		id, err := New(addr, "k").Identity(context.Background())
		if err != nil || id.Username != "admin" {
			t.Errorf("New(%q).Identity() = %+v, %v", addr, id, err)
		}
	}
	_, err := New("ftp://"+hostPort, "k").Identity(context.Background())
	if err == nil || !strings.Contains(err.Error(), `is not http or https`) {
		t.Errorf("ftp URL: %v", err)
	}
}

// TestUnreachableServer: with nothing listening, a call says that no
// Vigil server answers at the URL and how to start one, after its
// retries (it said "GET /api/v1/user/identity: dial tcp ...: connection refused").
func TestUnreachableServer(t *testing.T) {
	hs := httptest.NewServer(http.NotFoundHandler())
	url := hs.URL
	hs.Close() // the port is now free: connections are refused
	for _, tt := range []struct {
		name string
		call func(c *Client) error
	}{
		{"GET with retries", func(c *Client) error { _, err := c.Identity(context.Background()); return err }},
		{"streamed POST", func(c *Client) error {
			_, err := c.Upload(context.Background(), "d", strings.NewReader("{}\n"), UploadOptions{})
			return err
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call(New(url, "k", WithBackoff(time.Millisecond, 2*time.Millisecond)))
			var ue *UnreachableError
			if !errors.As(err, &ue) || ue.URL != url {
				t.Fatalf("error %#v, want *UnreachableError for %s", err, url)
			}
			want := "no Vigil server answers at " + url + " (connection refused): start one with 'vigil serve'"
			if !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %q, want it to start with %q", err, want)
			}
		})
	}
}
