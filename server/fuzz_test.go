package server

import (
	"regexp"
	"testing"

	"github.com/vigilhq/vigil/ingest"
	"github.com/vigilhq/vigil/store"
)

// FuzzParsePush feeds arbitrary bodies to the push decoder and the ingest
// normaliser. Every input must either be accepted or rejected with an
// *Error of status 400 (invalid_json, invalid_request, invalid_dataset_name
// or invalid_address); nothing may panic.
func FuzzParsePush(f *testing.F) {
	for _, s := range []string{
		`{"messages": [[{"role": "user", "content": "hi"}]], "dataset": "d"}`,
		`{"messages": [[{"role": "assistant", "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]}]], "annotations": [[{"content": "x", "address": "messages.0.tool_calls.0.function.arguments.a:0-1"}]], "metadata": [{"name": "n", "hierarchy_path": ["a"]}]}`,
		`{"messages": [[{"role": "tool", "tool_call_id": "1", "content": [{"type": "text", "text": "t"}], "message_id": "m1", "timestamp": "2025-01-01T00:00:00Z"}]]}`,
		`{"messages": [[{"type": "function", "function": {"name": "bare"}}, {"tools": [{"name": "t"}]}]]}`,
		`{"messages": [[{"role": 5}]], "annotations": null, "metadata": null, "dataset": null}`,
		`{"messages": [[1]]}`, `{"messages": []}`, `[]`, `{`, `{"messages": [[{"message_id": "dup"}, {"message_id": "dup"}]]}`,
		"{\"messages\": [[{\"content\": \"\\ud800\"}]]}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := parsePush(body)
		if err != nil {
			checkFuzzErr(t, err)
			return
		}
		var warn warnings
		for i, raw := range req.messages {
			pe, err := ingest.Prepare(raw, ingest.TraceOptions{TraceIdx: i}, &warn)
			if err != nil {
				checkFuzzErr(t, err)
				continue
			}
			if len(pe.Messages) != len(pe.Events) {
				t.Fatalf("trace %d: %d messages for %d events", i, len(pe.Messages), len(pe.Events))
			}
			ids := map[string]bool{}
			for _, m := range pe.Messages {
				if ids[m.ID] || !fuzzMessageIDRx.MatchString(m.ID) {
					t.Fatalf("trace %d: bad or duplicate message id %q", i, m.ID)
				}
				ids[m.ID] = true
			}
		}
		if len(warn) > maxWarnings {
			t.Fatalf("%d warnings, cap is %d", len(warn), maxWarnings)
		}
		for i := range req.annotations {
			if _, err := newAnnotations(req.annotations[i], &principal{User: &store.User{ID: "u"}}, i); err != nil {
				checkFuzzErr(t, err)
			}
		}
	})
}

// fuzzMessageIDRx is the form of a message id after ingest.
var fuzzMessageIDRx = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func checkFuzzErr(t *testing.T, err error) {
	t.Helper()
	ae := toAPIError(err) // maps ingest errors; anything unknown is a 500
	if ae.Status != 400 {
		t.Fatalf("unexpected error %T: %v", err, err)
	}
	switch ae.Code {
	case CodeInvalidJSON, CodeInvalidRequest, CodeInvalidDatasetName, CodeInvalidAddress:
	default:
		t.Fatalf("unexpected code %s: %v", ae.Code, err)
	}
}
