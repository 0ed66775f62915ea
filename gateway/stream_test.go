package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/gateway/providertest"
)

// gatedUpstream is an OpenAI chat upstream that streams the frames of
// before, then waits until gate is closed (or the request is cancelled)
// before streaming the frames of after.
type gatedUpstream struct {
	before, after []string
	gate          chan struct{}
	cancelled     chan struct{} // closed when the request was cancelled at the gate
}

func newGatedUpstream(t *testing.T, before, after []string) (*gatedUpstream, *httptest.Server) {
	u := &gatedUpstream{before: before, after: after, gate: make(chan struct{}), cancelled: make(chan struct{})}
	srv := httptest.NewServer(u)
	t.Cleanup(srv.Close)
	return u, srv
}

func (u *gatedUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for _, f := range u.before {
		io.WriteString(w, f)
		rc.Flush()
	}
	select {
	case <-u.gate:
	case <-r.Context().Done():
		close(u.cancelled)
		return
	}
	for _, f := range u.after {
		io.WriteString(w, f)
		rc.Flush()
	}
}

// chatChunk is one chat.completion.chunk frame.
func chatChunk(delta, finish string) string {
	if finish == "" {
		finish = "null"
	} else {
		finish = `"` + finish + `"`
	}
	return `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":` +
		delta + `,"finish_reason":` + finish + `}]}` + "\n\n"
}

