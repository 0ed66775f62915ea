package ask_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/ask"
	"github.com/vigilhq/vigil/internal/pgtest"
	"github.com/vigilhq/vigil/server"
	"github.com/vigilhq/vigil/store/postgres"
)

var verbose = flag.Bool("ask.verbose", false, "print each question's evidence")

// Targets of the model-free evidence step over testdata/questions.json.
const (
	wantRecallAt10 = 0.9
)

type question struct {
	Question string `json:"question"`
	Gold     []struct {
		Trace   string `json:"trace"`
		Address string `json:"address"`
	} `json:"gold"`
}

// covers reports whether evidence address ev cites inside gold address g
// (the same path or under it; selectors ignored).
func covers(g, ev string) bool {
	if i := strings.LastIndex(ev, ":"); i >= 0 && !strings.Contains(ev[i:], ".") {
		ev = ev[:i]
	}
	return ev == g || strings.HasPrefix(ev, g+".")
}

// TestQuestionSet runs the question set over the seeded dataset and
// fails when the evidence step's recall@10 falls below the target. It
// reports recall@10 and precision@3 (the share of the first three
// evidence items that cite inside a gold address).
func TestQuestionSet(t *testing.T) {
	runQuestionSet(t, newEnv(t, ask.Config{}))
}

// TestQuestionSetPostgres runs the question set on PostgreSQL (skipped
// without VIGIL_TEST_POSTGRES).
func TestQuestionSetPostgres(t *testing.T) {
	st, err := postgres.Open(context.Background(), pgtest.DSN(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	runQuestionSet(t, newEnvOn(t, ask.Config{}, st))
}

func runQuestionSet(t *testing.T, e *env) {
	e.seed(t, e.admin, "agents")
	b, err := os.ReadFile(filepath.Join("testdata", "questions.json"))
	if err != nil {
		t.Fatal(err)
	}
	var qs []question
	if err := json.Unmarshal(b, &qs); err != nil {
		t.Fatal(err)
	}
	if len(qs) < 40 {
		t.Fatalf("the question set has %d questions, want at least 40", len(qs))
	}
	var sumRecall, sumPrec float64
	for _, q := range qs {
		ans, err := e.svc.Ask(context.Background(), e.admin, server.AskRequest{Question: q.Question, Dataset: "agents"})
		if err != nil {
			t.Errorf("%q: %v", q.Question, err)
			continue
		}
		top := ans.Evidence[:min(10, len(ans.Evidence))]
		found := 0
		for _, g := range q.Gold {
			id := e.ids[g.Trace]
			if id == "" {
				t.Fatalf("%q: gold trace %s is not seeded", q.Question, g.Trace)
			}
			for _, ev := range top {
				if ev.TraceID == id && covers(g.Address, ev.Address) {
					found++
					break
				}
			}
		}
		recall := float64(found) / float64(len(q.Gold))
		good := 0
		for _, ev := range ans.Evidence[:min(3, len(ans.Evidence))] {
			for _, g := range q.Gold {
				if ev.TraceID == e.ids[g.Trace] && covers(g.Address, ev.Address) {
					good++
					break
				}
			}
		}
		prec := 0.0
		if n := min(3, len(ans.Evidence)); n > 0 {
			prec = float64(good) / float64(n)
		}
		sumRecall += recall
		sumPrec += prec
		if recall < 1 || *verbose {
			t.Logf("recall %.2f precision@3 %.2f: %q (query %s)", recall, prec, q.Question, ans.Query)
			for i, ev := range top {
				t.Logf("   %d %s %s %.2f %q %s", i+1, name(e, ev.TraceID), ev.Address, ev.Score, clip(ev.Quote), clip(ev.Why))
			}
		}
	}
	n := float64(len(qs))
	recall, prec := sumRecall/n, sumPrec/n
	t.Logf("%d questions: recall@10 %.3f, precision@3 %.3f", len(qs), recall, prec)
	fmt.Fprintf(os.Stderr, "ask question set: %d questions, recall@10 %.3f, precision@3 %.3f\n", len(qs), recall, prec)
	if recall < wantRecallAt10 {
		t.Errorf("recall@10 %.3f is below the target %.2f", recall, wantRecallAt10)
	}
}

func name(e *env, id string) string {
	for n, x := range e.ids {
		if x == id {
			return n
		}
	}
	return id
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}
