package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// rawConn is a client connection that writes requests by hand, so a test
// can send part of a body and stall.
type rawConn struct {
	net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, url string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{Conn: c, br: bufio.NewReader(c)}
}

// startPush writes the head of a push declaring length body bytes, then
// the first part of the body.
func (c *rawConn) startPush(t *testing.T, length int, part string) {
	t.Helper()
	head := fmt.Sprintf("POST /api/v1/push/trace HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n", adminKey, length)
	if _, err := io.WriteString(c, head+part); err != nil {
		t.Fatal(err)
	}
}

// response reads one response, waiting at most wait.
func (c *rawConn) response(t *testing.T, wait time.Duration) (*http.Response, []byte) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(wait))
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// smallPush is a valid push body of about n bytes.
func smallPush(n int) string {
	pad := max(0, n-60)
	return `{"messages":[[{"role":"user","content":"` + strings.Repeat("x", pad) + `"}]],"dataset":"lim"}`
}

func wantOverloaded(t *testing.T, resp *http.Response, body []byte) {
	t.Helper()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("got %d (Retry-After %q) %s, want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	var e struct{ Code string }
	if json.Unmarshal(body, &e); e.Code != CodeOverloaded {
		t.Fatalf("code %q, want %q: %s", e.Code, CodeOverloaded, body)
	}
}

func TestBodyIdleTimeout(t *testing.T) {
	// Long enough that a loaded machine (CI runs -race on 2 cores) does
	// not stretch the slow body's 1/5-timeout pauses past it.
	const idle = time.Second
	ts := newTestServer(t, openSQLite(t), func(c *Config) { c.BodyIdleTimeout = idle })

	t.Run("stalled_body_is_cut_off", func(t *testing.T) {
		c := dialRaw(t, ts.URL)
		start := time.Now()
		c.startPush(t, 10<<20, `{"messages":`)
		resp, body := c.response(t, 10*time.Second)
		if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), CodeRequestTimeout) {
			t.Fatalf("got %d %s, want 408 %s", resp.StatusCode, body, CodeRequestTimeout)
		}
		if el := time.Since(start); el < idle {
			t.Errorf("cut off after %s, before the idle timeout %s", el, idle)
		}
	})

	t.Run("slow_body_that_keeps_delivering_is_not_cut", func(t *testing.T) {
		body := smallPush(200)
		c := dialRaw(t, ts.URL)
		c.startPush(t, len(body), "")
		// 10 pieces 200 ms apart: the whole body takes 2× the idle
		// timeout, but no read waits longer than a fifth of it.
		step := (len(body) + 9) / 10
		for i := 0; i < len(body); i += step {
			time.Sleep(idle / 5)
			if _, err := io.WriteString(c, body[i:min(i+step, len(body))]); err != nil {
				t.Fatal(err)
			}
		}
		resp, b := c.response(t, 10*time.Second)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("got %d %s, want 200", resp.StatusCode, b)
		}
	})

	t.Run("stalled_upload_is_cut_off", func(t *testing.T) {
		c := dialRaw(t, ts.URL)
		head := fmt.Sprintf("POST /api/v1/dataset/upload?name=up HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n", adminKey, 1<<20)
		io.WriteString(c, head+`{"messages": [`)
		resp, body := c.response(t, 10*time.Second)
		if resp.StatusCode != http.StatusRequestTimeout {
			t.Fatalf("got %d %s, want 408", resp.StatusCode, body)
		}
	})
}

