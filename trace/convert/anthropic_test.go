package convert

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"

	"github.com/vigilhq/vigil/trace"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestAnthropicGolden runs testdata/anthropic/*.txtar: request.json and an
// optional response.json are converted with FromAnthropic; want.json is the
// encoded trace (one event per line), want.err the error.
func TestAnthropicGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/anthropic/*.txtar")
	if len(files) == 0 {
		t.Fatal("no golden files")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var req, resp []byte
			for _, f := range ar.Files {
				switch f.Name {
				case "request.json":
					req = f.Data
				case "response.json":
					resp = f.Data
				}
			}
			tr, err := FromAnthropic(req, resp)
			got := map[string]string{"want.err": ""}
			if err != nil {
				got["want.err"] = err.Error() + "\n"
				if !errors.Is(err, ErrInvalid) && !errors.Is(err, trace.ErrSyntax) {
					t.Errorf("error %v matches neither ErrInvalid nor ErrSyntax", err)
				}
			} else {
				var b strings.Builder
				for _, e := range tr.Events {
					b.Write(trace.Marshal(e.Raw))
					b.WriteByte('\n')
				}
				got["want.json"] = b.String()
			}
			if *update {
				var keep []txtar.File
				for _, f := range ar.Files {
					if !strings.HasPrefix(f.Name, "want.") {
						keep = append(keep, f)
					}
				}
				for _, n := range []string{"want.json", "want.err"} {
					if s, ok := got[n]; ok {
						keep = append(keep, txtar.File{Name: n, Data: []byte(s)})
					}
				}
				ar.Files = keep
				if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			for _, f := range ar.Files {
				if !strings.HasPrefix(f.Name, "want.") {
					continue
				}
				if got[f.Name] != string(f.Data) {
					t.Errorf("%s:\ngot:\n%s\nwant:\n%s", f.Name, got[f.Name], f.Data)
				}
			}
		})
	}
}

func TestFromAnthropicResponse(t *testing.T) {
	e, res, err := FromAnthropicResponse([]byte(`{"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
		"content": [{"type": "text", "text": "Let me check."}, {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}],
		"stop_reason": "tool_use", "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 5}}`))
	if err != nil {
		t.Fatal(err)
	}
	if e.Kind != trace.KindMessage || e.Role != "assistant" || e.Content.Text != "Let me check." || len(e.ToolCalls) != 1 {
		t.Fatalf("event = %s", trace.Marshal(e.Raw))
	}
	c := e.ToolCalls[0]
	if *c.ID != "toolu_1" || c.Function.Name != "get_weather" || string(trace.Marshal(c.Function.Arguments)) != `{"city":"Paris"}` {
		t.Errorf("call = %s", trace.Marshal(c.Raw))
	}
	if res.ID != "msg_1" || res.Model != "claude-x" || res.StopReason != "tool_use" || string(trace.Marshal(res.Usage)) != `{"input_tokens":10,"output_tokens":5}` {
		t.Errorf("result = %+v", res)
	}
	if _, _, err := FromAnthropicResponse([]byte(`{"type": "error", "error": {"type": "overloaded_error"}}`)); !errors.Is(err, ErrInvalid) {
		t.Errorf("error response: err = %v", err)
	}
}

func TestAnthropicMessage(t *testing.T) {
	evs, err := AnthropicMessage("user", "hello")
	if err != nil || len(evs) != 1 || string(trace.Marshal(evs[0])) != `{"role":"user","content":"hello"}` {
		t.Errorf("got %v, %v", evs, err)
	}
	if _, err := AnthropicMessage("user", 5.0); !errors.Is(err, ErrInvalid) {
		t.Errorf("number content: err = %v", err)
	}
}
