// Package providertest is a mock LLM upstream speaking OpenAI chat
// completions and Responses, Anthropic Messages and Gemini
// generateContent / streamGenerateContent, streaming and not, with
// scripted replies (text, tool calls, errors, hangs) and configurable
// latency and chunking. The gateway's tests and `vigil bench mock` use
// it.
package providertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// ToolCall is a scripted tool call.
type ToolCall struct {
	ID, Name, Arguments string // Arguments is JSON text
}

// Reply is what the mock answers to one request.
type Reply struct {
	// Text is the assistant text; Chunks, when set, is its exact split
	// into stream chunks (else it is split every ChunkChars).
	Text   string
	Chunks []string
	// ToolCalls are the tool calls; ArgChunks, when set, is the split of
	// each call's arguments into stream fragments.
	ToolCalls []ToolCall
	ArgChunks [][]string
	// Status, when not 0 or 200, answers with this status and Body.
	Status int
	Body   string
	// Hang never answers (until the request is cancelled).
	Hang bool
	// HangAfter streams this many chunks and then hangs.
	HangAfter int
}

// Request is a request the mock received.
type Request struct {
	Method, Path, Query string
	Header              http.Header
	Body                []byte
}

// Mock is the mock upstream; it is an http.Handler.
type Mock struct {
	// Script returns the reply to a request; nil answers Text "Hello
	// from the mock." to every request. Set it before the mock serves;
	// later, with SetScript.
	Script func(r *Request) Reply
	// Latency is added before the response headers.
	Latency time.Duration
	// ChunkChars splits streamed text (default 8); ChunkDelay paces
	// chunks (default none).
	ChunkChars int
	ChunkDelay time.Duration
	// Model is the model name it reports (default "mock-model").
	Model string
	// Record keeps every request (for tests); off by default, since a
	// benchmark run would hold them all.
	Record bool

	mu        sync.Mutex // guards requests, and Script once serving (SetScript)
	requests  []*Request
	cancelled atomic.Int64
	served    atomic.Int64

	// The benchmark sends the same request again and again and gets the
	// same reply: the last request body's parse and the last encoding of
	// each kind of reply are kept (guarded by cmu), so that a request
	// costs little more than reading it.
	cmu     sync.Mutex
	lastIn  []byte
	lastReq reqFlags
	encoded map[string]*encodedReply
}

// reqFlags is what the mock reads of a request body.
type reqFlags struct {
	stream, includeUsage bool
}

// encodedReply is a reply encoded once: a JSON body, or a stream's
// events (content: paced and counted for HangAfter).
type encodedReply struct {
	rep    Reply
	model  string
	chunk  int // ChunkChars when it was encoded (streams)
	body   []byte
	length []string // Content-Length of body
	events []streamEvent
}

type streamEvent struct {
	b       string
	content bool
}

// sameReply reports whether a and b answer with the same content.
func sameReply(a, b Reply) bool {
	return a.Text == b.Text && slices.Equal(a.Chunks, b.Chunks) && slices.Equal(a.ToolCalls, b.ToolCalls) &&
		slices.EqualFunc(a.ArgChunks, b.ArgChunks, slices.Equal)
}

// cached returns the encoding of kind for rep, building it with build
// when the last one of that kind was for another reply, model or chunk
// size.
func (m *Mock) cached(kind string, rep Reply, build func(e *encodedReply)) *encodedReply {
	model, chunk := m.model(), m.ChunkChars
	m.cmu.Lock()
	e := m.encoded[kind]
	m.cmu.Unlock()
	if e != nil && e.model == model && e.chunk == chunk && sameReply(e.rep, rep) {
		return e
	}
	e = &encodedReply{rep: rep, model: model, chunk: chunk}
	build(e)
	e.length = []string{strconv.Itoa(len(e.body))}
	m.cmu.Lock()
	if m.encoded == nil {
		m.encoded = map[string]*encodedReply{}
	}
	m.encoded[kind] = e
	m.cmu.Unlock()
	return e
}

