package eval

import (
	"fmt"
	"math/big"
	"sort"

	"github.com/vigilhq/vigil/policy/builtin"
	"github.com/vigilhq/vigil/trace"
)

// Model is a trace normalised into evaluator values (spec §7): events by
// trace index, the flattened sequence, and indexes built once per trace
// (selections per type name, tool calls per function name). A Model can be
// extended with Append (what a Monitor does); it is not safe for concurrent
// mutation, but a finished Model may be analysed concurrently.
type Model struct {
	// Events are the normalised events in trace-index order (Message,
	// ToolOutput, Tool, bare ToolCall).
	Events []builtin.Event
	// Seq is the flattened sequence of spec §7.5.
	Seq []builtin.Event
	// Warnings are normalisation warnings ("invalid tool arguments at event N").
	Warnings []string

	calls    []*builtin.ToolCall                 // every tool call, for linking outputs
	callByID map[builtin.Value]*builtin.ToolCall // the most recent call with each id
	sel      map[string]*selection
	toolSel  map[[2]string]*selection // by function name and type name
	byTool   map[string][]int         // function name -> positions in Seq of calls (and outputs linked to them)
	callSlab []callAlloc              // where toolCall takes its next call from (Append)
}

// callAlloc is a tool call and its function, allocated together.
type callAlloc struct {
	tc builtin.ToolCall
	fn builtin.Function
}

// selection is the cached selection of one type name over the whole trace.
type selection struct {
	vals []builtin.Value
	upTo int // number of Events covered
}

// NewModel normalises the elements of t (already decoded by trace.Decode).
func NewModel(t *trace.Trace) *Model {
	m := &Model{sel: map[string]*selection{}, toolSel: map[[2]string]*selection{}, byTool: map[string][]int{}}
	if t != nil {
		n, calls := len(t.Events), 0
		for _, e := range t.Events {
			calls += len(e.ToolCalls)
			n += max(len(e.Tools)-1, 0)
		}
		m.Events = make([]builtin.Event, 0, n)
		m.Seq = make([]builtin.Event, 0, n+calls)
		m.calls = make([]*builtin.ToolCall, 0, calls)
		m.Append(t.Events)
	}
	return m
}

// Len returns the number of normalised events.
func (m *Model) Len() int { return len(m.Events) }

// Append normalises further elements, continuing trace indices and tool
// output linking.
func (m *Model) Append(evs []*trace.Event) {
	// The messages, outputs and calls of evs live as long as the model:
	// each kind in one allocation.
	var nmsg, nout, ncall int
	for _, e := range evs {
		switch e.Kind {
		case trace.KindMessage:
			nmsg++
			ncall += len(e.ToolCalls)
		case trace.KindToolOutput:
			nout++
		case trace.KindToolCall:
			ncall++
		}
	}
	msgs := make([]builtin.Message, nmsg)
	outs := make([]builtin.ToolOutput, nout)
	m.callSlab = make([]callAlloc, ncall)
	for _, e := range evs {
		switch e.Kind {
		case trace.KindMessage:
			idx := len(m.Events)
			msg := &msgs[0]
			msgs = msgs[1:]
			msg.Role = e.Role
			m.base(&msg.EventBase, idx, e.Metadata, e.Server)
			msg.Content = content(e, msg.At)
			msg.CallsNull = e.NullToolCalls
			m.Events = append(m.Events, msg)
			m.Seq = append(m.Seq, msg)
			var callsAt *builtin.Path
			if len(e.ToolCalls) > 0 {
				callsAt = msg.At.Child("tool_calls", 4)
			}
			for i, c := range e.ToolCalls {
				tc := m.toolCall(c, idx, callsAt, i)
				tc.Message = msg
				msg.ToolCalls = append(msg.ToolCalls, tc)
			}
		case trace.KindToolCall:
			idx := len(m.Events)
			tc := m.toolCall(e.Call, idx, nil, -1)
			m.Events = append(m.Events, tc)
		case trace.KindToolOutput:
			idx := len(m.Events)
			out := &outs[0]
			outs = outs[1:]
			out.Role = e.Role
			m.base(&out.EventBase, idx, e.Metadata, e.Server)
			out.Content = content(e, out.At)
			if e.HasToolCallID {
				if e.ToolCallID != nil {
					out.ToolCallID = boxed(e.Object(), "tool_call_id", *e.ToolCallID)
				}
			} else if n := len(m.calls); n > 0 {
				out.ToolCallID = m.calls[n-1].ID
			}
			// the most recent call with that id (a map: scanning back
			// through every call was quadratic)
			out.Call = m.callByID[out.ToolCallID]
			m.Events = append(m.Events, out)
			m.Seq = append(m.Seq, out)
			if out.Call != nil {
				m.byTool[out.Call.Function.Name] = append(m.byTool[out.Call.Function.Name], len(m.Seq)-1)
			}
		case trace.KindTools:
			for _, t := range e.Tools {
				idx := len(m.Events)
				tool := &builtin.Tool{Name: t.Name, Description: t.Description}
				m.base(&tool.EventBase, idx, t.Metadata, t.Server)
				sp := tool.At.Child("inputSchema", 4)
				for i, p := range t.Parameters {
					tool.InputSchema = append(tool.InputSchema, param(p, sp.Index(i)))
				}
				m.Events = append(m.Events, tool)
				m.Seq = append(m.Seq, tool)
			}
		}
	}
	m.callSlab = nil
}

