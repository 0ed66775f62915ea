package monitor

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/internal/pgtest"
	"github.com/vigilhq/vigil/policy"
	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/store/postgres"
	"github.com/vigilhq/vigil/store/sqlite"
)

// eachStore runs fn on a fresh SQLite store and, when VIGIL_TEST_POSTGRES
// is set, a fresh PostgreSQL one.
func eachStore(t *testing.T, fn func(t *testing.T, st store.Store)) {
	t.Run("sqlite", func(t *testing.T) {
		st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "v.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, st)
	})
	t.Run("postgres", func(t *testing.T) {
		st, err := postgres.Open(t.Context(), pgtest.DSN(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, st)
	})
}

// msgs builds stored events from contents ("role: text").
func msgs(prefix string, contents ...string) []store.Message {
	out := make([]store.Message, len(contents))
	for i, c := range contents {
		role, text, _ := strings.Cut(c, ": ")
		id := fmt.Sprintf("%s-%d", prefix, i)
		data, _ := json.Marshal(map[string]string{"role": role, "content": text, "message_id": id})
		out[i] = store.Message{ID: id, NodeIDs: []string{"node-" + id}, Data: data}
	}
	return out
}

type fixture struct {
	st    store.Store
	owner *store.User
	ds    *store.Dataset
}

func newFixture(t *testing.T, st store.Store) *fixture {
	t.Helper()
	u := &store.User{Username: "u", Role: store.RoleMember}
	must(t, st.CreateUser(t.Context(), u))
	d := &store.Dataset{OwnerID: u.ID, Name: "d"}
	must(t, st.CreateDataset(t.Context(), d))
	return &fixture{st: st, owner: u, ds: d}
}

func (f *fixture) guardrail(t *testing.T, name, content, severity string, enabled bool) *store.Guardrail {
	t.Helper()
	g := &store.Guardrail{DatasetID: f.ds.ID, Name: name, Content: content, Enabled: enabled, Action: "log", Severity: severity, UpdatedBy: f.owner.ID}
	must(t, f.st.CreateGuardrail(t.Context(), g, store.GuardrailCreated, ""))
	return g
}

func (f *fixture) push(t *testing.T, traces ...[]store.Message) []*store.Trace {
	t.Helper()
	req := store.PushRequest{OwnerID: f.owner.ID, DatasetName: f.ds.Name}
	for _, m := range traces {
		req.Traces = append(req.Traces, store.NewTrace{Messages: m})
	}
	res, err := f.st.PushTraces(t.Context(), req)
	must(t, err)
	return res.Traces
}

func (f *fixture) append(t *testing.T, traceID string, m []store.Message) {
	t.Helper()
	_, err := f.st.AppendEvents(t.Context(), store.AppendRequest{TraceID: traceID, Messages: m})
	must(t, err)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// start runs a pool with a short poll for the test.
func start(t *testing.T, st store.Store, opts Options) *Pool {
	opts.Poll = 5 * time.Millisecond
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	p := Start(st, opts)
	t.Cleanup(p.Stop)
	return p
}

// drain waits until the queue is empty.
func drain(t *testing.T, st store.Store) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, err := st.CountMonitorJobs(t.Context())
		must(t, err)
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d monitor jobs still queued", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func findings(t *testing.T, st store.Store, f store.FindingFilter) []*store.Finding {
	t.Helper()
	fs, err := st.ListFindings(t.Context(), f)
	must(t, err)
	return fs
}

const secretRule = `raise "secret in a message" if:
    (m: Message)
    "SECRET" in m.content
`

// TestFindingsOnPushAndAppend: a violating push gets one finding, a clean
// one none, a disabled guardrail none; an append is evaluated on its new
// events only; evaluating a job again changes nothing (dedupe).
func TestFindingsOnPushAndAppend(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		fx := newFixture(t, st)
		g := fx.guardrail(t, "no-secrets", secretRule, store.SeverityCritical, true)
		fx.guardrail(t, "everything", "raise \"any\" if:\n    (m: Message)\n", "", false)
		p := start(t, st, Options{Workers: 2})
		trs := fx.push(t, msgs("a", "user: hi", "assistant: the SECRET is 42"), msgs("b", "user: hello", "assistant: nothing to see"))
		drain(t, st)
		fs := findings(t, st, store.FindingFilter{})
		if len(fs) != 1 {
			t.Fatalf("%d findings, want 1: %+v", len(fs), fs)
		}
		f := fs[0]
		if f.RunID != trs[0].ID || f.MonitorID != g.ID || f.Monitor != "no-secrets" || f.Key != "(0, (1,))" || f.Title != "secret in a message" ||
			f.Severity != "critical" || f.Score != 1 || f.NodeID != "node-a-1" || f.OwnerID != fx.owner.ID || f.Status != store.FindingOpen {
			t.Errorf("finding %+v", f)
		}
		if want := `[{"nodeId":"node-a-1","address":"messages.1.content:4-10"}]`; string(f.Citations) != want {
			t.Errorf("citations %s, want %s", f.Citations, want)
		}
		var ctx struct {
			Source    string
			Guardrail struct {
				ID      string
				Version int
			}
		}
		must(t, json.Unmarshal(f.Context, &ctx))
		if ctx.Source != "monitor" || ctx.Guardrail.ID != g.ID || ctx.Guardrail.Version != 1 {
			t.Errorf("context %s", f.Context)
		}

		// the append's new event is checked against the history; the old
		// violation is not reported again
		fx.append(t, trs[0].ID, msgs("c", "user: and another SECRET", "assistant: ok"))
		fx.append(t, trs[1].ID, msgs("d", "user: still clean"))
		drain(t, st)
		fs = findings(t, st, store.FindingFilter{RunID: trs[0].ID})
		if len(fs) != 2 || fs[0].Key != "(0, (1,))" || fs[1].Key != "(0, (2,))" || fs[1].NodeID != "node-c-0" {
			t.Fatalf("after append: %d findings %+v", len(fs), fs)
		}
		if n := len(findings(t, st, store.FindingFilter{RunID: trs[1].ID})); n != 0 {
			t.Fatalf("clean trace has %d findings", n)
		}

		// at least once: the same job evaluated again leaves one finding per key
		d, err := st.GetDataset(t.Context(), fx.ds.ID)
		must(t, err)
		again := &store.MonitorJob{DatasetID: fx.ds.ID, TraceID: trs[0].ID, From: 0, To: 4, RulesetVersion: d.RulesetVersion}
		must(t, p.Evaluate(t.Context(), again))
		if fs := findings(t, st, store.FindingFilter{}); len(fs) != 2 {
			t.Fatalf("re-evaluation: %d findings, want 2", len(fs))
		}
		if s := p.Stats(); s.Jobs != 4 || s.Findings != 4 || s.RuleErrors != 0 {
			t.Errorf("stats %+v", s)
		}
	})
}

