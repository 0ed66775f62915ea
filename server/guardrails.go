package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/vigilhq/vigil/policy"
	"github.com/vigilhq/vigil/store"
)

// Dataset guardrails (explorer-api §9.1–9.3): CRUD with Invariant's bodies
// and detail texts, immutable versions, restore, ruleset snapshots, the
// change feed with long-poll. Every write is validated with policy.Load
// before anything is stored, and published through s.feed after commit.

// startGuardrails sets up the rule caches and the change feed; Close
// stops the feed.
func (s *Server) startGuardrails() {
	s.rules = NewRuleCache(s.cfg.RuleCacheSize, policy.Options{})
	s.metrics.counter("vigil_rules_cache_hits_total", "Dataset guardrail rules found compiled in the rule cache.")
	s.metrics.counter("vigil_rules_cache_misses_total", "Dataset guardrail rules compiled (not in the rule cache).")
	s.metrics.histogram("vigil_rules_compile_seconds", "Time to compile a dataset guardrail rule.", defBuckets)
	s.rules.observe = func(hit bool, compile time.Duration) {
		if hit {
			s.metrics.Add("vigil_rules_cache_hits_total", 1)
			return
		}
		s.metrics.Add("vigil_rules_cache_misses_total", 1)
		s.metrics.Observe("vigil_rules_compile_seconds", compile.Seconds())
	}
	s.rulesets = newRulesets(s.rules)
	s.feed = startGuardrailFeed(s)
}

// Close stops the server's background work (the guardrail change
// subscription, the search indexer) and ends held change-feed requests. It
// does not close the store. Call it before closing the store.
func (s *Server) Close() error {
	s.feed.stop()
	s.indexer.stop()
	return nil
}

// guardrailJSON is the Guardrail object (explorer-api §2.6).
type guardrailJSON struct {
	ID              string          `json:"id"`
	Name            string          `json:"name"`
	Content         string          `json:"content"`
	Enabled         bool            `json:"enabled"`
	Action          string          `json:"action"`
	ExtraMetadata   json.RawMessage `json:"extra_metadata"`
	LastUpdatedTime string          `json:"last_updated_time"`
	Version         int             `json:"version"`
	Severity        string          `json:"severity"`
	Scope           json.RawMessage `json:"scope"`
	UpdatedBy       string          `json:"updated_by"`
	TimeCreated     string          `json:"time_created"`
	// RuleErrors counts the guardrail's failed monitor evaluations; set on
	// current guardrails only (not on ruleset snapshots).
	RuleErrors *ruleErrorsJSON `json:"rule_errors,omitempty"`
}

// ruleErrorsJSON is a guardrail's rule_errors member: how many monitor
// evaluations of it failed (a rule failure, a blown budget, a load or
// analysis error), the last message and when.
type ruleErrorsJSON struct {
	Count     int64   `json:"count"`
	LastError *string `json:"last_error"`
	LastAt    *string `json:"last_at"`
}

// compatTime is the YYYY-MM-DD HH:MM:SS form of last_updated_time.
func compatTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") }

// usernames resolves user ids to usernames, once per id per request.
type usernames struct {
	s  *Server
	r  *http.Request
	by map[string]string
}

func (s *Server) usernames(r *http.Request) *usernames {
	return &usernames{s: s, r: r, by: map[string]string{}}
}

func (u *usernames) of(id string) string {
	if id == "" {
		return ""
	}
	if n, ok := u.by[id]; ok {
		return n
	}
	n := ""
	if usr, err := u.s.st.GetUser(u.r.Context(), id); err == nil {
		n = usr.Username
	}
	u.by[id] = n
	return n
}

func (u *usernames) guardrail(g *store.Guardrail) guardrailJSON {
	return guardrailJSON{
		ID: g.ID, Name: g.Name, Content: g.Content, Enabled: g.Enabled, Action: g.Action,
		ExtraMetadata: objectOrEmpty(g.ExtraMetadata), LastUpdatedTime: compatTime(g.TimeUpdated),
		Version: g.Version, Severity: g.Severity, Scope: nullJSON(g.Scope), UpdatedBy: u.of(g.UpdatedBy),
		TimeCreated: formatTime(g.TimeCreated),
	}
}

func (u *usernames) guardrails(gs []*store.Guardrail) []guardrailJSON {
	out := make([]guardrailJSON, 0, len(gs))
	for _, g := range gs {
		out = append(out, u.guardrail(g))
	}
	return out
}

