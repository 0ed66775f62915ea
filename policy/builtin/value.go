package builtin

import (
	"strconv"
	"sync"
)

// Value is a value of the policy language (spec §6.1). The dynamic type
// decides the kind:
//
//	nil            None
//	bool           bool
//	int64          int (exact; arithmetic that overflows is a runtime error)
//	float64        float
//	string         str (unlocated)
//	[]Value        list
//	Tuple          tuple
//	*Dict          dict (string keys, insertion order)
//	Located        a node of the normalised trace that is not an event (str,
//	               list, dict, number reached from an event), with its address
//	*Message, *ToolCall, *Function, *ToolOutput, *Tool, *ToolParameter,
//	*TextChunk, *Image, *Contents   event objects (spec §7.3)
//	*Record        a detector result (PythonCodeResult, HTMLData, CodeIssue)
//	*Builtin, *Method, *Module, *Violation, and evaluator-defined values
//	               (predicates, tool patterns) implementing Displayer
//
// Use Strip to look through a Located wrapper before switching on the kind.
type Value = any

// Tuple is a tuple value.
type Tuple []Value

// Dict is a dict value: string keys in insertion order.
type Dict struct {
	Keys []string
	M    map[string]Value

	ordMu sync.Mutex
	ord   map[string]int // position of each key, built by Ord for large dicts
}

// NewDict returns an empty dict with room for n entries.
func NewDict(n int) *Dict { return &Dict{Keys: make([]string, 0, n), M: make(map[string]Value, n)} }

// Set sets key k to v, keeping the first position of a repeated key.
func (d *Dict) Set(k string, v Value) {
	if _, ok := d.M[k]; !ok {
		d.Keys = append(d.Keys, k)
	}
	d.M[k] = v
}

// Get returns the value for k.
func (d *Dict) Get(k string) (Value, bool) {
	v, ok := d.M[k]
	return v, ok
}

// Ord returns the position of key k in d.Keys (0 when absent). Large
// dicts keep an index, so that visiting every key of a trace object costs
// linear time in all, not quadratic. It is safe for concurrent use.
func (d *Dict) Ord(k string) int {
	if len(d.Keys) <= 32 {
		for i, kk := range d.Keys {
			if kk == k {
				return i
			}
		}
		return 0
	}
	d.ordMu.Lock()
	defer d.ordMu.Unlock()
	if len(d.ord) != len(d.Keys) {
		d.ord = make(map[string]int, len(d.Keys))
		for i, kk := range d.Keys {
			if _, dup := d.ord[kk]; !dup {
				d.ord[kk] = i
			}
		}
	}
	return d.ord[k]
}

// Len returns the number of entries (0 for a nil dict).
func (d *Dict) Len() int {
	if d == nil {
		return 0
	}
	return len(d.Keys)
}

// Path is the address of a node of the normalised trace (spec §7.7, §11.4),
// built as a linked list from the event down, so that deriving a child's
// address costs one small allocation and rendering happens only for results.
// Ord is the position of the segment in document order (list index, field
// position in the JSON form of §7.3, dict key position) used to sort ranges.
type Path struct {
	Parent *Path
	Seg    string // field name or dict key; "" for a list index (Ord)
	Ord    int
	index  bool
}

// EventPath returns the address of the event with trace index i.
func EventPath(i int) *Path { return &Path{Ord: i, index: true} }

// SetEvent makes p the address of the event with trace index i, for paths
// embedded in the events themselves (no allocation).
func (p *Path) SetEvent(i int) { *p = Path{Ord: i, index: true} }

// SetIndex makes p the address of element i of the list at parent.
func (p *Path) SetIndex(parent *Path, i int) { *p = Path{Parent: parent, Ord: i, index: true} }

// Child returns the address of the child seg of p at document position ord.
func (p *Path) Child(seg string, ord int) *Path { return &Path{Parent: p, Seg: seg, Ord: ord} }

// Index returns the address of element i of the list at p.
func (p *Path) Index(i int) *Path { return &Path{Parent: p, Ord: i, index: true} }

// String renders the address, e.g. "messages.1.tool_calls.0".
func (p *Path) String() string {
	var buf [96]byte
	return string(p.AppendString(buf[:0]))
}

// AppendString appends p.String() to b, for callers that extend the text
// (a range's ":start-end") or use it as a temporary key.
func (p *Path) AppendString(b []byte) []byte {
	if p == nil {
		return append(b, "messages"...)
	}
	b = p.Parent.AppendString(b)
	b = append(b, '.')
	if p.index {
		return strconv.AppendInt(b, int64(p.Ord), 10)
	}
	return append(b, p.Seg...)
}

