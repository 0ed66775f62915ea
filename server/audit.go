package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/vigilhq/vigil/ingest"
	"github.com/vigilhq/vigil/ledger"
	"github.com/vigilhq/vigil/store"
)

// This file serves the audit ledger endpoints (spec/ledger.md §10): the
// public key, sessions and their receipts, session and run verification,
// runs and nodes, finishing a run, and stateless verification.

func (s *Server) handlePublicKey(w http.ResponseWriter, r *http.Request, _ *principal) error {
	writeJSON(w, http.StatusOK, map[string]string{"publicKey": ledger.PublicKeyHex(s.pub)})
	return nil
}

// sessionForRead loads a session the caller may read: its owner or an
// admin, or a caller who may read its run's trace (a reader of a public
// dataset, explorer-api §1.4); 404 otherwise. id is first looked up as an
// SDK session id in the caller's namespace, then as a session id.
func (s *Server) sessionForRead(r *http.Request, p *principal, id string) (*store.Session, error) {
	sess, err := s.st.GetSDKSession(r.Context(), p.User.ID, id)
	if errors.Is(err, store.ErrNotFound) {
		sess, err = s.st.GetSession(r.Context(), id)
	}
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("Session not found")
	}
	if err != nil {
		return nil, err
	}
	if s.canWrite(p, sess.OwnerID) {
		return sess, nil
	}
	if sess.RunID != "" {
		t, err := s.st.GetTrace(r.Context(), sess.RunID, false)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		if err == nil && runSessionID(t) == sess.ID {
			ok, err := s.canReadTrace(r, p, t)
			if err != nil {
				return nil, err
			}
			if ok {
				return sess, nil
			}
		}
	}
	return nil, notFound("Session not found")
}

// runSessionID is the ledger session of run t (its own id unless set).
func runSessionID(t *store.Trace) string {
	if t.SessionID != "" {
		return t.SessionID
	}
	return t.ID
}

func millis(t time.Time) int64 { return t.UnixMilli() }

func optMillis(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	ms := t.UnixMilli()
	return &ms
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// sessionJSON is the §6.1 object.
func sessionJSON(sess *store.Session) map[string]any {
	var reason any
	if len(sess.TamperReason) > 0 {
		reason = json.RawMessage(sess.TamperReason)
	}
	return map[string]any{
		"id": sess.LedgerID(), "runId": optString(sess.RunID), "name": sess.Name, "agent": sess.Agent,
		"signer": sess.Signer, "signerPublicKey": optString(sess.SignerPublicKey), "status": sess.Status(),
		"createdAt": millis(sess.CreatedAt), "closedAt": optMillis(sess.ClosedAt), "tamperedAt": optMillis(sess.TamperedAt),
		"tamperReason": reason, "receiptCount": sess.ReceiptCount, "rootHash": optString(sess.RootHash),
		"closeHash": optString(sess.CloseHash), "closeSignature": optString(sess.CloseSignature),
	}
}

func (s *Server) handleSessionGet(w http.ResponseWriter, r *http.Request, p *principal) error {
	sess, err := s.sessionForRead(r, p, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sessionJSON(sess))
	return nil
}

// handleSessionReceipts writes {"receipts":[…],"closeHash"?} with each
// receipt's exact stored text, which `vigil receipts verify` reads as is.
func (s *Server) handleSessionReceipts(w http.ResponseWriter, r *http.Request, p *principal) error {
	sess, err := s.sessionForRead(r, p, r.PathValue("id"))
	if err != nil {
		return err
	}
	recs, err := s.st.ListReceipts(r.Context(), sess.ID, 0, 0)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	b.WriteString(`{"receipts":[`)
	for i, rc := range recs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(rc.Text)
	}
	b.WriteByte(']')
	if sess.ClosedAt != nil && sess.CloseHash != "" {
		b.WriteString(`,"closeHash":`)
		b.WriteString(strconv.Quote(sess.CloseHash))
	}
	b.WriteString("}\n")
	w.Header().Set("Content-Type", "application/json")
	_, err = w.Write(b.Bytes())
	return err
}

