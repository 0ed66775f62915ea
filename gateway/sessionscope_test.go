package gateway_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/vigilhq/vigil/gateway"
)

// flowRule forbids sending mail after reading secrets anywhere earlier
// in the session.
const flowRule = `raise "mail after reading secrets" if:
    (a: Message)
    (b: Message)
    a -> b
    a.role == "user"
    b.role == "user"
    "read_secret" in a.content
    "send_email" in b.content
`

// Two sub-agents share one Invariant-Session, each with its own context.
// With session_guardrail_scope: session the second agent's request is
// checked after the first agent's events, so the flow rule blocks it;
// with the default request scope it passes.
func TestSessionGuardrailScope(t *testing.T) {
	for _, scope := range []string{"request", "session"} {
		t.Run(scope, func(t *testing.T) {
			e := newEnv(t, nativeErrors, func(o *gateway.Options) { o.SessionScope = scope })
			c := e.openai("ds", option.WithHeader("Invariant-Session", "crew-1"), option.WithHeader("Invariant-Guardrails", headerRule(flowRule)))
			ctx := context.Background()
			if _, err := c.Chat.Completions.New(ctx, chatParams(openai.SystemMessage("You are the researcher."), openai.UserMessage("please read_secret from the vault"))); err != nil {
				t.Fatal(err)
			}
			_, err := c.Chat.Completions.New(ctx, chatParams(openai.SystemMessage("You are the mailer."), openai.UserMessage("now send_email to bob")))
			var ae *openai.Error
			blocked := errors.As(err, &ae) && strings.Contains(ae.RawJSON(), "did not pass the guardrails")
			if err != nil && !blocked {
				t.Fatal(err)
			}
			if blocked != (scope == "session") {
				t.Fatalf("scope %s: blocked %v (err %v)", scope, blocked, err)
			}
			trs := e.traces("ds")
			if len(trs) != 1 || len(trs[0].Messages) < 5 {
				t.Fatalf("%d traces", len(trs))
			}
			if scope != "session" {
				return
			}
			// The finding cites both events at their stored positions: the
			// first agent's user message (1) and the second's (4).
			fs := e.findingsOf(trs[0].ID)
			if len(fs) != 1 {
				t.Fatalf("findings %+v", fs)
			}
			var addrs []string
			for _, ci := range fs[0].Citations {
				addrs = append(addrs, ci.Address)
			}
			joined := strings.Join(addrs, " ")
			if !strings.Contains(joined, "messages.1") || !strings.Contains(joined, "messages.4") {
				t.Errorf("citations %v", addrs)
			}
			if fs[0].Key != "(0, (1, 4))" {
				t.Errorf("key %q", fs[0].Key)
			}
		})
	}
}
