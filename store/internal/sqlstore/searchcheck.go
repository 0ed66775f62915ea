package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
)

// SearchIndexDiff compares the search index rows of trace id with those a
// full rebuild makes of its committed state, as "msg tool text" lines:
// missing are rows a rebuild has and the index lacks, extra the reverse.
// It is a check for tests (storetest) of the incremental indexer; call it
// when nothing is pending.
func (s *Store) SearchIndexDiff(ctx context.Context, id string) (missing, extra []string, err error) {
	line := func(msg int64, tool bool, text string) string {
		return strconv.FormatInt(msg, 10) + " " + strconv.FormatBool(tool) + " " + text
	}
	want, err := s.indexRows(ctx, s.b.ListArg([]string{id}))
	if err != nil {
		return nil, nil, fmt.Errorf("search index diff %s: %w", id, err)
	}
	var w []string
	for _, r := range want {
		w = append(w, line(r[1].(int64), r[2].(bool), r[3].(string)))
	}
	rows, err := s.b.Reader().Query(ctx, `SELECT msg, tool, text FROM search_text WHERE trace_id = $1`, id)
	if err != nil {
		return nil, nil, fmt.Errorf("search index diff %s: %w", id, err)
	}
	defer rows.Close()
	var have []string
	for rows.Next() {
		var msg int64
		var tool bool
		var text string
		if err := rows.Scan(&msg, &tool, &text); err != nil {
			return nil, nil, fmt.Errorf("search index diff %s: %w", id, err)
		}
		have = append(have, line(msg, tool, text))
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("search index diff %s: %w", id, err)
	}
	slices.Sort(w)
	slices.Sort(have)
	for _, x := range w {
		if _, ok := slices.BinarySearch(have, x); !ok {
			missing = append(missing, x)
		}
	}
	for _, x := range have {
		if _, ok := slices.BinarySearch(w, x); !ok {
			extra = append(extra, x)
		}
	}
	return missing, extra, nil
}
