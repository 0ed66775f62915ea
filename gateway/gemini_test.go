package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/genai"

	"github.com/vigilhq/vigil/gateway/providertest"
)

func (e *env) gemini(t *testing.T, dataset string, hdr map[string]string) *genai.Client {
	path := "/gemini/"
	if dataset != "" {
		path = "/" + dataset + "/gemini/"
	}
	h := http.Header{"Invariant-Authorization": {"Bearer " + adminKey}}
	for k, v := range hdr {
		h.Set(k, v)
	}
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{APIKey: "gm-test", Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: e.base + path, Headers: h}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestGeminiGenerateContent(t *testing.T) {
	e := newEnv(t)
	c := e.gemini(t, "ds", map[string]string{"Invariant-Guardrails": headerRule(secretRule)})
	ctx := context.Background()
	resp, err := c.Models.GenerateContent(ctx, "gemini-test", genai.Text("hello"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text() != "Hello from the mock." {
		t.Fatalf("text %q", resp.Text())
	}
	if got := e.mock.Last().Header.Get("X-Goog-Api-Key"); got != "gm-test" {
		t.Errorf("upstream key %q", got)
	}
	var got strings.Builder
	n := 0
	for r, err := range c.Models.GenerateContentStream(ctx, "gemini-test", genai.Text("stream"), nil) {
		if err != nil {
			t.Fatal(err)
		}
		got.WriteString(r.Text())
		n++
	}
	if got.String() != "Hello from the mock." || n < 2 {
		t.Fatalf("streamed %q in %d", got.String(), n)
	}
	trs := e.traces("ds")
	want := []map[string]any{{"role": "user", "content": "stream"}, {"role": "assistant", "content": "Hello from the mock."}}
	if got := eventsJSON(t, trs[1]); !jsonEq(got, want) {
		t.Errorf("recorded %v", got)
	}
}

func TestGeminiToolCall(t *testing.T) {
	e := newEnv(t)
	e.mock.SetScript(func(*providertest.Request) providertest.Reply {
		return providertest.Reply{ToolCalls: []providertest.ToolCall{{Name: "run_shell", Arguments: `{"cmd":"echo SECRET-KEY-12345"}`}}}
	})
	c := e.gemini(t, "ds", map[string]string{"Invariant-Guardrails": headerRule(toolRule)})
	var calls int
	var lastErr error
	for r, err := range c.Models.GenerateContentStream(context.Background(), "gemini-test", genai.Text("run"), nil) {
		if err != nil {
			lastErr = err
			break
		}
		calls += len(r.FunctionCalls())
	}
	if calls != 0 {
		t.Fatal("a blocked function call reached the client")
	}
	if lastErr == nil && calls == 0 {
		// The refusal object ends the stream: the SDK reports it as an
		// error or as a SAFETY candidate.
	}
	trs := e.traces("ds")
	vig, _ := trs[0].ExtraMetadata["vigil"].(map[string]any)
	if bc, _ := vig["blocked_calls"].([]any); len(bc) != 1 {
		t.Fatalf("not recorded as blocked: %v", vig)
	}
}

func TestGeminiBlockedAndErrors(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.gemini(t, "ds", map[string]string{"Invariant-Guardrails": headerRule(inputRule)})
	_, err := c.Models.GenerateContent(ctx, "gemini-test", genai.Text("a forbidden one"), nil)
	if err == nil || !strings.Contains(err.Error(), "did not pass the guardrails") {
		t.Fatalf("err %v", err)
	}
	// Secret split across SSE elements.
	e.mock.ChunkDelay = time.Millisecond
	prefix := strings.Repeat("0123456789", 40)
	e.mock.SetScript(func(*providertest.Request) providertest.Reply {
		return providertest.Reply{Text: prefix + "SECRET-KEY-12345 tail", Chunks: append(chunked(prefix, 10), "SECRET-K", "EY-12345 tail")}
	})
	c = e.gemini(t, "ds", map[string]string{"Invariant-Guardrails": headerRule(secretRule)})
	var got strings.Builder
	for r, err := range c.Models.GenerateContentStream(ctx, "gemini-test", genai.Text("leak"), nil) {
		if err != nil {
			break
		}
		if len(r.Candidates) > 0 && r.Candidates[0].FinishReason == genai.FinishReasonSafety {
			break
		}
		got.WriteString(r.Text())
	}
	if s := got.String(); strings.Contains(s, "SECRET") || !strings.HasPrefix(prefix, s) {
		t.Fatalf("client received %q", s)
	}
	// Upstream error passed through.
	e.mock.SetScript(func(*providertest.Request) providertest.Reply {
		return providertest.Reply{Status: 429, Body: `{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED"}}`}
	})
	_, err = c.Models.GenerateContent(ctx, "gemini-test", genai.Text("hi"), nil)
	var ae genai.APIError
	if !asAPIError(err, &ae) || ae.Code != 429 || ae.Status != "RESOURCE_EXHAUSTED" {
		t.Fatalf("err %v", err)
	}
}

func asAPIError(err error, out *genai.APIError) bool {
	switch x := err.(type) {
	case genai.APIError:
		*out = x
		return true
	case *genai.APIError:
		*out = *x
		return true
	}
	return false
}
