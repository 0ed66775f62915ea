package trace

import (
	"fmt"
	"strconv"
)

const (
	rootEvents   = iota // a list trace: paths start "events[i]"
	rootMessages        // an object trace: paths start "messages[i]"
	rootTop             // members of the trace object itself: "metadata"
)

// Decode decodes and normalises a trace given as JSON, in any shape the
// Invariant tools accept:
//
//   - a JSON array of events;
//   - an object {"messages": [...], "metadata": {...}, ...} (other
//     members are kept in Trace.Envelope);
//
// where each event is a message, a tool output (role "tool"), a bare tool
// call (a "type" key and no "role"), or a {"tools": [...]} element
// (policy-language §7.2). Tool-call arguments may be an object or a JSON
// string; a string that decodes to an object is replaced by it (in the
// stored form too), anything else is kept and reported in Trace.Warnings.
//
// Outcomes:
//   - (t, nil): a valid trace.
//   - (nil, err) with errors.Is(err, ErrSyntax): malformed JSON; err is a
//     *SyntaxError with line and column.
//   - (t, err) with errors.Is(err, ErrInvalidTrace): JSON that §7.2 cannot
//     normalise; err is an ErrorList with every problem (JSON path, line,
//     column). t is still complete: every element is present, offending
//     values are kept verbatim in Raw, and Encode round-trips it, so a
//     lenient consumer (the Explorer push path) may store it.
//   - (nil, err) with errors.Is(err, ErrInvalidTrace): the top level is
//     neither an array nor an object with a messages array.
func Decode(data []byte) (*Trace, error) {
	v, err := ParseValue(data)
	if err != nil {
		return nil, fmt.Errorf("decode trace: %w", err)
	}
	return decodeParsed(data, v)
}

// decodeParsed normalises v, the value ParseValue returned for data, and
// locates errors in data.
func decodeParsed(data []byte, v Value) (*Trace, error) {
	t, errs := fromValue(v)
	var targets []locTarget
	if t != nil {
		for i := range t.Warnings {
			w := &t.Warnings[i]
			targets = append(targets, locTarget{root: w.root, path: w.path, line: &w.Line, col: &w.Col})
		}
	}
	for _, e := range errs {
		if e.Offset == -2 {
			targets = append(targets, locTarget{root: e.root, path: e.path, off: &e.Offset, line: &e.Line, col: &e.Col})
		}
	}
	locateAll(data, targets)
	if len(errs) > 0 {
		l := errs.list()
		l.Sort()
		return t, l
	}
	return t, nil
}

// FromValue normalises an already decoded Value (see Decode for the
// accepted shapes and outcomes; errors carry paths but no positions).
func FromValue(v Value) (*Trace, error) {
	t, errs := fromValue(v)
	if len(errs) > 0 {
		return t, errs.list()
	}
	return t, nil
}

// NewEvent normalises one element (a message, tool output, bare tool call
// or tools element). It returns the event and an ErrorList for an invalid
// element (the event is still returned, as Decode does). Warnings are not
// reported; use FromValue on a whole trace to get them.
func NewEvent(v Value) (*Event, error) {
	n := normalizer{}
	n.path = append(n.path, pathElem{index: 0})
	e := n.event(v)
	if len(n.errs) > 0 {
		return e, n.errs.list()
	}
	return e, nil
}

// Append normalises elements and appends them to t, as if they had been
// at the end of the decoded input: trace indices continue (§7.4), warnings
// are added to t.Warnings with their event index, and errors (an
// ErrorList, errors.Is ErrInvalidTrace) name paths from the trace's root
// (events[i] or messages[i], i counted from the start of the trace). Every
// element is appended even when it is invalid, as Decode keeps them. This
// is how the gateway and monitors grow a live trace.
func (t *Trace) Append(elements ...Value) error {
	n := normalizer{idx: t.nextIndex()}
	if t.Form == FormObject {
		n.root = rootMessages
	}
	for _, v := range elements {
		n.path = append(n.path[:0], pathElem{index: len(t.Events)})
		t.Events = append(t.Events, n.event(v))
	}
	for i := range n.warns {
		n.warns[i].path = nil
	}
	t.Warnings = append(t.Warnings, n.warns...)
	if len(n.errs) > 0 {
		return n.errs.list()
	}
	return nil
}

