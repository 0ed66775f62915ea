package upconn

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
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
	srv := stalledStream(t)
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

func TestAppendRequest(t *testing.T) {
	for _, tc := range []struct {
		name    string
		method  string
		url     string
		h       http.Header
		body    string
		wantLen int64 // -1: no Content-Length header
		want    http.Header
	}{
		{"post", "POST", "http://h:1/v1/chat?a=b", http.Header{"Authorization": {"Bearer k"}}, `{"x":1}`, 7,
			http.Header{"Authorization": {"Bearer k"}, "User-Agent": {"Go-http-client/1.1"}}},
		{"empty post", "POST", "http://h:1/", nil, "", 0, http.Header{"User-Agent": {"Go-http-client/1.1"}}},
		{"get", "GET", "http://h/models", http.Header{"User-Agent": {"me"}}, "", -1, http.Header{"User-Agent": {"me"}}},
		{"framing and hop-by-hop dropped", "POST", "http://h/", http.Header{
			"Host": {"evil"}, "Content-Length": {"99"}, "Transfer-Encoding": {"chunked"}, "Connection": {"close"},
			"Te": {"trailers"}, "Keep-Alive": {"1"}, "Expect": {"100-continue"}, "X-Ok": {"1", "2"},
		}, "ab", 2, http.Header{"X-Ok": {"1", "2"}, "User-Agent": {"Go-http-client/1.1"}}},
		{"line breaks and bad names", "POST", "http://h/", http.Header{"X-A": {"a\r\nX-Injected: 1"}, "Bad Name": {"x"}, "": {"y"}, "X:y": {"z"}}, "",
			0, http.Header{"X-A": {"a  X-Injected: 1"}, "User-Agent": {"Go-http-client/1.1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := mustURL(t, tc.url)
			raw := appendRequest(nil, tc.method, u, tc.h, []byte(tc.body))
			req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
			if err != nil {
				t.Fatalf("%q: %v", raw, err)
			}
			b, _ := io.ReadAll(req.Body)
			if req.Method != tc.method || req.RequestURI != u.RequestURI() || req.Host != u.Host || string(b) != tc.body {
				t.Fatalf("got %s %s host %s body %q from %q", req.Method, req.RequestURI, req.Host, b, raw)
			}
			if _, ok := req.Header["Content-Length"]; ok != (tc.wantLen >= 0) || (ok && req.ContentLength != tc.wantLen) {
				t.Fatalf("Content-Length %v (%d), want %d: %q", req.Header["Content-Length"], req.ContentLength, tc.wantLen, raw)
			}
			req.Header.Del("Content-Length")
			if !reflect.DeepEqual(req.Header, tc.want) {
				t.Fatalf("headers %v, want %v", req.Header, tc.want)
			}
		})
	}
}

// FuzzAppendRequest: whatever the header values and body, the request
// parses as one request with that body (no header injection, no
// request smuggling).
func FuzzAppendRequest(f *testing.F) {
	f.Add("X-A", "v", []byte(`{"a":1}`))
	f.Add("X-B", "a\r\n\r\nGET / HTTP/1.1", []byte("x"))
	f.Add("Content-Length", "0", []byte("POST / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, k, v string, body []byte) {
		u := &url.URL{Scheme: "http", Host: "h:80", Path: "/p"}
		raw := appendRequest(nil, "POST", u, http.Header{k: {v}}, body)
		br := bufio.NewReader(bytes.NewReader(raw))
		req, err := http.ReadRequest(br)
		if err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		b, err := io.ReadAll(req.Body)
		if err != nil || !bytes.Equal(b, body) {
			t.Fatalf("body %q, %v; want %q", b, err, body)
		}
		if br.Buffered() != 0 {
			t.Fatalf("%d bytes after the request: %q", br.Buffered(), raw)
		}
	})
}

// TestSendReceive: the request reaches the upstream at Send, before
// Receive is called.
func TestSendReceive(t *testing.T) {
	arrived := make(chan string, 1)
	srv, conns := upServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		arrived <- string(b)
		_, _ = io.WriteString(w, "answer")
	})
	p := NewPool(10 * time.Second)
	defer p.Close()
	u := mustURL(t, srv.URL+"/")
	for i := range 3 {
		x, err := p.Send(context.Background(), http.MethodPost, u, http.Header{}, []byte("question"))
		if err != nil {
			t.Fatal(err)
		}
		if got := <-arrived; got != "question" {
			t.Fatalf("call %d: upstream got %q", i, got)
		}
		resp, err := x.Receive()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "answer" {
			t.Fatalf("call %d: %q", i, b)
		}
		if _, err := x.Receive(); err == nil {
			t.Fatal("a second Receive succeeded")
		}
		x.Abort() // after Receive: nothing
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections, want 1", n)
	}
}

// TestAbort: an aborted exchange closes its connection (the upstream
// sees the request cancelled) and is not reused.
func TestAbort(t *testing.T) {
	cancelled := make(chan struct{}, 1)
	var block atomic.Bool
	block.Store(true)
	srv, conns := upServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		if block.Load() {
			<-r.Context().Done()
			cancelled <- struct{}{}
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	p := NewPool(10 * time.Second)
	defer p.Close()
	u := mustURL(t, srv.URL+"/")
	x, err := p.Send(context.Background(), http.MethodPost, u, http.Header{}, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	x.Abort()
	select {
	case <-cancelled:
	case <-time.After(20 * time.Second):
		t.Fatal("the upstream never saw the aborted request's connection close")
	}
	if _, err := x.Receive(); err == nil {
		t.Fatal("Receive after Abort succeeded")
	}
	block.Store(false)
	resp, err := p.Do(context.Background(), http.MethodPost, u, http.Header{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok" || conns.Load() != 2 {
		t.Fatalf("%q over %d connections, want ok over 2", b, conns.Load())
	}
}

// TestBodyCloseWhileReading: Close from another goroutine ends a read
// blocked on the connection; later reads fail rather than report EOF.
func TestBodyCloseWhileReading(t *testing.T) {
	srv := stalledStream(t)
	p := NewPool(10 * time.Second)
	defer p.Close()
	resp, err := p.Do(context.Background(), http.MethodPost, mustURL(t, srv.URL+"/"), http.Header{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(resp.Body)
		done <- err
	}()
	resp.Body.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a body closed early read to a clean end")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not end a blocked read")
	}
	if _, err := resp.Body.Read(make([]byte, 1)); err == nil || err == io.EOF {
		t.Fatalf("read after Close: %v", err)
	}
}

// TestHeadAndEmptyAnswers: answers without a body give the connection
// back at Close.
func TestHeadAndEmptyAnswers(t *testing.T) {
	srv, conns := upServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Length", "5")
		if r.Method == http.MethodGet {
			_, _ = io.WriteString(w, "hello")
		}
	})
	p := NewPool(10 * time.Second)
	defer p.Close()
	u := mustURL(t, srv.URL+"/")
	for _, m := range []string{http.MethodHead, http.MethodPost, http.MethodGet, http.MethodHead} {
		resp, err := p.Do(context.Background(), m, u, http.Header{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := map[string]string{"GET": "hello"}[m]; string(b) != want {
			t.Fatalf("%s: %q", m, b)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections, want 1", n)
	}
}

// stalledStream is an upstream that sends one SSE event and then waits
// until the request is cancelled or the test ends.
func stalledStream(t *testing.T) *httptest.Server {
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
	// Registered after upServer's, so it runs first: the server's Close
	// waits for the handler.
	t.Cleanup(func() { close(release) })
	return srv
}
