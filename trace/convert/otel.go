package convert

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vigilhq/vigil/trace"
)

// This file maps one OpenTelemetry span (in a decoder-neutral form) to
// trace events, following the GenAI conventions and the other forms
// spec explorer-api §11 lists: the current gen_ai.input/output.messages,
// the legacy gen_ai.*.message events and gen_ai.prompt.N.* attributes,
// OpenInference llm.*_messages and the Vercel AI SDK ai.* attributes.
// Grouping, history de-duplication and storage are the otlp package's:
// this file only says what one span holds. otel_attrs.go holds the
// attribute-reading helpers.

// OTelSpan is one span as the OTLP decoder hands it over. Attribute
// values are trace values: string, bool, trace.Number, []trace.Value
// (array), *trace.Object (key-value list); bytes are base64 strings.
type OTelSpan struct {
	TraceID, SpanID, ParentSpanID string // lower-case hex
	Name                          string
	Start, End                    time.Time
	Attrs                         map[string]trace.Value
	Events                        []OTelEvent
	// Resource holds the resource attributes of the span.
	Resource map[string]trace.Value
}

// OTelEvent is a span event or a log record: its name (event.name for a
// log record), time, attributes and, for a log record, its body.
type OTelEvent struct {
	Name  string
	Time  time.Time
	Attrs map[string]trace.Value
	Body  trace.Value // nil for span events
}

// OTelKind is what a span contributes to a trace.
type OTelKind uint8

// Span kinds (spec §11 items 2–6).
const (
	OTelOther     OTelKind = iota // not relevant, or relevant with nothing to map
	OTelChat                      // chat, generate_content, text_completion, legacy and LLM spans
	OTelTool                      // execute_tool, OpenInference TOOL, Vercel ai.toolCall
	OTelAgent                     // invoke_agent and wrapper spans (agent_step, ai.generateText, CHAIN)
	OTelGuardrail                 // apply_guardrail
)

func (k OTelKind) String() string {
	return [...]string{"other", "chat", "tool", "agent", "guardrail"}[k]
}

// OTelResult is what one span holds.
type OTelResult struct {
	Kind OTelKind
	// Relevant is false for spans without any GenAI data (counted and
	// dropped by the caller).
	Relevant bool
	// Conversation is gen_ai.conversation.id, else session.id (span,
	// then resource), else "".
	Conversation string
	// Input and Output are the chat (or agent) span's events: input
	// timestamped at the span start, output at its end.
	Input, Output []*trace.Object
	// ToolOutput is the tool span's output event ({role: tool,
	// tool_call_id, content}), nil when the span has no call id.
	ToolOutput *trace.Object
	Model      string
	Provider   string
	AgentName  string
	// Usage: token counts; HasUsage when the span reports any.
	InputTokens, OutputTokens int64
	HasUsage                  bool
	FinishReasons             []string
	// Guardrails are the guardrail results of the span (the span's own
	// for apply_guardrail, and its gen_ai.guardrail.result events): the
	// attributes as sent.
	Guardrails []*trace.Object
}

// FromOTelSpan maps one span. It never panics on any input; an error
// means the span is relevant but its message data cannot be read (the
// caller reports it as rejected).
func FromOTelSpan(s *OTelSpan) (res *OTelResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, fmt.Errorf("span %s: cannot map: %v", s.SpanID, r)
		}
	}()
	a := attrs(s.Attrs)
	r := &OTelResult{Kind: classify(s, a)}
	r.Relevant = r.Kind != OTelOther || a.hasPrefix("gen_ai.") || a.has("openinference.span.kind")
	r.Conversation = a.str("gen_ai.conversation.id")
	if r.Conversation == "" {
		r.Conversation = a.str("session.id")
	}
	ra := attrs(s.Resource)
	if r.Conversation == "" {
		r.Conversation = cmpOr(ra.str("gen_ai.conversation.id"), ra.str("session.id"))
	}
	r.AgentName = a.str("gen_ai.agent.name")
	r.Model = cmpOr(a.str("gen_ai.response.model"), a.str("gen_ai.request.model"), a.str("llm.model_name"),
		a.str("ai.response.model"), a.str("ai.model.id"))
	r.Provider = cmpOr(a.str("gen_ai.provider.name"), a.str("gen_ai.system"), a.str("llm.provider"), a.str("llm.system"), a.str("ai.model.provider"))
	r.usage(a)
	r.finishReasons(a)
	for _, ev := range s.Events {
		if ev.Name == "gen_ai.guardrail.result" {
			r.Guardrails = append(r.Guardrails, objectOf(ev.Attrs))
		}
	}
	switch r.Kind {
	case OTelChat, OTelAgent:
		if err := r.messages(s, a); err != nil {
			return nil, fmt.Errorf("span %s (%s): %w", s.SpanID, s.Name, err)
		}
	case OTelTool:
		r.toolOutput(s, a)
	case OTelGuardrail:
		r.Guardrails = append([]*trace.Object{objectOf(s.Attrs)}, r.Guardrails...)
	}
	return r, nil
}