// nextIndex returns the trace index the next appended element gets.
func (t *Trace) nextIndex() int {
	idx := 0
	for _, e := range t.Events {
		if e.Kind == KindTools && e.Tools != nil {
			idx += len(e.Tools)
		} else {
			idx++
		}
	}
	return idx
}

type pendingError struct {
	Error
	root int
	path []pathElem
}

type pendingErrors []*pendingError

func (p pendingErrors) list() ErrorList {
	out := make(ErrorList, 0, len(p))
	for _, e := range p {
		if e.Offset < 0 {
			e.Offset = -1
		}
		out = append(out, &e.Error)
	}
	return out
}

func fromValue(v Value) (*Trace, pendingErrors) {
	n := normalizer{}
	t := &Trace{}
	var events []Value
	switch v := v.(type) {
	case []Value:
		events = v
		t.Form = FormList
	case *Object:
		t.Form = FormObject
		t.Envelope = v
		n.root = rootTop
		msgs, ok := v.Get("messages")
		if !ok {
			if v.Has("role") || v.Has("tools") || v.Has("function") {
				n.errorf(`"messages" is missing: this looks like a single event; a trace is a list of events, wrap it in [ ]`)
				return nil, n.errs
			}
			n.errorf(`"messages" is missing (a trace object needs a "messages" array)`)
			return nil, n.errs
		}
		events, ok = msgs.([]Value)
		if !ok {
			n.push("messages")
			n.errorf(`"messages" is %s, want an array of events`, TypeName(msgs))
			return nil, n.errs
		}
		n.field(v, "metadata", func(md Value) {
			switch md := md.(type) {
			case *Object:
				t.Metadata = md
			case nil:
			default:
				n.errorf(`"metadata" is %s, want an object`, TypeName(md))
			}
		})
		n.root = rootMessages
	default:
		n.errorf("trace is %s, want an array of events or an object with \"messages\"", TypeName(v))
		return nil, n.errs
	}
	t.Events = make([]*Event, len(events))
	// the events of a whole trace live as long as it: one allocation
	n.slab = make([]eventAlloc, len(events))
	for i, ev := range events {
		n.path = append(n.path[:0], pathElem{index: i})
		t.Events[i] = n.event(ev)
	}
	t.Warnings = n.warns
	return t, n.errs
}

// normalizer walks decoded values into the typed view, collecting errors
// with their JSON paths (positions are filled in lazily by Decode).
type normalizer struct {
	root  int
	path  []pathElem // relative to the events array; path[0] is the element
	errs  pendingErrors
	warns []Warning
	idx   int // next trace index (§7.4)
	// slab, when not empty, is where event takes its next eventAlloc from
	slab []eventAlloc
	// calls and lists are the slabs of newCall and newCallList, whose
	// sizes double up to maxChunk (callChunk and listChunk are the last sizes)
	calls     []callAlloc
	lists     []*ToolCall
	callChunk int
	listChunk int
}

// callAlloc is a tool call and room for its id.
type callAlloc struct {
	tc ToolCall
	id string
}

// newCall returns a zero callAlloc from the normaliser's slab.
func (n *normalizer) newCall() *callAlloc {
	if len(n.calls) == 0 {
		n.callChunk = min(max(2*n.callChunk, 1), maxChunk)
		n.calls = make([]callAlloc, n.callChunk)
	}
	a := &n.calls[0]
	n.calls = n.calls[1:]
	return a
}

// newCallList returns an empty list with room for k calls, whose appends
// beyond k reallocate.
func (n *normalizer) newCallList(k int) []*ToolCall {
	if k > maxChunk {
		return make([]*ToolCall, 0, k)
	}
	if len(n.lists) < k {
		n.listChunk = min(max(2*n.listChunk, 4), maxChunk)
		n.lists = make([]*ToolCall, max(k, n.listChunk))
	}
	out := n.lists[:0:k]
	n.lists = n.lists[k:]
	return out
}

func (n *normalizer) push(key string) { n.path = append(n.path, pathElem{key: key}) }
func (n *normalizer) pushIndex(i int) { n.path = append(n.path, pathElem{index: i}) }
func (n *normalizer) pop()            { n.path = n.path[:len(n.path)-1] }

