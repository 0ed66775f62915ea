package monitor

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/vigilhq/vigil/detect" // the benchmark rules call secrets()
	"github.com/vigilhq/vigil/internal/tracegen"
	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/store/sqlite"
)

// BenchmarkEvaluate is one job of a 20-event agent run against the five
// benchmark rules as five guardrails, on SQLite: reading the trace,
// decoding it, evaluating and (no violations) writing nothing. It reports
// µs per event.
func BenchmarkEvaluate(b *testing.B) {
	st, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "v.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	u := &store.User{Username: "u", Role: store.RoleMember}
	must(b, st.CreateUser(b.Context(), u))
	d := &store.Dataset{OwnerID: u.ID, Name: "d"}
	must(b, st.CreateDataset(b.Context(), d))
	parts := strings.Split(tracegen.GuardrailPolicy, "\nraise ")
	for i, r := range parts[1:] {
		g := &store.Guardrail{DatasetID: d.ID, Name: fmt.Sprint("r", i), Content: parts[0] + "\nraise " + r, Enabled: true, Action: "log", UpdatedBy: u.ID}
		must(b, st.CreateGuardrail(b.Context(), g, store.GuardrailCreated, ""))
	}
	var msgs []store.Message
	for i, e := range tracegen.AgentRun(1, 20) {
		m := e.(map[string]any)
		m["message_id"] = fmt.Sprint("m", i)
		data, _ := json.Marshal(m)
		msgs = append(msgs, store.Message{ID: fmt.Sprint("m", i), NodeIDs: []string{fmt.Sprint("n", i)}, Data: data})
	}
	res, err := st.PushTraces(b.Context(), store.PushRequest{OwnerID: u.ID, DatasetName: "d", Traces: []store.NewTrace{{Messages: msgs}}})
	must(b, err)
	jobs, err := st.ClaimMonitorJobs(b.Context(), 1, 0)
	must(b, err)
	if len(jobs) != 1 || jobs[0].TraceID != res.Traces[0].ID {
		b.Fatalf("jobs %+v", jobs)
	}
	p := &Pool{st: st, log: slog.New(slog.NewTextHandler(io.Discard, nil)), rules: newRuleCache(16, optsDefaults(Options{}).Policy), rulesets: map[rulesetKey][]*store.Guardrail{}}
	b.ResetTimer()
	for b.Loop() {
		must(b, p.Evaluate(b.Context(), jobs[0]))
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*20), "µs/event")
}
