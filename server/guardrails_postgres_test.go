package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/internal/pgtest"
	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/store/postgres"
)

// waitRuleset polls srv's hot-path ruleset of datasetID until ok holds
// and returns how long that took, failing after limit.
func waitRuleset(t *testing.T, srv *Server, datasetID string, limit time.Duration, ok func(*ruleset) bool) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		rs, err := srv.currentRuleset(context.Background(), datasetID)
		if err != nil {
			t.Fatal(err)
		}
		if ok(rs) {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			t.Fatalf("ruleset of %s not updated after %v: %d guardrails", datasetID, limit, len(rs.Guardrails))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestGuardrailsTwoServersPostgres runs two servers on one PostgreSQL
// database: a guardrail written on one reaches the other's cached ruleset
// and wakes its held change-feed request within one second (LISTEN/NOTIFY),
// also after the other's subscription connection was killed.
func TestGuardrailsTwoServersPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	appB := "vigil_test_b_" + hex.EncodeToString(rnd[:])
	open := func(app string) store.Store {
		st, err := postgres.Open(t.Context(), dsn+"&application_name="+app, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	a := newTestServer(t, open("vigil_test_a"))
	b := newTestServer(t, open(appB))
	ctx := context.Background()
	ds, err := a.c.CreateDataset(ctx, "shared", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	// B caches the empty ruleset and holds a change-feed request.
	if rs, err := b.srv.currentRuleset(ctx, ds.ID); err != nil || len(rs.Guardrails) != 0 {
		t.Fatalf("B's first ruleset: %+v, %v", rs, err)
	}
	start, err := b.c.GuardrailChangesAfter(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan *client.GuardrailChanges, 1)
	go func() {
		r, err := b.c.GuardrailChangesAfter(ctx, start.Seq, 20*time.Second)
		if err != nil {
			t.Error(err)
		}
		held <- r
	}()
	time.Sleep(100 * time.Millisecond)

	d, err := a.c.CreateGuardrail(ctx, ds.ID, client.GuardrailCreate{Name: "email", Policy: ruleEmail})
	if err != nil {
		t.Fatal(err)
	}
	wrote := time.Now()
	took := waitRuleset(t, b.srv, ds.ID, 2*time.Second, func(rs *ruleset) bool { return len(rs.Rules) == 1 })
	t.Logf("B's cached ruleset saw A's create after %v", took)
	if took > time.Second {
		t.Errorf("B saw A's create after %v, want under 1 s", took)
	}
	select {
	case r := <-held:
		if r == nil || len(r.Changes) != 1 || r.Changes[0].DatasetID != ds.ID || r.Changes[0].RulesetVersion != 1 {
			t.Errorf("B's held request: %+v", r)
		}
		if el := time.Since(wrote); el > time.Second {
			t.Errorf("B's held request answered %v after A's write", el)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("B's held request not answered after A's write")
	}
	if l, err := b.c.Guardrails(ctx, "admin", "shared", client.GuardrailFilter{}); err != nil || len(l.Policies) != 1 || l.ETag != `"rs-1"` {
		t.Errorf("B lists: %+v, %v", l, err)
	}

	// Kill B's LISTEN connection, then write on A at once: B re-subscribes,
	// drops its cache, and sees the change.
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var killed int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE application_name = $1 AND query LIKE 'LISTEN%') k`, appB).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	if killed != 1 {
		t.Fatalf("terminated %d LISTEN connections of B, want 1", killed)
	}
	gs, _ := d.Policies()
	name := "email-v2"
	if _, err := a.c.UpdateGuardrail(ctx, ds.ID, gs[0].ID, client.GuardrailUpdate{Name: &name}); err != nil {
		t.Fatal(err)
	}
	took = waitRuleset(t, b.srv, ds.ID, 2*time.Second, func(rs *ruleset) bool {
		return len(rs.Guardrails) == 1 && rs.Guardrails[0].Name == "email-v2"
	})
	if took > time.Second {
		t.Errorf("B saw A's update after losing its subscription after %v, want under 1 s", took)
	}
	deadline := time.Now().Add(2 * time.Second)
	for !b.srv.feed.live() {
		if time.Now().After(deadline) {
			st, _ := b.srv.feed.status()
			t.Fatalf("B's feed did not re-subscribe: %s", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Live again: the next write arrives by notification.
	enabled := false
	if _, err := a.c.UpdateGuardrail(ctx, ds.ID, gs[0].ID, client.GuardrailUpdate{Enabled: &enabled}); err != nil {
		t.Fatal(err)
	}
	if took := waitRuleset(t, b.srv, ds.ID, 2*time.Second, func(rs *ruleset) bool { return len(rs.Rules) == 0 }); took > time.Second {
		t.Errorf("B saw A's disable after %v, want under 1 s", took)
	}
}
