package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/vigilhq/vigil/store"
)

func init() {
	register("Sessions", testSessions)
	register("ReceiptsConcurrent", testReceiptsConcurrent)
	register("AgentKeys", testAgentKeys)
}

// agentReceipts returns a SealFunc appending n receipts with given ids.
func agentReceipts(ids ...string) store.SealFunc {
	return func(ctx context.Context, req store.SealRequest) ([]store.Receipt, error) {
		prev := req.Session.Tail.LastHash
		out := make([]store.Receipt, len(ids))
		for i, id := range ids {
			idx := int(req.Session.Tail.Count) + i
			hash := fmt.Sprintf("%064x", idx+1)
			// Exact text, with odd spacing and an escaped NUL that jsonb would refuse.
			text := fmt.Sprintf(`{"id":%q, "previousHash":%q,"hash":%q,"index":%d,"input":"\u0000"}`, id, prev, hash, idx)
			out[i] = store.Receipt{ID: id, Hash: hash, Timestamp: int64(1700000000000 + idx), Text: text}
			prev = hash
		}
		return out, nil
	}
}

func testSessions(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	sess := &store.Session{ID: "sess-1", OwnerID: u.ID, Name: "demo", Agent: "agent/refund-bot", Signer: "agent",
		SignerPublicKey: "ab", Extra: json.RawMessage(`{"created_by":"sdk"}`)}
	must(t, s.CreateSession(ctx, sess))
	wantErr(t, s.CreateSession(ctx, &store.Session{ID: "sess-1"}), store.ErrConflict)
	if err := s.CreateSession(ctx, &store.Session{}); err == nil {
		t.Error("session without id accepted")
	}
	got, err := s.GetSession(ctx, "sess-1")
	must(t, err)
	if got.Status() != "open" || got.Agent != "agent/refund-bot" || got.Signer != "agent" || got.SignerPublicKey != "ab" ||
		got.Tail.LastHash != "0" || got.ReceiptCount != 0 || got.RootHash != "" || got.RunID != "" {
		t.Errorf("GetSession = %+v", got)
	}
	assertJSON(t, got.Extra, `{"created_by":"sdk"}`)
	_, err = s.GetSession(ctx, "nope")
	wantErr(t, err, store.ErrNotFound)

	recs, err := s.AppendReceipts(ctx, "sess-1", agentReceipts("r0", "r1"))
	must(t, err)
	if len(recs) != 2 || recs[1].Seq != 1 || recs[1].SessionID != "sess-1" {
		t.Errorf("AppendReceipts = %+v", recs)
	}
	_, err = s.AppendReceipts(ctx, "sess-1", agentReceipts("r2", "r3", "r4"))
	must(t, err)
	// A duplicate receipt id conflicts and writes nothing.
	_, err = s.AppendReceipts(ctx, "sess-1", agentReceipts("r5", "r1"))
	wantErr(t, err, store.ErrConflict)
	_, err = s.AppendReceipts(ctx, "nope", agentReceipts("x"))
	wantErr(t, err, store.ErrNotFound)

	all, err := s.ListReceipts(ctx, "sess-1", 0, 0)
	must(t, err)
	if len(all) != 5 {
		t.Fatalf("ListReceipts = %d, want 5", len(all))
	}
	for i, r := range all {
		want := fmt.Sprintf(`{"id":"r%d", "previousHash":`, i)
		if r.Seq != int64(i) || r.ID != fmt.Sprintf("r%d", i) || len(r.Text) < len(want) || r.Text[:len(want)] != want {
			t.Errorf("receipt %d = %+v", i, r)
		}
	}
	if want := `"input":"\u0000"}`; all[0].Text[len(all[0].Text)-len(want):] != want {
		t.Errorf("receipt text not kept exactly: %s", all[0].Text)
	}
	page, err := s.ListReceipts(ctx, "sess-1", 2, 2)
	must(t, err)
	if len(page) != 2 || page[0].ID != "r2" || page[1].ID != "r3" {
		t.Errorf("ListReceipts(2, 2) = %+v", page)
	}
	_, err = s.ListReceipts(ctx, "nope", 0, 0)
	wantErr(t, err, store.ErrNotFound)
	r, err := s.GetReceipt(ctx, "sess-1", "r3")
	must(t, err)
	if r.Seq != 3 || r.Hash != fmt.Sprintf("%064x", 4) || r.Timestamp != 1700000000003 {
		t.Errorf("GetReceipt = %+v", r)
	}
	_, err = s.GetReceipt(ctx, "sess-1", "r9")
	wantErr(t, err, store.ErrNotFound)
	got, _ = s.GetSession(ctx, "sess-1")
	if got.ReceiptCount != 5 || got.RootHash != fmt.Sprintf("%064x", 1) || got.Tail.LastHash != fmt.Sprintf("%064x", 5) || got.Tail.LastTimestamp != 1700000000004 {
		t.Errorf("session after appends = %+v", got)
	}

	// Tampered is sticky; the first reason wins; appends continue.
	t1 := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	ts, err := s.MarkSessionTampered(ctx, "sess-1", t1, json.RawMessage(`{"index":2,"reason":"hash_mismatch"}`))
	must(t, err)
	if ts.Status() != "tampered" {
		t.Errorf("status %s", ts.Status())
	}
	_, err = s.MarkSessionTampered(ctx, "sess-1", t1.Add(time.Hour), json.RawMessage(`{"index":null,"reason":"client_reported"}`))
	must(t, err)
	got, _ = s.GetSession(ctx, "sess-1")
	if got.TamperedAt == nil || !got.TamperedAt.Equal(t1) {
		t.Errorf("TamperedAt = %v", got.TamperedAt)
	}
	assertJSON(t, got.TamperReason, `{"index":2,"reason":"hash_mismatch"}`)
	_, err = s.AppendReceipts(ctx, "sess-1", agentReceipts("r5"))
	must(t, err)
	_, err = s.MarkSessionTampered(ctx, "nope", t1, nil)
	wantErr(t, err, store.ErrNotFound)

	closed, err := s.CloseSession(ctx, "sess-1", closeSeal)
	must(t, err)
	if closed.ClosedAt == nil || closed.CloseHash != fmt.Sprintf("%064x", 6) {
		t.Errorf("CloseSession = %+v", closed)
	}
	_, err = s.CloseSession(ctx, "sess-1", closeSeal)
	wantErr(t, err, store.ErrFinished)
	_, err = s.AppendReceipts(ctx, "sess-1", agentReceipts("r6"))
	wantErr(t, err, store.ErrFinished)
	// Closing an empty session records "0".
	must(t, s.CreateSession(ctx, &store.Session{ID: "empty", OwnerID: u.ID}))
	e, err := s.CloseSession(ctx, "empty", func(_ context.Context, s *store.Session) (store.CloseStatement, error) {
		return store.CloseStatement{Signature: "sig"}, nil
	})
	must(t, err)
	if e.CloseHash != "0" || e.CloseSignature != "sig" {
		t.Errorf("empty close = %+v", e)
	}

	// Sessions of runs are listed by run and owner.
	res := push(t, s, u.ID, "runs", 2, 1)
	list, err := s.ListSessions(ctx, store.SessionFilter{RunID: res.Traces[1].ID})
	must(t, err)
	if len(list) != 1 || list[0].ID != res.Traces[1].ID || list[0].RunID != res.Traces[1].ID || list[0].Signer != "server" {
		t.Errorf("ListSessions(run) = %+v", list)
	}
	list, err = s.ListSessions(ctx, store.SessionFilter{OwnerID: u.ID})
	must(t, err)
	if len(list) != 4 {
		t.Errorf("ListSessions(owner) = %d, want 4", len(list))
	}
	list, err = s.ListSessions(ctx, store.SessionFilter{OwnerID: u.ID, Limit: 1, Offset: 1})
	must(t, err)
	if len(list) != 1 {
		t.Errorf("ListSessions page = %d", len(list))
	}
	// A run can carry a custom session (agent-signed ingest).
	cr, err := s.PushTraces(ctx, store.PushRequest{OwnerID: u.ID, DatasetName: "runs", Traces: []store.NewTrace{{
		Messages: events("c", 1), Session: &store.Session{ID: "agent-sess", Signer: "agent", Agent: "a"}}}, Seal: chainSeal})
	must(t, err)
	if cr.Traces[0].SessionID != "agent-sess" {
		t.Errorf("custom session id %q", cr.Traces[0].SessionID)
	}
	as, err := s.GetSession(ctx, "agent-sess")
	must(t, err)
	if as.RunID != cr.Traces[0].ID || as.Signer != "agent" || as.ReceiptCount != 1 {
		t.Errorf("custom session %+v", as)
	}
}