// classify tells a span's kind (spec §11 item 2).
func classify(s *OTelSpan, a attrs) OTelKind {
	switch op := a.str("gen_ai.operation.name"); op {
	case "chat", "generate_content", "text_completion":
		return OTelChat
	case "execute_tool":
		return OTelTool
	case "invoke_agent", "create_agent", "agent_step", "invoke_workflow":
		return OTelAgent
	case "apply_guardrail":
		return OTelGuardrail
	case "":
	default:
		return OTelOther
	}
	switch a.str("openinference.span.kind") {
	case "LLM":
		return OTelChat
	case "TOOL":
		return OTelTool
	case "AGENT", "CHAIN":
		return OTelAgent
	case "":
	default:
		return OTelOther
	}
	if op := cmpOr(a.str("ai.operationId"), a.str("operation.name")); strings.HasPrefix(op, "ai.") {
		switch {
		case strings.HasSuffix(op, ".doGenerate"), strings.HasSuffix(op, ".doStream"):
			return OTelChat
		case op == "ai.toolCall":
			return OTelTool
		case a.has("ai.prompt") || a.has("ai.prompt.messages") || a.has("ai.response.text"):
			return OTelAgent
		}
	}
	if a.has("gen_ai.input.messages") || a.has("gen_ai.output.messages") || a.hasPrefix("gen_ai.prompt.") ||
		a.hasPrefix("gen_ai.completion.") || hasLegacyEvents(s.Events) {
		return OTelChat
	}
	return OTelOther
}

// legacyEventNames are the span events (and log records) of the older
// GenAI conventions that carry messages.
var legacyEventNames = []string{"gen_ai.system.message", "gen_ai.user.message", "gen_ai.assistant.message", "gen_ai.tool.message", "gen_ai.choice"}

// IsOTelMessageEvent reports whether name is a legacy GenAI message event
// (span event or log record event.name).
func IsOTelMessageEvent(name string) bool { return slices.Contains(legacyEventNames, name) }

func hasLegacyEvents(evs []OTelEvent) bool {
	for _, e := range evs {
		if IsOTelMessageEvent(e.Name) {
			return true
		}
	}
	return false
}

func (r *OTelResult) usage(a attrs) {
	for _, k := range [][2]string{
		{"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"},
		{"gen_ai.usage.prompt_tokens", "gen_ai.usage.completion_tokens"},
		{"llm.token_count.prompt", "llm.token_count.completion"},
		{"ai.usage.inputTokens", "ai.usage.outputTokens"},
		{"ai.usage.promptTokens", "ai.usage.completionTokens"},
	} {
		in, okIn := a.int(k[0])
		out, okOut := a.int(k[1])
		if okIn || okOut {
			r.InputTokens, r.OutputTokens, r.HasUsage = in, out, true
			return
		}
	}
}

func (r *OTelResult) addFinish(s string) {
	if s != "" && !slices.Contains(r.FinishReasons, s) {
		r.FinishReasons = append(r.FinishReasons, s)
	}
}

// outputFinishReasons adds the finish_reason of gen_ai.output.messages
// and of gen_ai.choice events.
func (r *OTelResult) outputFinishReasons(s *OTelSpan, a attrs) {
	if v, err := jsonish(a["gen_ai.output.messages"], ""); err == nil {
		if list, ok := v.([]trace.Value); ok {
			for _, m := range list {
				if mo, ok := m.(*trace.Object); ok {
					r.addFinish(str(mo, "finish_reason"))
				}
			}
		}
	}
	for _, n := range a.indices("gen_ai.completion.") {
		r.addFinish(a.str("gen_ai.completion." + strconv.Itoa(n) + ".finish_reason"))
	}
	for _, e := range s.Events {
		if e.Name != "gen_ai.choice" {
			continue
		}
		if f, ok := e.Attrs["finish_reason"].(string); ok {
			r.addFinish(f)
		} else if b, err := jsonish(e.Body, ""); err == nil {
			if bo, ok := b.(*trace.Object); ok {
				r.addFinish(str(bo, "finish_reason"))
			}
		}
	}
}

