package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/vigilhq/vigil/store"
)

const sessionCols = `id, run_id, owner_id, name, agent, signer, signer_public_key, created_at, closed_at, tampered_at, tamper_reason,
	receipt_count, root_hash, close_hash, close_signature, extra, tail_hash, tail_timestamp, sdk_id`

var sessionColList = splitCols(sessionCols)

func sessionRow(s *store.Session) []any {
	var reason, extra *string
	if len(s.TamperReason) > 0 {
		r := string(s.TamperReason)
		reason = &r
	}
	if len(s.Extra) > 0 {
		e := string(s.Extra)
		extra = &e
	}
	return []any{s.ID, nullString(s.RunID), s.OwnerID, s.Name, s.Agent, s.Signer, nullString(s.SignerPublicKey),
		micros(s.CreatedAt), microsPtr(s.ClosedAt), microsPtr(s.TamperedAt), reason,
		s.Tail.Count, nullString(s.RootHash), nullString(s.CloseHash), nullString(s.CloseSignature), extra,
		s.Tail.LastHash, s.Tail.LastTimestamp, nullString(s.SDKID)}
}

// sessionScan receives a ledger_sessions row.
type sessionScan struct {
	s                                   store.Session
	run, spk, reason, root, ch, cs, ext *string
	sdk                                 *string
	created                             int64
	closed, tampered                    *int64
}

func (x *sessionScan) dest() []any {
	s := &x.s
	return []any{&s.ID, &x.run, &s.OwnerID, &s.Name, &s.Agent, &s.Signer, &x.spk, &x.created, &x.closed, &x.tampered, &x.reason,
		&s.ReceiptCount, &x.root, &x.ch, &x.cs, &x.ext, &s.Tail.LastHash, &s.Tail.LastTimestamp, &x.sdk}
}

func (x *sessionScan) finish() *store.Session {
	s := &x.s
	s.RunID, s.SignerPublicKey, s.RootHash, s.CloseHash, s.CloseSignature = str(x.run), str(x.spk), str(x.root), str(x.ch), str(x.cs)
	s.SDKID = str(x.sdk)
	if x.reason != nil {
		s.TamperReason = json.RawMessage(*x.reason)
	}
	if x.ext != nil {
		s.Extra = json.RawMessage(*x.ext)
	}
	s.CreatedAt = fromMicros(x.created)
	s.ClosedAt, s.TamperedAt = fromMicrosPtr(x.closed), fromMicrosPtr(x.tampered)
	s.Tail.Count = s.ReceiptCount
	return s
}

func scanSession(r interface{ Scan(...any) error }) (*store.Session, error) {
	var x sessionScan
	if err := r.Scan(x.dest()...); err != nil {
		return nil, err
	}
	return x.finish(), nil
}

// lockSession reads session id and locks its row until tx ends.
func (s *Store) lockSession(ctx context.Context, tx Tx, id string) (*store.Session, error) {
	sess, err := scanSession(tx.QueryRow(ctx, `SELECT `+sessionCols+` FROM ledger_sessions WHERE id = $1`+s.b.ForUpdate(), id))
	if err != nil {
		return nil, notFound(err, "session "+id)
	}
	return sess, nil
}

const saveTailSQL = `UPDATE ledger_sessions SET receipt_count = $2, root_hash = $3, tail_hash = $4, tail_timestamp = $5 WHERE id = $1`

func saveTailArgs(sess *store.Session) []any {
	return []any{sess.ID, sess.Tail.Count, nullString(sess.RootHash), sess.Tail.LastHash, sess.Tail.LastTimestamp}
}

// saveTail writes sess's chain tail.
func (s *Store) saveTail(ctx context.Context, tx Tx, sess *store.Session) error {
	_, err := tx.Exec(ctx, saveTailSQL, saveTailArgs(sess)...)
	if err != nil {
		return fmt.Errorf("session %s tail: %w", sess.ID, err)
	}
	return nil
}

