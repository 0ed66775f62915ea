package gateway_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/gateway/providertest"
)

// standalone is a standalone gateway (vigil gateway) in front of the
// env's server, recording to storeURL.
func standalone(t *testing.T, e *env, storeURL, spool string) (*httptest.Server, *gateway.ClientRecorder) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	remote := gateway.NewRemote(e.ts.URL, nil, log)
	t.Cleanup(remote.Close)
	rec, err := gateway.NewClientRecorder(storeURL, spool, 0, log)
	if err != nil {
		t.Fatal(err)
	}
	rec.SetRetry(2, 10*time.Millisecond)
	gw, err := gateway.New(gateway.Options{Auth: remote, Rules: remote, Recorder: rec, Logger: log, OpenAIErrorNative: true,
		Upstreams: []gateway.Upstream{{Name: "openai", BaseURL: e.up.URL + "/v1"}}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(gw)
	t.Cleanup(ts.Close)
	return ts, rec
}

func TestStandaloneGateway(t *testing.T) {
	e := newEnv(t)
	e.addGuardrail("ds", "no secrets", secretRule, "block", nil)
	ts, rec := standalone(t, e, e.ts.URL, filepath.Join(t.TempDir(), "spool"))
	defer rec.Close()
	c := openai.NewClient(option.WithBaseURL(ts.URL+"/api/v1/gateway/ds/openai/"), option.WithAPIKey("sk"), option.WithMaxRetries(0),
		option.WithHeader("Invariant-Authorization", "Bearer "+adminKey))
	ctx := context.Background()
	if _, err := c.Chat.Completions.New(ctx, chatParams(openai.UserMessage("hello"))); err != nil {
		t.Fatal(err)
	}
	// The dataset's guardrail, fetched from the server, blocks.
	e.mock.SetScript(func(*providertest.Request) providertest.Reply { return providertest.Reply{Text: "SECRET-KEY-12345"} })
	_, err := c.Chat.Completions.New(ctx, chatParams(openai.UserMessage("leak")))
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != 400 {
		t.Fatalf("err %v", err)
	}
	rec.Flush()
	trs := e.traces("ds")
	if len(trs) != 2 {
		t.Fatalf("%d traces", len(trs))
	}
	// A guardrail change reaches the standalone gateway through the
	// change feed: once the rule is gone, the same answer passes.
	d, _ := e.api.GetDatasetByName(ctx, "admin", "ds")
	g, err := e.api.Guardrails(ctx, "admin", "ds", clientFilter())
	if err != nil || len(g.Policies) != 1 {
		t.Fatal(err)
	}
	if _, err := e.api.DeleteGuardrail(ctx, d.ID, g.Policies[0].ID, "test"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err = c.Chat.Completions.New(ctx, chatParams(openai.UserMessage("leak again")))
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("rule change not seen: %v", err)
	}
}

func TestStandaloneSpool(t *testing.T) {
	e := newEnv(t)
	spool := filepath.Join(t.TempDir(), "spool")
	// A store URL where nothing listens.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + ln.Addr().String()
	ln.Close()
	ts, rec := standalone(t, e, dead, spool)
	c := openai.NewClient(option.WithBaseURL(ts.URL+"/api/v1/gateway/spooled/openai/"), option.WithAPIKey("sk"), option.WithMaxRetries(0),
		option.WithHeader("Invariant-Authorization", "Bearer "+adminKey))
	ctx := context.Background()
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("one")}
	for i := 0; i < 3; i++ {
		r, err := c.Chat.Completions.New(ctx, chatParams(msgs...))
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, r.Choices[0].Message.ToParam(), openai.UserMessage("more"))
	}
	rec.Flush()
	rec.Close()
	b, err := os.ReadFile(filepath.Join(spool, "records.jsonl"))
	if err != nil || strings.Count(string(b), "\n") != 3 {
		t.Fatalf("spool: %v, %d records", err, strings.Count(string(b), "\n"))
	}
	// The next start replays the spool, in order: one stitched trace.
	rec2, err := gateway.NewClientRecorder(e.ts.URL, spool, 0, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer rec2.Close()
	deadline := time.Now().Add(5 * time.Second)
	var n int
	for time.Now().Before(deadline) {
		if trs := e.tracesMaybe("spooled"); len(trs) == 1 {
			if n = len(trs[0].Messages); n == 6 {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n != 6 {
		t.Fatalf("replayed trace has %d events, want 6", n)
	}
	if _, err := os.Stat(filepath.Join(spool, "records.jsonl")); !os.IsNotExist(err) {
		t.Errorf("spool not emptied: %v", err)
	}
}
