package gateway_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
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
	src, err := os.ReadFile("../bench/gateway/rules.gr")
	if err != nil {
		b.Fatal(err)
	}
	p, err := policy.Load(string(src), policy.Options{})
	if err != nil {
		b.Fatal(err)
	}
	text := strings.Repeat("lorem ipsum dolor sit amet, ", 18)
	m := &providertest.Mock{Script: func(*providertest.Request) providertest.Reply { return providertest.Reply{Text: text} }}
	up := httptest.NewServer(m)
	defer up.Close()
	body := []byte(`{"model":"m","messages":[{"role":"system","content":"You are brief."},{"role":"user","content":"` + strings.Repeat("Please summarise this. ", 38) + `"}]}`)
	for _, tc := range []struct {
		name  string
		rules []*gateway.Guardrail
	}{{"G0", nil}, {"G1", []*gateway.Guardrail{{ID: "std", Name: "standard", Content: string(src), Action: "block", Policy: p}}}} {
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
