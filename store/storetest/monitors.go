package storetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigilhq/vigil/store"
)

func init() {
	register("MonitorEnqueue", testMonitorEnqueue)
	register("MonitorLease", testMonitorLease)
	register("MonitorConcurrentClaims", testMonitorConcurrentClaims)
	register("MonitorErrors", testMonitorErrors)
}

// claimAll claims every due job (lease 1 h).
func claimAll(t *testing.T, s store.Store) []*store.MonitorJob {
	t.Helper()
	jobs, err := s.ClaimMonitorJobs(ctxT(t), 1000, time.Hour)
	must(t, err)
	return jobs
}

// jobString renders jobs as "trace:from-to" for comparisons.
func jobString(jobs []*store.MonitorJob) string {
	var b strings.Builder
	for i, j := range jobs {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s:%d-%d", j.TraceID, j.From, j.To)
	}
	return b.String()
}

// addGuardrail gives dataset ds of owner an enabled (or disabled)
// guardrail.
func addGuardrail(t *testing.T, s store.Store, owner, ds string, enabled bool) *store.Guardrail {
	t.Helper()
	d, err := s.GetDatasetByName(ctxT(t), owner, ds)
	must(t, err)
	g := &store.Guardrail{DatasetID: d.ID, Name: "g", Content: "raise \"x\" if:\n  (m: Message)", Enabled: enabled, Action: "log", UpdatedBy: owner}
	must(t, s.CreateGuardrail(ctxT(t), g, store.GuardrailCreated, ""))
	return g
}

// testMonitorEnqueue: pushes and appends into a dataset with an enabled
// guardrail queue one job per trace write with the range of new events, in
// the write's transaction; datasets without one (or with a disabled one),
// snippets and failed writes queue nothing.
func testMonitorEnqueue(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	push(t, s, u.ID, "plain", 1, 2)
	push(t, s, u.ID, "off", 1, 2)
	addGuardrail(t, s, u.ID, "off", false)
	watched := push(t, s, u.ID, "watched", 1, 1)
	addGuardrail(t, s, u.ID, "watched", true)
	if jobs := claimAll(t, s); len(jobs) != 0 {
		t.Fatalf("jobs before any watched write: %s", jobString(jobs))
	}

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	note, err := s.Subscribe(sctx, store.MonitorJobsChannel)
	must(t, err)
	res := push(t, s, u.ID, "watched", 2, 3)
	select {
	case <-note:
	case <-time.After(10 * time.Second):
		t.Fatal("no notification on store.MonitorJobsChannel after a push that queued jobs")
	}
	push(t, s, u.ID, "plain", 1, 2)
	push(t, s, u.ID, "off", 1, 2)
	_, err = s.PushTraces(ctx, store.PushRequest{OwnerID: u.ID, Traces: []store.NewTrace{{Messages: events("snip", 2)}}})
	must(t, err)
	_, err = s.AppendEvents(ctx, store.AppendRequest{TraceID: watched.Traces[0].ID, Messages: events("more", 2), Seal: chainSeal})
	must(t, err)
	// a failed append (duplicate message id) queues nothing
	_, err = s.AppendEvents(ctx, store.AppendRequest{TraceID: watched.Traces[0].ID, Messages: events("more", 1), Seal: chainSeal})
	wantErr(t, err, store.ErrConflict)

	n, err := s.CountMonitorJobs(ctx)
	must(t, err)
	jobs := claimAll(t, s)
	want := fmt.Sprintf("%s:0-3 %s:0-3 %s:1-3", res.Traces[0].ID, res.Traces[1].ID, watched.Traces[0].ID)
	if got := jobString(jobs); got != want || n != 3 {
		t.Fatalf("jobs (count %d) = %s, want %s", n, got, want)
	}
	for _, j := range jobs {
		if j.DatasetID != res.Dataset.ID || j.RulesetVersion != 1 || j.Attempts != 1 || j.TimeCreated.IsZero() || !j.LeaseUntil.After(time.Now()) {
			t.Errorf("job %+v", j)
		}
	}
	if again := claimAll(t, s); len(again) != 0 {
		t.Fatalf("leased jobs claimed again: %s", jobString(again))
	}
	must(t, s.CompleteMonitorJobs(ctx, jobs))
	if n, err := s.CountMonitorJobs(ctx); err != nil || n != 0 {
		t.Fatalf("CountMonitorJobs after completing = %d, %v", n, err)
	}
}

