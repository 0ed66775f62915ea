package mcp

import (
	"encoding/json"
	"time"

	"github.com/oklog/ulid/v2"
)

// The trace events of an MCP session (spec/gateway.md §9.1), in the
// Invariant trace format: a tools/call is an assistant event with one
// tool call, its answer a tool event; tools/list is a call named
// "tools/list" whose output holds the compact JSON of the tools array as
// content and the array itself as "tools".

func now() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000000Z") }

func newULID() string { return ulid.Make().String() }

func marshal(v map[string]any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(map[string]any{"role": "tool", "content": "unencodable event: " + err.Error(), "timestamp": now()})
	}
	return b
}

// The events built on every tools/call are encoded from structs, whose
// fields are in the sorted key order of the map encoding the other
// events use, so the bytes are the same (events_test.go checks it)
// without the map's allocations and key sorting.
type (
	callEventJSON struct {
		Content   string          `json:"content"`
		Role      string          `json:"role"`
		Timestamp string          `json:"timestamp"`
		ToolCalls [1]toolCallJSON `json:"tool_calls"`
	}
	toolCallJSON struct {
		Function struct {
			Arguments json.RawMessage `json:"arguments"`
			Name      string          `json:"name"`
		} `json:"function"`
		ID   string `json:"id"`
		Type string `json:"type"`
	}
	resultEventJSON struct {
		Content           json.RawMessage `json:"content"`
		Error             bool            `json:"error,omitempty"`
		Role              string          `json:"role"`
		StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
		Timestamp         string          `json:"timestamp"`
		ToolCallID        string          `json:"tool_call_id"`
	}
)

func callEvent(callID, name string, args json.RawMessage) json.RawMessage {
	ev := callEventJSON{Role: "assistant", Timestamp: now()}
	tc := &ev.ToolCalls[0]
	tc.ID, tc.Type, tc.Function.Name, tc.Function.Arguments = callID, "function", name, args
	if b, err := json.Marshal(&ev); err == nil {
		return b
	}
	return marshal(map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{
		"id": callID, "type": "function", "function": map[string]any{"name": name, "arguments": args}}}, "timestamp": ev.Timestamp})
}

func resultEvent(callID string, content json.RawMessage, isError bool, structured json.RawMessage) json.RawMessage {
	if len(content) == 0 || string(content) == "null" {
		content = json.RawMessage("[]")
	}
	ev := resultEventJSON{Content: content, Error: isError, Role: "tool", Timestamp: now(), ToolCallID: callID}
	if len(structured) > 0 && string(structured) != "null" {
		ev.StructuredContent = structured
	}
	if b, err := json.Marshal(&ev); err == nil {
		return b
	}
	m := map[string]any{"role": "tool", "tool_call_id": callID, "content": content, "timestamp": ev.Timestamp}
	if isError {
		m["error"] = true
	}
	if ev.StructuredContent != nil {
		m["structuredContent"] = structured
	}
	return marshal(m)
}

func outputEvent(callID, text string, isError bool) json.RawMessage {
	ev := map[string]any{"role": "tool", "tool_call_id": callID, "content": text, "timestamp": now()}
	if isError {
		ev["error"] = true
	}
	return marshal(ev)
}

func errorEvent(callID string, code int, msg string) json.RawMessage {
	return marshal(map[string]any{"role": "tool", "tool_call_id": callID, "content": msg,
		"error": map[string]any{"code": code, "message": msg}, "timestamp": now()})
}

func listEvent(callID string, tools []json.RawMessage) json.RawMessage {
	if tools == nil {
		tools = []json.RawMessage{}
	}
	compact, _ := json.Marshal(tools)
	return marshal(map[string]any{"role": "tool", "tool_call_id": callID, "content": string(compact), "tools": json.RawMessage(compact), "timestamp": now()})
}

// markBlocked adds "vigil_blocked": true to an event.
func markBlocked(ev json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(ev, &m) != nil {
		return ev
	}
	m["vigil_blocked"] = json.RawMessage("true")
	b, _ := json.Marshal(m)
	return b
}