func (n *normalizer) pathString() string {
	root := "events"
	switch n.root {
	case rootMessages:
		root = "messages"
	case rootTop:
		if len(n.path) == 0 {
			return "$"
		}
		return renderPath(n.path)
	}
	return renderPath(append([]pathElem{{key: root}}, n.path...))
}

func (n *normalizer) errorf(format string, args ...any) {
	if len(n.errs) == MaxErrors {
		e := &pendingError{Error: Error{Path: n.pathString(), Offset: -1, Msg: "too many errors"}}
		n.errs = append(n.errs, e)
		return
	}
	if len(n.errs) > MaxErrors {
		return
	}
	e := &pendingError{
		Error: Error{Path: n.pathString(), Offset: -2, Msg: fmt.Sprintf(format, args...)},
		root:  n.root,
		path:  append([]pathElem(nil), n.path...),
	}
	n.errs = append(n.errs, e)
}

// field reads member key of o with the path extended by key while f runs.
func (n *normalizer) field(o *Object, key string, f func(v Value)) bool {
	v, ok := o.Get(key)
	if !ok {
		return false
	}
	n.push(key)
	f(v)
	n.pop()
	return true
}

// eventAlloc is an event and room for its tool_call_id, allocated
// together.
type eventAlloc struct {
	e  Event
	id string
}

func (n *normalizer) event(v Value) *Event {
	var a *eventAlloc
	if len(n.slab) > 0 {
		a, n.slab = &n.slab[0], n.slab[1:]
		a.e.Raw = v
	} else {
		a = &eventAlloc{e: Event{Raw: v}}
	}
	e := &a.e
	o, ok := v.(*Object)
	if !ok {
		n.errorf("event is %s, want an object", TypeName(v))
		n.idx++
		return e
	}
	n.metadata(o, &e.Metadata, &e.Server)
	if role, ok := o.Get("role"); ok {
		s, ok := role.(string)
		if !ok {
			n.push("role")
			n.errorf(`"role" is %s, want a string`, TypeName(role))
			n.pop()
			n.idx++
			return e
		}
		e.Role = s
		if s == "tool" {
			e.Kind = KindToolOutput
			n.toolOutput(o, a)
		} else {
			e.Kind = KindMessage
			n.message(o, e)
		}
		n.idx++
		return e
	}
	if o.Has("type") {
		e.Kind = KindToolCall
		e.Call = n.toolCall(o, e.Server)
		n.idx++
		return e
	}
	if tools, ok := o.Get("tools"); ok {
		e.Kind = KindTools
		n.push("tools")
		n.tools(tools, e)
		n.pop()
		return e
	}
	n.errorf(`event has none of "role", "type" and "tools"`)
	n.idx++
	return e
}

func (n *normalizer) metadata(o *Object, md **Object, server **string) {
	n.field(o, "metadata", func(v Value) {
		switch v := v.(type) {
		case *Object:
			*md = v
			n.field(v, "server", func(sv Value) {
				switch sv := sv.(type) {
				case string:
					*server = &sv
				case nil:
				default:
					n.errorf(`"server" is %s, want a string or null`, TypeName(sv))
				}
			})
		case nil:
		default:
			n.errorf(`"metadata" is %s, want an object`, TypeName(v))
		}
	})
}

func (n *normalizer) message(o *Object, e *Event) {
	n.field(o, "content", func(v Value) { e.Content = n.content(v, false) })
	n.field(o, "tool_calls", func(v Value) {
		switch v := v.(type) {
		case nil:
			e.NullToolCalls = true
		case []Value:
			e.ToolCalls = n.newCallList(len(v))
			for i, c := range v {
				n.pushIndex(i)
				co, ok := c.(*Object)
				var tc *ToolCall
				if ok {
					tc = n.toolCall(co, e.Server)
				} else {
					n.errorf("tool call is %s, want an object", TypeName(c))
					tc = &ToolCall{Type: "function", Server: e.Server, Function: Function{Arguments: &Object{}}}
				}
				e.ToolCalls = append(e.ToolCalls, tc)
				n.pop()
			}
		default:
			n.errorf(`"tool_calls" is %s, want an array or null`, TypeName(v))
		}
	})
}

