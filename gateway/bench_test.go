package gateway_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/gateway/providertest"
	"github.com/vigilhq/vigil/policy"
)

// BenchmarkChat is one non-streaming chat completion through the gateway
// in process (the request handled by ServeHTTP, the upstream a mock on
// loopback), with the benchmark's standard rule set as global rules and
// no recording (G1): its allocs/op is the allocations per request the
// benchmark spec asks for. Without rules it is G0.
func BenchmarkChat(b *testing.B) {
	std := standardRules(b)
	text := strings.Repeat("lorem ipsum dolor sit amet, ", 18)
	m := &providertest.Mock{Script: func(*providertest.Request) providertest.Reply { return providertest.Reply{Text: text} }}
	up := httptest.NewServer(m)
	defer up.Close()
	body := []byte(`{"model":"m","messages":[{"role":"system","content":"You are brief."},{"role":"user","content":"` + strings.Repeat("Please summarise this. ", 38) + `"}]}`)
	for _, tc := range []struct {
		name  string
		rules []*gateway.Guardrail
	}{{"G0", nil}, {"G1", std}} {
		b.Run(tc.name, func(b *testing.B) {
			gw, err := gateway.New(gateway.Options{Global: tc.rules, Upstreams: []gateway.Upstream{{Name: "openai", BaseURL: up.URL + "/v1"}}})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest("POST", "/api/v1/gateway/openai/chat/completions", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer sk")
				w := httptest.NewRecorder()
				gw.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
			}
		})
	}
}

// BenchmarkChatRecorded is a non-streaming chat completion recorded into
// an embedded SQLite store (G2's path in process), each call its own
// session, with the session index in memory or persisted to a file: the
// difference is what the journal costs per call on the response path.
// Run it with a small -benchtime (say 300x): the store writes behind it.
func BenchmarkChatRecorded(b *testing.B) {
	for _, persist := range []bool{false, true} {
		name := "memory"
		if persist {
			name = "journal"
		}
		b.Run(name, func(b *testing.B) {
			e := newEnv(b, func(o *gateway.Options) {
				if persist {
					o.SessionFile = b.TempDir() + "/sessions.jsonl"
				}
			})
			body := []byte(`{"model":"m","messages":[{"role":"user","content":"hello"}]}`)
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest("POST", "/api/v1/gateway/ds/openai/chat/completions", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer sk")
				req.Header.Set("Invariant-Authorization", "Bearer "+adminKey)
				w := httptest.NewRecorder()
				e.gw.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
			}
			b.StopTimer()
			e.rec.Flush()
		})
	}
}

// BenchmarkChatRecordedLoops is G3's path in process: 8 agent loops
// (header sessions) whose calls alternate, each call appending its new
// user message and its answer to the loop's trace; a loop restarts after
// 10 calls. The store writes behind the calls and are flushed at the end,
// so ns/op includes the writes.
func BenchmarkChatRecordedLoops(b *testing.B) {
	e := newEnv(b)
	const loops, steps = 8, 10
	hist := make([]string, loops)
	n := make([]int, loops)
	gen := 0
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		l := i % loops
		i++
		if n[l] == steps || hist[l] == "" {
			gen++
			hist[l], n[l] = `{"role":"user","content":"task `+strconv.Itoa(gen)+`"}`, 0
		}
		req := httptest.NewRequest("POST", "/api/v1/gateway/ds/openai/chat/completions", strings.NewReader(`{"model":"m","messages":[`+hist[l]+`]}`))
		req.Header.Set("Authorization", "Bearer sk")
		req.Header.Set("Invariant-Authorization", "Bearer "+adminKey)
		req.Header.Set("Invariant-Session", "loop-"+strconv.Itoa(l)+"-"+strconv.Itoa(gen))
		w := httptest.NewRecorder()
		e.gw.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("%d %s", w.Code, w.Body)
		}
		hist[l] += `,{"role":"assistant","content":"Hello from the mock."},{"role":"user","content":"next ` + strconv.Itoa(n[l]) + `"}`
		n[l]++
	}
	e.gw.Idle()
	e.rec.Flush()
	w, _, _ := e.rec.Stats()
	b.ReportMetric(float64(w)/float64(i), "written/call")
}

// standardRules is the benchmark's standard rule set
// (bench/gateway/rules.gr) as one global blocking guardrail.
func standardRules(b *testing.B) []*gateway.Guardrail {
	b.Helper()
	src, err := os.ReadFile("../bench/gateway/rules.gr")
	if err != nil {
		b.Fatal(err)
	}
	p, err := policy.Load(string(src), policy.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return []*gateway.Guardrail{{ID: "std", Name: "standard", Content: string(src), Action: "block", Policy: p}}
}
