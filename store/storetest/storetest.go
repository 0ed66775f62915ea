// Package storetest is the one behavioural suite every store.Store
// implementation must pass (STYLE.md habit 6), in the shape of
// difftest.DiffTest: Run calls open for a fresh, empty store in each subtest
// and checks one behaviour per subtest (CRUD, conflicts, not found,
// ordering, pagination, concurrency of pushes and appends, receipt-chain
// atomicity, streaming export, cascading deletes, notifications). Bench
// runs the shared benchmarks.
//
// Non-goals: backend-specific behaviour (file handling, connection strings,
// LISTEN across processes) is tested beside each backend; receipts here are
// made by a small test sealer that chains SHA-256 hashes, not by package
// ledger, so the suite checks what the store guarantees (order, atomicity,
// exact bytes), not receipt validity.
package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/vigilhq/vigil/store"
)

// Run runs the whole suite. open must return a fresh, empty, migrated store
// and arrange for it to be closed (t.Cleanup).
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // each subtest has its own store
			c.fn(t, open(t))
		})
	}
}

type testCase struct {
	name string
	fn   func(t *testing.T, s store.Store)
}

// cases is filled by the files of this package, one concern each.
var cases []testCase

func register(name string, fn func(t *testing.T, s store.Store)) {
	cases = append(cases, testCase{name, fn})
}

func init() {
	register("Open", testOpen)
	register("Notify", testNotify)
}

func ctxT(t testing.TB) context.Context { return t.Context() }

// must fails the test on err.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wantErr fails unless errors.Is(err, target).
func wantErr(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("err = %v, want %v", err, target)
	}
}

// event builds a normalised event with a message id.
func event(id, role, content string) store.Message {
	data, _ := json.Marshal(map[string]string{"role": role, "content": content, "message_id": id})
	return store.Message{ID: id, NodeIDs: []string{"N" + id}, Data: data}
}

// events builds n events with ids prefix-0 … prefix-(n-1).
func events(prefix string, n int) []store.Message {
	out := make([]store.Message, n)
	for i := range out {
		out[i] = event(fmt.Sprintf("%s-%d", prefix, i), "user", fmt.Sprintf("message %d of %s", i, prefix))
	}
	return out
}

// receiptText is what the test sealer stores.
type receiptText struct {
	ID           string `json:"id"`
	SessionID    string `json:"sessionId"`
	Index        int    `json:"index"`
	MessageID    string `json:"messageId"`
	PreviousHash string `json:"previousHash"`
	Hash         string `json:"hash"`
	Timestamp    int64  `json:"timestamp"`
}

// chainSeal is a SealFunc that links one receipt per event to the tail:
// hash = sha256(previousHash | session | index | event bytes).
func chainSeal(_ context.Context, req store.SealRequest) ([]store.Receipt, error) {
	prev := req.Session.Tail.LastHash
	ts := max(req.Session.Tail.LastTimestamp, time.Now().UnixMilli())
	out := make([]store.Receipt, len(req.Events))
	for i, ev := range req.Events {
		idx := req.FirstIndex + i
		h := sha256.New()
		fmt.Fprintf(h, "%s|%s|%d|", prev, req.Session.ID, idx)
		h.Write(ev.Data)
		hash := hex.EncodeToString(h.Sum(nil))
		rt := receiptText{ID: fmt.Sprintf("R%s-%d", req.Session.ID, idx), SessionID: req.Session.ID, Index: idx,
			MessageID: ev.ID, PreviousHash: prev, Hash: hash, Timestamp: ts}
		text, _ := json.Marshal(rt)
		out[i] = store.Receipt{ID: rt.ID, Hash: hash, Timestamp: ts, Text: string(text)}
		prev = hash
	}
	return out, nil
}

// closeSeal is a CloseFunc that signs nothing.
func closeSeal(_ context.Context, s *store.Session) (store.CloseStatement, error) {
	return store.CloseStatement{ClosedAt: time.Now(), Hash: s.Tail.LastHash, Signature: "sig:" + s.Tail.LastHash}, nil
}

