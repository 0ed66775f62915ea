package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/vigilhq/vigil/store"
)

const findingCols = `id, run_id, owner_id, node_id, monitor_id, monitor, key, title, severity, score, citations, status, context, history, created_at, updated_at`

func scanFinding(r interface{ Scan(...any) error }) (*store.Finding, error) {
	f := &store.Finding{}
	var node, ctxText *string
	var cites, hist string
	var c, u int64
	if err := r.Scan(&f.ID, &f.RunID, &f.OwnerID, &node, &f.MonitorID, &f.Monitor, &f.Key, &f.Title, &f.Severity, &f.Score,
		&cites, &f.Status, &ctxText, &hist, &c, &u); err != nil {
		return nil, err
	}
	f.NodeID = str(node)
	f.Citations = json.RawMessage(cites)
	if ctxText != nil {
		f.Context = json.RawMessage(*ctxText)
	}
	if err := json.Unmarshal([]byte(hist), &f.History); err != nil {
		return nil, fmt.Errorf("finding %s history: %w", f.ID, err)
	}
	f.CreatedAt, f.UpdatedAt = fromMicros(c), fromMicros(u)
	return f, nil
}

func citationsText(raw json.RawMessage) string {
	if len(raw) == 0 || isNull(raw) {
		return "[]"
	}
	return string(raw)
}