func (m *Model) base(b *builtin.EventBase, idx int, md *trace.Object, server *string) {
	b.Index = idx
	b.Position = len(m.Seq)
	b.Path.SetEvent(idx)
	b.At = &b.Path
	if md != nil && md.Len() > 0 {
		b.UserMetadata, _ = value(md).(*builtin.Dict)
	}
	if server != nil {
		b.Server = *server
	}
}

// toolCall converts a tool call: element i of the tool_calls list at
// calls, or a bare call (calls nil) with its own trace index.
func (m *Model) toolCall(c *trace.ToolCall, idx int, calls *builtin.Path, i int) *builtin.ToolCall {
	// the call and its function object in one allocation, from the slab
	// Append made
	var a *callAlloc
	if len(m.callSlab) > 0 {
		a, m.callSlab = &m.callSlab[0], m.callSlab[1:]
	} else {
		a = &callAlloc{}
	}
	tc := &a.tc
	tc.Type = c.Type
	m.base(&tc.EventBase, idx, c.Metadata, c.Server)
	if calls != nil {
		tc.Path.SetIndex(calls, i)
	}
	if c.ID != nil {
		tc.ID = boxed(c.Raw, "id", *c.ID)
	}
	fn := &a.fn
	fn.Name = c.Function.Name
	fn.Path = builtin.Path{Parent: tc.At, Seg: "function", Ord: 4}
	fn.At = &fn.Path
	fn.LazyFrom, fn.LazyConvert = c.Function.Arguments, value
	if c.Function.ArgumentsRaw {
		m.Warnings = append(m.Warnings, fmt.Sprintf("invalid tool arguments at event %d", idx))
	}
	tc.Function = fn
	m.Seq = append(m.Seq, tc)
	m.calls = append(m.calls, tc)
	if m.callByID == nil {
		m.callByID = map[builtin.Value]*builtin.ToolCall{}
	}
	m.callByID[tc.ID] = tc
	m.byTool[fn.Name] = append(m.byTool[fn.Name], len(m.Seq)-1)
	return tc
}

// boxed returns s, the string member key of the stored object o, as a
// Value: the decoder's own boxed value when o holds it, so that the model
// does not box every content and id a second time.
func boxed(o *trace.Object, key, s string) builtin.Value {
	if v, ok := o.Get(key); ok {
		if vs, ok := v.(string); ok && vs == s {
			return v
		}
	}
	return s
}

// content converts the content of the event e at ev (its path is built
// only for chunked content, whose chunks need it).
func content(e *trace.Event, ev *builtin.Path) builtin.Value {
	c := e.Content
	switch c.Kind {
	case trace.ContentText:
		return boxed(e.Object(), "content", c.Text)
	case trace.ContentObject:
		return value(c.Object)
	case trace.ContentChunks:
		at := ev.Child("content", 3)
		cs := &builtin.Contents{At: at, Chunks: make([]builtin.Value, len(c.Chunks))}
		for i, ch := range c.Chunks {
			cat := at.Index(i)
			switch ch.Kind {
			case trace.ChunkText:
				cs.Chunks[i] = &builtin.TextChunk{At: cat, Type: ch.Type, Text: ch.Text}
			case trace.ChunkImage:
				cs.Chunks[i] = &builtin.Image{At: cat, Type: ch.Type, URL: ch.ImageURL}
			default:
				cs.Chunks[i] = builtin.Located{V: value(ch.Raw), At: cat}
			}
		}
		return cs
	}
	return nil
}

func param(p *trace.ToolParameter, at *builtin.Path) *builtin.ToolParameter {
	tp := &builtin.ToolParameter{At: at, Name: p.Name, Description: p.Description, Required: p.Required}
	if p.Types != nil {
		ts := make([]builtin.Value, len(p.Types))
		for i, t := range p.Types {
			ts[i] = t
		}
		tp.Type = ts
	} else {
		tp.Type = p.Type
	}
	if p.Properties != nil {
		d := builtin.NewDict(len(p.Properties))
		pat := at.Child("properties", 4)
		for i, q := range p.Properties {
			key := q.Name
			if j := lastDot(key); j >= 0 {
				key = key[j+1:]
			}
			d.Set(key, param(q, pat.Child(key, i)))
		}
		tp.Properties = d
	}
	if p.AdditionalProperties != nil {
		tp.AdditionalProperties = *p.AdditionalProperties
	}
	if p.Items != nil {
		tp.Items = param(p.Items, at.Child("items", 6))
	}
	if p.Enum != nil {
		tp.Enum = value(p.Enum)
	}
	return tp
}

