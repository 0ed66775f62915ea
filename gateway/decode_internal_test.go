package gateway

import (
	"encoding/json"
	"reflect"
	"testing"
)

// chatResponseSlow is chatProvider.response's decoding by encoding/json
// alone, the reference of its fast path.
func chatResponseSlow(body []byte) (chatResponse, error) {
	var r chatResponse
	err := json.Unmarshal(body, &r)
	return r, err
}

var chatResponseSeeds = []string{
	`{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi","refusal":null},"finish_reason":"stop","logprobs":null}],"usage":{"prompt_tokens":10,"completion_tokens":5}}`,
	`{"id":null,"model":null,"choices":null,"usage":null}`,
	`{"choices":[null,{"message":null},{"message":{"role":"assistant","tool_calls":[{"id":"t","type":"function","function":{"name":"bash","arguments":"{}"}}]}}]}`,
	`{"choices":[]}`,
	`{"ID":"upper","Model":"M","CHOICES":[{"message":{"content":"x"}}],"Usage":{"prompt_tokens":1}}`,
	`{"id":"a","Id":"b"}`,
	"{\"\u212a\":1,\"mode\u017f\":2,\"id\":\"x\"}",
	"{\"ı\u0307d\":\"dotless\"}",
	`{"id":5}`,
	`{"model":true}`,
	`{"choices":{"message":{}}}`,
	`{"choices":[1]}`,
	`{"choices":["x"]}`,
	`{"usage":[1]}`,
	`{"usage":"x"}`,
	`[]`,
	`null`,
	`"x"`,
	`{"id":"c1"`,
	"{\"id\":\"\xff\"}",
	`{"id":"\ud800"}`,
	`{"id":"a","id":"b","choices":[{"message":{"content":"1"}}],"choices":[{"message":{"content":"2"}}]}`,
	``,
}

// checkChatResponse fails unless the fast path decodes body as
// encoding/json does, or hands it over.
func checkChatResponse(t *testing.T, body string) {
	t.Helper()
	want, werr := chatResponseSlow([]byte(body))
	var got chatResponse
	if !got.decodeFast([]byte(body)) {
		return // encoding/json decodes it
	}
	if werr != nil {
		t.Fatalf("%q: fast path took a body encoding/json rejects (%v)", body, werr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\n got %#v\nwant %#v", body, got, want)
	}
}

func TestChatResponseDecode(t *testing.T) {
	for _, body := range chatResponseSeeds {
		checkChatResponse(t, body)
		out, err := chatProvider{}.response([]byte(body))
		_, werr := chatResponseSlow([]byte(body))
		if (err == nil) != (werr == nil) {
			t.Errorf("%q: error %v, encoding/json %v", body, err, werr)
		}
		if err == nil && out == nil {
			t.Errorf("%q: no output", body)
		}
	}
	// The usual response takes the fast path.
	var r chatResponse
	if !r.decodeFast([]byte(chatResponseSeeds[0])) || len(r.Choices) != 1 || r.Model != "m" {
		t.Errorf("fast path not taken: %#v", r)
	}
}

func FuzzChatResponseDecode(f *testing.F) {
	for _, s := range chatResponseSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		checkChatResponse(t, body)
	})
}

// TestDecodeObject checks decodeObject against json.Unmarshal into a map.
func TestDecodeObject(t *testing.T) {
	for _, body := range append(chatResponseSeeds, `{"a":[1,2,{"b":null}]}`, `12`, `{"a":1e400}`) {
		var want map[string]any
		werr := json.Unmarshal([]byte(body), &want)
		got, gerr := decodeObject([]byte(body))
		if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
			t.Errorf("%q: error %v, encoding/json %v", body, gerr, werr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q: %#v, encoding/json %#v", body, got, want)
		}
	}
}
