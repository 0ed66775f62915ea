package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"unicode/utf8"

	"github.com/vigilhq/vigil/trace"
)

// chatProvider is OpenAI chat completions (spec §4.3), also used by
// azure-openai and every OpenAI-compatible upstream.
type chatProvider struct{}

func (chatProvider) request(body map[string]any, _ url.Values) (*callInput, error) {
	msgs, ok := body["messages"].([]any)
	if !ok {
		return nil, badf("messages: want a list of messages")
	}
	in := &callInput{model: str(body["model"]), tools: body["tools"]}
	in.stream, _ = body["stream"].(bool)
	for i, m := range msgs {
		o := obj(m)
		if o == nil {
			return nil, badf("messages[%d]: want an object", i)
		}
		in.events = append(in.events, dropNulls(o))
	}
	in.request = requestFields(body, "messages", "tools")
	return in, nil
}

// chatResponse is the part of a chat completion the gateway reads.
type chatResponse struct {
	ID      string           `json:"id"`
	Model   string           `json:"model"`
	Choices []map[string]any `json:"choices"`
	Usage   map[string]any   `json:"usage"`
}

// decodeFast decodes body into r as encoding/json would, with the fast
// scanner; false when it cannot tell (say, malformed JSON or a field of
// the wrong type): the caller then takes encoding/json, for its result
// and its error.
func (r *chatResponse) decodeFast(body []byte) bool {
	v, err := trace.UnmarshalAnyOwned(body)
	top, ok := v.(map[string]any)
	if err != nil || !ok {
		return false
	}
	for k, x := range top {
		switch k {
		case "id":
			ok = stringField(&r.ID, x)
		case "model":
			ok = stringField(&r.Model, x)
		case "usage":
			ok = objectField(&r.Usage, x)
		case "choices":
			switch l := x.(type) {
			case nil:
			case []any:
				r.Choices = make([]map[string]any, len(l))
				for i, e := range l {
					if ok = objectField(&r.Choices[i], e); !ok {
						break
					}
				}
			default:
				ok = false
			}
		default:
			ok = !foldsTo(k, "id", "model", "usage", "choices")
		}
		if !ok {
			return false
		}
	}
	return true
}

func (chatProvider) response(body []byte) (*callOutput, error) {
	var r chatResponse
	if !r.decodeFast(body) {
		r = chatResponse{}
		if err := json.Unmarshal(body, &r); err != nil {
			return nil, fmt.Errorf("chat completion response: %w", err)
		}
	}
	out := &callOutput{model: r.Model, usage: r.Usage}
	if r.Usage != nil {
		out.input, out.output = num(r.Usage["prompt_tokens"]), num(r.Usage["completion_tokens"])
	}
	for i, c := range r.Choices {
		m := obj(c["message"])
		if m == nil {
			m = map[string]any{"role": "assistant"}
		}
		out.choices = append(out.choices, dropNulls(m))
		if i == 0 {
			out.finish = str(c["finish_reason"])
		}
	}
	return out, nil
}

func (chatProvider) stream() streamParser { return &chatStream{choices: map[int]*chatChoice{}} }

// chatStream accumulates a chat-completions stream per choice index.
type chatStream struct {
	choices map[int]*chatChoice
	id      string
	model   string
	usage   map[string]any
	failed  string
	done    bool
}

type chatChoice struct {
	role    string
	content []byte
	refusal []byte
	text    int // code points of content + refusal
	tools   map[int]*chatTool
	maxTool int
	finish  string
}

type chatTool struct {
	id, typ, name string
	args          []byte
	done          bool
}

func (s *chatStream) choice(i int) *chatChoice {
	c := s.choices[i]
	if c == nil {
		c = &chatChoice{tools: map[int]*chatTool{}, maxTool: -1}
		s.choices[i] = c
	}
	return c
}

func toolKey(choice, index int) string { return strconv.Itoa(choice) + ":" + strconv.Itoa(index) }

