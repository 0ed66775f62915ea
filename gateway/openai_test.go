package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/gateway/providertest"
)

// Rules the tests use.
const (
	secretRule = `raise "secret leaked" if:
    (msg: Message)
    msg.role == "assistant"
    "SECRET-KEY-12345" in msg.content
`
	inputRule = `raise "forbidden question" if:
    (msg: Message)
    msg.role == "user"
    "forbidden" in msg.content
`
	toolRule = `raise "dangerous command" if:
    (call: ToolCall)
    call is tool:run_shell
    "SECRET-KEY-12345" in call.function.arguments.cmd
`
)

// headerRule escapes a rule for the Invariant-Guardrails header.
func headerRule(s string) string { return strings.ReplaceAll(s, "\n", `\n`) }

func (e *env) openai(dataset string, opts ...option.RequestOption) openai.Client {
	path := "/openai/"
	if dataset != "" {
		path = "/" + dataset + "/openai/"
	}
	base := []option.RequestOption{option.WithBaseURL(e.base + path), option.WithAPIKey("sk-test"), option.WithMaxRetries(0),
		option.WithHeader("Invariant-Authorization", "Bearer "+adminKey)}
	return openai.NewClient(append(base, opts...)...)
}

func chatParams(msgs ...openai.ChatCompletionMessageParamUnion) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: msgs}
}

func TestOpenAIChatRecorded(t *testing.T) {
	e := newEnv(t)
	c := e.openai("ds")
	ctx := context.Background()
	var hr *http.Response
	resp, err := c.Chat.Completions.New(ctx, chatParams(openai.SystemMessage("You are terse."), openai.UserMessage("Hi there")), option.WithResponseInto(&hr))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != "Hello from the mock." {
		t.Fatalf("content %q", got)
	}
	for _, h := range []string{"Vigil-Request-Id", "Vigil-Overhead-Ms", "Vigil-Upstream-Ms", "Vigil-Guardrails-Ms", "Vigil-Trace-Id", "Vigil-Ruleset"} {
		if hr.Header.Get(h) == "" {
			t.Errorf("response header %s missing", h)
		}
	}
	if got := hr.Header.Get("Vigil-Guardrail-Result"); got != "none" {
		t.Errorf("Vigil-Guardrail-Result %q, want none", got)
	}
	// The upstream saw the client's body byte for byte and the provider
	// key, never the Vigil key.
	last := e.mock.Last()
	if last.Header.Get("Authorization") != "Bearer sk-test" || last.Header.Get("Invariant-Authorization") != "" {
		t.Errorf("upstream headers: %v", last.Header)
	}
	trs := e.traces("ds")
	if len(trs) != 1 {
		t.Fatalf("%d traces, want 1", len(trs))
	}
	want := []map[string]any{
		{"role": "system", "content": "You are terse."},
		{"role": "user", "content": "Hi there"},
		{"role": "assistant", "content": "Hello from the mock."},
	}
	if got := eventsJSON(t, trs[0]); !jsonEq(got, want) {
		t.Errorf("recorded events\n got %v\nwant %v", got, want)
	}
	if trs[0].ID != hr.Header.Get("Vigil-Trace-Id") {
		t.Errorf("trace id %s, header %s", trs[0].ID, hr.Header.Get("Vigil-Trace-Id"))
	}
	md := trs[0].ExtraMetadata
	if md["via_gateway"] != true || md["provider"] != "openai" || md["model"] != "mock-model" {
		t.Errorf("metadata %v", md)
	}
}

