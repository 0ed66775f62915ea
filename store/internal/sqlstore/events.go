package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/vigilhq/vigil/store"
)

// TraceEvents implements store.EventRanges with one range read of the
// messages' primary key.
func (s *Store) TraceEvents(ctx context.Context, traceID string, from, to int) ([]store.Message, error) {
	var n int64
	if err := s.b.Reader().QueryRow(ctx, `SELECT message_count FROM traces WHERE id = $1`, traceID).Scan(&n); err != nil {
		return nil, notFound(err, "trace "+traceID)
	}
	from = max(from, 0)
	if to <= from {
		return []store.Message{}, nil
	}
	rows, err := s.b.Reader().Query(ctx, `SELECT idx, message_id, node_ids, data FROM messages WHERE trace_id = $1 AND idx >= $2 AND idx < $3 ORDER BY idx`,
		traceID, int64(from), int64(to))
	if err != nil {
		return nil, fmt.Errorf("events %d to %d of trace %s: %w", from, to, traceID, err)
	}
	defer rows.Close()
	out := make([]store.Message, 0, max(0, min(int64(to), n)-int64(from)))
	for rows.Next() {
		var m store.Message
		var idx int64
		var nodes, data []byte
		if err := rows.Scan(&idx, &m.ID, &nodes, &data); err != nil {
			return nil, fmt.Errorf("events of trace %s: %w", traceID, err)
		}
		m.Index = int(idx)
		if m.NodeIDs, err = parseNodeIDs(nodes); err != nil {
			return nil, fmt.Errorf("trace %s message %d node ids: %w", traceID, idx, err)
		}
		m.Data = json.RawMessage(data)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("events of trace %s: %w", traceID, err)
	}
	return out, nil
}
