package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/vigilhq/vigil/ledger"
	"github.com/vigilhq/vigil/store"
)

// Findings and the review queue (spec/ledger.md §8.1, §8.2, §10). Findings
// are written by monitors; these endpoints read them and move them through
// the review states. Times are the ledger's integer milliseconds.

// findingJSON is the Finding object of ledger.md §8.1.
type findingJSON struct {
	ID        string           `json:"id"`
	RunID     string           `json:"runId"`
	NodeID    *string          `json:"nodeId"`
	MonitorID string           `json:"monitorId"`
	Monitor   string           `json:"monitor"`
	Key       string           `json:"key"`
	Title     string           `json:"title"`
	Severity  string           `json:"severity"`
	Score     float64          `json:"score"`
	Citations json.RawMessage  `json:"citations"`
	Status    string           `json:"status"`
	Context   json.RawMessage  `json:"context"`
	CreatedAt int64            `json:"createdAt"`
	UpdatedAt int64            `json:"updatedAt"`
	History   []transitionJSON `json:"history"`
}

type transitionJSON struct {
	At   int64  `json:"at"`
	By   string `json:"by"`
	From string `json:"from"`
	To   string `json:"to"`
	Note string `json:"note"`
}

func findingOut(f *store.Finding) findingJSON {
	out := findingJSON{
		ID: f.ID, RunID: f.RunID, NodeID: optString(f.NodeID), MonitorID: f.MonitorID, Monitor: f.Monitor, Key: f.Key,
		Title: f.Title, Severity: f.Severity, Score: f.Score, Citations: f.Citations, Status: f.Status,
		Context: objectOrEmpty(f.Context), CreatedAt: millis(f.CreatedAt), UpdatedAt: millis(f.UpdatedAt),
		History: make([]transitionJSON, 0, len(f.History)),
	}
	if len(out.Citations) == 0 {
		out.Citations = json.RawMessage("[]")
	}
	for _, h := range f.History {
		out.History = append(out.History, transitionJSON{At: millis(h.At), By: h.By, From: h.From, To: h.To, Note: h.Note})
	}
	return out
}

func findingsOut(fs []*store.Finding) []findingJSON {
	out := make([]findingJSON, 0, len(fs))
	for _, f := range fs {
		out = append(out, findingOut(f))
	}
	return out
}

// listParam splits a comma-separated query parameter and checks each
// value against allowed; nil when absent.
func listParam(r *http.Request, name string, allowed ...string) ([]string, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return nil, nil
	}
	var out []string
	for _, x := range strings.Split(v, ",") {
		x = strings.TrimSpace(x)
		if !containsString(allowed, x) {
			return nil, badRequest("%s must be one or more of %s (comma-separated), got %q", name, strings.Join(allowed, ", "), x)
		}
		out = append(out, x)
	}
	return out, nil
}

var (
	findingStatuses   = []string{store.FindingOpen, store.FindingAccepted, store.FindingDismissed}
	findingSeverities = []string{store.SeverityInfo, store.SeverityWarn, store.SeverityCritical}
)

// findingFilter builds the filter of a findings list: the caller's own
// findings (every owner's for admins), or those of one run the caller can
// read (runId).
func (s *Server) findingFilter(r *http.Request, p *principal) (store.FindingFilter, error) {
	var f store.FindingFilter
	q := r.URL.Query()
	if runID := q.Get("runId"); runID != "" {
		if _, err := s.traceForRead(r, p, runID, false); err != nil {
			return f, err
		}
		f.RunID = runID
	} else if !p.isAdmin() {
		f.OwnerID = p.User.ID
	}
	f.MonitorID = q.Get("monitorId")
	var err error
	if f.Status, err = listParam(r, "status", findingStatuses...); err != nil {
		return f, err
	}
	if f.Severity, err = listParam(r, "severity", findingSeverities...); err != nil {
		return f, err
	}
	return f, nil
}

// writeFindingPage lists one page of f and writes {"findings", "next_cursor"}.
func (s *Server) writeFindingPage(w http.ResponseWriter, r *http.Request, f store.FindingFilter) error {
	limit, offset, err := pageParams(r)
	if err != nil {
		return err
	}
	f.Limit, f.Offset = limit+1, offset
	fs, err := s.st.ListFindings(r.Context(), f)
	if err != nil {
		return err
	}
	next := nextCursor(len(fs), limit, offset)
	writeJSON(w, http.StatusOK, map[string]any{"findings": findingsOut(fs[:min(len(fs), limit)]), "next_cursor": next})
	return nil
}

// handleFindingList serves GET /api/v1/findings?runId&status&severity&monitorId&limit&cursor,
// by createdAt then id.
func (s *Server) handleFindingList(w http.ResponseWriter, r *http.Request, p *principal) error {
	f, err := s.findingFilter(r, p)
	if err != nil {
		return err
	}
	return s.writeFindingPage(w, r, f)
}

