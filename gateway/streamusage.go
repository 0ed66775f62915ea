package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// This file is gateway.openai.force_stream_usage (spec §4.3): a
// streaming chat request gets stream_options.include_usage upstream, so
// that the call's usage is recorded, and the usage-only chunk this adds
// is removed from the client's stream when the client had not asked
// for it.

// forceStreamUsage returns body with stream_options.include_usage set to
// true, re-serialising only the stream_options value, and whether the
// client had asked for usage itself. A body already asking for it is
// returned unchanged.
func forceStreamUsage(body []byte, req map[string]any) ([]byte, bool, error) {
	so, _ := req["stream_options"].(map[string]any)
	if so != nil && so["include_usage"] == true {
		return body, true, nil
	}
	merged := map[string]any{}
	for k, v := range so {
		merged[k] = v
	}
	merged["include_usage"] = true
	val, err := json.Marshal(merged)
	if err != nil {
		return nil, false, fmt.Errorf("stream_options: %w", err)
	}
	start, end, found, err := topLevelValue(body, "stream_options")
	if err != nil {
		return nil, false, err
	}
	var out []byte
	if found {
		out = make([]byte, 0, len(body)+len(val))
		out = append(out, body[:start]...)
		out = append(out, val...)
		out = append(out, body[end:]...)
		return out, false, nil
	}
	// No stream_options: insert it as the object's first member.
	open := bytes.IndexByte(body, '{')
	if open < 0 {
		return nil, false, fmt.Errorf("request body is not a JSON object")
	}
	sep := []byte(",")
	if rest := bytes.TrimSpace(body[open+1:]); len(rest) > 0 && rest[0] == '}' {
		sep = nil
	}
	out = make([]byte, 0, len(body)+len(val)+20)
	out = append(out, body[:open+1]...)
	out = append(out, `"stream_options":`...)
	out = append(out, val...)
	out = append(out, sep...)
	out = append(out, body[open+1:]...)
	return out, false, nil
}

// topLevelValue finds the byte span [start, end) of the value of the last
// member named key of the JSON object body (the one a decoder keeps).
func topLevelValue(body []byte, key string) (start, end int, found bool, err error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil { // {
		return 0, 0, false, fmt.Errorf("request body: %w", err)
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return 0, 0, false, fmt.Errorf("request body: %w", err)
		}
		k, _ := t.(string)
		after := int(dec.InputOffset())
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return 0, 0, false, fmt.Errorf("request body: member %q: %w", k, err)
		}
		if k != key {
			continue
		}
		end = int(dec.InputOffset())
		// The value is the last len(raw) bytes before end, after the
		// colon and any space.
		i := bytes.IndexByte(body[after:end], ':')
		if i < 0 {
			return 0, 0, false, fmt.Errorf("request body: member %q has no value", k)
		}
		start = after + i + 1
		for start < end && isSpace(body[start]) {
			start++
		}
		found = true
	}
	return start, end, found, nil
}

func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

// usageOnlyChunk reports whether a chat stream chunk carries only usage:
// no choices and a non-null usage.
func usageOnlyChunk(data []byte) bool {
	if !bytes.Contains(data, []byte(`"usage"`)) {
		return false
	}
	var chunk struct {
		Choices []json.RawMessage `json:"choices"`
		Usage   json.RawMessage   `json:"usage"`
	}
	if json.Unmarshal(data, &chunk) != nil {
		return false
	}
	return len(chunk.Choices) == 0 && len(chunk.Usage) > 0 && string(chunk.Usage) != "null"
}
