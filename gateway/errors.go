package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// This file writes the error bodies of spec §7 in each provider's shape.

// dialect is the error shape of a route: the provider type, and for
// OpenAI whether the route is the Responses API.
type dialect struct {
	typ       string // upstream type
	responses bool
	native    bool // openai_error_format native
	geminiSSE bool // Gemini stream with alt=sse (else a JSON array)
}

// blockMessage is the message of a guardrail error at loc ("request" or
// "response").
func blockMessage(loc string) string {
	return "[Invariant] The " + loc + " did not pass the guardrails"
}

// GuardrailErrorBody is the non-streaming guardrail-error body of
// provider type typ (spec §7): details is {"errors": [...]}. With native
// the OpenAI body is OpenAI's own error object.
func GuardrailErrorBody(typ string, native bool, loc string, details any) []byte {
	return dialect{typ: typ, native: native}.guardrailBody(loc, details)
}

func (d dialect) guardrailBody(loc string, details any) []byte {
	msg := blockMessage(loc)
	var v any
	switch d.typ {
	case TypeAnthropic:
		v = map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": msg, "details": details}}
	case TypeGemini:
		v = map[string]any{
			"error":           map[string]any{"code": 400, "message": msg, "details": details, "status": "INVARIANT_GUARDRAILS_VIOLATION"},
			"prompt_feedback": map[string]any{"blockReason": "SAFETY", "safetyRatings": []any{map[string]any{"category": "HARM_CATEGORY_UNSPECIFIED", "probability": 0.0, "blocked": true}}},
		}
	default:
		if d.native {
			v = map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": nil, "code": "guardrail_violation", "details": details}}
		} else {
			v = map[string]any{"error": msg, "details": details}
		}
	}
	b, _ := json.Marshal(v)
	return b
}

// guardrailEvent is the in-stream guardrail error (spec §7); first
// reports whether nothing was sent yet (Gemini JSON arrays).
func (d dialect) guardrailEvent(loc string, details any, first bool) []byte {
	msg := blockMessage(loc)
	switch d.typ {
	case TypeAnthropic:
		return sse("error", d.guardrailBody(loc, details))
	case TypeGemini:
		dj, _ := json.Marshal(details)
		r := map[string]any{
			"candidates": []any{map[string]any{"content": map[string]any{"role": "model", "parts": []any{map[string]any{"text": msg}}}, "finishReason": "SAFETY"}},
			"error":      map[string]any{"code": 400, "message": msg, "details": details, "status": "INVARIANT_GUARDRAILS_VIOLATION"},
			"promptFeedback": map[string]any{"blockReason": "SAFETY", "block_reason_message": msg + ": " + string(dj),
				"safetyRatings": []any{map[string]any{"category": "HARM_CATEGORY_UNSPECIFIED", "probability": "HIGH", "blocked": true}}},
		}
		b, _ := json.Marshal(r)
		return d.geminiFrame(b, first)
	}
	if d.responses {
		// The spec's event, plus an "error" member: OpenAI's Node SDK
		// (and through it the Agents SDK and LangChain) and openai-go
		// raise an API error only for stream data with an "error" key.
		b, _ := json.Marshal(map[string]any{"type": "error", "code": "guardrail_violation", "message": msg, "param": nil, "details": details,
			"error": map[string]any{"message": msg, "type": "invalid_request_error", "code": "guardrail_violation"}})
		return sse("error", b)
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "code": "guardrail_violation", "details": details}})
	return sse("", b)
}

// geminiFrame frames a JSON object as the last element of a Gemini
// stream.
func (d dialect) geminiFrame(b []byte, first bool) []byte {
	if d.geminiSSE {
		return sse("", b)
	}
	if first {
		return append(append([]byte("["), b...), ']')
	}
	return append(append([]byte(","), b...), ']')
}

// upstreamErrorBody is the 502/504 body of an unreachable or timed-out
// upstream (spec §7.4).
func (d dialect) upstreamErrorBody(status int, msg string) []byte {
	timeout := status == http.StatusGatewayTimeout
	var v any
	switch d.typ {
	case TypeAnthropic:
		v = map[string]any{"type": "error", "error": map[string]any{"type": "api_error", "message": msg}}
	case TypeGemini:
		st := "UNAVAILABLE"
		if timeout {
			st = "DEADLINE_EXCEEDED"
		}
		v = map[string]any{"error": map[string]any{"code": status, "message": msg, "status": st}}
	default:
		code := "upstream_unreachable"
		if timeout {
			code = "upstream_timeout"
		}
		if d.responses {
			// The in-stream form of the Responses API is its error event.
			v = map[string]any{"error": map[string]any{"message": msg, "type": "upstream_error", "param": nil, "code": code}}
		} else {
			v = map[string]any{"error": map[string]any{"message": msg, "type": "upstream_error", "param": nil, "code": code}}
		}
	}
	b, _ := json.Marshal(v)
	return b
}

// upstreamErrorEvent is upstreamErrorBody as an in-stream event.
func (d dialect) upstreamErrorEvent(status int, msg string, first bool) []byte {
	b := d.upstreamErrorBody(status, msg)
	switch d.typ {
	case TypeAnthropic:
		return sse("error", b)
	case TypeGemini:
		return d.geminiFrame(b, first)
	}
	if d.responses {
		code := "upstream_unreachable"
		if status == http.StatusGatewayTimeout {
			code = "upstream_timeout"
		}
		b, _ = json.Marshal(map[string]any{"type": "error", "code": code, "message": msg, "param": nil,
			"error": map[string]any{"message": msg, "type": "upstream_error", "code": code}})
		return sse("error", b)
	}
	return sse("", b)
}

// sse frames data as one SSE event, named when event is not "".
func sse(event string, data []byte) []byte {
	out := make([]byte, 0, len(data)+len(event)+16)
	if event != "" {
		out = append(out, "event: "...)
		out = append(out, event...)
		out = append(out, '\n')
	}
	out = append(out, "data: "...)
	out = append(out, data...)
	return append(out, "\n\n"...)
}

// writeDetail writes the {"detail", "code"} error shape of spec §3.
func writeDetail(w http.ResponseWriter, status int, detail, code string) {
	b, _ := json.Marshal(map[string]string{"detail": detail, "code": code})
	writeJSONBytes(w, status, b)
}

// WriteDetail writes the {"detail", "code"} error shape the gateway's
// auth and header errors use (spec §3.1); the MCP routes share it.
func WriteDetail(w http.ResponseWriter, status int, detail, code string) {
	writeDetail(w, status, detail, code)
}

func writeJSONBytes(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

// keyErrorCode is the code of a key error's status.
func keyErrorCode(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "unauthorized"
	case http.StatusForbidden:
		return "forbidden"
	}
	return "invalid_request"
}