// flags parses body, or returns the last parse when body is the same.
func (m *Mock) flags(body []byte) reqFlags {
	m.cmu.Lock()
	if m.lastIn != nil && bytes.Equal(body, m.lastIn) {
		f := m.lastReq
		m.cmu.Unlock()
		return f
	}
	m.cmu.Unlock()
	var in map[string]any
	_ = json.Unmarshal(body, &in)
	var f reqFlags
	f.stream, _ = in["stream"].(bool)
	if so, _ := in["stream_options"].(map[string]any); so != nil && so["include_usage"] == true {
		f.includeUsage = true
	}
	m.cmu.Lock()
	m.lastIn, m.lastReq = append([]byte{}, body...), f
	m.cmu.Unlock()
	return f
}

// readBody reads a request body, in one allocation when its length is
// known.
func readBody(r *http.Request) []byte {
	if n := r.ContentLength; n > 0 && n <= 64<<20 {
		b := make([]byte, n)
		k, _ := io.ReadFull(r.Body, b)
		return b[:k]
	}
	b, _ := io.ReadAll(r.Body)
	return b
}

// Requests returns the recorded requests.
func (m *Mock) Requests() []*Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*Request(nil), m.requests...)
}

// Last returns the last recorded request, or nil.
func (m *Mock) Last() *Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.requests) == 0 {
		return nil
	}
	return m.requests[len(m.requests)-1]
}

// SetScript replaces Script while the mock serves: a request still in
// flight (one the gateway cancelled, say) may read it at any time.
func (m *Mock) SetScript(f func(r *Request) Reply) {
	m.mu.Lock()
	m.Script = f
	m.mu.Unlock()
}

// script is the current Script.
func (m *Mock) script() func(r *Request) Reply {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.Script
}

// Cancelled is the number of requests whose client went away before the
// reply was complete.
func (m *Mock) Cancelled() int64 { return m.cancelled.Load() }

// Served is the number of requests answered.
func (m *Mock) Served() int64 { return m.served.Load() }

