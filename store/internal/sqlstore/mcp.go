package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/vigilhq/vigil/store"
)

const mcpSessionCols = `id, owner_id, trace_id, dataset, transport, client, server, server_name, protocol_version, upstream, system_user, started_at, last_seen_at, ended_at, state`

func scanMCPSession(r interface{ Scan(...any) error }) (*store.MCPSession, error) {
	m := &store.MCPSession{}
	var client, server, state *string
	var started, seen int64
	var ended *int64
	if err := r.Scan(&m.ID, &m.OwnerID, &m.TraceID, &m.Dataset, &m.Transport, &client, &server, &m.ServerName, &m.ProtocolVersion,
		&m.Upstream, &m.SystemUser, &started, &seen, &ended, &state); err != nil {
		return nil, err
	}
	if client != nil {
		m.Client = json.RawMessage(*client)
	}
	if server != nil {
		m.Server = json.RawMessage(*server)
	}
	if state != nil {
		m.State = json.RawMessage(*state)
	}
	m.StartedAt, m.LastSeenAt, m.EndedAt = fromMicros(started), fromMicros(seen), fromMicrosPtr(ended)
	return m, nil
}

// PutMCPSession implements store.MCP.
func (s *Store) PutMCPSession(ctx context.Context, m *store.MCPSession) error {
	if m.ID == "" {
		return fmt.Errorf("put MCP session: empty id")
	}
	for name, raw := range map[string]json.RawMessage{"client": m.Client, "server": m.Server, "state": m.State} {
		if len(raw) > 0 && !json.Valid(raw) {
			return fmt.Errorf("put MCP session %s: %s is not JSON", m.ID, name)
		}
	}
	m.StartedAt = orNow(m.StartedAt)
	m.LastSeenAt = orNow(m.LastSeenAt)
	_, err := s.b.Writer().Exec(ctx, `INSERT INTO mcp_sessions (`+mcpSessionCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
		ON CONFLICT (id) DO UPDATE SET owner_id = excluded.owner_id, trace_id = excluded.trace_id, dataset = excluded.dataset,
		transport = excluded.transport, client = excluded.client, server = excluded.server, server_name = excluded.server_name,
		protocol_version = excluded.protocol_version, upstream = excluded.upstream, system_user = excluded.system_user,
		last_seen_at = excluded.last_seen_at, ended_at = excluded.ended_at, state = excluded.state`,
		m.ID, m.OwnerID, m.TraceID, m.Dataset, m.Transport, nullJSON(m.Client), nullJSON(m.Server), m.ServerName, m.ProtocolVersion,
		m.Upstream, m.SystemUser, micros(m.StartedAt), micros(m.LastSeenAt), microsPtr(m.EndedAt), nullJSON(m.State))
	if err != nil {
		return fmt.Errorf("put MCP session %s: %w", m.ID, err)
	}
	return nil
}

// GetMCPSession implements store.MCP.
func (s *Store) GetMCPSession(ctx context.Context, id string) (*store.MCPSession, error) {
	m, err := scanMCPSession(s.b.Reader().QueryRow(ctx, `SELECT `+mcpSessionCols+` FROM mcp_sessions WHERE id = $1`, id))
	if err != nil {
		return nil, notFound(err, "MCP session "+id)
	}
	return m, nil
}

// ListMCPSessions implements store.MCP.
func (s *Store) ListMCPSessions(ctx context.Context, f store.MCPSessionFilter) ([]*store.MCPSession, error) {
	var p params
	var where []string
	if f.OwnerID != "" {
		where = append(where, `owner_id = `+p.add(f.OwnerID))
	}
	if f.Dataset != "" {
		where = append(where, `dataset = `+p.add(f.Dataset))
	}
	if f.Server != "" {
		where = append(where, `server_name = `+p.add(f.Server))
	}
	q := `SELECT ` + mcpSessionCols + ` FROM mcp_sessions`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	q += ` ORDER BY last_seen_at DESC, id` + limitOffset(&p, f.Limit, f.Offset)
	rows, err := s.b.Reader().Query(ctx, q, p.args...)
	if err != nil {
		return nil, fmt.Errorf("list MCP sessions: %w", err)
	}
	defer rows.Close()
	var out []*store.MCPSession
	for rows.Next() {
		m, err := scanMCPSession(rows)
		if err != nil {
			return nil, fmt.Errorf("list MCP sessions: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list MCP sessions: %w", err)
	}
	return out, nil
}

const mcpPinCols = `id, owner_id, server, tool, hash, pinned, status, pending_hash, pending, pending_first_seen, approved_by, time_approved, time_created`

func scanPin(r interface{ Scan(...any) error }) (*store.MCPPin, error) {
	p := &store.MCPPin{}
	var pinned string
	var ph, pend *string
	var first, approved *int64
	var created int64
	if err := r.Scan(&p.ID, &p.OwnerID, &p.Server, &p.Tool, &p.Hash, &pinned, &p.Status, &ph, &pend, &first, &p.ApprovedBy, &approved, &created); err != nil {
		return nil, err
	}
	p.Pinned = json.RawMessage(pinned)
	p.PendingHash = str(ph)
	if pend != nil {
		p.Pending = json.RawMessage(*pend)
	}
	p.PendingFirstSeen, p.TimeApproved = fromMicrosPtr(first), fromMicrosPtr(approved)
	p.TimeCreated = fromMicros(created)
	return p, nil
}

func pinRow(p *store.MCPPin) []any {
	return []any{p.ID, p.OwnerID, p.Server, p.Tool, p.Hash, objectOrEmpty(p.Pinned), p.Status, nullString(p.PendingHash), nullJSON(p.Pending),
		microsPtr(p.PendingFirstSeen), p.ApprovedBy, microsPtr(p.TimeApproved), micros(p.TimeCreated)}
}

func (s *Store) queryPins(ctx context.Context, q Querier, sql string, args ...any) ([]*store.MCPPin, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("MCP pins: %w", err)
	}
	defer rows.Close()
	var out []*store.MCPPin
	for rows.Next() {
		p, err := scanPin(rows)
		if err != nil {
			return nil, fmt.Errorf("MCP pins: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("MCP pins: %w", err)
	}
	return out, nil
}

// pinLockKey names the (owner, server) pin set for Backend.Lock.
func pinLockKey(ownerID, server string) int64 {
	h := fnv.New64a()
	h.Write([]byte(ownerID))
	h.Write([]byte{0})
	h.Write([]byte(server))
	return int64(h.Sum64() &^ (1 << 63))
}

// UpdateMCPPins implements store.MCP.
func (s *Store) UpdateMCPPins(ctx context.Context, ownerID, server string, fn func(pins []*store.MCPPin) ([]*store.MCPPin, error)) ([]*store.MCPPin, error) {
	var out []*store.MCPPin
	err := s.inTx(ctx, func(tx Tx) error {
		if err := s.b.Lock(ctx, tx, pinLockKey(ownerID, server)); err != nil {
			return fmt.Errorf("lock MCP pins of %s: %w", server, err)
		}
		cur, err := s.queryPins(ctx, tx, `SELECT `+mcpPinCols+` FROM mcp_pins WHERE owner_id = $1 AND server = $2 ORDER BY tool`, ownerID, server)
		if err != nil {
			return err
		}
		known := map[string]bool{}
		for _, p := range cur {
			known[p.ID] = true
		}
		out, err = fn(cur)
		if err != nil {
			return fmt.Errorf("MCP pins of %s: %w", server, err)
		}
		at := now()
		for _, p := range out {
			p.OwnerID, p.Server = ownerID, server
			if p.Status == "" {
				p.Status = store.PinApproved
			}
			if p.ID == "" || !known[p.ID] {
				if p.ID == "" {
					p.ID = store.NewID()
				}
				if p.TimeCreated.IsZero() {
					p.TimeCreated = at
				}
				if _, err := tx.Exec(ctx, `INSERT INTO mcp_pins (`+mcpPinCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`, pinRow(p)...); err != nil {
					return s.conflict(err, fmt.Sprintf("pin %s/%s", server, p.Tool))
				}
				continue
			}
			row := pinRow(p)
			if _, err := tx.Exec(ctx, `UPDATE mcp_pins SET tool = $4, hash = $5, pinned = $6, status = $7, pending_hash = $8, pending = $9,
				pending_first_seen = $10, approved_by = $11, time_approved = $12 WHERE id = $1 AND owner_id = $2 AND server = $3`, row[:12]...); err != nil {
				return s.conflict(err, fmt.Sprintf("pin %s/%s", server, p.Tool))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListMCPPins implements store.MCP.
func (s *Store) ListMCPPins(ctx context.Context, ownerID, server string) ([]*store.MCPPin, error) {
	if server != "" {
		return s.queryPins(ctx, s.b.Reader(), `SELECT `+mcpPinCols+` FROM mcp_pins WHERE owner_id = $1 AND server = $2 ORDER BY server, tool`, ownerID, server)
	}
	return s.queryPins(ctx, s.b.Reader(), `SELECT `+mcpPinCols+` FROM mcp_pins WHERE owner_id = $1 ORDER BY server, tool`, ownerID)
}

// GetMCPPin implements store.MCP.
func (s *Store) GetMCPPin(ctx context.Context, id string) (*store.MCPPin, error) {
	p, err := scanPin(s.b.Reader().QueryRow(ctx, `SELECT `+mcpPinCols+` FROM mcp_pins WHERE id = $1`, id))
	if err != nil {
		return nil, notFound(err, "MCP pin "+id)
	}
	return p, nil
}

// ApproveMCPPin implements store.MCP.
func (s *Store) ApproveMCPPin(ctx context.Context, id, by string, at time.Time) (*store.MCPPin, error) {
	var p *store.MCPPin
	err := s.inTx(ctx, func(tx Tx) error {
		var err error
		p, err = scanPin(tx.QueryRow(ctx, `SELECT `+mcpPinCols+` FROM mcp_pins WHERE id = $1`+s.b.ForUpdate(), id))
		if err != nil {
			return notFound(err, "MCP pin "+id)
		}
		if p.Status != store.PinPending || p.PendingHash == "" {
			return fmt.Errorf("approve MCP pin %s: nothing pending: %w", id, store.ErrConflict)
		}
		when := orNow(at)
		p.Hash, p.Pinned = p.PendingHash, p.Pending
		p.PendingHash, p.Pending, p.PendingFirstSeen = "", nil, nil
		p.Status, p.ApprovedBy, p.TimeApproved = store.PinApproved, by, &when
		row := pinRow(p)
		if _, err := tx.Exec(ctx, `UPDATE mcp_pins SET hash = $2, pinned = $3, status = $4, pending_hash = NULL, pending = NULL,
			pending_first_seen = NULL, approved_by = $5, time_approved = $6 WHERE id = $1`, id, p.Hash, row[5], p.Status, by, micros(when)); err != nil {
			return fmt.Errorf("approve MCP pin %s: %w", id, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// DeleteMCPPin implements store.MCP.
func (s *Store) DeleteMCPPin(ctx context.Context, id string) error {
	n, err := s.b.Writer().Exec(ctx, `DELETE FROM mcp_pins WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete MCP pin %s: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("delete MCP pin %s: %w", id, store.ErrNotFound)
	}
	return nil
}
