package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/vigilhq/vigil/store"
)

// enqueueMonitorSQL queues the evaluation of events [$3, $4) of trace $2
// with the dataset's current ruleset version when dataset $1 has an
// enabled guardrail: one statement, so a write
// batch pays no extra round trip, and a dataset without guardrails pays an
// index probe. The casts give PostgreSQL the parameter types an
// INSERT ... SELECT does not infer.
const enqueueMonitorSQL = `INSERT INTO monitor_jobs (dataset_id, trace_id, from_idx, to_idx, time_created, ruleset_version)
	SELECT CAST($1 AS TEXT), CAST($2 AS TEXT), CAST($3 AS BIGINT), CAST($4 AS BIGINT), CAST($5 AS BIGINT),
		(SELECT ruleset_version FROM datasets WHERE id = $1)
	WHERE EXISTS (SELECT 1 FROM guardrails WHERE dataset_id = $1 AND enabled AND NOT deleted)`

// enqueueNotifySQL is enqueueMonitorSQL on PostgreSQL: a job inserted also
// notifies store.MonitorJobsChannel, delivered when the transaction commits
// (and never if it rolls back).
const enqueueNotifySQL = `WITH job AS (` + enqueueMonitorSQL + ` RETURNING 1)
	SELECT pg_notify('` + store.MonitorJobsChannel + `', '') FROM job LIMIT 1`

// enqueueMonitor adds the job of an append to b (nothing for snippets or
// an empty write). It must run in the transaction that stores the events;
// after the commit the caller calls jobsQueued.
func (s *Store) enqueueMonitor(b *Batch, datasetID, traceID string, from, to int, at time.Time) {
	if datasetID == "" || to <= from {
		return
	}
	q := enqueueMonitorSQL
	if s.b.Kind() == "postgres" {
		q = enqueueNotifySQL
	}
	b.Exec(q, datasetID, traceID, int64(from), int64(to), micros(at))
}

