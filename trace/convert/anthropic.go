package convert

import (
	"errors"
	"fmt"
	"strings"

	"github.com/vigilhq/vigil/trace"
)

// ErrInvalid is matched (errors.Is) when an input cannot be converted.
var ErrInvalid = errors.New("cannot convert")

// convErr is a conversion error at a JSON path of the input.
type convErr struct {
	path string
	msg  string
}

func (e *convErr) Error() string { return e.path + ": " + e.msg }
func (e *convErr) Unwrap() error { return ErrInvalid }

func errAt(path, format string, args ...any) error {
	return &convErr{path: path, msg: fmt.Sprintf(format, args...)}
}

// AnthropicResult is what an Anthropic response carries besides the
// message: the gateway keeps it in the call record (gateway §4.4).
type AnthropicResult struct {
	ID, Model    string
	StopReason   string
	StopSequence string
	// Usage is the usage object, or nil.
	Usage *trace.Object
}

// FromAnthropicRequest converts a Messages API request body
// ({"system", "messages": [...], ...}) into a trace: the system prompt as
// a first system event, then each message mapped by AnthropicMessage.
func FromAnthropicRequest(body []byte) (*trace.Trace, error) {
	v, err := trace.ParseValue(body)
	if err != nil {
		return nil, fmt.Errorf("anthropic request: %w", err)
	}
	req, ok := v.(*trace.Object)
	if !ok {
		return nil, fmt.Errorf("anthropic request: %w", errAt("$", "request is %s, want an object", trace.TypeName(v)))
	}
	events, err := anthropicRequestEvents(req)
	if err != nil {
		return nil, fmt.Errorf("anthropic request: %w", err)
	}
	return newTrace(events)
}

func anthropicRequestEvents(req *trace.Object) ([]trace.Value, error) {
	var events []trace.Value
	if sys, ok := req.Get("system"); ok && sys != nil {
		content, err := systemContent(sys)
		if err != nil {
			return nil, err
		}
		events = append(events, trace.NewObject("role", "system", "content", content))
	}
	mv, ok := req.Get("messages")
	if !ok {
		return nil, errAt("messages", "missing")
	}
	msgs, ok := mv.([]trace.Value)
	if !ok {
		return nil, errAt("messages", "is %s, want an array", trace.TypeName(mv))
	}
	for i, m := range msgs {
		path := fmt.Sprintf("messages[%d]", i)
		mo, ok := m.(*trace.Object)
		if !ok {
			return nil, errAt(path, "is %s, want an object", trace.TypeName(m))
		}
		rv, _ := mo.Get("role")
		role, ok := rv.(string)
		if !ok {
			return nil, errAt(path+".role", "is %s, want a string", trace.TypeName(rv))
		}
		content, _ := mo.Get("content")
		evs, err := anthropicMessage(path, role, content)
		if err != nil {
			return nil, err
		}
		events = append(events, evs...)
	}
	return events, nil
}

// systemContent maps the system prompt: a string, or text blocks (one
// block gives string content).
func systemContent(sys trace.Value) (trace.Value, error) {
	switch s := sys.(type) {
	case string:
		return s, nil
	case []trace.Value:
		parts, _, _, err := mapBlocks("system", s, nil)
		if err != nil {
			return nil, err
		}
		return partsContent(parts), nil
	}
	return nil, errAt("system", "is %s, want a string or an array of text blocks", trace.TypeName(sys))
}

// FromAnthropicResponse converts a non-streaming Messages API response
// body into its assistant event and the call-record fields.
func FromAnthropicResponse(body []byte) (*trace.Event, *AnthropicResult, error) {
	v, err := trace.ParseValue(body)
	if err != nil {
		return nil, nil, fmt.Errorf("anthropic response: %w", err)
	}
	ev, res, err := anthropicResponse(v)
	if err != nil {
		return nil, nil, fmt.Errorf("anthropic response: %w", err)
	}
	e, err := trace.NewEvent(ev)
	if err != nil {
		return nil, nil, fmt.Errorf("anthropic response: %w", err)
	}
	return e, res, nil
}

func anthropicResponse(v trace.Value) (trace.Value, *AnthropicResult, error) {
	resp, ok := v.(*trace.Object)
	if !ok {
		return nil, nil, errAt("$", "response is %s, want an object", trace.TypeName(v))
	}
	if t, _ := resp.Get("type"); t == "error" {
		return nil, nil, errAt("type", "the response is an error")
	}
	res := &AnthropicResult{}
	res.ID = str(resp, "id")
	res.Model = str(resp, "model")
	res.StopReason = str(resp, "stop_reason")
	res.StopSequence = str(resp, "stop_sequence")
	if u, ok := resp.Get("usage"); ok {
		res.Usage, _ = u.(*trace.Object)
	}
	role := "assistant"
	if r, ok := resp.Get("role"); ok {
		if rs, ok := r.(string); ok {
			role = rs
		}
	}
	content, _ := resp.Get("content")
	evs, err := anthropicMessage("", role, content)
	if err != nil {
		return nil, nil, err
	}
	if len(evs) != 1 {
		return nil, nil, errAt("content", "a response must map to one assistant event, got %d", len(evs))
	}
	return evs[0], res, nil
}