func (n *normalizer) toolOutput(o *Object, a *eventAlloc) {
	e := &a.e
	n.field(o, "content", func(v Value) { e.Content = n.content(v, true) })
	e.HasToolCallID = n.field(o, "tool_call_id", func(v Value) {
		switch v := v.(type) {
		case string:
			a.id = v
			e.ToolCallID = &a.id
		case nil:
		default:
			n.errorf(`"tool_call_id" is %s, want a string or null`, TypeName(v))
		}
	})
}

func (n *normalizer) content(v Value, output bool) Content {
	switch v := v.(type) {
	case nil:
		return Content{Kind: ContentNull}
	case string:
		return Content{Kind: ContentText, Text: v}
	case []Value:
		c := Content{Kind: ContentChunks, Chunks: make([]Chunk, len(v))}
		for i, el := range v {
			n.pushIndex(i)
			c.Chunks[i] = n.chunk(el)
			n.pop()
		}
		return c
	case *Object:
		if output {
			return Content{Kind: ContentObject, Object: v}
		}
	}
	if output {
		n.errorf(`"content" is %s, want a string, an array, an object or null`, TypeName(v))
	} else {
		n.errorf(`"content" is %s, want a string, an array of chunks or null`, TypeName(v))
	}
	return Content{Kind: ContentInvalid}
}

func (n *normalizer) chunk(v Value) Chunk {
	ch := Chunk{Raw: v}
	o, ok := v.(*Object)
	if !ok {
		n.errorf("content chunk is %s, want an object", TypeName(v))
		return ch
	}
	typ, _ := o.Get("type")
	ch.Type, _ = typ.(string)
	if t, ok := o.Get("text"); ok {
		if s, ok := t.(string); ok {
			ch.Kind, ch.Text = ChunkText, s
			if ch.Type == "" {
				ch.Type = "text"
			}
			return ch
		}
	}
	if iu, ok := o.Get("image_url"); ok {
		url := ""
		switch iu := iu.(type) {
		case string:
			url, ok = iu, true
		case *Object:
			u, _ := iu.Get("url")
			url, ok = u.(string)
		default:
			ok = false
		}
		if ok {
			ch.Kind, ch.ImageURL = ChunkImage, url
			if ch.Type == "" {
				ch.Type = "image_url"
			}
		}
	}
	return ch
}

// toolCall normalises a call object (bare or inside a message). server is
// the enclosing message's server.
func (n *normalizer) toolCall(o *Object, server *string) *ToolCall {
	// the call and its id in one allocation, from a slab
	a := n.newCall()
	a.tc = ToolCall{Type: "function", Raw: o, Server: server}
	tc := &a.tc
	var own *string
	n.metadata(o, &tc.Metadata, &own)
	if own != nil {
		tc.Server = own
	}
	n.field(o, "id", func(v Value) {
		switch v := v.(type) {
		case string:
			a.id = v
			tc.ID = &a.id
		case nil:
		default:
			n.errorf(`"id" is %s, want a string or null`, TypeName(v))
		}
	})
	n.field(o, "type", func(v Value) {
		if s, ok := v.(string); ok {
			tc.Type = s
		} else {
			n.errorf(`"type" is %s, want a string`, TypeName(v))
		}
	})
	if !n.field(o, "function", func(v Value) {
		fo, ok := v.(*Object)
		if !ok {
			n.errorf(`"function" is %s, want an object`, TypeName(v))
			return
		}
		tc.Function.Raw = fo
		if !n.field(fo, "name", func(v Value) {
			if s, ok := v.(string); ok {
				tc.Function.Name = s
			} else {
				n.errorf(`"name" is %s, want a string`, TypeName(v))
			}
		}) {
			n.errorf(`"name" is missing`)
		}
		n.arguments(fo, &tc.Function)
	}) {
		n.errorf(`"function" is missing`)
	}
	if tc.Function.Arguments == nil {
		tc.Function.Arguments = &Object{} // missing, null or invalid: {}
	}
	return tc
}

// arguments applies the §7.2 argument rules, replacing a JSON-object
// string by the object in the stored function object too.
func (n *normalizer) arguments(fo *Object, f *Function) {
	for i := len(fo.Members) - 1; i >= 0; i-- {
		m := &fo.Members[i]
		if m.Key != "arguments" {
			continue
		}
		switch v := m.Value.(type) {
		case *Object:
			f.Arguments = v
		case nil:
		case string:
			if dv, err := parseString(v); err == nil {
				if do, ok := dv.(*Object); ok {
					m.Value = do
					f.Arguments = do
					return
				}
			}
			f.Arguments, f.ArgumentsRaw = v, true
			n.warnArgs()
		default:
			f.Arguments, f.ArgumentsRaw = v, true
			n.warnArgs()
		}
		return
	}
}

