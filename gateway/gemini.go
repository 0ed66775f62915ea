package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// geminiProvider is Gemini generateContent and streamGenerateContent
// (spec §4.5).
type geminiProvider struct{}

func (geminiProvider) request(body map[string]any, _ url.Values) (*callInput, error) {
	in := &callInput{tools: body["tools"]}
	if si := obj(body["systemInstruction"]); si != nil {
		var texts []string
		for _, p := range list(si["parts"]) {
			if t, ok := obj(p)["text"].(string); ok {
				texts = append(texts, t)
			}
		}
		in.events = append(in.events, event{"role": "system", "content": strings.Join(texts, "\n")})
	}
	contents, ok := body["contents"].([]any)
	if !ok {
		return nil, badf("contents: want a list of contents")
	}
	unanswered := map[string][]string{} // function name → call ids
	for ci, c := range contents {
		co := obj(c)
		if co == nil {
			return nil, badf("contents[%d]: want an object", ci)
		}
		role := "user"
		if str(co["role"]) == "model" {
			role = "assistant"
		}
		var parts []any
		var calls []any
		var reasoning []string
		for pi, p := range list(co["parts"]) {
			po := obj(p)
			if po == nil {
				continue
			}
			switch {
			case po["functionCall"] != nil:
				fc := obj(po["functionCall"])
				id := str(fc["id"])
				if id == "" {
					id = "gemini_call_" + strconv.Itoa(ci) + "_" + strconv.Itoa(pi)
				}
				name := str(fc["name"])
				unanswered[name] = append(unanswered[name], id)
				args := fc["args"]
				if args == nil {
					args = map[string]any{}
				}
				calls = append(calls, map[string]any{"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": args}})
			case po["functionResponse"] != nil:
				fr := obj(po["functionResponse"])
				id := str(fr["id"])
				name := str(fr["name"])
				if id == "" {
					if ids := unanswered[name]; len(ids) > 0 {
						id = ids[len(ids)-1]
						unanswered[name] = ids[:len(ids)-1]
					}
				}
				rb, _ := json.Marshal(fr["response"])
				in.events = append(in.events, event{"role": "tool", "tool_call_id": id, "content": string(rb)})
			case po["thought"] == true:
				reasoning = append(reasoning, str(po["text"]))
			case po["text"] != nil:
				parts = append(parts, map[string]any{"type": "text", "text": str(po["text"])})
			case po["inlineData"] != nil:
				d := obj(po["inlineData"])
				if mt := str(d["mimeType"]); strings.HasPrefix(mt, "image/") {
					parts = append(parts, map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:" + mt + ";base64," + str(d["data"])}})
				} else {
					parts = append(parts, po)
				}
			case po["fileData"] != nil:
				d := obj(po["fileData"])
				if strings.HasPrefix(str(d["mimeType"]), "image/") {
					parts = append(parts, map[string]any{"type": "image_url", "image_url": map[string]any{"url": str(d["fileUri"])}})
				} else {
					parts = append(parts, po)
				}
			default:
				parts = append(parts, po)
			}
		}
		if len(parts) == 0 && len(calls) == 0 && len(reasoning) == 0 {
			continue
		}
		e := event{"role": role}
		if len(parts) == 1 && obj(parts[0])["type"] == "text" {
			e["content"] = obj(parts[0])["text"]
		} else if len(parts) > 0 {
			e["content"] = parts
		} else {
			e["content"] = ""
		}
		if len(calls) > 0 {
			e["tool_calls"] = calls
		}
		if len(reasoning) > 0 {
			e["reasoning"] = strings.Join(reasoning, "\n")
		}
		in.events = append(in.events, e)
	}
	in.request = requestFields(body, "contents", "tools", "systemInstruction")
	return in, nil
}

