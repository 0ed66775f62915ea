package server

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/monitor"
	"github.com/vigilhq/vigil/store"
)

// TestMonitorMetrics: with Config.MonitorStats set to a real pool's
// Stats, GET /metrics shows the pool's counters as vigil_monitor_*
// counters, which follow the pool's work; without it the families are
// absent.
func TestMonitorMetrics(t *testing.T) {
	st := openSQLite(t)
	pool := monitor.Start(st, monitor.Options{Workers: 1, Poll: 10 * time.Millisecond, Logger: discardLogger()})
	defer pool.Stop()
	ts := newTestServer(t, st, func(c *Config) {
		c.MetricsPublic = true
		c.MonitorStats = pool.Stats
	})
	ctx := t.Context()
	d, err := ts.c.CreateDataset(ctx, "mm", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.c.CreateGuardrail(ctx, d.ID, client.GuardrailCreate{Name: "email", Policy: ruleEmail}); err != nil {
		t.Fatal(err)
	}
	scrape := func(t *testing.T, ts *testServer) string {
		t.Helper()
		code, b := ts.do(t, "GET", "/metrics", "", nil)
		if code != http.StatusOK {
			t.Fatalf("/metrics: %d %s", code, b)
		}
		return string(b)
	}
	value := func(body, name string) int64 {
		m := regexp.MustCompile(`(?m)^` + name + ` (\d+)$`).FindStringSubmatch(body)
		if m == nil {
			return -1
		}
		n, _ := strconv.ParseInt(m[1], 10, 64)
		return n
	}
	before := scrape(t, ts)
	for _, f := range monitorFamilies {
		if !strings.Contains(before, "# TYPE "+f.name+" counter\n") || value(before, f.name) != 0 {
			t.Errorf("before any push, %s is missing or not 0", f.name)
		}
	}
	for range 2 {
		pushRun(t, ts.c, "mm", nil) // "mail bob@example.com": the rule fires
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		fs, err := st.ListFindings(ctx, store.FindingFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if body := scrape(t, ts); value(body, "vigil_monitor_jobs_total") >= 2 && len(fs) >= 2 {
			if value(body, "vigil_monitor_evaluations_total") < 2 || value(body, "vigil_monitor_findings_total") < 2 ||
				value(body, "vigil_monitor_rule_errors_total") != 0 || value(body, "vigil_monitor_dropped_total") != 0 {
				t.Errorf("after two violating pushes:\n%s", body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pool did not finish two jobs: %+v", pool.Stats())
		}
		time.Sleep(20 * time.Millisecond)
	}

	plain := newTestServer(t, openSQLite(t), func(c *Config) { c.MetricsPublic = true })
	if body := scrape(t, plain); strings.Contains(body, "vigil_monitor_") {
		t.Errorf("a server without MonitorStats shows monitor families")
	}
}
