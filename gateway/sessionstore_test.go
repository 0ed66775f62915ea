package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/vigilhq/vigil/gateway"
)

// A restarted gateway keeps stitching: a prefix session and a header
// session both continue their traces, with the call list of the trace
// metadata kept whole.
func TestSessionIndexSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gateway", "sessions.jsonl")
	e := newEnv(t, func(o *gateway.Options) { o.SessionFile = path })
	e.mock.SetScript(loopScript(3))
	ctx := context.Background()
	c := e.openai("ds")
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("run the steps")}
	step := func(c openai.Client) string {
		t.Helper()
		var hr *http.Response
		resp, err := c.Chat.Completions.New(ctx, chatParams(msgs...), option.WithResponseInto(&hr))
		if err != nil {
			t.Fatal(err)
		}
		m := resp.Choices[0].Message
		msgs = append(msgs, m.ToParam())
		for _, tc := range m.ToolCalls {
			msgs = append(msgs, openai.ToolMessage("result "+tc.ID, tc.ID))
		}
		return hr.Header.Get("Vigil-Trace-Id")
	}
	first := step(c)
	if again := step(c); again != first {
		t.Fatalf("not stitched before the restart: %s, %s", first, again)
	}
	hc := e.openai("ds", option.WithHeader("Invariant-Session", "worker-2"))
	var hr *http.Response
	if _, err := hc.Chat.Completions.New(ctx, chatParams(openai.UserMessage("hello")), option.WithResponseInto(&hr)); err != nil {
		t.Fatal(err)
	}
	headerTrace := hr.Header.Get("Vigil-Trace-Id")
	e.gw.Idle()
	e.rec.Flush()
	e.gw.Close()

	// A new gateway on the same index, server and store.
	auth, rules, comp, rec := gateway.Embedded(e.srv, gateway.RecordOptions{})
	defer rec.Close()
	gw2, err := gateway.New(gateway.Options{Auth: auth, Rules: rules, Compiler: comp, Recorder: rec, SessionFile: path,
		Upstreams: []gateway.Upstream{{Name: "openai", BaseURL: e.up.URL + "/v1"}}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(gw2)
	defer ts.Close()
	opts := []option.RequestOption{option.WithBaseURL(ts.URL + gateway.Prefix + "ds/openai/"), option.WithAPIKey("sk"), option.WithMaxRetries(0),
		option.WithHeader("Invariant-Authorization", "Bearer "+adminKey)}
	c2 := openai.NewClient(opts...)
	if got := step(c2); got != first {
		t.Errorf("prefix session after the restart went to %s, want %s", got, first)
	}
	hc2 := openai.NewClient(append(opts, option.WithHeader("Invariant-Session", "worker-2"))...)
	if _, err := hc2.Chat.Completions.New(ctx, chatParams(openai.UserMessage("hello again")), option.WithResponseInto(&hr)); err != nil {
		t.Fatal(err)
	}
	if got := hr.Header.Get("Vigil-Trace-Id"); got != headerTrace {
		t.Errorf("header session after the restart went to %s, want %s", got, headerTrace)
	}
	gw2.Idle()
	rec.Flush()
	gw2.Close()
	trs := e.traces("ds")
	if len(trs) != 2 {
		t.Fatalf("%d traces, want 2", len(trs))
	}
	for _, tr := range trs {
		vig, _ := tr.ExtraMetadata["vigil"].(map[string]any)
		calls, _ := vig["calls"].([]any)
		want := 3
		if tr.ID == headerTrace {
			want = 2
		}
		if len(calls) != want {
			t.Errorf("trace %s: %d calls in vigil.calls, want %d", tr.ID, len(calls), want)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Errorf("index file %v %v", fi, err)
	}
}

// The standalone gateway keeps its session index and its map of trace
// ids in its data directory: after a restart a header session is still
// appended to the trace on the server.
func TestStandaloneSessionSurvivesRestart(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	start := func() (*httptest.Server, *gateway.Gateway, *gateway.ClientRecorder) {
		remote := gateway.NewRemote(e.ts.URL, nil, nil)
		t.Cleanup(remote.Close)
		rec, err := gateway.NewClientRecorder(e.ts.URL, filepath.Join(dir, "spool"), 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		gw, err := gateway.New(gateway.Options{Auth: remote, Rules: remote, Recorder: rec, SessionFile: filepath.Join(dir, "gateway-sessions.jsonl"),
			Upstreams: []gateway.Upstream{{Name: "openai", BaseURL: e.up.URL + "/v1"}}})
		if err != nil {
			t.Fatal(err)
		}
		return httptest.NewServer(gw), gw, rec
	}
	call := func(ts *httptest.Server, text string) {
		t.Helper()
		c := openai.NewClient(option.WithBaseURL(ts.URL+"/api/v1/gateway/ds/openai/"), option.WithAPIKey("sk"), option.WithMaxRetries(0),
			option.WithHeader("Invariant-Authorization", "Bearer "+adminKey), option.WithHeader("Invariant-Session", "job-9"))
		if _, err := c.Chat.Completions.New(context.Background(), chatParams(openai.UserMessage(text))); err != nil {
			t.Fatal(err)
		}
	}
	ts, gw, rec := start()
	call(ts, "first")
	gw.Idle()
	rec.Flush()
	ts.Close()
	gw.Close()
	rec.Close()
	ts, gw, rec = start()
	call(ts, "second")
	gw.Idle()
	rec.Flush()
	ts.Close()
	gw.Close()
	rec.Close()
	trs := e.traces("ds")
	if len(trs) != 1 || len(trs[0].Messages) != 4 {
		t.Fatalf("%d traces (want 1 of 4 events)", len(trs))
	}
}
