package gateway_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/gateway/providertest"
)

func (e *env) anthropic(dataset string, opts ...option.RequestOption) anthropic.Client {
	path := "/anthropic/"
	if dataset != "" {
		path = "/" + dataset + "/anthropic/"
	}
	base := []option.RequestOption{option.WithBaseURL(e.base + path), option.WithAPIKey("sk-ant-test"), option.WithMaxRetries(0),
		option.WithHeader("Invariant-Authorization", "Bearer "+adminKey)}
	return anthropic.NewClient(append(base, opts...)...)
}

func anthParams(text string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{Model: "claude-test", MaxTokens: 100, System: []anthropic.TextBlockParam{{Text: "Be brief."}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))}}
}

func TestAnthropicMessages(t *testing.T) {
	e := newEnv(t)
	c := e.anthropic("ds", option.WithHeader("Invariant-Guardrails", headerRule(secretRule)))
	ctx := context.Background()
	msg, err := c.Messages.New(ctx, anthParams("hello"))
	if err != nil {
		t.Fatal(err)
	}
	if msg.Content[0].Text != "Hello from the mock." {
		t.Fatalf("content %+v", msg.Content)
	}
	// The key goes upstream in the header the client used.
	if h := e.mock.Last().Header; h.Get("X-Api-Key") != "sk-ant-test" && h.Get("Authorization") != "Bearer sk-ant-test" {
		t.Errorf("upstream key not forwarded: %v", h)
	}
	if e.mock.Last().Header.Get("Invariant-Authorization") != "" {
		t.Error("Vigil key forwarded upstream")
	}
	st := c.Messages.NewStreaming(ctx, anthParams("stream it"))
	acc := anthropic.Message{}
	for st.Next() {
		if err := acc.Accumulate(st.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Content[0].Text != "Hello from the mock." {
		t.Fatalf("streamed %+v", acc.Content)
	}
	trs := e.traces("ds")
	if len(trs) != 2 {
		t.Fatalf("%d traces", len(trs))
	}
	want := []map[string]any{{"role": "system", "content": "Be brief."}, {"role": "user", "content": "stream it"}, {"role": "assistant", "content": "Hello from the mock."}}
	if got := eventsJSON(t, trs[1]); !jsonEq(got, want) {
		t.Errorf("recorded %v", got)
	}
}

func TestAnthropicToolUse(t *testing.T) {
	e := newEnv(t)
	e.mock.SetScript(func(*providertest.Request) providertest.Reply {
		return providertest.Reply{ToolCalls: []providertest.ToolCall{{ID: "toolu_1", Name: "run_shell", Arguments: `{"cmd":"ls"}`}},
			ArgChunks: [][]string{{`{"cm`, `d":"ls"}`}}}
	})
	c := e.anthropic("ds", option.WithHeader("Invariant-Guardrails", headerRule(toolRule)))
	st := c.Messages.NewStreaming(context.Background(), anthParams("list files"))
	acc := anthropic.Message{}
	for st.Next() {
		acc.Accumulate(st.Current())
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Content) != 1 || acc.Content[0].Name != "run_shell" || string(acc.Content[0].Input) != `{"cmd":"ls"}` {
		t.Fatalf("tool use %+v", acc.Content)
	}
	evs := eventsJSON(t, e.traces("ds")[0])
	calls, _ := evs[2]["tool_calls"].([]any)
	if len(calls) != 1 {
		t.Fatalf("recorded %v", evs)
	}
}

func TestAnthropicBlocked(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.anthropic("ds", option.WithHeader("Invariant-Guardrails", headerRule(inputRule)))
	_, err := c.Messages.New(ctx, anthParams("a forbidden thing"))
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 400 || !strings.Contains(ae.RawJSON(), "The request did not pass the guardrails") {
		t.Fatalf("err %v", err)
	}
	// Output, streamed, with the secret split across two deltas.
	e.mock.ChunkDelay = time.Millisecond
	prefix := strings.Repeat("abcdefghij", 40)
	e.mock.SetScript(func(*providertest.Request) providertest.Reply {
		return providertest.Reply{Text: prefix + "SECRET-KEY-12345 tail", Chunks: append(chunked(prefix, 10), "SECRET-K", "EY-12345 tail")}
	})
	c = e.anthropic("ds", option.WithHeader("Invariant-Guardrails", headerRule(secretRule)))
	st := c.Messages.NewStreaming(ctx, anthParams("leak it"))
	var got strings.Builder
	for st.Next() {
		ev := st.Current()
		if ev.Type == "content_block_delta" {
			got.WriteString(ev.Delta.Text)
		}
	}
	if st.Err() == nil || !strings.Contains(st.Err().Error(), "did not pass the guardrails") {
		t.Fatalf("stream err %v", st.Err())
	}
	if s := got.String(); strings.Contains(s, "SECRET") || !strings.HasPrefix(prefix, s) {
		t.Fatalf("client received %q", s)
	}
}

func TestAnthropicUpstreamErrors(t *testing.T) {
	e := newEnv(t, func(o *gateway.Options) { o.Upstreams[1].Timeout = 200 * time.Millisecond })
	body := `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
	e.mock.SetScript(func(*providertest.Request) providertest.Reply { return providertest.Reply{Status: 529, Body: body} })
	c := e.anthropic("")
	_, err := c.Messages.New(context.Background(), anthParams("hi"))
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 529 || ae.RawJSON() != body {
		t.Fatalf("err %v", err)
	}
	e.mock.SetScript(func(*providertest.Request) providertest.Reply { return providertest.Reply{Hang: true} })
	_, err = c.Messages.New(context.Background(), anthParams("hi"))
	if !errors.As(err, &ae) || ae.StatusCode != 504 || !strings.Contains(ae.RawJSON(), `"api_error"`) {
		t.Fatalf("hang: %v", err)
	}
}

func chunked(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}