func TestOpenAIChatStreamRecorded(t *testing.T) {
	e := newEnv(t)
	e.mock.SetScript(func(*providertest.Request) providertest.Reply {
		return providertest.Reply{Text: "Streaming works fine, one chunk at a time."}
	})
	c := e.openai("ds", option.WithHeader("Invariant-Guardrails", headerRule(secretRule)))
	st := c.Chat.Completions.NewStreaming(context.Background(), chatParams(openai.UserMessage("stream please")))
	var got strings.Builder
	n := 0
	for st.Next() {
		ch := st.Current()
		if len(ch.Choices) > 0 {
			got.WriteString(ch.Choices[0].Delta.Content)
			n++
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if got.String() != "Streaming works fine, one chunk at a time." {
		t.Fatalf("streamed %q", got.String())
	}
	if n < 5 {
		t.Errorf("%d chunks: chunk boundaries were not kept", n)
	}
	trs := e.traces("ds")
	want := []map[string]any{{"role": "user", "content": "stream please"}, {"role": "assistant", "content": "Streaming works fine, one chunk at a time."}}
	if got := eventsJSON(t, trs[0]); !jsonEq(got, want) {
		t.Errorf("recorded %v", got)
	}
}

func TestOpenAIToolCalls(t *testing.T) {
	e := newEnv(t)
	e.mock.SetScript(func(*providertest.Request) providertest.Reply {
		return providertest.Reply{ToolCalls: []providertest.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}},
			ArgChunks: [][]string{{`{"ci`, `ty":"Pa`, `ris"}`}}}
	})
	c := e.openai("ds", option.WithHeader("Invariant-Guardrails", headerRule(toolRule)))
	ctx := context.Background()
	resp, err := c.Chat.Completions.New(ctx, chatParams(openai.UserMessage("weather?")))
	if err != nil {
		t.Fatal(err)
	}
	if tc := resp.Choices[0].Message.ToolCalls; len(tc) != 1 || tc[0].Function.Name != "get_weather" {
		t.Fatalf("tool calls %+v", tc)
	}
	st := c.Chat.Completions.NewStreaming(ctx, chatParams(openai.UserMessage("weather again?")))
	acc := openai.ChatCompletionAccumulator{}
	for st.Next() {
		acc.AddChunk(st.Current())
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if tc := acc.Choices[0].Message.ToolCalls; len(tc) != 1 || tc[0].Function.Arguments != `{"city":"Paris"}` {
		t.Fatalf("streamed tool calls %+v", tc)
	}
	trs := e.traces("ds")
	if len(trs) != 2 {
		t.Fatalf("%d traces", len(trs))
	}
	evs := eventsJSON(t, trs[1])
	calls, _ := evs[1]["tool_calls"].([]any)
	if len(calls) != 1 {
		t.Fatalf("recorded %v", evs)
	}
}

// nativeErrors makes OpenAI guardrail errors OpenAI's own error object,
// which the openai-go SDK decodes into *openai.Error (the default,
// Invariant's {"error": "<msg>"}, is tested with raw requests).
func nativeErrors(o *gateway.Options) { o.OpenAIErrorNative = true }

func TestOpenAIBlockedInputInvariantFormat(t *testing.T) {
	e := newEnv(t)
	resp, b := e.post("/ds/openai/chat/completions", `{"model":"m","messages":[{"role":"user","content":"a forbidden question"}]}`,
		map[string]string{"Authorization": "Bearer sk", "Invariant-Authorization": "Bearer " + adminKey, "Invariant-Guardrails": headerRule(inputRule)})
	if resp.StatusCode != 400 || !strings.HasPrefix(string(b), `{"details":{"errors":[{`) || !strings.Contains(string(b), `"error":"[Invariant] The request did not pass the guardrails"`) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if resp.Header.Get("Vigil-Guardrail-Result") != "block" {
		t.Errorf("result %q", resp.Header.Get("Vigil-Guardrail-Result"))
	}
}

func TestOpenAIBlockedInput(t *testing.T) {
	e := newEnv(t, nativeErrors)
	c := e.openai("ds", option.WithHeader("Invariant-Guardrails", headerRule(inputRule)))
	ctx := context.Background()
	_, err := c.Chat.Completions.New(ctx, chatParams(openai.UserMessage("a forbidden question")))
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != 400 || !strings.Contains(ae.RawJSON(), "[Invariant] The request did not pass the guardrails") {
		t.Fatalf("err %v", err)
	}
	if !strings.Contains(ae.RawJSON(), "forbidden question") {
		t.Errorf("details lack the violation: %s", ae.RawJSON())
	}
	// Streaming: an in-stream error the SDK surfaces.
	st := c.Chat.Completions.NewStreaming(ctx, chatParams(openai.UserMessage("another forbidden one")))
	for st.Next() {
		if len(st.Current().Choices) > 0 && st.Current().Choices[0].Delta.Content != "" {
			t.Fatal("content delivered despite a blocked input")
		}
	}
	if st.Err() == nil || !strings.Contains(st.Err().Error(), "did not pass the guardrails") {
		t.Fatalf("stream err %v", st.Err())
	}
	trs := e.traces("ds")
	if len(trs) != 2 {
		t.Fatalf("%d traces, want the 2 blocked calls recorded", len(trs))
	}
	evs := eventsJSON(t, trs[0])
	if evs[0]["vigil_blocked"] != true {
		t.Errorf("blocked input not marked: %v", evs)
	}
	vig, _ := trs[0].ExtraMetadata["vigil"].(map[string]any)
	if bc, _ := vig["blocked_calls"].([]any); len(bc) != 1 {
		t.Errorf("vigil.blocked_calls %v", vig["blocked_calls"])
	}
	tr, err := e.api.GetTrace(ctx, trs[0].ID, true)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, a := range tr.Annotations {
		if strings.Contains(a.Content, "forbidden question") {
			found = true
		}
	}
	if !found {
		t.Errorf("no annotation for the violation: %+v", tr.Annotations)
	}
}

func TestOpenAIBlockedOutput(t *testing.T) {
	e := newEnv(t, nativeErrors)
	e.addGuardrail("ds", "no secrets", secretRule, "block", nil)
	e.mock.SetScript(func(*providertest.Request) providertest.Reply {
		return providertest.Reply{Text: "the key is SECRET-KEY-12345"}
	})
	c := e.openai("ds")
	var hr *http.Response
	_, err := c.Chat.Completions.New(context.Background(), chatParams(openai.UserMessage("tell me")), option.WithResponseInto(&hr))
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != 400 || !strings.Contains(ae.RawJSON(), "The response did not pass") {
		t.Fatalf("err %v", err)
	}
	if strings.Contains(ae.RawJSON(), "SECRET-KEY-12345\"") && !strings.Contains(ae.RawJSON(), "content") {
		t.Errorf("secret in error body")
	}
	if hr.Header.Get("Vigil-Guardrail-Result") != "block" {
		t.Errorf("result header %q", hr.Header.Get("Vigil-Guardrail-Result"))
	}
	trs := e.traces("ds")
	evs := eventsJSON(t, trs[0])
	if len(evs) != 2 || evs[1]["vigil_blocked"] != true {
		t.Errorf("recorded %v", evs)
	}
}

// TestOpenAISecretSplitAcrossChunks: text before the secret flows, the
// secret's characters never reach the client.
func TestOpenAISecretSplitAcrossChunks(t *testing.T) {
	for _, mode := range []string{"incremental", "buffer"} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t, func(o *gateway.Options) { o.Stream.Mode = mode })
			e.mock.ChunkDelay = 2 * time.Millisecond        // checkpoints pass while text still arrives
			prefix := strings.Repeat("harmless words ", 40) // 600 characters
			e.mock.SetScript(func(*providertest.Request) providertest.Reply {
				var chunks []string
				for i := 0; i < len(prefix); i += 20 {
					chunks = append(chunks, prefix[i:i+20])
				}
				chunks = append(chunks, "then SECRET-KE", "Y-12345 and the end")
				return providertest.Reply{Text: prefix + "then SECRET-KEY-12345 and the end", Chunks: chunks}
			})
			c := e.openai("ds", option.WithHeader("Invariant-Guardrails", headerRule(secretRule)))
			st := c.Chat.Completions.NewStreaming(context.Background(), chatParams(openai.UserMessage("go")))
			var got strings.Builder
			for st.Next() {
				if ch := st.Current(); len(ch.Choices) > 0 {
					got.WriteString(ch.Choices[0].Delta.Content)
				}
			}
			if st.Err() == nil || !strings.Contains(st.Err().Error(), "did not pass the guardrails") {
				t.Fatalf("stream err %v", st.Err())
			}
			s := got.String()
			if strings.Contains(s, "SECRET") || strings.Contains(s, "then") {
				t.Fatalf("client received part of the secret: ...%q", s[max(0, len(s)-40):])
			}
			if !strings.HasPrefix(prefix, s) {
				t.Fatalf("client received %q, not a prefix of the text", s)
			}
			if mode == "incremental" && len(s) == 0 {
				t.Errorf("incremental mode released nothing before the secret")
			}
			if mode == "buffer" && len(s) != 0 {
				t.Errorf("buffer mode released %d characters", len(s))
			}
		})
	}
}