// openStream sends a streaming chat request to the gateway and returns
// the response, whose body the caller reads and closes.
func openStream(t *testing.T, ctx context.Context, e *env, path string, hdr map[string]string) *http.Response {
	t.Helper()
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"go"}]}`
	req, _ := http.NewRequestWithContext(ctx, "POST", e.base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk")
	req.Header.Set("Invariant-Authorization", "Bearer "+adminKey)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	return resp
}

// dataLines reads SSE data lines until n have arrived.
func dataLines(t *testing.T, rd *bufio.Reader, n int) []string {
	t.Helper()
	var out []string
	for len(out) < n {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d data lines %q: %v", len(out), out, err)
		}
		if strings.HasPrefix(line, "data:") {
			out = append(out, strings.TrimSpace(strings.TrimPrefix(line, "data:")))
		}
	}
	return out
}

// streamModes are the stream configurations whose releasable events go
// to the client as they arrive: open (no blocking rules) and
// passthrough (blocking rules checked at the end); and incremental,
// whose neutral events (the role chunk) do.
var streamModes = []struct {
	name  string
	mode  string
	rules bool
}{
	{"open", "", false},
	{"passthrough", "passthrough", true},
	{"incremental", "incremental", true},
}

// TestStreamEventsBeforeUpstreamContinues: the upstream's first events
// reach the client while the upstream still waits to send the next one
// (the client reads them before it lets the upstream go on).
func TestStreamEventsBeforeUpstreamContinues(t *testing.T) {
	role := chatChunk(`{"role":"assistant","content":""}`, "")
	hello := chatChunk(`{"content":"Hello"}`, "")
	after := []string{chatChunk(`{"content":" world"}`, ""), chatChunk(`{}`, "stop"), "data: [DONE]\n\n"}
	for _, tc := range streamModes {
		t.Run(tc.name, func(t *testing.T) {
			up, srv := newGatedUpstream(t, []string{role, hello}, after)
			e := newEnv(t, func(o *gateway.Options) {
				o.Upstreams[0].BaseURL = srv.URL + "/v1"
				o.Stream.Mode = tc.mode
			})
			hdr := map[string]string{}
			if tc.rules {
				hdr["Invariant-Guardrails"] = headerRule(secretRule)
			}
			// The deadline only ends a test that would otherwise hang.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			resp := openStream(t, ctx, e, "/openai/chat/completions", hdr)
			for _, h := range []string{"Vigil-Request-Id", "Vigil-Overhead-Ms", "Vigil-Guardrail-Result"} {
				if resp.Header.Get(h) == "" {
					t.Errorf("no %s header", h)
				}
			}
			rd := bufio.NewReader(resp.Body)
			want := 2 // the role chunk and the text
			if tc.mode == "incremental" {
				want = 1 // the text is held back (H characters)
			}
			got := dataLines(t, rd, want)
			if !strings.Contains(got[0], `"role":"assistant"`) || (want == 2 && !strings.Contains(got[1], `"Hello"`)) {
				t.Fatalf("before the upstream went on: %q", got)
			}
			close(up.gate)
			rest, err := io.ReadAll(rd)
			if err != nil {
				t.Fatal(err)
			}
			all := strings.Join(got, "\n") + string(rest)
			for _, s := range []string{`"Hello"`, `" world"`, `"stop"`, "[DONE]"} {
				if !strings.Contains(all, s) {
					t.Errorf("stream lacks %s:\n%s", s, all)
				}
			}
			if strings.Index(all, "[DONE]") < strings.Index(all, `"stop"`) {
				t.Errorf("events out of order:\n%s", all)
			}
			if r := resp.Trailer.Get("Vigil-Guardrail-Result"); r != map[bool]string{false: "none", true: "pass"}[tc.rules] {
				t.Errorf("trailer Vigil-Guardrail-Result %q", r)
			}
		})
	}
}

// TestStreamClientDisconnects: a client that goes away mid-stream
// cancels the upstream call, and the partial response is recorded.
func TestStreamClientDisconnects(t *testing.T) {
	for _, tc := range streamModes[:2] {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(o *gateway.Options) { o.Stream.Mode = tc.mode })
			e.mock.Script = func(*providertest.Request) providertest.Reply {
				return providertest.Reply{Text: "part one, part two, never finished", Chunks: []string{"part one, ", "part two, ", "never finished"}, HangAfter: 2}
			}
			hdr := map[string]string{}
			if tc.rules {
				hdr["Invariant-Guardrails"] = headerRule(secretRule)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			resp := openStream(t, ctx, e, "/ds/openai/chat/completions", hdr)
			got := dataLines(t, bufio.NewReader(resp.Body), 3) // role, "part one, ", "part two, "
			if !strings.Contains(got[2], "part two") {
				t.Fatalf("got %q", got)
			}
			cancel()
			resp.Body.Close()
			trs := waitTraces(t, e, "ds")
			if e.mock.Cancelled() == 0 {
				t.Fatal("upstream request not cancelled")
			}
			vig, _ := trs[0].ExtraMetadata["vigil"].(map[string]any)
			calls, _ := vig["calls"].([]any)
			if len(calls) != 1 || calls[0].(map[string]any)["client_disconnected"] != true {
				t.Fatalf("call record %v", calls)
			}
			evs := eventsJSON(t, trs[0])
			if len(evs) != 2 || evs[1]["content"] != "part one, part two, " {
				t.Errorf("partial response not recorded: %v", evs)
			}
		})
	}
}

// waitTraces waits until the dataset has a trace (a disconnected call is
// recorded once the gateway notices), then returns its traces.
func waitTraces(t *testing.T, e *env, dataset string) []*clientTrace {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		trs := e.tracesMaybe(dataset)
		if len(trs) > 0 {
			return trs
		}
		if time.Now().After(deadline) {
			t.Fatal("no trace recorded")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStreamIdleTimeout: an upstream that stops sending mid-stream is
// cancelled after StreamIdleTimeout and the client gets the provider's
// timeout event after what was released.
func TestStreamIdleTimeout(t *testing.T) {
	for _, tc := range streamModes[:2] {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(o *gateway.Options) {
				o.Stream.Mode = tc.mode
				o.Upstreams[0].StreamIdleTimeout = 200 * time.Millisecond
			})
			e.mock.Script = func(*providertest.Request) providertest.Reply {
				return providertest.Reply{Text: "first, then silence", Chunks: []string{"first, ", "then silence"}, HangAfter: 1}
			}
			hdr := map[string]string{}
			if tc.rules {
				hdr["Invariant-Guardrails"] = headerRule(secretRule)
			}
			// The deadline only ends a test that would otherwise hang.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			resp := openStream(t, ctx, e, "/openai/chat/completions", hdr)
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			s := string(b)
			i, j := strings.Index(s, `"first, "`), strings.Index(s, "timed out")
			if i < 0 || j < i {
				t.Fatalf("want the text, then the timeout event:\n%s", s)
			}
			if strings.Contains(s, "silence") {
				t.Errorf("text after the hang:\n%s", s)
			}
			// The mock notices the closed connection after the client
			// got the event.
			for deadline := time.Now().Add(10 * time.Second); e.mock.Cancelled() == 0 && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
			if e.mock.Cancelled() == 0 {
				t.Error("upstream request not cancelled")
			}
		})
	}
}

// TestStreamPassthroughBlockAfterDelivery: in passthrough mode text flows
// as it arrives and a violation found by the final check is appended
// after the delivered content (spec §6.4).
func TestStreamPassthroughBlockAfterDelivery(t *testing.T) {
	e := newEnv(t, func(o *gateway.Options) { o.Stream.Mode = "passthrough" })
	e.mock.Script = func(*providertest.Request) providertest.Reply {
		return providertest.Reply{Text: "the key is SECRET-KEY-12345, done", Chunks: []string{"the key is ", "SECRET-KEY-12345", ", done"}}
	}
	resp := openStream(t, context.Background(), e, "/openai/chat/completions", map[string]string{"Invariant-Guardrails": headerRule(secretRule)})
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for i, want := range []string{`"SECRET-KEY-12345"`, `", done"`, "did not pass the guardrails"} {
		if !strings.Contains(s, want) {
			t.Fatalf("%d: stream lacks %s:\n%s", i, want, s)
		}
	}
	if strings.Index(s, "did not pass") < strings.Index(s, `", done"`) {
		t.Errorf("the violation comes before the delivered text:\n%s", s)
	}
	if strings.Contains(s, `"stop"`) || strings.Contains(s, "[DONE]") {
		t.Errorf("final events released after a block:\n%s", s)
	}
	if r := resp.Trailer.Get("Vigil-Guardrail-Result"); r != "block" {
		t.Errorf("trailer Vigil-Guardrail-Result %q", r)
	}
}

// TestStreamManyFrames: a stream of many frames arrives whole and in
// order in every mode (the handler reads them itself until an event is
// held, then a reader goroutine does).
func TestStreamManyFrames(t *testing.T) {
	var chunks []string
	var text strings.Builder
	for i := 0; i < 300; i++ {
		c := fmt.Sprintf("w%03d ", i)
		chunks = append(chunks, c)
		text.WriteString(c)
	}
	for _, mode := range []string{"open", "passthrough", "incremental", "buffer"} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t, func(o *gateway.Options) {
				if mode != "open" {
					o.Stream.Mode = mode
				}
			})
			e.mock.Script = func(*providertest.Request) providertest.Reply {
				return providertest.Reply{Text: text.String(), Chunks: chunks}
			}
			hdr := map[string]string{}
			if mode != "open" {
				hdr["Invariant-Guardrails"] = headerRule(secretRule)
			}
			resp := openStream(t, context.Background(), e, "/openai/chat/completions", hdr)
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			var got strings.Builder
			for _, line := range strings.Split(string(b), "\n") {
				if _, rest, ok := strings.Cut(line, `"content":"`); ok {
					c, _, _ := strings.Cut(rest, `"`)
					got.WriteString(c)
				}
			}
			if got.String() != text.String() {
				t.Fatalf("text %q", got.String())
			}
			if !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
				t.Errorf("stream end %q", b[max(0, len(b)-80):])
			}
		})
	}
}

