package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vigilhq/vigil/store"
)

const datasetCols = `id, owner_id, name, metadata, is_public, time_created, latest_trace_time, next_index, num_traces, ruleset_version`

func scanDataset(r interface{ Scan(...any) error }) (*store.Dataset, error) {
	d := &store.Dataset{}
	var md string
	var tc int64
	var latest *int64
	if err := r.Scan(&d.ID, &d.OwnerID, &d.Name, &md, &d.IsPublic, &tc, &latest, &d.NextIndex, &d.NumTraces, &d.RulesetVersion); err != nil {
		return nil, err
	}
	d.Metadata = json.RawMessage(md)
	d.TimeCreated = fromMicros(tc)
	d.LatestTraceTime = fromMicrosPtr(latest)
	return d, nil
}

func objectOrEmpty(raw json.RawMessage) string {
	if len(strings.TrimSpace(string(raw))) == 0 || isNull(raw) {
		return "{}"
	}
	return string(raw)
}

// checkObject reports whether raw is empty, null or a JSON object.
func checkObject(raw json.RawMessage, what string) error {
	if len(strings.TrimSpace(string(raw))) == 0 || isNull(raw) {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("%s: not a JSON object: %w", what, err)
	}
	return nil
}

func isNull(raw json.RawMessage) bool { return strings.TrimSpace(string(raw)) == "null" }

