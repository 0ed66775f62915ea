// Package ingest is the one write path every source uses (push, append,
// upload, snippets, SDK runs, and the gateway, MCP and OTLP sources to
// come): it normalises a trace's events (message ids, timestamps, inline
// images to content-addressed blobs, the tool registry), stores the blobs,
// and seals the events into signed ledger receipts inside the store's
// write transaction, which also enqueues the monitor evaluations and
// search marks of the trace.
//
// Prepare normalises one trace; an Ingester (New) holds the store and the
// server's ledger key and provides the seal, presign, close and session
// callbacks the store's write requests take. Bad input is an *Error naming
// where it is (a JSON path); problems that are tolerated become Warnings.
package ingest

import (
	"errors"
	"fmt"
	"time"

	"github.com/vigilhq/vigil/internal/lazyregexp"
	"github.com/vigilhq/vigil/ledger"
	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/trace"
)

// MaxWarnings caps the warnings of one response.
const MaxWarnings = 100

// Warning is a non-fatal ingest note: trace and message indices (-1 when
// not tied to one) and a message.
type Warning struct {
	Trace   int    `json:"trace"`
	Message int    `json:"message"`
	Detail  string `json:"detail"`
}

// Warnings collects the warnings of one request, at most MaxWarnings.
type Warnings []Warning

// Add records a warning unless MaxWarnings are already held.
func (w *Warnings) Add(traceIdx, msgIdx int, format string, args ...any) {
	if len(*w) < MaxWarnings {
		*w = append(*w, Warning{Trace: traceIdx, Message: msgIdx, Detail: fmt.Sprintf(format, args...)})
	}
}

// Error codes of an *Error.
const (
	// CodeInvalidJSON: the input is not JSON.
	CodeInvalidJSON = "invalid_json"
	// CodeInvalidRequest: the input is JSON but not a valid trace.
	CodeInvalidRequest = "invalid_request"
)

// Error is bad ingest input: a client error (an HTTP 400 in the server)
// with a code, a message and, when known, the JSON path of the bad value.
type Error struct {
	Code   string // CodeInvalidJSON or CodeInvalidRequest
	Detail string // the message, naming where when Path is set
	Path   string // JSON path of the bad value, "" when not tied to one
}

// Error returns the message.
func (e *Error) Error() string { return e.Detail }

func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Detail: fmt.Sprintf(format, args...)}
}

// errAt is a CodeInvalidRequest naming the JSON path of the bad value.
func errAt(path, format string, args ...any) *Error {
	return &Error{Code: CodeInvalidRequest, Detail: path + ": " + fmt.Sprintf(format, args...), Path: path}
}

var messageIDRx = lazyregexp.New(`^[A-Za-z0-9_-]{1,64}$`)

// outputTimeLayout is the API's output time form.
const outputTimeLayout = "2006-01-02T15:04:05.000000Z"

// FormatTime formats t in the API's output time form (UTC, microseconds).
func FormatTime(t time.Time) string { return t.UTC().Format(outputTimeLayout) }

