package gateway_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/policy"
)

// The tests of this file call http:// upstreams, which the gateway calls
// over its own connection pool from the handler's goroutine
// (internal/upconn), and check the upstream call's semantics on that
// path: reuse, stale connections, broken answers, timeouts and
// cancellation.

const chatAnswer = `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}]}`

const forbiddenRule = `raise "forbidden word" if:
    (msg: Message)
    msg.role == "user"
    "FORBIDDEN" in msg.content
`

// pooledEnv is a gateway in front of an http:// upstream that counts its
// connections and requests.
type pooledEnv struct {
	up       *httptest.Server
	gw       *httptest.Server
	conns    atomic.Int32
	requests atomic.Int32
	// quit is closed when the test ends, so that a handler waiting for
	// a cancellation that never came lets the servers close.
	quit chan struct{}
}

// newPooledEnv starts upstream handler h and a gateway in front of it
// with a blocking global rule (forbiddenRule); opt may change the
// gateway's options.
func newPooledEnv(t *testing.T, h http.HandlerFunc, opt func(*gateway.Options)) *pooledEnv {
	t.Helper()
	e := &pooledEnv{quit: make(chan struct{})}
	e.up = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.requests.Add(1)
		h(w, r)
	}))
	e.up.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			e.conns.Add(1)
		}
	}
	e.up.Start()
	t.Cleanup(e.up.Close)
	p, err := policy.Load(forbiddenRule, policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := gateway.Options{
		Global:    []*gateway.Guardrail{{ID: "g", Name: "forbidden", Content: forbiddenRule, Action: "block", Policy: p}},
		Upstreams: []gateway.Upstream{{Name: "openai", BaseURL: e.up.URL + "/v1"}},
		Logger:    slog.New(slog.DiscardHandler),
	}
	if opt != nil {
		opt(&o)
	}
	gw, err := gateway.New(o)
	if err != nil {
		t.Fatal(err)
	}
	e.gw = httptest.NewServer(gw)
	t.Cleanup(func() {
		e.gw.Close()
		gw.Close()
	})
	t.Cleanup(func() { close(e.quit) })
	return e
}

// chat posts a chat completion with user message text.
func (e *pooledEnv) chat(ctx context.Context, text string, stream bool) (*http.Response, []byte, error) {
	body := `{"model":"m","messages":[{"role":"user","content":"` + text + `"}]`
	if stream {
		body += `,"stream":true`
	}
	req, err := http.NewRequestWithContext(ctx, "POST", e.gw.URL+"/api/v1/gateway/openai/chat/completions", strings.NewReader(body+"}"))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer sk-test")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// answerChat answers a chat completion, as a stream when asked.
func answerChat(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer sk-test" {
		http.Error(w, "unexpected request "+r.URL.Path, http.StatusBadRequest)
		return
	}
	if strings.Contains(string(b), `"stream":true`) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, part := range []string{"hel", "lo"} {
			_, _ = io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"`+part+`"}}]}`+"\n\n")
			w.(http.Flusher).Flush()
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, chatAnswer)
}

// cancelled waits until r is cancelled (its connection closed) and
// reports it on ch; it gives up when the test ends.
func (e *pooledEnv) cancelled(r *http.Request, ch chan<- struct{}) {
	select {
	case <-r.Context().Done():
		ch <- struct{}{}
	case <-e.quit:
	}
}

// wait fails the test when ch is not closed soon: a guard against a
// hang, not a timing assertion.
func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("never: %s", what)
	}
}

func TestPooledUpstreamReusesConnections(t *testing.T) {
	e := newPooledEnv(t, answerChat, nil)
	for i := range 12 {
		stream := i%3 == 2
		resp, b, err := e.chat(context.Background(), "hi", stream)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("call %d: status %d: %s", i, resp.StatusCode, b)
		}
		if !stream && string(b) != chatAnswer {
			t.Fatalf("call %d: body %s", i, b)
		}
		if stream && (!strings.Contains(string(b), `"hel"`) || !strings.Contains(string(b), "[DONE]")) {
			t.Fatalf("call %d: stream %s", i, b)
		}
		if resp.Header.Get("Vigil-Upstream-Ms") == "" || resp.Header.Get("Vigil-Guardrail-Result") != "pass" {
			t.Fatalf("call %d: headers %v", i, resp.Header)
		}
	}
	if n := e.conns.Load(); n != 1 {
		t.Fatalf("%d upstream connections for 12 sequential calls, want 1", n)
	}
}

func TestPooledUpstreamRetriesStaleConnection(t *testing.T) {
	e := newPooledEnv(t, answerChat, nil)
	for i := range 4 {
		resp, b, err := e.chat(context.Background(), "hi", false)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || string(b) != chatAnswer {
			t.Fatalf("call %d: status %d: %s", i, resp.StatusCode, b)
		}
		// The upstream drops its idle connection: the gateway's pooled
		// one is stale, and the next call must go out on a new one.
		e.up.CloseClientConnections()
	}
	if n := e.conns.Load(); n != 4 {
		t.Fatalf("%d upstream connections, want 4", n)
	}
	if n := e.requests.Load(); n != 4 {
		t.Fatalf("the upstream served %d requests for 4 calls", n)
	}
}

func TestPooledUpstreamBrokenAnswers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer string // written raw before the upstream closes the connection
		stream bool
		status int
		want   string
	}{
		{"closed mid-body", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"id\":", false, http.StatusBadGateway, "unreachable"},
		{"closed before the headers end", "HTTP/1.1 200 OK\r\nContent-Ty", false, http.StatusBadGateway, "unreachable"},
		{"closed without an answer", "", false, http.StatusBadGateway, "unreachable"},
		{"malformed status line", "HTTP/1.1 OK\r\n\r\n", false, http.StatusBadGateway, "unreachable"},
		{"stream closed mid-chunk", "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" +
			"5\r\ndata:", true, http.StatusOK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var broken atomic.Bool
			broken.Store(true)
			e := newPooledEnv(t, func(w http.ResponseWriter, r *http.Request) {
				if !broken.Load() {
					answerChat(w, r)
					return
				}
				_, _ = io.ReadAll(r.Body)
				c, bw, err := http.NewResponseController(w).Hijack()
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = bw.WriteString(tc.answer)
				_ = bw.Flush()
				_ = c.Close()
			}, nil)
			resp, b, _ := e.chat(context.Background(), "hi", tc.stream)
			if resp == nil || resp.StatusCode != tc.status || !strings.Contains(string(b), tc.want) {
				t.Fatalf("got %v: %s; want status %d with %q", resp, b, tc.status, tc.want)
			}
			if n := e.requests.Load(); n != 1 {
				t.Fatalf("the upstream saw %d requests, want 1 (no retry after an answer began)", n)
			}
			// The broken connection is not reused.
			broken.Store(false)
			resp, b, err := e.chat(context.Background(), "hi", false)
			if err != nil || resp.StatusCode != http.StatusOK || string(b) != chatAnswer {
				t.Fatalf("next call: %v %v: %s", resp, err, b)
			}
			if n := e.conns.Load(); n != 2 {
				t.Fatalf("%d upstream connections, want 2", n)
			}
		})
	}
}

func TestPooledUpstreamErrorPassesThrough(t *testing.T) {
	e := newPooledEnv(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		w.Header().Set("Retry-After", "7")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"error":{"message":"slow down","type":"rate_limit"}}`)
	}, nil)
	for _, stream := range []bool{false, true} {
		resp, b, err := e.chat(context.Background(), "hi", stream)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "7" || string(b) != `{"error":{"message":"slow down","type":"rate_limit"}}` {
			t.Fatalf("stream %v: status %d %v: %s", stream, resp.StatusCode, resp.Header, b)
		}
	}
	if n := e.conns.Load(); n != 1 {
		t.Fatalf("%d upstream connections, want 1", n)
	}
}

