package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// MaxMessageBytes is the largest JSON-RPC message (or batch) the wrapper
// and the proxy accept (spec/gateway.md §9.3).
const MaxMessageBytes = 32 << 20

// JSON-RPC error codes Vigil answers with.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeInternalError  = -32603
)

// message is one JSON-RPC message as read from the wire. Raw is kept so
// that a message Vigil does not change is forwarded byte for byte.
type message struct {
	Raw    json.RawMessage `json:"-"`
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
}

// isRequest, isNotification and isResponse classify a message.
func (m *message) isRequest() bool      { return m.Method != "" && hasID(m.ID) }
func (m *message) isNotification() bool { return m.Method != "" && !hasID(m.ID) }
func (m *message) isResponse() bool     { return m.Method == "" && hasID(m.ID) }

func hasID(id json.RawMessage) bool { return len(id) > 0 && string(id) != "null" }

// idKey is the map key of a request id (its compact JSON text).
func idKey(id json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, id) != nil {
		return string(id)
	}
	return b.String()
}

var errNotObject = errors.New("a JSON-RPC message must be a JSON object")

// parseMessage decodes one JSON-RPC message (not a batch).
func parseMessage(raw []byte) (*message, error) {
	var m message
	if err := json.Unmarshal(raw, &m); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, fmt.Errorf("%w (field %q has the wrong type)", errNotObject, te.Field)
		}
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if m.Method == "" && !hasID(m.ID) && len(m.Result) == 0 && len(m.Error) == 0 {
		return nil, fmt.Errorf("%w with a method or an id", errNotObject)
	}
	m.Raw = raw
	return &m, nil
}

// splitBatch returns the elements of a JSON array, or nil, false when raw
// is not an array.
func splitBatch(raw []byte) ([]json.RawMessage, bool) {
	t := bytes.TrimLeft(raw, " \t\r\n")
	if len(t) == 0 || t[0] != '[' {
		return nil, false
	}
	var elems []json.RawMessage
	if json.Unmarshal(t, &elems) != nil {
		return nil, false
	}
	return elems, true
}

// errorResponse is a JSON-RPC error reply; id nil gives "id": null.
func errorResponse(id json.RawMessage, code int, msg string, data any) []byte {
	if !hasID(id) {
		id = json.RawMessage("null")
	}
	e := map[string]any{"code": code, "message": msg}
	if data != nil {
		e["data"] = data
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": e})
	return b
}

// resultResponse is a JSON-RPC result reply.
func resultResponse(id json.RawMessage, result any) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
	return b
}

// joinBatch encodes messages as a JSON array; one message is returned as
// it is when single is set (the input was not a batch).
func joinBatch(msgs [][]byte, single bool) []byte {
	if len(msgs) == 0 {
		return nil
	}
	if single && len(msgs) == 1 {
		return msgs[0]
	}
	var b bytes.Buffer
	b.WriteByte('[')
	for i, m := range msgs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(m)
	}
	b.WriteByte(']')
	return b.Bytes()
}