func testReceiptsConcurrent(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	must(t, s.CreateSession(ctx, &store.Session{ID: "busy", OwnerID: u.ID}))
	const writers, each = 10, 5
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				_, err := s.AppendReceipts(ctx, "busy", func(ctx context.Context, req store.SealRequest) ([]store.Receipt, error) {
					return agentReceipts(fmt.Sprintf("w%d-%d", w, i))(ctx, req)
				})
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	recs, err := s.ListReceipts(ctx, "busy", 0, 0)
	must(t, err)
	if len(recs) != writers*each {
		t.Fatalf("%d receipts, want %d", len(recs), writers*each)
	}
	prev := "0"
	for i, r := range recs {
		var v struct{ PreviousHash, Hash string }
		must(t, json.Unmarshal([]byte(r.Text), &v))
		if v.PreviousHash != prev || r.Seq != int64(i) {
			t.Fatalf("receipt %d links to %.8s, want %.8s: appends interleaved", i, v.PreviousHash, prev)
		}
		prev = v.Hash
	}
}

func testAgentKeys(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	must(t, s.PutAgentKey(ctx, &store.AgentKey{Agent: "a", PublicKey: "k1", CreatedAt: t0}))
	must(t, s.PutAgentKey(ctx, &store.AgentKey{Agent: "a", PublicKey: "k2", CreatedAt: t0.Add(time.Hour)}))
	must(t, s.PutAgentKey(ctx, &store.AgentKey{Agent: "b", PublicKey: "k3"}))
	k, err := s.GetAgentKey(ctx, "a")
	must(t, err)
	if k.PublicKey != "k2" || k.RevokedAt != nil {
		t.Errorf("GetAgentKey(a) = %+v", k)
	}
	all, err := s.ListAgentKeys(ctx)
	must(t, err)
	if len(all) != 3 || all[0].PublicKey != "k1" || all[0].RevokedAt == nil || !all[0].RevokedAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("ListAgentKeys = %+v", all)
	}
	must(t, s.RevokeAgentKey(ctx, "a", t0.Add(2*time.Hour)))
	_, err = s.GetAgentKey(ctx, "a")
	wantErr(t, err, store.ErrNotFound)
	wantErr(t, s.RevokeAgentKey(ctx, "a", t0), store.ErrNotFound)
}
