package upconn

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// upServer is an httptest server that counts the connections it accepts.
func upServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestUpstreamPoolReusesConnections(t *testing.T) {
	srv, conns := upServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.RequestURI() != "/mcp/?x=1" || r.Header.Get("X-Test") != "a  b" || r.ContentLength != int64(len(b)) {
			http.Error(w, "unexpected request", http.StatusBadRequest)
			return
		}
		if r.Header.Get("Sse") != "" {
			// Chunked event stream, several flushes.
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range 3 {
				_, _ = io.WriteString(w, "data: "+string(b)+strings.Repeat("!", i)+"\n\n")
				w.(http.Flusher).Flush()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	})
	p := NewPool(10 * time.Second)
	defer p.Close()
	u := mustURL(t, srv.URL+"/mcp/?x=1")
	for i := range 6 {
		h := http.Header{"X-Test": {"a\r\nb"}, "Bad Name": {"x"}}
		if i%2 == 1 {
			h.Set("Sse", "1")
		}
		resp, err := p.Do(context.Background(), http.MethodPost, u, h, []byte(`{"n":1}`))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("call %d: status %d, %v: %s", i, resp.StatusCode, err, b)
		}
		want := `{"n":1}`
		if i%2 == 1 {
			want = "data: {\"n\":1}\n\ndata: {\"n\":1}!\n\ndata: {\"n\":1}!!\n\n"
		}
		if string(b) != want {
			t.Fatalf("call %d: body %q, want %q", i, b, want)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for 6 sequential requests, want 1 (keep-alive)", n)
	}
}

func TestUpstreamPoolSkipsInformationalAnswers(t *testing.T) {
	srv, _ := upServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Expect") != "" {
			http.Error(w, "Expect forwarded", http.StatusBadRequest)
			return
		}
		w.Header().Set("Link", "</x>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		_, _ = io.WriteString(w, "final")
	})
	p := NewPool(10 * time.Second)
	defer p.Close()
	resp, err := p.Do(context.Background(), http.MethodPost, mustURL(t, srv.URL+"/"), http.Header{"Expect": {"100-continue"}}, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != "final" {
		t.Fatalf("status %d, body %q", resp.StatusCode, b)
	}
}

func TestUpstreamPoolRetriesStaleConnection(t *testing.T) {
	srv, conns := upServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "ok")
	})
	p := NewPool(10 * time.Second)
	defer p.Close()
	u := mustURL(t, srv.URL+"/")
	for i := range 3 {
		resp, err := p.Do(context.Background(), http.MethodPost, u, http.Header{}, []byte("x"))
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "ok" {
			t.Fatalf("call %d: %q", i, b)
		}
		// The upstream drops its idle connections: the pooled one is stale.
		srv.CloseClientConnections()
		time.Sleep(10 * time.Millisecond)
	}
	if n := conns.Load(); n != 3 {
		t.Fatalf("%d connections, want 3", n)
	}
}

func TestUpstreamPoolUnreadBodyClosesConnection(t *testing.T) {
	srv, conns := upServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, strings.Repeat("x", 100<<10))
	})
	p := NewPool(10 * time.Second)
	defer p.Close()
	u := mustURL(t, srv.URL+"/")
	for range 2 {
		resp, err := p.Do(context.Background(), http.MethodPost, u, http.Header{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = resp.Body.Read(make([]byte, 10))
		resp.Body.Close()
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2 (a half-read answer is not reused)", n)
	}
}

func TestUpstreamPoolCancel(t *testing.T) {
	release := make(chan struct{})
	srv, _ := upServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: 1\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	p := NewPool(10 * time.Second)
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	resp, err := p.Do(ctx, http.MethodPost, mustURL(t, srv.URL+"/"), http.Header{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	done := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(resp.Body)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("body read to the end although the upstream never finished")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a cancelled request still blocks on the upstream")
	}
	// A dead upstream: a clear error.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	if _, err := p.Do(context.Background(), http.MethodPost, mustURL(t, "http://"+addr+"/"), http.Header{}, nil); err == nil {
		t.Fatal("no error from an upstream that is not listening")
	} else if errors.Is(err, ErrStaleConn) {
		t.Fatalf("error %v", err)
	}
}
