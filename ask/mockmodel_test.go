package ask_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// turn is one scripted answer of the mock model: tool calls, or final
// content. Delay holds the answer back (the request's context ends it).
type turn struct {
	Calls   []call
	Content string
	Tokens  int
	Delay   time.Duration
}

type call struct {
	Name string
	Args any // encoded as the JSON arguments string
}

// mockModel is a loopback OpenAI-compatible chat-completions server
// answering with a script; after the script it repeats the last turn.
type mockModel struct {
	t      testing.TB
	hs     *httptest.Server
	mu     sync.Mutex
	script []turn
	reqs   []chatReq // every request received
}

// chatReq is the part of a request the tests look at.
type chatReq struct {
	Model    string `json:"model"`
	Messages []struct {
		Role       string  `json:"role"`
		Content    *string `json:"content"`
		ToolCallID string  `json:"tool_call_id"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
}

func newMockModel(t testing.TB, script ...turn) *mockModel {
	m := &mockModel{t: t, script: script}
	m.hs = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.hs.Close)
	return m
}

func (m *mockModel) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
		http.Error(w, `{"error":{"message":"no such endpoint"}}`, http.StatusNotFound)
		return
	}
	var req chatReq
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	n := len(m.reqs)
	m.reqs = append(m.reqs, req)
	tn := m.script[min(n, len(m.script)-1)]
	m.mu.Unlock()
	if tn.Delay > 0 {
		select {
		case <-time.After(tn.Delay):
		case <-r.Context().Done():
			return
		}
	}
	msg := map[string]any{"role": "assistant", "content": nil}
	if len(tn.Calls) == 0 {
		msg["content"] = tn.Content
	} else {
		var tcs []any
		for i, c := range tn.Calls {
			args, _ := json.Marshal(c.Args)
			if s, ok := c.Args.(string); ok {
				args = []byte(s)
			}
			tcs = append(tcs, map[string]any{"id": "call_" + string(rune('a'+n)) + string(rune('0'+i)), "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": string(args)}})
		}
		msg["tool_calls"] = tcs
	}
	tokens := tn.Tokens
	if tokens == 0 {
		tokens = 100
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"id": "x", "object": "chat.completion",
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": "stop"}},
		"usage":   map[string]any{"prompt_tokens": tokens * 3 / 4, "completion_tokens": tokens - tokens*3/4}})
}

// requests returns the requests received so far.
func (m *mockModel) requests() []chatReq {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]chatReq(nil), m.reqs...)
}

// toolResults returns the contents of the tool messages of the last
// request, in order.
func (m *mockModel) toolResults() []string {
	rs := m.requests()
	if len(rs) == 0 {
		return nil
	}
	var out []string
	for _, msg := range rs[len(rs)-1].Messages {
		if msg.Role == "tool" && msg.Content != nil {
			out = append(out, *msg.Content)
		}
	}
	return out
}

// answerJSON is a final answer in the form the model must use.
func answerJSON(answer string, cites ...[3]string) string {
	var cs []map[string]string
	for _, c := range cites {
		cs = append(cs, map[string]string{"trace_id": c[0], "address": c[1], "quote": c[2]})
	}
	b, _ := json.Marshal(map[string]any{"answer": answer, "citations": cs})
	return string(b)
}
