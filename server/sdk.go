package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/vigilhq/vigil/ledger"
	"github.com/vigilhq/vigil/store"
)

// This file serves the @invariance/sdk-compatible endpoints of
// spec/ledger.md §10 (/v1/sessions…, /v1/receipts): agent-signed (or,
// for agents without a registered key, server re-signed) sessions, each
// recorded as a run in the owner's dataset "sessions" whose events are the
// receipts (§7.4).

// sdkDataset is the dataset SDK sessions are recorded in.
const sdkDataset = "sessions"

// sdkExtra is what Session.Extra holds for SDK sessions.
type sdkExtra struct {
	SDK       bool            `json:"sdk"`
	CreatedBy string          `json:"created_by,omitempty"`
	Runtime   json.RawMessage `json:"runtime,omitempty"`
	Tags      json.RawMessage `json:"tags,omitempty"`
}

func isSDKSession(sess *store.Session) bool {
	var x sdkExtra
	return len(sess.Extra) > 0 && json.Unmarshal(sess.Extra, &x) == nil && x.SDK
}

// sdkSessionJSON is the SDK's session object.
func sdkSessionJSON(sess *store.Session) map[string]any {
	var x sdkExtra
	_ = json.Unmarshal(sess.Extra, &x)
	return map[string]any{
		"id": sess.LedgerID(), "name": sess.Name, "created_by": x.CreatedBy, "status": sess.Status(),
		"created_at": sess.CreatedAt.UnixMilli(), "closed_at": optMillis(sess.ClosedAt),
		"root_hash": optString(sess.RootHash), "close_hash": optString(sess.CloseHash), "receipt_count": sess.ReceiptCount,
	}
}

