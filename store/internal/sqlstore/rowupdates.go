package sqlstore

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/vigilhq/vigil/store"
)

// rowUpdates collects the trace and session row updates of AppendMany,
// written by one statement per table (flushRowUpdates) instead of one per
// trace. A row whose text JSON cannot carry unchanged (invalid UTF-8, a
// NUL) is updated by its own statement instead.
type rowUpdates struct {
	traces [][]any            // id, message_count, time_last_pushed, name (nil: NULL), metadata
	tails  [][]any            // session id, receipt_count, root_hash (nil: NULL), tail_hash, tail_timestamp
	jobs   map[string][][]any // dataset id → monitor jobs: trace id, from, to
}

// job collects the monitor job of an append (enqueueMonitor's, which
// flushMonitorJobs queues per dataset).
func (u *rowUpdates) job(datasetID, traceID string, from, to int) {
	if datasetID == "" || to <= from {
		return
	}
	if u.jobs == nil {
		u.jobs = map[string][][]any{}
	}
	u.jobs[datasetID] = append(u.jobs[datasetID], []any{traceID, int64(from), int64(to)})
}

// flushMonitorJobs queues one statement per dataset that inserts the
// collected jobs, in the order collected, when the dataset has an enabled
// guardrail (as enqueueMonitor does per job; on PostgreSQL it notifies).
func (s *Store) flushMonitorJobs(b *Batch, u *rowUpdates, at time.Time) error {
	for _, ds := range slices.Sorted(maps.Keys(u.jobs)) {
		jobs := u.jobs[ds]
		if s.b.Kind() == "postgres" {
			b.Exec(`WITH job AS (INSERT INTO monitor_jobs (dataset_id, trace_id, from_idx, to_idx, time_created, ruleset_version)
	SELECT CAST($1 AS TEXT), j.trace_id, j.from_idx, j.to_idx, CAST($2 AS BIGINT), (SELECT ruleset_version FROM datasets WHERE id = $1)
	FROM unnest($3::text[], $4::bigint[], $5::bigint[]) WITH ORDINALITY AS j(trace_id, from_idx, to_idx, n)
	WHERE EXISTS (SELECT 1 FROM guardrails WHERE dataset_id = $1 AND enabled AND NOT deleted) ORDER BY j.n RETURNING 1)
	SELECT pg_notify('`+store.MonitorJobsChannel+`', '') FROM job LIMIT 1`,
				ds, micros(at), column(jobs, 0, "text"), column(jobs, 1, "bigint"), column(jobs, 2, "bigint"))
			continue
		}
		js, err := json.Marshal(jobs)
		if err != nil {
			return fmt.Errorf("encode monitor jobs: %w", err)
		}
		b.Exec(`INSERT INTO monitor_jobs (dataset_id, trace_id, from_idx, to_idx, time_created, ruleset_version)
	SELECT $1, json_extract(j.value, '$[0]'), json_extract(j.value, '$[1]'), json_extract(j.value, '$[2]'), $2,
		(SELECT ruleset_version FROM datasets WHERE id = $1)
	FROM json_each($3) AS j WHERE EXISTS (SELECT 1 FROM guardrails WHERE dataset_id = $1 AND enabled AND NOT deleted) ORDER BY j.key`,
			ds, micros(at), string(js))
	}
	return nil
}

// jsonSafe reports whether s survives a round trip through a JSON
// string and SQLite's json_extract unchanged.
func jsonSafe(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

func (u *rowUpdates) trace(b *Batch, t *store.Trace) {
	md := objectOrEmpty(t.Metadata)
	if !jsonSafe(t.Name) || !jsonSafe(md) {
		b.Exec(`UPDATE traces SET message_count = $2, time_last_pushed = $3, name = $4, metadata = $5 WHERE id = $1`,
			t.ID, int64(t.MessageCount), micros(t.TimeLastPushed), nullString(t.Name), md)
		return
	}
	u.traces = append(u.traces, []any{t.ID, int64(t.MessageCount), micros(t.TimeLastPushed), nullString(t.Name), md})
}

func (u *rowUpdates) tail(b *Batch, sess *store.Session) {
	if !jsonSafe(sess.RootHash) || !jsonSafe(sess.Tail.LastHash) {
		b.Exec(saveTailSQL, saveTailArgs(sess)...)
		return
	}
	u.tails = append(u.tails, []any{sess.ID, sess.Tail.Count, nullString(sess.RootHash), sess.Tail.LastHash, sess.Tail.LastTimestamp})
}

// flushRowUpdates queues the collected updates: on SQLite an UPDATE FROM
// json_each of the rows, on PostgreSQL an UPDATE FROM unnest of columns.
func (s *Store) flushRowUpdates(b *Batch, u *rowUpdates) error {
	type table struct {
		name  string
		rows  [][]any
		cols  []string // the columns set, after the key (id)
		types []string // PostgreSQL array types of key and columns
	}
	for _, tb := range []table{
		{"traces", u.traces, []string{"message_count", "time_last_pushed", "name", "metadata"}, []string{"text", "bigint", "bigint", "text", "text"}},
		{"ledger_sessions", u.tails, []string{"receipt_count", "root_hash", "tail_hash", "tail_timestamp"}, []string{"text", "bigint", "text", "text", "bigint"}},
	} {
		if len(tb.rows) == 0 {
			continue
		}
		var set []string
		if s.b.Kind() == "postgres" {
			names := []string{"id"}
			var unnest []string
			args := make([]any, len(tb.types))
			for i, typ := range tb.types {
				unnest = append(unnest, fmt.Sprintf("$%d::%s[]", i+1, typ))
				args[i] = column(tb.rows, i, typ)
			}
			for _, c := range tb.cols {
				set = append(set, c+" = u."+c)
				names = append(names, c)
			}
			b.Exec(`UPDATE `+tb.name+` AS t SET `+strings.Join(set, ", ")+` FROM unnest(`+strings.Join(unnest, ", ")+`) AS u(`+
				strings.Join(names, ", ")+`) WHERE t.id = u.id`, args...)
			continue
		}
		js, err := json.Marshal(tb.rows)
		if err != nil {
			return fmt.Errorf("encode %s updates: %w", tb.name, err)
		}
		for i, c := range tb.cols {
			set = append(set, fmt.Sprintf("%s = json_extract(u.value, '$[%d]')", c, i+1))
		}
		b.Exec(`UPDATE `+tb.name+` SET `+strings.Join(set, ", ")+` FROM json_each($1) AS u WHERE `+tb.name+`.id = json_extract(u.value, '$[0]')`, string(js))
	}
	return nil
}

// column returns column i of rows as a PostgreSQL array argument.
func column(rows [][]any, i int, typ string) any {
	switch typ {
	case "bigint":
		out := make([]int64, len(rows))
		for k, r := range rows {
			out[k] = r[i].(int64)
		}
		return out
	default:
		out := make([]*string, len(rows))
		for k, r := range rows {
			switch v := r[i].(type) {
			case string:
				out[k] = &v
			case *string:
				out[k] = v
			}
		}
		return out
	}
}
