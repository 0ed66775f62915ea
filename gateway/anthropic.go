package gateway

import (
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"unicode/utf8"

	"github.com/vigilhq/vigil/trace"
	"github.com/vigilhq/vigil/trace/convert"
)

// anthropicProvider is the Anthropic Messages API (spec §4.4); its
// request and response mapping is the trace package's converter.
type anthropicProvider struct{}

func (anthropicProvider) request(body map[string]any, _ url.Values) (*callInput, error) {
	raw, _ := json.Marshal(body)
	t, err := convert.FromAnthropicRequest(raw)
	if err != nil {
		return nil, badf("%v", err)
	}
	in := &callInput{model: str(body["model"]), tools: body["tools"]}
	in.stream, _ = body["stream"].(bool)
	if err := json.Unmarshal(t.Encode(), &in.events); err != nil {
		return nil, badf("messages: %v", err)
	}
	in.request = requestFields(body, "messages", "tools", "system")
	return in, nil
}

func (anthropicProvider) response(body []byte) (*callOutput, error) {
	e, res, err := convert.FromAnthropicResponse(body)
	if err != nil {
		return nil, err
	}
	ev, err := decodeObject(trace.Marshal(e.Object()))
	if err != nil {
		return nil, fmt.Errorf("anthropic response: %w", err)
	}
	out := &callOutput{choices: []event{ev}, finish: res.StopReason, model: res.Model,
		extra: map[string]any{"stop_reason": res.StopReason}}
	if res.Usage != nil {
		out.usage, _ = decodeObject(trace.Marshal(res.Usage))
		out.input, out.output = num(out.usage["input_tokens"]), num(out.usage["output_tokens"])
	}
	return out, nil
}

func (anthropicProvider) stream() streamParser {
	return &anthropicStream{blocks: map[int]*anthBlock{}}
}

// anthropicStream accumulates a Messages stream by content block.
type anthropicStream struct {
	blocks    map[int]*anthBlock
	text      int // code points of text and thinking
	model, id string
	stop      string
	usage     map[string]any
	failed    string
	done      bool
}

type anthBlock struct {
	typ   string // text, tool_use, thinking, redacted_thinking, …
	text  []byte
	id    string
	name  string
	input []byte
	done  bool
	raw   map[string]any
}

func (s *anthropicStream) feed(f *frame) {
	if f.data == nil {
		return
	}
	var ev struct {
		Type         string          `json:"type"`
		Index        int             `json:"index"`
		Message      map[string]any  `json:"message"`
		ContentBlock map[string]any  `json:"content_block"`
		Delta        map[string]any  `json:"delta"`
		Usage        map[string]any  `json:"usage"`
		Error        json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(f.data, &ev); err != nil {
		return
	}
	switch ev.Type {
	case "message_start":
		s.model, s.id = str(ev.Message["model"]), str(ev.Message["id"])
		if u := obj(ev.Message["usage"]); u != nil {
			s.usage = u
		}
	case "content_block_start":
		b := &anthBlock{typ: str(ev.ContentBlock["type"]), raw: ev.ContentBlock}
		b.id, b.name = str(ev.ContentBlock["id"]), str(ev.ContentBlock["name"])
		if t := str(ev.ContentBlock["text"]); t != "" {
			b.text = append(b.text, t...)
			s.text += utf8.RuneCountInString(t)
			f.kind, f.spans = kindText, []span{{0, s.text}}
		}
		s.blocks[ev.Index] = b
		if b.typ == "tool_use" || b.typ == "server_tool_use" {
			f.kind, f.tool = kindTool, strconv.Itoa(ev.Index)
		}
	case "content_block_delta":
		b := s.blocks[ev.Index]
		if b == nil {
			b = &anthBlock{typ: "text"}
			s.blocks[ev.Index] = b
		}
		switch str(ev.Delta["type"]) {
		case "text_delta", "thinking_delta":
			t := str(ev.Delta["text"])
			if t == "" {
				t = str(ev.Delta["thinking"])
			}
			b.text = append(b.text, t...)
			s.text += utf8.RuneCountInString(t)
			f.kind, f.spans = kindText, []span{{0, s.text}}
		case "input_json_delta":
			b.input = append(b.input, str(ev.Delta["partial_json"])...)
			f.kind, f.tool = kindTool, strconv.Itoa(ev.Index)
		default: // signature_delta, citations_delta
			if b.typ == "tool_use" {
				f.kind, f.tool = kindTool, strconv.Itoa(ev.Index)
			}
		}
	case "content_block_stop":
		if b := s.blocks[ev.Index]; b != nil {
			b.done = true
			if b.typ == "tool_use" || b.typ == "server_tool_use" {
				f.kind, f.tool = kindTool, strconv.Itoa(ev.Index)
			}
		}
	case "message_delta":
		s.stop = str(ev.Delta["stop_reason"])
		if ev.Usage != nil {
			if s.usage == nil {
				s.usage = map[string]any{}
			}
			for k, v := range ev.Usage {
				s.usage[k] = v
			}
		}
		f.kind = kindFinal
	case "message_stop":
		f.kind = kindFinal
		s.finish()
	case "error":
		s.failed = string(ev.Error)
	}
}

func (s *anthropicStream) finish() {
	s.done = true
	for _, b := range s.blocks {
		b.done = true
	}
}

func (s *anthropicStream) textLens() map[int]int { return map[int]int{0: s.text} }

func (s *anthropicStream) toolDone(key string) bool {
	i, _ := strconv.Atoi(key)
	b := s.blocks[i]
	return b != nil && b.done
}

// event builds the assistant event; with draft only complete tool calls.
func (s *anthropicStream) event(draft bool) (event, []string) {
	idx := make([]int, 0, len(s.blocks))
	for i := range s.blocks {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	var text, reasoning []byte
	var calls []any
	var keys []string
	for _, i := range idx {
		b := s.blocks[i]
		switch b.typ {
		case "text":
			text = append(text, b.text...)
		case "thinking":
			reasoning = append(reasoning, b.text...)
		case "tool_use", "server_tool_use":
			if draft && !b.done {
				continue
			}
			var input any = map[string]any{}
			if len(b.input) > 0 {
				if err := json.Unmarshal(b.input, &input); err != nil {
					input = string(b.input)
				}
			}
			calls = append(calls, map[string]any{"id": b.id, "type": "function", "function": map[string]any{"name": b.name, "arguments": input}})
			keys = append(keys, strconv.Itoa(i))
		}
	}
	e := event{"role": "assistant", "content": string(text)}
	if draft && len(reasoning) > 0 {
		e["content"] = string(reasoning) + "\n" + string(text)
	} else if len(reasoning) > 0 {
		e["reasoning"] = string(reasoning)
	}
	if len(calls) > 0 {
		e["tool_calls"] = calls
	}
	return e, keys
}

func (s *anthropicStream) draft() ([]event, []string) {
	e, keys := s.event(true)
	return []event{e}, keys
}

func (s *anthropicStream) output() *callOutput {
	e, _ := s.event(false)
	out := &callOutput{choices: []event{e}, finish: s.stop, model: s.model, usage: s.usage, failed: s.failed,
		extra: map[string]any{"stop_reason": s.stop}}
	if s.usage != nil {
		out.input, out.output = num(s.usage["input_tokens"]), num(s.usage["output_tokens"])
	}
	return out
}
