package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/vigilhq/vigil/internal/lazyregexp"
	"github.com/vigilhq/vigil/ledger"
	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/trace"
)

// This file is the ingest pipeline every write path shares (push, append,
// upload): trace.Decode normalisation plus the server's part of
// explorer-api §2.1 (message ids, timestamps), tool-registry updates, and
// the seal callback that turns stored events into signed receipts in the
// same transaction (spec/ledger.md §7.3, §7.4).

// maxWarnings caps the warnings of one response (explorer-api §2.1).
const maxWarnings = 100

// Warning is a non-fatal ingest note: trace and message indices (-1 when
// not tied to one) and a message.
type Warning struct {
	Trace   int    `json:"trace"`
	Message int    `json:"message"`
	Detail  string `json:"detail"`
}

type warnings []Warning

func (w *warnings) add(traceIdx, msgIdx int, format string, args ...any) {
	if len(*w) < maxWarnings {
		*w = append(*w, Warning{Trace: traceIdx, Message: msgIdx, Detail: fmt.Sprintf(format, args...)})
	}
}

var messageIDRx = lazyregexp.New(`^[A-Za-z0-9_-]{1,64}$`)

// outputTimeLayout is the API's output time form (explorer-api §1.6).
const outputTimeLayout = "2006-01-02T15:04:05.000000Z"

func formatTime(t time.Time) string { return t.UTC().Format(outputTimeLayout) }

