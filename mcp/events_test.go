package mcp

import (
	"bytes"
	"encoding/json"
	"testing"
)

// The struct encodings of callEvent and resultEvent give the bytes of
// the map encoding they replace (sorted keys, HTML escaping, compacted
// raw values), so recorded traces and their hashes do not change.
func TestEventEncodingMatchesMaps(t *testing.T) {
	fix := func(b []byte) []byte {
		// Same timestamp on both sides.
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		return bytes.Replace(b, m["timestamp"], []byte(`"T"`), 1)
	}
	for _, args := range []string{`{}`, `{"text":"a <b> & \u2028 é"}`, "{ \"a\" : [1, 2,\n3] }", `{"n":1e3,"z":null}`} {
		for _, name := range []string{"echo", "we<ird>&\"name\"", "ünï"} {
			got := fix(callEvent("call_1", name, json.RawMessage(args)))
			want := fix(marshal(map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{
				"id": "call_1", "type": "function", "function": map[string]any{"name": name, "arguments": json.RawMessage(args)}}}, "timestamp": "T"}))
			if !bytes.Equal(got, want) {
				t.Errorf("callEvent:\n got %s\nwant %s", got, want)
			}
		}
	}
	// Invalid arguments: the same fallback event.
	if got, want := fix(callEvent("c", "n", json.RawMessage(`{bad`))), fix(marshal(map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{
		"id": "c", "type": "function", "function": map[string]any{"name": "n", "arguments": json.RawMessage(`{bad`)}}}, "timestamp": "T"})); !bytes.Equal(got, want) {
		t.Errorf("callEvent fallback:\n got %s\nwant %s", got, want)
	}
	for _, content := range []string{``, `null`, `[{"type":"text","text":"<hi> & bye"}]`, "[ {\"type\" : \"text\"} ]"} {
		for _, isErr := range []bool{false, true} {
			for _, sc := range []string{``, `null`, `{"a": "<x>"}`} {
				got := fix(resultEvent("call_<1>", json.RawMessage(content), isErr, json.RawMessage(sc)))
				c := json.RawMessage(content)
				if len(c) == 0 || string(c) == "null" {
					c = json.RawMessage("[]")
				}
				m := map[string]any{"role": "tool", "tool_call_id": "call_<1>", "content": c, "timestamp": "T"}
				if isErr {
					m["error"] = true
				}
				if len(sc) > 0 && sc != "null" {
					m["structuredContent"] = json.RawMessage(sc)
				}
				if want := fix(marshal(m)); !bytes.Equal(got, want) {
					t.Errorf("resultEvent(%q, %v, %q):\n got %s\nwant %s", content, isErr, sc, got, want)
				}
			}
		}
	}
}
