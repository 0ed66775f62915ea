package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/vigilhq/vigil/search"
	"github.com/vigilhq/vigil/store"
)

// SearchFacets implements store.Facets: one statement that finds the
// traces the search matches once and groups them three ways (hierarchy
// roots; annotation and finding sources; the highest severity per trace).
func (s *Store) SearchFacets(ctx context.Context, req store.SearchRequest) (*store.SearchFacets, error) {
	q, err := search.Parse(req.Query)
	if err != nil {
		return nil, fmt.Errorf("search facets %q: %w", req.Query, err)
	}
	if req.Now.IsZero() {
		req.Now = time.Now()
	}
	if err := s.catchUp(ctx, req.DatasetIDs); err != nil {
		return nil, err
	}
	c, from, cond, err := s.searchWhere(&req, q, false)
	if err != nil {
		return nil, err
	}
	out := &store.SearchFacets{Hierarchy: map[string]int{}, Sources: map[string]int{}, Severities: map[string]int{}}
	pg := c.pg()
	cites := `json_array_length(f.citations)`
	if pg {
		cites = `jsonb_array_length(vigil_jsonb(f.citations))`
	}
	// One statement: the matches are found once (m), their annotations
	// and findings joined once by trace id (e: their trace indexes), then
	// grouped three ways.
	word := `CASE f.severity WHEN 'info' THEN 0 WHEN 'warn' THEN 1 WHEN 'critical' THEN 2 END`
	sql := `WITH m AS MATERIALIZED (SELECT t.id AS id, t.hierarchy_path AS h` + from + cond + `),` +
		` e AS MATERIALIZED (` +
		`SELECT a.trace_id AS tid, CASE WHEN TRIM(a.source) = '' THEN 'user' ELSE a.source END AS src, 1 AS n, ` + c.severityBucket() + ` AS b` +
		` FROM m JOIN annotations a ON a.trace_id = m.id` +
		` UNION ALL SELECT f.run_id, CASE WHEN f.monitor_id = 'mcp-pin' THEN 'mcp-pin' ELSE 'guardrails-error' END,` +
		` CASE WHEN ` + cites + ` > 0 THEN ` + cites + ` ELSE 1 END, ` + word +
		` FROM m JOIN findings f ON f.run_id = m.id)` +
		` SELECT 'h', COALESCE(h, ''), COUNT(*) FROM m GROUP BY h` +
		` UNION ALL SELECT 's', src, SUM(n) FROM e GROUP BY src` +
		` UNION ALL SELECT 'v', CAST(b AS TEXT), COUNT(*) FROM (SELECT tid, MAX(b) AS b FROM e GROUP BY tid) x WHERE b IS NOT NULL GROUP BY b`
	rows, err := s.b.Reader().Query(ctx, sql, c.p.args...)
	if err != nil {
		return nil, fmt.Errorf("search facets %q: %w", req.Query, err)
	}
	defer rows.Close()
	for rows.Next() {
		var kind, k string
		var n int
		if err := rows.Scan(&kind, &k, &n); err != nil {
			return nil, fmt.Errorf("search facets %q: %w", req.Query, err)
		}
		switch kind {
		case "h": // a whole hierarchy_path (JSON text): few distinct ones
			var path []string
			if err := json.Unmarshal([]byte(k), &path); err != nil {
				return nil, fmt.Errorf("search facets %q: hierarchy_path %q: %w", req.Query, k, err)
			}
			root := ""
			if len(path) > 0 {
				root = path[0]
			}
			out.Hierarchy[root] += n
		case "s":
			out.Sources[k] += n
		case "v":
			if i, err := strconv.Atoi(k); err == nil && i >= 0 && i < len(search.Severities) {
				out.Severities[search.Severities[i]] += n
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("search facets %q: %w", req.Query, err)
	}
	return out, nil
}

// CountEvents implements store.Facets with one grouped query.
func (s *Store) CountEvents(ctx context.Context, ids []string) (map[string]int64, error) {
	out := make(map[string]int64, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.b.Reader().Query(ctx, `SELECT dataset_id, SUM(message_count) FROM traces WHERE `+s.b.In("dataset_id", 1)+` GROUP BY dataset_id`,
		s.b.ListArg(ids))
	if err != nil {
		return nil, fmt.Errorf("count events of %d datasets: %w", len(ids), err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var n int64
		if err := rows.Scan(&id, &n); err != nil {
			return nil, fmt.Errorf("count events: %w", err)
		}
		out[id] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count events: %w", err)
	}
	return out, nil
}