// currentGuardrails renders current guardrails with their rule_errors
// (the store's monitor error counts, read in one query).
func (u *usernames) currentGuardrails(gs []*store.Guardrail) ([]guardrailJSON, error) {
	ids := make([]string, len(gs))
	for i, g := range gs {
		ids[i] = g.ID
	}
	var stats map[string]*store.MonitorErrorStat
	if len(ids) > 0 {
		var err error
		if stats, err = u.s.st.MonitorErrors(u.r.Context(), ids); err != nil {
			return nil, fmt.Errorf("rule errors of %d guardrails: %w", len(ids), err)
		}
	}
	out := u.guardrails(gs)
	for i := range out {
		re := &ruleErrorsJSON{}
		if st := stats[out[i].ID]; st != nil && st.Count > 0 {
			msg, at := st.LastError, formatTime(st.LastAt)
			re = &ruleErrorsJSON{Count: st.Count, LastError: &msg, LastAt: &at}
		}
		out[i].RuleErrors = re
	}
	return out, nil
}

// nullJSON is b, or null when empty.
func nullJSON(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

// versionJSON is a Version row (explorer-api §9.1, §9.2).
type versionJSON struct {
	PolicyID       string          `json:"policy_id"`
	Version        int             `json:"version"`
	RulesetVersion int64           `json:"ruleset_version"`
	Name           string          `json:"name"`
	Content        string          `json:"content"`
	Enabled        bool            `json:"enabled"`
	Action         string          `json:"action"`
	Severity       string          `json:"severity"`
	Scope          json.RawMessage `json:"scope"`
	ExtraMetadata  json.RawMessage `json:"extra_metadata"`
	Change         string          `json:"change"`
	Comment        string          `json:"comment"`
	Author         authorJSON      `json:"author"`
	TimeCreated    string          `json:"time_created"`
}

type authorJSON struct {
	ID       string `json:"id"`
	Username string `json:"username"`
}

func (u *usernames) version(v *store.GuardrailVersion) versionJSON {
	return versionJSON{
		PolicyID: v.GuardrailID, Version: v.Version, RulesetVersion: v.RulesetVersion, Name: v.Name, Content: v.Content,
		Enabled: v.Enabled, Action: v.Action, Severity: v.Severity, Scope: nullJSON(v.Scope),
		ExtraMetadata: objectOrEmpty(v.ExtraMetadata), Change: v.Change, Comment: v.Comment,
		Author: authorJSON{ID: v.AuthorID, Username: u.of(v.AuthorID)}, TimeCreated: formatTime(v.TimeCreated),
	}
}

// guardedDatasetJSON is the Dataset object the guardrail writes return: the
// dataset with its ruleset_version and, in extra_metadata.policies, the
// current guardrails (explorer-api §2.5; owners and admins only, which
// are the only callers of these endpoints).
type guardedDatasetJSON struct {
	datasetJSON
	RulesetVersion int64 `json:"ruleset_version"`
}

func (s *Server) guardedDataset(r *http.Request, datasetID string) (*guardedDatasetJSON, error) {
	d, err := s.st.GetDataset(r.Context(), datasetID)
	if err != nil {
		return nil, err
	}
	rs, err := s.rulesetOf(r.Context(), d)
	if err != nil {
		return nil, err
	}
	out := &guardedDatasetJSON{datasetJSON: s.datasetJSON(r, d, true), RulesetVersion: d.RulesetVersion}
	md := map[string]json.RawMessage{}
	if err := json.Unmarshal(objectOrEmpty(d.Metadata), &md); err != nil {
		return nil, fmt.Errorf("dataset %s metadata: %w", d.ID, err)
	}
	gs, err := s.usernames(r).currentGuardrails(rs.Guardrails)
	if err != nil {
		return nil, err
	}
	pol, err := marshalNoEscape(gs)
	if err != nil {
		return nil, err
	}
	md["policies"] = pol
	if out.ExtraMetadata, err = marshalNoEscape(md); err != nil {
		return nil, err
	}
	return out, nil
}

// marshalNoEscape is json.Marshal without HTML escaping.
func marshalNoEscape(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// policyDataset resolves the {id} dataset of a guardrail endpoint: 404
// "Dataset not found" when the caller cannot see it, and 403 with
// Invariant's text for a visible dataset the caller does not own (verb:
// create, get, update or delete).
func (s *Server) policyDataset(r *http.Request, p *principal, verb string) (*store.Dataset, error) {
	d, err := s.datasetFromPath(r, p)
	if err != nil {
		return nil, err
	}
	if !s.canWrite(p, d.OwnerID) {
		return nil, apiErr(http.StatusForbidden, CodeForbidden, "Not allowed to %s policy for this dataset", verb)
	}
	return d, nil
}

// guardrailInput is a create or update body, decoded member by member so
// that present-but-empty members are told from absent ones.
type guardrailInput struct {
	raw map[string]json.RawMessage
}

func (in guardrailInput) has(k string) bool {
	_, ok := in.raw[k]
	return ok
}

// falsy reports whether member k is absent or a value Python treats as
// false (null, "", false, 0, [], {}), as Invariant's `if not payload.get(k)`.
func (in guardrailInput) falsy(k string) bool {
	v := bytes.TrimSpace(in.raw[k])
	switch string(v) {
	case "", "null", `""`, "false", "0", "[]", "{}":
		return true
	}
	return false
}

func (in guardrailInput) str(k string) (*string, error) {
	if !in.has(k) || isBlank(in.raw[k]) {
		return nil, nil
	}
	var v string
	if err := json.Unmarshal(in.raw[k], &v); err != nil {
		return nil, badRequest("%s must be a string", k)
	}
	return &v, nil
}

func (in guardrailInput) boolean(k string) (*bool, error) {
	if !in.has(k) || isBlank(in.raw[k]) {
		return nil, nil
	}
	var v bool
	if err := json.Unmarshal(in.raw[k], &v); err != nil {
		return nil, badRequest("%s must be a boolean", k)
	}
	return &v, nil
}

// fields validates the optional members shared by create and update.
func (in guardrailInput) fields() (action, severity *string, scope *json.RawMessage, extra json.RawMessage, err error) {
	if action, err = in.str("action"); err != nil {
		return
	}
	if action != nil && *action != "block" && *action != "log" {
		err = badRequest(`action must be "block" or "log", got %q`, *action)
		return
	}
	if severity, err = in.str("severity"); err != nil {
		return
	}
	if severity != nil && !validSeverity(*severity) {
		err = badRequest(`severity must be "info", "warn" or "critical", got %q`, *severity)
		return
	}
	if in.has("scope") {
		var sc json.RawMessage
		if sc, err = checkScope(in.raw["scope"]); err != nil {
			return
		}
		scope = &sc
	}
	if raw := in.raw["extra_metadata"]; !isBlank(raw) {
		var md map[string]json.RawMessage
		if json.Unmarshal(raw, &md) != nil || md == nil {
			err = badRequest("extra_metadata must be a dictionary")
			return
		}
		extra = raw
	}
	return
}

func validSeverity(s string) bool {
	return s == store.SeverityInfo || s == store.SeverityWarn || s == store.SeverityCritical
}

// checkScope validates a scope member (explorer-api §2.6) and returns it
// compacted, or nil for null.
func checkScope(raw json.RawMessage) (json.RawMessage, error) {
	if isBlank(raw) {
		return nil, nil
	}
	var sc struct {
		Kinds      []string `json:"kinds"`
		MCPServers []string `json:"mcp_servers"`
		MCPClients []string `json:"mcp_clients"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sc); err != nil {
		return nil, badRequest(`scope must be null or {"kinds": ["llm"|"mcp", ...], "mcp_servers": [glob, ...], "mcp_clients": [glob, ...]}: %v`, err)
	}
	for i, k := range sc.Kinds {
		if k != "llm" && k != "mcp" {
			return nil, badRequest(`scope.kinds[%d] must be "llm" or "mcp", got %q`, i, k)
		}
	}
	return marshalNoEscape(sc)
}

// loadRule compiles a rule text for a write: 400 policy_invalid with the
// first error in detail and every error with its line and column. A rule
// that compiles returns its load-time warnings as "line:col: message"
// (an entity no recogniser reports, a detector that needs a model, …).
func (s *Server) loadRule(src string) ([]string, error) {
	pol, err := s.rules.Load(src)
	if err != nil {
		return nil, policyInvalid(err)
	}
	warns := make([]string, 0, len(pol.Warnings))
	for _, w := range pol.Warnings {
		pos := w.Position()
		warns = append(warns, fmt.Sprintf("%d:%d: %s", pos.Line, pos.Column, w.Msg))
	}
	return warns, nil
}

// withLoadWarnings returns the extra_metadata object extra with its
// "load_warnings" member set to warns (removed when there are none), so
// that a rule's load warnings are stored with the guardrail and shown
// wherever it is. extra is a JSON object or empty.
func withLoadWarnings(extra json.RawMessage, warns []string) (json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(extra)) > 0 {
		if err := json.Unmarshal(extra, &m); err != nil {
			return nil, fmt.Errorf("guardrail extra_metadata: %w", err)
		}
	}
	_, had := m["load_warnings"]
	if len(warns) == 0 && !had {
		return extra, nil
	}
	if len(warns) == 0 {
		delete(m, "load_warnings")
	} else {
		b, _ := json.Marshal(warns)
		m["load_warnings"] = b
	}
	return marshalNoEscape(m)
}

// policyInvalid is the 400 of a rule that does not compile (explorer-api
// §9.1): detail "Invalid Policy string: <first error>", errors
// [{line, column, message}].
func policyInvalid(err error) *Error {
	var list policy.ErrorList
	errs := []map[string]any{}
	first := err.Error()
	if errors.As(err, &list) && len(list) > 0 {
		for _, e := range list {
			pos := e.Position()
			errs = append(errs, map[string]any{"line": pos.Line, "column": pos.Column, "message": e.Msg})
		}
		first = list[0].Short()
	}
	return &Error{Status: http.StatusBadRequest, Code: "policy_invalid", Detail: "Invalid Policy string: " + first,
		Extra: map[string]any{"errors": errs}}
}

// decodeGuardrailBody reads a create or update body; an empty body or
// object is Invariant's 400 "Request should not be empty".
func (s *Server) decodeGuardrailBody(w http.ResponseWriter, r *http.Request) (guardrailInput, error) {
	in := guardrailInput{}
	if err := s.decodeJSON(w, r, &in.raw, true); err != nil {
		return in, err
	}
	if len(in.raw) == 0 {
		return in, badRequest("Request should not be empty")
	}
	return in, nil
}

// handleGuardrailCreate serves POST /api/v1/dataset/{id}/policy.
func (s *Server) handleGuardrailCreate(w http.ResponseWriter, r *http.Request, p *principal) error {
	d, err := s.policyDataset(r, p, "create")
	if err != nil {
		return err
	}
	in, err := s.decodeGuardrailBody(w, r)
	if err != nil {
		return err
	}
	if in.falsy("name") {
		return badRequest("Name must be provided and non-empty")
	}
	if in.falsy("policy") {
		return badRequest("Policy content must be provided and non-empty")
	}
	name, err := in.str("name")
	if err != nil {
		return err
	}
	content, err := in.str("policy")
	if err != nil {
		return err
	}
	enabled, err := in.boolean("enabled")
	if err != nil {
		return err
	}
	comment, err := in.str("comment")
	if err != nil {
		return err
	}
	action, severity, scope, extra, err := in.fields()
	if err != nil {
		return err
	}
	warns, err := s.loadRule(*content)
	if err != nil {
		return err
	}
	if extra, err = withLoadWarnings(extra, warns); err != nil {
		return err
	}
	g := &store.Guardrail{DatasetID: d.ID, OwnerID: d.OwnerID, Name: *name, Content: *content, Enabled: true,
		Action: "log", Severity: store.SeverityWarn, ExtraMetadata: extra, UpdatedBy: p.User.ID}
	if enabled != nil {
		g.Enabled = *enabled
	}
	if action != nil {
		g.Action = *action
	}
	if severity != nil {
		g.Severity = *severity
	}
	if scope != nil {
		g.Scope = *scope
	}
	if err := s.st.CreateGuardrail(r.Context(), g, store.GuardrailCreated, deref(comment)); err != nil {
		return fmt.Errorf("create guardrail in dataset %s: %w", d.ID, err)
	}
	return s.afterGuardrailWrite(w, r, d.ID)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// afterGuardrailWrite publishes the change and answers with the Dataset.
func (s *Server) afterGuardrailWrite(w http.ResponseWriter, r *http.Request, datasetID string) error {
	d, err := s.st.GetDataset(r.Context(), datasetID)
	if err != nil {
		return err
	}
	s.feed.changed(r.Context(), d.ID, d.RulesetVersion)
	return s.writeGuardedDataset(w, r, d.ID)
}

// writeGuardedDataset answers with the dataset, its ruleset_version and its
// guardrails in extra_metadata.policies (for owners and admins only).
func (s *Server) writeGuardedDataset(w http.ResponseWriter, r *http.Request, datasetID string) error {
	out, err := s.guardedDataset(r, datasetID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// guardrailIn returns the guardrail {policy_id} of dataset d, or notFound
// with detail.
func (s *Server) guardrailIn(r *http.Request, d *store.Dataset, detail string) (*store.Guardrail, error) {
	g, err := s.st.GetGuardrail(r.Context(), r.PathValue("policy_id"))
	if errors.Is(err, store.ErrNotFound) || (err == nil && g.DatasetID != d.ID) {
		return nil, notFound("%s", detail)
	}
	return g, err
}

// handleGuardrailUpdate serves PUT /api/v1/dataset/{id}/policy/{policy_id}.
func (s *Server) handleGuardrailUpdate(w http.ResponseWriter, r *http.Request, p *principal) error {
	d, err := s.policyDataset(r, p, "update")
	if err != nil {
		return err
	}
	in, err := s.decodeGuardrailBody(w, r)
	if err != nil {
		return err
	}
	if in.has("name") && in.falsy("name") {
		return badRequest("Name must be non-empty if provided")
	}
	if in.has("policy") && in.falsy("policy") {
		return badRequest("Policy must be non-empty if provided")
	}
	g, err := s.guardrailIn(r, d, "Policy to update not found")
	if err != nil {
		return err
	}
	up := store.GuardrailUpdate{AuthorID: p.User.ID}
	if up.Name, err = in.str("name"); err != nil {
		return err
	}
	if up.Content, err = in.str("policy"); err != nil {
		return err
	}
	if up.Enabled, err = in.boolean("enabled"); err != nil {
		return err
	}
	comment, err := in.str("comment")
	if err != nil {
		return err
	}
	up.Comment = deref(comment)
	if up.Action, up.Severity, up.Scope, up.ExtraMetadata, err = in.fields(); err != nil {
		return err
	}
	if up.BaseVersion, err = baseVersion(r, in); err != nil {
		return err
	}
	if up.Content != nil {
		warns, err := s.loadRule(*up.Content)
		if err != nil {
			return err
		}
		base := up.ExtraMetadata
		if base == nil {
			base = g.ExtraMetadata
		}
		if extra, err := withLoadWarnings(base, warns); err != nil {
			return err
		} else if !bytes.Equal(extra, base) || up.ExtraMetadata != nil {
			up.ExtraMetadata = extra
		}
	}
	if _, err := s.st.UpdateGuardrail(r.Context(), g.ID, up); err != nil {
		if errors.Is(err, store.ErrConflict) {
			cur, _ := s.st.GetGuardrail(r.Context(), g.ID)
			now := 0
			if cur != nil {
				now = cur.Version
			}
			return apiErr(http.StatusConflict, CodeVersionConflict,
				"policy %s is at version %d, not %d: fetch it again and reapply the change", g.ID, now, up.BaseVersion)
		}
		if errors.Is(err, store.ErrNotFound) {
			return notFound("Policy to update not found")
		}
		return fmt.Errorf("update guardrail %s: %w", g.ID, err)
	}
	return s.afterGuardrailWrite(w, r, d.ID)
}

// baseVersion reads the optimistic-concurrency version from If-Match
// ("<version>", quoted or not) or the body's base_version; 0 = none.
func baseVersion(r *http.Request, in guardrailInput) (int, error) {
	if h := strings.TrimSpace(r.Header.Get("If-Match")); h != "" && h != "*" {
		h = strings.TrimPrefix(h, "W/")
		n, err := strconv.Atoi(strings.Trim(h, `"`))
		if err != nil || n < 1 {
			return 0, badRequest(`If-Match must be a policy version such as "3", got %s`, h)
		}
		return n, nil
	}
	if raw := in.raw["base_version"]; !isBlank(raw) {
		var n int
		if json.Unmarshal(raw, &n) != nil || n < 1 {
			return 0, badRequest("base_version must be a positive integer")
		}
		return n, nil
	}
	return 0, nil
}

// handleGuardrailDelete serves DELETE /api/v1/dataset/{id}/policy/{policy_id}.
// An optional ?comment= is kept on the version row.
func (s *Server) handleGuardrailDelete(w http.ResponseWriter, r *http.Request, p *principal) error {
	d, err := s.policyDataset(r, p, "delete")
	if err != nil {
		return err
	}
	g, err := s.guardrailIn(r, d, "Policy not found")
	if err != nil {
		return err
	}
	if err := s.st.DeleteGuardrail(r.Context(), g.ID, p.User.ID, r.URL.Query().Get("comment")); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return notFound("Policy not found")
		}
		return fmt.Errorf("delete guardrail %s: %w", g.ID, err)
	}
	return s.afterGuardrailWrite(w, r, d.ID)
}