// testMonitorLease: a job whose lease ran out (its worker died) is claimed
// again with its attempt count raised; the old holder can then neither
// complete nor retry it; a retried job is due after its delay and keeps
// its error.
func testMonitorLease(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	push(t, s, u.ID, "w", 1, 1)
	addGuardrail(t, s, u.ID, "w", true)
	push(t, s, u.ID, "w", 1, 2)

	first, err := s.ClaimMonitorJobs(ctx, 10, time.Millisecond)
	must(t, err)
	if len(first) != 1 {
		t.Fatalf("claimed %d jobs, want 1", len(first))
	}
	time.Sleep(5 * time.Millisecond)
	second := claimAll(t, s)
	if len(second) != 1 || second[0].ID != first[0].ID || second[0].Attempts != 2 {
		t.Fatalf("after the lease ran out, claimed %+v, want job %d with attempt 2", second, first[0].ID)
	}
	// the crashed worker can no longer extend, complete or retry it
	stale := *first[0]
	if ok, err := s.ExtendMonitorJob(ctx, &stale, time.Hour); err != nil || ok || !stale.LeaseUntil.Equal(first[0].LeaseUntil) {
		t.Fatalf("ExtendMonitorJob with a lost lease = %v, %v", ok, err)
	}
	// the holder extends its lease: the job is not due when the old lease ends
	held := *second[0]
	if ok, err := s.ExtendMonitorJob(ctx, &held, time.Hour); err != nil || !ok || !held.LeaseUntil.After(second[0].LeaseUntil) {
		t.Fatalf("ExtendMonitorJob = %v, %v (lease %v)", ok, err, held.LeaseUntil)
	}
	second[0] = &held
	must(t, s.CompleteMonitorJobs(ctx, []*store.MonitorJob{first[0]}))
	must(t, s.RetryMonitorJob(ctx, first[0], 0, "stale"))
	must(t, s.ReleaseMonitorJobs(ctx, []*store.MonitorJob{first[0]}))
	must(t, s.ReleaseMonitorJobs(ctx, nil))
	if n, _ := s.CountMonitorJobs(ctx); n != 1 {
		t.Fatalf("a stale lease completed the job (count %d)", n)
	}
	if got := claimAll(t, s); len(got) != 0 {
		t.Fatalf("a stale retry released the job: %s", jobString(got))
	}

	must(t, s.RetryMonitorJob(ctx, second[0], time.Hour, "database gone\x00away"))
	if got := claimAll(t, s); len(got) != 0 {
		t.Fatalf("a job retried in an hour is due now: %s", jobString(got))
	}
	must(t, s.RetryMonitorJob(ctx, second[0], 0, "x")) // its lease is now the retry time: stale
	must(t, s.CompleteMonitorJobs(ctx, []*store.MonitorJob{second[0]}))
	if n, _ := s.CountMonitorJobs(ctx); n != 1 {
		t.Fatalf("count %d, want the retried job kept", n)
	}

	// released by its holder: due again at once, the same job
	push(t, s, u.ID, "w", 1, 1)
	third, err := s.ClaimMonitorJobs(ctx, 10, time.Hour)
	must(t, err)
	if len(third) != 1 || third[0].ID == second[0].ID {
		t.Fatalf("claimed %s, want the new push's job", jobString(third))
	}
	must(t, s.ReleaseMonitorJobs(ctx, third))
	fourth, err := s.ClaimMonitorJobs(ctx, 10, time.Hour)
	must(t, err)
	if len(fourth) != 1 || fourth[0].ID != third[0].ID {
		t.Fatalf("after release, claimed %s, want job %d", jobString(fourth), third[0].ID)
	}
	must(t, s.ReleaseMonitorJobs(ctx, third)) // stale: the job stays leased
	if got := claimAll(t, s); len(got) != 0 {
		t.Fatalf("a stale release made the job due: %s", jobString(got))
	}
}

// testMonitorConcurrentClaims: claimers racing over the queue get each job
// exactly once while leases hold.
func testMonitorConcurrentClaims(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	push(t, s, u.ID, "w", 1, 1)
	addGuardrail(t, s, u.ID, "w", true)
	const traces = 40
	push(t, s, u.ID, "w", traces, 1)
	var mu sync.Mutex
	seen := map[int64]int{}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				jobs, err := s.ClaimMonitorJobs(ctx, 3, time.Hour)
				if err != nil {
					errs <- err
					return
				}
				if len(jobs) == 0 {
					return
				}
				mu.Lock()
				for _, j := range jobs {
					seen[j.ID]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(seen) != traces {
		t.Fatalf("claimed %d distinct jobs, want %d", len(seen), traces)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("job %d claimed %d times", id, n)
		}
	}
}

