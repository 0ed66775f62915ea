package sqlstore

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// The span ids OTLP ingest stored (store.OTLPSpans; migration 11).

// otlpChunk bounds the rows of one statement.
const otlpChunk = 500

// MarkOTLPSpans implements store.OTLPSpans.
func (s *Store) MarkOTLPSpans(ctx context.Context, ownerID string, spanIDs []string, at time.Time) error {
	var b Batch
	markOTLPSpans(&b, ownerID, spanIDs, at)
	for _, it := range b.Items {
		if _, err := s.b.Writer().Exec(ctx, it.SQL, it.Args...); err != nil {
			return fmt.Errorf("mark %d OTLP spans: %w", len(it.Args)-2, err)
		}
	}
	return nil
}

// markOTLPSpans queues in b the statements that record spanIDs of
// ownerID (otlpChunk per statement; recorded ones are kept).
func markOTLPSpans(b *Batch, ownerID string, spanIDs []string, at time.Time) {
	for len(spanIDs) > 0 {
		n := min(len(spanIDs), otlpChunk)
		var q strings.Builder
		q.WriteString(`INSERT INTO otlp_spans (owner_id, span_id, time_created) VALUES `)
		args := []any{ownerID, micros(orNow(at))}
		for i, id := range spanIDs[:n] {
			if i > 0 {
				q.WriteByte(',')
			}
			args = append(args, id)
			fmt.Fprintf(&q, "($1, $%d, $2)", len(args))
		}
		q.WriteString(` ON CONFLICT (owner_id, span_id) DO NOTHING`)
		b.Exec(q.String(), args...)
		spanIDs = spanIDs[n:]
	}
}

// SeenOTLPSpans implements store.OTLPSpans.
func (s *Store) SeenOTLPSpans(ctx context.Context, ownerID string, spanIDs []string) (map[string]bool, error) {
	seen := map[string]bool{}
	for len(spanIDs) > 0 {
		n := min(len(spanIDs), otlpChunk)
		rows, err := s.b.Reader().Query(ctx, `SELECT span_id FROM otlp_spans WHERE owner_id = $1 AND `+s.b.In("span_id", 2),
			ownerID, s.b.ListArg(spanIDs[:n]))
		if err != nil {
			return nil, fmt.Errorf("read OTLP spans: %w", err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, fmt.Errorf("read OTLP spans: %w", err)
			}
			seen[id] = true
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("read OTLP spans: %w", err)
		}
		spanIDs = spanIDs[n:]
	}
	return seen, nil
}

// PurgeOTLPSpans implements store.OTLPSpans.
func (s *Store) PurgeOTLPSpans(ctx context.Context, before time.Time) (int, error) {
	n, err := s.b.Writer().Exec(ctx, `DELETE FROM otlp_spans WHERE time_created < $1`, micros(before))
	if err != nil {
		return 0, fmt.Errorf("purge OTLP spans: %w", err)
	}
	return int(n), nil
}
