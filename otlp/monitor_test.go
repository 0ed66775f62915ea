package otlp_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/vigilhq/vigil/otlp"
	"github.com/vigilhq/vigil/store"
)

// TestMonitorJobsCoverAppends: conversations appended to through OTLP
// (several per request, written in one transaction) queue monitor jobs
// that together cover every stored event of every trace exactly once, so
// guardrails see each append.
func TestMonitorJobsCoverAppends(t *testing.T) {
	for _, kind := range []storeKind{sqliteStore, postgresStore} {
		t.Run(string(kind), func(t *testing.T) {
			b := newBackend(t, kind, otlp.Config{})
			ctx := context.Background()
			send := func(turns []turnRef) {
				t.Helper()
				req, _ := http.NewRequest("POST", b.url+"/v1/traces", bytes.NewReader(benchRequest(turns, false)))
				req.Header.Set("Content-Type", "application/x-protobuf")
				req.Header.Set("Authorization", "Bearer "+b.key)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Fatalf("status %d", resp.StatusCode)
				}
			}
			send([]turnRef{{0, 4}, {1, 4}, {2, 4}})
			users, err := b.st.ListUsers(ctx)
			if err != nil {
				t.Fatal(err)
			}
			d, err := b.st.GetDatasetByName(ctx, users[0].ID, "bench")
			if err != nil {
				t.Fatal(err)
			}
			g := &store.Guardrail{DatasetID: d.ID, Name: "g", Content: "raise \"x\" if:\n  (m: Message)", Enabled: true, Action: "log", UpdatedBy: users[0].ID}
			if err := b.st.CreateGuardrail(ctx, g, store.GuardrailCreated, ""); err != nil {
				t.Fatal(err)
			}
			if _, err := b.st.ClaimMonitorJobs(ctx, 1000, time.Hour); err != nil { // the push's, queued before the guardrail: none
				t.Fatal(err)
			}
			// Two requests appending to all three conversations, then
			// one to two of them.
			send([]turnRef{{0, 5}, {1, 5}, {2, 5}, {0, 6}, {1, 6}, {2, 6}})
			send([]turnRef{{0, 7}, {2, 7}})
			jobs, err := b.st.ClaimMonitorJobs(ctx, 1000, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			covered := map[string][]int{}
			for _, j := range jobs {
				for i := j.From; i < j.To; i++ {
					covered[j.TraceID] = append(covered[j.TraceID], i)
				}
			}
			ts := b.traces(t, "bench")
			if len(ts) != 3 {
				t.Fatalf("%d traces, want 3", len(ts))
			}
			for _, tr := range ts {
				var want []int
				for i := 10; i < tr.MessageCount; i++ { // the first turn's 10 were pushed before the guardrail
					want = append(want, i)
				}
				got := covered[tr.ID]
				slices.Sort(got)
				if !slices.Equal(got, want) || len(want) == 0 {
					t.Errorf("trace %s of %d events: jobs cover %v, want %v", tr.ID, tr.MessageCount, got, want)
				}
			}
			if t.Failed() {
				t.Log(fmt.Sprint(len(jobs), " jobs"))
			}
		})
	}
}