// rulesetETag is the ETag of a ruleset version.
func rulesetETag(v int64) string { return `"rs-` + strconv.FormatInt(v, 10) + `"` }

// etagMatches reports whether an If-None-Match header lists tag.
func etagMatches(header, tag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == tag || t == "*" {
			return true
		}
	}
	return false
}

// handleGuardrailList serves GET /api/v1/dataset/byuser/{username}/{name}/policy:
// every guardrail (disabled ones included), optionally filtered by scope
// (client_name, server_name, kind), with ETag "rs-<ruleset_version>".
func (s *Server) handleGuardrailList(w http.ResponseWriter, r *http.Request, p *principal) error {
	d, err := s.policyDataset(r, p, "get")
	if err != nil {
		return err
	}
	q := r.URL.Query()
	kind := q.Get("kind")
	if kind != "" && kind != "llm" && kind != "mcp" {
		return badRequest(`kind must be "llm" or "mcp", got %q`, kind)
	}
	tag := rulesetETag(d.RulesetVersion)
	w.Header().Set("ETag", tag)
	w.Header().Set("Cache-Control", "no-cache")
	if inm := r.Header.Get("If-None-Match"); inm != "" && etagMatches(inm, tag) {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	rs, err := s.rulesetOf(r.Context(), d)
	if err != nil {
		return err
	}
	var keep []*store.Guardrail
	for _, g := range rs.Guardrails {
		if scopeMatches(g.Scope, kind, q.Get("server_name"), q.Get("client_name")) {
			keep = append(keep, g)
		}
	}
	gs, err := s.usernames(r).currentGuardrails(keep)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"policies": gs})
	return nil
}