// TestHistoryNotReevaluated: a guardrail added after a push does not judge
// the old events; the next append is checked against them (pending mode).
func TestHistoryNotReevaluated(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		fx := newFixture(t, st)
		trs := fx.push(t, msgs("a", "user: SECRET", "assistant: sure"))
		fx.guardrail(t, "flow", `raise "secret then answer" if:
    (m: Message) -> (a: Message)
    "SECRET" in m.content
    a.role == "assistant"
`, "", true)
		start(t, st, Options{Workers: 1})
		fx.append(t, trs[0].ID, msgs("b", "assistant: here it is"))
		drain(t, st)
		fs := findings(t, st, store.FindingFilter{})
		// (0,1) is old history; only pairs with the new event 2 count
		if len(fs) != 1 || fs[0].Key != "(0, (2, 0))" {
			t.Fatalf("findings %+v, want one with key (0, (2, 0))", fs)
		}
	})
}

// TestRuleFailuresDoNotStopIngest: a rule that blows its step budget, one
// that times out, one that no longer loads and one that needs a missing
// parameter are each counted on their guardrail; the good rule's finding is
// still written and every job completes.
func TestRuleFailuresDoNotStopIngest(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		fx := newFixture(t, st)
		good := fx.guardrail(t, "good", secretRule, "", true)
		steps := fx.guardrail(t, "steps", `raise "pair" if:
    (a: Message)
    (b: Message)
    (c: Message)
    a.content == b.content + c.content
`, "", true)
		broken := fx.guardrail(t, "broken", "raise \"x\" if:\n    (m: Message\n", "", true)
		param := fx.guardrail(t, "param", "raise \"x\" if:\n    (m: Message)\n    m.content == input.expected\n", "", true)
		p := start(t, st, Options{Workers: 2, Policy: policy.Options{MaxSteps: 50}})
		var events []string
		for i := range 12 {
			events = append(events, fmt.Sprintf("user: message %d", i))
		}
		events = append(events, "user: SECRET")
		fx.push(t, msgs("a", events...))
		fx.push(t, msgs("b", "user: SECRET again"))
		drain(t, st)
		if fs := findings(t, st, store.FindingFilter{MonitorID: good.ID}); len(fs) != 2 {
			t.Fatalf("good rule: %d findings, want 2", len(fs))
		}
		errs, err := st.MonitorErrors(t.Context(), []string{good.ID, steps.ID, broken.ID, param.ID})
		must(t, err)
		for _, c := range []struct {
			g    *store.Guardrail
			want string
		}{{steps, "budget_exceeded"}, {broken, "does not load"}, {param, "missing_parameter"}} {
			e := errs[c.g.ID]
			if e == nil || e.Count < 1 || !strings.Contains(e.LastError, c.want) {
				t.Errorf("guardrail %s: errors %+v, want one mentioning %q", c.g.Name, e, c.want)
			}
		}
		if errs[good.ID] != nil {
			t.Errorf("good rule has errors: %+v", errs[good.ID])
		}
		if s := p.Stats(); s.Jobs != 2 || s.Retries != 0 || s.RuleErrors < 4 {
			t.Errorf("stats %+v", s)
		}
	})
}