func TestPooledUpstreamTimeout(t *testing.T) {
	cancelled := make(chan struct{}, 1)
	var e *pooledEnv
	e = newPooledEnv(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		e.cancelled(r, cancelled)
	}, func(o *gateway.Options) { o.Upstreams[0].Timeout = 300 * time.Millisecond })
	resp, b, err := e.chat(context.Background(), "hi", false)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(string(b), "upstream openai timed out") {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	wait(t, cancelled, "the upstream request was cancelled")
}

// TestPooledUpstreamClientGone: a client that goes away cancels the
// upstream request (its connection is closed), with or without rules.
func TestPooledUpstreamClientGone(t *testing.T) {
	for _, stream := range []bool{false, true} {
		arrived, cancelled := make(chan struct{}, 1), make(chan struct{}, 1)
		var e *pooledEnv
		e = newPooledEnv(t, func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.ReadAll(r.Body)
			if stream {
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				w.(http.Flusher).Flush()
			}
			arrived <- struct{}{}
			e.cancelled(r, cancelled)
		}, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, _, err := e.chat(ctx, "hi", stream)
			done <- err
		}()
		wait(t, arrived, "the request reached the upstream")
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("stream %v: client error %v", stream, err)
		}
		wait(t, cancelled, "the upstream request was cancelled")
	}
}

func TestPooledInputBlockClosesConnection(t *testing.T) {
	cancelled := make(chan struct{}, 1)
	var e *pooledEnv
	e = newPooledEnv(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(b), "FORBIDDEN") {
			answerChat(w, r)
			return
		}
		// Never answers: only the gateway closing the connection ends it.
		e.cancelled(r, cancelled)
	}, nil)
	resp, b, err := e.chat(context.Background(), "say FORBIDDEN", false)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "forbidden word") || resp.Header.Get("Vigil-Guardrail-Result") != "block" {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	wait(t, cancelled, "the blocked request's upstream connection was closed")
	resp, b, err = e.chat(context.Background(), "hi", false)
	if err != nil || resp.StatusCode != http.StatusOK || string(b) != chatAnswer {
		t.Fatalf("next call: %v %v: %s", resp, err, b)
	}
	if n := e.conns.Load(); n != 2 {
		t.Fatalf("%d upstream connections, want 2 (the blocked call's is not reused)", n)
	}
}

// countingTransport counts the requests of a custom Options.Transport.
type countingTransport struct{ n atomic.Int32 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// TestCustomTransportNotPooled: with Options.Transport set, calls to an
// http:// upstream go through it.
func TestCustomTransportNotPooled(t *testing.T) {
	tr := &countingTransport{}
	e := newPooledEnv(t, answerChat, func(o *gateway.Options) { o.Transport = tr })
	for _, text := range []string{"hi", "FORBIDDEN"} {
		resp, b, err := e.chat(context.Background(), text, false)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]int{"hi": 200, "FORBIDDEN": 400}[text]; resp.StatusCode != want {
			t.Fatalf("%s: status %d: %s", text, resp.StatusCode, b)
		}
	}
	if n := tr.n.Load(); n != 2 {
		t.Fatalf("the custom transport saw %d requests, want 2", n)
	}
}
