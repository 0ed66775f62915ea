package trace

// Kind is the kind of a trace element (policy-language §7.2 classification).
type Kind uint8

// The element kinds, in the order of the classification rules.
const (
	// KindInvalid is an element that is not a JSON object, or an object
	// with a non-string role, or one that has none of role, type, tools.
	// Decode reports it as an error and keeps it verbatim in Event.Raw.
	KindInvalid Kind = iota
	// KindMessage is an object with a string role other than "tool".
	KindMessage
	// KindToolOutput is an object with role "tool".
	KindToolOutput
	// KindToolCall is a bare tool call: an object with a type key and no
	// role. Event.Call holds it.
	KindToolCall
	// KindTools is a {"tools": [...]} element. Event.Tools holds one Tool
	// per entry; each is its own normalised event (§7.4).
	KindTools
)

var kindNames = [...]string{"invalid", "message", "tool output", "tool call", "tools"}

// String returns the kind name: "message", "tool output", ...
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "invalid"
}

// Event is one element of a trace, as decoded and normalised.
//
// Raw is the element exactly as stored: every member in input order, with
// the storage normalisation of explorer-api §2.1 applied (tool-call
// arguments given as a JSON-object string are replaced by the object). It is
// what Encode writes and what the ledger hashes ("as stored after
// trace.Decode", ledger §7.4). The typed fields are a read-only view of Raw
// that follows policy-language §7.2; they share strings and sub-objects with
// Raw. To change an event, change Raw (or build a new Value) and decode it
// again with NewEvent, so the view and the stored form never disagree.
type Event struct {
	Kind Kind

	// Role is the role of a message or tool output ("" for other kinds).
	Role string
	// Content is the content of a message or tool output.
	Content Content
	// ToolCalls are the calls of a message, in order. Nil when the key is
	// absent or null; NullToolCalls tells which (policy: absent gives [],
	// null gives None).
	ToolCalls     []*ToolCall
	NullToolCalls bool
	// ToolCallID is the tool_call_id of a tool output as given: nil when the
	// key is absent or null. HasToolCallID reports whether the key is
	// present. The effective id of an output without the key (the most
	// recent call's) is computed by Flatten (Item.ToolCallID).
	ToolCallID    *string
	HasToolCallID bool
	// Call is the tool call of a bare tool-call element (KindToolCall).
	Call *ToolCall
	// Tools are the tools of a {"tools": [...]} element, in order.
	Tools []*Tool
	// Metadata is the element's metadata object; nil when absent or null
	// (the policy engine reads both as {}). The normaliser's trace_idx is
	// not written into it: see Item.Index.
	Metadata *Object
	// Server is metadata.server when it is a string, else nil.
	Server *string

	// Raw is the element as stored (see the type comment). For a valid
	// element it is an *Object.
	Raw Value
}

// Get returns the value of member key of the stored element (any key,
// including unknown ones such as "timestamp" or "reasoning").
func (e *Event) Get(key string) (Value, bool) {
	o, _ := e.Raw.(*Object)
	return o.Get(key)
}

// Object returns the stored element as an object (nil for a non-object
// invalid element).
func (e *Event) Object() *Object {
	o, _ := e.Raw.(*Object)
	return o
}

// ToolCall is a tool call, inside a message's tool_calls or bare.
type ToolCall struct {
	// ID is the call id; nil when absent or null.
	ID *string
	// Type is the call type, "function" when absent.
	Type string
	// Function is the called function.
	Function Function
	// Metadata is the call's own metadata object (nil when absent or null).
	Metadata *Object
	// Server is the call's metadata.server, else its message's (§7.2).
	Server *string
	// Raw is the call object as stored.
	Raw *Object
}

// Function is the function of a tool call.
type Function struct {
	// Name is the function name ("" only in an invalid trace).
	Name string
	// Arguments is the decoded argument object. It is an *Object, except
	// when the input gave a string that is not a JSON object, or a
	// non-object value: then it is that value, kept unchanged, and Decode
	// recorded a warning (ArgumentsRaw is true). Absent or null gives an
	// empty object.
	Arguments Value
	// ArgumentsRaw reports that Arguments could not be read as an object.
	ArgumentsRaw bool
	// Raw is the function object as stored.
	Raw *Object
}

// Args returns the arguments as an object, or nil when they are not one.
func (f *Function) Args() *Object {
	o, _ := f.Arguments.(*Object)
	return o
}

// ContentKind tells which form a Content has.
type ContentKind uint8

// Content forms.
const (
	ContentAbsent  ContentKind = iota // no content key (policy: None)
	ContentNull                       // "content": null (policy: None)
	ContentText                       // a string: Content.Text
	ContentChunks                     // an array: Content.Chunks
	ContentObject                     // an object (tool outputs only): Content.Object
	ContentInvalid                    // any other value; an error was reported
)

