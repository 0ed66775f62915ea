package storetest

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/vigilhq/vigil/store"
)

func init() {
	register("MCPSessions", testMCPSessions)
	register("MCPPins", testMCPPins)
}

func testMCPSessions(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	t0 := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	m := &store.MCPSession{ID: "vgl-01J", OwnerID: "o", TraceID: "tr", Dataset: "mcp", Transport: "stdio",
		Client: json.RawMessage(`{"name":"claude","version":"1"}`), Server: json.RawMessage(`{"name":"fs","version":"2"}`), ServerName: "fs",
		ProtocolVersion: "2025-06-18", Upstream: "npx fs", SystemUser: "alice", StartedAt: t0, LastSeenAt: t0, State: json.RawMessage(`{"pins":["a"]}`)}
	must(t, s.PutMCPSession(ctx, m))
	end := t0.Add(time.Hour)
	m2 := *m
	m2.StartedAt, m2.LastSeenAt, m2.EndedAt = t0.Add(time.Minute), end, &end
	must(t, s.PutMCPSession(ctx, &m2))
	got, err := s.GetMCPSession(ctx, "vgl-01J")
	must(t, err)
	if !got.StartedAt.Equal(t0) || !got.LastSeenAt.Equal(end) || got.EndedAt == nil || got.Transport != "stdio" || got.SystemUser != "alice" {
		t.Errorf("GetMCPSession = %+v", got)
	}
	assertJSON(t, got.Client, `{"name":"claude","version":"1"}`)
	assertJSON(t, got.State, `{"pins":["a"]}`)
	_, err = s.GetMCPSession(ctx, "nope")
	wantErr(t, err, store.ErrNotFound)
	must(t, s.PutMCPSession(ctx, &store.MCPSession{ID: "other", OwnerID: "o", ServerName: "git", Dataset: "mcp", LastSeenAt: t0.Add(2 * time.Hour)}))
	if err := s.PutMCPSession(ctx, &store.MCPSession{ID: "bad", State: json.RawMessage(`{`)}); err == nil {
		t.Error("invalid state accepted")
	}
	list, err := s.ListMCPSessions(ctx, store.MCPSessionFilter{OwnerID: "o"})
	must(t, err)
	if len(list) != 2 || list[0].ID != "other" {
		t.Errorf("ListMCPSessions = %d, first %s", len(list), list[0].ID)
	}
	list, _ = s.ListMCPSessions(ctx, store.MCPSessionFilter{Server: "fs"})
	if len(list) != 1 || list[0].ID != "vgl-01J" {
		t.Errorf("by server: %d", len(list))
	}
}

func testMCPPins(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	// Trust on first use, from many connections at once: the pin set is
	// locked, so each tool is pinned once.
	tofu := func(pins []*store.MCPPin) ([]*store.MCPPin, error) {
		have := map[string]bool{}
		for _, p := range pins {
			have[p.Tool] = true
		}
		var out []*store.MCPPin
		for _, tool := range []string{"read_file", "write_file"} {
			if !have[tool] {
				out = append(out, &store.MCPPin{Tool: tool, Hash: "h-" + tool, Pinned: json.RawMessage(`{"description":"` + tool + `"}`)})
			}
		}
		return out, nil
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.UpdateMCPPins(ctx, "o", "fs", tofu); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	pins, err := s.ListMCPPins(ctx, "o", "fs")
	must(t, err)
	if len(pins) != 2 || pins[0].Tool != "read_file" || pins[0].Status != store.PinApproved || pins[0].Hash != "h-read_file" {
		t.Fatalf("after TOFU: %+v", pins)
	}
	// A changed definition is stored as pending.
	seen := time.Date(2026, 6, 2, 0, 0, 0, 0, time.UTC)
	_, err = s.UpdateMCPPins(ctx, "o", "fs", func(pins []*store.MCPPin) ([]*store.MCPPin, error) {
		for _, p := range pins {
			if p.Tool == "write_file" {
				p.Status, p.PendingHash, p.Pending, p.PendingFirstSeen = store.PinPending, "h2", json.RawMessage(`{"description":"evil"}`), &seen
				return []*store.MCPPin{p}, nil
			}
		}
		return nil, nil
	})
	must(t, err)
	pins, _ = s.ListMCPPins(ctx, "o", "")
	w := pins[1]
	if w.Status != store.PinPending || w.PendingHash != "h2" || w.Hash != "h-write_file" || w.PendingFirstSeen == nil || !w.PendingFirstSeen.Equal(seen) {
		t.Fatalf("pending pin = %+v", w)
	}
	_, err = s.ApproveMCPPin(ctx, pins[0].ID, "alice", seen)
	wantErr(t, err, store.ErrConflict)
	ap, err := s.ApproveMCPPin(ctx, w.ID, "alice", seen.Add(time.Hour))
	must(t, err)
	if ap.Status != store.PinApproved || ap.Hash != "h2" || ap.PendingHash != "" || ap.ApprovedBy != "alice" || ap.TimeApproved == nil {
		t.Errorf("approved = %+v", ap)
	}
	got, err := s.GetMCPPin(ctx, w.ID)
	must(t, err)
	assertJSON(t, got.Pinned, `{"description":"evil"}`)
	if got.Pending != nil || got.PendingFirstSeen != nil || got.Status != store.PinApproved {
		t.Errorf("stored after approve = %+v", got)
	}
	_, err = s.ApproveMCPPin(ctx, "nope", "a", seen)
	wantErr(t, err, store.ErrNotFound)
	// Pins belong to (owner, server).
	other, _ := s.ListMCPPins(ctx, "o2", "")
	if len(other) != 0 {
		t.Errorf("other owner sees %d pins", len(other))
	}
	must(t, s.DeleteMCPPin(ctx, w.ID))
	wantErr(t, s.DeleteMCPPin(ctx, w.ID), store.ErrNotFound)
	_, err = s.GetMCPPin(ctx, w.ID)
	wantErr(t, err, store.ErrNotFound)
}