// geminiResponse is the part of a GenerateContentResponse the gateway
// reads.
type geminiResponse struct {
	Candidates []struct {
		Content struct {
			Parts []map[string]any `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	UsageMetadata  map[string]any `json:"usageMetadata"`
	ModelVersion   string         `json:"modelVersion"`
	PromptFeedback map[string]any `json:"promptFeedback"`
	Error          any            `json:"error"`
}

func (geminiProvider) response(body []byte) (*callOutput, error) {
	var r geminiResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("gemini response: %w", err)
	}
	s := newGeminiStream()
	s.add(&r, nil)
	return s.output(), nil
}

func (geminiProvider) stream() streamParser { return newGeminiStream() }

type geminiCandidate struct {
	text      []byte
	reasoning []byte
	textLen   int
	calls     []map[string]any
	finish    string
}

// geminiStream accumulates Gemini stream elements per candidate.
type geminiStream struct {
	cands    map[int]*geminiCandidate
	n        int // candidates seen
	usage    map[string]any
	model    string
	feedback map[string]any
	failed   string
	calls    int
}

func newGeminiStream() *geminiStream { return &geminiStream{cands: map[int]*geminiCandidate{}} }

// add accumulates one response element, classifying f when given.
func (s *geminiStream) add(r *geminiResponse, f *frame) {
	if r.UsageMetadata != nil {
		s.usage = r.UsageMetadata
	}
	if r.ModelVersion != "" {
		s.model = r.ModelVersion
	}
	if r.PromptFeedback != nil {
		s.feedback = r.PromptFeedback
	}
	if r.Error != nil {
		b, _ := json.Marshal(r.Error)
		s.failed = string(b)
	}
	for i, c := range r.Candidates {
		gc := s.cands[i]
		if gc == nil {
			gc = &geminiCandidate{}
			s.cands[i] = gc
			if i+1 > s.n {
				s.n = i + 1
			}
		}
		if c.FinishReason != "" {
			gc.finish = c.FinishReason
		}
		for _, p := range c.Content.Parts {
			if fc := obj(p["functionCall"]); fc != nil {
				id := str(fc["id"])
				if id == "" {
					id = "gemini_call_" + strconv.Itoa(s.calls)
				}
				s.calls++
				args := fc["args"]
				if args == nil {
					args = map[string]any{}
				}
				gc.calls = append(gc.calls, map[string]any{"id": id, "type": "function", "function": map[string]any{"name": str(fc["name"]), "arguments": args}})
				if f != nil && f.kind != kindText {
					f.kind, f.tool = kindTool, "g"+strconv.Itoa(s.calls)
				}
				continue
			}
			t, ok := p["text"].(string)
			if !ok {
				continue
			}
			if p["thought"] == true {
				gc.reasoning = append(gc.reasoning, t...)
			} else {
				gc.text = append(gc.text, t...)
			}
			gc.textLen += utf8.RuneCountInString(t)
			if f != nil {
				f.kind = kindText
				f.spans = append(f.spans, span{i, gc.textLen})
			}
		}
	}
}

func (s *geminiStream) feed(f *frame) {
	switch f.event {
	case arrayChunk:
		f.kind = kindText // held in buffer mode; parsed whole at the end
		return
	case arrayEnd:
		var rs []geminiResponse
		if err := json.Unmarshal(f.data, &rs); err == nil {
			for i := range rs {
				s.add(&rs[i], nil)
			}
		}
		f.kind = kindFinal
		return
	}
	if f.data == nil {
		return
	}
	var r geminiResponse
	if err := json.Unmarshal(f.data, &r); err != nil {
		return
	}
	s.add(&r, f)
}

func (s *geminiStream) finish() {}

func (s *geminiStream) textLens() map[int]int {
	m := map[int]int{}
	for i, c := range s.cands {
		m[i] = c.textLen
	}
	return m
}

// toolDone: function calls arrive whole.
func (s *geminiStream) toolDone(string) bool { return true }

func (c *geminiCandidate) event(draft bool) event {
	e := event{"role": "assistant", "content": string(c.text)}
	if draft && len(c.reasoning) > 0 {
		e["content"] = string(c.reasoning) + "\n" + string(c.text)
	} else if len(c.reasoning) > 0 {
		e["reasoning"] = string(c.reasoning)
	}
	if len(c.calls) > 0 {
		calls := make([]any, len(c.calls))
		for i, x := range c.calls {
			calls[i] = x
		}
		e["tool_calls"] = calls
	}
	return e
}

func (s *geminiStream) draft() ([]event, []string) {
	var evs []event
	for i := 0; i < s.n; i++ {
		if c := s.cands[i]; c != nil {
			evs = append(evs, c.event(true))
		}
	}
	keys := make([]string, s.calls)
	for i := range keys {
		keys[i] = "g" + strconv.Itoa(i+1)
	}
	return evs, keys
}

func (s *geminiStream) output() *callOutput {
	out := &callOutput{usage: s.usage, model: s.model, failed: s.failed, extra: map[string]any{}}
	for i := 0; i < s.n; i++ {
		if c := s.cands[i]; c != nil {
			out.choices = append(out.choices, c.event(false))
			if i == 0 {
				out.finish = c.finish
			}
		}
	}
	if s.usage != nil {
		out.input, out.output = num(s.usage["promptTokenCount"]), num(s.usage["candidatesTokenCount"])
		out.extra["usageMetadata"] = s.usage
	}
	if s.model != "" {
		out.extra["modelVersion"] = s.model
	}
	if s.feedback != nil {
		out.extra["promptFeedback"] = s.feedback
	}
	out.extra["finishReason"] = out.finish
	return out
}

// Markers of Gemini JSON-array stream frames.
const (
	arrayChunk = "\x00array-chunk"
	arrayEnd   = "\x00array-end"
)

// readArray forwards a Gemini JSON-array stream as it arrives, chunk by
// chunk, and at its end gives the whole body for parsing (spec §4.5;
// with blocking rules such a stream runs in buffer mode).
func readArray(body io.Reader, frames chan<- *frame, readErr chan<- error) {
	var all []byte
	buf := make([]byte, 32<<10)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			chunk := append([]byte(nil), buf[:n]...)
			all = append(all, chunk...)
			frames <- &frame{raw: chunk, event: arrayChunk, data: []byte{}, at: time.Now()}
		}
		if err != nil {
			if err != io.EOF {
				readErr <- err
			}
			frames <- &frame{event: arrayEnd, data: all, at: time.Now()}
			return
		}
	}
}
