package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/internal/pgtest"
	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/store/postgres"
	"github.com/vigilhq/vigil/store/sqlite"
)

// monitorBackend is where the monitor end-to-end tests keep their store:
// env for startServe and an open function for the test's own access.
type monitorBackend struct {
	name string
	env  func(t *testing.T) []string
	open func(t *testing.T, dir string, env []string) store.Store
}

var monitorBackends = []monitorBackend{
	{"sqlite", func(*testing.T) []string { return nil }, func(t *testing.T, dir string, _ []string) store.Store {
		st, err := sqlite.Open(t.Context(), filepath.Join(dir, "vigil.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}},
	{"postgres", func(t *testing.T) []string { return []string{"VIGIL_DB=" + pgtest.DSN(t)} }, func(t *testing.T, _ string, env []string) store.Store {
		st, err := postgres.Open(t.Context(), strings.TrimPrefix(env[0], "VIGIL_DB="), nil)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}},
}

const monitorRule = `raise "marked trace" if:
    (m: Message)
    "MARK" in m.content
`

// addMonitor creates dataset ds of the admin (by pushing a clean trace
// through the server) and gives it an enabled guardrail, written through
// the store as the guardrail API would.
func addMonitor(t *testing.T, url string, st store.Store, ds string) *store.Guardrail {
	t.Helper()
	c := client.New(url, testKey)
	if _, err := c.Push(t.Context(), client.PushRequest{Dataset: ds, Messages: [][]any{{map[string]any{"role": "user", "content": "setup"}}}}); err != nil {
		t.Fatal(err)
	}
	admin, err := st.GetUserByName(t.Context(), "admin")
	if err != nil {
		t.Fatal(err)
	}
	d, err := st.GetDatasetByName(t.Context(), admin.ID, ds)
	if err != nil {
		t.Fatal(err)
	}
	g := &store.Guardrail{DatasetID: d.ID, Name: "mark", Content: monitorRule, Enabled: true, Action: "log", Severity: store.SeverityCritical, UpdatedBy: admin.ID}
	if err := st.CreateGuardrail(t.Context(), g, store.GuardrailCreated, ""); err != nil {
		t.Fatal(err)
	}
	return g
}

// waitDrained waits until the monitor queue is empty.
func waitDrained(t *testing.T, st store.Store, p *serveProc) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		n, err := st.CountMonitorJobs(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d monitor jobs still queued after a minute\n%s", n, p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill SIGKILLs the server and waits for it.
func kill(t *testing.T, p *serveProc) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait()
}

// TestServeMonitorFindingSurvivesKill: a violating and a clean trace pushed
// to a server whose workers are off are acknowledged, the server is killed
// with SIGKILL before any evaluation, and the restarted server (workers on)
// still files exactly one finding, on the violating trace.
func TestServeMonitorFindingSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	for _, b := range monitorBackends {
		t.Run(b.name, func(t *testing.T) {
			dir := t.TempDir()
			env := b.env(t)
			st := b.open(t, dir, env)
			defer st.Close()
			off := append([]string{"VIGIL_API_KEY=" + testKey, "VIGIL_MONITORS_WORKERS=-1"}, env...)
			p := startServe(t, dir, off...)
			g := addMonitor(t, p.url, st, "mon")
			c := client.New(p.url, testKey)
			res, err := c.Push(t.Context(), client.PushRequest{Dataset: "mon", Messages: [][]any{
				{map[string]any{"role": "user", "content": "please MARK this"}, map[string]any{"role": "assistant", "content": "ok"}},
				{map[string]any{"role": "user", "content": "nothing here"}},
			}})
			if err != nil {
				t.Fatal(err)
			}
			kill(t, p) // after the 200, before any evaluation
			if n, err := st.CountMonitorJobs(t.Context()); err != nil || n != 2 {
				t.Fatalf("queued jobs after the kill: %d (%v), want 2 (one per pushed trace)", n, err)
			}
			if fs, _ := st.ListFindings(t.Context(), store.FindingFilter{}); len(fs) != 0 {
				t.Fatalf("findings before any worker ran: %+v", fs)
			}

			p = startServe(t, dir, append([]string{"VIGIL_API_KEY=" + testKey}, env...)...)
			waitDrained(t, st, p)
			fs, err := st.ListFindings(t.Context(), store.FindingFilter{})
			if err != nil {
				t.Fatal(err)
			}
			if len(fs) != 1 || fs[0].RunID != res.ID[0] || fs[0].MonitorID != g.ID || fs[0].Severity != "critical" || fs[0].Title != "marked trace" {
				t.Fatalf("findings after restart: %+v, want one on trace %s", fs, res.ID[0])
			}
		})
	}
}

// TestServeMonitorKillMidIngest: clients push while the workers evaluate;
// SIGKILL at an arbitrary moment; after a restart every acknowledged
// violating trace has exactly one finding and no clean one has any.
func TestServeMonitorKillMidIngest(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	dir := t.TempDir()
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "vigil.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// a short lease: the killed server's claimed jobs are taken over soon
	p := startServe(t, dir, "VIGIL_API_KEY="+testKey, "VIGIL_MONITORS_LEASE=1s")
	addMonitorNamed(t, p.url, st, "crash")
	stop := make(chan struct{})
	res := make(chan map[string]int)
	go func() { res <- ingest(p.url, stop) }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		if n := countTraces(t, p.url); n >= 150 {
			break
		}
	}
	kill(t, p)
	close(stop)
	acked := <-res
	p = startServe(t, dir, "VIGIL_API_KEY="+testKey, "VIGIL_MONITORS_LEASE=1s")
	waitDrained(t, st, p)
	fs, err := st.ListFindings(t.Context(), store.FindingFilter{})
	if err != nil {
		t.Fatal(err)
	}
	byRun := map[string]int{}
	for _, f := range fs {
		byRun[f.RunID]++
	}
	ctx := context.Background()
	violating := 0
	for id := range acked {
		tr, err := st.GetTrace(ctx, id, true)
		if err != nil {
			t.Fatalf("acknowledged trace %s: %v", id, err)
		}
		want := 0
		if strings.Contains(string(tr.Messages[0].Data), "trace 3") {
			want = 1
			violating++
		}
		if byRun[id] != want {
			t.Fatalf("trace %s (%s) has %d findings, want %d", id, tr.Messages[0].Data, byRun[id], want)
		}
	}
	if violating == 0 {
		t.Fatal("no violating trace was acknowledged")
	}
	t.Logf("%d traces acknowledged, %d violating, %d findings", len(acked), violating, len(fs))
}

// addMonitorNamed is addMonitor with a rule that flags the fourth trace of
// every batch ingest sends ("… trace 3").
func addMonitorNamed(t *testing.T, url string, st store.Store, ds string) {
	t.Helper()
	g := addMonitor(t, url, st, ds)
	content := strings.Replace(monitorRule, `"MARK"`, `"trace 3"`, 1)
	if _, err := st.UpdateGuardrail(t.Context(), g.ID, store.GuardrailUpdate{Content: &content, AuthorID: g.UpdatedBy}); err != nil {
		t.Fatal(fmt.Errorf("update guardrail: %w", err))
	}
}
