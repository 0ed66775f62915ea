// Package trace is Vigil's event model: it decodes, validates, normalises,
// addresses, flattens and encodes agent traces in the OpenAI chat format
// (the Invariant trace format), and reads and writes JSONL datasets.
//
// # Model
//
// A Trace is a list of elements (Events) plus metadata. Each Event is a
// message, a tool output (role "tool"), a bare tool call, or a
// {"tools": [...]} element, classified and normalised as policy-language
// §7.2 says. Every Event keeps its stored form (Event.Raw: all members in
// input order, unknown keys included, JSON-object argument strings replaced
// by the object) next to a typed, read-only view (Role, Content,
// ToolCalls, ToolCallID, Tools, Metadata, Server). JSON values are Values:
// nil, bool, Number (literal text), string, []Value and *Object (ordered
// members), so Encode reproduces the input exactly, up to whitespace and
// the storage normalisation. Trace.Append normalises further elements of
// a live trace (trace indices, links and warnings continue).
//
// # Evaluation order
//
// Flatten returns the sequence the policy engine evaluates (§7.5): each
// normalised event, a message directly followed by its tool calls, with its
// trace index (§7.4), its normalised and stored addresses, and for tool
// outputs the tool call they are linked to.
//
// # Addresses
//
// Address, ParseAddress and Trace.Resolve implement the address grammar of
// explorer-api §2.3 (dots, brackets, @message_id, code-point ranges, lines,
// bounding boxes, <root>). Offsets are Unicode code points, end exclusive;
// ByteRange converts them to byte offsets.
//
// # Errors
//
// Malformed JSON is a *SyntaxError (ErrSyntax) with line and column. A
// well-formed input that is not a trace gives an ErrorList (ErrInvalidTrace)
// listing every problem with its JSON path and line:column, computed
// lazily from byte offsets only when an error is reported.
//
// # Concurrency
//
// Decoding builds a fresh trace; afterwards Flatten, Resolve, Encode and
// the typed view only read it, so a trace that nobody mutates may be shared
// between goroutines. Append mutates.
//
// Non-goals: the package does not evaluate rules (package policy), store
// traces or rewrite images into blobs (the server), or canonicalise JSON
// for hashing (package ledger). Converters from other formats live in
// trace/convert.
package trace
