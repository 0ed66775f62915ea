package gateway_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/vigilhq/vigil/gateway/providertest"
)

// checkTrailers checks the stream trailers of spec §3.5 on a response
// whose body was read to the end.
func checkTrailers(t *testing.T, hr *http.Response, result string, held bool) {
	t.Helper()
	if hr == nil {
		t.Fatal("no response")
	}
	// net/http moves the declared names from the Trailer header to
	// the keys of Response.Trailer.
	for _, k := range []string{"Vigil-Overhead-Ms-Total", "Vigil-Held-Ms", "Vigil-Guardrail-Result"} {
		if _, declared := hr.Trailer[k]; !declared {
			t.Errorf("trailer %s not declared: %v", k, hr.Trailer)
		}
	}
	for _, k := range []string{"Vigil-Overhead-Ms-Total", "Vigil-Held-Ms"} {
		v := hr.Trailer.Get(k)
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || !strings.Contains(v, ".") || len(v)-strings.Index(v, ".") != 4 {
			t.Errorf("trailer %s = %q, want milliseconds with 3 decimals", k, v)
		}
		if k == "Vigil-Held-Ms" && held && f == 0 {
			t.Errorf("Vigil-Held-Ms 0 although events were held back")
		}
	}
	if got := hr.Trailer.Get("Vigil-Guardrail-Result"); got != result {
		t.Errorf("trailer Vigil-Guardrail-Result %q, want %q (trailers %v)", got, result, hr.Trailer)
	}
}

// drainOnClose reads a body to its end before closing it.
type drainOnClose struct{ io.ReadCloser }

func (d drainOnClose) Close() error {
	io.Copy(io.Discard, d.ReadCloser)
	return d.ReadCloser.Close()
}

func TestStreamTrailers(t *testing.T) {
	t.Run("openai pass", func(t *testing.T) {
		e := newEnv(t)
		e.mock.SetScript(func(*providertest.Request) providertest.Reply {
			return providertest.Reply{Text: strings.Repeat("harmless words ", 30)}
		})
		c := e.openai("ds", option.WithHeader("Invariant-Guardrails", headerRule(secretRule)))
		var hr *http.Response
		// The SDK stops reading at [DONE]; the body is read to its end
		// when it closes it, so that net/http has parsed the trailers
		// (without this the test passed only when they came in the same
		// read as [DONE]).
		st := c.Chat.Completions.NewStreaming(context.Background(), chatParams(openai.UserMessage("talk")), option.WithResponseInto(&hr),
			option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
				resp, err := next(r)
				if err == nil {
					resp.Body = drainOnClose{resp.Body}
				}
				return resp, err
			}))
		for st.Next() {
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
		st.Close()
		checkTrailers(t, hr, "pass", true)
	})
	// Blocked streams are read raw: an SDK stops reading at the error
	// event, before the trailers.
	for _, tc := range []struct{ name, rule, text string }{
		{"blocked output", secretRule, "key?"},
		{"blocked input", inputRule, "a forbidden question"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.mock.SetScript(func(*providertest.Request) providertest.Reply {
				return providertest.Reply{Text: "the key is SECRET-KEY-12345"}
			})
			resp, b := e.post("/ds/openai/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"`+tc.text+`"}]}`,
				map[string]string{"Authorization": "Bearer sk", "Invariant-Authorization": "Bearer " + adminKey, "Invariant-Guardrails": headerRule(tc.rule)})
			if !strings.Contains(string(b), "did not pass the guardrails") {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			checkTrailers(t, resp, "block", false)
		})
	}
	t.Run("anthropic no rules", func(t *testing.T) {
		e := newEnv(t)
		c := e.anthropic("ds")
		var hr *http.Response
		st := c.Messages.NewStreaming(context.Background(), anthParams("stream it"), aoption.WithResponseInto(&hr))
		acc := anthropic.Message{}
		for st.Next() {
			acc.Accumulate(st.Current())
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
		checkTrailers(t, hr, "none", false)
	})
}