func (r *OTelResult) finishReasons(a attrs) {
	add := r.addFinish
	for _, k := range []string{"gen_ai.response.finish_reasons", "llm.finish_reason", "ai.response.finishReason"} {
		switch v := a[k].(type) {
		case string:
			add(v)
		case []trace.Value:
			for _, x := range v {
				if s, ok := x.(string); ok {
					add(s)
				}
			}
		}
	}
}

// messages reads a chat span's input and output from the first source
// present (spec §11 item 3).
func (r *OTelResult) messages(s *OTelSpan, a attrs) error {
	in, out := ts(s.Start), ts(s.End)
	switch {
	case a.has("gen_ai.input.messages") || a.has("gen_ai.output.messages") || a.has("gen_ai.system_instructions"):
		var err error
		if r.Input, err = genAIMessages(a["gen_ai.input.messages"], "gen_ai.input.messages"); err != nil {
			return err
		}
		if v, ok := a["gen_ai.system_instructions"]; ok {
			sys, err := systemInstructions(v)
			if err != nil {
				return err
			}
			if sys != "" && !(len(r.Input) > 0 && role(r.Input[0]) == "system" && contentText(r.Input[0]) == sys) {
				r.Input = append([]*trace.Object{trace.NewObject("role", "system", "content", sys)}, r.Input...)
			}
		}
		if r.Output, err = genAIMessages(a["gen_ai.output.messages"], "gen_ai.output.messages"); err != nil {
			return err
		}
	case hasLegacyEvents(s.Events):
		var err error
		if r.Input, r.Output, err = legacyEvents(s.Events); err != nil {
			return err
		}
	case a.hasPrefix("gen_ai.prompt.") || a.hasPrefix("gen_ai.completion."):
		r.Input = flattened(a, "gen_ai.prompt.", flatGenAI)
		r.Output = flattened(a, "gen_ai.completion.", flatGenAI)
	case a.hasPrefix("llm.input_messages.") || a.hasPrefix("llm.output_messages."):
		r.Input = flattened(a, "llm.input_messages.", flatOpenInference)
		r.Output = flattened(a, "llm.output_messages.", flatOpenInference)
	case a.has("ai.prompt.messages") || a.has("ai.prompt") || a.has("ai.response.text") || a.has("ai.response.toolCalls"):
		var err error
		if r.Input, r.Output, err = vercelMessages(a); err != nil {
			return err
		}
	}
	r.outputFinishReasons(s, a)
	for _, m := range r.Input {
		m.Set("timestamp", in)
	}
	for _, m := range r.Output {
		m.Set("timestamp", out)
	}
	return nil
}

// toolOutput reads a tool span's output (spec §11 item 4).
func (r *OTelResult) toolOutput(s *OTelSpan, a attrs) {
	id := cmpOr(a.str("gen_ai.tool.call.id"), a.str("ai.toolCall.id"), a.str("tool_call.id"))
	if id == "" {
		return
	}
	var res trace.Value
	for _, k := range []string{"gen_ai.tool.call.result", "ai.toolCall.result", "output.value"} {
		if v, ok := a[k]; ok {
			res = v
			break
		}
	}
	if res == nil {
		return
	}
	ev := trace.NewObject("role", "tool", "tool_call_id", id, "content", otelToolResult(res), "timestamp", ts(s.End))
	r.ToolOutput = ev
}

// toolResult is the content of a tool output: a JSON-encoded string is
// decoded once; other structured values become compact JSON text.
func otelToolResult(v trace.Value) trace.Value {
	if s, ok := v.(string); ok {
		if strings.HasPrefix(s, `"`) {
			if d, err := trace.ParseValue([]byte(s)); err == nil {
				if ds, ok := d.(string); ok {
					return ds
				}
			}
		}
		return s
	}
	return string(trace.Marshal(v))
}