// ledgerSession is the ledger's view of a stored session, for
// verification (spec/ledger.md §6.4). A server session stored without a
// signer key was signed with the active key.
func (s *Server) ledgerSession(sess *store.Session) *ledger.Session {
	ls := &ledger.Session{ID: sess.LedgerID(), Agent: sess.Agent, Signer: sess.Signer, ReceiptCount: int(sess.ReceiptCount)}
	if sess.SignerPublicKey != "" {
		ls.SignerPublicKey = &sess.SignerPublicKey
	} else if sess.Signer != ledger.SignerAgent {
		pub := ledger.PublicKeyHex(s.pub)
		ls.SignerPublicKey = &pub
	}
	if sess.ClosedAt != nil {
		closed := sess.ClosedAt.UnixMilli()
		ls.ClosedAt = &closed
		h := sess.CloseHash
		if h == "" {
			h = "0"
		}
		ls.CloseHash = &h
		if sess.CloseSignature != "" {
			ls.CloseSignature = &sess.CloseSignature
		}
	}
	return ls
}

// sessionKeys are the keys a session verifies with: the server key ring
// and, for an agent signer, its key.
func (s *Server) sessionKeys(sess *store.Session) ledger.SessionKeys {
	keys := ledger.SessionKeys{Ring: s.ring}
	if sess.Signer == ledger.SignerAgent {
		if k, err := ledger.ParsePublicKey(sess.SignerPublicKey); err == nil {
			keys.AgentKey = k
		}
	}
	return keys
}

// storedReceipts loads and parses a session's receipts.
func (s *Server) storedReceipts(r *http.Request, sessionID string) ([]*ledger.Receipt, error) {
	recs, err := s.st.ListReceipts(r.Context(), sessionID, 0, 0)
	if err != nil {
		return nil, err
	}
	parsed := make([]*ledger.Receipt, len(recs))
	for i, rc := range recs {
		pr, err := ledger.ParseReceipt([]byte(rc.Text))
		if err != nil {
			return nil, err
		}
		parsed[i] = pr
	}
	return parsed, nil
}

// verifySession runs §6.4 (ledger.VerifySession) over the stored receipts.
func (s *Server) verifySession(r *http.Request, sess *store.Session) (ledger.SessionResult, error) {
	parsed, err := s.storedReceipts(r, sess.ID)
	if err != nil {
		return ledger.SessionResult{}, err
	}
	return ledger.VerifySession(s.ledgerSession(sess), parsed, s.sessionKeys(sess), s.now().UnixMilli())
}

// markTampered records a failed verification on the session (sticky).
func (s *Server) markTampered(r *http.Request, sess *store.Session, res ledger.Result) {
	if res.Valid || sess.TamperedAt != nil {
		return
	}
	reason, _ := json.Marshal(map[string]any{"index": res.BrokenAt, "reason": res.Reason})
	if up, err := s.st.MarkSessionTampered(r.Context(), sess.ID, s.now(), reason); err == nil {
		*sess = *up
	} else {
		s.log.Warn("mark session tampered", "session", sess.ID, "err", err)
	}
}

// verifyJSON is the §6.4 result with the stored session's status (after
// markTampered).
func verifyJSON(res ledger.SessionResult, sess *store.Session) ledger.SessionResult {
	res.Status = sess.Status()
	return res
}

func (s *Server) handleSessionVerify(w http.ResponseWriter, r *http.Request, p *principal) error {
	sess, err := s.sessionForRead(r, p, r.PathValue("id"))
	if err != nil {
		return err
	}
	res, err := s.verifySessionOrRun(r, sess)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, verifyJSON(res, sess))
	return nil
}

