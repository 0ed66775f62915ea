package gateway_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/vigilhq/vigil/gateway"
)

func forceUsage(o *gateway.Options) { o.ForceStreamUsage = true }

// force_stream_usage: the upstream is asked for usage, the call records
// it, and a client that did not ask never sees the usage-only chunk; a
// client that asked gets it.
func TestOpenAIForceStreamUsage(t *testing.T) {
	for _, asked := range []bool{false, true} {
		name := "client did not ask"
		if asked {
			name = "client asked"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, forceUsage)
			c := e.openai("ds")
			p := chatParams(openai.UserMessage("stream please"))
			if asked {
				p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			}
			st := c.Chat.Completions.NewStreaming(context.Background(), p)
			text, usageChunks := "", 0
			for st.Next() {
				ch := st.Current()
				if len(ch.Choices) > 0 {
					text += ch.Choices[0].Delta.Content
				}
				if ch.Usage.TotalTokens > 0 {
					usageChunks++
				}
			}
			if err := st.Err(); err != nil {
				t.Fatal(err)
			}
			if text != "Hello from the mock." {
				t.Errorf("text %q", text)
			}
			if want := map[bool]int{false: 0, true: 1}[asked]; usageChunks != want {
				t.Errorf("%d usage chunks reached the client, want %d", usageChunks, want)
			}
			var sent map[string]any
			if err := json.Unmarshal(e.mock.Last().Body, &sent); err != nil {
				t.Fatal(err)
			}
			if so, _ := sent["stream_options"].(map[string]any); so["include_usage"] != true {
				t.Errorf("upstream request %s", e.mock.Last().Body)
			}
			trs := e.traces("ds")
			if len(trs) != 1 {
				t.Fatalf("%d traces", len(trs))
			}
			vig, _ := trs[0].ExtraMetadata["vigil"].(map[string]any)
			calls, _ := vig["calls"].([]any)
			if len(calls) != 1 {
				t.Fatalf("calls %v", vig["calls"])
			}
			cr, _ := calls[0].(map[string]any)
			if u, _ := cr["usage"].(map[string]any); u["total_tokens"] != float64(15) {
				t.Errorf("recorded usage %v", cr["usage"])
			}
		})
	}
}
