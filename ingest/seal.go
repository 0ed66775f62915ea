package ingest

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/vigilhq/vigil/ledger"
	"github.com/vigilhq/vigil/store"
)

// Config tunes an Ingester.
type Config struct {
	// Now is the clock of close statements (nil: time.Now).
	Now func() time.Time
}

// Ingester writes prepared traces to a store and seals their events with
// the server's ledger key. It is safe for concurrent use.
type Ingester struct {
	st  store.Store
	key ed25519.PrivateKey
	pub ed25519.PublicKey
	now func() time.Time
	// group coalesces concurrent AppendMany calls (groupcommit.go) when
	// grouped: on SQLite, whose one writer runs one transaction at a
	// time anyway. PostgreSQL runs writers side by side, so there each
	// call keeps its own transaction.
	group   groupCommit
	grouped bool
}

// New returns an Ingester writing to st and signing receipts and close
// statements with key.
func New(st store.Store, key ed25519.PrivateKey, cfg Config) *Ingester {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Ingester{st: st, key: key, pub: key.Public().(ed25519.PublicKey), now: now, grouped: st.Kind() == "sqlite"}
}

// PutBlobs stores the images of an ingest for ownerID before the traces
// that link them: a blob is content-addressed and written once, so a
// failed trace write leaves at most an unreferenced blob, never a link
// without its image.
func (in *Ingester) PutBlobs(ctx context.Context, ownerID string, blobs []*store.Blob) error {
	for _, b := range blobs {
		b.OwnerID = ownerID
		if err := in.st.PutBlob(ctx, b); err != nil {
			return fmt.Errorf("store image %s: %w", b.SHA256, err)
		}
	}
	return nil
}

// RunAgent returns a run's agent id: trace metadata agent_id, else agent
// (strings), else "dataset:<name>", else "vigil".
func RunAgent(md map[string]any, datasetName string) string {
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

// metadata parses trace metadata JSON; nil when absent or not an object.
func metadata(raw []byte) map[string]any {
	if len(raw) == 0 {
		return nil
	}
	v, err := ledger.Parse(raw)
	if err != nil {
		return nil
	}
	md, _ := v.(map[string]any)
	return md
}

// Seal returns the store callback that makes one server-signed receipt
// per event: agent and action from the primary node, input {event, index,
// nodeIds, runId}, signed with the server key. datasetName feeds the
// run's default agent id. pre holds receipts computed ahead of the
// transaction for new traces (Presign; nil: none); they are used only
// when the session is still empty, so the chain is the same as if they
// had been made inside the transaction.
func (in *Ingester) Seal(datasetName string, pre map[string][]store.Receipt) store.SealFunc {
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
		if req.Trace != nil {
			md = metadata(req.Trace.Metadata)
		}
		runID := req.Session.RunID
		if runID == "" && req.Trace != nil {
			runID = req.Trace.ID
		}
		tail := ledger.Tail{Hash: req.Session.Tail.LastHash, Timestamp: float64(req.Session.Tail.LastTimestamp)}
		return in.MakeReceipts(req.Session.ID, runID, RunAgent(md, datasetName), tail, req.FirstIndex, req.Events)
	}
}

// MakeReceipts chains one receipt per event after tail, bound to the
// events' stored node ids (ledger.NodeBuilder.ReceiptAction).
func (in *Ingester) MakeReceipts(sessionID, runID, agent string, tail ledger.Tail, firstIndex int, events []store.Message) ([]store.Receipt, error) {
	b := ledger.NewNodeBuilder(runID, agent, nil)
	b.SessionID = sessionID
	out := make([]store.Receipt, len(events))
	for i, m := range events {
		a, err := b.ReceiptAction(firstIndex+i, m.Data, m.NodeIDs, tail)
		if err != nil {
			return nil, fmt.Errorf("seal: %w", err)
		}
		r, err := ledger.Append(tail, a, in.key)
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

// presignBytes bounds the events Presign signs ahead: a receipt is several
// times the size of a small event, so a large push signs the rest inside
// the transaction, where the store writes receipts as it goes instead of
// holding them all.
const presignBytes = 1 << 20

// Presign computes the receipts of new traces (fresh sessions whose id is
// the trace id) on all cores before the write transaction, so signing does
// not hold the single writer; it stops after presignBytes of events (the
// rest are sealed in the transaction). Traces whose id the store may
// replace still work: Seal then recomputes.
func (in *Ingester) Presign(traces []store.NewTrace, datasetName string) (map[string][]store.Receipt, error) {
	out := make(map[string][]store.Receipt, len(traces))
	var mu sync.Mutex
	var firstErr error
	jobs := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Go(func() {
			for i := range jobs {
				nt := &traces[i]
				rs, err := in.MakeReceipts(nt.ID, nt.ID, RunAgent(metadata(nt.Metadata), datasetName), ledger.Tail{}, 0, nt.Messages)
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

// Close returns the store callback that closes a session with a
// server-signed close statement.
func (in *Ingester) Close() store.CloseFunc {
	return func(ctx context.Context, sess *store.Session) (store.CloseStatement, error) {
		now := in.now()
		h := sess.Tail.LastHash
		if h == "" {
			h = "0"
		}
		stmt, err := ledger.CloseStatement(sess.LedgerID(), h, now.UnixMilli(), int(sess.Tail.Count))
		if err != nil {
			return store.CloseStatement{}, fmt.Errorf("close session %s: %w", sess.ID, err)
		}
		return store.CloseStatement{ClosedAt: now, Hash: h, Signature: ledger.SignHash(in.key, string(stmt))}, nil
	}
}

// NewSession returns the ledger session of a new server-signed run: id
// and run id default to the trace id in the store; the signer is the
// server key.
func (in *Ingester) NewSession(ownerID string, nt *store.NewTrace, datasetName string) *store.Session {
	return &store.Session{
		OwnerID: ownerID, Name: nt.Name, Agent: RunAgent(metadata(nt.Metadata), datasetName),
		Signer: ledger.SignerServer, SignerPublicKey: ledger.PublicKeyHex(in.pub),
	}
}
