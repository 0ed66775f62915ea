package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/gateway/providertest"
)

var resultRx = regexp.MustCompile(`(?:result|ok) call_(\d+)`)

// loopScript answers with a tool call until the request holds n tool
// results, then with text.
func loopScript(n int) func(r *providertest.Request) providertest.Reply {
	return func(r *providertest.Request) providertest.Reply {
		results := 0 // the highest tool result number (results quote their call id)
		for _, m := range resultRx.FindAllStringSubmatch(string(r.Body), -1) {
			if k, _ := strconv.Atoi(m[1]); k > results {
				results = k
			}
		}
		if results >= n {
			return providertest.Reply{Text: "All done."}
		}
		id := "call_" + strconv.Itoa(results+1)
		return providertest.Reply{ToolCalls: []providertest.ToolCall{{ID: id, Name: "step", Arguments: `{"n":` + strconv.Itoa(results+1) + `}`}}}
	}
}

// TestAgentLoopOneTrace: a 10-call agent loop whose history grows is one
// trace, and the trace equals what the client sent and received.
func TestAgentLoopOneTrace(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run("stream="+strconv.FormatBool(stream), func(t *testing.T) {
			e := newEnv(t)
			e.mock.SetScript(loopScript(9))
			c := e.openai("loop", option.WithHeader("Invariant-Guardrails", headerRule(secretRule)))
			ctx := context.Background()
			msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are an agent."), openai.UserMessage("Do 9 steps.")}
			var want []map[string]any
			want = append(want, map[string]any{"role": "system", "content": "You are an agent."}, map[string]any{"role": "user", "content": "Do 9 steps."})
			sessions := map[string]bool{}
			for call := 0; call < 10; call++ {
				var msg openai.ChatCompletionMessage
				var hr *http.Response
				if stream {
					st := c.Chat.Completions.NewStreaming(ctx, chatParams(msgs...), option.WithResponseInto(&hr))
					acc := openai.ChatCompletionAccumulator{}
					for st.Next() {
						acc.AddChunk(st.Current())
					}
					if err := st.Err(); err != nil {
						t.Fatal(err)
					}
					msg = acc.Choices[0].Message
				} else {
					resp, err := c.Chat.Completions.New(ctx, chatParams(msgs...), option.WithResponseInto(&hr))
					if err != nil {
						t.Fatal(err)
					}
					msg = resp.Choices[0].Message
				}
				sessions[hr.Header.Get("Vigil-Trace-Id")] = true
				msgs = append(msgs, msg.ToParam())
				if len(msg.ToolCalls) == 0 {
					want = append(want, map[string]any{"role": "assistant", "content": msg.Content})
					break
				}
				tc := msg.ToolCalls[0]
				want = append(want, map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"id": tc.ID, "type": "function",
					"function": map[string]any{"name": tc.Function.Name, "arguments": json.RawMessage(tc.Function.Arguments)}}}})
				msgs = append(msgs, openai.ToolMessage("result "+tc.ID, tc.ID))
				want = append(want, map[string]any{"role": "tool", "content": "result " + tc.ID, "tool_call_id": tc.ID})
			}
			if len(sessions) != 1 {
				t.Errorf("Vigil-Trace-Id took %d values", len(sessions))
			}
			trs := e.traces("loop")
			if len(trs) != 1 {
				t.Fatalf("%d traces, want 1", len(trs))
			}
			got := eventsJSON(t, trs[0])
			for _, ev := range got {
				if ev["content"] == nil {
					ev["content"] = ""
				}
				delete(ev, "refusal")
			}
			if !jsonEq(got, want) {
				gb, _ := json.Marshal(got)
				wb, _ := json.Marshal(want)
				t.Fatalf("trace\n got %s\nwant %s", gb, wb)
			}
			vig, _ := trs[0].ExtraMetadata["vigil"].(map[string]any)
			if calls, _ := vig["calls"].([]any); len(calls) != 10 {
				t.Errorf("%d call records", len(calls))
			}
		})
	}
}

// TestSessionHeader: the Invariant-Session header keeps calls together
// and its value comes back.
func TestSessionHeader(t *testing.T) {
	e := newEnv(t)
	c := e.openai("ds", option.WithHeader("Invariant-Session", "my-run-1"))
	ctx := context.Background()
	var hr *http.Response
	for _, q := range []string{"first", "second, unrelated"} {
		if _, err := c.Chat.Completions.New(ctx, chatParams(openai.UserMessage(q)), option.WithResponseInto(&hr)); err != nil {
			t.Fatal(err)
		}
	}
	if hr.Header.Get("Vigil-Session") != "my-run-1" {
		t.Errorf("Vigil-Session %q", hr.Header.Get("Vigil-Session"))
	}
	trs := e.traces("ds")
	if len(trs) != 1 || len(eventsJSON(t, trs[0])) != 4 {
		t.Fatalf("%d traces", len(trs))
	}
	// Without stitching every call is its own trace.
	e2 := newEnv(t, func(o *gateway.Options) { o.SessionStitching = "off" })
	c2 := e2.openai("ds")
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("a")}
	r1, _ := c2.Chat.Completions.New(ctx, chatParams(msgs...))
	msgs = append(msgs, r1.Choices[0].Message.ToParam(), openai.UserMessage("b"))
	c2.Chat.Completions.New(ctx, chatParams(msgs...))
	if n := len(e2.traces("ds")); n != 2 {
		t.Fatalf("stitching off: %d traces", n)
	}
}