// UpsertFinding implements store.Findings.
func (s *Store) UpsertFinding(ctx context.Context, f *store.Finding) (*store.Finding, bool, error) {
	if f.MonitorID == "" || f.RunID == "" {
		return nil, false, fmt.Errorf("upsert finding: monitor id and run id are required")
	}
	if len(f.Citations) > 0 && !json.Valid(f.Citations) || len(f.Context) > 0 && !json.Valid(f.Context) {
		return nil, false, fmt.Errorf("upsert finding %s/%s: citations or context is not JSON", f.MonitorID, f.Key)
	}
	if f.ID == "" {
		f.ID = store.NewULID()
	}
	if f.Status == "" {
		f.Status = store.FindingOpen
	}
	f.CreatedAt = orNow(f.CreatedAt)
	if f.UpdatedAt.IsZero() {
		f.UpdatedAt = f.CreatedAt
	}
	if f.History == nil {
		f.History = []store.FindingTransition{}
	}
	hist, err := json.Marshal(f.History)
	if err != nil {
		return nil, false, fmt.Errorf("upsert finding: %w", err)
	}
	var out *store.Finding
	created := false
	err = s.inTx(ctx, func(tx Tx) error {
		n, err := tx.Exec(ctx, `INSERT INTO findings (`+findingCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
			ON CONFLICT (monitor_id, run_id, key) DO NOTHING`,
			f.ID, f.RunID, f.OwnerID, nullString(f.NodeID), f.MonitorID, f.Monitor, f.Key, f.Title, f.Severity, f.Score,
			citationsText(f.Citations), f.Status, nullJSON(f.Context), string(hist), micros(f.CreatedAt), micros(f.UpdatedAt))
		if err != nil {
			return s.conflict(err, "insert finding "+f.ID)
		}
		if n == 1 {
			created, out = true, f
			return nil
		}
		out, err = scanFinding(tx.QueryRow(ctx, `SELECT `+findingCols+` FROM findings WHERE monitor_id = $1 AND run_id = $2 AND key = $3`+s.b.ForUpdate(),
			f.MonitorID, f.RunID, f.Key))
		if err != nil {
			return fmt.Errorf("update finding %s/%s: %w", f.MonitorID, f.Key, err)
		}
		out.Title, out.Severity, out.Score, out.NodeID, out.Monitor = f.Title, f.Severity, f.Score, f.NodeID, f.Monitor
		out.Citations = json.RawMessage(citationsText(f.Citations))
		out.Context = f.Context
		out.UpdatedAt = orNow(f.UpdatedAt)
		_, err = tx.Exec(ctx, `UPDATE findings SET title = $2, severity = $3, score = $4, node_id = $5, monitor = $6, citations = $7, context = $8, updated_at = $9 WHERE id = $1`,
			out.ID, out.Title, out.Severity, out.Score, nullString(out.NodeID), out.Monitor, string(out.Citations), nullJSON(out.Context), micros(out.UpdatedAt))
		if err != nil {
			return fmt.Errorf("update finding %s: %w", out.ID, err)
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return out, created, nil
}

// GetFinding implements store.Findings.
func (s *Store) GetFinding(ctx context.Context, id string) (*store.Finding, error) {
	f, err := scanFinding(s.b.Reader().QueryRow(ctx, `SELECT `+findingCols+` FROM findings WHERE id = $1`, id))
	if err != nil {
		return nil, notFound(err, "finding "+id)
	}
	return f, nil
}

// ListFindings implements store.Findings.
func (s *Store) ListFindings(ctx context.Context, f store.FindingFilter) ([]*store.Finding, error) {
	var p params
	var where []string
	if f.OwnerID != "" {
		where = append(where, `owner_id = `+p.add(f.OwnerID))
	}
	if f.RunID != "" {
		where = append(where, `run_id = `+p.add(f.RunID))
	}
	if f.RunIDs != nil {
		p.add(s.b.ListArg(f.RunIDs))
		where = append(where, s.b.In("run_id", p.n()))
	}
	if f.MonitorID != "" {
		where = append(where, `monitor_id = `+p.add(f.MonitorID))
	}
	if f.Status != nil {
		p.add(s.b.ListArg(f.Status))
		where = append(where, s.b.In("status", p.n()))
	}
	if f.Severity != nil {
		p.add(s.b.ListArg(f.Severity))
		where = append(where, s.b.In("severity", p.n()))
	}
	q := `SELECT ` + findingCols + ` FROM findings`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	if f.ReviewOrder {
		q += ` ORDER BY CASE severity WHEN 'critical' THEN 0 WHEN 'warn' THEN 1 ELSE 2 END, created_at, id`
	} else {
		q += ` ORDER BY created_at, id`
	}
	q += limitOffset(&p, f.Limit, f.Offset)
	rows, err := s.b.Reader().Query(ctx, q, p.args...)
	if err != nil {
		return nil, fmt.Errorf("list findings: %w", err)
	}
	defer rows.Close()
	var out []*store.Finding
	for rows.Next() {
		fd, err := scanFinding(rows)
		if err != nil {
			return nil, fmt.Errorf("list findings: %w", err)
		}
		out = append(out, fd)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list findings: %w", err)
	}
	return out, nil
}

// SetFindingStatus implements store.Findings.
func (s *Store) SetFindingStatus(ctx context.Context, id, to, by, note string, at time.Time) (*store.Finding, error) {
	var f *store.Finding
	err := s.inTx(ctx, func(tx Tx) error {
		var err error
		f, err = scanFinding(tx.QueryRow(ctx, `SELECT `+findingCols+` FROM findings WHERE id = $1`+s.b.ForUpdate(), id))
		if err != nil {
			return notFound(err, "finding "+id)
		}
		from := f.Status
		ok := from == store.FindingOpen && (to == store.FindingAccepted || to == store.FindingDismissed) ||
			(from == store.FindingAccepted || from == store.FindingDismissed) && to == store.FindingOpen
		if !ok {
			return fmt.Errorf("finding %s: status %s → %q is not a review transition: %w", id, from, to, store.ErrConflict)
		}
		when := orNow(at)
		f.Status, f.UpdatedAt = to, when
		f.History = append(f.History, store.FindingTransition{At: when, By: by, From: from, To: to, Note: note})
		hist, err := json.Marshal(f.History)
		if err != nil {
			return fmt.Errorf("finding %s: %w", id, err)
		}
		if _, err := tx.Exec(ctx, `UPDATE findings SET status = $2, history = $3, updated_at = $4 WHERE id = $1`, id, to, string(hist), micros(when)); err != nil {
			return fmt.Errorf("finding %s: %w", id, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// ListEvalCases implements store.Findings. The text filter on "eval" only
// narrows the scan; each candidate's metadata is decoded and checked.
func (s *Store) ListEvalCases(ctx context.Context, ownerID, suite string) ([]store.EvalCase, error) {
	var p params
	q := `SELECT id, owner_id, metadata, time_created FROM traces WHERE metadata LIKE '%"eval"%'`
	if ownerID != "" {
		q += ` AND owner_id = ` + p.add(ownerID)
	}
	q += ` ORDER BY time_created, id`
	rows, err := s.b.Reader().Query(ctx, q, p.args...)
	if err != nil {
		return nil, fmt.Errorf("list eval cases: %w", err)
	}
	defer rows.Close()
	out := []store.EvalCase{}
	for rows.Next() {
		var c store.EvalCase
		var md string
		var tc int64
		if err := rows.Scan(&c.RunID, &c.OwnerID, &md, &tc); err != nil {
			return nil, fmt.Errorf("list eval cases: %w", err)
		}
		var m struct {
			Eval *struct {
				Suite *string `json:"suite"`
				Case  *string `json:"case"`
			} `json:"eval"`
		}
		if json.Unmarshal([]byte(md), &m) != nil || m.Eval == nil || m.Eval.Suite == nil || m.Eval.Case == nil ||
			*m.Eval.Suite == "" || *m.Eval.Case == "" {
			continue
		}
		c.Suite, c.Case, c.TimeCreated = *m.Eval.Suite, *m.Eval.Case, fromMicros(tc)
		if suite != "" && c.Suite != suite {
			continue
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list eval cases: %w", err)
	}
	return out, nil
}
