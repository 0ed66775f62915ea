package gateway

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestForceStreamUsageBody(t *testing.T) {
	tests := []struct {
		name, body string
		asked      bool
		want       string // the rewritten stream_options, as JSON
	}{
		{"absent", `{"model":"m","stream":true,"messages":[]}`, false, `{"include_usage":true}`},
		{"absent empty object", `{ }`, false, `{"include_usage":true}`},
		{"other option kept", `{"model":"m","stream_options": {"include_obfuscation":false},"stream":true}`, false, `{"include_obfuscation":false,"include_usage":true}`},
		{"false", "{\"stream_options\" :\n {\"include_usage\": false}}", false, `{"include_usage":true}`},
		{"null", `{"stream_options":null,"stream":true}`, false, `{"include_usage":true}`},
		{"already asked", `{"stream_options":{"include_usage":true}}`, true, `{"include_usage":true}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var req map[string]any
			if err := json.Unmarshal([]byte(tt.body), &req); err != nil {
				t.Fatal(err)
			}
			out, asked, err := forceStreamUsage([]byte(tt.body), req)
			if err != nil {
				t.Fatal(err)
			}
			if asked != tt.asked {
				t.Errorf("asked %v", asked)
			}
			if asked && string(out) != tt.body {
				t.Errorf("body changed although the client asked: %s", out)
			}
			var got map[string]any
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("rewritten body is not JSON: %v: %s", err, out)
			}
			var want any
			json.Unmarshal([]byte(tt.want), &want)
			if !reflect.DeepEqual(got["stream_options"], want) {
				t.Errorf("stream_options %v, want %v (%s)", got["stream_options"], want, out)
			}
			delete(got, "stream_options")
			delete(req, "stream_options")
			if !reflect.DeepEqual(got, req) {
				t.Errorf("other members changed: %v, want %v", got, req)
			}
		})
	}
}

func FuzzForceStreamUsage(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"stream_options":{"x":[1,2]},"b":"}"}`, `{"stream_options":1,"stream_options":{}}`, " {\"k\" : \"v\" } "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var req map[string]any
		if json.Unmarshal([]byte(body), &req) != nil || req == nil {
			return
		}
		out, _, err := forceStreamUsage([]byte(body), req)
		if err != nil {
			return // a value that is not an object: a clear error
		}
		var got map[string]any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("rewritten body is not JSON: %v\nin:  %s\nout: %s", err, body, out)
		}
		so, _ := got["stream_options"].(map[string]any)
		if so == nil || so["include_usage"] != true {
			t.Fatalf("include_usage not set: %s", out)
		}
	})
}