// ts formats a span time for an event.
func ts(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func role(m *trace.Object) string {
	v, _ := m.Get("role")
	s, _ := v.(string)
	return s
}

// contentText is the text of a message's content (string, or text parts
// joined with "\n").
func contentText(m *trace.Object) string {
	v, _ := m.Get("content")
	switch c := v.(type) {
	case string:
		return c
	case []trace.Value:
		var texts []string
		for _, p := range c {
			if po, ok := p.(*trace.Object); ok {
				if t, ok := po.Get("text"); ok {
					if s, ok := t.(string); ok {
						texts = append(texts, s)
					}
				}
			}
		}
		return strings.Join(texts, "\n")
	}
	return ""
}

// genAIMessages converts gen_ai.input.messages / output.messages
// ([{role, parts}], as a JSON string or a structured value).
func genAIMessages(v trace.Value, path string) ([]*trace.Object, error) {
	if v == nil {
		return nil, nil
	}
	v, err := jsonish(v, path)
	if err != nil {
		return nil, err
	}
	list, ok := v.([]trace.Value)
	if !ok {
		return nil, errAt(path, "is %s, want an array of messages", trace.TypeName(v))
	}
	var out []*trace.Object
	for i, m := range list {
		mo, ok := m.(*trace.Object)
		if !ok {
			return nil, errAt(fmt.Sprintf("%s[%d]", path, i), "is %s, want an object", trace.TypeName(m))
		}
		evs, err := genAIMessage(mo, fmt.Sprintf("%s[%d]", path, i))
		if err != nil {
			return nil, err
		}
		out = append(out, evs...)
	}
	return out, nil
}

// genAIMessage converts one {role, parts[, finish_reason]} message; tool
// call responses become separate tool events.
func genAIMessage(m *trace.Object, path string) ([]*trace.Object, error) {
	r := role(m)
	if r == "" {
		return nil, errAt(path+".role", "missing")
	}
	pv, _ := m.Get("parts")
	parts, ok := pv.([]trace.Value)
	if pv != nil && !ok {
		return nil, errAt(path+".parts", "is %s, want an array", trace.TypeName(pv))
	}
	if pv == nil {
		// Some emitters send {role, content} instead of parts.
		if c, ok := m.Get("content"); ok {
			return []*trace.Object{trace.NewObject("role", r, "content", c)}, nil
		}
	}
	var content []trace.Value
	var calls []trace.Value
	var tools []*trace.Object
	reasoning := ""
	for j, p := range parts {
		po, ok := p.(*trace.Object)
		if !ok {
			return nil, errAt(fmt.Sprintf("%s.parts[%d]", path, j), "is %s, want an object", trace.TypeName(p))
		}
		typ := str(po, "type")
		switch typ {
		case "text":
			content = append(content, trace.NewObject("type", "text", "text", textOf(po)))
		case "tool_call":
			args, _ := po.Get("arguments")
			calls = append(calls, toolCall(str(po, "id"), str(po, "name"), args))
		case "tool_call_response":
			resp, _ := po.Get("response")
			tools = append(tools, trace.NewObject("role", "tool", "tool_call_id", str(po, "id"), "content", otelToolResult(resp)))
		case "reasoning":
			if reasoning != "" {
				reasoning += "\n"
			}
			reasoning += textOf(po)
		case "blob", "uri", "image", "image_url":
			if img := otelImagePart(po); img != nil {
				content = append(content, img)
			} else {
				content = append(content, po)
			}
		default:
			content = append(content, po)
		}
	}
	var out []*trace.Object
	if len(content) > 0 || len(calls) > 0 || reasoning != "" || len(tools) == 0 {
		ev := trace.NewObject("role", r, "content", partsContentOTel(content))
		if len(calls) > 0 {
			ev.Set("tool_calls", calls)
		}
		if reasoning != "" {
			ev.Set("reasoning", reasoning)
		}
		out = append(out, ev)
	}
	return append(out, tools...), nil
}

// partsContentOTel is a single text part as a string, no parts as null,
// else the parts.
func partsContentOTel(parts []trace.Value) trace.Value {
	switch len(parts) {
	case 0:
		return nil
	case 1:
		if po, ok := parts[0].(*trace.Object); ok && str(po, "type") == "text" {
			return str(po, "text")
		}
	}
	return parts
}

func textOf(po *trace.Object) string {
	if s := str(po, "content"); s != "" {
		return s
	}
	return str(po, "text")
}

// imagePart maps a blob or uri part with an image mime type to an
// image_url part; nil for other parts.
func otelImagePart(po *trace.Object) *trace.Object {
	mime := cmpOr(str(po, "mime_type"), str(po, "mimeType"))
	if !strings.HasPrefix(mime, "image/") && str(po, "modality") != "image" {
		return nil
	}
	switch str(po, "type") {
	case "blob":
		data := str(po, "content")
		if data == "" {
			return nil
		}
		return trace.NewObject("type", "image_url", "image_url", trace.NewObject("url", "data:"+cmpOr(mime, "image/png")+";base64,"+data))
	case "uri":
		if u := str(po, "uri"); u != "" {
			return trace.NewObject("type", "image_url", "image_url", trace.NewObject("url", u))
		}
	}
	return nil
}

// toolCall builds a trace tool call; arguments given as a JSON string
// holding an object are parsed.
func toolCall(id, name string, args trace.Value) trace.Value {
	if s, ok := args.(string); ok {
		if v, err := trace.ParseValue([]byte(s)); err == nil {
			if _, isObj := v.(*trace.Object); isObj {
				args = v
			}
		}
	}
	if args == nil {
		args = trace.NewObject()
	}
	return trace.NewObject("id", id, "type", "function", "function", trace.NewObject("name", name, "arguments", args))
}

func systemInstructions(v trace.Value) (string, error) {
	v, err := jsonish(v, "gen_ai.system_instructions")
	if err != nil {
		return "", err
	}
	switch x := v.(type) {
	case string:
		return x, nil
	case []trace.Value:
		var texts []string
		for _, p := range x {
			if po, ok := p.(*trace.Object); ok && (str(po, "type") == "text" || str(po, "type") == "") {
				texts = append(texts, textOf(po))
			} else if s, ok := p.(string); ok {
				texts = append(texts, s)
			}
		}
		return strings.Join(texts, "\n"), nil
	}
	return "", errAt("gen_ai.system_instructions", "is %s, want an array of parts", trace.TypeName(v))
}

// legacyEvents reads gen_ai.*.message and gen_ai.choice span events (or
// log records attached to the span) in order.
func legacyEvents(evs []OTelEvent) (in, out []*trace.Object, err error) {
	for i, e := range evs {
		if !IsOTelMessageEvent(e.Name) {
			continue
		}
		msgs, err := LegacyEventMessages(e)
		if err != nil {
			return nil, nil, fmt.Errorf("event %d (%s): %w", i, e.Name, err)
		}
		for _, m := range msgs {
			m.Set("timestamp", ts(e.Time))
		}
		if e.Name == "gen_ai.choice" {
			out = append(out, msgs...)
		} else {
			in = append(in, msgs...)
		}
	}
	return in, out, nil
}

// LegacyEventMessages converts one legacy GenAI message event or log
// record: its body (a log record's body, gen_ai.event.content, or the
// event attributes) holds content, tool_calls, id (tool messages) or, for
// gen_ai.choice, message.
func LegacyEventMessages(e OTelEvent) ([]*trace.Object, error) {
	var body *trace.Object
	src := e.Body
	if src == nil {
		if c, ok := e.Attrs["gen_ai.event.content"]; ok {
			src = c
		}
	}
	if src != nil {
		v, err := jsonish(src, "body")
		if err != nil {
			return nil, err
		}
		switch b := v.(type) {
		case *trace.Object:
			body = b
		case string:
			body = trace.NewObject("content", b)
		default:
			return nil, errAt("body", "is %s, want an object", trace.TypeName(v))
		}
	} else {
		body = objectOf(e.Attrs)
	}
	r := strings.TrimSuffix(strings.TrimPrefix(e.Name, "gen_ai."), ".message")
	if e.Name == "gen_ai.choice" {
		mv, ok := body.Get("message")
		if ok {
			mv, err := jsonish(mv, "message")
			if err != nil {
				return nil, err
			}
			if mo, ok := mv.(*trace.Object); ok {
				body = mo
			}
		}
		r = "assistant"
	}
	if rv := str(body, "role"); rv != "" {
		r = rv
	}
	ev := trace.NewObject("role", r)
	if c, ok := body.Get("content"); ok {
		c, _ = jsonishContent(c)
		ev.Set("content", c)
	} else {
		ev.Set("content", nil)
	}
	if tc, ok := body.Get("tool_calls"); ok && tc != nil {
		calls, err := openAIToolCalls(tc, "tool_calls")
		if err != nil {
			return nil, err
		}
		if len(calls) > 0 {
			ev.Set("tool_calls", calls)
		}
	}
	if r == "tool" {
		ev.Set("tool_call_id", cmpOr(str(body, "id"), str(body, "tool_call_id")))
		if c, ok := ev.Get("content"); ok {
			ev.Set("content", otelToolResult(c))
		}
	}
	return []*trace.Object{ev}, nil
}

// jsonishContent keeps string content, unless it is a JSON array of
// parts; structured content is kept.
func jsonishContent(c trace.Value) (trace.Value, error) {
	if s, ok := c.(string); ok && strings.HasPrefix(strings.TrimSpace(s), "[") {
		if v, err := trace.ParseValue([]byte(s)); err == nil {
			return v, nil
		}
	}
	return c, nil
}

// openAIToolCalls reads OpenAI-shaped tool calls ([{id, type, function:
// {name, arguments}}]), as a JSON string or a structured value.
func openAIToolCalls(v trace.Value, path string) ([]trace.Value, error) {
	v, err := jsonish(v, path)
	if err != nil {
		return nil, err
	}
	list, ok := v.([]trace.Value)
	if !ok {
		return nil, errAt(path, "is %s, want an array", trace.TypeName(v))
	}
	var out []trace.Value
	for _, c := range list {
		co, ok := c.(*trace.Object)
		if !ok {
			continue
		}
		fn := co
		if f, ok := co.Get("function"); ok {
			if fo, ok := f.(*trace.Object); ok {
				fn = fo
			}
		}
		args, _ := fn.Get("arguments")
		out = append(out, toolCall(str(co, "id"), str(fn, "name"), args))
	}
	return out, nil
}

// flatGenAI and flatOpenInference say where the fields of a flattened
// message are: relative to the message prefix.
type flatForm struct {
	role, content, toolCallID, toolCalls string
	callID, callName, callArgs           string
	contents                             string // OpenInference content parts ("" = none)
}

var (
	flatGenAI = flatForm{role: "role", content: "content", toolCallID: "tool_call_id", toolCalls: "tool_calls.",
		callID: "id", callName: "name", callArgs: "arguments"}
	flatOpenInference = flatForm{role: "message.role", content: "message.content", toolCallID: "message.tool_call_id",
		toolCalls: "message.tool_calls.", callID: "tool_call.id", callName: "tool_call.function.name",
		callArgs: "tool_call.function.arguments", contents: "message.contents."}
)

// flattened reads messages flattened into attributes prefix.N.<field>.
func flattened(a attrs, prefix string, f flatForm) []*trace.Object {
	var out []*trace.Object
	for _, n := range a.indices(prefix) {
		p := prefix + strconv.Itoa(n) + "."
		r := a.str(p + f.role)
		ev := trace.NewObject("role", cmpOr(r, "user"))
		var content trace.Value
		if c, ok := a[p+f.content]; ok {
			content = c
		}
		if f.contents != "" {
			var parts []trace.Value
			for _, k := range a.indices(p + f.contents) {
				cp := p + f.contents + strconv.Itoa(k) + ".message_content."
				switch a.str(cp + "type") {
				case "image":
					parts = append(parts, trace.NewObject("type", "image_url", "image_url", trace.NewObject("url", a.str(cp+"image.image.url"))))
				default:
					parts = append(parts, trace.NewObject("type", "text", "text", a.str(cp+"text")))
				}
			}
			if content == nil && len(parts) > 0 {
				content = partsContentOTel(parts)
			}
		}
		ev.Set("content", content)
		var calls []trace.Value
		for _, k := range a.indices(p + f.toolCalls) {
			cp := p + f.toolCalls + strconv.Itoa(k) + "."
			calls = append(calls, toolCall(a.str(cp+f.callID), a.str(cp+f.callName), a[cp+f.callArgs]))
		}
		if len(calls) > 0 {
			ev.Set("tool_calls", calls)
		}
		if id := a.str(p + f.toolCallID); id != "" || r == "tool" {
			ev.Set("tool_call_id", id)
			ev.Set("content", otelToolResult(content))
		}
		out = append(out, ev)
	}
	return out
}

// vercelMessages reads the Vercel AI SDK's ai.prompt.messages (input) and
// ai.response.text / ai.response.toolCalls (output).
func vercelMessages(a attrs) (in, out []*trace.Object, err error) {
	if v, ok := a["ai.prompt.messages"]; ok {
		v, err := jsonish(v, "ai.prompt.messages")
		if err != nil {
			return nil, nil, err
		}
		list, ok := v.([]trace.Value)
		if !ok {
			return nil, nil, errAt("ai.prompt.messages", "is %s, want an array", trace.TypeName(v))
		}
		for i, m := range list {
			mo, ok := m.(*trace.Object)
			if !ok {
				return nil, nil, errAt(fmt.Sprintf("ai.prompt.messages[%d]", i), "is %s, want an object", trace.TypeName(m))
			}
			in = append(in, vercelMessage(mo)...)
		}
	}
	if v, ok := a["ai.prompt"]; ok && in == nil {
		// The wrapper span's {system?, prompt | messages}.
		if p, err := jsonish(v, "ai.prompt"); err == nil {
			if po, ok := p.(*trace.Object); ok {
				if sys := str(po, "system"); sys != "" {
					in = append(in, trace.NewObject("role", "system", "content", sys))
				}
				if pr := str(po, "prompt"); pr != "" {
					in = append(in, trace.NewObject("role", "user", "content", pr))
				}
				if ms, ok := po.Get("messages"); ok {
					list, _ := ms.([]trace.Value)
					for _, m := range list {
						if mo, ok := m.(*trace.Object); ok {
							in = append(in, vercelMessage(mo)...)
						}
					}
				}
			}
		}
	}
	var calls []trace.Value
	if v, ok := a["ai.response.toolCalls"]; ok {
		v, err := jsonish(v, "ai.response.toolCalls")
		if err != nil {
			return nil, nil, err
		}
		list, _ := v.([]trace.Value)
		for _, c := range list {
			if co, ok := c.(*trace.Object); ok {
				calls = append(calls, toolCall(str(co, "toolCallId"), str(co, "toolName"), vercelArgs(co)))
			}
		}
	}
	text, hasText := a["ai.response.text"]
	if hasText || len(calls) > 0 {
		ev := trace.NewObject("role", "assistant", "content", text)
		if len(calls) > 0 {
			ev.Set("tool_calls", calls)
		}
		out = append(out, ev)
	}
	return in, out, nil
}

func vercelArgs(co *trace.Object) trace.Value {
	if v, ok := co.Get("input"); ok {
		return v
	}
	v, _ := co.Get("args")
	return v
}

// vercelMessage converts one Vercel AI SDK message: content a string or
// parts (text, image, tool-call, tool-result).
func vercelMessage(m *trace.Object) []*trace.Object {
	r := role(m)
	c, _ := m.Get("content")
	parts, ok := c.([]trace.Value)
	if !ok {
		return []*trace.Object{trace.NewObject("role", r, "content", c)}
	}
	var content, calls []trace.Value
	var tools []*trace.Object
	for _, p := range parts {
		po, ok := p.(*trace.Object)
		if !ok {
			continue
		}
		switch str(po, "type") {
		case "text":
			content = append(content, trace.NewObject("type", "text", "text", str(po, "text")))
		case "tool-call":
			calls = append(calls, toolCall(str(po, "toolCallId"), str(po, "toolName"), vercelArgs(po)))
		case "tool-result":
			out, ok := po.Get("output")
			if !ok {
				out, _ = po.Get("result")
			}
			// AI SDK 5 wraps the output: {type: "text"|"json", value}.
			if oo, ok := out.(*trace.Object); ok && oo.Has("value") && oo.Has("type") {
				out, _ = oo.Get("value")
			}
			tools = append(tools, trace.NewObject("role", "tool", "tool_call_id", str(po, "toolCallId"), "content", otelToolResult(out)))
		default:
			content = append(content, po)
		}
	}
	var out []*trace.Object
	if len(content) > 0 || len(calls) > 0 || len(tools) == 0 {
		ev := trace.NewObject("role", r, "content", partsContentOTel(content))
		if len(calls) > 0 {
			ev.Set("tool_calls", calls)
		}
		out = append(out, ev)
	}
	return append(out, tools...)
}
