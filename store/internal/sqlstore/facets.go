package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/vigilhq/vigil/search"
	"github.com/vigilhq/vigil/store"
)

// SearchFacets implements store.Facets: three grouped queries over the
// traces the search matches (hierarchy roots; annotation and finding
// sources; the highest severity per trace).
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
	c, from, cond, err := s.searchWhere(&req, q)
	if err != nil {
		return nil, err
	}
	out := &store.SearchFacets{Hierarchy: map[string]int{}, Sources: map[string]int{}, Severities: map[string]int{}}
	pg := c.pg()
	root := `json_extract(t.hierarchy_path, '$[0]')`
	cites := `json_array_length(f.citations)`
	if pg {
		root = `(vigil_jsonb(t.hierarchy_path) ->> 0)`
		cites = `jsonb_array_length(vigil_jsonb(f.citations))`
	}
	matches := `(SELECT t.id` + from + cond + `)`
	grouped := func(what, sql string, add func(k string, n int)) error {
		rows, err := s.b.Reader().Query(ctx, sql, c.p.args...)
		if err != nil {
			return fmt.Errorf("search facets %q: %s: %w", req.Query, what, err)
		}
		defer rows.Close()
		for rows.Next() {
			var k string
			var n int
			if err := rows.Scan(&k, &n); err != nil {
				return fmt.Errorf("search facets %q: %s: %w", req.Query, what, err)
			}
			add(k, n)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("search facets %q: %s: %w", req.Query, what, err)
		}
		return nil
	}
	err = grouped("hierarchy", `SELECT COALESCE(h, ''), COUNT(*) FROM (SELECT `+root+` AS h`+from+cond+`) x GROUP BY 1`,
		func(k string, n int) { out.Hierarchy[k] += n })
	if err != nil {
		return nil, err
	}
	err = grouped("sources", `SELECT src, SUM(n) FROM (`+
		`SELECT CASE WHEN TRIM(a.source) = '' THEN 'user' ELSE a.source END AS src, 1 AS n FROM annotations a WHERE a.trace_id IN `+matches+
		` UNION ALL SELECT CASE WHEN f.monitor_id = 'mcp-pin' THEN 'mcp-pin' ELSE 'guardrails-error' END, CASE WHEN `+cites+` > 0 THEN `+cites+` ELSE 1 END`+
		` FROM findings f WHERE f.run_id IN `+matches+`) x GROUP BY src`,
		func(k string, n int) { out.Sources[k] += n })
	if err != nil {
		return nil, err
	}
	word := `CASE f.severity WHEN 'info' THEN 0 WHEN 'warn' THEN 1 WHEN 'critical' THEN 2 END`
	err = grouped("severities", `SELECT CAST(b AS TEXT), COUNT(*) FROM (SELECT tid, MAX(b) AS b FROM (`+
		`SELECT a.trace_id AS tid, `+c.severityBucket()+` AS b FROM annotations a WHERE a.trace_id IN `+matches+
		` UNION ALL SELECT f.run_id, `+word+` FROM findings f WHERE f.run_id IN `+matches+
		`) y GROUP BY tid) x WHERE b IS NOT NULL GROUP BY b`,
		func(k string, n int) {
			for i, w := range search.Severities {
				if k == fmt.Sprint(i) {
					out.Severities[w] += n
				}
			}
		})
	if err != nil {
		return nil, err
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