func (s *chatStream) feed(f *frame) {
	if f.data == nil {
		return // a comment
	}
	if bytes.Equal(bytes.TrimSpace(f.data), []byte("[DONE]")) {
		f.kind = kindFinal
		s.finish()
		return
	}
	var chunk struct {
		ID      string         `json:"id"`
		Model   string         `json:"model"`
		Usage   map[string]any `json:"usage"`
		Error   any            `json:"error"`
		Choices []struct {
			Index int `json:"index"`
			Delta struct {
				Role      string  `json:"role"`
				Content   *string `json:"content"`
				Refusal   *string `json:"refusal"`
				ToolCalls []struct {
					Index    int    `json:"index"`
					ID       string `json:"id"`
					Type     string `json:"type"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"delta"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(f.data, &chunk); err != nil {
		return // forwarded uninspected, neutral
	}
	if chunk.Error != nil {
		b, _ := json.Marshal(chunk.Error)
		s.failed = string(b)
		return
	}
	if chunk.ID != "" {
		s.id = chunk.ID
	}
	if chunk.Model != "" {
		s.model = chunk.Model
	}
	if chunk.Usage != nil {
		s.usage = chunk.Usage
		if len(chunk.Choices) == 0 {
			f.kind = kindFinal
		}
	}
	for _, ch := range chunk.Choices {
		c := s.choice(ch.Index)
		d := ch.Delta
		if d.Role != "" {
			c.role = d.Role
		}
		for _, t := range []*string{d.Content, d.Refusal} {
			if t == nil || *t == "" {
				continue
			}
			if t == d.Content {
				c.content = append(c.content, *t...)
			} else {
				c.refusal = append(c.refusal, *t...)
			}
			c.text += utf8.RuneCountInString(*t)
			if f.kind == kindNeutral {
				f.kind = kindText
			}
			f.spans = append(f.spans, span{ch.Index, c.text})
		}
		for _, tc := range d.ToolCalls {
			if tc.Index > c.maxTool {
				for _, old := range c.tools {
					old.done = true // the next tool call started
				}
				c.maxTool = tc.Index
			}
			t := c.tools[tc.Index]
			if t == nil {
				t = &chatTool{}
				c.tools[tc.Index] = t
			}
			if t.id == "" {
				t.id = tc.ID
			}
			if t.typ == "" {
				t.typ = tc.Type
			}
			if t.name == "" {
				t.name = tc.Function.Name
			}
			t.args = append(t.args, tc.Function.Arguments...)
			if f.kind != kindFinal {
				f.kind = kindTool
				if f.tool == "" {
					f.tool = toolKey(ch.Index, tc.Index)
				}
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			c.finish = *ch.FinishReason
			for _, t := range c.tools {
				t.done = true
			}
			if f.kind != kindTool {
				f.kind = kindFinal
			}
		}
	}
}

func (s *chatStream) finish() {
	s.done = true
	for _, c := range s.choices {
		for _, t := range c.tools {
			t.done = true
		}
	}
}

func (s *chatStream) textLens() map[int]int {
	m := make(map[int]int, len(s.choices))
	for i, c := range s.choices {
		m[i] = c.text
	}
	return m
}

func (s *chatStream) toolDone(key string) bool {
	var ci, ti int
	if _, err := fmt.Sscanf(key, "%d:%d", &ci, &ti); err != nil {
		return false
	}
	c := s.choices[ci]
	if c == nil || c.tools[ti] == nil {
		return false
	}
	return c.tools[ti].done
}

func (s *chatStream) indices() []int {
	idx := make([]int, 0, len(s.choices))
	for i := range s.choices {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	return idx
}

// event builds choice c's assistant event; with draft, only complete
// tool calls and the text joined as content.
func (c *chatChoice) event(draft bool) (event, []int) {
	e := event{"role": "assistant"}
	if c.role != "" {
		e["role"] = c.role
	}
	if draft {
		e["content"] = string(c.content) + string(c.refusal)
	} else {
		if len(c.content) > 0 || len(c.tools) == 0 {
			e["content"] = string(c.content)
		}
		if len(c.refusal) > 0 {
			e["refusal"] = string(c.refusal)
		}
	}
	idx := make([]int, 0, len(c.tools))
	for i := range c.tools {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	var calls []any
	var done []int
	for _, i := range idx {
		t := c.tools[i]
		if draft && !t.done {
			continue
		}
		done = append(done, i)
		typ := t.typ
		if typ == "" {
			typ = "function"
		}
		calls = append(calls, map[string]any{"id": t.id, "type": typ, "function": map[string]any{"name": t.name, "arguments": string(t.args)}})
	}
	if len(calls) > 0 {
		e["tool_calls"] = calls
	}
	return e, done
}

func (s *chatStream) draft() ([]event, []string) {
	var evs []event
	var keys []string
	for _, i := range s.indices() {
		e, done := s.choices[i].event(true)
		evs = append(evs, e)
		for _, t := range done {
			keys = append(keys, toolKey(i, t))
		}
	}
	return evs, keys
}

func (s *chatStream) output() *callOutput {
	out := &callOutput{model: s.model, usage: s.usage, failed: s.failed}
	if s.usage != nil {
		out.input, out.output = num(s.usage["prompt_tokens"]), num(s.usage["completion_tokens"])
	}
	for n, i := range s.indices() {
		e, _ := s.choices[i].event(false)
		out.choices = append(out.choices, e)
		if n == 0 {
			out.finish = s.choices[i].finish
		}
	}
	return out
}