// scopeMatches reports whether a guardrail with scope applies to a caller
// of kind (llm, mcp or "" for any) talking to server and client (""
// matches any): a null scope, or an empty list, matches everything.
func scopeMatches(scope json.RawMessage, kind, server, client string) bool {
	if isBlank(scope) {
		return true
	}
	var sc struct {
		Kinds      []string `json:"kinds"`
		MCPServers []string `json:"mcp_servers"`
		MCPClients []string `json:"mcp_clients"`
	}
	if json.Unmarshal(scope, &sc) != nil {
		return true
	}
	if kind != "" && len(sc.Kinds) > 0 && !containsString(sc.Kinds, kind) {
		return false
	}
	return anyGlob(sc.MCPServers, server) && anyGlob(sc.MCPClients, client)
}

func anyGlob(globs []string, name string) bool {
	if name == "" || len(globs) == 0 {
		return true
	}
	for _, g := range globs {
		if globMatch(strings.ToLower(g), strings.ToLower(name)) {
			return true
		}
	}
	return false
}

// globMatch matches name against a pattern of literal runes, * (any run)
// and ? (one rune).
func globMatch(pattern, name string) bool {
	p, n := []rune(pattern), []rune(name)
	pi, ni, star, mark := 0, 0, -1, 0
	for ni < len(n) {
		switch {
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, ni
			pi++
		case pi < len(p) && (p[pi] == '?' || p[pi] == n[ni]):
			pi++
			ni++
		case star >= 0:
			pi = star + 1
			mark++
			ni = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// historyDataset resolves the dataset of a history endpoint: owners and
// admins only (guardrails are never shown to other callers), others 404.
func (s *Server) historyDataset(r *http.Request, p *principal) (*store.Dataset, error) {
	return s.datasetForWrite(r, p)
}

// handleGuardrailVersions serves GET …/policy/{policy_id}/versions.
func (s *Server) handleGuardrailVersions(w http.ResponseWriter, r *http.Request, p *principal) error {
	d, err := s.historyDataset(r, p)
	if err != nil {
		return err
	}
	vs, err := s.st.ListGuardrailVersions(r.Context(), r.PathValue("policy_id"))
	if errors.Is(err, store.ErrNotFound) || (err == nil && len(vs) > 0 && vs[0].DatasetID != d.ID) {
		return notFound("Policy not found")
	}
	if err != nil {
		return err
	}
	u := s.usernames(r)
	out := make([]versionJSON, 0, len(vs))
	for _, v := range vs {
		out = append(out, u.version(v))
	}
	writeJSON(w, http.StatusOK, map[string]any{"versions": out})
	return nil
}

// versionParam parses {n}.
func versionParam(r *http.Request) (int, error) {
	n, err := strconv.Atoi(r.PathValue("n"))
	if err != nil || n < 1 {
		return 0, badRequest("version must be a positive integer, got %q", r.PathValue("n"))
	}
	return n, nil
}

// handleGuardrailVersion serves GET …/policy/{policy_id}/versions/{n}.
func (s *Server) handleGuardrailVersion(w http.ResponseWriter, r *http.Request, p *principal) error {
	d, err := s.historyDataset(r, p)
	if err != nil {
		return err
	}
	n, err := versionParam(r)
	if err != nil {
		return err
	}
	v, err := s.st.GetGuardrailVersion(r.Context(), r.PathValue("policy_id"), n)
	if errors.Is(err, store.ErrNotFound) || (err == nil && v.DatasetID != d.ID) {
		return notFound("Policy version not found")
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.usernames(r).version(v))
	return nil
}

// handleGuardrailRestore serves POST …/policy/{policy_id}/versions/{n}/restore
// with an optional body {comment}: a new version equal to n.
func (s *Server) handleGuardrailRestore(w http.ResponseWriter, r *http.Request, p *principal) error {
	d, err := s.datasetForWrite(r, p)
	if err != nil {
		return err
	}
	n, err := versionParam(r)
	if err != nil {
		return err
	}
	var body struct {
		Comment string `json:"comment"`
	}
	if err := s.decodeJSON(w, r, &body, true); err != nil {
		return err
	}
	v, err := s.st.GetGuardrailVersion(r.Context(), r.PathValue("policy_id"), n)
	if errors.Is(err, store.ErrNotFound) || (err == nil && v.DatasetID != d.ID) {
		return notFound("Policy version not found")
	}
	if err != nil {
		return err
	}
	if _, err := s.loadRule(v.Content); err != nil { // its load_warnings were stored with the version
		return err
	}
	g, err := s.st.RestoreGuardrail(r.Context(), v.GuardrailID, n, p.User.ID, body.Comment)
	if err != nil {
		return fmt.Errorf("restore guardrail %s version %d: %w", v.GuardrailID, n, err)
	}
	d, err = s.st.GetDataset(r.Context(), d.ID)
	if err != nil {
		return err
	}
	s.feed.changed(r.Context(), d.ID, d.RulesetVersion)
	gs, err := s.usernames(r).currentGuardrails([]*store.Guardrail{g})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, gs[0])
	return nil
}

// pageParams parses the [V] limit (default 50, at most 1000) and cursor
// (an opaque offset) of a list endpoint.
func pageParams(r *http.Request) (limit, offset int, err error) {
	limit = 50
	q := r.URL.Query()
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > 1000 {
			return 0, 0, badRequest("limit must be an integer from 1 to 1000, got %q", v)
		}
	}
	if c := q.Get("cursor"); c != "" {
		if offset, err = strconv.Atoi(c); err != nil || offset < 0 {
			return 0, 0, badRequest("cursor %q is not one this server returned", c)
		}
	}
	return limit, offset, nil
}

// nextCursor is the cursor after a page of limit rows read with one row
// more than limit (got rows): nil on the last page.
func nextCursor(got, limit, offset int) *string {
	if got <= limit {
		return nil
	}
	c := strconv.Itoa(offset + limit)
	return &c
}

// handlePolicyHistory serves GET /api/v1/dataset/{id}/policy-history.
func (s *Server) handlePolicyHistory(w http.ResponseWriter, r *http.Request, p *principal) error {
	d, err := s.historyDataset(r, p)
	if err != nil {
		return err
	}
	limit, offset, err := pageParams(r)
	if err != nil {
		return err
	}
	vs, err := s.st.ListPolicyHistory(r.Context(), d.ID, limit+1, offset)
	if err != nil {
		return err
	}
	next := nextCursor(len(vs), limit, offset)
	vs = vs[:min(len(vs), limit)]
	u := s.usernames(r)
	out := make([]versionJSON, 0, len(vs))
	for _, v := range vs {
		out = append(out, u.version(v))
	}
	writeJSON(w, http.StatusOK, map[string]any{"versions": out, "next_cursor": next})
	return nil
}

// handleRulesetAt serves GET /api/v1/dataset/{id}/ruleset/{ruleset_version}.
func (s *Server) handleRulesetAt(w http.ResponseWriter, r *http.Request, p *principal) error {
	d, err := s.historyDataset(r, p)
	if err != nil {
		return err
	}
	rv, err := strconv.ParseInt(r.PathValue("rv"), 10, 64)
	if err != nil || rv < 0 {
		return badRequest("ruleset version must be a non-negative integer, got %q", r.PathValue("rv"))
	}
	gs, err := s.st.RulesetAt(r.Context(), d.ID, rv)
	if errors.Is(err, store.ErrNotFound) {
		return notFound("dataset %s has no ruleset version %d (current: %d)", d.ID, rv, d.RulesetVersion)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"ruleset_version": rv, "policies": s.usernames(r).guardrails(gs)})
	return nil
}