// closeWith computes the close statement of sess with fn and records it
// on sess (not in the database).
func closeWith(ctx context.Context, fn store.CloseFunc, sess *store.Session) error {
	scopy := *sess
	st, err := fn(ctx, &scopy)
	if err != nil {
		return fmt.Errorf("close session %s: %w", sess.ID, err)
	}
	at := orNow(st.ClosedAt)
	sess.ClosedAt = &at
	sess.CloseHash = st.Hash
	if sess.CloseHash == "" {
		sess.CloseHash = sess.Tail.LastHash
	}
	sess.CloseSignature = st.Signature
	return nil
}

// saveClose writes sess's close statement.
func (s *Store) saveClose(ctx context.Context, tx Tx, sess *store.Session) error {
	_, err := tx.Exec(ctx, `UPDATE ledger_sessions SET closed_at = $2, close_hash = $3, close_signature = $4 WHERE id = $1`,
		sess.ID, microsPtr(sess.ClosedAt), nullString(sess.CloseHash), nullString(sess.CloseSignature))
	if err != nil {
		return fmt.Errorf("close session %s: %w", sess.ID, err)
	}
	return nil
}

// closeOpenSessions locks and closes the open sessions matching cond
// (which uses parameter $1 = arg).
func (s *Store) closeOpenSessions(ctx context.Context, tx Tx, cond string, arg any, fn store.CloseFunc) error {
	rows, err := tx.Query(ctx, `SELECT `+sessionCols+` FROM ledger_sessions WHERE `+cond+` AND closed_at IS NULL ORDER BY id`+s.b.ForUpdate(), arg)
	if err != nil {
		return fmt.Errorf("close sessions: %w", err)
	}
	var open []*store.Session
	for rows.Next() {
		sess, err := scanSession(rows)
		if err != nil {
			rows.Close()
			return fmt.Errorf("close sessions: %w", err)
		}
		open = append(open, sess)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("close sessions: %w", err)
	}
	for _, sess := range open {
		if err := closeWith(ctx, fn, sess); err != nil {
			return err
		}
		if err := s.saveClose(ctx, tx, sess); err != nil {
			return err
		}
	}
	return nil
}