// ParseTime accepts RFC 3339 and ISO 8601 with or without an offset
// (no offset means UTC), with "T" or a space between date and time.
func ParseTime(s string) (time.Time, bool) {
	for _, layout := range []string{
		time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999Z07:00",
		"2006-01-02 15:04:05.999999999", "2006-01-02T15:04:05.999999999Z0700", "2006-01-02",
	} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// TraceOptions say how strict Prepare is and where the events are.
type TraceOptions struct {
	TraceIdx int // position of the trace in the request, for messages
	// FirstIndex is the event index of the first event (append: the
	// current message count).
	FirstIndex int
	// UsedIDs holds message ids already in the trace (append); new ids
	// are added to it.
	UsedIDs map[string]bool
	// StrictTimestamps makes an unparsable timestamp an error (append).
	StrictTimestamps bool
	// DefaultTime, when non-zero, is set as timestamp on events without
	// one (append).
	DefaultTime time.Time
	// TraceID is the id of the trace the events go to: image links name
	// it.
	TraceID string
	// Path is the JSON path of the event list in the request, for errors
	// ("" = "messages[<TraceIdx>]", a push).
	Path string
}

// Prepared is one normalised trace, ready for the store.
type Prepared struct {
	Messages []store.Message
	Tools    map[string]*store.ToolUse
	Events   []*trace.Event
	Decoded  *trace.Trace
	// Images are the blobs of the trace's inline images, to be stored
	// (Ingester.PutBlobs) before the trace.
	Images Images
}

// NotObjectsError is the error of trace i of a request when it is not a
// list of objects.
func NotObjectsError(i int) *Error {
	return errorf(CodeInvalidRequest, "trace %d must be a list of objects", i)
}

// Prepare decodes the JSON array raw (one trace's events), normalises
// each event (inline images, message_id, timestamp, node ids) and returns
// the store messages and tool uses. Problems that are tolerated become
// warnings in warn; the others are an *Error.
func Prepare(raw []byte, opt TraceOptions, warn *Warnings) (*Prepared, error) {
	t, err := trace.Decode(raw)
	if err != nil && t == nil {
		if errors.Is(err, trace.ErrSyntax) {
			return nil, errorf(CodeInvalidJSON, "trace %d: %v", opt.TraceIdx, err)
		}
		return nil, NotObjectsError(opt.TraceIdx)
	}
	if t.Form != trace.FormList {
		return nil, NotObjectsError(opt.TraceIdx)
	}
	if err != nil {
		var el trace.ErrorList
		if errors.As(err, &el) {
			for _, e := range el {
				warn.Add(opt.TraceIdx, -1, "%s", e.Error())
			}
		}
	}
	for _, w := range t.Warnings {
		warn.Add(opt.TraceIdx, w.Index, "%s", w.String())
	}
	used := opt.UsedIDs
	if used == nil {
		used = make(map[string]bool, len(t.Events))
	}
	p := &Prepared{Messages: make([]store.Message, len(t.Events)), Tools: map[string]*store.ToolUse{}, Events: t.Events, Decoded: t}
	for j, e := range t.Events {
		obj := e.Object()
		if obj == nil {
			return nil, NotObjectsError(opt.TraceIdx)
		}
		idx := opt.FirstIndex + j
		// Inline images become blobs and links (images.go).
		if err := p.Images.Rewrite(obj, opt.TraceID, Pos{opt.Path, opt.TraceIdx, j}); err != nil {
			return nil, err
		}
		// message_id: kept when valid and unused, else a server id.
		id := ""
		if v, ok := obj.Get("message_id"); ok {
			if s, isStr := v.(string); isStr && messageIDRx.MatchString(s) && !used[s] {
				id = s
			} else {
				warn.Add(opt.TraceIdx, idx, "message_id %s replaced by a server id (want a unique string matching %s)", trace.Marshal(v), messageIDRx)
			}
		}
		if id == "" {
			id = store.NewULID()
			obj.Set("message_id", id)
		}
		used[id] = true
		// timestamp: normalised to the output form.
		if v, ok := obj.Get("timestamp"); ok {
			if s, isStr := v.(string); isStr {
				if ts, ok := ParseTime(s); ok {
					obj.Set("timestamp", FormatTime(ts))
				} else if opt.StrictTimestamps {
					return nil, errorf(CodeInvalidRequest, "Invalid timestamp format in message: %s. Expected format: ISO 8601, e.g., 2025-01-23T10:30:00+00:00", s)
				} else {
					warn.Add(opt.TraceIdx, idx, "unparsable timestamp %q kept verbatim", s)
				}
			}
		} else if !opt.DefaultTime.IsZero() {
			obj.Set("timestamp", FormatTime(opt.DefaultTime))
		}
		// Tool registry.
		calls := e.ToolCalls
		if e.Call != nil {
			calls = []*trace.ToolCall{e.Call}
		}
		for _, c := range calls {
			if c.Function.Name == "" {
				continue
			}
			tu := p.Tools[c.Function.Name]
			if tu == nil {
				tu = &store.ToolUse{Name: c.Function.Name}
				p.Tools[c.Function.Name] = tu
			}
			tu.Count++
			if args := c.Function.Args(); args != nil {
				for _, k := range args.Keys() {
					if !containsString(tu.ArgumentKeys, k) {
						tu.ArgumentKeys = append(tu.ArgumentKeys, k)
					}
				}
			}
		}
		// Node ids: the primary node, then one child per tool call of an
		// assistant message.
		nodes := []string{ledger.NewID()}
		if e.Kind == trace.KindMessage && e.Role == "assistant" {
			for range e.ToolCalls {
				nodes = append(nodes, ledger.NewID())
			}
		}
		p.Messages[j] = store.Message{ID: id, NodeIDs: nodes, Data: trace.Marshal(obj)}
	}
	return p, nil
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// MergeTools merges tool uses into acc.
func MergeTools(acc map[string]*store.ToolUse, add map[string]*store.ToolUse) {
	for name, tu := range add {
		a := acc[name]
		if a == nil {
			cp := *tu
			cp.ArgumentKeys = append([]string(nil), tu.ArgumentKeys...)
			acc[name] = &cp
			continue
		}
		a.Count += tu.Count
		for _, k := range tu.ArgumentKeys {
			if !containsString(a.ArgumentKeys, k) {
				a.ArgumentKeys = append(a.ArgumentKeys, k)
			}
		}
	}
}

// ToolList returns the tool uses of m as the store's list.
func ToolList(m map[string]*store.ToolUse) []store.ToolUse {
	out := make([]store.ToolUse, 0, len(m))
	for _, tu := range m {
		out = append(out, *tu)
	}
	return out
}