// BenchmarkStream is one streamed chat completion through the gateway in
// process (the upstream a mock on loopback sending 64 chunks of 8
// characters without pauses), with the benchmark's standard rule set as
// global rules: S3 in passthrough mode, S1 in incremental mode, and
// without rules (open). Run with -cpu 1 to see the per-event hand-offs
// between goroutines that GOMAXPROCS=1 pays for.
func BenchmarkStream(b *testing.B) {
	std := standardRules(b)
	text := strings.Repeat("lorem ipsum dolor sit amet, ", 19)[:512]
	m := &providertest.Mock{ChunkChars: 8, Script: func(*providertest.Request) providertest.Reply { return providertest.Reply{Text: text} }}
	up := httptest.NewServer(m)
	defer up.Close()
	body := []byte(`{"model":"m","stream":true,"messages":[{"role":"system","content":"You are brief."},{"role":"user","content":"` +
		strings.Repeat("Please summarise this. ", 38) + `"}]}`)
	for _, tc := range []struct {
		name, mode string
		rules      []*gateway.Guardrail
	}{{"open", "", nil}, {"S3", "passthrough", std}, {"S1", "incremental", std}} {
		b.Run(tc.name, func(b *testing.B) {
			gw, err := gateway.New(gateway.Options{Global: tc.rules, Stream: gateway.StreamOptions{Mode: tc.mode},
				Upstreams: []gateway.Upstream{{Name: "openai", BaseURL: up.URL + "/v1"}}})
			if err != nil {
				b.Fatal(err)
			}
			defer gw.Close()
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest("POST", "/api/v1/gateway/openai/chat/completions", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer sk")
				w := httptest.NewRecorder()
				gw.ServeHTTP(w, req)
				if w.Code != http.StatusOK || !bytes.HasSuffix(w.Body.Bytes(), []byte("data: [DONE]\n\n")) {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
			}
		})
	}
}