func (n *normalizer) warnArgs() {
	n.push("arguments")
	n.warns = append(n.warns, Warning{
		Index: n.idx,
		Path:  n.pathString(),
		Msg:   "invalid tool arguments at event " + strconv.Itoa(n.idx),
		root:  n.root,
		path:  append([]pathElem(nil), n.path...),
	})
	n.pop()
}

func (n *normalizer) tools(v Value, e *Event) {
	list, ok := v.([]Value)
	if !ok {
		n.errorf(`"tools" is %s, want an array of objects`, TypeName(v))
		n.idx++
		return
	}
	e.Tools = make([]*Tool, 0, len(list))
	for i, tv := range list {
		n.pushIndex(i)
		to, ok := tv.(*Object)
		if !ok {
			n.errorf("tool is %s, want an object", TypeName(tv))
			e.Tools = append(e.Tools, &Tool{Server: e.Server, Description: noDescription, InputSchema: &Object{}})
			n.idx++
			n.pop()
			continue
		}
		tool := &Tool{Raw: to, Server: e.Server, Description: noDescription}
		var own *string
		n.metadata(to, &tool.Metadata, &own)
		if own != nil {
			tool.Server = own
		}
		if !n.field(to, "name", func(v Value) {
			if s, ok := v.(string); ok {
				tool.Name = s
			} else {
				n.errorf(`"name" is %s, want a string`, TypeName(v))
			}
		}) {
			n.errorf(`"name" is missing`)
		}
		n.field(to, "description", func(v Value) {
			switch v := v.(type) {
			case string:
				tool.Description = v
			case nil:
			default:
				tool.Description = Display(v)
			}
		})
		tool.InputSchema = &Object{}
		n.field(to, "inputSchema", func(v Value) {
			so, ok := v.(*Object)
			if !ok {
				n.errorf(`"inputSchema" is %s, want an object`, TypeName(v))
				return
			}
			tool.InputSchema = so
			tool.Parameters = n.parameters(so)
		})
		e.Tools = append(e.Tools, tool)
		n.idx++
		n.pop()
	}
}

const noDescription = "no description available"

var typeAliases = map[string]string{
	"int": "integer", "long": "integer", "float": "number", "bool": "boolean",
	"str": "string", "dict": "object", "list": "array",
}

func isSchemaType(s string) bool {
	switch s {
	case "object", "array", "string", "number", "integer", "boolean":
		return true
	}
	return false
}

// parameters turns a schema object into its top-level ToolParameters.
func (n *normalizer) parameters(schema *Object) []*ToolParameter {
	var out []*ToolParameter
	req := requiredSet(schema)
	n.field(schema, "properties", func(v Value) {
		props, ok := v.(*Object)
		if !ok {
			n.errorf(`"properties" is %s, want an object`, TypeName(v))
			return
		}
		for _, m := range props.Members {
			n.push(m.Key)
			out = append(out, n.parameter(m.Key, m.Value, req[m.Key]))
			n.pop()
		}
	})
	return out
}

func requiredSet(schema *Object) map[string]bool {
	rv, _ := schema.Get("required")
	list, _ := rv.([]Value)
	if len(list) == 0 {
		return nil
	}
	set := make(map[string]bool, len(list))
	for _, r := range list {
		if s, ok := r.(string); ok {
			set[s] = true
		}
	}
	return set
}