// TestOpenAISecretInToolArguments: a secret split across a tool call's
// argument deltas never reaches the client.
func TestOpenAISecretInToolArguments(t *testing.T) {
	e := newEnv(t)
	e.mock.SetScript(func(*providertest.Request) providertest.Reply {
		return providertest.Reply{ToolCalls: []providertest.ToolCall{{ID: "call_1", Name: "run_shell", Arguments: `{"cmd":"echo SECRET-KEY-12345"}`}},
			ArgChunks: [][]string{{`{"cmd":"echo SEC`, `RET-KEY-1`, `2345"}`}}}
	})
	c := e.openai("ds", option.WithHeader("Invariant-Guardrails", headerRule(toolRule)))
	st := c.Chat.Completions.NewStreaming(context.Background(), chatParams(openai.UserMessage("run it")))
	var args strings.Builder
	for st.Next() {
		if ch := st.Current(); len(ch.Choices) > 0 {
			for _, tc := range ch.Choices[0].Delta.ToolCalls {
				args.WriteString(tc.Function.Arguments)
				if tc.Function.Name != "" {
					t.Errorf("tool call start released: %+v", tc)
				}
			}
		}
	}
	if st.Err() == nil {
		t.Fatal("no error")
	}
	if args.Len() != 0 {
		t.Fatalf("client received arguments %q", args.String())
	}
}

