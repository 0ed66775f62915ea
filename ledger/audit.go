package ledger

// audit.go: session verification (§6.4) and run verification (§7.5), the
// checks the server adds on top of VerifyChain: close signature (rank 10),
// event binding (rank 7) and missing receipts or events (rank 8).

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
)

// SessionResult is the §6.4 verification result: the §5.3 object plus the
// session's id, status, receipt count, signer and whether signatures were
// checked.
type SessionResult struct {
	Result
	SessionID         string `json:"sessionId"`
	Status            string `json:"status"`
	ReceiptCount      int    `json:"receiptCount"`
	Signer            string `json:"signer"`
	SignaturesChecked bool   `json:"signaturesChecked"`
}

// SessionKeys are the keys session verification may use.
type SessionKeys struct {
	// Ring is the server key ring: the active server public key and the
	// retired ones (LoadKeyRing).
	Ring []ed25519.PublicKey
	// AgentKey is the registered key of the session's agent (agent-signed
	// sessions); nil when none is registered.
	AgentKey ed25519.PublicKey
}

// ringKey returns the ring key whose hex equals h (either case), or nil.
func (k SessionKeys) ringKey(h string) ed25519.PublicKey {
	want, err := hex.DecodeString(h)
	if err != nil {
		return nil
	}
	for _, pub := range k.Ring {
		if bytes.Equal(pub, want) {
			return pub
		}
	}
	return nil
}

// VerifySession verifies a session's stored receipts (§6.4): VerifyChain
// with SessionID = the session id, CloseHash = its close hash when closed,
// and the signer's key — for a server signer the ring key equal to
// SignerPublicKey (none: every receipt fails "signature"), for an agent
// signer keys.AgentKey (none: every receipt fails "signature" and
// SignaturesChecked is false). A close
// signature no ring key verifies adds close_signature at index
// ReceiptCount. A failure marks the session tampered at now (ms; sticky,
// first reason kept); the caller persists s.
func VerifySession(s *Session, receipts []*Receipt, keys SessionKeys, now int64) (SessionResult, error) {
	res, err := verifySessionChain(s, receipts, keys)
	if err != nil {
		return SessionResult{}, err
	}
	return finishSession(s, res, keys, now), nil
}

func sessionOptions(s *Session, keys SessionKeys) (VerifyOptions, bool) {
	opts := VerifyOptions{SessionID: s.ID}
	if s.ClosedAt != nil && s.CloseHash != nil {
		opts.CloseHash = *s.CloseHash
	}
	checked := true
	switch s.Signer {
	case SignerAgent:
		if keys.AgentKey != nil {
			opts.PublicKey = keys.AgentKey
		} else {
			opts.failSignatures, checked = true, false
		}
	default: // server
		var pub ed25519.PublicKey
		if s.SignerPublicKey != nil {
			pub = keys.ringKey(*s.SignerPublicKey)
		}
		if pub != nil {
			opts.PublicKey = pub
		} else {
			opts.failSignatures, checked = true, false
		}
	}
	return opts, checked
}

func verifySessionChain(s *Session, receipts []*Receipt, keys SessionKeys) (Result, error) {
	opts, _ := sessionOptions(s, keys)
	res, err := VerifyChain(receipts, opts)
	if err != nil {
		return Result{}, fmt.Errorf("verify session %s: %w", s.ID, err)
	}
	return res, nil
}

// CloseSignatureValid reports whether some ring key verifies the session's
// close signature over its close statement (§6.3). A session without a
// close signature is reported valid (there is nothing to check).
func CloseSignatureValid(s *Session, keys SessionKeys) bool {
	if s.CloseSignature == nil {
		return true
	}
	if s.ClosedAt == nil || s.CloseHash == nil {
		return false
	}
	stmt, err := CloseStatement(s.ID, *s.CloseHash, *s.ClosedAt, s.ReceiptCount)
	if err != nil {
		return false
	}
	for _, pub := range keys.Ring {
		if VerifySignature(pub, string(stmt), *s.CloseSignature) {
			return true
		}
	}
	return false
}