func str(o *trace.Object, key string) string {
	v, _ := o.Get(key)
	s, _ := v.(string)
	return s
}

// FromAnthropic converts a request and its response into one trace: the
// request's events followed by the response's assistant event. response
// may be nil (a request whose answer was not recorded).
func FromAnthropic(request, response []byte) (*trace.Trace, error) {
	v, err := trace.ParseValue(request)
	if err != nil {
		return nil, fmt.Errorf("anthropic request: %w", err)
	}
	req, ok := v.(*trace.Object)
	if !ok {
		return nil, fmt.Errorf("anthropic request: %w", errAt("$", "request is %s, want an object", trace.TypeName(v)))
	}
	events, err := anthropicRequestEvents(req)
	if err != nil {
		return nil, fmt.Errorf("anthropic request: %w", err)
	}
	if response != nil {
		rv, err := trace.ParseValue(response)
		if err != nil {
			return nil, fmt.Errorf("anthropic response: %w", err)
		}
		ev, _, err := anthropicResponse(rv)
		if err != nil {
			return nil, fmt.Errorf("anthropic response: %w", err)
		}
		events = append(events, ev)
	}
	return newTrace(events)
}

func newTrace(events []trace.Value) (*trace.Trace, error) {
	if events == nil {
		events = []trace.Value{}
	}
	t, err := trace.FromValue(events)
	if err != nil {
		return nil, fmt.Errorf("converted trace: %w", err)
	}
	return t, nil
}

// AnthropicMessage converts one Anthropic message (role and content, a
// string or a list of blocks) into trace events, as gateway §4.4 maps them:
//
//   - text blocks become text parts (kept whole, with citations and
//     cache_control); a single plain text part becomes string content;
//   - an image block becomes an image_url part (a data URI for a base64
//     source, the URL for a url source);
//   - tool_use{id, name, input} becomes a tool_calls entry
//     {id, type: "function", function: {name, arguments: input}};
//   - tool_result{tool_use_id, content, is_error} becomes its own event
//     {role: "tool", tool_call_id, content, error: true when is_error},
//     placed before the rest of the message;
//   - thinking becomes the event key "reasoning" (texts joined by "\n"),
//     redacted_thinking sets "reasoning_redacted": true;
//   - any other block (documents, server tools, citations...) is kept
//     verbatim as a part.
//
// A message that held only tool results gives only tool events. The
// returned values are stored elements; trace.NewEvent or trace.FromValue
// normalises them.
func AnthropicMessage(role string, content trace.Value) ([]trace.Value, error) {
	return anthropicMessage("", role, content)
}

func anthropicMessage(path, role string, content trace.Value) ([]trace.Value, error) {
	cpath := join(path, "content")
	var (
		parts   []trace.Value
		calls   []trace.Value
		results []trace.Value
		extra   []trace.Member
	)
	switch c := content.(type) {
	case string:
		parts = []trace.Value{trace.NewObject("type", "text", "text", c)}
	case nil:
	case []trace.Value:
		var err error
		var reasoning []string
		redacted := false
		parts, calls, results, err = mapBlocks(cpath, c, func(kind string, b *trace.Object) {
			switch kind {
			case "thinking":
				if t, ok := b.Get("thinking"); ok {
					if s, ok := t.(string); ok {
						reasoning = append(reasoning, s)
					}
				}
			case "redacted_thinking":
				redacted = true
			}
		})
		if err != nil {
			return nil, err
		}
		if reasoning != nil {
			extra = append(extra, trace.Member{Key: "reasoning", Value: strings.Join(reasoning, "\n")})
		}
		if redacted {
			extra = append(extra, trace.Member{Key: "reasoning_redacted", Value: true})
		}
	default:
		return nil, errAt(cpath, "is %s, want a string or an array of blocks", trace.TypeName(content))
	}
	events := results
	if len(parts) > 0 || len(calls) > 0 || len(extra) > 0 || len(results) == 0 {
		ev := trace.NewObject("role", role, "content", partsContent(parts))
		if len(calls) > 0 {
			ev.Set("tool_calls", calls)
		}
		ev.Members = append(ev.Members, extra...)
		events = append(events, ev)
	}
	return events, nil
}