// Ords returns the document-order key of p, root first.
func (p *Path) Ords() []int {
	n := 0
	for q := p; q != nil; q = q.Parent {
		n++
	}
	out := make([]int, n)
	for q := p; q != nil; q = q.Parent {
		n--
		out[n] = q.Ord
	}
	return out
}

// Located is a value of the normalised trace that is not an event object,
// together with its address (spec §6.9). Operators look through it with
// Strip; read its address with At (or Path).
//
// When Seg is set the address is At.Child(Seg, Ord), built only when
// needed (most located values are compared, never marked), which saves an
// allocation per member access.
type Located struct {
	V   Value
	At  *Path
	Seg string // lazy last segment; "" when At is the address
	Ord int
}

// Path returns the address of l.
func (l Located) Path() *Path {
	if l.Seg != "" {
		return l.At.Child(l.Seg, l.Ord)
	}
	return l.At
}

// Strip returns v without its location.
func Strip(v Value) Value {
	if l, ok := v.(Located); ok {
		return l.V
	}
	return v
}

// At returns the address of a located value or event object, or nil.
func At(v Value) *Path {
	switch x := v.(type) {
	case Located:
		return x.Path()
	case Event:
		return x.Addr()
	case *Function:
		return x.At
	case *ToolParameter:
		return x.At
	case *TextChunk:
		return x.At
	case *Image:
		return x.At
	case *Contents:
		return x.At
	}
	return nil
}

// locate wraps a trace value with its address; events keep their own.
func locate(v Value, at *Path) Value {
	if at == nil {
		return v
	}
	switch v.(type) {
	case nil, bool, int64, float64, string, []Value, *Dict, Tuple:
		return Located{V: v, At: at}
	}
	return v
}

// Child returns the located child of a located container: element i of a
// list, or entry k of a dict. It is how member and index access and
// iteration keep locations.
func ChildAt(parent *Path, seg string, ord int, v Value) Value {
	if parent == nil {
		return v
	}
	switch v.(type) {
	case nil, bool, int64, float64, string, []Value, *Dict, Tuple:
		if seg == "" { // an empty dict key cannot be a lazy segment
			return Located{V: v, At: parent.Child(seg, ord)}
		}
		return Located{V: v, At: parent, Seg: seg, Ord: ord}
	}
	return v
}

// Event is implemented by the four kinds of trace events that have a trace
// index (Message, ToolCall, ToolOutput, Tool).
type Event interface {
	// TraceIndex is the trace index (spec §7.4); a tool call has its
	// message's index.
	TraceIndex() int
	// Seq is the position in the flattened event sequence (spec §7.5).
	Seq() int
	// Addr is the event's address.
	Addr() *Path
	// Server is the event's server or nil.
	ServerValue() Value
}

// EventBase holds what all events share.
type EventBase struct {
	Index    int   // trace index
	Position int   // flattened sequence position
	At       *Path // address
	// UserMetadata is the event's metadata object as given (nil when
	// absent or null); Metadata adds trace_idx.
	UserMetadata *Dict
	metadata     *Dict
	// Path is storage for At, so that building an event allocates no
	// separate address.
	Path   Path
	Server Value // string or nil
}

// Metadata returns the event's metadata with trace_idx set to its trace
// index (spec §7.2), built on first use.
func (e *EventBase) Metadata() *Dict {
	if e.metadata == nil {
		d := NewDict(e.UserMetadata.Len() + 1)
		if e.UserMetadata != nil {
			for _, k := range e.UserMetadata.Keys {
				d.Set(k, e.UserMetadata.M[k])
			}
		}
		d.Set("trace_idx", int64(e.Index))
		e.metadata = d
	}
	return e.metadata
}

// TraceIndex implements Event.
func (e *EventBase) TraceIndex() int { return e.Index }

// Seq implements Event.
func (e *EventBase) Seq() int { return e.Position }

// Addr implements Event.
func (e *EventBase) Addr() *Path { return e.At }

// ServerValue implements Event.
func (e *EventBase) ServerValue() Value { return e.Server }

// Message is a message event (spec §7.3).
type Message struct {
	EventBase
	Role    string
	Content Value // nil, string, *Contents
	// LocatedContent caches Content with its location, made on first
	// use (or by LocateContent).
	LocatedContent Value
	ToolCalls      []*ToolCall
	CallsNull      bool // tool_calls was JSON null
	contentOnce    sync.Once
}

// ToolCall is a tool call, inside a message or bare.
type ToolCall struct {
	EventBase
	ID       Value // string or nil
	Type     string
	Function *Function
	Message  *Message // enclosing message, nil for a bare call
}

