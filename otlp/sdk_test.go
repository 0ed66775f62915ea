package otlp_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/vigilhq/vigil/otlp"
)

func b64ToHex(s string) string {
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return s
	}
	return hex.EncodeToString(raw)
}

// msg is a convention-neutral chat message the emitters render.
type msg struct {
	role, text string
	calls      []call
	toolID     string
}

type call struct{ id, name, args string }

// chatCall is one LLM call of the scripted agent.
type chatCall struct {
	input   []msg
	output  msg
	in, out int64
	finish  string
}

// script is the two-step tool loop, then a second user turn.
func script() (turn1 []chatCall, tool call, result string, turn2 chatCall) {
	sys := msg{role: "system", text: "You are a weather bot."}
	u1 := msg{role: "user", text: "Weather in Paris?"}
	tc := call{"call_1", "get_weather", `{"city":"Paris"}`}
	a1 := msg{role: "assistant", calls: []call{tc}}
	t1 := msg{role: "tool", text: "18°C", toolID: "call_1"}
	a2 := msg{role: "assistant", text: "It is 18°C in Paris."}
	u2 := msg{role: "user", text: "And in Rome?"}
	a3 := msg{role: "assistant", text: "22°C in Rome."}
	return []chatCall{
			{input: []msg{sys, u1}, output: a1, in: 10, out: 5, finish: "tool_calls"},
			{input: []msg{sys, u1, a1, t1}, output: a2, in: 20, out: 7, finish: "stop"},
		}, tc, "18°C",
		chatCall{input: []msg{sys, u1, a1, t1, a2, u2}, output: a3, in: 30, out: 4, finish: "stop"}
}

const wantLoop = `system "You are a weather bot."
user "Weather in Paris?"
assistant call(call_1 get_weather {"city":"Paris"})
tool "18°C" for call_1
assistant "It is 18°C in Paris."`

const wantTurn2 = wantLoop + `
user "And in Rome?"
assistant "22°C in Rome."`

// convention renders the script's spans in one instrumentation's form.
type convention struct {
	name string
	// chat returns the chat span's name and attributes, and its span
	// events (legacy form).
	chat func(c chatCall, conv string) (string, []attribute.KeyValue, []event)
	tool func(tc call, result, conv string) (string, []attribute.KeyValue)
	// root is the wrapper/agent span (with usage totals that must not
	// be counted twice).
	root func(conv string, in, out int64) (string, []attribute.KeyValue)
}

