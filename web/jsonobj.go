package web

import (
	"bytes"
	"encoding/json"
)

// kv is one member of a JSON object, in document order.
type kv struct {
	K string
	V json.RawMessage
}

// members returns the members of a JSON object in their order, or ok
// false when raw is not an object.
func members(raw json.RawMessage) (out []kv, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	t, err := dec.Token()
	if err != nil || t != json.Delim('{') {
		return nil, false
	}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, false
		}
		k, _ := kt.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		out = append(out, kv{k, v})
	}
	return out, true
}

// object decodes a JSON object whose member order does not matter (an
// event's top-level keys); ok is false for anything else.
func object(raw json.RawMessage) (map[string]json.RawMessage, bool) {
	if len(raw) == 0 || raw[0] != '{' {
		return nil, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return nil, false
	}
	return m, true
}

// get returns the member k of an object's members.
func get(ms []kv, k string) json.RawMessage {
	for _, m := range ms {
		if m.K == k {
			return m.V
		}
	}
	return nil
}

// str decodes a JSON string; ok is false for anything else.
func str(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// pretty indents JSON (two spaces), or returns it as is when invalid.
func pretty(raw []byte) string {
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		return string(raw)
	}
	return b.String()
}