// feedPage is how many feed entries one change-feed response reads.
const feedPage = 1000

// maxFeedWait is the longest hold of a change-feed request.
const maxFeedWait = 60 * time.Second

type changeJSON struct {
	Seq            int64  `json:"seq"`
	DatasetID      string `json:"dataset_id"`
	Dataset        string `json:"dataset"`
	Owner          string `json:"owner"`
	RulesetVersion int64  `json:"ruleset_version"`
	Time           string `json:"time"`
}

// handleGuardrailChanges serves GET /api/v1/guardrails/changes?after=&wait=
// (explorer-api §9.3). When nothing the caller can read is newer than
// after, the request is held until a change arrives or wait seconds pass.
// after=0 answers at once with the current seq, except on a feed that has
// never changed (seq 0), where it is held like after=seq would be.
func (s *Server) handleGuardrailChanges(w http.ResponseWriter, r *http.Request, p *principal) error {
	q := r.URL.Query()
	var after int64
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return badRequest("after must be a non-negative integer (a seq from an earlier response), got %q", v)
		}
		after = n
	}
	var wait time.Duration
	if v := q.Get("wait"); v != "" {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || n < 0 || n > maxFeedWait.Seconds() {
			return badRequest("wait must be a number of seconds from 0 to 60, got %q", v)
		}
		wait = time.Duration(n * float64(time.Second))
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	ctx := r.Context()
	vis := &feedVisibility{s: s, p: p, ctx: ctx, datasets: map[string]*store.Dataset{}, names: s.usernames(r)}
	for first := true; ; first = false {
		wake := s.feed.waiter()
		feed, err := s.st.ListGuardrailChanges(ctx, after, feedPage)
		if err != nil {
			return fmt.Errorf("read guardrail change feed after %d: %w", after, err)
		}
		// after=0 is a client starting up: no history, only the current
		// seq. On a feed that never had a change that seq is 0 as well, so
		// the request is held like any other until the first change.
		if after == 0 && first && feed.Latest > 0 {
			writeJSON(w, http.StatusOK, map[string]any{"seq": feed.Latest, "changes": []changeJSON{}})
			return nil
		}
		if after > feed.Latest || (feed.Oldest > 0 && after < feed.Oldest-1) {
			writeJSON(w, http.StatusOK, map[string]any{"reset": true, "seq": feed.Latest})
			return nil
		}
		changes, err := vis.filter(feed.Changes)
		if err != nil {
			return err
		}
		seq := feed.Latest
		if len(feed.Changes) == feedPage {
			seq = feed.Changes[len(feed.Changes)-1].Seq
		}
		if len(changes) > 0 || len(feed.Changes) == feedPage {
			writeJSON(w, http.StatusOK, map[string]any{"seq": seq, "changes": changes})
			return nil
		}
		if len(feed.Changes) > 0 {
			after = seq // only changes the caller cannot see: skip them
		}
		select {
		case <-wake:
		case <-deadline.C:
			writeJSON(w, http.StatusOK, map[string]any{"seq": seq, "changes": []changeJSON{}})
			return nil
		case <-ctx.Done():
			return nil
		case <-s.feed.done:
			writeJSON(w, http.StatusOK, map[string]any{"seq": seq, "changes": []changeJSON{}})
			return nil
		}
	}
}

// feedVisibility filters feed entries to datasets the caller can read,
// reading each dataset once.
type feedVisibility struct {
	s        *Server
	p        *principal
	ctx      context.Context
	datasets map[string]*store.Dataset // nil value: gone
	names    *usernames
}

func (v *feedVisibility) filter(cs []store.GuardrailChange) ([]changeJSON, error) {
	out := []changeJSON{}
	for _, c := range cs {
		d, ok := v.datasets[c.DatasetID]
		if !ok {
			var err error
			d, err = v.s.st.GetDataset(v.ctx, c.DatasetID)
			if errors.Is(err, store.ErrNotFound) {
				d = nil
			} else if err != nil {
				return nil, fmt.Errorf("guardrail change feed: dataset %s: %w", c.DatasetID, err)
			}
			v.datasets[c.DatasetID] = d
		}
		if d == nil || !v.s.canReadDataset(v.p, d) {
			continue
		}
		out = append(out, changeJSON{Seq: c.Seq, DatasetID: c.DatasetID, Dataset: d.Name, Owner: v.names.of(d.OwnerID),
			RulesetVersion: c.RulesetVersion, Time: formatTime(c.Time)})
	}
	return out, nil
}
