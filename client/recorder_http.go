package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// MaxRecordedBody bounds the request and response bodies an LLM call
// node holds; a larger body is recorded as its size only.
const MaxRecordedBody = 1 << 20

// LLMCallPath reports whether a request path is an LLM API call
// (OpenAI-compatible chat completions, completions, responses and
// embeddings, Anthropic messages, Gemini generateContent): the default
// of Transport's match.
func LLMCallPath(path string) bool {
	for _, suffix := range []string{"/chat/completions", "/completions", "/responses", "/messages", "/embeddings", ":generateContent", ":streamGenerateContent"} {
		if strings.HasSuffix(path, suffix) {
			return true
		}
	}
	return false
}

// Transport returns net/http middleware for an agent's HTTP client that
// records its outgoing LLM calls when no gateway is used: a request
// whose context carries a run (Recorder.Start, Wrap) and whose path
// match accepts (nil: LLMCallPath) becomes an llm_step node of the run,
// child of the current node, with input {name: "POST <host><path>",
// input: {model, messages, ...the JSON request body}}, the JSON response
// body as output (the status and size for streams and bodies that are
// not JSON or too large) and the transport error or HTTP error status
// as error. Other requests pass through untouched. base nil is
// http.DefaultTransport.
func Transport(base http.RoundTripper, match func(path string) bool) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	if match == nil {
		match = LLMCallPath
	}
	return &llmTransport{base: base, match: match}
}

type llmTransport struct {
	base  http.RoundTripper
	match func(string) bool
}

func (t *llmTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	run := RunFrom(req.Context())
	if run == nil || !t.match(req.URL.Path) {
		return t.base.RoundTrip(req)
	}
	var reqBody any
	if req.Body != nil && req.GetBody != nil {
		if rc, err := req.GetBody(); err == nil {
			reqBody = readJSON(rc, req.ContentLength)
			rc.Close()
		}
	} else if req.Body != nil {
		b, err := io.ReadAll(io.LimitReader(req.Body, MaxRecordedBody+1))
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(b))
		reqBody = jsonOrSize(b)
	}
	name := req.Method + " " + req.URL.Host + req.URL.Path
	start := time.Now()
	resp, err := t.base.RoundTrip(req)
	var out any
	var callErr error = err
	if err == nil {
		ct := resp.Header.Get("Content-Type")
		if strings.HasPrefix(ct, "application/json") && resp.ContentLength <= MaxRecordedBody {
			b, rerr := io.ReadAll(io.LimitReader(resp.Body, MaxRecordedBody+1))
			resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(b))
			if rerr != nil {
				return nil, rerr
			}
			out = jsonOrSize(b)
		} else {
			out = map[string]any{"status": resp.StatusCode, "content_type": ct}
		}
		if resp.StatusCode >= 400 {
			callErr = httpStatusError(resp.StatusCode)
		}
	}
	in := map[string]any{"name": name, "input": reqBody, "parentId": nullable(parentFrom(req.Context())),
		"startedAt": start.UnixMilli(), "durationMs": time.Since(start).Milliseconds()}
	if rerr := run.append("", ActionLLMStep, in, out, callErr); rerr != nil && run.rec.opt.OnError != nil {
		run.rec.opt.OnError(rerr)
	}
	return resp, err
}

type httpStatusError int

func (e httpStatusError) Error() string {
	return fmt.Sprintf("HTTP %d %s", int(e), http.StatusText(int(e)))
}

func readJSON(r io.Reader, n int64) any {
	if n > MaxRecordedBody {
		return map[string]any{"bytes": n}
	}
	b, err := io.ReadAll(io.LimitReader(r, MaxRecordedBody+1))
	if err != nil {
		return nil
	}
	return jsonOrSize(b)
}

// jsonOrSize is the JSON value b holds, or {bytes: len} when it is too
// large or not JSON.
func jsonOrSize(b []byte) any {
	if len(b) > MaxRecordedBody {
		return map[string]any{"bytes": len(b)}
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return map[string]any{"bytes": len(b)}
	}
	return v
}