// queueMonitorJobs queues, on b, one job per pushed trace when the
// dataset res.Dataset (locked by the caller) has an enabled guardrail, and
// reports whether it has. Jobs carry the dataset's ruleset version.
func (s *Store) queueMonitorJobs(ctx context.Context, tx Tx, b *Batch, res *store.PushResult, at time.Time) (bool, error) {
	if res.Dataset == nil {
		return false, nil
	}
	var one int
	switch err := tx.QueryRow(ctx, `SELECT 1 FROM guardrails WHERE dataset_id = $1 AND enabled AND NOT deleted LIMIT 1`, res.Dataset.ID).Scan(&one); {
	case errors.Is(err, ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("push: guardrails of dataset %s: %w", res.Dataset.ID, err)
	}
	for _, t := range res.Traces {
		if len(t.Messages) > 0 {
			b.Exec(`INSERT INTO monitor_jobs (dataset_id, trace_id, from_idx, to_idx, time_created, ruleset_version) VALUES ($1, $2, $3, $4, $5, $6)`,
				res.Dataset.ID, t.ID, int64(0), int64(len(t.Messages)), micros(at), res.Dataset.RulesetVersion)
		}
	}
	if s.b.Kind() == "postgres" {
		b.Exec(`SELECT pg_notify('` + store.MonitorJobsChannel + `', '')`) // delivered at commit
	}
	return true, nil
}

// jobsQueued runs after a write into datasetID committed: it keeps the
// written events for this process's workers (MonitorTrace) and tells them
// that jobs may be due (SQLite; PostgreSQL notified from the transaction).
func (s *Store) jobsQueued(ctx context.Context, datasetID string, traces ...recentWrite) {
	if datasetID == "" {
		return
	}
	for _, t := range traces {
		s.recent.put(t.id, t.from, t.msgs)
	}
	if s.b.Kind() == "sqlite" {
		_ = s.b.Notify(ctx, store.MonitorJobsChannel, "") // in process: cannot fail
	}
}

// recentWrite is the events one write added to a trace, from position
// from.
type recentWrite struct {
	id   string
	from int
	msgs []store.Message
}

// MonitorTrace implements store.MonitorQueue: MonitorTraces of one trace.
func (s *Store) MonitorTrace(ctx context.Context, traceID string, n int) (*store.Trace, error) {
	ts, err := s.MonitorTraces(ctx, []string{traceID}, []int{n})
	if err != nil {
		return nil, err
	}
	if ts[0] == nil {
		return nil, fmt.Errorf("trace %s: %w", traceID, store.ErrNotFound)
	}
	return ts[0], nil
}

// MonitorTraces implements store.MonitorQueue: one query for the few
// trace columns a monitor reads (whether it still exists, its owner,
// dataset, metadata and length) of every trace, the events from the
// recent writes of this process when it has them, and one query for the
// events of all the others.
func (s *Store) MonitorTraces(ctx context.Context, ids []string, ns []int) ([]*store.Trace, error) {
	if len(ids) != len(ns) {
		return nil, fmt.Errorf("monitor traces: %d ids but %d lengths", len(ids), len(ns))
	}
	out := make([]*store.Trace, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	byID := make(map[string]*store.Trace, len(ids))
	need := make(map[string]int, len(ids)) // the most events a job of the trace reads
	uniq := make([]string, 0, len(ids))
	for i, id := range ids {
		if _, ok := byID[id]; !ok {
			byID[id] = nil
			uniq = append(uniq, id)
		}
		need[id] = max(need[id], ns[i])
	}
	rows, err := s.b.Reader().Query(ctx, `SELECT id, dataset_id, owner_id, metadata, message_count FROM traces WHERE `+s.b.In("id", 1), s.b.ListArg(uniq))
	if err != nil {
		return nil, fmt.Errorf("monitor traces: %w", err)
	}
	for rows.Next() {
		t := &store.Trace{}
		var ds *string
		var md []byte
		if err := rows.Scan(&t.ID, &ds, &t.OwnerID, &md, &t.MessageCount); err != nil {
			rows.Close()
			return nil, fmt.Errorf("monitor traces: %w", err)
		}
		t.DatasetID, t.Metadata = str(ds), json.RawMessage(md)
		byID[t.ID] = t
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("monitor traces: %w", err)
	}
	var load []*store.Trace // not in memory: read from the database
	for _, id := range uniq {
		t := byID[id]
		if t == nil {
			continue
		}
		if msgs, ok := s.recent.get(id, min(need[id], t.MessageCount)); ok {
			t.Messages = msgs
		} else {
			load = append(load, t)
		}
	}
	if err := s.loadMessages(ctx, load); err != nil {
		return nil, err
	}
	for i, id := range ids {
		t := byID[id]
		if t == nil {
			continue // gone
		}
		c := *t // each job its own prefix
		c.Messages = t.Messages[:min(ns[i], len(t.Messages)):min(ns[i], len(t.Messages))]
		out[i] = &c
	}
	return out, nil
}

const monitorJobCols = `id, dataset_id, trace_id, from_idx, to_idx, ruleset_version, attempts, last_error, lease_until, time_created`

// ClaimMonitorJobs implements store.MonitorQueue.
func (s *Store) ClaimMonitorJobs(ctx context.Context, n int, lease time.Duration) ([]*store.MonitorJob, error) {
	if n <= 0 {
		return nil, nil
	}
	at := now()
	// A read first: an idle queue costs no write lock (SQLite has one
	// writer, which pushes need).
	var one int
	switch err := s.b.Reader().QueryRow(ctx, `SELECT 1 FROM monitor_jobs WHERE lease_until <= $1 LIMIT 1`, micros(at)).Scan(&one); {
	case errors.Is(err, ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("claim monitor jobs: %w", err)
	}
	lock := s.b.ForUpdate()
	if lock != "" {
		lock += " SKIP LOCKED" // concurrent claimers take different jobs
	}
	until := at.Add(lease)
	var jobs []*store.MonitorJob
	err := s.inTx(ctx, func(tx Tx) error {
		jobs = jobs[:0]
		rows, err := tx.Query(ctx, `SELECT `+monitorJobCols+` FROM monitor_jobs WHERE lease_until <= $1 ORDER BY id LIMIT $2`+lock, micros(at), int64(n))
		if err != nil {
			return err
		}
		var ids []int64
		for rows.Next() {
			j := &store.MonitorJob{}
			var from, to, leaseUntil, created int64
			if err := rows.Scan(&j.ID, &j.DatasetID, &j.TraceID, &from, &to, &j.RulesetVersion, &j.Attempts, &j.LastError, &leaseUntil, &created); err != nil {
				rows.Close()
				return err
			}
			j.From, j.To, j.TimeCreated = int(from), int(to), fromMicros(created)
			j.Attempts++
			j.LeaseUntil = fromMicros(micros(until))
			jobs = append(jobs, j)
			ids = append(ids, j.ID)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}
		_, err = tx.Exec(ctx, `UPDATE monitor_jobs SET lease_until = $1, attempts = attempts + 1 WHERE `+s.b.In("id", 2), micros(until), s.b.ListArg(ids))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim monitor jobs: %w", err)
	}
	return jobs, nil
}

// CompleteMonitorJobs implements store.MonitorQueue.
func (s *Store) CompleteMonitorJobs(ctx context.Context, jobs []*store.MonitorJob) error {
	if len(jobs) == 0 {
		return nil
	}
	var b Batch
	for _, j := range jobs {
		b.Exec(`DELETE FROM monitor_jobs WHERE id = $1 AND lease_until = $2`, j.ID, micros(j.LeaseUntil))
	}
	if err := s.inTx(ctx, func(tx Tx) error { return tx.RunBatch(ctx, &b) }); err != nil {
		return fmt.Errorf("complete %d monitor jobs (first: %d, trace %s): %w", len(jobs), jobs[0].ID, jobs[0].TraceID, err)
	}
	return nil
}

// RetryMonitorJob implements store.MonitorQueue.
func (s *Store) RetryMonitorJob(ctx context.Context, j *store.MonitorJob, delay time.Duration, errText string) error {
	due := now().Add(delay)
	if _, err := s.b.Writer().Exec(ctx, `UPDATE monitor_jobs SET lease_until = $3, last_error = $4 WHERE id = $1 AND lease_until = $2`,
		j.ID, micros(j.LeaseUntil), micros(due), cleanText(errText)); err != nil {
		return fmt.Errorf("retry monitor job %d (trace %s): %w", j.ID, j.TraceID, err)
	}
	return nil
}

// ReleaseMonitorJobs implements store.MonitorQueue.
func (s *Store) ReleaseMonitorJobs(ctx context.Context, jobs []*store.MonitorJob) error {
	if len(jobs) == 0 {
		return nil
	}
	at := micros(now())
	var b Batch
	for _, j := range jobs {
		b.Exec(`UPDATE monitor_jobs SET lease_until = $3 WHERE id = $1 AND lease_until = $2`, j.ID, micros(j.LeaseUntil), at)
	}
	if err := s.inTx(ctx, func(tx Tx) error { return tx.RunBatch(ctx, &b) }); err != nil {
		return fmt.Errorf("release %d monitor jobs (first: %d, trace %s): %w", len(jobs), jobs[0].ID, jobs[0].TraceID, err)
	}
	return nil
}

// ExtendMonitorJob implements store.MonitorQueue.
func (s *Store) ExtendMonitorJob(ctx context.Context, j *store.MonitorJob, lease time.Duration) (bool, error) {
	until := fromMicros(micros(now().Add(lease)))
	n, err := s.b.Writer().Exec(ctx, `UPDATE monitor_jobs SET lease_until = $3 WHERE id = $1 AND lease_until = $2`, j.ID, micros(j.LeaseUntil), micros(until))
	if err != nil {
		return false, fmt.Errorf("extend lease of monitor job %d (trace %s): %w", j.ID, j.TraceID, err)
	}
	if n == 0 {
		return false, nil
	}
	j.LeaseUntil = until
	return true, nil
}

// CountMonitorJobs implements store.MonitorQueue.
func (s *Store) CountMonitorJobs(ctx context.Context) (int, error) {
	var n int64
	if err := s.b.Reader().QueryRow(ctx, `SELECT COUNT(*) FROM monitor_jobs`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count monitor jobs: %w", err)
	}
	return int(n), nil
}

// RecordMonitorError implements store.MonitorQueue.
func (s *Store) RecordMonitorError(ctx context.Context, guardrailID, msg string, at time.Time) error {
	at = orNow(at)
	if _, err := s.b.Writer().Exec(ctx, `INSERT INTO monitor_errors (guardrail_id, count, last_error, last_at) VALUES ($1, 1, $2, $3)
		ON CONFLICT (guardrail_id) DO UPDATE SET count = monitor_errors.count + 1, last_error = excluded.last_error, last_at = excluded.last_at`,
		guardrailID, cleanText(msg), micros(at)); err != nil {
		return fmt.Errorf("record monitor error of guardrail %s: %w", guardrailID, err)
	}
	return nil
}

// MonitorErrors implements store.MonitorQueue.
func (s *Store) MonitorErrors(ctx context.Context, guardrailIDs []string) (map[string]*store.MonitorErrorStat, error) {
	out := map[string]*store.MonitorErrorStat{}
	if len(guardrailIDs) == 0 {
		return out, nil
	}
	rows, err := s.b.Reader().Query(ctx, `SELECT guardrail_id, count, last_error, last_at FROM monitor_errors WHERE `+s.b.In("guardrail_id", 1), s.b.ListArg(guardrailIDs))
	if err != nil {
		return nil, fmt.Errorf("monitor errors: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		st := &store.MonitorErrorStat{}
		var at int64
		if err := rows.Scan(&st.GuardrailID, &st.Count, &st.LastError, &at); err != nil {
			return nil, fmt.Errorf("monitor errors: %w", err)
		}
		st.LastAt = fromMicros(at)
		out[st.GuardrailID] = st
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("monitor errors: %w", err)
	}
	return out, nil
}

// cleanText makes an error message storable in a text column: invalid
// UTF-8 and NUL become U+FFFD (a rule's message may quote trace text), and
// it is cut to 2,000 bytes.
func cleanText(s string) string {
	out := make([]rune, 0, len(s))
	n := 0
	for _, r := range s {
		if r == 0 {
			r = '\uFFFD'
		}
		n += len(string(r))
		if n > 2000 {
			break
		}
		out = append(out, r)
	}
	return string(out)
}
