package gateway

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Replaying the journal keeps open sessions, drops expired ones (and
// their lines), skips a torn last line, and rebuilds the call list.
func TestSessionJournalReplay(t *testing.T) {
	now := time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "sessions.jsonl")
	line := func(e journalEntry) string {
		b, _ := json.Marshal(e)
		return string(b) + "\n"
	}
	old, fresh := now.Add(-time.Hour).UnixNano(), now.Add(-time.Minute).UnixNano()
	data := line(journalEntry{Kind: "b", Scope: "u\x00ds\x00", Trace: "t-old", Key: "h:a", SessionID: "a", Source: "header", At: old, Count: 2, Hash: "h1"}) +
		line(journalEntry{Kind: "b", Scope: "u\x00ds\x00", Trace: "t-new", Key: "h:b", SessionID: "b", Source: "header", At: fresh, Count: 2, Hash: "h2"}) +
		line(journalEntry{Kind: "c", Scope: "u\x00ds\x00", Trace: "t-new", Key: "h:b", SessionID: "b", Source: "header", At: fresh, Call: map[string]any{"call_id": "c1"}, UsageIn: 10, UsageOut: 5}) +
		line(journalEntry{Kind: "b", Scope: "u\x00ds\x00", Trace: "t-new", Key: "h:b", SessionID: "b", Source: "header", At: fresh, Count: 4, Hash: "h3"}) +
		`{"t":"c","trace":"t-new","call":{"call_id"` // torn
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	ss := newSessions(30*time.Minute, func() time.Time { return now })
	j, err := openSessions(ss, path, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	j.close()
	if ss.byKey["u\x00ds\x00h:a"] != nil {
		t.Error("expired session restored")
	}
	s := ss.byKey["u\x00ds\x00h:b"]
	if s == nil {
		t.Fatal("open session not restored")
	}
	if s.count != 4 || s.tip != "h3" || s.usageIn != 10 || s.usageOut != 5 || s.sessionID != "b" {
		t.Errorf("session %+v", s)
	}
	if calls, _ := s.vigil["calls"].([]any); len(calls) != 1 {
		t.Errorf("calls %v", s.vigil["calls"])
	}
	if !ss.hasBoundary("u\x00ds\x00", "h2", s) || !ss.hasBoundary("u\x00ds\x00", "h3", s) {
		t.Error("boundaries not restored")
	}
	b, _ := os.ReadFile(path)
	if strings.Contains(string(b), "t-old") || strings.Count(string(b), "\n") != 3 {
		t.Errorf("journal not compacted:\n%s", b)
	}
}

// FuzzSessionJournal: any journal content loads without a panic, and
// what it keeps loads again to the same sessions.
func FuzzSessionJournal(f *testing.F) {
	f.Add([]byte(`{"t":"b","scope":"u\u0000d\u0000","trace":"t1","key":"h:x","src":"header","at":9000000000000000000,"count":2,"hash":"h"}` + "\n"))
	f.Add([]byte(`{"t":"c","trace":"t1","at":9000000000000000000,"call":{"a":1},"blocked":{"b":2},"in":3,"out":4,"forked":{},"continues":"t0"}`))
	f.Add([]byte("\n\n{\"t\":\"b\"}\nnot json\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "s.jsonl")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		now := func() time.Time { return time.Unix(0, 8e18) }
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		ss := newSessions(time.Hour, now)
		j, err := openSessions(ss, path, log)
		if err != nil {
			t.Fatal(err)
		}
		j.close()
		ss2 := newSessions(time.Hour, now)
		j2, err := openSessions(ss2, path, log)
		if err != nil {
			t.Fatal(err)
		}
		j2.close()
		if len(ss.byKey) != len(ss2.byKey) || len(ss.bounds) != len(ss2.bounds) {
			t.Fatalf("reload differs: %d/%d keys, %d/%d bounds", len(ss.byKey), len(ss2.byKey), len(ss.bounds), len(ss2.bounds))
		}
	})
}
