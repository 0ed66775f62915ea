package ask_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/ask"
	"github.com/vigilhq/vigil/ingest"
	"github.com/vigilhq/vigil/internal/tracegen"
	"github.com/vigilhq/vigil/ledger"
	"github.com/vigilhq/vigil/server"
	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/store/sqlite"
)

// benchTraces is the size of the benchmark store.
const benchTraces = 50000

// benchDB returns the path of the benchmark database, seeding it on
// first use and reusing it after (it lives in the temporary directory,
// named for its contents): 50,000 traces, half of them variations of
// testdata/agents.json (other addresses, order numbers and times over
// 60 days, with findings), half tracegen agent runs, pushed with the
// store's bulk push in batches of 1,000.
func benchDB(b *testing.B) string {
	b.Helper()
	path := filepath.Join(os.TempDir(), fmt.Sprintf("vigil-ask-bench-%d-v1.db", benchTraces))
	if _, err := os.Stat(path + ".done"); err == nil {
		return path
	}
	os.Remove(path)
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path, &sqlite.Options{Synchronous: "NORMAL"})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if _, err := server.Bootstrap(ctx, st, server.BootstrapOptions{EnvKey: adminKey}); err != nil {
		b.Fatal(err)
	}
	admin, err := st.GetUserByName(ctx, "admin")
	if err != nil {
		b.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join("testdata", "agents.json"))
	if err != nil {
		b.Fatal(err)
	}
	var seeds []seedTrace
	if err := json.Unmarshal(raw, &seeds); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	type finding struct {
		id, run string
		k       int
		seed    *seedTrace
	}
	var fs []finding
	for batch := 0; batch < benchTraces/1000; batch++ {
		var nts []store.NewTrace
		tools := map[string]*store.ToolUse{}
		for j := range 1000 {
			i := batch*1000 + j
			var events []byte
			var name string
			var sd *seedTrace
			if i%2 == 0 {
				sd = &seeds[(i/2)%len(seeds)]
				events, _ = json.Marshal(sd.Messages)
				s := string(events)
				r := strings.NewReplacer("bob@", "bob"+strconv.Itoa(i)+"@", "10422", strconv.Itoa(200000+i),
					"10999", strconv.Itoa(300000+i), "eve.leak", "eve"+strconv.Itoa(i%977), "naples", "city"+strconv.Itoa(i%313))
				events, name = []byte(r.Replace(s)), sd.Name+"-"+strconv.Itoa(i)
			} else {
				events, _ = json.Marshal(tracegen.AgentRun(i, 9))
				name = "run-" + strconv.Itoa(i)
			}
			id := store.NewID()
			var warn ingest.Warnings
			pe, err := ingest.Prepare(events, ingest.TraceOptions{TraceIdx: j, TraceID: id}, &warn)
			if err != nil {
				b.Fatal(err)
			}
			ingest.MergeTools(tools, pe.Tools)
			nts = append(nts, store.NewTrace{ID: id, Name: name, Messages: pe.Messages,
				TimeCreated: testNow.Add(-time.Duration(i%(60*24)) * time.Hour)})
			if sd != nil && i%20 == 0 {
				for k := range sd.Findings {
					fs = append(fs, finding{id: ulidFor(name, k), run: id, k: k, seed: sd})
				}
			}
		}
		if _, err := st.PushTraces(ctx, store.PushRequest{OwnerID: admin.ID, DatasetName: "agents", CreateIfMissing: true,
			Traces: nts, Tools: ingest.ToolList(tools)}); err != nil {
			b.Fatal(err)
		}
	}
	for _, f := range fs {
		sf := f.seed.Findings[f.k]
		var cites []map[string]any
		for _, a := range sf.Citations {
			cites = append(cites, map[string]any{"nodeId": nil, "address": a})
		}
		cj, _ := json.Marshal(cites)
		if _, _, err := st.UpsertFinding(ctx, &store.Finding{ID: f.id, RunID: f.run, OwnerID: admin.ID, MonitorID: "mon-" + sf.Monitor,
			Monitor: sf.Monitor, Key: f.id, Title: sf.Title, Severity: sf.Severity, Score: 0.6, Citations: cj,
			Status: store.FindingOpen, CreatedAt: testNow, UpdatedAt: testNow}); err != nil {
			b.Fatal(err)
		}
	}
	for {
		n, err := st.IndexPending(ctx, 5000)
		if err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	b.Logf("seeded %d traces and %d findings in %v", benchTraces, len(fs), time.Since(start))
	if err := os.WriteFile(path+".done", nil, 0o644); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkAskEvidence answers the question set (testdata/questions.json,
// in turn) with evidence only over 50,000 traces on SQLite, and reports
// the p50 and p95 latency of one answer. Target: p50 ≤ 100 ms.
func BenchmarkAskEvidence(b *testing.B) {
	path := benchDB(b)
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path, &sqlite.Options{Synchronous: "NORMAL"})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	key, _ := ledger.GenerateKey()
	srv, err := server.New(server.Config{Store: st, LedgerKey: key, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	svc, err := ask.New(srv, ask.Config{Now: func() time.Time { return testNow }})
	if err != nil {
		b.Fatal(err)
	}
	admin, err := srv.AuthenticateKey(ctx, adminKey)
	if err != nil {
		b.Fatal(err)
	}
	raw, _ := os.ReadFile(filepath.Join("testdata", "questions.json"))
	var qs []question
	if err := json.Unmarshal(raw, &qs); err != nil {
		b.Fatal(err)
	}
	// Warm the caches once per question.
	for _, q := range qs {
		if _, err := svc.Ask(ctx, admin, server.AskRequest{Question: q.Question, Dataset: "agents"}); err != nil {
			b.Fatal(err)
		}
	}
	times := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		q := qs[i%len(qs)]
		t0 := time.Now()
		if _, err := svc.Ask(ctx, admin, server.AskRequest{Question: q.Question, Dataset: "agents"}); err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(times)
	pct := func(p float64) float64 {
		return float64(times[min(len(times)-1, int(p*float64(len(times))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.5), "p50-ms")
	b.ReportMetric(pct(0.95), "p95-ms")
}
