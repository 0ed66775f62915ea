package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// This file persists the session stitching index (spec §8.3), so that a
// restarted gateway keeps stitching calls to the traces that are still
// open: an append-only journal of boundaries and call records, replayed
// at start (sessions idle longer than the idle timeout are dropped, and
// the journal is rewritten without them).

// journalEntry is one line of the session journal: a boundary (Kind "b",
// written when a call commits) or a call record (Kind "c", written when
// the call's record is built).
type journalEntry struct {
	Kind      string `json:"t"`
	Scope     string `json:"scope"`
	Trace     string `json:"trace"`
	Key       string `json:"key,omitempty"`
	SessionID string `json:"sid,omitempty"`
	Source    string `json:"src,omitempty"`
	At        int64  `json:"at"`
	// Boundary lines.
	Count    int    `json:"count,omitempty"`
	Hash     string `json:"hash,omitempty"`
	Response string `json:"resp,omitempty"`
	// Call lines.
	Call      map[string]any `json:"call,omitempty"`
	Blocked   map[string]any `json:"blocked,omitempty"`
	UsageIn   int64          `json:"in,omitempty"`
	UsageOut  int64          `json:"out,omitempty"`
	Forked    map[string]any `json:"forked,omitempty"`
	Continues string         `json:"continues,omitempty"`
}

// journal appends entries from one writer goroutine; a full queue drops
// the entry (the index in memory is unaffected) and logs it.
type journal struct {
	path string
	log  *slog.Logger
	q    chan *journalEntry // encoded by the writer, off the call's path
	done chan struct{}
	once sync.Once
}

// openSessions loads the session journal at path into ss, rewrites it
// with the sessions still open, and returns the journal to append to.
func openSessions(ss *sessions, path string, log *slog.Logger) (*journal, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("session index: %w", err)
	}
	live, err := ss.replay(path, log)
	if err != nil {
		return nil, err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, live, 0o600); err != nil {
		return nil, fmt.Errorf("session index: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("session index: %w", err)
	}
	j := &journal{path: path, log: log, q: make(chan *journalEntry, 4096), done: make(chan struct{})}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("session index: %w", err)
	}
	go j.run(f)
	return j, nil
}

func (j *journal) run(f *os.File) {
	defer close(j.done)
	defer f.Close()
	w := bufio.NewWriter(f)
	for e := range j.q {
		b, err := json.Marshal(e)
		if err != nil {
			j.log.Error("gateway: session index entry not encodable", "trace_id", e.Trace, "err", err)
			continue
		}
		w.Write(append(b, '\n'))
		if len(j.q) == 0 {
			if err := w.Flush(); err != nil {
				j.log.Error("gateway: session index write", "path", j.path, "err", err)
			}
		}
	}
	w.Flush()
}

// add queues e; its maps must not change afterwards.
func (j *journal) add(e *journalEntry) {
	if j == nil {
		return
	}
	select {
	case j.q <- e:
	default:
		j.log.Warn("gateway: session index entry dropped (queue full)", "trace_id", e.Trace)
	}
}

// close writes what is queued.
func (j *journal) close() {
	if j == nil {
		return
	}
	j.once.Do(func() { close(j.q) })
	<-j.done
}

// replay rebuilds the index from the journal and returns the lines of the
// sessions still open. A line that does not decode (a torn last write)
// is skipped.
func (ss *sessions) replay(path string, log *slog.Logger) ([]byte, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("session index: %w", err)
	}
	byTrace := map[string]*session{}
	lines := map[string][][]byte{}
	var order []string
	bad := 0
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for _, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var e journalEntry
		if json.Unmarshal(line, &e) != nil || e.Trace == "" {
			bad++
			continue
		}
		s := byTrace[e.Trace]
		if s == nil {
			s = &session{traceID: e.Trace, key: e.Key, sessionID: e.SessionID, keySource: e.Source, vigil: map[string]any{}, provider: map[string]bool{}, scope: e.Scope}
			if user, rest, ok := strings.Cut(e.Scope, "\x00"); ok {
				// Enough to finish the run in process; a standalone
				// gateway, which would need the caller's key, skips it.
				s.ident, s.dataset = &Identity{UserID: user}, strings.TrimSuffix(rest, "\x00")
			}
			byTrace[e.Trace] = s
			order = append(order, e.Trace)
		}
		lines[e.Trace] = append(lines[e.Trace], line)
		at := time.Unix(0, e.At)
		if at.After(s.last) {
			s.last = at
		}
		switch e.Kind {
		case "b":
			s.count = e.Count
			if e.Hash != "" {
				if !ss.hasBoundary(e.Scope, e.Hash, s) {
					ss.bounds[e.Scope+e.Hash] = append(ss.bounds[e.Scope+e.Hash], s)
				}
				s.tip = e.Hash
			}
			if e.Source == "header" {
				ss.byKey[e.Scope+e.Key] = s
			}
			if e.Response != "" {
				ss.responses[e.Response] = s
			}
		case "c":
			s.apply(e.Call, e.Blocked, e.UsageIn, e.UsageOut, e.Forked, e.Continues)
		}
	}
	if bad > 0 {
		log.Warn("gateway: session index lines skipped (not JSON)", "path", path, "lines", bad)
	}
	now := ss.now()
	var live bytes.Buffer
	for _, id := range order {
		if now.Sub(byTrace[id].last) >= ss.idle {
			continue
		}
		for _, l := range lines[id] {
			live.Write(l)
			live.WriteByte('\n')
		}
	}
	ss.swept = time.Time{}
	ss.expire(now)
	return live.Bytes(), nil
}

// apply adds one call's record to the session's vigil metadata object.
// The caller holds s.mu (or owns s).
func (s *session) apply(cr, blocked map[string]any, in, out int64, forked map[string]any, continues string) {
	s.usageIn += in
	s.usageOut += out
	calls, _ := s.vigil["calls"].([]any)
	if cr != nil {
		calls = append(calls, cr)
	}
	if len(calls) > 2000 {
		s.vigil["folded_calls"] = num(s.vigil["folded_calls"]) + int64(len(calls)-2000)
		calls = calls[len(calls)-2000:]
	}
	s.vigil["calls"] = calls
	s.vigil["usage"] = map[string]any{"input_tokens": s.usageIn, "output_tokens": s.usageOut}
	s.vigil["session_key_source"] = s.keySource
	if blocked != nil {
		bc, _ := s.vigil["blocked_calls"].([]any)
		s.vigil["blocked_calls"] = append(bc, blocked)
	}
	if forked != nil {
		s.vigil["forked_from"] = forked
	}
	if continues != "" {
		s.continues = continues
		s.vigil["continues"] = continues
	}
}