func lastDot(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '.' {
			return i
		}
	}
	return -1
}

// value converts a decoded JSON value of package trace to an unlocated
// evaluator value.
func value(v trace.Value) builtin.Value {
	switch x := v.(type) {
	case trace.Number:
		if x.IsInt() {
			if i, ok := x.Int64(); ok {
				return i
			}
			if b, ok := new(big.Int).SetString(string(x), 10); ok {
				return b
			}
		}
		return x.Float64()
	case []trace.Value:
		out := make([]builtin.Value, len(x))
		for i, e := range x {
			out[i] = value(e)
		}
		return out
	case *trace.Object:
		if x == nil {
			return nil
		}
		d := builtin.NewDict(len(x.Members))
		for _, mem := range x.Members {
			d.Set(mem.Key, value(mem.Value))
		}
		return d
	}
	return v
}

// Select returns the selection of type name t over the whole trace (spec
// §7.6), cached.
func (m *Model) Select(t string) []builtin.Value {
	s := m.sel[t]
	if s == nil {
		s = &selection{}
		m.sel[t] = s
	}
	if eventTypes[t] {
		// events never contain events other than a message's tool calls,
		// which the flattened sequence lists in selection order
		for ; s.upTo < len(m.Seq); s.upTo++ {
			if e := m.Seq[s.upTo]; builtin.TypeName(e) == t {
				s.vals = append(s.vals, e)
			}
		}
		return s.vals
	}
	for ; s.upTo < len(m.Events); s.upTo++ {
		s.vals = appendSelect(s.vals, t, m.Events[s.upTo])
	}
	return s.vals
}

// ToolPositions returns the positions in Seq of the tool calls named name
// and of the outputs linked to them, in order.
func (m *Model) ToolPositions(name string) []int { return m.byTool[name] }

// IndexOf returns the trace index of an event value, or -1.
func IndexOf(v builtin.Value) int {
	if e, ok := v.(builtin.Event); ok {
		return e.TraceIndex()
	}
	return -1
}

// appendSelect appends the selection of type t in v (spec §7.6).
func appendSelect(out []builtin.Value, t string, v builtin.Value) []builtin.Value {
	if builtin.TypeName(v) == t {
		if _, isContents := v.(*builtin.Contents); !isContents {
			return append(out, v)
		}
	}
	switch x := builtin.Strip(v).(type) {
	case *builtin.Message:
		out = appendSelect(out, t, x.ContentValue())
		out = appendSelect(out, t, builtin.Located{V: x.Role, At: x.At.Child("role", 2)})
		for _, c := range x.ToolCalls {
			out = appendSelect(out, t, c)
		}
	case *builtin.ToolCall:
		if x.ID != nil {
			out = appendSelect(out, t, builtin.Located{V: x.ID, At: x.At.Child("id", 2)})
		} else {
			out = appendSelect(out, t, nil)
		}
		out = appendSelect(out, t, builtin.Located{V: x.Type, At: x.At.Child("type", 3)})
		out = appendSelect(out, t, x.Function)
	case *builtin.ToolOutput:
		out = appendSelect(out, t, builtin.Located{V: x.Role, At: x.At.Child("role", 2)})
		out = appendSelect(out, t, x.ContentValue())
		if x.ToolCallID != nil {
			out = appendSelect(out, t, builtin.Located{V: x.ToolCallID, At: x.At.Child("tool_call_id", 4)})
		}
	case *builtin.Tool:
		for _, p := range x.InputSchema {
			out = appendSelect(out, t, p)
		}
	case *builtin.Contents:
		for _, c := range x.Chunks {
			out = appendSelect(out, t, c)
		}
	case *builtin.TextChunk:
		out = appendSelect(out, t, builtin.Located{V: x.Text, At: x.At.Child("text", 1)})
	case *builtin.Image:
		out = appendSelect(out, t, x.ImageURLValue())
	case []builtin.Value, builtin.Tuple:
		els, _ := builtin.Elements(v)
		for _, e := range els {
			out = appendSelect(out, t, e)
		}
	case *builtin.Dict:
		at := builtin.At(v)
		for i, k := range x.Keys {
			out = appendSelect(out, t, builtin.ChildAt(at, k, i, x.M[k]))
		}
	}
	return out
}

// sortedBySeq reports the position of the first event in evs (sorted by
// Seq) whose Seq is > s.
func firstAfter(evs []builtin.Value, s int) int {
	return sort.Search(len(evs), func(i int) bool { return evs[i].(builtin.Event).Seq() > s })
}
