package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/vigilhq/vigil/store"
)

const guardrailCols = `id, dataset_id, owner_id, name, content, enabled, action, severity, scope, extra_metadata, version, updated_by, time_created, time_updated, deleted`

const versionCols = `guardrail_id, dataset_id, version, ruleset_version, name, content, enabled, action, severity, scope, extra_metadata, change, comment, author_id, time_created`

func scanGuardrail(r interface{ Scan(...any) error }) (*store.Guardrail, bool, error) {
	g := &store.Guardrail{}
	var scope *string
	var extra string
	var tc, tu int64
	var deleted bool
	if err := r.Scan(&g.ID, &g.DatasetID, &g.OwnerID, &g.Name, &g.Content, &g.Enabled, &g.Action, &g.Severity, &scope, &extra,
		&g.Version, &g.UpdatedBy, &tc, &tu, &deleted); err != nil {
		return nil, false, err
	}
	if scope != nil {
		g.Scope = json.RawMessage(*scope)
	}
	g.ExtraMetadata = json.RawMessage(extra)
	g.TimeCreated, g.TimeUpdated = fromMicros(tc), fromMicros(tu)
	return g, deleted, nil
}

func scanVersion(r interface{ Scan(...any) error }) (*store.GuardrailVersion, error) {
	v := &store.GuardrailVersion{}
	var scope *string
	var extra string
	var tc int64
	if err := r.Scan(&v.GuardrailID, &v.DatasetID, &v.Version, &v.RulesetVersion, &v.Name, &v.Content, &v.Enabled, &v.Action, &v.Severity,
		&scope, &extra, &v.Change, &v.Comment, &v.AuthorID, &tc); err != nil {
		return nil, err
	}
	if scope != nil {
		v.Scope = json.RawMessage(*scope)
	}
	v.ExtraMetadata = json.RawMessage(extra)
	v.TimeCreated = fromMicros(tc)
	return v, nil
}

func nullJSON(raw json.RawMessage) *string {
	if len(raw) == 0 || isNull(raw) {
		return nil
	}
	s := string(raw)
	return &s
}