// CreateDataset implements store.Datasets.
func (s *Store) CreateDataset(ctx context.Context, d *store.Dataset) error {
	if d.ID == "" {
		d.ID = store.NewID()
	}
	d.TimeCreated = orNow(d.TimeCreated)
	if err := checkObject(d.Metadata, fmt.Sprintf("create dataset %q: metadata", d.Name)); err != nil {
		return err
	}
	d.Metadata = json.RawMessage(objectOrEmpty(d.Metadata))
	_, err := s.b.Writer().Exec(ctx, `INSERT INTO datasets (`+datasetCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 0, 0)`,
		d.ID, d.OwnerID, d.Name, string(d.Metadata), d.IsPublic, micros(d.TimeCreated), microsPtr(d.LatestTraceTime), d.NextIndex)
	if err != nil {
		return s.conflict(err, fmt.Sprintf("create dataset %q", d.Name))
	}
	d.NumTraces, d.RulesetVersion = 0, 0
	return nil
}

// GetDataset implements store.Datasets.
func (s *Store) GetDataset(ctx context.Context, id string) (*store.Dataset, error) {
	d, err := scanDataset(s.b.Reader().QueryRow(ctx, `SELECT `+datasetCols+` FROM datasets WHERE id = $1`, id))
	if err != nil {
		return nil, notFound(err, "dataset "+id)
	}
	return d, nil
}

// GetDatasetByName implements store.Datasets.
func (s *Store) GetDatasetByName(ctx context.Context, ownerID, name string) (*store.Dataset, error) {
	d, err := scanDataset(s.b.Reader().QueryRow(ctx, `SELECT `+datasetCols+` FROM datasets WHERE owner_id = $1 AND name = $2`, ownerID, name))
	if err != nil {
		return nil, notFound(err, fmt.Sprintf("dataset %q", name))
	}
	return d, nil
}

// ListDatasets implements store.Datasets.
func (s *Store) ListDatasets(ctx context.Context, f store.DatasetFilter) ([]*store.Dataset, error) {
	var p params
	var where []string
	if f.OwnerID != "" {
		where = append(where, `owner_id = `+p.add(f.OwnerID))
	}
	if f.VisibleTo != "" {
		where = append(where, `(owner_id = `+p.add(f.VisibleTo)+` OR is_public)`)
	}
	if f.PublicOnly {
		where = append(where, `is_public`)
	}
	if f.NameContains != "" {
		where = append(where, `LOWER(name) LIKE `+p.add("%"+escapeLike(strings.ToLower(f.NameContains))+"%")+` ESCAPE '\'`)
	}
	if f.MetadataKey != "" {
		p.add(f.MetadataKey)
		k := p.n()
		p.add(f.MetadataValue)
		where = append(where, s.b.JSONStringEquals("metadata", k, p.n()))
	}
	q := `SELECT ` + datasetCols + ` FROM datasets`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	q += ` ORDER BY COALESCE(latest_trace_time, time_created) DESC, id`
	q += limitOffset(&p, f.Limit, f.Offset)
	rows, err := s.b.Reader().Query(ctx, q, p.args...)
	if err != nil {
		return nil, fmt.Errorf("list datasets: %w", err)
	}
	defer rows.Close()
	var out []*store.Dataset
	for rows.Next() {
		d, err := scanDataset(rows)
		if err != nil {
			return nil, fmt.Errorf("list datasets: %w", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list datasets: %w", err)
	}
	return out, nil
}

// limitOffset renders LIMIT/OFFSET (LIMIT ALL is spelled as a huge number
// so both databases accept an offset without a limit).
func limitOffset(p *params, limit, offset int) string {
	if limit <= 0 && offset <= 0 {
		return ""
	}
	l := int64(limit)
	if limit <= 0 {
		l = 1<<62 - 1
	}
	q := ` LIMIT ` + p.add(l)
	if offset > 0 {
		q += ` OFFSET ` + p.add(int64(offset))
	}
	return q
}

// UpdateDataset implements store.Datasets.
func (s *Store) UpdateDataset(ctx context.Context, id string, up store.DatasetUpdate) (*store.Dataset, error) {
	var d *store.Dataset
	err := s.inTx(ctx, func(tx Tx) error {
		var err error
		d, err = scanDataset(tx.QueryRow(ctx, `SELECT `+datasetCols+` FROM datasets WHERE id = $1`+s.b.ForUpdate(), id))
		if err != nil {
			return notFound(err, "dataset "+id)
		}
		if up.IsPublic != nil {
			d.IsPublic = *up.IsPublic
		}
		if up.Name != nil && *up.Name != d.Name {
			var one int
			err := tx.QueryRow(ctx, `SELECT 1 FROM datasets WHERE owner_id = $1 AND name = $2`, d.OwnerID, *up.Name).Scan(&one)
			if err == nil {
				return fmt.Errorf("rename dataset %s to %q: %w", id, *up.Name, store.ErrConflict)
			}
			if !errors.Is(err, ErrNoRows) {
				return fmt.Errorf("rename dataset %s: %w", id, err)
			}
			d.Name = *up.Name
		}
		if _, err := tx.Exec(ctx, `UPDATE datasets SET is_public = $2, name = $3 WHERE id = $1`, id, d.IsPublic, d.Name); err != nil {
			return s.conflict(err, "update dataset "+id)
		}
		return nil
	})
	return d, err
}

// DeleteDataset implements store.Datasets.
//
// The traces go first, deleteBatch at a time, each batch in its own short
// transaction, so that on SQLite (one writer) pushes interleave with a
// large delete instead of waiting for all of it (a 200,000-trace dataset
// blocked every push for 12 s). A last transaction removes what remains,
// including traces pushed meanwhile, and the dataset row. A failure midway
// leaves the dataset with fewer traces; deleting again finishes the job.
func (s *Store) DeleteDataset(ctx context.Context, id string, closeFn store.CloseFunc) error {
	var one int
	if err := s.b.Reader().QueryRow(ctx, `SELECT 1 FROM datasets WHERE id = $1`, id).Scan(&one); err != nil {
		return notFound(err, "dataset "+id)
	}
	for {
		n, err := s.deleteTraceBatch(ctx, id, closeFn)
		if err != nil {
			return fmt.Errorf("delete dataset %s: %w", id, err)
		}
		if n < deleteBatch {
			break
		}
	}
	return s.inTx(ctx, func(tx Tx) error {
		// Lock in the order appends do (trace, session, dataset) so the
		// two cannot deadlock on PostgreSQL.
		if lock := s.b.ForUpdate(); lock != "" {
			if _, err := tx.Exec(ctx, `SELECT id FROM traces WHERE dataset_id = $1 ORDER BY id`+lock, id); err != nil {
				return fmt.Errorf("delete dataset %s: %w", id, err)
			}
		}
		if closeFn != nil {
			if err := s.closeOpenSessions(ctx, tx, `run_id IN (SELECT id FROM traces WHERE dataset_id = $1)`, id, closeFn); err != nil {
				return fmt.Errorf("delete dataset %s: %w", id, err)
			}
		}
		var one int
		if err := tx.QueryRow(ctx, `SELECT 1 FROM datasets WHERE id = $1`+s.b.ForUpdate(), id).Scan(&one); err != nil {
			return notFound(err, "dataset "+id)
		}
		for _, q := range []string{
			`DELETE FROM annotations WHERE trace_id IN (SELECT id FROM traces WHERE dataset_id = $1)`,
			`DELETE FROM messages WHERE trace_id IN (SELECT id FROM traces WHERE dataset_id = $1)`,
			markPendingFrom(`dataset_id = $1`),
			`DELETE FROM traces WHERE dataset_id = $1`,
			`DELETE FROM dataset_tools WHERE dataset_id = $1`,
			`DELETE FROM saved_queries WHERE dataset_id = $1`,
			`DELETE FROM guardrail_versions WHERE dataset_id = $1`,
			`DELETE FROM guardrails WHERE dataset_id = $1`,
			`DELETE FROM datasets WHERE id = $1`,
		} {
			if _, err := tx.Exec(ctx, q, id); err != nil {
				return fmt.Errorf("delete dataset %s: %w", id, err)
			}
		}
		return nil
	})
}

// deleteBatch is how many traces one transaction of DeleteDataset deletes:
// a few milliseconds of writing on SQLite.
const deleteBatch = 256

// traceBatchQuery selects the next batch of a dataset's traces to delete
// (forUpdate: the backend's row-lock clause). It walks the (dataset_id,
// idx) index in order: ordering by id sorted every remaining trace for each
// batch, so deleting 200,000 traces took minutes instead of seconds.
func traceBatchQuery(forUpdate string) string {
	return `SELECT id FROM traces WHERE dataset_id = $1 ORDER BY idx LIMIT ` + strconv.Itoa(deleteBatch) + forUpdate
}

// deleteTraceBatch deletes up to deleteBatch traces of dataset id with
// their messages and annotations, closing their open sessions with closeFn
// (nil: left open), in one transaction, and returns how many it deleted.
func (s *Store) deleteTraceBatch(ctx context.Context, id string, closeFn store.CloseFunc) (int, error) {
	var n int
	err := s.inTx(ctx, func(tx Tx) error {
		rows, err := tx.Query(ctx, traceBatchQuery(s.b.ForUpdate()), id)
		if err != nil {
			return err
		}
		var ids []string
		for rows.Next() {
			var tid string
			if err := rows.Scan(&tid); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, tid)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if n = len(ids); n == 0 {
			return nil
		}
		list := s.b.ListArg(ids)
		if closeFn != nil {
			if err := s.closeOpenSessions(ctx, tx, s.b.In("run_id", 1), list, closeFn); err != nil {
				return err
			}
		}
		for _, q := range []string{
			`DELETE FROM annotations WHERE ` + s.b.In("trace_id", 1),
			`DELETE FROM messages WHERE ` + s.b.In("trace_id", 1),
			markPendingFrom(s.b.In("id", 1)),
			`DELETE FROM traces WHERE ` + s.b.In("id", 1),
		} {
			if _, err := tx.Exec(ctx, q, list); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, `UPDATE datasets SET num_traces = num_traces - $2 WHERE id = $1`, id, n)
		return err
	})
	return n, err
}

// PutDatasetMetadata implements store.Datasets.
func (s *Store) PutDatasetMetadata(ctx context.Context, id string, patch map[string]json.RawMessage, replaceAll bool) (json.RawMessage, error) {
	var out json.RawMessage
	err := s.inTx(ctx, func(tx Tx) error {
		var cur string
		if err := tx.QueryRow(ctx, `SELECT metadata FROM datasets WHERE id = $1`+s.b.ForUpdate(), id).Scan(&cur); err != nil {
			return notFound(err, "dataset "+id)
		}
		var err error
		out, err = store.MergeMetadata(json.RawMessage(cur), patch, replaceAll)
		if err != nil {
			return fmt.Errorf("dataset %s metadata: %w", id, err)
		}
		if _, err := tx.Exec(ctx, `UPDATE datasets SET metadata = $2 WHERE id = $1`, id, string(out)); err != nil {
			return fmt.Errorf("dataset %s metadata: %w", id, err)
		}
		return nil
	})
	return out, err
}

// ListTools implements store.Datasets.
func (s *Store) ListTools(ctx context.Context, datasetID string) ([]*store.Tool, error) {
	rows, err := s.b.Reader().Query(ctx, `SELECT name, count, argument_keys, last_seen FROM dataset_tools WHERE dataset_id = $1 ORDER BY name`, datasetID)
	if err != nil {
		return nil, fmt.Errorf("dataset %s tools: %w", datasetID, err)
	}
	defer rows.Close()
	var out []*store.Tool
	for rows.Next() {
		t := &store.Tool{}
		var keys string
		var seen int64
		if err := rows.Scan(&t.Name, &t.Count, &keys, &seen); err != nil {
			return nil, fmt.Errorf("dataset %s tools: %w", datasetID, err)
		}
		if err := json.Unmarshal([]byte(keys), &t.ArgumentKeys); err != nil {
			return nil, fmt.Errorf("dataset %s tool %q: argument keys: %w", datasetID, t.Name, err)
		}
		t.LastSeen = fromMicros(seen)
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("dataset %s tools: %w", datasetID, err)
	}
	return out, nil
}

// recordTools merges uses into the dataset's tool registry inside tx.
func (s *Store) recordTools(ctx context.Context, tx Tx, datasetID string, uses []store.ToolUse, at time.Time) error {
	if datasetID == "" || len(uses) == 0 {
		return nil
	}
	// Merge duplicates first so each name is one upsert.
	merged := map[string]*store.ToolUse{}
	var names []string
	for _, u := range uses {
		if u.Name == "" {
			continue
		}
		m := merged[u.Name]
		if m == nil {
			m = &store.ToolUse{Name: u.Name}
			merged[u.Name] = m
			names = append(names, u.Name)
		}
		m.Count += u.Count
		m.ArgumentKeys = append(m.ArgumentKeys, u.ArgumentKeys...)
	}
	slices.Sort(names)
	existing := map[string][]string{}
	rows, err := tx.Query(ctx, `SELECT name, argument_keys FROM dataset_tools WHERE dataset_id = $1 AND `+s.b.In("name", 2)+s.b.ForUpdate(),
		datasetID, s.b.ListArg(names))
	if err != nil {
		return fmt.Errorf("tool registry: %w", err)
	}
	for rows.Next() {
		var name, keys string
		if err := rows.Scan(&name, &keys); err != nil {
			rows.Close()
			return fmt.Errorf("tool registry: %w", err)
		}
		var k []string
		_ = json.Unmarshal([]byte(keys), &k)
		existing[name] = k
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("tool registry: %w", err)
	}
	for _, name := range names {
		m := merged[name]
		keys := append(existing[name], m.ArgumentKeys...)
		slices.Sort(keys)
		keys = slices.Compact(keys)
		if keys == nil {
			keys = []string{}
		}
		kj, _ := json.Marshal(keys)
		if _, err := tx.Exec(ctx, `INSERT INTO dataset_tools (dataset_id, name, count, argument_keys, last_seen) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (dataset_id, name) DO UPDATE SET count = dataset_tools.count + excluded.count,
			argument_keys = excluded.argument_keys, last_seen = excluded.last_seen`,
			datasetID, name, m.Count, string(kj), micros(at)); err != nil {
			return fmt.Errorf("tool registry %q: %w", name, err)
		}
	}
	return nil
}