// TestPrefixForkNotMerged: two runs sharing a first prompt are two
// traces (a boundary always ends with a response).
func TestPrefixForkNotMerged(t *testing.T) {
	e := newEnv(t)
	c := e.openai("ds")
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if _, err := c.Chat.Completions.New(ctx, chatParams(openai.SystemMessage("sys"), openai.UserMessage("same prompt"))); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(e.traces("ds")); n != 2 {
		t.Fatalf("%d traces, want 2", n)
	}
}

func (e *env) responsesLoop(t *testing.T, c openai.Client, stream, usePrevious bool) {
	t.Helper()
	ctx := context.Background()
	input := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage("Do 3 steps.", responses.EasyInputMessageRoleUser)}
	prev := ""
	for call := 0; call < 4; call++ {
		p := responses.ResponseNewParams{Model: "gpt-4o", Instructions: openai.String("You are an agent."),
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}}
		if usePrevious && prev != "" {
			p.PreviousResponseID = openai.String(prev)
		}
		var resp *responses.Response
		if stream {
			st := c.Responses.NewStreaming(ctx, p)
			for st.Next() {
				ev := st.Current()
				if ev.Type == "response.completed" {
					r := ev.Response
					resp = &r
				}
			}
			if err := st.Err(); err != nil {
				t.Fatal(err)
			}
		} else {
			var err error
			if resp, err = c.Responses.New(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		prev = resp.ID
		var next responses.ResponseInputParam
		done := true
		for _, it := range resp.Output {
			if it.Type == "function_call" {
				done = false
				next = append(next, responses.ResponseInputItemParamOfFunctionCall(it.Arguments.OfString, it.CallID, it.Name))
				out := responses.ResponseInputItemParamOfFunctionCallOutput("ok " + it.CallID)
				out.OfFunctionCallOutput.CallID = openai.String(it.CallID)
				next = append(next, out)
			}
		}
		if done {
			return
		}
		if usePrevious {
			input = next[1:] // only the tool output: the call is in the previous response
		} else {
			input = append(input, next...)
		}
	}
}

func TestResponsesAPI(t *testing.T) {
	for _, tc := range []struct {
		name               string
		stream, previousID bool
	}{{"json", false, false}, {"sse", true, false}, {"previous_response_id", false, true}, {"sse+previous_response_id", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.mock.SetScript(loopScript(3))
			c := e.openai("ds", option.WithHeader("Invariant-Guardrails", headerRule(toolRule)))
			e.responsesLoop(t, c, tc.stream, tc.previousID)
			trs := e.traces("ds")
			if len(trs) != 1 {
				t.Fatalf("%d traces, want 1", len(trs))
			}
			evs := eventsJSON(t, trs[0])
			// system, user, 3 × (assistant call, tool), final assistant.
			if len(evs) != 9 || evs[0]["role"] != "system" || evs[8]["content"] != "All done." {
				b, _ := json.Marshal(evs)
				t.Fatalf("recorded %s", b)
			}
		})
	}
}

func TestResponsesBlocked(t *testing.T) {
	e := newEnv(t, nativeErrors)
	e.mock.SetScript(func(*providertest.Request) providertest.Reply {
		return providertest.Reply{ToolCalls: []providertest.ToolCall{{ID: "call_1", Name: "run_shell", Arguments: `{"cmd":"cat SECRET-KEY-12345"}`}},
			ArgChunks: [][]string{{`{"cmd":"cat SECR`, `ET-KEY-12345"}`}}}
	})
	c := e.openai("ds", option.WithHeader("Invariant-Guardrails", headerRule(toolRule)))
	ctx := context.Background()
	p := responses.ResponseNewParams{Model: "gpt-4o", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("run it")}}
	_, err := c.Responses.New(ctx, p)
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != 400 || !strings.Contains(ae.RawJSON(), "did not pass the guardrails") {
		t.Fatalf("err %v", err)
	}
	// Streaming: the Responses API's own error event, with an "error"
	// member so that SDKs raise it.
	st := c.Responses.NewStreaming(ctx, p)
	gotError := false
	for st.Next() {
		ev := st.Current()
		if strings.HasPrefix(ev.Type, "response.function_call") || (ev.Type == "response.output_item.added" && ev.Item.Type == "function_call") {
			t.Fatalf("tool call event released: %s", ev.Type)
		}
		if ev.Type == "error" && ev.Code == "guardrail_violation" && strings.Contains(ev.Message, "did not pass the guardrails") {
			gotError = true
		}
		if ev.Type == "response.completed" {
			t.Fatal("response.completed after a block")
		}
	}
	if !gotError && (st.Err() == nil || !strings.Contains(st.Err().Error(), "did not pass the guardrails")) {
		t.Fatalf("no error event (err %v)", st.Err())
	}
}

// TestConcurrentCallsRecorded: calls arriving together are all recorded
// (the recorder batches new traces into one push).
func TestConcurrentCallsRecorded(t *testing.T) {
	e := newEnv(t)
	c := e.openai("many")
	ctx := context.Background()
	errs := make(chan error, 40)
	for i := 0; i < 40; i++ {
		go func(i int) {
			_, err := c.Chat.Completions.New(ctx, chatParams(openai.UserMessage("question "+strconv.Itoa(i))))
			errs <- err
		}(i)
	}
	for i := 0; i < 40; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := len(e.traces("many")); n != 40 {
		t.Fatalf("%d traces, want 40", n)
	}
	written, dropped, _ := e.rec.Stats()
	if written != 40 || dropped != 0 {
		t.Fatalf("written %d, dropped %d", written, dropped)
	}
}