// handleStatelessVerify serves POST /api/v1/ledger/verify
// {receipts, publicKey?, closeHash?, sessionId?} → the §5.3 result.
func (s *Server) handleStatelessVerify(w http.ResponseWriter, r *http.Request, p *principal) error {
	body, err := s.readJSONBody(w, r)
	if err != nil {
		return err
	}
	v, err := ledger.Parse(body)
	if err != nil {
		return apiErr(http.StatusBadRequest, CodeInvalidJSON, "%v", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return badRequest("request body must be an object with a receipts array")
	}
	list, ok := obj["receipts"].([]any)
	if !ok {
		return badRequest("receipts must be an array")
	}
	var opts ledger.VerifyOptions
	if pk, ok := obj["publicKey"]; ok && pk != nil {
		ps, isStr := pk.(string)
		key, err := ledger.ParsePublicKey(ps)
		if !isStr || err != nil {
			return badRequest("publicKey must be 64 hex characters")
		}
		opts.PublicKey = key
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"closeHash", &opts.CloseHash}, {"sessionId", &opts.SessionID}} {
		if x, ok := obj[f.name]; ok && x != nil {
			str, isStr := x.(string)
			if !isStr {
				return badRequest("%s must be a string", f.name)
			}
			*f.dst = str
		}
	}
	recs := make([]*ledger.Receipt, len(list))
	for i, e := range list {
		rc, err := ledger.ReceiptFromValue(e)
		if err != nil {
			var ie *ledger.InputError
			if errors.As(err, &ie) {
				ie.Index = i
			}
			return badRequest("%v", err)
		}
		recs[i] = rc
	}
	res, err := ledger.VerifyChain(recs, opts)
	if err != nil {
		return badRequest("%v", err)
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// traceForRun loads the trace of run {id}: for write, one the caller owns
// (or an admin); for reading, also one the caller may read (a reader of a
// public dataset, explorer-api §1.4). 404 otherwise.
func (s *Server) traceForRun(r *http.Request, p *principal, withMessages, write bool) (*store.Trace, error) {
	t, err := s.st.GetTrace(r.Context(), r.PathValue("id"), withMessages)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("Run not found")
	}
	if err != nil {
		return nil, err
	}
	ok := s.canWrite(p, t.OwnerID)
	if !ok && !write {
		if ok, err = s.canReadTrace(r, p, t); err != nil {
			return nil, err
		}
	}
	if !ok {
		return nil, notFound("Run not found")
	}
	return t, nil
}

// runJSON is the §7.1 run object.
func (s *Server) runJSON(r *http.Request, t *store.Trace) ledger.Run {
	var md map[string]any
	if v, err := ledger.Parse(objectOrEmpty(t.Metadata)); err == nil {
		md, _ = v.(map[string]any)
	}
	dsName := ""
	if t.DatasetID != "" {
		if d, err := s.st.GetDataset(r.Context(), t.DatasetID); err == nil {
			dsName = d.Name
		}
	}
	run := ledger.Run{
		ID: t.ID, Name: t.Name, AgentID: ingest.RunAgent(md, dsName), Status: string(t.Status),
		StartedAt: t.TimeCreated.UnixMilli(), EndedAt: optMillis(t.EndedAt), SessionID: t.SessionID,
	}
	if run.Status == "" {
		run.Status = ledger.RunOpen
	}
	if run.SessionID == "" {
		run.SessionID = t.ID
	}
	if ev, ok := md["eval"].(map[string]any); ok {
		e := &ledger.Eval{}
		e.Suite, _ = ev["suite"].(string)
		e.Case, _ = ev["case"].(string)
		run.Eval = e
	}
	return run
}

func (s *Server) handleRunGet(w http.ResponseWriter, r *http.Request, p *principal) error {
	t, err := s.traceForRun(r, p, false, false)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.runJSON(r, t))
	return nil
}

// handleRunFinish serves POST /api/v1/runs/{id}/finish {status}.
func (s *Server) handleRunFinish(w http.ResponseWriter, r *http.Request, p *principal) error {
	var in struct {
		Status string `json:"status"`
	}
	if err := s.decodeJSON(w, r, &in, true); err != nil {
		return err
	}
	status := store.RunCompleted
	switch in.Status {
	case "", "completed":
	case "failed":
		status = store.RunFailed
	default:
		return badRequest("status must be completed or failed, got %q", in.Status)
	}
	t, err := s.traceForRun(r, p, false, true)
	if err != nil {
		return err
	}
	t, err = s.st.FinishRun(r.Context(), t.ID, status, s.now(), s.closeFunc())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.runJSON(r, t))
	return nil
}