func finishSession(s *Session, res Result, keys SessionKeys, now int64) SessionResult {
	if !CloseSignatureValid(s, keys) {
		res = res.With(VerifyError{Index: s.ReceiptCount, Reason: ReasonCloseSignature})
	}
	if !res.Valid {
		i := res.Errors[0].Index
		s.MarkTampered(now, TamperReason{Index: &i, Reason: res.Errors[0].Reason})
	}
	_, checked := sessionOptions(s, keys)
	return SessionResult{
		Result: res, SessionID: s.ID, Status: s.Status(), ReceiptCount: s.ReceiptCount,
		Signer: s.Signer, SignaturesChecked: checked,
	}
}

// RunEvidence is what run verification reads from the store (§7.5).
type RunEvidence struct {
	RunID    string
	Session  *Session
	Receipts []*Receipt
	// Events are the run's stored events, exactly as served, in order.
	Events [][]byte
	// NodeIDs are the stored node ids of each event (primary first, then
	// children in tool_calls order), for server-signed runs.
	NodeIDs [][]string
	// ReceiptEvents says the events were derived from incoming receipts
	// (SDK sessions, §7.4) although the signer is the server (an agent
	// without a registered key): they are checked as for an agent signer.
	ReceiptEvents bool
}

// VerifyRun is session verification plus the binding check (§7.5): for
// i < min(nE, nR), receipt i must commit to stored event i — for a
// server-signed run its input carries this run's runId, index i, the stored
// node ids of event i and an event whose canonical form equals that of
// stored event i (event_mismatch otherwise); for an agent-signed run the
// stored event must equal the one derived from receipt i (ReceiptEvent).
// nE > nR adds missing_receipt at nR; nR > nE adds missing_event at nE.
// A failure marks the session tampered, as VerifySession does.
func VerifyRun(ev RunEvidence, keys SessionKeys, now int64) (SessionResult, error) {
	s := ev.Session
	res, err := verifySessionChain(s, ev.Receipts, keys)
	if err != nil {
		return SessionResult{}, err
	}
	var extra []VerifyError
	nE, nR := len(ev.Events), len(ev.Receipts)
	for i := 0; i < min(nE, nR); i++ {
		var ok bool
		if s.Signer == SignerAgent || ev.ReceiptEvents {
			ok = agentEventMatches(ev.Events[i], ev.Receipts[i])
		} else {
			var ids []string
			if i < len(ev.NodeIDs) {
				ids = ev.NodeIDs[i]
			}
			ok = serverEventMatches(ev.RunID, i, ev.Events[i], ids, ev.Receipts[i])
		}
		if !ok {
			extra = append(extra, VerifyError{Index: i, Reason: ReasonEventMismatch})
		}
	}
	switch {
	case nE > nR:
		extra = append(extra, VerifyError{Index: nR, Reason: ReasonMissingReceipt})
	case nR > nE:
		extra = append(extra, VerifyError{Index: nE, Reason: ReasonMissingEvent})
	}
	return finishSession(s, res.With(extra...), keys, now), nil
}

func serverEventMatches(runID string, i int, event []byte, nodeIDs []string, r *Receipt) bool {
	in, ok := r.Input.(map[string]any)
	if !ok || r.InputAbsent {
		return false
	}
	if in["runId"] != runID || in["index"] != float64(i) {
		return false
	}
	ids, ok := in["nodeIds"].([]any)
	if !ok || len(ids) != len(nodeIDs) {
		return false
	}
	for j, id := range ids {
		if id != nodeIDs[j] {
			return false
		}
	}
	got, err1 := Marshal(in["event"])
	want, err2 := Canonicalize(event)
	return err1 == nil && err2 == nil && bytes.Equal(got, want)
}

func agentEventMatches(event []byte, r *Receipt) bool {
	got, err1 := Marshal(ReceiptEvent(r))
	want, err2 := Canonicalize(event)
	return err1 == nil && err2 == nil && bytes.Equal(got, want)
}