func (n *normalizer) parameter(name string, sv Value, required bool) *ToolParameter {
	p := &ToolParameter{Name: name, Type: "string", Description: noDescription, Required: required}
	s, ok := sv.(*Object)
	if !ok {
		n.errorf("schema is %s, want an object", TypeName(sv))
		return p
	}
	if d, ok := s.Get("description"); ok {
		if ds, ok := d.(string); ok {
			p.Description = ds
		}
	}
	if tv, ok := s.Get("type"); ok {
		switch tv := tv.(type) {
		case string:
			p.Type = alias(tv)
		case []Value:
			p.Type = ""
			for _, x := range tv {
				ts, _ := x.(string)
				if ts == "null" {
					p.Required = false
					continue
				}
				ts = alias(ts)
				if !isSchemaType(ts) {
					n.push("type")
					n.errorf("unsupported schema type %s", string(Marshal(x)))
					n.pop()
					continue
				}
				p.Types = append(p.Types, ts)
			}
			return p
		case nil:
		default:
			n.push("type")
			n.errorf("unsupported schema type %s", string(Marshal(tv)))
			n.pop()
			return p
		}
	}
	switch p.Type {
	case "object":
		req := requiredSet(s)
		n.field(s, "properties", func(v Value) {
			props, ok := v.(*Object)
			if !ok {
				n.errorf(`"properties" is %s, want an object`, TypeName(v))
				return
			}
			for _, m := range props.Members {
				n.push(m.Key)
				p.Properties = append(p.Properties, n.parameter(name+"."+m.Key, m.Value, req[m.Key]))
				n.pop()
			}
		})
		if ap, ok := s.Get("additionalProperties"); ok && ap != nil {
			b := truthy(ap)
			p.AdditionalProperties = &b
		}
	case "array":
		n.field(s, "items", func(v Value) {
			if v != nil {
				p.Items = n.parameter(name+" item", v, false)
			}
		})
	case "string", "number", "integer", "boolean":
		if ev, ok := s.Get("enum"); ok {
			if list, ok := ev.([]Value); ok {
				p.Enum = list
			}
		}
	default:
		n.push("type")
		n.errorf("unsupported schema type %q", p.Type)
		n.pop()
	}
	return p
}

func alias(s string) string {
	if a, ok := typeAliases[s]; ok {
		return a
	}
	return s
}

// truthy is Python truthiness of a JSON value.
func truthy(v Value) bool {
	switch v := v.(type) {
	case nil:
		return false
	case bool:
		return v
	case Number:
		return v.Float64() != 0
	case string:
		return v != ""
	case []Value:
		return len(v) > 0
	case *Object:
		return v.Len() > 0
	}
	return true
}

// Encode returns the trace as compact JSON in the shape it was decoded
// from, every element as stored (Event.Raw). Decode(Encode(t)) yields an
// equal trace.
func (t *Trace) Encode() []byte {
	return t.AppendJSON(nil)
}

// AppendJSON appends Encode's output to buf.
func (t *Trace) AppendJSON(buf []byte) []byte {
	if t.Form == FormObject {
		env := t.Envelope
		if env == nil {
			env = &Object{}
		}
		buf = append(buf, '{')
		wroteMsgs, wroteMD := false, false
		first := true
		sep := func() {
			if !first {
				buf = append(buf, ',')
			}
			first = false
		}
		for _, m := range env.Members {
			switch m.Key {
			case "messages":
				if wroteMsgs {
					continue
				}
				wroteMsgs = true
				sep()
				buf = appendString(buf, m.Key)
				buf = append(buf, ':')
				buf = t.appendEvents(buf)
			case "metadata":
				if wroteMD {
					continue
				}
				wroteMD = true
				sep()
				buf = appendString(buf, m.Key)
				buf = append(buf, ':')
				if t.Metadata != nil {
					buf = AppendValue(buf, t.Metadata)
				} else {
					buf = AppendValue(buf, lastValue(env, "metadata"))
				}
			default:
				sep()
				buf = appendString(buf, m.Key)
				buf = append(buf, ':')
				buf = AppendValue(buf, m.Value)
			}
		}
		if !wroteMsgs {
			sep()
			buf = append(buf, `"messages":`...)
			buf = t.appendEvents(buf)
		}
		if !wroteMD && t.Metadata != nil {
			sep()
			buf = append(buf, `"metadata":`...)
			buf = AppendValue(buf, t.Metadata)
		}
		return append(buf, '}')
	}
	return t.appendEvents(buf)
}

func lastValue(o *Object, key string) Value {
	v, _ := o.Get(key)
	return v
}

func (t *Trace) appendEvents(buf []byte) []byte {
	buf = append(buf, '[')
	for i, e := range t.Events {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = AppendValue(buf, e.Raw)
	}
	return append(buf, ']')
}

// Values returns the stored elements (each Event.Raw) as a list.
func (t *Trace) Values() []Value {
	out := make([]Value, len(t.Events))
	for i, e := range t.Events {
		out[i] = e.Raw
	}
	return out
}
