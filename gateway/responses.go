package gateway

import (
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// responsesProvider is the OpenAI Responses API (spec §4.3a). lookup
// finds an output item a recorded response produced (item_reference).
type responsesProvider struct {
	lookup func(id string) event
}

func (p responsesProvider) request(body map[string]any, _ url.Values) (*callInput, error) {
	in := &callInput{model: str(body["model"]), tools: body["tools"], previousResponse: str(body["previous_response_id"])}
	in.stream, _ = body["stream"].(bool)
	if ins := str(body["instructions"]); ins != "" {
		in.events = append(in.events, event{"role": "system", "content": ins})
		in.instructions = true
	}
	var reasoning string
	add := func(e event) {
		if reasoning != "" && e["role"] == "assistant" {
			e["reasoning"] = reasoning
			reasoning = ""
		}
		in.events = append(in.events, e)
	}
	addCall := func(call map[string]any) {
		if n := len(in.events); n > 0 {
			last := in.events[n-1]
			if last["role"] == "assistant" && last["item_reference"] == nil {
				calls, _ := last["tool_calls"].([]any)
				last["tool_calls"] = append(calls, call)
				return
			}
		}
		add(event{"role": "assistant", "content": "", "tool_calls": []any{call}})
	}
	switch x := body["input"].(type) {
	case string:
		add(event{"role": "user", "content": x})
	case []any:
		for i, it := range x {
			o := obj(it)
			if o == nil {
				return nil, badf("input[%d]: want an object", i)
			}
			typ := str(o["type"])
			switch {
			case typ == "message" || (typ == "" && o["role"] != nil):
				add(event{"role": str(o["role"]), "content": responsesContent(o["content"])})
			case typ == "function_call":
				addCall(map[string]any{"id": str(o["call_id"]), "type": "function", "function": map[string]any{"name": str(o["name"]), "arguments": str(o["arguments"])}})
			case typ == "function_call_output":
				out := o["output"]
				if _, ok := out.(string); !ok {
					out = textOf(out)
				}
				add(event{"role": "tool", "tool_call_id": str(o["call_id"]), "content": out})
			case typ == "reasoning":
				var parts []string
				for _, s := range list(o["summary"]) {
					parts = append(parts, str(obj(s)["text"]))
				}
				reasoning = strings.Join(parts, "\n")
			case typ == "item_reference":
				id := str(o["id"])
				var ref event
				if p.lookup != nil {
					ref = p.lookup(id)
				}
				switch {
				case ref == nil:
					add(event{"role": "assistant", "content": nil, "item_reference": id})
				case ref["tool_calls"] != nil && str(ref["content"]) == "":
					for _, c := range list(ref["tool_calls"]) {
						addCall(obj(c))
					}
				default:
					add(copyEvent(ref))
				}
			default:
				add(event{"role": "assistant", "content": nil, "vigil_item": o})
			}
		}
	case nil:
	default:
		return nil, badf("input: want a string or a list of items")
	}
	in.request = requestFields(body, "input", "tools", "instructions")
	return in, nil
}

// responsesContent maps message content: a string, or parts whose text
// is joined and whose images become image_url parts.
func responsesContent(c any) any {
	parts, ok := c.([]any)
	if !ok {
		return c
	}
	var texts []string
	var images []any
	for _, p := range parts {
		o := obj(p)
		switch str(o["type"]) {
		case "input_text", "output_text", "text", "refusal":
			t := str(o["text"])
			if t == "" {
				t = str(o["refusal"])
			}
			texts = append(texts, t)
		case "input_image":
			u := str(o["image_url"])
			images = append(images, map[string]any{"type": "image_url", "image_url": map[string]any{"url": u}})
		}
	}
	text := strings.Join(texts, "\n")
	if len(images) == 0 {
		return text
	}
	out := []any{}
	if text != "" {
		out = append(out, map[string]any{"type": "text", "text": text})
	}
	return append(out, images...)
}

// responseOutput maps a Response object's output items to the assistant
// event and the id of each item.
func responseOutput(r map[string]any) *callOutput {
	out := &callOutput{respID: str(r["id"]), model: str(r["model"]), items: map[string]event{}, extra: map[string]any{}}
	e := event{"role": "assistant"}
	var texts []string
	var calls []any
	for _, it := range list(r["output"]) {
		o := obj(it)
		switch str(o["type"]) {
		case "message":
			t := responsesContent(o["content"])
			ts, _ := t.(string)
			texts = append(texts, ts)
			if id := str(o["id"]); id != "" {
				out.items[id] = event{"role": "assistant", "content": ts}
			}
		case "function_call":
			c := map[string]any{"id": str(o["call_id"]), "type": "function", "function": map[string]any{"name": str(o["name"]), "arguments": str(o["arguments"])}}
			calls = append(calls, c)
			if id := str(o["id"]); id != "" {
				out.items[id] = event{"role": "assistant", "content": "", "tool_calls": []any{c}}
			}
		case "reasoning":
			var parts []string
			for _, s := range list(o["summary"]) {
				parts = append(parts, str(obj(s)["text"]))
			}
			if len(parts) > 0 {
				e["reasoning"] = strings.Join(parts, "\n")
			}
		}
	}
	e["content"] = strings.Join(texts, "\n")
	if len(calls) > 0 {
		e["tool_calls"] = calls
	}
	out.choices = []event{e}
	if u := obj(r["usage"]); u != nil {
		out.usage = u
		out.input, out.output = num(u["input_tokens"]), num(u["output_tokens"])
	}
	out.finish = str(r["status"])
	if len(calls) > 0 && out.finish == "completed" {
		out.finish = "tool_calls"
	}
	return out
}

func (responsesProvider) response(body []byte) (*callOutput, error) {
	r, err := decodeObject(body)
	if err != nil {
		return nil, fmt.Errorf("responses response: %w", err)
	}
	return responseOutput(r), nil
}

func (responsesProvider) stream() streamParser {
	return &responsesStream{calls: map[int]*respCall{}}
}

// responsesStream accumulates a Responses event stream.
type responsesStream struct {
	text   []byte
	n      int // code points of text
	calls  map[int]*respCall
	final  *callOutput
	id     string
	model  string
	failed string
}

type respCall struct {
	id, callID, name string
	args             []byte
	done             bool
}

func (s *responsesStream) call(i int) *respCall {
	c := s.calls[i]
	if c == nil {
		c = &respCall{}
		s.calls[i] = c
	}
	return c
}

func (s *responsesStream) feed(f *frame) {
	if f.data == nil {
		return
	}
	var ev struct {
		Type        string         `json:"type"`
		OutputIndex int            `json:"output_index"`
		Delta       string         `json:"delta"`
		Arguments   *string        `json:"arguments"`
		Item        map[string]any `json:"item"`
		Response    map[string]any `json:"response"`
		Message     string         `json:"message"`
		Code        any            `json:"code"`
	}
	if err := json.Unmarshal(f.data, &ev); err != nil {
		return
	}
	typ := ev.Type
	if typ == "" {
		typ = f.event
	}
	key := strconv.Itoa(ev.OutputIndex)
	textFrame := func() { f.kind, f.spans = kindText, []span{{0, s.n}} }
	switch typ {
	case "response.created", "response.in_progress":
		if ev.Response != nil {
			s.id, s.model = str(ev.Response["id"]), str(ev.Response["model"])
		}
	case "response.output_text.delta", "response.refusal.delta":
		s.text = append(s.text, ev.Delta...)
		s.n += utf8.RuneCountInString(ev.Delta)
		textFrame()
	case "response.output_text.done", "response.content_part.done", "response.refusal.done", "response.output_text.annotation.added":
		textFrame()
	case "response.output_item.added", "response.output_item.done":
		switch str(ev.Item["type"]) {
		case "function_call":
			c := s.call(ev.OutputIndex)
			c.id, c.callID, c.name = str(ev.Item["id"]), str(ev.Item["call_id"]), str(ev.Item["name"])
			if a := str(ev.Item["arguments"]); a != "" && typ == "response.output_item.done" {
				c.args = []byte(a)
			}
			if typ == "response.output_item.done" {
				c.done = true
			}
			f.kind, f.tool = kindTool, key
		case "message":
			if typ == "response.output_item.done" {
				textFrame()
			}
		}
	case "response.function_call_arguments.delta":
		c := s.call(ev.OutputIndex)
		c.args = append(c.args, ev.Delta...)
		f.kind, f.tool = kindTool, key
	case "response.function_call_arguments.done":
		c := s.call(ev.OutputIndex)
		if ev.Arguments != nil {
			c.args = []byte(*ev.Arguments)
		}
		c.done = true
		f.kind, f.tool = kindTool, key
	case "response.completed", "response.incomplete", "response.failed":
		if ev.Response != nil {
			s.final = responseOutput(ev.Response)
		}
		f.kind = kindFinal
		s.finish()
	case "error":
		b, _ := json.Marshal(map[string]any{"message": ev.Message, "code": ev.Code})
		s.failed = string(b)
	}
}

func (s *responsesStream) finish() {
	for _, c := range s.calls {
		c.done = true
	}
}

func (s *responsesStream) textLens() map[int]int { return map[int]int{0: s.n} }

func (s *responsesStream) toolDone(key string) bool {
	i, _ := strconv.Atoi(key)
	c := s.calls[i]
	return c != nil && c.done
}

func (s *responsesStream) draft() ([]event, []string) {
	e := event{"role": "assistant", "content": string(s.text)}
	idx := make([]int, 0, len(s.calls))
	for i := range s.calls {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	var calls []any
	var keys []string
	for _, i := range idx {
		c := s.calls[i]
		if !c.done {
			continue
		}
		calls = append(calls, map[string]any{"id": c.callID, "type": "function", "function": map[string]any{"name": c.name, "arguments": string(c.args)}})
		keys = append(keys, strconv.Itoa(i))
	}
	if len(calls) > 0 {
		e["tool_calls"] = calls
	}
	return []event{e}, keys
}

func (s *responsesStream) output() *callOutput {
	if s.final != nil {
		s.final.failed = s.failed
		return s.final
	}
	evs, _ := s.draft()
	return &callOutput{choices: evs, respID: s.id, model: s.model, failed: s.failed}
}
