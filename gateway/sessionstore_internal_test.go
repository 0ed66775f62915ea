package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
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

// TestSessionsCap: past max open sessions, expiry ends the least recently
// active ones down to 9/10 of max, finishing their runs; the idle timeout
// alone would keep them all.
func TestSessionsCap(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	ss := newSessions(time.Hour, func() time.Time { return now })
	ss.max = 10
	var finished []string
	ss.finish = func(s *session) { finished = append(finished, s.traceID) }
	for i := range 15 {
		s := &session{traceID: fmt.Sprint("t", i), last: now.Add(time.Duration(i-15) * time.Second)}
		if i%2 == 0 {
			ss.byKey[fmt.Sprint("h:", i)] = s
		} else {
			// a prefix session listed under two boundaries
			ss.bounds[fmt.Sprint("b", i)] = append(ss.bounds[fmt.Sprint("b", i)], s)
			ss.bounds["shared"] = append(ss.bounds["shared"], s)
		}
	}
	ss.expire(now)
	n := len(ss.byKey)
	seen := map[*session]bool{}
	for _, list := range ss.bounds {
		for _, s := range list {
			seen[s] = true
		}
	}
	n += len(seen)
	if n != 9 {
		t.Fatalf("%d sessions open after expiry, want 9", n)
	}
	slices.Sort(finished)
	want := []string{"t0", "t1", "t2", "t3", "t4", "t5"}
	if !slices.Equal(finished, want) {
		t.Errorf("finished %v, want the 6 least recently active %v", finished, want)
	}
	for _, s := range ss.byKey {
		if s.traceID < "t6" && len(s.traceID) == 2 {
			t.Errorf("session %s kept", s.traceID)
		}
	}
	// Under the cap nothing more ends.
	now = now.Add(2 * time.Second)
	ss.expire(now)
	if len(finished) != 6 {
		t.Errorf("finished %d sessions under the cap", len(finished))
	}
}
