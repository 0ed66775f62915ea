package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/vigilhq/vigil/store"
)

const annotationCols = `id, trace_id, owner_id, user_id, content, message_id, address, extra_metadata, source, status, resolved, time_created, content_escaped`

var annotationColList = splitCols(annotationCols)

func annotationRow(a *store.Annotation) []any {
	var extra *string
	if len(a.ExtraMetadata) > 0 && !isNull(a.ExtraMetadata) {
		e := string(a.ExtraMetadata)
		extra = &e
	}
	content, escaped := storeText(a.Content)
	return []any{a.ID, a.TraceID, a.OwnerID, a.UserID, content, nullString(a.MessageID), a.Address, extra,
		a.Source, store.AnnotationStatus(a.ExtraMetadata), a.Resolved, micros(a.TimeCreated), escaped}
}

func scanAnnotation(r interface{ Scan(...any) error }) (*store.Annotation, error) {
	a := &store.Annotation{}
	var mid, extra *string
	var status string
	var tc int64
	var escaped bool
	if err := r.Scan(&a.ID, &a.TraceID, &a.OwnerID, &a.UserID, &a.Content, &mid, &a.Address, &extra, &a.Source, &status, &a.Resolved, &tc, &escaped); err != nil {
		return nil, err
	}
	content, err := loadText(a.Content, escaped)
	if err != nil {
		return nil, fmt.Errorf("annotation %s content: %w", a.ID, err)
	}
	a.Content = content
	a.MessageID = str(mid)
	if extra != nil {
		a.ExtraMetadata = json.RawMessage(*extra)
	}
	a.TimeCreated = fromMicros(tc)
	return a, nil
}

