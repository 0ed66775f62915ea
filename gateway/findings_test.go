package gateway_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/gateway/providertest"
	"github.com/vigilhq/vigil/policy"
)

// findingsOf returns the findings of a trace.
func (e *env) findingsOf(traceID string) []client.Finding {
	e.t.Helper()
	page, err := e.api.Findings(context.Background(), client.FindingFilter{RunID: traceID})
	if err != nil {
		e.t.Fatal(err)
	}
	return page.Findings
}

func TestFindingOfBlockedInput(t *testing.T) {
	e := newEnv(t, nativeErrors)
	c := e.openai("ds", option.WithHeader("Invariant-Guardrails", headerRule(inputRule)))
	var hr *http.Response
	if _, err := c.Chat.Completions.New(context.Background(), chatParams(openai.UserMessage("a forbidden question")), option.WithResponseInto(&hr)); err == nil {
		t.Fatal("blocked input answered")
	}
	trs := e.traces("ds")
	if len(trs) != 1 {
		t.Fatalf("%d traces", len(trs))
	}
	fs := e.findingsOf(trs[0].ID)
	if len(fs) != 1 {
		t.Fatalf("findings %+v", fs)
	}
	f := fs[0]
	h := sha256.Sum256([]byte(inputRule))
	if want := "gateway-header:" + hex.EncodeToString(h[:8]); f.MonitorID != want {
		t.Errorf("monitorId %q, want %q", f.MonitorID, want)
	}
	if f.Title != "forbidden question" || f.Severity != "warn" || f.Status != "open" {
		t.Errorf("finding %+v", f)
	}
	if len(f.Citations) == 0 || f.Citations[0].Address[:len("messages.0")] != "messages.0" || f.Citations[0].NodeID == nil || f.NodeID == nil {
		t.Errorf("citations %+v node %v", f.Citations, f.NodeID)
	}
	if f.Key != "(0, (0,))" {
		t.Errorf("key %q", f.Key)
	}
	cx := f.Context
	if cx["location"] != "request" || cx["blocked"] != true || cx["call_id"] != hr.Header.Get("Vigil-Request-Id") || cx["action"] != "block" {
		t.Errorf("context %v (request id %s)", cx, hr.Header.Get("Vigil-Request-Id"))
	}
	// The explorer API serves it as a guardrails-error annotation.
	tr, err := e.api.GetTrace(context.Background(), trs[0].ID, true)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, a := range tr.Annotations {
		if a.ExtraMetadata["source"] == "guardrails-error" && a.ExtraMetadata["finding_id"] == f.ID {
			n++
		}
	}
	if n != len(f.Citations) {
		t.Errorf("%d guardrails-error annotations for %d citations: %+v", n, len(f.Citations), tr.Annotations)
	}
}

// A logging rule re-finds the same violation on every call of a stitched
// session; the ledger's de-duplication keeps one finding.
func TestFindingsDeduplicatedAcrossSession(t *testing.T) {
	p, err := policy.Load(secretRule, policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(o *gateway.Options) {
		o.Global = append(o.Global, &gateway.Guardrail{ID: "global-0", Name: "no-secrets", Content: secretRule, Action: "log", Severity: "critical", Policy: p})
	})
	e.mock.SetScript(func(r *providertest.Request) providertest.Reply {
		return providertest.Reply{Text: "the key is SECRET-KEY-12345"}
	})
	c := e.openai("ds", option.WithHeader("Invariant-Session", "sess-1"))
	ctx := context.Background()
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("what is the key?")}
	resp, err := c.Chat.Completions.New(ctx, chatParams(msgs...))
	if err != nil {
		t.Fatal(err)
	}
	msgs = append(msgs, resp.Choices[0].Message.ToParam(), openai.UserMessage("again?"))
	if _, err := c.Chat.Completions.New(ctx, chatParams(msgs...)); err != nil {
		t.Fatal(err)
	}
	trs := e.traces("ds")
	if len(trs) != 1 || len(trs[0].Messages) != 4 {
		t.Fatalf("%d traces", len(trs))
	}
	var mine []client.Finding
	for _, f := range e.findingsOf(trs[0].ID) {
		if f.MonitorID == "gateway-global:no-secrets" {
			mine = append(mine, f)
		}
	}
	if len(mine) != 2 {
		t.Fatalf("want 2 findings (messages 1 and 3), got %+v", mine)
	}
	for _, f := range mine {
		if f.Severity != "critical" || f.Score != 1 || f.Context["blocked"] != false || f.Context["location"] != "response" {
			t.Errorf("finding %+v", f)
		}
	}
	if mine[0].Key == mine[1].Key {
		t.Errorf("same key twice: %q", mine[0].Key)
	}
}

// The standalone gateway cannot write findings; its annotations carry
// vigil_gateway: true with the monitor id and the key at stored
// positions, which the server files as findings (API §15).
func TestStandaloneViolationAnnotation(t *testing.T) {
	e := newEnv(t)
	ts, rec := standalone(t, e, e.ts.URL, "")
	defer rec.Close()
	c := openai.NewClient(option.WithBaseURL(ts.URL+"/api/v1/gateway/ds/openai/"), option.WithAPIKey("sk"), option.WithMaxRetries(0),
		option.WithHeader("Invariant-Authorization", "Bearer "+adminKey), option.WithHeader("Invariant-Guardrails", headerRule(inputRule)))
	if _, err := c.Chat.Completions.New(context.Background(), chatParams(openai.UserMessage("a forbidden question"))); err == nil {
		t.Fatal("blocked input answered")
	}
	rec.Flush()
	trs := e.traces("ds")
	if len(trs) != 1 {
		t.Fatalf("%d traces", len(trs))
	}
	h := sha256.Sum256([]byte(inputRule))
	found := false
	for _, a := range trs[0].Annotations {
		x := a.ExtraMetadata
		if x["vigil_gateway"] == true && x["monitor_id"] == "gateway-header:"+hex.EncodeToString(h[:8]) && x["key"] == "(0, (0,))" && x["location"] == "request" {
			found = true
		}
	}
	if !found {
		t.Errorf("annotations %+v", trs[0].Annotations)
	}
}