func TestBodyMemoryBudget(t *testing.T) {
	const maxJSON = 256 << 10
	ts := newTestServer(t, openSQLite(t), func(c *Config) {
		c.MaxJSONBytes = maxJSON
		c.MaxInflightBodyBytes = 320 << 10
		c.BodyIdleTimeout = 5 * time.Second
	})
	// A first push sends most of a 250 KB body and holds it.
	first := smallPush(250 << 10)
	c1 := dialRaw(t, ts.URL)
	c1.startPush(t, len(first), first[:200<<10])
	time.Sleep(100 * time.Millisecond) // let the server buffer it

	// A second 100 KB push would take the budget past its limit: 429
	// with Retry-After, not a bigger heap.
	second := smallPush(100 << 10)
	c2 := dialRaw(t, ts.URL)
	c2.startPush(t, len(second), second)
	resp, body := c2.response(t, 5*time.Second)
	wantOverloaded(t, resp, body)

	// A body declared larger than max_json_bytes is refused unread.
	c3 := dialRaw(t, ts.URL)
	c3.startPush(t, maxJSON+1, "")
	if resp, b := c3.response(t, 5*time.Second); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("declared %d bytes: %d %s, want 413", maxJSON+1, resp.StatusCode, b)
	}

	// Small requests still fit in what is left.
	if code, b := ts.do(t, "POST", "/api/v1/push/trace", adminKey, smallPush(1000)); code != http.StatusOK {
		t.Fatalf("small push: %d %s", code, b)
	}

	// The first push completes; its charge is given back, and the retry
	// of the second one goes through.
	io.WriteString(c1, first[200<<10:])
	if resp, b := c1.response(t, 5*time.Second); resp.StatusCode != http.StatusOK {
		t.Fatalf("first push: %d %s", resp.StatusCode, b)
	}
	if code, b := ts.do(t, "POST", "/api/v1/push/trace", adminKey, second); code != http.StatusOK {
		t.Fatalf("retried push: %d %s", code, b)
	}
	if u := ts.srv.budget.used.Load(); u != 0 {
		t.Errorf("budget still holds %d bytes after every request ended", u)
	}
	wantMetric(t, ts.srv, `vigil_http_rejected_total{limit="body_memory"} 1`)
}

func wantMetric(t *testing.T, s *Server, line string) {
	t.Helper()
	var b strings.Builder
	if err := s.Metrics().Write(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), line+"\n") {
		t.Errorf("metrics lack %q", line)
	}
}

func TestConnectionLimit(t *testing.T) {
	st := openSQLite(t)
	ts := newTestServer(t, st) // bootstraps the store
	srv, err := New(Config{Store: st, LedgerKey: ts.srv.key, Logger: discardLogger(), MaxConnections: 2})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(srv)
	hs.Listener = srv.Listener(hs.Listener)
	hs.Start()
	t.Cleanup(hs.Close)

	// Two connections hold the two slots (a body half sent).
	held := []*rawConn{dialRaw(t, hs.URL), dialRaw(t, hs.URL)}
	for _, c := range held {
		c.startPush(t, 1000, `{"messages":`)
	}
	time.Sleep(100 * time.Millisecond)
	// The third is answered 429 with Retry-After and closed.
	c3 := dialRaw(t, hs.URL)
	io.WriteString(c3, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, body := c3.response(t, 5*time.Second)
	wantOverloaded(t, resp, body)
	wantMetric(t, srv, `vigil_http_rejected_total{limit="connections"} 1`)

	// Closing a held connection frees its slot.
	held[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c := dialRaw(t, hs.URL)
		io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		resp, _ := c.response(t, 5*time.Second)
		if resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot not freed: still %d", resp.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestKeepAliveSurvivesAdmission: a request whose body was read to the end
// keeps its connection (only an answer given before the end closes it).
func TestKeepAliveSurvivesAdmission(t *testing.T) {
	ts := newTestServer(t, openSQLite(t))
	c := dialRaw(t, ts.URL)
	for i := range 3 {
		body := smallPush(100 << 10)
		c.startPush(t, len(body), body)
		if resp, b := c.response(t, 10*time.Second); resp.StatusCode != http.StatusOK || resp.Close {
			t.Fatalf("push %d on one connection: %d (close %v) %s", i, resp.StatusCode, resp.Close, b)
		}
	}
}