// TestRuleTimeout: a rule that runs out of wall time is counted on its
// guardrail and the job completes.
func TestRuleTimeout(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		fx := newFixture(t, st)
		slow := fx.guardrail(t, "slow", `raise "triple" if:
    (a: Message)
    (b: Message)
    (c: Message)
    a.content == b.content + c.content
`, "", true)
		p := start(t, st, Options{Workers: 1, Policy: policy.Options{WallTime: time.Millisecond, MaxSteps: -1}})
		var events []string
		for i := range 300 {
			events = append(events, fmt.Sprintf("user: message %d", i))
		}
		fx.push(t, msgs("a", events...))
		drain(t, st)
		errs, err := st.MonitorErrors(t.Context(), []string{slow.ID})
		must(t, err)
		if e := errs[slow.ID]; e == nil || !strings.Contains(e.LastError, "budget_exceeded") {
			t.Fatalf("errors of the slow rule: %+v", e)
		}
		if s := p.Stats(); s.Jobs != 1 || s.RuleErrors != 1 {
			t.Errorf("stats %+v", s)
		}
	})
}

// TestInvalidTraceCompletes: events the engine cannot normalise give no
// findings; the job completes and is counted.
func TestInvalidTraceCompletes(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		fx := newFixture(t, st)
		fx.guardrail(t, "good", secretRule, "", true)
		p := start(t, st, Options{Workers: 1})
		bad := []store.Message{{ID: "x", Data: json.RawMessage(`{"role":"user","content":{"not":"content"},"message_id":"x"}`)}}
		fx.push(t, bad)
		drain(t, st)
		if s := p.Stats(); s.InvalidTraces != 1 || s.Jobs != 1 {
			t.Errorf("stats %+v", s)
		}
	})
}

// TestStopReleasesClaims: a pool stopped with jobs claimed (a claim takes
// up to 256) leaves none of them leased: every job not completed is due
// again at once, for the next process.
func TestStopReleasesClaims(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		f := newFixture(t, st)
		f.guardrail(t, "bad", "raise \"bad\" if:\n    (msg: Message)\n    \"bad\" in msg.content\n", "", true)
		var traces [][]store.Message
		for i := range 300 {
			traces = append(traces, msgs(fmt.Sprint("t", i), "user: hello", "assistant: fine"))
		}
		f.push(t, traces...)
		p := Start(st, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		deadline := time.Now().Add(10 * time.Second)
		for p.Stats().Jobs == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		p.Stop()
		left, err := st.CountMonitorJobs(t.Context())
		must(t, err)
		due, err := st.ClaimMonitorJobs(t.Context(), 1000, time.Hour)
		must(t, err)
		if len(due) != left {
			t.Fatalf("after Stop, %d jobs queued but %d due: the others are still leased", left, len(due))
		}
		done := p.Stats().Jobs
		if int(done)+left != 300 {
			t.Fatalf("%d jobs done and %d left, want 300 in all", done, left)
		}
		t.Logf("%d jobs done, %d put back", done, left)
	})
}