type event struct {
	name  string
	attrs []attribute.KeyValue
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func currentParts(m msg) map[string]any {
	var parts []any
	if m.role == "tool" {
		parts = append(parts, map[string]any{"type": "tool_call_response", "id": m.toolID, "response": m.text})
	} else if m.text != "" {
		parts = append(parts, map[string]any{"type": "text", "content": m.text})
	}
	for _, c := range m.calls {
		var args any
		_ = json.Unmarshal([]byte(c.args), &args)
		parts = append(parts, map[string]any{"type": "tool_call", "id": c.id, "name": c.name, "arguments": args})
	}
	return map[string]any{"role": m.role, "parts": parts}
}

func openAICalls(cs []call) []any {
	var out []any
	for _, c := range cs {
		out = append(out, map[string]any{"id": c.id, "type": "function", "function": map[string]any{"name": c.name, "arguments": c.args}})
	}
	return out
}

var conventions = []convention{
	{
		name: "current",
		chat: func(c chatCall, conv string) (string, []attribute.KeyValue, []event) {
			var in []any
			sys := ""
			for _, m := range c.input {
				if m.role == "system" {
					sys = m.text
					continue
				}
				in = append(in, currentParts(m))
			}
			out := currentParts(c.output)
			out["finish_reason"] = c.finish
			return "chat gpt-4o", []attribute.KeyValue{
				attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.provider.name", "openai"),
				attribute.String("gen_ai.request.model", "gpt-4o"), attribute.String("gen_ai.response.model", "gpt-4o-2024-08-06"),
				attribute.String("gen_ai.conversation.id", conv),
				attribute.String("gen_ai.system_instructions", jsonText([]any{map[string]any{"type": "text", "content": sys}})),
				attribute.String("gen_ai.input.messages", jsonText(in)), attribute.String("gen_ai.output.messages", jsonText([]any{out})),
				attribute.Int64("gen_ai.usage.input_tokens", c.in), attribute.Int64("gen_ai.usage.output_tokens", c.out),
				attribute.StringSlice("gen_ai.response.finish_reasons", []string{c.finish}),
			}, nil
		},
		tool: func(tc call, result, conv string) (string, []attribute.KeyValue) {
			return "execute_tool " + tc.name, []attribute.KeyValue{
				attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("gen_ai.tool.name", tc.name),
				attribute.String("gen_ai.tool.call.id", tc.id), attribute.String("gen_ai.tool.call.arguments", tc.args),
				attribute.String("gen_ai.tool.call.result", result),
			}
		},
		root: func(conv string, in, out int64) (string, []attribute.KeyValue) {
			return "invoke_agent weather", []attribute.KeyValue{
				attribute.String("gen_ai.operation.name", "invoke_agent"), attribute.String("gen_ai.agent.name", "weather"),
				attribute.String("gen_ai.conversation.id", conv),
				attribute.Int64("gen_ai.usage.input_tokens", in), attribute.Int64("gen_ai.usage.output_tokens", out),
			}
		},
	},
	{
		name: "legacy_events",
		chat: func(c chatCall, conv string) (string, []attribute.KeyValue, []event) {
			var evs []event
			for _, m := range c.input {
				a := []attribute.KeyValue{attribute.String("content", m.text)}
				if len(m.calls) > 0 {
					a = append(a, attribute.String("tool_calls", jsonText(openAICalls(m.calls))))
				}
				if m.toolID != "" {
					a = append(a, attribute.String("id", m.toolID))
				}
				evs = append(evs, event{"gen_ai." + m.role + ".message", a})
			}
			choice := map[string]any{"role": "assistant", "content": c.output.text}
			if len(c.output.calls) > 0 {
				choice["tool_calls"] = openAICalls(c.output.calls)
				choice["content"] = nil
			}
			evs = append(evs, event{"gen_ai.choice", []attribute.KeyValue{attribute.String("message", jsonText(choice)), attribute.String("finish_reason", c.finish)}})
			return "chat gpt-4o", []attribute.KeyValue{
				attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.system", "openai"),
				attribute.String("gen_ai.request.model", "gpt-4o"), attribute.String("session.id", conv),
				attribute.Int64("gen_ai.usage.input_tokens", c.in), attribute.Int64("gen_ai.usage.output_tokens", c.out),
			}, evs
		},
		tool: func(tc call, result, conv string) (string, []attribute.KeyValue) {
			return "execute_tool", []attribute.KeyValue{attribute.String("gen_ai.operation.name", "execute_tool"),
				attribute.String("gen_ai.tool.call.id", tc.id), attribute.String("gen_ai.tool.call.result", result), attribute.String("session.id", conv)}
		},
		root: func(conv string, in, out int64) (string, []attribute.KeyValue) {
			return "agent", []attribute.KeyValue{attribute.String("session.id", conv)}
		},
	},
	{
		name: "openllmetry_flattened",
		chat: func(c chatCall, conv string) (string, []attribute.KeyValue, []event) {
			a := []attribute.KeyValue{attribute.String("llm.request.type", "chat"), attribute.String("gen_ai.system", "openai"),
				attribute.String("gen_ai.request.model", "gpt-4o"), attribute.String("gen_ai.response.model", "gpt-4o-2024-08-06"),
				attribute.String("session.id", conv),
				attribute.Int64("gen_ai.usage.prompt_tokens", c.in), attribute.Int64("gen_ai.usage.completion_tokens", c.out)}
			flat := func(p string, m msg) {
				a = append(a, attribute.String(p+"role", m.role))
				if m.text != "" {
					a = append(a, attribute.String(p+"content", m.text))
				}
				for j, tc := range m.calls {
					q := p + "tool_calls." + strconv.Itoa(j) + "."
					a = append(a, attribute.String(q+"id", tc.id), attribute.String(q+"name", tc.name), attribute.String(q+"arguments", tc.args))
				}
				if m.toolID != "" {
					a = append(a, attribute.String(p+"tool_call_id", m.toolID))
				}
			}
			for i, m := range c.input {
				flat("gen_ai.prompt."+strconv.Itoa(i)+".", m)
			}
			flat("gen_ai.completion.0.", c.output)
			a = append(a, attribute.String("gen_ai.completion.0.finish_reason", c.finish))
			return "openai.chat", a, nil
		},
		tool: func(tc call, result, conv string) (string, []attribute.KeyValue) {
			// OpenLLMetry's tool spans carry no call id: the output comes
			// from the next chat span's history.
			return tc.name + ".tool", []attribute.KeyValue{attribute.String("traceloop.span.kind", "tool"), attribute.String("session.id", conv)}
		},
		root: func(conv string, in, out int64) (string, []attribute.KeyValue) {
			return "weather.workflow", []attribute.KeyValue{attribute.String("traceloop.span.kind", "workflow"), attribute.String("session.id", conv)}
		},
	},
	{
		name: "openinference",
		chat: func(c chatCall, conv string) (string, []attribute.KeyValue, []event) {
			a := []attribute.KeyValue{attribute.String("openinference.span.kind", "LLM"), attribute.String("llm.provider", "openai"),
				attribute.String("llm.system", "openai"), attribute.String("llm.model_name", "gpt-4o-2024-08-06"),
				attribute.String("session.id", conv),
				attribute.Int64("llm.token_count.prompt", c.in), attribute.Int64("llm.token_count.completion", c.out)}
			flat := func(p string, m msg) {
				a = append(a, attribute.String(p+"message.role", m.role))
				if m.text != "" {
					a = append(a, attribute.String(p+"message.content", m.text))
				}
				for j, tc := range m.calls {
					q := p + "message.tool_calls." + strconv.Itoa(j) + ".tool_call."
					a = append(a, attribute.String(q+"id", tc.id), attribute.String(q+"function.name", tc.name), attribute.String(q+"function.arguments", tc.args))
				}
				if m.toolID != "" {
					a = append(a, attribute.String(p+"message.tool_call_id", m.toolID))
				}
			}
			for i, m := range c.input {
				flat("llm.input_messages."+strconv.Itoa(i)+".", m)
			}
			flat("llm.output_messages.0.", c.output)
			return "ChatCompletion", a, nil
		},
		tool: func(tc call, result, conv string) (string, []attribute.KeyValue) {
			return tc.name, []attribute.KeyValue{attribute.String("openinference.span.kind", "TOOL"), attribute.String("tool.name", tc.name),
				attribute.String("tool_call.id", tc.id), attribute.String("output.value", result), attribute.String("session.id", conv)}
		},
		root: func(conv string, in, out int64) (string, []attribute.KeyValue) {
			return "agent", []attribute.KeyValue{attribute.String("openinference.span.kind", "AGENT"), attribute.String("session.id", conv),
				attribute.Int64("llm.token_count.prompt", in), attribute.Int64("llm.token_count.completion", out)}
		},
	},
	{
		name: "vercel_ai",
		chat: func(c chatCall, conv string) (string, []attribute.KeyValue, []event) {
			var prompt []any
			for _, m := range c.input {
				switch {
				case m.role == "tool":
					prompt = append(prompt, map[string]any{"role": "tool", "content": []any{map[string]any{"type": "tool-result", "toolCallId": m.toolID, "toolName": "get_weather", "output": map[string]any{"type": "text", "value": m.text}}}})
				case len(m.calls) > 0:
					var parts []any
					for _, tc := range m.calls {
						var args any
						_ = json.Unmarshal([]byte(tc.args), &args)
						parts = append(parts, map[string]any{"type": "tool-call", "toolCallId": tc.id, "toolName": tc.name, "input": args})
					}
					prompt = append(prompt, map[string]any{"role": m.role, "content": parts})
				case m.role == "system":
					prompt = append(prompt, map[string]any{"role": "system", "content": m.text})
				default:
					prompt = append(prompt, map[string]any{"role": m.role, "content": []any{map[string]any{"type": "text", "text": m.text}}})
				}
			}
			a := []attribute.KeyValue{attribute.String("ai.operationId", "ai.generateText.doGenerate"), attribute.String("operation.name", "ai.generateText.doGenerate"),
				attribute.String("ai.model.id", "gpt-4o"), attribute.String("ai.model.provider", "openai.chat"),
				attribute.String("ai.prompt.messages", jsonText(prompt)), attribute.String("ai.telemetry.metadata.sessionId", conv),
				attribute.String("ai.response.finishReason", c.finish),
				attribute.Int64("ai.usage.promptTokens", c.in), attribute.Int64("ai.usage.completionTokens", c.out)}
			if len(c.output.calls) > 0 {
				var tcs []any
				for _, tc := range c.output.calls {
					tcs = append(tcs, map[string]any{"toolCallType": "function", "toolCallId": tc.id, "toolName": tc.name, "input": tc.args})
				}
				a = append(a, attribute.String("ai.response.toolCalls", jsonText(tcs)))
			} else {
				a = append(a, attribute.String("ai.response.text", c.output.text))
			}
			return "ai.generateText.doGenerate", a, nil
		},
		tool: func(tc call, result, conv string) (string, []attribute.KeyValue) {
			return "ai.toolCall", []attribute.KeyValue{attribute.String("ai.operationId", "ai.toolCall"), attribute.String("operation.name", "ai.toolCall"),
				attribute.String("ai.toolCall.id", tc.id), attribute.String("ai.toolCall.name", tc.name), attribute.String("ai.toolCall.args", tc.args),
				attribute.String("ai.toolCall.result", jsonText(result))}
		},
		root: func(conv string, in, out int64) (string, []attribute.KeyValue) {
			return "ai.generateText", []attribute.KeyValue{attribute.String("ai.operationId", "ai.generateText"), attribute.String("operation.name", "ai.generateText"),
				attribute.String("ai.prompt", `{"prompt":"Weather in Paris?"}`), attribute.String("ai.response.text", "It is 18°C in Paris."),
				attribute.Int64("ai.usage.promptTokens", in), attribute.Int64("ai.usage.completionTokens", out)}
		},
	},
}

// emit runs calls under one root span of tracer, with a tool span
// after the first call, timestamps increasing from t0.
func emit(tr oteltrace.Tracer, cv convention, conv string, t0 time.Time, calls []chatCall, tc *call, result string) {
	ctx := context.Background()
	var in, out int64
	for _, c := range calls {
		in += c.in
		out += c.out
	}
	name, attrs := cv.root(conv, in, out)
	ctx, root := tr.Start(ctx, name, oteltrace.WithTimestamp(t0), oteltrace.WithAttributes(attrs...))
	at := t0
	for i, c := range calls {
		at = at.Add(time.Second)
		name, attrs, evs := cv.chat(c, conv)
		_, sp := tr.Start(ctx, name, oteltrace.WithTimestamp(at), oteltrace.WithAttributes(attrs...))
		for _, e := range evs {
			sp.AddEvent(e.name, oteltrace.WithTimestamp(at), oteltrace.WithAttributes(e.attrs...))
		}
		at = at.Add(time.Second)
		sp.End(oteltrace.WithTimestamp(at))
		if i == 0 && tc != nil {
			at = at.Add(time.Second)
			name, attrs := cv.tool(*tc, result, conv)
			_, ts := tr.Start(ctx, name, oteltrace.WithTimestamp(at), oteltrace.WithAttributes(attrs...))
			at = at.Add(time.Second)
			ts.End(oteltrace.WithTimestamp(at))
		}
	}
	root.End(oteltrace.WithTimestamp(at.Add(time.Second)))
}

// TestConventions: each convention's two-step tool loop, exported by the
// real OTel SDK (protobuf and JSON, gzip) span by span, becomes one
// trace with the same events, model and usage (not counted twice from
// the wrapper span); a second turn of growing history appends only what
// is new; replaying every export request (an exporter retry) adds
// nothing.
func TestConventions(t *testing.T) {
	for _, kind := range []storeKind{sqliteStore, postgresStore} {
		for _, cv := range conventions {
			for _, jsonEnc := range []bool{false, true} {
				name := fmt.Sprintf("%s/%s/json=%v", kind, cv.name, jsonEnc)
				t.Run(name, func(t *testing.T) {
					b := newBackend(t, kind, otlp.Config{})
					tp := b.provider(t, "weather-agent", jsonEnc, nil)
					tr := tp.Tracer("test")
					turn1, tc, result, turn2 := script()
					t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
					emit(tr, cv, "conv-1", t0, turn1, &tc, result)
					ts := b.traces(t, "weather-agent")
					if len(ts) != 1 {
						t.Fatalf("%d traces, want 1", len(ts))
					}
					got := ts[0]
					if s := summary(got.events); s != wantLoop {
						t.Errorf("events:\n%s\nwant:\n%s", s, wantLoop)
					}
					usage, _ := got.meta["usage"].(map[string]any)
					if usage["input_tokens"] != 30.0 || usage["output_tokens"] != 12.0 {
						t.Errorf("usage = %v, want 30/12 (chat spans only)", got.meta["usage"])
					}
					if got.meta["model"] == nil || got.meta["provider"] == nil {
						t.Errorf("metadata lacks model or provider: %v", got.meta)
					}
					// Replay every export request: nothing changes.
					b.mu.Lock()
					bodies := append([][]byte(nil), b.bodies...)
					b.mu.Unlock()
					for _, body := range bodies {
						req, _ := http.NewRequest("POST", b.url+"/v1/traces", bytes.NewReader(body))
						req.Header.Set("Content-Type", "application/x-protobuf")
						req.Header.Set("Authorization", "Bearer "+b.key)
						resp, err := http.DefaultClient.Do(req)
						if err != nil || resp.StatusCode != 200 {
							t.Fatalf("replay: %v %v", err, resp)
						}
						resp.Body.Close()
					}
					if ts := b.traces(t, "weather-agent"); len(ts) != 1 || summary(ts[0].events) != wantLoop {
						t.Errorf("after retries: %d traces; events:\n%s", len(ts), summary(ts[0].events))
					}
					// Second turn, in a new OTel trace of the same
					// conversation (not for Vercel, which has no
					// conversation attribute).
					if cv.name == "vercel_ai" {
						return
					}
					emit(tr, cv, "conv-1", t0.Add(time.Minute), []chatCall{turn2}, nil, "")
					ts = b.traces(t, "weather-agent")
					if len(ts) != 1 {
						t.Fatalf("after turn 2: %d traces, want 1", len(ts))
					}
					if s := summary(ts[0].events); s != wantTurn2 {
						t.Errorf("after turn 2:\n%s\nwant:\n%s", s, wantTurn2)
					}
				})
			}
		}
	}
}
