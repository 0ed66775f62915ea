package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/vigilhq/vigil/trace"
)

// event is one trace event (the trace format of explorer-api §2.1) as
// decoded JSON.
type event = map[string]any

// callInput is what a provider request becomes: its trace events and the
// fields the call record and the trace metadata keep.
type callInput struct {
	events  []event
	model   string
	stream  bool
	request map[string]any // request fields other than the messages
	tools   any            // the request's tool list, nil when none
	// instructions: the first event is the Responses API's instructions.
	instructions bool
	// previousResponse is the Responses API's previous_response_id.
	previousResponse string
	// itemRefs are the item_reference ids of a Responses request, in
	// order, with the index of the placeholder event of each.
	itemRefs map[int]string
}

// callOutput is what a provider response becomes.
type callOutput struct {
	choices []event // the assistant event of each choice (choice 0 recorded)
	finish  string
	usage   map[string]any // provider fields
	input   int64          // normalised usage
	output  int64
	model   string
	respID  string           // Responses API response id
	items   map[string]event // Responses output item id → event
	failed  string           // an in-stream upstream error
	extra   map[string]any   // other call-record fields (stop_reason, usageMetadata, …)
}

// provider converts one API's requests and responses to trace events and
// parses its stream (spec §4.3–4.5).
type provider interface {
	// request converts the client's request body (decoded JSON object).
	request(body map[string]any, q url.Values) (*callInput, error)
	// response converts a complete non-streaming response body.
	response(body []byte) (*callOutput, error)
	// stream returns a parser of the response stream.
	stream() streamParser
}

// providerFor returns the provider of a route kind.
func (g *Gateway) providerFor(kind string) provider {
	switch kind {
	case "chat":
		return chatProvider{}
	case "responses":
		return responsesProvider{lookup: g.sessions.item}
	case "messages":
		return anthropicProvider{}
	case "gemini":
		return geminiProvider{}
	}
	return nil
}

// dropNulls returns o without the keys whose value is null.
func dropNulls(o map[string]any) map[string]any {
	out := make(map[string]any, len(o))
	for k, v := range o {
		if v != nil {
			out[k] = v
		}
	}
	return out
}

// requestFields returns body without the keys in skip.
func requestFields(body map[string]any, skip ...string) map[string]any {
	out := make(map[string]any, len(body))
	for k, v := range body {
		out[k] = v
	}
	for _, k := range skip {
		delete(out, k)
	}
	return out
}

// hashJSON is the hex SHA-256 of v's JSON.
func hashJSON(v any) string {
	b, _ := json.Marshal(v)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func num(v any) int64 {
	switch x := v.(type) {
	case float64:
		return int64(x)
	case json.Number:
		n, _ := x.Int64()
		return n
	}
	return 0
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func obj(v any) map[string]any {
	o, _ := v.(map[string]any)
	return o
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

// badRequest is a client request a provider cannot convert.
type badRequest struct{ msg string }

func (e *badRequest) Error() string { return e.msg }

func badf(format string, args ...any) error { return &badRequest{fmt.Sprintf(format, args...)} }

// textOf joins the text of a content value (a string or parts).
func textOf(c any) string {
	switch x := c.(type) {
	case string:
		return x
	case []any:
		var parts []string
		for _, p := range x {
			if o := obj(p); o != nil {
				if t, ok := o["text"].(string); ok {
					parts = append(parts, t)
				}
			}
		}
		return strings.Join(parts, "\n")
	}
	return ""
}

// decodeObject is json.Unmarshal(b, &m) for m of type map[string]any,
// with the same result and error, decoded by the fast scanner. The
// strings of m may point into b, which must never be modified
// afterwards.
func decodeObject(b []byte) (map[string]any, error) {
	v, err := trace.UnmarshalAnyOwned(b)
	if err == nil {
		switch m := v.(type) {
		case map[string]any:
			return m, nil
		case nil:
			return nil, nil
		}
	}
	var m map[string]any
	err = json.Unmarshal(b, &m)
	return m, err
}

// foldsTo reports whether encoding/json would decode key into a struct
// field named name (matched case-insensitively) when key is not name
// itself: a body with such a key takes encoding/json.
func foldsTo(key string, names ...string) bool {
	for _, n := range names {
		if key == n || len(key) < len(n) {
			continue
		}
		if isASCII(key) {
			if len(key) == len(n) && strings.EqualFold(key, n) {
				return true
			}
			continue
		}
		if foldName(key) == foldName(n) {
			return true
		}
	}
	return false
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// foldName is encoding/json's folding of a field name.
func foldName(s string) string {
	var arr [32]byte
	out := arr[:0]
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		out = utf8.AppendRune(out, unicode.ToUpper(unicode.ToLower(r)))
		i += n
	}
	return string(out)
}

// stringField is a struct field of type string decoded from x: false
// when encoding/json would fail on it.
func stringField(dst *string, x any) bool {
	switch v := x.(type) {
	case string:
		*dst = v
	case nil:
	default:
		return false
	}
	return true
}

// objectField is a struct field of type map[string]any decoded from x.
func objectField(dst *map[string]any, x any) bool {
	switch v := x.(type) {
	case map[string]any:
		*dst = v
	case nil:
	default:
		return false
	}
	return true
}
