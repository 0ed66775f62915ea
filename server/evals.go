package server

import (
	"cmp"
	"net/http"
	"slices"

	"github.com/vigilhq/vigil/store"
)

// Evals (spec/ledger.md §8.3): a run whose metadata has eval: {suite, case}
// is an eval case. The latest run of a case passes exactly when it has no
// open finding of severity warn or critical; a suite passes when each of
// its cases passes. Everything is computed on read, so reviewing a finding
// changes the result at once.

// evalResultJSON is one case's result.
type evalResultJSON struct {
	Suite    string   `json:"suite"`
	Case     string   `json:"case"`
	RunID    string   `json:"runId"`
	Status   string   `json:"status"`
	Blocking []string `json:"blocking"`
}

// evalSuiteJSON summarises a suite (a Vigil addition to the result).
type evalSuiteJSON struct {
	Suite  string `json:"suite"`
	Status string `json:"status"`
	Cases  int    `json:"cases"`
	Passed int    `json:"passed"`
	Failed int    `json:"failed"`
}

// handleEvals serves GET /api/v1/evals?suite: {"results": [...], "suites":
// [...]}, by suite then case. Callers see their own runs (admins every
// owner's).
func (s *Server) handleEvals(w http.ResponseWriter, r *http.Request, p *principal) error {
	owner := p.User.ID
	if p.isAdmin() {
		owner = ""
	}
	cases, err := s.st.ListEvalCases(r.Context(), owner, r.URL.Query().Get("suite"))
	if err != nil {
		return err
	}
	// The latest run of each (suite, case): cases come oldest first.
	type sc struct{ suite, kase string }
	latest := map[sc]store.EvalCase{}
	for _, c := range cases {
		latest[sc{c.Suite, c.Case}] = c
	}
	results := make([]evalResultJSON, 0, len(latest))
	runIDs := make([]string, 0, len(latest))
	for _, c := range latest {
		results = append(results, evalResultJSON{Suite: c.Suite, Case: c.Case, RunID: c.RunID, Status: "pass", Blocking: []string{}})
		runIDs = append(runIDs, c.RunID)
	}
	slices.SortFunc(results, func(a, b evalResultJSON) int {
		return cmp.Or(cmp.Compare(a.Suite, b.Suite), cmp.Compare(a.Case, b.Case))
	})
	if len(runIDs) > 0 {
		fs, err := s.st.ListFindings(r.Context(), store.FindingFilter{RunIDs: runIDs,
			Status: []string{store.FindingOpen}, Severity: []string{store.SeverityWarn, store.SeverityCritical}})
		if err != nil {
			return err
		}
		blocking := map[string][]string{}
		for _, f := range fs {
			blocking[f.RunID] = append(blocking[f.RunID], f.ID)
		}
		for i := range results {
			if b := blocking[results[i].RunID]; len(b) > 0 {
				results[i].Status, results[i].Blocking = "fail", b
			}
		}
	}
	suites := []evalSuiteJSON{}
	for _, res := range results {
		if len(suites) == 0 || suites[len(suites)-1].Suite != res.Suite {
			suites = append(suites, evalSuiteJSON{Suite: res.Suite, Status: "pass"})
		}
		su := &suites[len(suites)-1]
		su.Cases++
		if res.Status == "pass" {
			su.Passed++
		} else {
			su.Failed++
			su.Status = "fail"
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": results, "suites": suites})
	return nil
}