func TestOpenAIUpstreamErrorPassedThrough(t *testing.T) {
	e := newEnv(t)
	body := `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`
	e.mock.SetScript(func(*providertest.Request) providertest.Reply { return providertest.Reply{Status: 429, Body: body} })
	resp, b := e.post("/ds/openai/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		map[string]string{"Authorization": "Bearer sk", "Invariant-Authorization": "Bearer " + adminKey})
	if resp.StatusCode != 429 || string(b) != body || resp.Header.Get("X-Mock-Error") != "1" {
		t.Fatalf("%d %s %v", resp.StatusCode, b, resp.Header)
	}
	trs := e.traces("ds")
	vig, _ := trs[0].ExtraMetadata["vigil"].(map[string]any)
	calls, _ := vig["calls"].([]any)
	if len(calls) != 1 || calls[0].(map[string]any)["upstream_status"] != float64(429) {
		t.Fatalf("call record %v", calls)
	}
	if evs := eventsJSON(t, trs[0]); len(evs) != 1 {
		t.Errorf("an error call must record no assistant event: %v", evs)
	}
}

func TestOpenAIUpstreamHangs(t *testing.T) {
	e := newEnv(t, func(o *gateway.Options) {
		o.Upstreams[0].Timeout = 200 * time.Millisecond
	})
	e.mock.SetScript(func(*providertest.Request) providertest.Reply { return providertest.Reply{Hang: true} })
	c := e.openai("")
	_, err := c.Chat.Completions.New(context.Background(), chatParams(openai.UserMessage("hi")))
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != 504 || !strings.Contains(ae.RawJSON(), "upstream_timeout") {
		t.Fatalf("err %v", err)
	}
}

func TestOpenAIClientDisconnects(t *testing.T) {
	e := newEnv(t)
	e.mock.SetScript(func(*providertest.Request) providertest.Reply {
		return providertest.Reply{Text: "part one, part two, part three, never finished", HangAfter: 2}
	})
	c := e.openai("ds")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := c.Chat.Completions.NewStreaming(ctx, chatParams(openai.UserMessage("go")))
	for st.Next() {
		if ch := st.Current(); len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != "" {
			cancel()
			break
		}
	}
	st.Close()
	deadline := time.Now().Add(5 * time.Second)
	for e.mock.Cancelled() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if e.mock.Cancelled() == 0 {
		t.Fatal("upstream request not cancelled")
	}
	var trs []*clientTrace
	for time.Now().Before(deadline) {
		if trs = e.tracesMaybe("ds"); len(trs) > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(trs) != 1 {
		t.Fatal("partial call not recorded")
	}
	vig, _ := trs[0].ExtraMetadata["vigil"].(map[string]any)
	calls, _ := vig["calls"].([]any)
	if len(calls) != 1 || calls[0].(map[string]any)["client_disconnected"] != true {
		t.Fatalf("call record %v", calls)
	}
	evs := eventsJSON(t, trs[0])
	if len(evs) != 2 || !strings.HasPrefix(evs[1]["content"].(string), "part one") {
		t.Errorf("partial response not recorded: %v", evs)
	}
}

func TestBadInput(t *testing.T) {
	e := newEnv(t, func(o *gateway.Options) { o.MaxRequestBytes = 1 << 10 })
	auth := map[string]string{"Authorization": "Bearer sk", "Invariant-Authorization": "Bearer " + adminKey}
	tests := []struct {
		name, path, body string
		hdr              map[string]string
		status           int
		want             string
	}{
		{"malformed body", "/ds/openai/chat/completions", `{"model":`, auth, 400, `"invalid_json"`},
		{"not an object", "/ds/openai/chat/completions", `[1,2]`, auth, 400, `"invalid_json"`},
		{"messages missing", "/ds/openai/chat/completions", `{"model":"m"}`, auth, 400, "messages"},
		{"unknown route", "/ds/openai/embeddings", `{}`, auth, 404, "no gateway route"},
		{"unknown root", "/ds/nowhere/chat/completions", `{}`, auth, 404, "no gateway route"},
		{"bad dataset name", "/d%20s/openai/chat/completions", `{}`, auth, 404, "no gateway route"},
		{"oversized", "/ds/openai/chat/completions", `{"model":"` + strings.Repeat("x", 2000) + `"}`, auth, 413, "too_large"},
		{"bad key", "/ds/openai/chat/completions", `{}`, map[string]string{"Authorization": "Bearer sk", "Invariant-Authorization": "Bearer vgl_bogus"}, 401, "Invalid Invariant API key"},
		{"no vigil key", "/ds/openai/chat/completions", `{}`, map[string]string{"Authorization": "Bearer sk"}, 400, "Missing invariant api key"},
		{"no keys", "/ds/openai/chat/completions", `{}`, nil, 400, "Missing LLM Provider API Key"},
		{"empty smuggled key", "/ds/openai/chat/completions", `{}`, map[string]string{"Authorization": "Bearer sk;invariant-auth= "}, 400, "Invalid API Key format"},
		{"bad header rule", "/openai/chat/completions", `{"model":"m","messages":[]}`, map[string]string{"Authorization": "Bearer sk", "Invariant-Guardrails": "raise if if"}, 400, "Failed to load policy"},
		{"bad session", "/openai/chat/completions", `{"model":"m","messages":[]}`, map[string]string{"Authorization": "Bearer sk", "Invariant-Session": strings.Repeat("s", 200)}, 400, "Invariant-Session"},
		{"bad metadata", "/openai/chat/completions", `{"model":"m","messages":[]}`, map[string]string{"Authorization": "Bearer sk", "Vigil-Metadata": "{nope"}, 400, "Vigil-Metadata"},
		{"gemini method", "/gemini/v1beta/models/g:countTokens", `{}`, map[string]string{"X-Goog-Api-Key": "k"}, 400, "only generateContent and streamGenerateContent"},
		{"mcp sse", "/mcp/sse", `{}`, nil, 501, "not_supported"},
		{"mcp without handler", "/ds/mcp/streamable", `{}`, nil, 404, "no gateway route"},
	}
	for _, tt := range tests {
		resp, b := e.post(tt.path, tt.body, tt.hdr)
		if resp.StatusCode != tt.status || !strings.Contains(string(b), tt.want) {
			t.Errorf("%s: %d %s, want %d with %q", tt.name, resp.StatusCode, b, tt.status, tt.want)
		}
	}
	// Still up.
	c := e.openai("")
	if _, err := c.Chat.Completions.New(context.Background(), chatParams(openai.UserMessage("still there?"))); err != nil {
		t.Fatal(err)
	}
}

func TestSmuggledKey(t *testing.T) {
	e := newEnv(t)
	c := openai.NewClient(option.WithBaseURL(e.base+"/ds/openai/"), option.WithAPIKey("sk-provider;invariant-auth="+adminKey), option.WithMaxRetries(0))
	if _, err := c.Chat.Completions.New(context.Background(), chatParams(openai.UserMessage("hi"))); err != nil {
		t.Fatal(err)
	}
	if got := e.mock.Last().Header.Get("Authorization"); got != "Bearer sk-provider" {
		t.Fatalf("upstream Authorization %q", got)
	}
	if len(e.traces("ds")) != 1 {
		t.Fatal("not recorded")
	}
}