func (m *Mock) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body := readBody(r)
	req := &Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body}
	if m.Record {
		m.mu.Lock()
		m.requests = append(m.requests, req)
		m.mu.Unlock()
	}
	m.served.Add(1)
	rep := Reply{Text: "Hello from the mock."}
	if script := m.script(); script != nil {
		rep = script(req)
	}
	if m.Latency > 0 {
		time.Sleep(m.Latency)
	}
	if rep.Hang && rep.HangAfter == 0 {
		<-r.Context().Done()
		m.cancelled.Add(1)
		return
	}
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/models") {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model","created":0,"owned_by":"mock"}]}`, m.model())
		return
	}
	if rep.Status != 0 && rep.Status != 200 {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Mock-Error", "1")
		w.WriteHeader(rep.Status)
		io.WriteString(w, rep.Body)
		return
	}
	in := m.flags(body)
	stream := in.stream
	s := &streamer{m: m, w: w, r: r, rep: rep}
	switch {
	case strings.HasSuffix(r.URL.Path, "/chat/completions"):
		if stream {
			s.chatStream(in.includeUsage)
		} else {
			writeEncoded(w, m.cached("chat", rep, func(e *encodedReply) { e.body, _ = json.Marshal(m.chat(rep)) }))
		}
	case strings.HasSuffix(r.URL.Path, "/responses"):
		if stream {
			s.responsesStream()
		} else {
			writeJSON(w, m.response(rep))
		}
	case strings.HasSuffix(r.URL.Path, "/v1/messages"):
		if stream {
			s.anthropicStream()
		} else {
			writeEncoded(w, m.cached("anthropic", rep, func(e *encodedReply) { e.body, _ = json.Marshal(m.anthropic(rep)) }))
		}
	case strings.HasSuffix(r.URL.Path, ":generateContent"):
		writeEncoded(w, m.cached("gemini", rep, func(e *encodedReply) { e.body, _ = json.Marshal(m.gemini(rep, rep.Text, rep.ToolCalls, true)) }))
	case strings.HasSuffix(r.URL.Path, ":streamGenerateContent"):
		s.geminiStream(r.URL.Query().Get("alt") == "sse")
	default:
		http.Error(w, `{"error":"mock: unknown path"}`, http.StatusNotFound)
	}
}

func (m *Mock) model() string {
	if m.Model != "" {
		return m.Model
	}
	return "mock-model"
}

func writeJSON(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Write(b)
}

// jsonContentType is the Content-Type of JSON replies (shared: net/http
// does not modify header values).
var jsonContentType = []string{"application/json"}

// writeEncoded writes a JSON body encoded earlier.
func writeEncoded(w http.ResponseWriter, e *encodedReply) {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Content-Length"] = e.length
	w.Write(e.body)
}

func (m *Mock) chat(rep Reply) map[string]any {
	msg := map[string]any{"role": "assistant", "content": rep.Text, "refusal": nil}
	finish := "stop"
	if len(rep.ToolCalls) > 0 {
		var calls []any
		for _, c := range rep.ToolCalls {
			calls = append(calls, map[string]any{"id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": c.Arguments}})
		}
		msg["tool_calls"] = calls
		if rep.Text == "" {
			msg["content"] = nil
		}
		finish = "tool_calls"
	}
	return map[string]any{"id": "chatcmpl-mock", "object": "chat.completion", "created": 1700000000, "model": m.model(),
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}},
		"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
}

func (m *Mock) response(rep Reply) map[string]any {
	var output []any
	if rep.Text != "" || len(rep.ToolCalls) == 0 {
		output = append(output, map[string]any{"id": "msg_mock", "type": "message", "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": rep.Text, "annotations": []any{}}}})
	}
	for i, c := range rep.ToolCalls {
		output = append(output, map[string]any{"id": "fc_mock" + strconv.Itoa(i), "type": "function_call", "status": "completed",
			"call_id": c.ID, "name": c.Name, "arguments": c.Arguments})
	}
	return map[string]any{"id": "resp_" + strconv.FormatInt(time.Now().UnixNano(), 36), "object": "response", "created_at": 1700000000, "status": "completed",
		"model": m.model(), "output": output, "parallel_tool_calls": true, "tool_choice": "auto", "tools": []any{},
		"usage": map[string]any{"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
			"input_tokens_details": map[string]any{"cached_tokens": 0}, "output_tokens_details": map[string]any{"reasoning_tokens": 0}}}
}

func (m *Mock) anthropic(rep Reply) map[string]any {
	var content []any
	if rep.Text != "" || len(rep.ToolCalls) == 0 {
		content = append(content, map[string]any{"type": "text", "text": rep.Text})
	}
	stop := "end_turn"
	for _, c := range rep.ToolCalls {
		var input any
		_ = json.Unmarshal([]byte(c.Arguments), &input)
		content = append(content, map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": input})
		stop = "tool_use"
	}
	return map[string]any{"id": "msg_mock", "type": "message", "role": "assistant", "model": m.model(), "content": content,
		"stop_reason": stop, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 10, "output_tokens": 5}}
}

func (m *Mock) gemini(rep Reply, text string, calls []ToolCall, last bool) map[string]any {
	var parts []any
	if text != "" {
		parts = append(parts, map[string]any{"text": text})
	}
	for _, c := range calls {
		var args any
		_ = json.Unmarshal([]byte(c.Arguments), &args)
		parts = append(parts, map[string]any{"functionCall": map[string]any{"name": c.Name, "args": args}})
	}
	cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
	out := map[string]any{"candidates": []any{cand}, "modelVersion": m.model()}
	if last {
		cand["finishReason"] = "STOP"
		out["usageMetadata"] = map[string]any{"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}
	}
	return out
}

// streamer writes one streamed reply.
type streamer struct {
	m    *Mock
	w    http.ResponseWriter
	r    *http.Request
	rep  Reply
	sent int
	dead bool
}

// chunks is the split of the reply text.
func (s *streamer) chunks() []string {
	if s.rep.Chunks != nil {
		return s.rep.Chunks
	}
	n := s.m.ChunkChars
	if n <= 0 {
		n = 8
	}
	var out []string
	t := s.rep.Text
	for t != "" {
		i, k := 0, 0
		for i < len(t) && k < n {
			_, size := utf8.DecodeRuneInString(t[i:])
			i += size
			k++
		}
		out = append(out, t[:i])
		t = t[i:]
	}
	return out
}

// argChunks is the split of call i's arguments.
func (s *streamer) argChunks(i int) []string {
	if i < len(s.rep.ArgChunks) {
		return s.rep.ArgChunks[i]
	}
	return []string{s.rep.ToolCalls[i].Arguments}
}

func (s *streamer) start(contentType string) {
	s.w.Header().Set("Content-Type", contentType)
	s.w.Header().Set("Cache-Control", "no-cache")
	s.w.WriteHeader(http.StatusOK)
	http.NewResponseController(s.w).Flush()
}

// emit writes one event; content events are paced and counted for
// HangAfter. It reports false once the client has gone.
func (s *streamer) emit(b string, content bool) bool {
	if s.dead {
		return false
	}
	if content {
		if s.rep.HangAfter > 0 && s.sent == s.rep.HangAfter {
			<-s.r.Context().Done()
			s.m.cancelled.Add(1)
			s.dead = true
			return false
		}
		s.sent++
		if s.m.ChunkDelay > 0 {
			select {
			case <-time.After(s.m.ChunkDelay):
			case <-s.r.Context().Done():
				s.m.cancelled.Add(1)
				s.dead = true
				return false
			}
		}
	}
	if _, err := io.WriteString(s.w, b); err != nil {
		s.m.cancelled.Add(1)
		s.dead = true
		return false
	}
	http.NewResponseController(s.w).Flush()
	return true
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func data(v any) string { return "data: " + jsonString(v) + "\n\n" }

func named(ev string, v any) string { return "event: " + ev + "\ndata: " + jsonString(v) + "\n\n" }

func (s *streamer) chatStream(includeUsage bool) {
	s.start("text/event-stream")
	e := s.m.cached("chat-stream", s.rep, func(e *encodedReply) { e.events = s.chatEvents() })
	for _, ev := range e.events {
		if !s.emit(ev.b, ev.content) {
			return
		}
	}
	if includeUsage {
		u := map[string]any{"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 1700000000, "model": e.model, "choices": []any{},
			"usage": map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
		if !s.emit(data(u), false) {
			return
		}
	}
	s.emit("data: [DONE]\n\n", false)
}

// chatEvents are the chat completion chunks of the reply, up to the
// one with the finish reason.
func (s *streamer) chatEvents() []streamEvent {
	model := s.m.model()
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 1700000000, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}}}
	}
	evs := []streamEvent{{data(chunk(map[string]any{"role": "assistant", "content": ""}, nil)), false}}
	for _, c := range s.chunks() {
		evs = append(evs, streamEvent{data(chunk(map[string]any{"content": c}, nil)), true})
	}
	for i, tc := range s.rep.ToolCalls {
		first := map[string]any{"index": i, "id": tc.ID, "type": "function", "function": map[string]any{"name": tc.Name, "arguments": ""}}
		evs = append(evs, streamEvent{data(chunk(map[string]any{"tool_calls": []any{first}}, nil)), true})
		for _, a := range s.argChunks(i) {
			d := map[string]any{"index": i, "function": map[string]any{"arguments": a}}
			evs = append(evs, streamEvent{data(chunk(map[string]any{"tool_calls": []any{d}}, nil)), true})
		}
	}
	finish := "stop"
	if len(s.rep.ToolCalls) > 0 {
		finish = "tool_calls"
	}
	return append(evs, streamEvent{data(chunk(map[string]any{}, finish)), false})
}

func (s *streamer) responsesStream() {
	s.start("text/event-stream")
	seq := 0
	ev := func(typ string, v map[string]any) string {
		v["type"] = typ
		v["sequence_number"] = seq
		seq++
		return named(typ, v)
	}
	final := s.m.response(s.rep)
	pending := map[string]any{}
	for k, v := range final {
		pending[k] = v
	}
	pending["status"] = "in_progress"
	pending["output"] = []any{}
	if !s.emit(ev("response.created", map[string]any{"response": pending}), false) ||
		!s.emit(ev("response.in_progress", map[string]any{"response": pending}), false) {
		return
	}
	idx := 0
	if s.rep.Text != "" || len(s.rep.ToolCalls) == 0 {
		item := map[string]any{"id": "msg_mock", "type": "message", "role": "assistant", "status": "in_progress", "content": []any{}}
		if !s.emit(ev("response.output_item.added", map[string]any{"output_index": idx, "item": item}), false) {
			return
		}
		part := map[string]any{"type": "output_text", "text": "", "annotations": []any{}}
		if !s.emit(ev("response.content_part.added", map[string]any{"output_index": idx, "item_id": "msg_mock", "content_index": 0, "part": part}), false) {
			return
		}
		for _, c := range s.chunks() {
			if !s.emit(ev("response.output_text.delta", map[string]any{"output_index": idx, "item_id": "msg_mock", "content_index": 0, "delta": c, "logprobs": []any{}}), true) {
				return
			}
		}
		done := map[string]any{"type": "output_text", "text": s.rep.Text, "annotations": []any{}}
		if !s.emit(ev("response.output_text.done", map[string]any{"output_index": idx, "item_id": "msg_mock", "content_index": 0, "text": s.rep.Text, "logprobs": []any{}}), false) ||
			!s.emit(ev("response.content_part.done", map[string]any{"output_index": idx, "item_id": "msg_mock", "content_index": 0, "part": done}), false) {
			return
		}
		item = map[string]any{"id": "msg_mock", "type": "message", "role": "assistant", "status": "completed", "content": []any{done}}
		if !s.emit(ev("response.output_item.done", map[string]any{"output_index": idx, "item": item}), false) {
			return
		}
		idx++
	}
	for i, tc := range s.rep.ToolCalls {
		id := "fc_mock" + strconv.Itoa(i)
		item := map[string]any{"id": id, "type": "function_call", "status": "in_progress", "call_id": tc.ID, "name": tc.Name, "arguments": ""}
		if !s.emit(ev("response.output_item.added", map[string]any{"output_index": idx, "item": item}), true) {
			return
		}
		for _, a := range s.argChunks(i) {
			if !s.emit(ev("response.function_call_arguments.delta", map[string]any{"output_index": idx, "item_id": id, "delta": a}), true) {
				return
			}
		}
		if !s.emit(ev("response.function_call_arguments.done", map[string]any{"output_index": idx, "item_id": id, "arguments": tc.Arguments}), false) {
			return
		}
		item = map[string]any{"id": id, "type": "function_call", "status": "completed", "call_id": tc.ID, "name": tc.Name, "arguments": tc.Arguments}
		if !s.emit(ev("response.output_item.done", map[string]any{"output_index": idx, "item": item}), false) {
			return
		}
		idx++
	}
	s.emit(ev("response.completed", map[string]any{"response": final}), false)
}

func (s *streamer) anthropicStream() {
	s.start("text/event-stream")
	msg := s.m.anthropic(s.rep)
	start := map[string]any{}
	for k, v := range msg {
		start[k] = v
	}
	start["content"] = []any{}
	start["stop_reason"] = nil
	start["usage"] = map[string]any{"input_tokens": 10, "output_tokens": 1}
	if !s.emit(named("message_start", map[string]any{"type": "message_start", "message": start}), false) {
		return
	}
	idx := 0
	if s.rep.Text != "" || len(s.rep.ToolCalls) == 0 {
		if !s.emit(named("content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": map[string]any{"type": "text", "text": ""}}), false) ||
			!s.emit(named("ping", map[string]any{"type": "ping"}), false) {
			return
		}
		for _, c := range s.chunks() {
			if !s.emit(named("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "text_delta", "text": c}}), true) {
				return
			}
		}
		if !s.emit(named("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx}), false) {
			return
		}
		idx++
	}
	for i, tc := range s.rep.ToolCalls {
		if !s.emit(named("content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": map[string]any{"type": "tool_use", "id": tc.ID, "name": tc.Name, "input": map[string]any{}}}), true) {
			return
		}
		for _, a := range s.argChunks(i) {
			if !s.emit(named("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "input_json_delta", "partial_json": a}}), true) {
				return
			}
		}
		if !s.emit(named("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx}), false) {
			return
		}
		idx++
	}
	if !s.emit(named("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": msg["stop_reason"], "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 5}}), false) {
		return
	}
	s.emit(named("message_stop", map[string]any{"type": "message_stop"}), false)
}

func (s *streamer) geminiStream(sseMode bool) {
	if sseMode {
		s.start("text/event-stream")
	} else {
		s.start("application/json")
	}
	var elems []map[string]any
	chunks := s.chunks()
	for i, c := range chunks {
		elems = append(elems, s.m.gemini(s.rep, c, nil, i == len(chunks)-1 && len(s.rep.ToolCalls) == 0))
	}
	if len(s.rep.ToolCalls) > 0 {
		elems = append(elems, s.m.gemini(s.rep, "", s.rep.ToolCalls, true))
	}
	for i, e := range elems {
		var out string
		switch {
		case sseMode:
			out = data(e)
		case i == 0:
			out = "[" + jsonString(e)
		default:
			out = ",\r\n" + jsonString(e)
		}
		if !s.emit(out, true) {
			return
		}
	}
	if !sseMode {
		if len(elems) == 0 {
			s.emit("[", false)
		}
		s.emit("]", false)
	}
}
