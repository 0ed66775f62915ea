package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// Spooler is a Store that keeps records it could not write (the server
// unreachable after the retries) to write them later (ReplaySpool).
type Spooler interface {
	Spool(sessionID, dataset, sessionKey, traceID string, meta map[string]any, events []json.RawMessage) error
}

// MaxSpoolBytes bounds the spool folder; records beyond it are dropped
// (and logged).
const MaxSpoolBytes = 1 << 30

// spoolRecord is one line of a session's spool file.
type spoolRecord struct {
	Dataset    string            `json:"dataset"`
	SessionKey string            `json:"session_key,omitempty"`
	TraceID    string            `json:"trace_id,omitempty"`
	Meta       map[string]any    `json:"meta,omitempty"`
	Events     []json.RawMessage `json:"events"`
}

var spoolMu sync.Mutex

// Spool implements Spooler: the records of a session are appended to
// <SpoolDir>/<session id>.jsonl.
func (cs ClientStore) Spool(sessionID, dataset, sessionKey, traceID string, meta map[string]any, events []json.RawMessage) error {
	if cs.SpoolDir == "" {
		return errors.New("no spool folder")
	}
	spoolMu.Lock()
	defer spoolMu.Unlock()
	if err := os.MkdirAll(cs.SpoolDir, 0o700); err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	var size int64
	_ = filepath.WalkDir(cs.SpoolDir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, ierr := d.Info(); ierr == nil {
				size += info.Size()
			}
		}
		return nil
	})
	line, err := json.Marshal(spoolRecord{Dataset: dataset, SessionKey: sessionKey, TraceID: traceID, Meta: meta, Events: events})
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	if size+int64(len(line)) > MaxSpoolBytes {
		return fmt.Errorf("spool: %s is full (%d bytes)", cs.SpoolDir, size)
	}
	f, err := os.OpenFile(filepath.Join(cs.SpoolDir, cacheName(sessionID)+".jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	_, werr := f.Write(append(line, '\n'))
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	return werr
}

// ReplaySpool writes the spooled sessions, oldest file first, and removes
// each file once all its records are stored. It returns how many
// sessions were written; the first failure stops it (the rest stays for
// the next start).
func (cs ClientStore) ReplaySpool(ctx context.Context) (int, error) {
	if cs.SpoolDir == "" {
		return 0, nil
	}
	entries, err := os.ReadDir(cs.SpoolDir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("spool: %w", err)
	}
	sort.Slice(entries, func(i, j int) bool {
		a, _ := entries[i].Info()
		b, _ := entries[j].Info()
		return a != nil && b != nil && a.ModTime().Before(b.ModTime())
	})
	n := 0
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".jsonl") {
			continue
		}
		path := filepath.Join(cs.SpoolDir, e.Name())
		if err := cs.replayFile(ctx, path); err != nil {
			return n, err
		}
		_ = os.Remove(path)
		n++
	}
	return n, nil
}

func (cs ClientStore) replayFile(ctx context.Context, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 2*MaxMessageBytes)
	created := ""
	for sc.Scan() {
		var r spoolRecord
		if json.Unmarshal(sc.Bytes(), &r) != nil || len(r.Events) == 0 {
			continue // a torn last line
		}
		id := r.TraceID
		if id == "" {
			id = created
		}
		if id == "" {
			if created, err = cs.CreateTrace(ctx, r.Dataset, r.SessionKey, r.Meta, r.Events); err != nil {
				return fmt.Errorf("spool %s: %w", filepath.Base(path), err)
			}
			continue
		}
		if err := cs.AppendEvents(ctx, id, r.Events); err != nil {
			return fmt.Errorf("spool %s: %w", filepath.Base(path), err)
		}
	}
	return sc.Err()
}