// checkChain verifies the receipts of a session form one linear chain.
func checkChain(t testing.TB, s store.Store, sessionID string, wantN int) []store.Receipt {
	t.Helper()
	recs, err := s.ListReceipts(ctxT(t), sessionID, 0, 0)
	must(t, err)
	if len(recs) != wantN {
		t.Fatalf("session %s: %d receipts, want %d", sessionID, len(recs), wantN)
	}
	prev := "0"
	seen := map[string]bool{}
	for i, r := range recs {
		var rt receiptText
		must(t, json.Unmarshal([]byte(r.Text), &rt))
		if r.Seq != int64(i) || rt.PreviousHash != prev || rt.Hash != r.Hash || seen[r.ID] {
			t.Fatalf("session %s receipt %d: seq %d, previousHash %.8s (want %.8s), hash %.8s/%.8s, dup %v",
				sessionID, i, r.Seq, rt.PreviousHash, prev, rt.Hash, r.Hash, seen[r.ID])
		}
		if rt.Index != i {
			t.Fatalf("session %s receipt %d covers event %d", sessionID, i, rt.Index)
		}
		seen[r.ID] = true
		prev = r.Hash
	}
	sess, err := s.GetSession(ctxT(t), sessionID)
	must(t, err)
	if sess.ReceiptCount != int64(wantN) || sess.Tail.Count != int64(wantN) || sess.Tail.LastHash != prev {
		t.Fatalf("session %s: count %d tail %+v, want %d and hash %.8s", sessionID, sess.ReceiptCount, sess.Tail, wantN, prev)
	}
	if wantN > 0 && sess.RootHash != recs[0].Hash {
		t.Fatalf("session %s: root hash %q, want %q", sessionID, sess.RootHash, recs[0].Hash)
	}
	return recs
}

// newUser creates a user.
func newUser(t testing.TB, s store.Store, name string) *store.User {
	t.Helper()
	u := &store.User{Username: name, Role: store.RoleMember}
	must(t, s.CreateUser(ctxT(t), u))
	return u
}

// push pushes n traces of m events into dataset ds of owner.
func push(t testing.TB, s store.Store, owner, ds string, n, m int) *store.PushResult {
	t.Helper()
	req := store.PushRequest{OwnerID: owner, DatasetName: ds, CreateIfMissing: true, Seal: chainSeal}
	for i := range n {
		req.Traces = append(req.Traces, store.NewTrace{Name: fmt.Sprintf("t%d", i), Messages: events(fmt.Sprintf("m%d", i), m)})
	}
	res, err := s.PushTraces(ctxT(t), req)
	must(t, err)
	return res
}

func testOpen(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	if k := s.Kind(); k != "sqlite" && k != "postgres" {
		t.Errorf("Kind() = %q", k)
	}
	must(t, s.Ping(ctx))
	v, err := s.SchemaVersion(ctx)
	must(t, err)
	if v < 1 {
		t.Errorf("SchemaVersion = %d after migrating an empty database, want >= 1", v)
	}
	n, err := s.CountUsers(ctx)
	must(t, err)
	ds, err := s.ListDatasets(ctx, store.DatasetFilter{})
	must(t, err)
	if n != 0 || len(ds) != 0 {
		t.Errorf("fresh store has %d users and %d datasets", n, len(ds))
	}
}

func testNotify(t *testing.T, s store.Store) {
	ctx, cancel := context.WithCancel(ctxT(t))
	ch, err := s.Subscribe(ctx, "rules_changed")
	must(t, err)
	other, err := s.Subscribe(ctx, "other")
	must(t, err)
	must(t, s.Notify(ctxT(t), "rules_changed", "dataset-1"))
	select {
	case got := <-ch:
		if got != "dataset-1" {
			t.Errorf("payload %q, want dataset-1", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notification within 10s")
	}
	select {
	case got := <-other:
		t.Errorf("channel other got %q", got)
	default:
	}
	for _, bad := range []string{"", "Upper", "1abc", "a-b", string(make([]byte, 64))} {
		if err := s.Notify(ctxT(t), bad, "x"); err == nil {
			t.Errorf("Notify(%q) succeeded", bad)
		}
	}
	cancel()
	select {
	case _, ok := <-ch:
		for ok {
			_, ok = <-ch
		}
	case <-time.After(10 * time.Second):
		t.Fatal("subscription not closed within 10s of cancel")
	}
}
