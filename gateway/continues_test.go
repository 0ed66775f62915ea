package gateway_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/vigilhq/vigil/gateway"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// A header session that expired is continued by a new trace whose
// metadata names the previous one (vigil.continues); a session still
// open is not.
func TestSessionExpiredContinues(t *testing.T) {
	clk := &fakeClock{t: time.Now()}
	e := newEnv(t, func(o *gateway.Options) { o.Now = clk.Now; o.SessionIdle = 30 * time.Minute })
	c := e.openai("ds", option.WithHeader("Invariant-Session", "agent-7"))
	ctx := context.Background()
	traceOf := func(text string) string {
		t.Helper()
		var hr *http.Response
		if _, err := c.Chat.Completions.New(ctx, chatParams(openai.UserMessage(text)), option.WithResponseInto(&hr)); err != nil {
			t.Fatal(err)
		}
		return hr.Header.Get("Vigil-Trace-Id")
	}
	first := traceOf("one")
	clk.Add(10 * time.Minute)
	if again := traceOf("two"); again != first {
		t.Fatalf("open session not continued: %s then %s", first, again)
	}
	clk.Add(31 * time.Minute)
	next := traceOf("three")
	if next == first || next == "" {
		t.Fatalf("expired session continued in place: %s", next)
	}
	clk.Add(time.Minute)
	if again := traceOf("four"); again != next {
		t.Fatalf("new session not continued: %s then %s", next, again)
	}
	byID := map[string]map[string]any{}
	for _, tr := range e.traces("ds") {
		vig, _ := tr.ExtraMetadata["vigil"].(map[string]any)
		byID[tr.ID] = vig
	}
	if len(byID) != 2 {
		t.Fatalf("%d traces, want 2", len(byID))
	}
	if got := byID[next]["continues"]; got != first {
		t.Errorf("vigil.continues %v, want %s", got, first)
	}
	if got, set := byID[first]["continues"]; set {
		t.Errorf("first trace continues %v", got)
	}
}

// When a stitched session ends its run is finished (status completed,
// its ledger session closed); a session still open is not.
func TestSessionEndFinishesRun(t *testing.T) {
	clk := &fakeClock{t: time.Now()}
	e := newEnv(t, func(o *gateway.Options) { o.Now = clk.Now; o.SessionIdle = 30 * time.Minute })
	ctx := context.Background()
	traceOf := func(session, text string) string {
		t.Helper()
		var hr *http.Response
		c := e.openai("ds", option.WithHeader("Invariant-Session", session))
		if _, err := c.Chat.Completions.New(ctx, chatParams(openai.UserMessage(text)), option.WithResponseInto(&hr)); err != nil {
			t.Fatal(err)
		}
		return hr.Header.Get("Vigil-Trace-Id")
	}
	a := traceOf("a", "one")
	clk.Add(20 * time.Minute)
	b := traceOf("b", "two")
	clk.Add(15 * time.Minute) // a idle 35 min, b 15 min
	traceOf("c", "three")     // the call that notices
	e.gw.Idle()
	status := func(id string) string {
		tr, err := e.st.GetTrace(ctx, id, false)
		if err != nil {
			t.Fatal(err)
		}
		return string(tr.Status)
	}
	eventually(t, "the ended session's run is finished", func() bool {
		e.rec.Flush()
		return status(a) == "completed"
	})
	if got := status(b); got != "open" {
		t.Errorf("open session's run is %s", got)
	}
}