// CreateAnnotation implements store.Annotations.
func (s *Store) CreateAnnotation(ctx context.Context, a *store.Annotation) error {
	return s.inTx(ctx, func(tx Tx) error {
		var owner string
		var count int64
		if err := tx.QueryRow(ctx, `SELECT owner_id, message_count FROM traces WHERE id = $1`+s.b.ForUpdate(), a.TraceID).Scan(&owner, &count); err != nil {
			return notFound(err, "annotate trace "+a.TraceID)
		}
		err := anchor(a, a.TraceID, owner, func(i int) (string, bool, error) {
			if i < 0 || int64(i) >= count {
				return "", false, nil
			}
			var id string
			if err := tx.QueryRow(ctx, `SELECT message_id FROM messages WHERE trace_id = $1 AND idx = $2`, a.TraceID, int64(i)).Scan(&id); err != nil {
				return "", false, fmt.Errorf("annotate trace %s: %w", a.TraceID, err)
			}
			return id, true, nil
		})
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO annotations (`+annotationCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
			annotationRow(a)...); err != nil {
			return s.conflict(err, "annotate trace "+a.TraceID)
		}
		return nil
	})
}

// GetAnnotation implements store.Annotations.
func (s *Store) GetAnnotation(ctx context.Context, id string) (*store.Annotation, error) {
	a, err := scanAnnotation(s.b.Reader().QueryRow(ctx, `SELECT `+annotationCols+` FROM annotations WHERE id = $1`, id))
	if err != nil {
		return nil, notFound(err, "annotation "+id)
	}
	return a, nil
}

// ListAnnotations implements store.Annotations.
func (s *Store) ListAnnotations(ctx context.Context, traceID string, sources []string) ([]*store.Annotation, error) {
	var p params
	q := `SELECT ` + annotationCols + ` FROM annotations WHERE trace_id = ` + p.add(traceID)
	if len(sources) > 0 {
		list := slices.Clone(sources)
		if slices.Contains(list, "") || slices.Contains(list, "user") {
			list = append(list, "", "user")
		}
		p.add(s.b.ListArg(list))
		q += ` AND ` + s.b.In("source", p.n())
	}
	rows, err := s.b.Reader().Query(ctx, q+` ORDER BY time_created, id`, p.args...)
	if err != nil {
		return nil, fmt.Errorf("list annotations of trace %s: %w", traceID, err)
	}
	defer rows.Close()
	var out []*store.Annotation
	for rows.Next() {
		a, err := scanAnnotation(rows)
		if err != nil {
			return nil, fmt.Errorf("list annotations of trace %s: %w", traceID, err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list annotations of trace %s: %w", traceID, err)
	}
	return out, nil
}

// loadAnnotations fills in the annotations of ts with one query.
func (s *Store) loadAnnotations(ctx context.Context, ts []*store.Trace) error {
	if len(ts) == 0 {
		return nil
	}
	byID := make(map[string]*store.Trace, len(ts))
	ids := make([]string, len(ts))
	for i, t := range ts {
		byID[t.ID] = t
		ids[i] = t.ID
	}
	rows, err := s.b.Reader().Query(ctx, `SELECT `+annotationCols+` FROM annotations WHERE `+s.b.In("trace_id", 1)+` ORDER BY time_created, id`,
		s.b.ListArg(ids))
	if err != nil {
		return fmt.Errorf("load annotations: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		a, err := scanAnnotation(rows)
		if err != nil {
			return fmt.Errorf("load annotations: %w", err)
		}
		if t := byID[a.TraceID]; t != nil {
			t.Annotations = append(t.Annotations, a)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load annotations: %w", err)
	}
	return nil
}

// UpdateAnnotation implements store.Annotations.
func (s *Store) UpdateAnnotation(ctx context.Context, id string, up store.AnnotationUpdate) (*store.Annotation, error) {
	var a *store.Annotation
	err := s.inTx(ctx, func(tx Tx) error {
		var err error
		a, err = scanAnnotation(tx.QueryRow(ctx, `SELECT `+annotationCols+` FROM annotations WHERE id = $1`+s.b.ForUpdate(), id))
		if err != nil {
			return notFound(err, "annotation "+id)
		}
		if up.Content != nil {
			a.Content = *up.Content
		}
		if up.MetadataMerge != nil {
			a.ExtraMetadata, err = store.MergeShallow(a.ExtraMetadata, up.MetadataMerge)
			if err != nil {
				return fmt.Errorf("update annotation %s: %w", id, err)
			}
			a.Source = store.AnnotationSource(a.ExtraMetadata)
		}
		row := annotationRow(a)
		if _, err := tx.Exec(ctx, `UPDATE annotations SET content = $2, extra_metadata = $3, source = $4, status = $5, content_escaped = $6 WHERE id = $1`,
			id, row[4], row[7], a.Source, row[9], row[12]); err != nil {
			return fmt.Errorf("update annotation %s: %w", id, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// DeleteAnnotation implements store.Annotations.
func (s *Store) DeleteAnnotation(ctx context.Context, id string) error {
	n, err := s.b.Writer().Exec(ctx, `DELETE FROM annotations WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete annotation %s: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("delete annotation %s: %w", id, store.ErrNotFound)
	}
	return nil
}

// ReplaceAnnotations implements store.Annotations.
func (s *Store) ReplaceAnnotations(ctx context.Context, traceID, source string, anns []*store.Annotation) (deleted, inserted int, err error) {
	err = s.inTx(ctx, func(tx Tx) error {
		var owner string
		var count int64
		if err := tx.QueryRow(ctx, `SELECT owner_id, message_count FROM traces WHERE id = $1`+s.b.ForUpdate(), traceID).Scan(&owner, &count); err != nil {
			return notFound(err, "replace annotations of trace "+traceID)
		}
		n, err := tx.Exec(ctx, `DELETE FROM annotations WHERE trace_id = $1 AND source = $2 AND status NOT IN ('accepted', 'rejected')`, traceID, source)
		if err != nil {
			return fmt.Errorf("replace annotations of trace %s: %w", traceID, err)
		}
		deleted = int(n)
		rows := make([][]any, 0, len(anns))
		for _, a := range anns {
			err := anchor(a, traceID, owner, func(i int) (string, bool, error) {
				if i < 0 || int64(i) >= count {
					return "", false, nil
				}
				var id string
				if err := tx.QueryRow(ctx, `SELECT message_id FROM messages WHERE trace_id = $1 AND idx = $2`, traceID, int64(i)).Scan(&id); err != nil {
					return "", false, fmt.Errorf("replace annotations of trace %s: %w", traceID, err)
				}
				return id, true, nil
			})
			if err != nil {
				return err
			}
			if store.AnnotationSource(a.ExtraMetadata) != source {
				// Source is extra_metadata.source: write it there too.
				if a.ExtraMetadata, err = withSource(a.ExtraMetadata, source); err != nil {
					return fmt.Errorf("replace annotations of trace %s: extra_metadata: %w", traceID, err)
				}
			}
			a.Source = source
			rows = append(rows, annotationRow(a))
		}
		if len(rows) > 0 {
			if err := tx.BulkInsert(ctx, "annotations", annotationColList, rows); err != nil {
				return s.conflict(err, "replace annotations of trace "+traceID)
			}
		}
		inserted = len(rows)
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	return deleted, inserted, nil
}

// CountAnnotationsBySource implements store.Annotations.
func (s *Store) CountAnnotationsBySource(ctx context.Context, traceIDs []string) (map[string]map[string]int, error) {
	out := make(map[string]map[string]int, len(traceIDs))
	if len(traceIDs) == 0 {
		return out, nil
	}
	rows, err := s.b.Reader().Query(ctx, `SELECT trace_id, source, COUNT(*) FROM annotations WHERE `+s.b.In("trace_id", 1)+` GROUP BY trace_id, source`,
		s.b.ListArg(traceIDs))
	if err != nil {
		return nil, fmt.Errorf("count annotations: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var tid, src string
		var n int
		if err := rows.Scan(&tid, &src, &n); err != nil {
			return nil, fmt.Errorf("count annotations: %w", err)
		}
		if strings.TrimSpace(src) == "" {
			src = "user"
		}
		m := out[tid]
		if m == nil {
			m = map[string]int{}
			out[tid] = m
		}
		m[src] += n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count annotations: %w", err)
	}
	return out, nil
}

// withSource returns the extra_metadata object extra with its "source"
// member set to source ("" removes it).
func withSource(extra json.RawMessage, source string) (json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if len(extra) > 0 && !isNull(extra) {
		if err := json.Unmarshal(extra, &m); err != nil {
			return nil, err
		}
		if m == nil {
			m = map[string]json.RawMessage{}
		}
	}
	if source == "" {
		delete(m, "source")
	} else {
		b, err := json.Marshal(source)
		if err != nil {
			return nil, err
		}
		m["source"] = b
	}
	return json.Marshal(m)
}