// CreateSession implements store.Ledger.
func (s *Store) CreateSession(ctx context.Context, sess *store.Session) error {
	if sess.ID == "" {
		return fmt.Errorf("create session: empty id")
	}
	if sess.Signer == "" {
		sess.Signer = "server"
	}
	sess.CreatedAt = orNow(sess.CreatedAt)
	if sess.Tail.LastHash == "" {
		sess.Tail = store.Tail{LastHash: "0"}
	}
	sess.ReceiptCount = sess.Tail.Count
	_, err := s.b.Writer().Exec(ctx, `INSERT INTO ledger_sessions (`+sessionCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)`,
		sessionRow(sess)...)
	if err != nil {
		return s.conflict(err, "create session "+sess.ID)
	}
	return nil
}

// GetSession implements store.Ledger.
func (s *Store) GetSession(ctx context.Context, id string) (*store.Session, error) {
	sess, err := scanSession(s.b.Reader().QueryRow(ctx, `SELECT `+sessionCols+` FROM ledger_sessions WHERE id = $1`, id))
	if err != nil {
		return nil, notFound(err, "session "+id)
	}
	return sess, nil
}

// GetSDKSession implements store.Ledger.
func (s *Store) GetSDKSession(ctx context.Context, ownerID, sdkID string) (*store.Session, error) {
	sess, err := scanSession(s.b.Reader().QueryRow(ctx, `SELECT `+sessionCols+` FROM ledger_sessions WHERE owner_id = $1 AND sdk_id = $2`, ownerID, sdkID))
	if err != nil {
		return nil, notFound(err, "SDK session "+sdkID)
	}
	return sess, nil
}

// ListSessions implements store.Ledger.
func (s *Store) ListSessions(ctx context.Context, f store.SessionFilter) ([]*store.Session, error) {
	var p params
	var where []string
	if f.OwnerID != "" {
		where = append(where, `owner_id = `+p.add(f.OwnerID))
	}
	if f.RunID != "" {
		where = append(where, `run_id = `+p.add(f.RunID))
	}
	q := `SELECT ` + sessionCols + ` FROM ledger_sessions`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	q += ` ORDER BY created_at DESC, id` + limitOffset(&p, f.Limit, f.Offset)
	rows, err := s.b.Reader().Query(ctx, q, p.args...)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	defer rows.Close()
	var out []*store.Session
	for rows.Next() {
		sess, err := scanSession(rows)
		if err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		out = append(out, sess)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return out, nil
}

// AppendReceipts implements store.Ledger.
func (s *Store) AppendReceipts(ctx context.Context, sessionID string, sealFn store.SealFunc) ([]store.Receipt, error) {
	var recs []store.Receipt
	err := s.inTx(ctx, func(tx Tx) error {
		sess, err := s.lockSession(ctx, tx, sessionID)
		if err != nil {
			return fmt.Errorf("append receipts: %w", err)
		}
		if sess.ClosedAt != nil {
			return fmt.Errorf("append receipts to session %s: closed: %w", sessionID, store.ErrFinished)
		}
		scopy := *sess
		recs, err = sealFn(ctx, store.SealRequest{Session: &scopy})
		if err != nil {
			return fmt.Errorf("append receipts to session %s: %w", sessionID, err)
		}
		if len(recs) == 0 {
			return nil
		}
		if err := advance(sess, recs); err != nil {
			return fmt.Errorf("append receipts to session %s: %w", sessionID, err)
		}
		if err := s.saveTail(ctx, tx, sess); err != nil {
			return err
		}
		rows := make([][]any, len(recs))
		for i := range recs {
			rows[i] = receiptRow(&recs[i])
		}
		if err := tx.BulkInsert(ctx, "receipts", receiptColList, rows); err != nil {
			return s.conflict(err, "append receipts to session "+sessionID)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return recs, nil
}

// ListReceipts implements store.Ledger.
func (s *Store) ListReceipts(ctx context.Context, sessionID string, fromSeq int64, limit int) ([]store.Receipt, error) {
	if _, err := s.GetSession(ctx, sessionID); err != nil {
		return nil, err
	}
	var p params
	q := `SELECT session_id, seq, id, hash, timestamp, text FROM receipts WHERE session_id = ` + p.add(sessionID) +
		` AND seq >= ` + p.add(fromSeq) + ` ORDER BY seq` + limitOffset(&p, limit, 0)
	rows, err := s.b.Reader().Query(ctx, q, p.args...)
	if err != nil {
		return nil, fmt.Errorf("list receipts of session %s: %w", sessionID, err)
	}
	defer rows.Close()
	out := []store.Receipt{}
	for rows.Next() {
		var r store.Receipt
		if err := rows.Scan(&r.SessionID, &r.Seq, &r.ID, &r.Hash, &r.Timestamp, &r.Text); err != nil {
			return nil, fmt.Errorf("list receipts of session %s: %w", sessionID, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list receipts of session %s: %w", sessionID, err)
	}
	return out, nil
}

// GetReceipt implements store.Ledger.
func (s *Store) GetReceipt(ctx context.Context, sessionID, receiptID string) (*store.Receipt, error) {
	var r store.Receipt
	err := s.b.Reader().QueryRow(ctx, `SELECT session_id, seq, id, hash, timestamp, text FROM receipts WHERE session_id = $1 AND id = $2`,
		sessionID, receiptID).Scan(&r.SessionID, &r.Seq, &r.ID, &r.Hash, &r.Timestamp, &r.Text)
	if err != nil {
		return nil, notFound(err, fmt.Sprintf("receipt %s in session %s", receiptID, sessionID))
	}
	return &r, nil
}

// CloseSession implements store.Ledger.
func (s *Store) CloseSession(ctx context.Context, sessionID string, closeFn store.CloseFunc) (*store.Session, error) {
	var sess *store.Session
	err := s.inTx(ctx, func(tx Tx) error {
		var err error
		sess, err = s.lockSession(ctx, tx, sessionID)
		if err != nil {
			return fmt.Errorf("close: %w", err)
		}
		if sess.ClosedAt != nil {
			return fmt.Errorf("close session %s: already closed: %w", sessionID, store.ErrFinished)
		}
		if err := closeWith(ctx, closeFn, sess); err != nil {
			return err
		}
		return s.saveClose(ctx, tx, sess)
	})
	if err != nil {
		return nil, err
	}
	return sess, nil
}

// MarkSessionTampered implements store.Ledger.
func (s *Store) MarkSessionTampered(ctx context.Context, sessionID string, at time.Time, reason json.RawMessage) (*store.Session, error) {
	var sess *store.Session
	err := s.inTx(ctx, func(tx Tx) error {
		var err error
		sess, err = s.lockSession(ctx, tx, sessionID)
		if err != nil {
			return fmt.Errorf("mark tampered: %w", err)
		}
		if sess.TamperedAt != nil {
			return nil
		}
		t := orNow(at)
		sess.TamperedAt = &t
		sess.TamperReason = reason
		var r *string
		if len(reason) > 0 {
			rs := string(reason)
			r = &rs
		}
		if _, err := tx.Exec(ctx, `UPDATE ledger_sessions SET tampered_at = $2, tamper_reason = $3 WHERE id = $1`, sessionID, micros(t), r); err != nil {
			return fmt.Errorf("mark session %s tampered: %w", sessionID, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return sess, nil
}

// PutAgentKey implements store.Ledger.
func (s *Store) PutAgentKey(ctx context.Context, k *store.AgentKey) error {
	k.CreatedAt = orNow(k.CreatedAt)
	return s.inTx(ctx, func(tx Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE agent_keys SET revoked_at = $2 WHERE agent = $1 AND revoked_at IS NULL`, k.Agent, micros(k.CreatedAt)); err != nil {
			return fmt.Errorf("put agent key %q: %w", k.Agent, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO agent_keys (agent, public_key, created_at, revoked_at) VALUES ($1, $2, $3, NULL)`,
			k.Agent, k.PublicKey, micros(k.CreatedAt)); err != nil {
			return s.conflict(err, fmt.Sprintf("put agent key %q", k.Agent))
		}
		k.RevokedAt = nil
		return nil
	})
}

func scanAgentKey(r interface{ Scan(...any) error }) (*store.AgentKey, error) {
	k := &store.AgentKey{}
	var c int64
	var rev *int64
	if err := r.Scan(&k.Agent, &k.PublicKey, &c, &rev); err != nil {
		return nil, err
	}
	k.CreatedAt, k.RevokedAt = fromMicros(c), fromMicrosPtr(rev)
	return k, nil
}

// GetAgentKey implements store.Ledger.
func (s *Store) GetAgentKey(ctx context.Context, agent string) (*store.AgentKey, error) {
	k, err := scanAgentKey(s.b.Reader().QueryRow(ctx, `SELECT agent, public_key, created_at, revoked_at FROM agent_keys WHERE agent = $1 AND revoked_at IS NULL`, agent))
	if err != nil {
		return nil, notFound(err, fmt.Sprintf("agent key %q", agent))
	}
	return k, nil
}

// ListAgentKeys implements store.Ledger.
func (s *Store) ListAgentKeys(ctx context.Context) ([]*store.AgentKey, error) {
	rows, err := s.b.Reader().Query(ctx, `SELECT agent, public_key, created_at, revoked_at FROM agent_keys ORDER BY agent, created_at`)
	if err != nil {
		return nil, fmt.Errorf("list agent keys: %w", err)
	}
	defer rows.Close()
	var out []*store.AgentKey
	for rows.Next() {
		k, err := scanAgentKey(rows)
		if err != nil {
			return nil, fmt.Errorf("list agent keys: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list agent keys: %w", err)
	}
	return out, nil
}

// RevokeAgentKey implements store.Ledger.
func (s *Store) RevokeAgentKey(ctx context.Context, agent string, at time.Time) error {
	n, err := s.b.Writer().Exec(ctx, `UPDATE agent_keys SET revoked_at = $2 WHERE agent = $1 AND revoked_at IS NULL`, agent, micros(orNow(at)))
	if err != nil {
		return fmt.Errorf("revoke agent key %q: %w", agent, err)
	}
	if n == 0 {
		return fmt.Errorf("revoke agent key %q: %w", agent, store.ErrNotFound)
	}
	return nil
}