// Function is the function of a tool call.
type Function struct {
	// Path is storage for At.
	Path Path
	At   *Path
	Name string
	// Arguments is a *Dict normally; a string or other JSON value if not an
	// object. Read it with Args: when LazyArguments is set, it is converted
	// on first use (most rules never read the arguments of most calls).
	Arguments     Value
	LazyArguments func() Value
	// LazyConvert, when set (and LazyArguments is not), makes the
	// arguments on first use as LazyConvert(LazyFrom): a function and its
	// input cost no allocation, where a closure over the input would.
	LazyConvert func(any) Value
	LazyFrom    any
	argsOnce    sync.Once
	// nameLoc and argsLoc are the located name and arguments, made once
	// (NameValue, ArgsValue).
	nameOnce, argsLocOnce sync.Once
	nameLoc, argsLoc      Value
}

// NameValue returns the name located at its path (f.At.name), made on
// first use and then shared: rules read a call's name often (counts and
// comparisons over every pair of calls), and each read would otherwise
// box the name and its location anew. It is safe for concurrent use.
func (f *Function) NameValue() Value {
	f.nameOnce.Do(func() { f.nameLoc = fieldValue(f.Name, f.At, "name", 0) })
	return f.nameLoc
}

// ArgsValue returns Args located at its path (f.At.arguments), made on
// first use and then shared, as NameValue. It is safe for concurrent use.
func (f *Function) ArgsValue() Value {
	f.argsLocOnce.Do(func() { f.argsLoc = fieldValue(f.Args(), f.At, "arguments", 1) })
	return f.argsLoc
}

// Args returns the arguments, converting them on first use. It is safe
// for concurrent use.
func (f *Function) Args() Value {
	if f.LazyArguments != nil || f.LazyConvert != nil {
		f.argsOnce.Do(func() {
			if f.LazyArguments != nil {
				f.Arguments = f.LazyArguments()
			} else {
				f.Arguments = f.LazyConvert(f.LazyFrom)
			}
		})
	}
	return f.Arguments
}

// ToolOutput is a tool output event.
type ToolOutput struct {
	EventBase
	Role    string
	Content Value // nil, string, *Contents, *Dict
	// LocatedContent caches Content with its location, made on first
	// use (or by LocateContent).
	LocatedContent Value
	ToolCallID     Value     // string or nil
	Call           *ToolCall // linked tool call or nil
	contentOnce    sync.Once
}

// Tool is one tool of a {"tools": [...]} element.
type Tool struct {
	EventBase
	Name        string
	Description string
	InputSchema []*ToolParameter
}

// ToolParameter is a parameter of a tool's input schema.
type ToolParameter struct {
	At                   *Path
	Type                 Value // string or []Value of strings
	Name                 string
	Description          string
	Required             bool
	Properties           *Dict // name -> *ToolParameter, or nil
	AdditionalProperties Value // bool or nil
	Items                Value // *ToolParameter or nil
	Enum                 Value // []Value or nil
}

// TextChunk is a text chunk of chunked content.
type TextChunk struct {
	At   *Path
	Type string
	Text string
}

// Image is an image chunk; URL is the normalised image_url.url.
type Image struct {
	At   *Path
	Type string
	URL  string
}

// Contents is chunked content: *TextChunk, *Image or opaque *Dict elements
// (the latter located).
type Contents struct {
	At     *Path
	Chunks []Value
}

// Record is a detector result with named fields in a fixed order
// (PythonCodeResult, HTMLData, CodeIssue, ...). Its fields are its readable
// attributes and its JSON form.
type Record struct {
	Type   string
	Fields []Field
}

// Field is one named field of a Record.
type Field struct {
	Name  string
	Value Value
}

// Get returns the field called name.
func (r *Record) Get(name string) (Value, bool) {
	for _, f := range r.Fields {
		if f.Name == name {
			return f.Value, true
		}
	}
	return nil, false
}

// Violation is the value of Violation(...) / PolicyViolation(...).
type Violation struct {
	Args   []Value
	Kwargs *Dict
}

// Method is a bound string or dict method (spec §6.8).
type Method struct {
	Recv Value
	Name string
}

// Module is an imported module value (spec §13.2).
type Module struct {
	Name string
}

// Quantifier is the value of forall / count; only usable as a quantifier
// header.
type Quantifier struct {
	Name string
}

// Displayer is implemented by evaluator-defined values (tool patterns,
// predicates) so that Display can render them.
type Displayer interface {
	Display() string
}