// Content is the content of a message or tool output: a string, null, a
// list of chunks, or (tool outputs) an object.
type Content struct {
	Kind   ContentKind
	Text   string  // ContentText
	Chunks []Chunk // ContentChunks
	Object *Object // ContentObject
}

// IsNone reports whether the content is absent or null (policy None).
func (c Content) IsNone() bool { return c.Kind == ContentAbsent || c.Kind == ContentNull }

// Texts returns the text of a string content, or the texts of the text
// chunks in order (what Contents.text() returns in the policy language).
func (c Content) Texts() []string {
	switch c.Kind {
	case ContentText:
		return []string{c.Text}
	case ContentChunks:
		var out []string
		for _, ch := range c.Chunks {
			if ch.Kind == ChunkText {
				out = append(out, ch.Text)
			}
		}
		return out
	}
	return nil
}

// ChunkKind is the kind of a content chunk (policy-language §7.2.1).
type ChunkKind uint8

// Chunk kinds.
const (
	// ChunkOther is an opaque element: kept, ignored by text() and image().
	ChunkOther ChunkKind = iota
	// ChunkText has a string text key.
	ChunkText
	// ChunkImage has an image_url that is a string or an object with a
	// string url.
	ChunkImage
)

// Chunk is one element of a content list.
type Chunk struct {
	Kind ChunkKind
	// Type is the chunk's type as given, defaulting to "text" or
	// "image_url"; for ChunkOther it is the type string if any.
	Type string
	// Text is the text of a ChunkText.
	Text string
	// ImageURL is the URL of a ChunkImage (policy normalises image_url to
	// {"url": ImageURL}).
	ImageURL string
	// Raw is the element as stored; for a non-object element (an error)
	// it is that value.
	Raw Value
}

// Tool is one entry of a {"tools": [...]} element (policy-language §7.2).
type Tool struct {
	// Name is the tool name.
	Name string
	// Description is the description, "no description available" when
	// absent or null, a non-string's display string (Display) otherwise.
	Description string
	// InputSchema is the input schema object (empty when absent).
	InputSchema *Object
	// Parameters is InputSchema turned into ToolParameters (§7.2), one per
	// entry of its properties object, in order.
	Parameters []*ToolParameter
	// Metadata is the tool's own metadata object.
	Metadata *Object
	// Server is the tool's metadata.server, else the tools element's.
	Server *string
	// Raw is the tool object as stored.
	Raw *Object
}

// ToolParameter is one parameter of a tool's input schema (policy §7.2).
// Fields that do not apply are nil.
type ToolParameter struct {
	Name string
	// Type is a single type name, or several (Types) for a list of types.
	Type  string
	Types []string
	// Description is the schema description or "no description available".
	Description string
	Required    bool
	// Properties are the nested parameters of an object type, in order.
	Properties []*ToolParameter
	// AdditionalProperties is the truthiness of additionalProperties of an
	// object type, nil when absent or null.
	AdditionalProperties *bool
	// Items is the parameter of an array type's items, or nil.
	Items *ToolParameter
	// Enum is the enum list of a scalar type, or nil.
	Enum []Value
}

// Warning is a non-fatal problem found while decoding, such as tool
// arguments that are not a JSON object.
type Warning struct {
	// Index is the trace index (§7.4) of the event concerned.
	Index int
	// Path is the JSON path of the value concerned.
	Path string
	// Msg is the message, e.g. "invalid tool arguments at event 3".
	Msg string
	// Line and Col locate the value in the input (1-based; 0 when
	// unknown). Decode fills them in for the first MaxErrors warnings.
	Line, Col int

	root int
	path []pathElem
}

// String renders `path: msg`.
func (w Warning) String() string { return w.Path + ": " + w.Msg }

// Form is the top-level shape a trace was decoded from; Encode writes the
// same shape back.
type Form uint8

// Trace forms.
const (
	// FormList is a JSON array of events.
	FormList Form = iota
	// FormObject is an object with a "messages" array (and usually
	// "metadata"); its other members are kept in Trace.Envelope.
	FormObject
)

// Trace is a decoded trace: its elements in order, plus metadata.
type Trace struct {
	// Events are the elements in input order; Events[i] is addressed
	// messages.i in stored addresses.
	Events []*Event
	// Metadata is the trace metadata (the object form's "metadata"); nil
	// when absent.
	Metadata *Object
	// Form is the shape the trace was decoded from.
	Form Form
	// Envelope is, for FormObject, the top-level object with every member
	// in order; Encode writes its members, substituting the current Events
	// for "messages" and Metadata for "metadata". Nil for FormList.
	Envelope *Object
	// Warnings lists the non-fatal problems found by Decode.
	Warnings []Warning
}