// createSDKSession creates a session and its run. The signer is the agent
// when it has a registered key, else the server (§7.4). id is the client's
// id, unique per owner (SDKID); the row gets a server-made id, so two
// owners may use the same one. ErrConflict when the owner already has it.
func (s *Server) createSDKSession(ctx context.Context, p *principal, id, name, agent string, x sdkExtra) (*store.Session, error) {
	x.SDK = true
	extra, _ := json.Marshal(x)
	sess := &store.Session{ID: store.NewID(), SDKID: id, OwnerID: p.User.ID, Name: name, Agent: agent, Signer: ledger.SignerServer,
		SignerPublicKey: ledger.PublicKeyHex(s.pub), Extra: extra}
	if k, err := s.st.GetAgentKey(ctx, agent); err == nil {
		sess.Signer, sess.SignerPublicKey = ledger.SignerAgent, k.PublicKey
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	md, _ := json.Marshal(map[string]any{"agent_id": agent, "source": "invariance-sdk", "session_id": id})
	_, err := s.st.PushTraces(ctx, store.PushRequest{
		OwnerID: p.User.ID, DatasetName: sdkDataset, CreateIfMissing: true, NewDatasetMetadata: createdOnMetadata(s.now()),
		Traces: []store.NewTrace{{ID: store.NewID(), Name: name, Metadata: md, KeyID: p.Key.ID, Session: sess}},
	})
	if err != nil {
		return nil, err
	}
	return s.st.GetSession(ctx, sess.ID)
}

// sdkSession loads session id in the caller's namespace: the caller's SDK
// session with that id, else a server session (a run's) with that id the
// caller may write; 404 otherwise. Another owner's SDK session is never
// found by its SDK id, so its existence does not leak.
func (s *Server) sdkSession(ctx context.Context, p *principal, id string) (*store.Session, error) {
	sess, err := s.st.GetSDKSession(ctx, p.User.ID, id)
	if !errors.Is(err, store.ErrNotFound) {
		return sess, err
	}
	sess, err = s.st.GetSession(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (sess.SDKID != "" || !s.canWrite(p, sess.OwnerID))) {
		return nil, notFound("Session not found")
	}
	return sess, err
}

// handleSDKSessionCreate serves POST /v1/sessions.
func (s *Server) handleSDKSessionCreate(w http.ResponseWriter, r *http.Request, p *principal) error {
	var in struct {
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		AgentID   string          `json:"agent_id"`
		CreatedBy string          `json:"created_by"`
		Runtime   json.RawMessage `json:"runtime"`
		Tags      json.RawMessage `json:"tags"`
	}
	if err := s.decodeJSON(w, r, &in, false); err != nil {
		return err
	}
	if in.ID == "" {
		return badRequest("id must be a non-empty string")
	}
	if err := checkLength("id", in.ID, maxSDKSessionID); err != nil {
		return err
	}
	if sess, err := s.sdkSession(r.Context(), p, in.ID); err == nil {
		writeJSON(w, http.StatusOK, sdkSessionJSON(sess))
		return nil
	} else if !isNotFound(err) {
		return err
	}
	agent := in.AgentID
	if agent == "" {
		agent = in.CreatedBy
	}
	if agent == "" {
		agent = "vigil"
	}
	sess, err := s.createSDKSession(r.Context(), p, in.ID, in.Name, agent, sdkExtra{CreatedBy: in.CreatedBy, Runtime: in.Runtime, Tags: in.Tags})
	if errors.Is(err, store.ErrConflict) { // created concurrently
		sess, err = s.sdkSession(r.Context(), p, in.ID)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, sdkSessionJSON(sess))
	return nil
}

// isNotFound reports whether err is a 404 API error or store.ErrNotFound.
func isNotFound(err error) bool {
	var e *Error
	return errors.Is(err, store.ErrNotFound) || (errors.As(err, &e) && e.Status == http.StatusNotFound)
}

// handleSDKSessionGet serves GET /v1/sessions/{id}.
func (s *Server) handleSDKSessionGet(w http.ResponseWriter, r *http.Request, p *principal) error {
	sess, err := s.sdkSession(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sdkSessionJSON(sess))
	return nil
}

// handleSDKReceipts serves POST /v1/receipts {receipts: […]}: appends per
// §7.4, storing receipts that fail a check and marking their session
// tampered; a known id with the same hash is ignored, with another hash
// it is 409 receipt_conflict.
func (s *Server) handleSDKReceipts(w http.ResponseWriter, r *http.Request, p *principal) error {
	var in struct {
		Receipts []json.RawMessage `json:"receipts"`
	}
	if err := s.decodeJSON(w, r, &in, false); err != nil {
		return err
	}
	if in.Receipts == nil {
		return badRequest("receipts must be an array")
	}
	// Parse all first: a §5.1 shape error rejects the whole request.
	parsed := make([]*ledger.Receipt, len(in.Receipts))
	var order []string
	groups := map[string][]*ledger.Receipt{}
	for i, raw := range in.Receipts {
		rc, err := ledger.ParseReceipt(bytes.Clone(raw))
		if err != nil {
			var ie *ledger.InputError
			if errors.As(err, &ie) {
				ie.Index = i
			}
			return badRequest("%v", err)
		}
		if rc.SessionID == "" { // as POST /v1/sessions: a session needs an id
			return badRequest("receipt %d: sessionId must be a non-empty string", i)
		}
		if err := checkLength(fmt.Sprintf("receipts[%d].sessionId", i), rc.SessionID, maxSDKSessionID); err != nil {
			return err
		}
		parsed[i] = rc
		if _, ok := groups[rc.SessionID]; !ok {
			order = append(order, rc.SessionID)
		}
		groups[rc.SessionID] = append(groups[rc.SessionID], rc)
	}
	inserted := 0
	for _, sid := range order {
		n, err := s.appendSDKReceipts(r.Context(), p, sid, groups[sid])
		inserted += n
		if err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, map[string]int{"inserted": inserted})
	return nil
}

func (s *Server) appendSDKReceipts(ctx context.Context, p *principal, sid string, recs []*ledger.Receipt) (int, error) {
	sess, err := s.sdkSession(ctx, p, sid)
	if isNotFound(err) {
		sess, err = s.createSDKSession(ctx, p, sid, "", recs[0].Agent, sdkExtra{})
		if errors.Is(err, store.ErrConflict) { // created concurrently
			sess, err = s.sdkSession(ctx, p, sid)
		}
	}
	if err != nil {
		return 0, err
	}
	if sess.ClosedAt != nil {
		return 0, apiErr(http.StatusConflict, CodeSessionClosed, "session %s is closed", sid)
	}
	// Retries: same id and hash are skipped; same id, other hash is 409.
	var fresh []*ledger.Receipt
	seen := map[string]string{}
	for _, rc := range recs {
		if h, dup := seen[rc.ID]; dup {
			if h != rc.Hash {
				return 0, apiErr(http.StatusConflict, CodeReceiptConflict, "receipt %s appears twice with different hashes", rc.ID)
			}
			continue
		}
		seen[rc.ID] = rc.Hash
		old, err := s.st.GetReceipt(ctx, sess.ID, rc.ID)
		if err == nil {
			if old.Hash != rc.Hash {
				return 0, apiErr(http.StatusConflict, CodeReceiptConflict, "receipt %s already stored with another hash", rc.ID)
			}
			continue
		}
		if !errors.Is(err, store.ErrNotFound) {
			return 0, err
		}
		fresh = append(fresh, rc)
	}
	if len(fresh) == 0 {
		return 0, nil
	}
	// §5.2 checks with the agent's registered key; none (server signer):
	// signatures are not checked, the server signs instead (§7.4).
	opts := ledger.VerifyOptions{SessionID: sess.LedgerID()}
	if sess.Signer == ledger.SignerAgent {
		if k, err := ledger.ParsePublicKey(sess.SignerPublicKey); err == nil {
			opts.PublicKey = k
		}
	}
	msgs := make([]store.Message, len(fresh))
	for i, rc := range fresh {
		if sess.Signer != ledger.SignerAgent {
			// No registered agent key: the server signs, and keeps the
			// client's signature unverified (§7.4).
			if err := ledger.Countersign(rc, s.key); err != nil {
				return 0, fmt.Errorf("re-sign receipt %s: %w", rc.ID, err)
			}
		}
		data, err := ledger.Marshal(ledger.ReceiptEvent(rc))
		if err != nil {
			return 0, badRequest("receipt %s: %v", rc.ID, err)
		}
		msgs[i] = store.Message{ID: store.NewULID(), NodeIDs: []string{rc.ID}, Data: data}
	}
	// The session row keeps the tail timestamp as integer milliseconds;
	// the §5.2 checks need the number the receipt carries (1.5 > 1.2), so
	// read the last stored receipt (used when it is still the tail).
	var last *ledger.Receipt
	if sess.ReceiptCount > 0 {
		recs, err := s.st.ListReceipts(ctx, sess.ID, sess.ReceiptCount-1, 1)
		if err != nil {
			return 0, err
		}
		if len(recs) == 1 {
			last, _ = ledger.ParseReceipt([]byte(recs[0].Text))
		}
	}
	var tamper *ledger.VerifyError
	seal := func(ctx context.Context, req store.SealRequest) ([]store.Receipt, error) {
		tail := req.Session.Tail
		var prev *ledger.Receipt
		if tail.Count > 0 {
			prev = &ledger.Receipt{Hash: tail.LastHash, Timestamp: float64(tail.LastTimestamp)}
			if last != nil && last.Hash == tail.LastHash {
				prev = last
			}
		}
		out := make([]store.Receipt, len(fresh))
		for i, rc := range fresh {
			idx := int(tail.Count) + i
			if errs := ledger.CheckNext(prev, idx, rc, opts); len(errs) > 0 && tamper == nil {
				tamper = &errs[0]
			}
			prev = rc
			out[i] = store.Receipt{SessionID: sess.ID, ID: rc.ID, Hash: rc.Hash, Timestamp: rc.Millis(), Text: string(rc.Raw)}
		}
		return out, nil
	}
	_, err = s.st.AppendEvents(ctx, store.AppendRequest{TraceID: sess.RunID, Messages: msgs, Time: s.now(), Seal: seal})
	switch {
	case errors.Is(err, store.ErrFinished):
		return 0, apiErr(http.StatusConflict, CodeSessionClosed, "session %s is closed", sid)
	case errors.Is(err, store.ErrConflict):
		return 0, apiErr(http.StatusConflict, CodeReceiptConflict, "a receipt of session %s was stored concurrently", sid)
	case err != nil:
		return 0, err
	}
	if tamper != nil {
		reason, _ := json.Marshal(tamper)
		if _, err := s.st.MarkSessionTampered(ctx, sess.ID, s.now(), reason); err != nil {
			s.log.Warn("mark session tampered", "session", sid, "err", err)
		}
	}
	return len(fresh), nil
}

// handleSDKSessionPatch serves PATCH /v1/sessions/{id} {status, close_hash}.
func (s *Server) handleSDKSessionPatch(w http.ResponseWriter, r *http.Request, p *principal) error {
	var in struct {
		Status    string `json:"status"`
		CloseHash string `json:"close_hash"`
	}
	if err := s.decodeJSON(w, r, &in, false); err != nil {
		return err
	}
	sess, err := s.sdkSession(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	switch in.Status {
	case "closed":
		// A close hash that is not one (§5.1) would be stored and make
		// every later verification of the session fail as bad input.
		if in.CloseHash != "" {
			if _, err := ledger.VerifyChain(nil, ledger.VerifyOptions{CloseHash: in.CloseHash}); err != nil {
				return badRequest("close_hash %q is neither \"0\" nor 64 lowercase hex characters", in.CloseHash)
			}
		}
		mismatch := false
		closeFn := func(ctx context.Context, ss *store.Session) (store.CloseStatement, error) {
			st, err := s.closeFunc()(ctx, ss)
			if err != nil || in.CloseHash == "" || in.CloseHash == st.Hash {
				return st, err
			}
			// The client's value is kept (and signed); verification then
			// reports close_hash_mismatch.
			mismatch = true
			st.Hash = in.CloseHash
			stmt, err := ledger.CloseStatement(ss.LedgerID(), st.Hash, st.ClosedAt.UnixMilli(), int(ss.Tail.Count))
			if err != nil {
				return st, err
			}
			st.Signature = ledger.SignHash(s.key, string(stmt))
			return st, nil
		}
		sess, err = s.st.CloseSession(r.Context(), sess.ID, closeFn)
		if errors.Is(err, store.ErrFinished) {
			return apiErr(http.StatusConflict, CodeSessionClosed, "session %s is already closed", r.PathValue("id"))
		}
		if err != nil {
			return err
		}
		if mismatch {
			reason, _ := json.Marshal(map[string]any{"index": nil, "reason": ledger.ReasonCloseHashMismatch})
			if up, err := s.st.MarkSessionTampered(r.Context(), sess.ID, s.now(), reason); err == nil {
				sess = up
			}
		}
	case "tampered":
		reason, _ := json.Marshal(map[string]any{"index": nil, "reason": ledger.ReasonClientReported})
		if sess, err = s.st.MarkSessionTampered(r.Context(), sess.ID, s.now(), reason); err != nil {
			return err
		}
	default:
		return badRequest("status must be closed or tampered, got %q", in.Status)
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": sess.LedgerID(), "status": sess.Status(), "close_hash": optString(sess.CloseHash)})
	return nil
}

// handleSDKSessionVerify serves GET /v1/sessions/{id}/verify.
func (s *Server) handleSDKSessionVerify(w http.ResponseWriter, r *http.Request, p *principal) error {
	sess, err := s.sdkSession(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	sres, err := s.verifySessionOrRun(r, sess)
	if err != nil {
		return err
	}
	res := sres.Result
	writeJSON(w, http.StatusOK, map[string]any{
		"valid": res.Valid, "receipt_count": sess.ReceiptCount, "errors": res.Messages(), "brokenAt": res.BrokenAt, "reason": res.Reason,
	})
	return nil
}
