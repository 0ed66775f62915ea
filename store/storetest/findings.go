package storetest

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/vigilhq/vigil/store"
)

func init() {
	register("Findings", testFindings)
}

func testFindings(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	t0 := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	f := &store.Finding{RunID: "run-1", OwnerID: "o", NodeID: "N1", MonitorID: "g1", Monitor: "no-email", Key: "(0, (2, 4))",
		Title: "email sent", Severity: store.SeverityWarn, Score: 0.6, CreatedAt: t0,
		Citations: json.RawMessage(`[{"nodeId":"N1","address":"messages.2.content:0-4"}]`), Context: json.RawMessage(`{"blocked":true}`)}
	got, created, err := s.UpsertFinding(ctx, f)
	must(t, err)
	if !created || got.ID == "" || got.Status != store.FindingOpen || len(got.ID) != 26 {
		t.Fatalf("UpsertFinding = %+v, created %v", got, created)
	}
	// Accept it, then re-evaluate: content changes, status and history stay.
	acc, err := s.SetFindingStatus(ctx, got.ID, store.FindingAccepted, "alice", "known", t0.Add(time.Hour))
	must(t, err)
	if acc.Status != store.FindingAccepted || len(acc.History) != 1 || acc.History[0].From != "open" || acc.History[0].Note != "known" {
		t.Errorf("SetFindingStatus = %+v", acc)
	}
	again, created, err := s.UpsertFinding(ctx, &store.Finding{RunID: "run-1", OwnerID: "o", MonitorID: "g1", Monitor: "no-email", Key: "(0, (2, 4))",
		Title: "email sent again", Severity: store.SeverityCritical, Score: 1, Citations: json.RawMessage(`[]`), CreatedAt: t0.Add(2 * time.Hour)})
	must(t, err)
	if created || again.ID != got.ID || again.Title != "email sent again" || again.Severity != store.SeverityCritical ||
		again.Status != store.FindingAccepted || len(again.History) != 1 || again.NodeID != "" || !again.CreatedAt.Equal(t0) {
		t.Errorf("re-upsert = %+v, created %v", again, created)
	}
	stored, err := s.GetFinding(ctx, got.ID)
	must(t, err)
	if !reflect.DeepEqual(stored, again) {
		t.Errorf("GetFinding = %+v\nwant %+v", stored, again)
	}
	_, err = s.GetFinding(ctx, "nope")
	wantErr(t, err, store.ErrNotFound)
	// Transitions.
	_, err = s.SetFindingStatus(ctx, got.ID, store.FindingDismissed, "bob", "", t0)
	wantErr(t, err, store.ErrConflict)
	_, err = s.SetFindingStatus(ctx, got.ID, store.FindingAccepted, "bob", "", t0)
	wantErr(t, err, store.ErrConflict)
	_, err = s.SetFindingStatus(ctx, got.ID, store.FindingOpen, "bob", "reopen", t0.Add(3*time.Hour))
	must(t, err)
	_, err = s.SetFindingStatus(ctx, "nope", store.FindingOpen, "bob", "", t0)
	wantErr(t, err, store.ErrNotFound)

	for i, sev := range []string{store.SeverityInfo, store.SeverityCritical, store.SeverityWarn} {
		_, _, err := s.UpsertFinding(ctx, &store.Finding{RunID: "run-2", OwnerID: "o", MonitorID: "g2", Key: sev, Title: sev, Severity: sev,
			CreatedAt: t0.Add(time.Duration(i) * time.Minute)})
		must(t, err)
	}
	titles := func(fs []*store.Finding) []string {
		out := []string{}
		for _, f := range fs {
			out = append(out, f.Title)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		f    store.FindingFilter
		want []string
	}{
		{"run", store.FindingFilter{RunID: "run-2"}, []string{"info", "critical", "warn"}},
		{"review queue", store.FindingFilter{Status: []string{store.FindingOpen}, ReviewOrder: true}, []string{"email sent again", "critical", "warn", "info"}},
		{"severity", store.FindingFilter{Severity: []string{store.SeverityWarn, store.SeverityCritical}}, []string{"email sent again", "critical", "warn"}},
		{"monitor", store.FindingFilter{MonitorID: "g1"}, []string{"email sent again"}},
		{"runs", store.FindingFilter{RunIDs: []string{"run-1", "run-9"}}, []string{"email sent again"}},
		{"owner page", store.FindingFilter{OwnerID: "o", Limit: 2, Offset: 1}, []string{"info", "critical"}},
		{"none", store.FindingFilter{Status: []string{store.FindingDismissed}}, []string{}},
	} {
		got, err := s.ListFindings(ctx, tc.f)
		must(t, err)
		if !reflect.DeepEqual(titles(got), tc.want) {
			t.Errorf("%s: ListFindings = %q, want %q", tc.name, titles(got), tc.want)
		}
	}
	if _, _, err := s.UpsertFinding(ctx, &store.Finding{RunID: "r", MonitorID: "m", Citations: json.RawMessage(`[`)}); err == nil {
		t.Error("invalid citations accepted")
	}
}