// parseInputTime accepts RFC 3339 and ISO 8601 with or without an offset
// (no offset means UTC), with "T" or a space between date and time.
func parseInputTime(s string) (time.Time, bool) {
	for _, layout := range []string{
		time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999Z07:00",
		"2006-01-02 15:04:05.999999999", "2006-01-02T15:04:05.999999999Z0700", "2006-01-02",
	} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// ingestOptions say how strict prepareTrace is.
type ingestOptions struct {
	traceIdx int // position of the trace in the request, for messages
	// firstIndex is the event index of the first event (append: the
	// current message count).
	firstIndex int
	// usedIDs holds message ids already in the trace (append); new ids
	// are added to it.
	usedIDs map[string]bool
	// strictTimestamps makes an unparsable timestamp a 400 (append).
	strictTimestamps bool
	// defaultTime, when non-zero, is set as timestamp on events without
	// one (append).
	defaultTime time.Time
	// traceID is the id of the trace the events go to: image links name
	// it (images.go).
	traceID string
	// path is the JSON path of the event list in the request, for errors
	// ("" = "messages[<traceIdx>]", a push).
	path string
}

// preparedEvents is one normalised trace, ready for the store.
type preparedEvents struct {
	messages []store.Message
	tools    map[string]*store.ToolUse
	events   []*trace.Event
	decoded  *trace.Trace
	// images are the blobs of the trace's inline images, to be stored
	// (Server.putBlobs) before the trace.
	images imageSet
}

// errNotObjects is the Vigil text for a trace that is not a list of objects.
func errNotObjects(i int) *Error { return badRequest("trace %d must be a list of objects", i) }

// prepareTrace decodes the JSON array raw (one trace's events), normalises
// each event and returns the store messages. Problems the spec tolerates
// become warnings.
func prepareTrace(raw []byte, opt ingestOptions, warn *warnings) (*preparedEvents, error) {
	t, err := trace.Decode(raw)
	if err != nil && t == nil {
		if errors.Is(err, trace.ErrSyntax) {
			return nil, apiErr(http.StatusBadRequest, CodeInvalidJSON, "trace %d: %v", opt.traceIdx, err)
		}
		return nil, errNotObjects(opt.traceIdx)
	}
	if t.Form != trace.FormList {
		return nil, errNotObjects(opt.traceIdx)
	}
	if err != nil {
		var el trace.ErrorList
		if errors.As(err, &el) {
			for _, e := range el {
				warn.add(opt.traceIdx, -1, "%s", e.Error())
			}
		}
	}
	for _, w := range t.Warnings {
		warn.add(opt.traceIdx, w.Index, "%s", w.String())
	}
	used := opt.usedIDs
	if used == nil {
		used = make(map[string]bool, len(t.Events))
	}
	p := &preparedEvents{messages: make([]store.Message, len(t.Events)), tools: map[string]*store.ToolUse{}, events: t.Events, decoded: t}
	for j, e := range t.Events {
		obj := e.Object()
		if obj == nil {
			return nil, errNotObjects(opt.traceIdx)
		}
		idx := opt.firstIndex + j
		// Inline images become blobs and links (rule 2, images.go).
		if err := p.images.rewriteImages(obj, opt.traceID, eventPos{opt.path, opt.traceIdx, j}); err != nil {
			return nil, err
		}
		// message_id (explorer-api §2.1 rule 3).
		id := ""
		if v, ok := obj.Get("message_id"); ok {
			if s, isStr := v.(string); isStr && messageIDRx.MatchString(s) && !used[s] {
				id = s
			} else {
				warn.add(opt.traceIdx, idx, "message_id %s replaced by a server id (want a unique string matching %s)", trace.Marshal(v), messageIDRx)
			}
		}
		if id == "" {
			id = store.NewULID()
			obj.Set("message_id", id)
		}
		used[id] = true
		// timestamp (rule 4).
		if v, ok := obj.Get("timestamp"); ok {
			if s, isStr := v.(string); isStr {
				if ts, ok := parseInputTime(s); ok {
					obj.Set("timestamp", formatTime(ts))
				} else if opt.strictTimestamps {
					return nil, badRequest("Invalid timestamp format in message: %s. Expected format: ISO 8601, e.g., 2025-01-23T10:30:00+00:00", s)
				} else {
					warn.add(opt.traceIdx, idx, "unparsable timestamp %q kept verbatim", s)
				}
			}
		} else if !opt.defaultTime.IsZero() {
			obj.Set("timestamp", formatTime(opt.defaultTime))
		}
		// Tool registry (explorer-api §4.3).
		calls := e.ToolCalls
		if e.Call != nil {
			calls = []*trace.ToolCall{e.Call}
		}
		for _, c := range calls {
			if c.Function.Name == "" {
				continue
			}
			tu := p.tools[c.Function.Name]
			if tu == nil {
				tu = &store.ToolUse{Name: c.Function.Name}
				p.tools[c.Function.Name] = tu
			}
			tu.Count++
			if args := c.Function.Args(); args != nil {
				for _, k := range args.Keys() {
					if !containsString(tu.ArgumentKeys, k) {
						tu.ArgumentKeys = append(tu.ArgumentKeys, k)
					}
				}
			}
		}
		// Node ids (spec/ledger.md §7.2, §7.3): the primary node, then one
		// child per tool call of an assistant message.
		nodes := []string{ledger.NewID()}
		if e.Kind == trace.KindMessage && e.Role == "assistant" {
			for range e.ToolCalls {
				nodes = append(nodes, ledger.NewID())
			}
		}
		p.messages[j] = store.Message{ID: id, NodeIDs: nodes, Data: trace.Marshal(obj)}
	}
	return p, nil
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// mergeTools merges tool uses into acc.
func mergeTools(acc map[string]*store.ToolUse, add map[string]*store.ToolUse) {
	for name, tu := range add {
		a := acc[name]
		if a == nil {
			cp := *tu
			cp.ArgumentKeys = append([]string(nil), tu.ArgumentKeys...)
			acc[name] = &cp
			continue
		}
		a.Count += tu.Count
		for _, k := range tu.ArgumentKeys {
			if !containsString(a.ArgumentKeys, k) {
				a.ArgumentKeys = append(a.ArgumentKeys, k)
			}
		}
	}
}

func toolList(m map[string]*store.ToolUse) []store.ToolUse {
	out := make([]store.ToolUse, 0, len(m))
	for _, tu := range m {
		out = append(out, *tu)
	}
	return out
}

// runAgent returns a run's agent id (spec/ledger.md §7.1): trace metadata
// agent_id, else agent (strings), else "dataset:<name>", else "vigil".
func runAgent(md map[string]any, datasetName string) string {
	for _, k := range []string{"agent_id", "agent"} {
		if s, ok := md[k].(string); ok && s != "" {
			return s
		}
	}
	if datasetName != "" {
		return "dataset:" + datasetName
	}
	return "vigil"
}

// sealFunc returns the store callback that makes one server-signed
// receipt per event (spec/ledger.md §7.4): agent and action from the
// primary node, input {event, index, nodeIds, runId}, signed with the
// server key. datasetName feeds the run's default agent id. pre holds
// receipts computed ahead of the transaction for new traces (nil: none);
// they are used only when the session is still empty, so the chain is
// the same as if they had been made inside the transaction.
func (s *Server) sealFunc(datasetName string, pre map[string][]store.Receipt) store.SealFunc {
	return func(ctx context.Context, req store.SealRequest) ([]store.Receipt, error) {
		if req.Trace != nil && req.Session.Tail.Count == 0 && req.FirstIndex == 0 {
			if rs, ok := pre[req.Trace.ID]; ok && len(rs) == len(req.Events) && (len(rs) == 0 || rs[0].SessionID == req.Session.ID) {
				// Used once: the store holds them from here on (a
				// retried transaction recomputes).
				delete(pre, req.Trace.ID)
				return rs, nil
			}
		}
		var md map[string]any
		if req.Trace != nil && len(req.Trace.Metadata) > 0 {
			if v, err := ledger.Parse(req.Trace.Metadata); err == nil {
				md, _ = v.(map[string]any)
			}
		}
		runID := req.Session.RunID
		if runID == "" && req.Trace != nil {
			runID = req.Trace.ID
		}
		tail := ledger.Tail{Hash: req.Session.Tail.LastHash, Timestamp: float64(req.Session.Tail.LastTimestamp)}
		return s.makeReceipts(req.Session.ID, runID, runAgent(md, datasetName), tail, req.FirstIndex, req.Events)
	}
}

// makeReceipts chains one receipt per event after tail, bound to the
// events' stored node ids (ledger.NodeBuilder.ReceiptAction, spec/ledger.md
// §7.4).
func (s *Server) makeReceipts(sessionID, runID, agent string, tail ledger.Tail, firstIndex int, events []store.Message) ([]store.Receipt, error) {
	b := ledger.NewNodeBuilder(runID, agent, nil)
	b.SessionID = sessionID
	out := make([]store.Receipt, len(events))
	for i, m := range events {
		a, err := b.ReceiptAction(firstIndex+i, m.Data, m.NodeIDs, tail)
		if err != nil {
			return nil, fmt.Errorf("seal: %w", err)
		}
		r, err := ledger.Append(tail, a, s.key)
		if err != nil {
			return nil, fmt.Errorf("seal event %d of run %s: %w", firstIndex+i, runID, err)
		}
		tail = r.Tail()
		// r.Raw is fresh and r is dropped here, so the text can share its
		// bytes instead of copying them (a tenth of ingest's allocation).
		text := unsafe.String(unsafe.SliceData(r.Raw), len(r.Raw))
		out[i] = store.Receipt{SessionID: sessionID, ID: r.ID, Hash: r.Hash, Timestamp: r.Millis(), Text: text}
	}
	return out, nil
}

// presignBytes bounds the events presign signs ahead: a receipt is several
// times the size of a small event, so a large push signs the rest inside
// the transaction, where the store writes receipts as it goes instead of
// holding them all.
const presignBytes = 1 << 20

// presign computes the receipts of new traces (fresh sessions whose id is
// the trace id) on all cores before the write transaction, so signing does
// not hold the single writer; it stops after presignBytes of events (the
// rest are sealed in the transaction). Traces whose id the store may
// replace still work: sealFunc then recomputes.
func (s *Server) presign(traces []store.NewTrace, datasetName string) (map[string][]store.Receipt, error) {
	out := make(map[string][]store.Receipt, len(traces))
	var mu sync.Mutex
	var firstErr error
	jobs := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Go(func() {
			for i := range jobs {
				nt := &traces[i]
				var md map[string]any
				if len(nt.Metadata) > 0 {
					if v, err := ledger.Parse(nt.Metadata); err == nil {
						md, _ = v.(map[string]any)
					}
				}
				rs, err := s.makeReceipts(nt.ID, nt.ID, runAgent(md, datasetName), ledger.Tail{}, 0, nt.Messages)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				out[nt.ID] = rs
				mu.Unlock()
			}
		})
	}
	size := 0
	for i := range traces {
		if size >= presignBytes {
			break
		}
		if traces[i].ID != "" && (traces[i].Session == nil || traces[i].Session.ID == "") {
			jobs <- i
			for _, m := range traces[i].Messages {
				size += len(m.Data)
			}
		}
	}
	close(jobs)
	wg.Wait()
	return out, firstErr
}

// closeFunc returns the store callback that closes a session with a
// server-signed close statement (spec/ledger.md §6.3).
func (s *Server) closeFunc() store.CloseFunc {
	return func(ctx context.Context, sess *store.Session) (store.CloseStatement, error) {
		now := s.now()
		h := sess.Tail.LastHash
		if h == "" {
			h = "0"
		}
		stmt, err := ledger.CloseStatement(sess.LedgerID(), h, now.UnixMilli(), int(sess.Tail.Count))
		if err != nil {
			return store.CloseStatement{}, fmt.Errorf("close session %s: %w", sess.ID, err)
		}
		return store.CloseStatement{ClosedAt: now, Hash: h, Signature: ledger.SignHash(s.key, string(stmt))}, nil
	}
}

// validDatasetName reports whether name is a valid dataset name
// (explorer-api §2.5).
func validDatasetName(name string) bool {
	if name == "" || len(name) > 100 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func errDatasetName() *Error {
	return apiErr(http.StatusBadRequest, CodeInvalidDatasetName, "Dataset name can only contain A-Z, a-z, 0-9, - and _")
}

// isBlank reports whether a raw JSON member is absent or null.
func isBlank(b []byte) bool {
	s := strings.TrimSpace(string(b))
	return s == "" || s == "null"
}

// newSession returns the ledger session of a new server-signed run
// (spec/ledger.md §7.1): id and run id default to the trace id in the
// store; the signer is the server key.
func (s *Server) newSession(ownerID string, nt *store.NewTrace, datasetName string) *store.Session {
	var md map[string]any
	if len(nt.Metadata) > 0 {
		if v, err := ledger.Parse(nt.Metadata); err == nil {
			md, _ = v.(map[string]any)
		}
	}
	return &store.Session{
		OwnerID: ownerID, Name: nt.Name, Agent: runAgent(md, datasetName),
		Signer: ledger.SignerServer, SignerPublicKey: ledger.PublicKeyHex(s.pub),
	}
}
