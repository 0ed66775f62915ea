package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/policy"
	"github.com/vigilhq/vigil/store"
)

func TestRuleCache(t *testing.T) {
	c := NewRuleCache(2, policy.Options{})
	rule := func(i int) string {
		return fmt.Sprintf("raise \"r%d\" if:\n    (msg: Message)\n    msg.role == \"user\"\n", i)
	}
	p1, err := c.Load(rule(1))
	if err != nil {
		t.Fatal(err)
	}
	again, _ := c.Load(rule(1))
	if again != p1 {
		t.Error("the same text compiled twice")
	}
	c.Load(rule(2))
	c.Load(rule(1)) // 1 is now the most recently used
	c.Load(rule(3)) // evicts 2
	if c.Len() != 2 {
		t.Errorf("Len = %d, want the size 2", c.Len())
	}
	if hits, misses := c.Stats(); hits != 2 || misses != 3 {
		t.Errorf("hits, misses = %d, %d; want 2, 3", hits, misses)
	}
	if p, _ := c.Load(rule(1)); p != p1 {
		t.Error("the most recently used rule was evicted")
	}
	if _, misses := c.Stats(); misses != 3 {
		t.Error("rule 1 recompiled")
	}
	c.Load(rule(2))
	if _, misses := c.Stats(); misses != 4 {
		t.Error("rule 2 was not evicted")
	}
	// Load errors are returned, not cached.
	for range 2 {
		if _, err := c.Load(ruleBad); !errors.Is(err, policy.ErrLoad) {
			t.Fatalf("bad rule: %v", err)
		}
	}
	if _, misses := c.Stats(); misses != 6 || c.Len() != 2 {
		t.Errorf("a load error was cached: misses %d, len %d", misses, c.Len())
	}
}

func BenchmarkRuleCacheHit(b *testing.B) {
	c := NewRuleCache(0, policy.Options{})
	if _, err := c.Load(ruleEmail); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Load(ruleEmail); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCurrentRuleset measures the hot-path ruleset lookup of a
// dataset with 5 guardrails while the change feed is live (no query).
func BenchmarkCurrentRuleset(b *testing.B) {
	ts := newTestServer(b, openSQLite(b))
	ctx := context.Background()
	ds := benchGuardrails(b, ts, 5)
	if _, err := ts.srv.currentRuleset(ctx, ds); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		rs, err := ts.srv.currentRuleset(ctx, ds)
		if err != nil || len(rs.Rules) != 5 {
			b.Fatal(len(rs.Rules), err)
		}
	}
}

// BenchmarkGuardrailPoll measures a gateway's poll of the ruleset endpoint
// over loopback: with the current ETag (304) and without (200, 5 rules).
func BenchmarkGuardrailPoll(b *testing.B) {
	ts := newTestServer(b, openSQLite(b))
	benchGuardrails(b, ts, 5)
	url := ts.URL + "/api/v1/dataset/byuser/admin/bench/policy"
	hc := ts.Client()
	for _, bc := range []struct {
		name, inm string
		want      int
	}{{"not-modified", `"rs-5"`, 304}, {"full", "", 200}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				req, _ := http.NewRequest("GET", url, nil)
				req.Header.Set("Authorization", "Bearer "+adminKey)
				if bc.inm != "" {
					req.Header.Set("If-None-Match", bc.inm)
				}
				resp, err := hc.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != bc.want {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
}

// benchGuardrails creates dataset "bench" with n guardrails and returns
// its id.
func benchGuardrails(b *testing.B, ts *testServer, n int) string {
	b.Helper()
	ctx := context.Background()
	d, err := ts.c.CreateDataset(ctx, "bench", nil, false)
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		rule := fmt.Sprintf("raise \"r%d\" if:\n    (msg: Message)\n    \"x%d\" in msg.content\n", i, i)
		if _, err := ts.c.CreateGuardrail(ctx, d.ID, client.GuardrailCreate{Name: fmt.Sprint("r", i), Policy: rule}); err != nil {
			b.Fatal(err)
		}
	}
	return d.ID
}

// midReadStore calls during after each ListGuardrails read: a change
// notification arriving while a ruleset is being loaded.
type midReadStore struct {
	store.Store
	during func()
}

func (s midReadStore) ListGuardrails(ctx context.Context, datasetID string) ([]*store.Guardrail, error) {
	gs, err := s.Store.ListGuardrails(ctx, datasetID)
	s.during()
	return gs, err
}

// TestRulesetLoadRacesInvalidation: a ruleset read before an invalidation
// that arrives while it loads is returned but not cached (cached, it
// would outlive the change that invalidated it, as the hot path does not
// check versions).
func TestRulesetLoadRacesInvalidation(t *testing.T) {
	ts := newTestServer(t, openSQLite(t))
	ctx := context.Background()
	d, err := ts.c.CreateDataset(ctx, "race", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	rs := newRulesets(NewRuleCache(0, policy.Options{}))
	quiet := midReadStore{Store: ts.st, during: func() {}}
	if _, err := rs.load(ctx, quiet, d.ID, 0); err != nil || rs.get(d.ID) == nil {
		t.Fatalf("a quiet load is not cached: %v", err)
	}
	rs.invalidate(d.ID)
	racing := midReadStore{Store: ts.st, during: func() { rs.invalidate(d.ID) }}
	r, err := rs.load(ctx, racing, d.ID, 0)
	if err != nil || r == nil {
		t.Fatalf("load: %v", err)
	}
	if rs.get(d.ID) != nil {
		t.Error("a ruleset loaded across an invalidation was cached")
	}
}