// bumpRuleset raises the dataset's ruleset version and appends the change
// feed entry, serialised on the feed lock so Seq order is commit order.
func (s *Store) bumpRuleset(ctx context.Context, tx Tx, datasetID string, at time.Time) (int64, string, error) {
	if err := s.b.Lock(ctx, tx, lockGuardrailFeed); err != nil {
		return 0, "", fmt.Errorf("guardrail feed lock: %w", err)
	}
	var rv int64
	var owner string
	if err := tx.QueryRow(ctx, `UPDATE datasets SET ruleset_version = ruleset_version + 1 WHERE id = $1 RETURNING ruleset_version, owner_id`,
		datasetID).Scan(&rv, &owner); err != nil {
		return 0, "", notFound(err, "dataset "+datasetID)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO guardrail_changes (dataset_id, owner_id, ruleset_version, time) VALUES ($1, $2, $3, $4)`,
		datasetID, owner, rv, micros(at)); err != nil {
		return 0, "", fmt.Errorf("guardrail feed: %w", err)
	}
	return rv, owner, nil
}

// writeGuardrail upserts g's current row and appends its version row.
func (s *Store) writeGuardrail(ctx context.Context, tx Tx, g *store.Guardrail, deleted bool, rv int64, change, comment string, insert bool) error {
	extra := objectOrEmpty(g.ExtraMetadata)
	var err error
	if insert {
		_, err = tx.Exec(ctx, `INSERT INTO guardrails (`+guardrailCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`,
			g.ID, g.DatasetID, g.OwnerID, g.Name, g.Content, g.Enabled, g.Action, g.Severity, nullJSON(g.Scope), extra,
			g.Version, g.UpdatedBy, micros(g.TimeCreated), micros(g.TimeUpdated), deleted)
	} else {
		_, err = tx.Exec(ctx, `UPDATE guardrails SET name = $2, content = $3, enabled = $4, action = $5, severity = $6, scope = $7,
			extra_metadata = $8, version = $9, updated_by = $10, time_updated = $11, deleted = $12 WHERE id = $1`,
			g.ID, g.Name, g.Content, g.Enabled, g.Action, g.Severity, nullJSON(g.Scope), extra, g.Version, g.UpdatedBy, micros(g.TimeUpdated), deleted)
	}
	if err != nil {
		return s.conflict(err, "write guardrail "+g.ID)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO guardrail_versions (`+versionCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`,
		g.ID, g.DatasetID, g.Version, rv, g.Name, g.Content, g.Enabled, g.Action, g.Severity, nullJSON(g.Scope), extra,
		change, comment, g.UpdatedBy, micros(g.TimeUpdated)); err != nil {
		return s.conflict(err, "write guardrail version "+g.ID)
	}
	return nil
}

// CreateGuardrail implements store.Guardrails.
func (s *Store) CreateGuardrail(ctx context.Context, g *store.Guardrail, change, comment string) error {
	if change != store.GuardrailCreated && change != store.GuardrailImported {
		return fmt.Errorf("create guardrail: change %q is not created or imported", change)
	}
	if err := checkObject(g.ExtraMetadata, "create guardrail: extra_metadata"); err != nil {
		return err
	}
	if g.ID == "" {
		g.ID = store.NewID()
	}
	if g.Severity == "" {
		g.Severity = "warn"
	}
	if g.Action == "" {
		g.Action = "log"
	}
	g.ExtraMetadata = json.RawMessage(objectOrEmpty(g.ExtraMetadata))
	return s.inTx(ctx, func(tx Tx) error {
		at := now()
		rv, owner, err := s.bumpRuleset(ctx, tx, g.DatasetID, at)
		if err != nil {
			return fmt.Errorf("create guardrail: %w", err)
		}
		g.OwnerID, g.Version, g.TimeCreated, g.TimeUpdated = owner, 1, at, at
		return s.writeGuardrail(ctx, tx, g, false, rv, change, comment, true)
	})
}

// GetGuardrail implements store.Guardrails.
func (s *Store) GetGuardrail(ctx context.Context, id string) (*store.Guardrail, error) {
	g, deleted, err := scanGuardrail(s.b.Reader().QueryRow(ctx, `SELECT `+guardrailCols+` FROM guardrails WHERE id = $1`, id))
	if err == nil && deleted {
		err = ErrNoRows
	}
	if err != nil {
		return nil, notFound(err, "guardrail "+id)
	}
	return g, nil
}

// ListGuardrails implements store.Guardrails.
func (s *Store) ListGuardrails(ctx context.Context, datasetID string) ([]*store.Guardrail, error) {
	rows, err := s.b.Reader().Query(ctx, `SELECT `+guardrailCols+` FROM guardrails WHERE dataset_id = $1 AND NOT deleted ORDER BY time_created, id`, datasetID)
	if err != nil {
		return nil, fmt.Errorf("list guardrails of dataset %s: %w", datasetID, err)
	}
	defer rows.Close()
	var out []*store.Guardrail
	for rows.Next() {
		g, _, err := scanGuardrail(rows)
		if err != nil {
			return nil, fmt.Errorf("list guardrails of dataset %s: %w", datasetID, err)
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list guardrails of dataset %s: %w", datasetID, err)
	}
	return out, nil
}

// lockGuardrail reads and locks guardrail id (deleted ones too).
func (s *Store) lockGuardrail(ctx context.Context, tx Tx, id string) (*store.Guardrail, bool, error) {
	g, deleted, err := scanGuardrail(tx.QueryRow(ctx, `SELECT `+guardrailCols+` FROM guardrails WHERE id = $1`+s.b.ForUpdate(), id))
	if err != nil {
		return nil, false, notFound(err, "guardrail "+id)
	}
	return g, deleted, nil
}

// UpdateGuardrail implements store.Guardrails.
func (s *Store) UpdateGuardrail(ctx context.Context, id string, up store.GuardrailUpdate) (*store.Guardrail, error) {
	if up.ExtraMetadata != nil {
		if err := checkObject(up.ExtraMetadata, "update guardrail "+id+": extra_metadata"); err != nil {
			return nil, err
		}
	}
	var g *store.Guardrail
	err := s.inTx(ctx, func(tx Tx) error {
		var deleted bool
		var err error
		g, deleted, err = s.lockGuardrail(ctx, tx, id)
		if err == nil && deleted {
			err = fmt.Errorf("guardrail %s is deleted: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("update: %w", err)
		}
		if up.BaseVersion > 0 && up.BaseVersion != g.Version {
			return fmt.Errorf("update guardrail %s: base version %d, current %d: %w", id, up.BaseVersion, g.Version, store.ErrConflict)
		}
		if up.Name != nil {
			g.Name = *up.Name
		}
		if up.Content != nil {
			g.Content = *up.Content
		}
		if up.Enabled != nil {
			g.Enabled = *up.Enabled
		}
		if up.Action != nil {
			g.Action = *up.Action
		}
		if up.Severity != nil {
			g.Severity = *up.Severity
		}
		if up.Scope != nil {
			g.Scope = *up.Scope
		}
		if up.ExtraMetadata != nil {
			g.ExtraMetadata = up.ExtraMetadata
		}
		at := now()
		rv, _, err := s.bumpRuleset(ctx, tx, g.DatasetID, at)
		if err != nil {
			return fmt.Errorf("update guardrail %s: %w", id, err)
		}
		g.Version++
		g.UpdatedBy, g.TimeUpdated = up.AuthorID, at
		return s.writeGuardrail(ctx, tx, g, false, rv, store.GuardrailUpdated, up.Comment, false)
	})
	if err != nil {
		return nil, err
	}
	return g, nil
}

// DeleteGuardrail implements store.Guardrails.
func (s *Store) DeleteGuardrail(ctx context.Context, id, authorID, comment string) error {
	return s.inTx(ctx, func(tx Tx) error {
		g, deleted, err := s.lockGuardrail(ctx, tx, id)
		if err == nil && deleted {
			err = fmt.Errorf("guardrail %s is already deleted: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("delete: %w", err)
		}
		at := now()
		rv, _, err := s.bumpRuleset(ctx, tx, g.DatasetID, at)
		if err != nil {
			return fmt.Errorf("delete guardrail %s: %w", id, err)
		}
		g.Version++
		g.UpdatedBy, g.TimeUpdated = authorID, at
		return s.writeGuardrail(ctx, tx, g, true, rv, store.GuardrailDeleted, comment, false)
	})
}

// RestoreGuardrail implements store.Guardrails.
func (s *Store) RestoreGuardrail(ctx context.Context, id string, n int, authorID, comment string) (*store.Guardrail, error) {
	var g *store.Guardrail
	err := s.inTx(ctx, func(tx Tx) error {
		var err error
		g, _, err = s.lockGuardrail(ctx, tx, id)
		if err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		v, err := scanVersion(tx.QueryRow(ctx, `SELECT `+versionCols+` FROM guardrail_versions WHERE guardrail_id = $1 AND version = $2`, id, n))
		if err != nil {
			return notFound(err, fmt.Sprintf("restore guardrail %s version %d", id, n))
		}
		g.Name, g.Content, g.Enabled, g.Action, g.Severity, g.Scope, g.ExtraMetadata = v.Name, v.Content, v.Enabled, v.Action, v.Severity, v.Scope, v.ExtraMetadata
		at := now()
		rv, _, err := s.bumpRuleset(ctx, tx, g.DatasetID, at)
		if err != nil {
			return fmt.Errorf("restore guardrail %s: %w", id, err)
		}
		g.Version++
		g.UpdatedBy, g.TimeUpdated = authorID, at
		return s.writeGuardrail(ctx, tx, g, false, rv, store.GuardrailRestored, comment, false)
	})
	if err != nil {
		return nil, err
	}
	return g, nil
}

func (s *Store) queryVersions(ctx context.Context, what, q string, args ...any) ([]*store.GuardrailVersion, error) {
	rows, err := s.b.Reader().Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var out []*store.GuardrailVersion
	for rows.Next() {
		v, err := scanVersion(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// ListGuardrailVersions implements store.Guardrails.
func (s *Store) ListGuardrailVersions(ctx context.Context, id string) ([]*store.GuardrailVersion, error) {
	out, err := s.queryVersions(ctx, "guardrail "+id+" versions",
		`SELECT `+versionCols+` FROM guardrail_versions WHERE guardrail_id = $1 ORDER BY version DESC`, id)
	if err == nil && len(out) == 0 {
		err = fmt.Errorf("guardrail %s versions: %w", id, store.ErrNotFound)
	}
	return out, err
}

// GetGuardrailVersion implements store.Guardrails.
func (s *Store) GetGuardrailVersion(ctx context.Context, id string, n int) (*store.GuardrailVersion, error) {
	v, err := scanVersion(s.b.Reader().QueryRow(ctx, `SELECT `+versionCols+` FROM guardrail_versions WHERE guardrail_id = $1 AND version = $2`, id, n))
	if err != nil {
		return nil, notFound(err, fmt.Sprintf("guardrail %s version %d", id, n))
	}
	return v, nil
}

// ListPolicyHistory implements store.Guardrails.
func (s *Store) ListPolicyHistory(ctx context.Context, datasetID string, limit, offset int) ([]*store.GuardrailVersion, error) {
	var p params
	q := `SELECT ` + versionCols + ` FROM guardrail_versions WHERE dataset_id = ` + p.add(datasetID) +
		` ORDER BY ruleset_version DESC, guardrail_id` + limitOffset(&p, limit, offset)
	return s.queryVersions(ctx, "policy history of dataset "+datasetID, q, p.args...)
}

// RulesetAt implements store.Guardrails.
func (s *Store) RulesetAt(ctx context.Context, datasetID string, rv int64) ([]*store.Guardrail, error) {
	var cur int64
	if err := s.b.Reader().QueryRow(ctx, `SELECT ruleset_version FROM datasets WHERE id = $1`, datasetID).Scan(&cur); err != nil {
		return nil, notFound(err, "dataset "+datasetID)
	}
	if rv < 0 || rv > cur {
		return nil, fmt.Errorf("dataset %s ruleset %d (current %d): %w", datasetID, rv, cur, store.ErrNotFound)
	}
	vs, err := s.queryVersions(ctx, fmt.Sprintf("dataset %s ruleset %d", datasetID, rv), `SELECT `+prefixed("v", splitCols(versionCols))+`
		FROM guardrail_versions v
		JOIN (SELECT guardrail_id, MAX(ruleset_version) AS rv FROM guardrail_versions
		      WHERE dataset_id = $1 AND ruleset_version <= $2 GROUP BY guardrail_id) m
		  ON m.guardrail_id = v.guardrail_id AND m.rv = v.ruleset_version
		WHERE v.change <> 'deleted'`, datasetID, rv)
	if err != nil {
		return nil, err
	}
	out := make([]*store.Guardrail, 0, len(vs))
	for _, v := range vs {
		first, err := s.GetGuardrailVersion(ctx, v.GuardrailID, 1)
		if err != nil {
			return nil, err
		}
		var owner string
		if err := s.b.Reader().QueryRow(ctx, `SELECT owner_id FROM guardrails WHERE id = $1`, v.GuardrailID).Scan(&owner); err != nil {
			return nil, notFound(err, "guardrail "+v.GuardrailID)
		}
		out = append(out, &store.Guardrail{ID: v.GuardrailID, DatasetID: v.DatasetID, OwnerID: owner, Name: v.Name, Content: v.Content,
			Enabled: v.Enabled, Action: v.Action, Severity: v.Severity, Scope: v.Scope, ExtraMetadata: v.ExtraMetadata,
			Version: v.Version, UpdatedBy: v.AuthorID, TimeCreated: first.TimeCreated, TimeUpdated: v.TimeCreated})
	}
	sortGuardrails(out)
	return out, nil
}

func sortGuardrails(gs []*store.Guardrail) {
	slices.SortFunc(gs, func(a, b *store.Guardrail) int {
		if c := a.TimeCreated.Compare(b.TimeCreated); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// ListGuardrailChanges implements store.Guardrails.
func (s *Store) ListGuardrailChanges(ctx context.Context, after int64, limit int) (*store.GuardrailFeed, error) {
	feed := &store.GuardrailFeed{Changes: []store.GuardrailChange{}}
	if err := s.b.Reader().QueryRow(ctx, `SELECT COALESCE(MAX(seq), 0), COALESCE(MIN(seq), 0) FROM guardrail_changes`).Scan(&feed.Latest, &feed.Oldest); err != nil {
		return nil, fmt.Errorf("guardrail changes: %w", err)
	}
	var p params
	q := `SELECT seq, dataset_id, owner_id, ruleset_version, time FROM guardrail_changes WHERE seq > ` + p.add(after) +
		` ORDER BY seq` + limitOffset(&p, limit, 0)
	rows, err := s.b.Reader().Query(ctx, q, p.args...)
	if err != nil {
		return nil, fmt.Errorf("guardrail changes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var c store.GuardrailChange
		var t int64
		if err := rows.Scan(&c.Seq, &c.DatasetID, &c.OwnerID, &c.RulesetVersion, &t); err != nil {
			return nil, fmt.Errorf("guardrail changes: %w", err)
		}
		c.Time = fromMicros(t)
		feed.Changes = append(feed.Changes, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("guardrail changes: %w", err)
	}
	if n := len(feed.Changes); n > 0 && feed.Changes[n-1].Seq > feed.Latest {
		feed.Latest = feed.Changes[n-1].Seq // committed after the MAX read
	}
	return feed, nil
}

// PurgeGuardrailChanges implements store.Guardrails.
func (s *Store) PurgeGuardrailChanges(ctx context.Context, before time.Time) (int, error) {
	n, err := s.b.Writer().Exec(ctx, `DELETE FROM guardrail_changes WHERE time < $1 AND seq < (SELECT MAX(seq) FROM guardrail_changes)`, micros(before))
	if err != nil {
		return 0, fmt.Errorf("purge guardrail changes: %w", err)
	}
	return int(n), nil
}