// handleRunNodes serves GET /api/v1/runs/{id}/nodes: the §7.2 nodes in
// event order with children after their parent.
func (s *Server) handleRunNodes(w http.ResponseWriter, r *http.Request, p *principal) error {
	t, err := s.traceForRun(r, p, true, false)
	if err != nil {
		return err
	}
	recs, err := s.st.ListReceipts(r.Context(), t.SessionID, 0, 0)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	sdk := false
	if sess, err := s.st.GetSession(r.Context(), t.SessionID); err == nil {
		sdk = isSDKSession(sess)
	}
	run := s.runJSON(r, t)
	nodes := buildNodes(run, t.Messages, recs, sdk)
	if err := s.setAnomalyScores(r, t.ID, nodes); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"nodes": nodes})
	return nil
}

// handleRunVerify serves GET /api/v1/runs/{id}/verify: session
// verification plus the binding checks of §7.5.
func (s *Server) handleRunVerify(w http.ResponseWriter, r *http.Request, p *principal) error {
	t, err := s.traceForRun(r, p, true, false)
	if err != nil {
		return err
	}
	sess, err := s.st.GetSession(r.Context(), runSessionID(t))
	if errors.Is(err, store.ErrNotFound) {
		// The session row is gone: the run is not vouched for.
		n := 0
		if recs, err := s.st.ListReceipts(r.Context(), runSessionID(t), 0, 0); err == nil {
			n = len(recs)
		}
		writeJSON(w, http.StatusOK, ledger.SessionResult{
			Result:    ledger.NewResult([]ledger.VerifyError{{Index: 0, Reason: ledger.ReasonMissingSession}}),
			SessionID: runSessionID(t), Status: "tampered", ReceiptCount: n, Signer: ledger.SignerServer,
		})
		return nil
	}
	if err != nil {
		return err
	}
	res, err := s.verifyRun(r, t, sess)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, verifyJSON(res, sess))
	return nil
}

// verifyRun runs §7.5 on run t (loaded with its messages) and its session,
// and marks the session tampered when it fails.
func (s *Server) verifyRun(r *http.Request, t *store.Trace, sess *store.Session) (ledger.SessionResult, error) {
	parsed, err := s.storedReceipts(r, sess.ID)
	if err != nil {
		return ledger.SessionResult{}, err
	}
	ev := ledger.RunEvidence{RunID: t.ID, Session: s.ledgerSession(sess), Receipts: parsed,
		Events: make([][]byte, len(t.Messages)), NodeIDs: make([][]string, len(t.Messages)), ReceiptEvents: isSDKSession(sess)}
	for i, m := range t.Messages {
		ev.Events[i], ev.NodeIDs[i] = m.Data, m.NodeIDs
	}
	res, err := ledger.VerifyRun(ev, s.sessionKeys(sess), s.now().UnixMilli())
	if err != nil {
		return ledger.SessionResult{}, err
	}
	s.markTampered(r, sess, res.Result)
	return res, nil
}

// verifySessionOrRun is the one verification of a session (ledger.md §6.4,
// §7.5): run verification while its run exists (so every endpoint gives the
// answer GET /api/v1/runs/{id}/verify gives), else session verification
// (the run was deleted; its receipts are kept). It marks the session
// tampered when it fails.
func (s *Server) verifySessionOrRun(r *http.Request, sess *store.Session) (ledger.SessionResult, error) {
	if sess.RunID != "" {
		t, err := s.st.GetTrace(r.Context(), sess.RunID, true)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return ledger.SessionResult{}, err
		}
		if err == nil && runSessionID(t) == sess.ID {
			return s.verifyRun(r, t, sess)
		}
	}
	res, err := s.verifySession(r, sess)
	if err != nil {
		return res, err
	}
	s.markTampered(r, sess, res.Result)
	return res, nil
}
