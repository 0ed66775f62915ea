package ledger

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
)

// Session status values (§6.1). Status is derived, see Session.Status.
const (
	StatusOpen     = "open"
	StatusClosed   = "closed"
	StatusTampered = "tampered"
)

// Signer values of Session.Signer (§6.1, §7.4).
const (
	SignerServer = "server"
	SignerAgent  = "agent"
)

// ErrSessionClosed is returned for appending to or closing a session that
// is already closed (HTTP 409 SESSION_CLOSED, §6.2).
var ErrSessionClosed = errors.New("SESSION_CLOSED")

// TamperReason is the first error that marked a session tampered.
type TamperReason struct {
	Index  *int   `json:"index"` // nil when not tied to a receipt (client_reported)
	Reason Reason `json:"reason"`
}

// Session is a chain plus its lifecycle (§6.1). Its JSON is the §6.1 object.
// Times are integer milliseconds since the Unix epoch.
type Session struct {
	ID              string        `json:"id"`
	RunID           *string       `json:"runId"`
	Name            string        `json:"name"`
	Agent           string        `json:"agent"`
	Signer          string        `json:"signer"`          // SignerServer or SignerAgent
	SignerPublicKey *string       `json:"signerPublicKey"` // 64 hex
	StatusValue     string        `json:"status"`          // derived: see Status; MarshalJSON sets it
	CreatedAt       int64         `json:"createdAt"`
	ClosedAt        *int64        `json:"closedAt"`
	TamperedAt      *int64        `json:"tamperedAt"`
	TamperReason    *TamperReason `json:"tamperReason"`
	ReceiptCount    int           `json:"receiptCount"`
	RootHash        *string       `json:"rootHash"`
	CloseHash       *string       `json:"closeHash"`
	CloseSignature  *string       `json:"closeSignature"`
	// TailHash and TailTimestamp are the chain's end, kept internally (not
	// in the JSON): the hash and timestamp of the last receipt.
	TailHash      string  `json:"-"`
	TailTimestamp float64 `json:"-"`
}

// Status derives the status (§6.1): tampered if TamperedAt is set, else
// closed if ClosedAt is set, else open. It also stores it in StatusValue.
func (s *Session) Status() string {
	switch {
	case s.TamperedAt != nil:
		s.StatusValue = StatusTampered
	case s.ClosedAt != nil:
		s.StatusValue = StatusClosed
	default:
		s.StatusValue = StatusOpen
	}
	return s.StatusValue
}

// MarshalJSON writes the §6.1 object with the status derived (see Status).
func (s Session) MarshalJSON() ([]byte, error) {
	type plain Session // without this method
	c := plain(s)
	(*Session)(&c).Status()
	return json.Marshal(&c)
}

// Tail returns the session's chain tail.
func (s *Session) Tail() Tail { return Tail{Hash: s.TailHash, Timestamp: s.TailTimestamp} }

// Append makes the session's next receipt from a (with a.SessionID set to
// the session id) and advances the session: count, root hash, tail. It
// fails with ErrSessionClosed when the session is closed. A tampered but
// open session keeps recording (§6.2).
func (s *Session) Append(a Action, key ed25519.PrivateKey) (*Receipt, error) {
	if s.ClosedAt != nil {
		return nil, fmt.Errorf("append to session %s: %w", s.ID, ErrSessionClosed)
	}
	a.SessionID = s.ID
	r, err := Append(s.Tail(), a, key)
	if err != nil {
		return nil, err
	}
	s.Advance(r)
	return r, nil
}

// Advance records r as the session's new last receipt (count, root hash,
// tail) without checking it; use it for receipts stored as received.
func (s *Session) Advance(r *Receipt) {
	if s.ReceiptCount == 0 {
		h := r.Hash
		s.RootHash = &h
	}
	s.ReceiptCount++
	s.TailHash, s.TailTimestamp = r.Hash, r.Timestamp
}

// CloseStatement returns the bytes the close signature covers (§6.3):
// canon.Marshal({"closeHash","closedAt","receiptCount","sessionId"}).
func CloseStatement(sessionID, closeHash string, closedAt int64, receiptCount int) ([]byte, error) {
	return Marshal(map[string]any{
		"closeHash":    closeHash,
		"closedAt":     float64(closedAt),
		"receiptCount": float64(receiptCount),
		"sessionId":    sessionID,
	})
}

// Close closes the session at closedAt (ms): closeHash = the tail hash ("0"
// when empty) and closeSignature by the server key over the close statement
// (§6.3; no signature when key is nil). Closing twice fails with
// ErrSessionClosed.
func (s *Session) Close(closedAt int64, key ed25519.PrivateKey) error {
	if s.ClosedAt != nil {
		return fmt.Errorf("close session %s: %w", s.ID, ErrSessionClosed)
	}
	h := s.Tail().PreviousHash()
	stmt, err := CloseStatement(s.ID, h, closedAt, s.ReceiptCount)
	if err != nil {
		return fmt.Errorf("close session %s: %w", s.ID, err)
	}
	s.ClosedAt, s.CloseHash = &closedAt, &h
	if key != nil {
		sig := SignHash(key, string(stmt))
		s.CloseSignature = &sig
	}
	s.Status()
	return nil
}

// MarkTampered sets TamperedAt and TamperReason unless already tampered
// (tampered is sticky and keeps its first reason).
func (s *Session) MarkTampered(at int64, reason TamperReason) {
	if s.TamperedAt != nil {
		return
	}
	s.TamperedAt, s.TamperReason = &at, &reason
	s.Status()
}
