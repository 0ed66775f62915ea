package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/policy"
)

// This file is the standalone gateway's link to a Vigil server (spec
// §1, §8.2): keys and rulesets through the HTTP API with the caller's
// key, cached (identity 60 s; rulesets with their ETag, dropped by the
// change feed, re-validated every 5 minutes), and recording through
// push/append with retries and a disk spool.

// Remote reaches a Vigil server at a URL with each caller's key.
type Remote struct {
	url  string
	comp Compiler
	log  *slog.Logger

	mu     sync.Mutex
	ids    map[string]identEntry // key → identity
	rules  map[string]*ruleEntry // owner \x00 dataset → ruleset
	feeds  map[string]time.Time  // key → last use, for the change feeds
	cancel context.CancelFunc
	ctx    context.Context
}

type identEntry struct {
	id *Identity
	at time.Time
}

type ruleEntry struct {
	rs   *Ruleset
	etag string
	at   time.Time
}

// NewRemote returns the Authenticator and RuleSource of a standalone
// gateway in front of the server at url.
func NewRemote(url string, comp Compiler, log *slog.Logger) *Remote {
	if log == nil {
		log = slog.Default()
	}
	if comp == nil {
		comp = &privateCache{m: map[string]*policy.Policy{}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Remote{url: url, comp: comp, log: log, ids: map[string]identEntry{}, rules: map[string]*ruleEntry{},
		feeds: map[string]time.Time{}, ctx: ctx, cancel: cancel}
}

// Close stops the change feeds.
func (r *Remote) Close() { r.cancel() }

func (r *Remote) client(key string) *client.Client {
	return client.New(r.url, key, client.WithRetries(1))
}

// Authenticate resolves a key through GET /user/identity, cached 60 s.
func (r *Remote) Authenticate(ctx context.Context, key string) (*Identity, error) {
	r.mu.Lock()
	e, ok := r.ids[key]
	r.mu.Unlock()
	if ok && time.Since(e.at) < time.Minute {
		return e.id, nil
	}
	who, err := r.client(key).Identity(ctx)
	if err != nil {
		var ae *client.APIError
		if errors.As(err, &ae) && (ae.StatusCode == 401 || ae.StatusCode == 403) {
			return nil, ErrInvalidKey
		}
		if ok { // unreachable: keep using what we know
			return e.id, nil
		}
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	id := &Identity{UserID: who.ID, Username: who.Username, KeyID: who.KeyID, Key: key,
		CanIngest: who.Scope == "ingest" || who.Scope == "full" || who.Scope == "admin"}
	r.mu.Lock()
	r.ids[key] = identEntry{id, time.Now()}
	_, following := r.feeds[key]
	r.feeds[key] = time.Now()
	r.mu.Unlock()
	if !following {
		go r.follow(key)
	}
	return id, nil
}

// Ruleset returns the dataset's LLM guardrails, from the cache when it
// is fresh.
func (r *Remote) Ruleset(ctx context.Context, id *Identity, dataset string) (*Ruleset, error) {
	k := id.Username + "\x00" + dataset
	r.mu.Lock()
	e := r.rules[k]
	r.feeds[id.Key] = time.Now()
	r.mu.Unlock()
	if e != nil && time.Since(e.at) < 5*time.Minute {
		return e.rs, nil
	}
	f := client.GuardrailFilter{Kind: "llm"}
	if e != nil {
		f.IfNoneMatch = e.etag
	}
	list, err := r.client(id.Key).Guardrails(ctx, id.Username, dataset, f)
	if err != nil {
		if client.IsNotFound(err) {
			return &Ruleset{Version: "none"}, nil
		}
		if e != nil {
			return e.rs, nil
		}
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if list.NotModified && e != nil {
		r.mu.Lock()
		e.at = time.Now()
		r.mu.Unlock()
		return e.rs, nil
	}
	rs := &Ruleset{Version: versionOf(list.ETag)}
	for _, g := range list.Policies {
		if !g.Enabled {
			continue
		}
		gr := &Guardrail{ID: g.ID, Name: g.Name, Content: g.Content, Action: g.Action, Version: g.Version, StreamFinal: g.ExtraMetadata["stream_check"] == "final"}
		gr.Policy, gr.Err = r.comp.Load(g.Content)
		rs.Guardrails = append(rs.Guardrails, gr)
	}
	r.mu.Lock()
	r.rules[k] = &ruleEntry{rs: rs, etag: list.ETag, at: time.Now()}
	r.mu.Unlock()
	return rs, nil
}

// versionOf reads the ruleset version out of an ETag "rs-<n>".
func versionOf(etag string) string {
	s, _ := strconv.Unquote(etag)
	if s == "" {
		s = etag
	}
	if len(s) > 3 && s[:3] == "rs-" {
		return s[3:]
	}
	return "none"
}

// follow long-polls the change feed with key while the key was used in
// the last 10 minutes, dropping the cached rulesets that changed.
func (r *Remote) follow(key string) {
	c := client.New(r.url, key, client.WithRetries(0))
	var seq int64
	backoff := 500 * time.Millisecond
	for r.ctx.Err() == nil {
		r.mu.Lock()
		last := r.feeds[key]
		r.mu.Unlock()
		if time.Since(last) > 10*time.Minute {
			r.mu.Lock()
			delete(r.feeds, key)
			r.mu.Unlock()
			return
		}
		ctx, cancel := context.WithTimeout(r.ctx, 40*time.Second)
		ch, err := c.GuardrailChangesAfter(ctx, seq, 25*time.Second)
		cancel()
		if err != nil {
			select {
			case <-r.ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 30*time.Second)
			continue
		}
		backoff = 500 * time.Millisecond
		r.mu.Lock()
		if ch.Reset || seq == 0 {
			if seq != 0 {
				clear(r.rules)
			}
		}
		for _, x := range ch.Changes {
			delete(r.rules, x.Owner+"\x00"+x.Dataset)
		}
		r.mu.Unlock()
		seq = ch.Seq
	}
}

// ClientRecorder writes records through the HTTP API with the caller's
// key, from one writer goroutine, retrying failed writes with backoff
// (0.5 s to 30 s, 10 attempts) and spooling to disk what cannot be
// written; the spool is replayed, in order, at the next start.
type ClientRecorder struct {
	url  string
	dir  string
	log  *slog.Logger
	q    chan *Record
	done chan struct{}
	ids  map[string]string // local trace id → server trace id
	// idFile persists ids (<dir>/traces.jsonl), so that calls stitched
	// to a trace after a restart still find it on the server.
	idFile  *os.File
	mu      sync.Mutex
	idle    *sync.Cond
	n       int
	spool   *os.File
	spooled int64 // bytes in the spool
	// Attempts and MaxBackoff bound the retries (defaults 10 and 30 s).
	attempts   int
	maxBackoff time.Duration
}

// maxSpool bounds the spool file (spec: 1 GiB).
const maxSpool = 1 << 30

// spoolRecord is one spooled record.
type spoolRecord struct {
	Rec *Record `json:"record"`
}

// NewClientRecorder starts a recorder writing to the server at url, with
// its spool under dir (none when dir is ""). It first replays the spool.
func NewClientRecorder(url, dir string, queue int, log *slog.Logger) (*ClientRecorder, error) {
	if queue <= 0 {
		queue = 10000
	}
	if log == nil {
		log = slog.Default()
	}
	r := &ClientRecorder{url: url, dir: dir, log: log, q: make(chan *Record, queue), done: make(chan struct{}), ids: map[string]string{},
		attempts: 10, maxBackoff: 30 * time.Second}
	r.idle = sync.NewCond(&r.mu)
	var replay []*Record
	if dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("spool: %w", err)
		}
		var err error
		if replay, err = readSpool(filepath.Join(dir, "records.jsonl")); err != nil {
			return nil, err
		}
		if err := os.Remove(filepath.Join(dir, "records.jsonl")); err != nil && !os.IsNotExist(err) {
			return nil, fmt.Errorf("spool: %w", err)
		}
		if err := r.loadIDs(filepath.Join(dir, "traces.jsonl")); err != nil {
			return nil, err
		}
	}
	go r.run(replay)
	return r, nil
}

// SetRetry changes the retry budget (tests).
func (r *ClientRecorder) SetRetry(attempts int, maxBackoff time.Duration) {
	r.attempts, r.maxBackoff = attempts, maxBackoff
}

func readSpool(path string) ([]*Record, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	defer f.Close()
	var out []*Record
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var sr spoolRecord
		if json.Unmarshal(sc.Bytes(), &sr) == nil && sr.Rec != nil {
			out = append(out, sr.Rec)
		}
	}
	return out, sc.Err()
}

// Record queues rec; false when the queue is full.
func (r *ClientRecorder) Record(rec *Record) bool {
	r.mu.Lock()
	r.n++
	r.mu.Unlock()
	select {
	case r.q <- rec:
		return true
	default:
		r.finished()
		return false
	}
}

func (r *ClientRecorder) finished() {
	r.mu.Lock()
	r.n--
	if r.n == 0 {
		r.idle.Broadcast()
	}
	r.mu.Unlock()
}

// Flush waits until every queued record is written or spooled.
func (r *ClientRecorder) Flush() {
	r.mu.Lock()
	for r.n > 0 {
		r.idle.Wait()
	}
	r.mu.Unlock()
}

// Close writes (or spools) what is queued and stops.
func (r *ClientRecorder) Close() {
	close(r.q)
	<-r.done
	if r.spool != nil {
		r.spool.Close()
	}
	if r.idFile != nil {
		r.idFile.Close()
	}
}

func (r *ClientRecorder) run(replay []*Record) {
	defer close(r.done)
	for _, rec := range replay {
		r.deliver(rec)
	}
	for rec := range r.q {
		if rec.Finish != nil {
			rec.Finish(rec)
			rec.Finish = nil
		}
		r.deliver(rec)
		r.finished()
	}
}

// deliver writes rec with retries; once the spool is in use every later
// record goes to it too, so that order is kept.
func (r *ClientRecorder) deliver(rec *Record) {
	if r.spool == nil {
		delay := 500 * time.Millisecond
		for i := 0; i < r.attempts; i++ {
			err := r.write(rec)
			if err == nil {
				return
			}
			var ae *client.APIError
			if errors.As(err, &ae) && ae.StatusCode >= 400 && ae.StatusCode < 500 && ae.StatusCode != 429 {
				r.log.Error("gateway: record rejected", "call_id", rec.CallID, "err", err)
				return
			}
			if i+1 < r.attempts {
				time.Sleep(delay)
				delay = min(2*delay, r.maxBackoff)
			}
		}
	}
	if r.dir == "" {
		r.log.Error("gateway: record lost (store unreachable, no spool)", "call_id", rec.CallID)
		return
	}
	if r.spool == nil {
		f, err := os.OpenFile(filepath.Join(r.dir, "records.jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			r.log.Error("gateway: spool", "err", err)
			return
		}
		r.spool = f
	}
	b, err := json.Marshal(spoolRecord{Rec: rec})
	if err != nil {
		r.log.Error("gateway: record lost (not encodable)", "call_id", rec.CallID, "err", err)
		return
	}
	if r.spooled+int64(len(b)) > maxSpool {
		r.log.Error("gateway: record lost (spool full, 1 GiB)", "call_id", rec.CallID)
		return
	}
	r.spooled += int64(len(b)) + 1
	if _, err := r.spool.Write(append(b, '\n')); err != nil {
		r.log.Error("gateway: spool write", "call_id", rec.CallID, "err", err)
	}
	r.spool.Sync()
}

func (r *ClientRecorder) write(rec *Record) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := client.New(r.url, rec.Identity.Key, client.WithRetries(0))
	if rec.FinishRun {
		id := r.ids[rec.TraceID]
		if id == "" || rec.Identity.Key == "" {
			return nil // never created, or restored without the caller's key
		}
		err := c.Raw(ctx, "POST", "/api/v1/runs/"+id+"/finish", map[string]any{"status": "completed"}, nil)
		var ae *client.APIError
		if errors.As(err, &ae) && (ae.StatusCode == http.StatusConflict || ae.StatusCode == http.StatusNotFound) {
			return nil // already finished, or deleted
		}
		return err
	}
	msgs := make([]any, len(rec.Events))
	for i, e := range rec.Events {
		msgs[i] = e
	}
	anns := make([]client.AnnotationCreate, 0, len(rec.Annotations))
	for _, a := range rec.Annotations {
		addr := "<root>"
		if a.Index >= 0 {
			addr = "messages." + strconv.Itoa(a.Index) + a.Address
		}
		extra := map[string]any{"vigil_gateway": true}
		for k, v := range a.Extra {
			extra[k] = v
		}
		anns = append(anns, client.AnnotationCreate{Content: a.Content, Address: addr, ExtraMetadata: extra})
	}
	if rec.New {
		md := rec.Metadata
		if rec.SessionKey != "" {
			md = copyEvent(md)
			md["session_key"] = rec.SessionKey
		}
		req := client.PushRequest{Messages: [][]any{msgs}, Metadata: []map[string]any{md}, Dataset: rec.Dataset}
		if len(anns) > 0 {
			req.Annotations = [][]client.AnnotationCreate{anns}
		}
		res, err := c.Push(client.WithIdempotencyKey(ctx, rec.CallID), req)
		if err != nil {
			return err
		}
		if len(res.ID) == 1 {
			r.ids[rec.TraceID] = res.ID[0]
			r.saveID(rec.TraceID, res.ID[0])
		}
		return nil
	}
	id := r.ids[rec.TraceID]
	if id == "" {
		return fmt.Errorf("trace %s was never created on the server", rec.TraceID)
	}
	if len(msgs) > 0 {
		if _, err := c.Append(client.WithIdempotencyKey(ctx, rec.CallID), id, msgs, anns); err != nil {
			return err
		}
	}
	if err := c.Raw(ctx, "PATCH", "/api/v1/trace/"+id, map[string]any{"metadata_merge": rec.Metadata}, nil); err != nil {
		r.log.Warn("gateway: trace metadata not updated", "trace_id", id, "err", err)
	}
	return nil
}

// traceID is one line of <dir>/traces.jsonl.
type traceID struct {
	Local  string `json:"local"`
	Server string `json:"server"`
}

// loadIDs reads the trace id map and opens it for appending; a line that
// does not decode (a torn last write) is skipped.
func (r *ClientRecorder) loadIDs(path string) error {
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("trace ids: %w", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		var t traceID
		if json.Unmarshal([]byte(line), &t) == nil && t.Local != "" {
			r.ids[t.Local] = t.Server
		}
	}
	if r.idFile, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err != nil {
		return fmt.Errorf("trace ids: %w", err)
	}
	return nil
}

// saveID appends one trace id pair.
func (r *ClientRecorder) saveID(local, server string) {
	if r.idFile == nil {
		return
	}
	b, _ := json.Marshal(traceID{local, server}) // two strings: always encodable
	if _, err := r.idFile.Write(append(b, '\n')); err != nil {
		r.log.Error("gateway: trace id not saved", "trace_id", local, "err", err)
	}
}