// testMonitorErrors: evaluation errors are counted per guardrail with the
// last message, which is made storable.
func testMonitorErrors(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	at := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	must(t, s.RecordMonitorError(ctx, "g1", "rule 0: budget_exceeded", at))
	must(t, s.RecordMonitorError(ctx, "g1", "bad \x00 \xff text", at.Add(time.Second)))
	must(t, s.RecordMonitorError(ctx, "g2", strings.Repeat("é", 5000), at))
	got, err := s.MonitorErrors(ctx, []string{"g1", "g2", "g3"})
	must(t, err)
	g1, g2 := got["g1"], got["g2"]
	if len(got) != 2 || g1 == nil || g2 == nil {
		t.Fatalf("MonitorErrors = %v", got)
	}
	if g1.Count != 2 || g1.LastError != "bad \uFFFD \uFFFD text" || !g1.LastAt.Equal(at.Add(time.Second)) {
		t.Errorf("g1 = %+v", g1)
	}
	if g2.Count != 1 || len(g2.LastError) > 2000 || !strings.HasPrefix(g2.LastError, "éé") {
		t.Errorf("g2 = %d errors, last of %d bytes", g2.Count, len(g2.LastError))
	}
	if none, err := s.MonitorErrors(ctx, nil); err != nil || len(none) != 0 {
		t.Errorf("MonitorErrors(nil) = %v, %v", none, err)
	}
}

func init() { register("MonitorTrace", testMonitorTrace) }

// testMonitorTrace: MonitorTrace returns the trace with its first n
// events exactly as GetTrace does (whether they come from the recent-write
// memory or the database), and ErrNotFound once the trace is deleted.
func testMonitorTrace(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "u")
	res := push(t, s, u.ID, "w", 2, 3)
	id := res.Traces[0].ID
	_, err := s.AppendEvents(ctx, store.AppendRequest{TraceID: id, Messages: events("more", 2), Seal: chainSeal})
	must(t, err)
	full, err := s.GetTrace(ctx, id, true)
	must(t, err)
	for _, n := range []int{0, 2, 3, 5, 100} {
		got, err := s.MonitorTrace(ctx, id, n)
		must(t, err)
		want := full.Messages[:min(n, len(full.Messages))]
		if got.ID != id || got.OwnerID != u.ID || got.DatasetID != res.Dataset.ID || len(got.Messages) != len(want) {
			t.Fatalf("MonitorTrace(%d) = trace %s owner %s with %d events, want %d", n, got.ID, got.OwnerID, len(got.Messages), len(want))
		}
		for i, m := range got.Messages {
			if m.ID != want[i].ID || m.Index != want[i].Index || string(m.Data) != string(want[i].Data) || fmt.Sprint(m.NodeIDs) != fmt.Sprint(want[i].NodeIDs) {
				t.Fatalf("MonitorTrace(%d) event %d = %+v, want %+v", n, i, m, want[i])
			}
		}
	}
	// MonitorTraces: several at once, a trace twice with different
	// lengths and one that does not exist (no guardrail on the dataset:
	// the events come from the database).
	other := res.Traces[1].ID
	fullOther, err := s.GetTrace(ctx, other, true)
	must(t, err)
	ids := []string{id, "no-such-trace", other, id}
	ns := []int{2, 5, 100, 5}
	got, err := s.MonitorTraces(ctx, ids, ns)
	must(t, err)
	if len(got) != len(ids) || got[1] != nil {
		t.Fatalf("MonitorTraces gave %d traces, [1] = %v", len(got), got[1])
	}
	for i, tr := range got {
		if i == 1 {
			continue
		}
		src := full
		if ids[i] == other {
			src = fullOther
		}
		want := src.Messages[:min(ns[i], len(src.Messages))]
		if tr.ID != ids[i] || tr.OwnerID != u.ID || tr.DatasetID != res.Dataset.ID || tr.MessageCount != len(src.Messages) || len(tr.Messages) != len(want) {
			t.Fatalf("MonitorTraces [%d] = trace %s owner %s with %d/%d events, want %d", i, tr.ID, tr.OwnerID, len(tr.Messages), tr.MessageCount, len(want))
		}
		for k, m := range tr.Messages {
			if m.ID != want[k].ID || m.Index != want[k].Index || string(m.Data) != string(want[k].Data) || fmt.Sprint(m.NodeIDs) != fmt.Sprint(want[k].NodeIDs) {
				t.Fatalf("MonitorTraces [%d] event %d = %+v, want %+v", i, k, m, want[k])
			}
		}
	}
	if got, err := s.MonitorTraces(ctx, nil, nil); err != nil || len(got) != 0 {
		t.Fatalf("MonitorTraces of none = %v, %v", got, err)
	}
	must(t, s.DeleteTrace(ctx, id, nil))
	_, err = s.MonitorTrace(ctx, id, 5)
	wantErr(t, err, store.ErrNotFound)
}