// handleReviewQueue serves GET /api/v1/review-queue: the open findings,
// critical first, then by createdAt, then id (ledger.md §8.2). It takes
// the list's filters except status.
func (s *Server) handleReviewQueue(w http.ResponseWriter, r *http.Request, p *principal) error {
	if r.URL.Query().Has("status") {
		return badRequest("the review queue lists open findings only; use GET /api/v1/findings?status=… for others")
	}
	f, err := s.findingFilter(r, p)
	if err != nil {
		return err
	}
	f.Status, f.ReviewOrder = []string{store.FindingOpen}, true
	return s.writeFindingPage(w, r, f)
}

// findingForRead returns the finding {id} when the caller owns it, is an
// admin or can read its run; 404 otherwise.
func (s *Server) findingForRead(r *http.Request, p *principal) (*store.Finding, error) {
	id := r.PathValue("id")
	f, err := s.st.GetFinding(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("finding %s not found", id)
	}
	if err != nil {
		return nil, fmt.Errorf("get finding %s: %w", id, err)
	}
	if s.canWrite(p, f.OwnerID) {
		return f, nil
	}
	if _, err := s.traceForRead(r, p, f.RunID, false); err != nil {
		return nil, notFound("finding %s not found", id)
	}
	return f, nil
}

// handleFindingGet serves GET /api/v1/findings/{id}.
func (s *Server) handleFindingGet(w http.ResponseWriter, r *http.Request, p *principal) error {
	f, err := s.findingForRead(r, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, findingOut(f))
	return nil
}

// handleFindingPatch serves PATCH /api/v1/findings/{id} {status, note}: a
// review transition open → accepted|dismissed, accepted|dismissed → open,
// appended to the history with the caller's username. Other transitions
// (including to the current status) are 409.
func (s *Server) handleFindingPatch(w http.ResponseWriter, r *http.Request, p *principal) error {
	f, err := s.findingForRead(r, p)
	if err != nil {
		return err
	}
	if !s.canWrite(p, f.OwnerID) {
		return apiErr(http.StatusForbidden, CodeForbidden, "only the owner of finding %s or an admin may review it", f.ID)
	}
	var body struct {
		Status *string `json:"status"`
		Note   *string `json:"note"`
	}
	if err := s.decodeJSON(w, r, &body, false); err != nil {
		return err
	}
	if body.Status == nil {
		return badRequest(`status must be given: "open", "accepted" or "dismissed"`)
	}
	to := *body.Status
	if !containsString(findingStatuses, to) {
		return badRequest(`status must be "open", "accepted" or "dismissed", got %q`, to)
	}
	if ok, why := reviewAllowed(f.Status, to); !ok {
		return apiErr(http.StatusConflict, CodeVersionConflict, "finding %s: %s", f.ID, why)
	}
	out, err := s.st.SetFindingStatus(r.Context(), f.ID, to, p.User.Username, deref(body.Note), s.now())
	if errors.Is(err, store.ErrConflict) {
		// Another reviewer moved it between our read and write.
		cur, gerr := s.st.GetFinding(r.Context(), f.ID)
		if gerr == nil {
			_, why := reviewAllowed(cur.Status, to)
			return apiErr(http.StatusConflict, CodeVersionConflict, "finding %s: %s", f.ID, why)
		}
	}
	if err != nil {
		return fmt.Errorf("review finding %s: %w", f.ID, err)
	}
	writeJSON(w, http.StatusOK, findingOut(out))
	return nil
}

// reviewAllowed applies the review state machine of ledger.md §8.2 and
// says why a transition is refused.
func reviewAllowed(from, to string) (bool, string) {
	switch {
	case from == to:
		return false, fmt.Sprintf("it is already %s", from)
	case from == store.FindingOpen:
		return true, ""
	case to == store.FindingOpen:
		return true, ""
	}
	return false, fmt.Sprintf("it is %s; reopen it before marking it %s", from, to)
}

// setAnomalyScores sets each node's anomalyScore: the highest score among
// the run's non-dismissed findings that cite it (ledger.md §8.2); nodes
// nobody cites keep none.
func (s *Server) setAnomalyScores(r *http.Request, runID string, nodes []ledger.Node) error {
	fs, err := s.st.ListFindings(r.Context(), store.FindingFilter{RunID: runID,
		Status: []string{store.FindingOpen, store.FindingAccepted}})
	if err != nil {
		return fmt.Errorf("anomaly scores of run %s: %w", runID, err)
	}
	best := map[string]float64{}
	for _, f := range fs {
		var cites []struct {
			NodeID *string `json:"nodeId"`
		}
		_ = json.Unmarshal(f.Citations, &cites) // stored citations are JSON; a bad row cites nothing
		seen := map[string]bool{}
		if f.NodeID != "" {
			seen[f.NodeID] = true
		}
		for _, c := range cites {
			if c.NodeID != nil && *c.NodeID != "" {
				seen[*c.NodeID] = true
			}
		}
		for id := range seen {
			if v, ok := best[id]; !ok || f.Score > v {
				best[id] = f.Score
			}
		}
	}
	for i := range nodes {
		if v, ok := best[nodes[i].ID]; ok {
			nodes[i].AnomalyScore = &v
		}
	}
	return nil
}
