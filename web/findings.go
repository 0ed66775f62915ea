package web

import (
	"encoding/json"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/vigilhq/vigil/store"
)

type findingsView struct {
	Layout
	DS        *apiDataset
	CanTriage bool
	Status    string
	Severity  string
	Rule      string
	Rules     []string
	Rows      []findingRow
	Evals     []evalSuite
	Results   []evalResult
	Done      string
}

type findingRow struct {
	ID, Severity, Rule, Title, Status, Time, TraceURL, Events string
	TraceIndex                                                int64
	History                                                   []string
}

type evalSuite struct {
	Suite  string `json:"suite"`
	Status string `json:"status"`
	Cases  int    `json:"cases"`
	Passed int    `json:"passed"`
	Failed int    `json:"failed"`
}

type evalResult struct {
	Suite    string   `json:"suite"`
	Case     string   `json:"case"`
	RunID    string   `json:"runId"`
	Status   string   `json:"status"`
	Blocking []string `json:"blocking"`
}

// findingsPage is the review queue of one dataset (web-ui.md §4): the
// findings of the dataset's runs, filtered, newest first, and the evals
// summary. Access: the dataset must be readable (checked through the
// API), which is what GET /api/v1/findings?runId= asks of each run.
func (h *Handler) findingsPage(q *request) error {
	d, ref, err := q.datasetFromPath()
	if err != nil {
		return err
	}
	qs := q.r.URL.Query()
	v := &findingsView{Layout: q.layout("Findings · " + d.Name), DS: d, Status: qs.Get("status"), Severity: qs.Get("severity"), Rule: qs.Get("rule"), Done: qs.Get("done")}
	v.Dataset, v.Section = ref, "findings"
	if v.Status == "" {
		v.Status = "open"
	}
	v.CanTriage = q.caller != nil && q.caller.CanWrite() && ref.Owner
	f := store.FindingFilter{OwnerID: d.UserID, Limit: 5000}
	if v.Status != "all" {
		f.Status = []string{v.Status}
	}
	if v.Severity != "" {
		f.Severity = []string{v.Severity}
	}
	ctx := q.r.Context()
	fs, err := q.store().ListFindings(ctx, f)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(fs))
	for _, x := range fs {
		ids = append(ids, x.RunID)
	}
	index := map[string]int64{}
	if len(ids) > 0 {
		ts, err := q.store().ListTraces(ctx, store.TraceFilter{DatasetID: d.ID, IDs: ids})
		if err != nil {
			return err
		}
		for _, t := range ts {
			index[t.ID] = t.Index
		}
	}
	rules := map[string]bool{}
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].CreatedAt.After(fs[j].CreatedAt) })
	for _, x := range fs {
		idx, ok := index[x.RunID]
		if !ok {
			continue
		}
		rules[x.Monitor] = true
		if v.Rule != "" && x.Monitor != v.Rule {
			continue
		}
		row := findingRow{ID: x.ID, Severity: x.Severity, Rule: x.Monitor, Title: x.Title, Status: x.Status,
			Time: x.CreatedAt.UTC().Format("2006-01-02 15:04"), TraceIndex: idx,
			TraceURL: ref.URL() + "/t/" + strconv.FormatInt(idx, 10)}
		var cites []struct {
			Address string `json:"address"`
		}
		_ = json.Unmarshal(x.Citations, &cites)
		var evs []string
		for i, c := range cites {
			if i == 0 && c.Address != "" {
				row.TraceURL += fragment(c.Address)
			}
			if a, ok := parseAddress(c.Address); ok {
				if n, ok := eventOf(a.Path); ok {
					evs = append(evs, strconv.Itoa(n))
				}
			}
		}
		row.Events = strings.Join(evs, ", ")
		for _, t := range x.History {
			s := t.At.UTC().Format("2006-01-02 15:04") + " " + t.By + ": " + t.From + " → " + t.To
			if t.Note != "" {
				s += " (" + t.Note + ")"
			}
			row.History = append(row.History, s)
		}
		v.Rows = append(v.Rows, row)
	}
	for r := range rules {
		v.Rules = append(v.Rules, r)
	}
	sort.Strings(v.Rules)
	if q.caller != nil && q.caller.CanRead() {
		var ev struct {
			Suites  []evalSuite  `json:"suites"`
			Results []evalResult `json:"results"`
		}
		if q.api("GET", "/api/v1/evals", nil, &ev) == nil && len(ev.Results) > 0 {
			v.Evals, v.Results = evalsOf(q, d.ID, ev.Results)
		}
	}
	return q.render("findings", v)
}

// findingsTriage sets the status of the selected findings (one with the
// keyboard, or many), with an optional note, through the API.
func (h *Handler) findingsTriage(q *request) error {
	if err := q.needLogin(); err != nil {
		return err
	}
	_, ref, err := q.datasetFromPath()
	if err != nil {
		return err
	}
	to := map[string]string{"accept": "accepted", "dismiss": "dismissed", "reopen": "open"}[q.form("action")]
	if to == "" {
		return &httpError{400, "Choose accept, dismiss or reopen."}
	}
	ids := q.r.Form["id"]
	if len(ids) == 0 {
		return &httpError{400, "Select at least one finding."}
	}
	note := strings.TrimSpace(q.form("note"))
	for _, id := range ids {
		body := map[string]any{"status": to}
		if note != "" {
			body["note"] = note
		}
		if err := q.api("PATCH", "/api/v1/findings/"+url.PathEscape(id), body, nil); err != nil {
			return err
		}
	}
	back := ref.URL() + "/findings?done=" + url.QueryEscape(strconv.Itoa(len(ids))+" "+to)
	for _, k := range []string{"status", "severity", "rule"} {
		if v := q.form("f_" + k); v != "" {
			back += "&" + k + "=" + url.QueryEscape(v)
		}
	}
	return redirect(back)
}

// evalsOf keeps the eval results whose run is in the dataset and sums
// them per suite (ledger.md §8.3: a suite passes when every case passes).
func evalsOf(q *request, datasetID string, results []evalResult) ([]evalSuite, []evalResult) {
	ids := make([]string, 0, len(results))
	for _, r := range results {
		ids = append(ids, r.RunID)
	}
	ts, err := q.store().ListTraces(q.r.Context(), store.TraceFilter{DatasetID: datasetID, IDs: ids})
	if err != nil {
		return nil, nil
	}
	in := map[string]bool{}
	for _, t := range ts {
		in[t.ID] = true
	}
	var kept []evalResult
	suites := map[string]*evalSuite{}
	var order []string
	for _, r := range results {
		if !in[r.RunID] {
			continue
		}
		kept = append(kept, r)
		s := suites[r.Suite]
		if s == nil {
			s = &evalSuite{Suite: r.Suite, Status: "pass"}
			suites[r.Suite] = s
			order = append(order, r.Suite)
		}
		s.Cases++
		if r.Status == "pass" {
			s.Passed++
		} else {
			s.Failed++
			s.Status = "fail"
		}
	}
	out := make([]evalSuite, 0, len(order))
	for _, name := range order {
		out = append(out, *suites[name])
	}
	return out, kept
}