// partsContent returns the content for a list of parts: null for none, a
// string for a single text part, else the list.
func partsContent(parts []trace.Value) trace.Value {
	switch len(parts) {
	case 0:
		return nil
	case 1:
		if o, ok := parts[0].(*trace.Object); ok && o.Len() == 2 {
			if t, _ := o.Get("type"); t == "text" {
				if s, ok := o.Get("text"); ok {
					if _, ok := s.(string); ok {
						return s
					}
				}
			}
		}
	}
	return parts
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// mapBlocks maps content blocks to parts, tool calls and tool-result
// events. seen is called for thinking blocks; a nil seen marks nested
// content (system prompt, tool result), where thinking, tool_use and
// tool_result blocks are kept verbatim as parts.
func mapBlocks(path string, blocks []trace.Value, seen func(kind string, b *trace.Object)) (parts, calls, results []trace.Value, err error) {
	for i, bv := range blocks {
		bpath := fmt.Sprintf("%s[%d]", path, i)
		b, ok := bv.(*trace.Object)
		if !ok {
			return nil, nil, nil, errAt(bpath, "block is %s, want an object", trace.TypeName(bv))
		}
		tv, _ := b.Get("type")
		kind, _ := tv.(string)
		switch kind {
		case "text":
			t, _ := b.Get("text")
			if _, ok := t.(string); !ok {
				return nil, nil, nil, errAt(bpath+".text", "is %s, want a string", trace.TypeName(t))
			}
			// The block is already a text part; keeping it whole keeps
			// citations and cache_control.
			parts = append(parts, b)
		case "image":
			p, err := imagePart(bpath, b)
			if err != nil {
				return nil, nil, nil, err
			}
			parts = append(parts, p)
		case "tool_use", "tool_result":
			if seen == nil {
				// Nested (system prompt, tool result): no event to map
				// to, so the block is kept verbatim rather than lost.
				parts = append(parts, b)
				continue
			}
			if kind == "tool_result" {
				ev, err := toolResult(bpath, b)
				if err != nil {
					return nil, nil, nil, err
				}
				results = append(results, ev)
				continue
			}
			id, _ := b.Get("id")
			name, ok := b.Get("name")
			if !ok {
				return nil, nil, nil, errAt(bpath, `tool_use block has no "name"`)
			}
			if _, ok := name.(string); !ok {
				return nil, nil, nil, errAt(bpath+".name", "is %s, want a string", trace.TypeName(name))
			}
			input, ok := b.Get("input")
			if !ok || input == nil {
				input = &trace.Object{}
			}
			calls = append(calls, trace.NewObject("id", id, "type", "function",
				"function", trace.NewObject("name", name, "arguments", input)))
		case "thinking", "redacted_thinking":
			if seen == nil {
				parts = append(parts, b)
				continue
			}
			seen(kind, b)
		default:
			parts = append(parts, b)
		}
	}
	return parts, calls, results, nil
}

func imagePart(path string, b *trace.Object) (trace.Value, error) {
	sv, _ := b.Get("source")
	src, ok := sv.(*trace.Object)
	if !ok {
		return nil, errAt(path+".source", "is %s, want an object", trace.TypeName(sv))
	}
	url := ""
	switch str(src, "type") {
	case "base64":
		mt, data := str(src, "media_type"), str(src, "data")
		if mt == "" || data == "" {
			return nil, errAt(path+".source", `a base64 source needs "media_type" and "data"`)
		}
		url = "data:" + mt + ";base64," + data
	case "url":
		url = str(src, "url")
		if url == "" {
			return nil, errAt(path+".source.url", "missing")
		}
	default:
		// file ids and future source kinds: keep the block verbatim.
		return b, nil
	}
	return trace.NewObject("type", "image_url", "image_url", trace.NewObject("url", url)), nil
}

func toolResult(path string, b *trace.Object) (trace.Value, error) {
	id, ok := b.Get("tool_use_id")
	if _, isStr := id.(string); !ok || !isStr {
		return nil, errAt(path+".tool_use_id", "is %s, want a string", trace.TypeName(id))
	}
	var content trace.Value
	switch c, _ := b.Get("content"); c := c.(type) {
	case nil:
	case string:
		content = c
	case []trace.Value:
		parts, _, _, err := mapBlocks(path+".content", c, nil)
		if err != nil {
			return nil, err
		}
		content = partsContent(parts)
	default:
		return nil, errAt(path+".content", "is %s, want a string or an array of blocks", trace.TypeName(c))
	}
	ev := trace.NewObject("role", "tool", "tool_call_id", id, "content", content)
	if e, _ := b.Get("is_error"); e == true {
		ev.Set("error", true)
	}
	return ev, nil
}
