package ask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/vigilhq/vigil/monitor"
	"github.com/vigilhq/vigil/search"
	"github.com/vigilhq/vigil/server"
	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/trace"
)

// The four read-only tools the model works through. Each runs with the
// asking caller's permissions (the server's rules: SearchScope, TraceFor,
// DatasetFor, FindingScope) and inside the question's scope; none
// writes. A tool's failure (a bad query, a trace the caller may not read)
// is returned to the model as {"error": …}, not as an error of the ask.

// Tool limits.
const (
	toolSearchLimit   = 10    // traces a search returns (at most 20 asked)
	toolMatches       = 5     // matches shown per trace
	toolMaxEvents     = 20    // events get_events returns
	toolMaxString     = 2000  // code points of a string in get_events
	toolCheckTraces   = 200   // traces check runs a rule on
	toolMaxViolations = 50    // violations check returns
	toolMaxFindings   = 50    // findings list_findings returns
	toolMaxResult     = 32000 // bytes of a tool result
	toolCheckTimeout  = 10 * time.Second
)

// ToolNames are the only tools a model may call.
var ToolNames = []string{"search", "get_events", "check", "list_findings"}

// toolDefs are the tool definitions sent to the model.
var toolDefs = []chatTool{
	{Type: "function", Function: chatFunction{Name: "search",
		Description: "Search the stored agent traces (runs). The query grammar: words and \"quoted phrases\" (case-insensitive substrings of message text, tool names, tool arguments, tool outputs, errors), tool:NAME, meta:KEY=VALUE, after:-7d, before:2026-01-02, is:flagged, severity:>=warn, annotation:TEXT, OR, -NOT, (groups). Returns traces with the addresses and text of the matches.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"},"dataset":{"type":"string","description":"dataset name (optional)"},"limit":{"type":"integer","minimum":1,"maximum":20}},"required":["query"]}`)}},
	{Type: "function", Function: chatFunction{Name: "get_events",
		Description: "Read the events of one trace from index `from` (default 0) up to `to` (exclusive, at most 20 events). Each event has its address (messages.N); quote text exactly as it appears there.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"trace_id":{"type":"string"},"from":{"type":"integer","minimum":0},"to":{"type":"integer","minimum":0}},"required":["trace_id"]}`)}},
	{Type: "function", Function: chatFunction{Name: "check",
		Description: "Run a rule in Vigil's policy language (Invariant syntax, e.g. raise \"msg\" if: (call: ToolCall) call is tool:send_email) on one trace or on a dataset (read-only; nothing is stored). Returns the violations with the addresses they cite.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"policy":{"type":"string"},"trace_id":{"type":"string"},"dataset":{"type":"string"}},"required":["policy"]}`)}},
	{Type: "function", Function: chatFunction{Name: "list_findings",
		Description: "List stored findings (rule violations found by monitors, with review status open/accepted/dismissed and who reviewed them) with the addresses they cite.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"trace_id":{"type":"string"},"dataset":{"type":"string"},"status":{"type":"string","enum":["open","accepted","dismissed"]},"severity":{"type":"string","enum":["info","warn","critical"]},"monitor":{"type":"string"},"limit":{"type":"integer","minimum":1,"maximum":50}}}`)}},
}

// toolbox runs tools for one ask.
type toolbox struct {
	s      *Service
	c      *server.Caller
	sc     *scope
	dnames map[string]string // dataset id -> name
}

// toolError is a tool failure reported to the model.
type toolError struct{ msg string }

func (e *toolError) Error() string { return e.msg }

func toolErrorf(format string, args ...any) error { return &toolError{fmt.Sprintf(format, args...)} }

// run executes one tool call: it returns the result text for the model,
// the number of results, and the error shown to the model ("" = none).
// An error other than a tool failure (the store failing) is returned.
func (tb *toolbox) run(ctx context.Context, name, args string) (string, int, string, error) {
	var out any
	var n int
	var err error
	if !slices.Contains(ToolNames, name) {
		err = toolErrorf("there is no tool %q; the tools are %s", name, strings.Join(ToolNames, ", "))
	} else {
		raw := []byte(strings.TrimSpace(args))
		if len(raw) == 0 {
			raw = []byte("{}")
		}
		switch name {
		case "search":
			out, n, err = tb.search(ctx, raw)
		case "get_events":
			out, n, err = tb.getEvents(ctx, raw)
		case "check":
			out, n, err = tb.check(ctx, raw)
		case "list_findings":
			out, n, err = tb.listFindings(ctx, raw)
		}
	}
	var te *toolError
	if errors.As(err, &te) {
		b, _ := json.Marshal(map[string]string{"error": te.msg})
		return string(b), 0, te.msg, nil
	}
	if err != nil {
		return "", 0, "", err
	}
	b, err := json.Marshal(out)
	if err != nil {
		return "", 0, "", fmt.Errorf("ask: encode %s result: %w", name, err)
	}
	if len(b) > toolMaxResult {
		b, _ = json.Marshal(map[string]any{"error": fmt.Sprintf("the result is %d bytes, more than %d; narrow the call", len(b), toolMaxResult), "results": n})
	}
	return string(b), n, "", nil
}

// decodeArgs decodes tool arguments strictly.
func decodeArgs(raw []byte, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return toolErrorf("invalid arguments: %v", err)
	}
	return nil
}

// datasetID resolves a tool's dataset argument ("" = the question's).
func (tb *toolbox) datasetID(ctx context.Context, ref string) (string, error) {
	if ref == "" {
		return tb.sc.datasetID, nil
	}
	d, err := tb.s.srv.DatasetFor(ctx, tb.c, ref)
	if errors.Is(err, store.ErrNotFound) {
		return "", toolErrorf("dataset %q not found", ref)
	}
	if err != nil {
		return "", err
	}
	if tb.sc.datasetID != "" && d.ID != tb.sc.datasetID {
		return "", toolErrorf("dataset %q is outside the question's dataset", ref)
	}
	return d.ID, nil
}

// datasetName is the name of dataset id ("" for none), cached.
func (tb *toolbox) datasetName(ctx context.Context, id string) string {
	if id == "" {
		return ""
	}
	if n, ok := tb.dnames[id]; ok {
		return n
	}
	d, err := tb.s.srv.Store().GetDataset(ctx, id)
	n := ""
	if err == nil {
		n = d.Name
	}
	tb.dnames[id] = n
	return n
}

// traceFor loads a trace the caller may read inside the question's
// scope (with its messages when withMessages).
func (tb *toolbox) traceFor(ctx context.Context, id string, withMessages bool) (*store.Trace, error) {
	if id == "" {
		return nil, toolErrorf("trace_id is required")
	}
	t, err := tb.s.srv.TraceFor(ctx, tb.c, id, withMessages)
	if errors.Is(err, store.ErrNotFound) {
		return nil, toolErrorf("trace %s not found", id)
	}
	if err != nil {
		return nil, err
	}
	if tb.sc.traceID != "" && t.ID != tb.sc.traceID || tb.sc.datasetID != "" && t.DatasetID != tb.sc.datasetID ||
		tb.datasetName(ctx, t.DatasetID) == AskDataset {
		return nil, toolErrorf("trace %s is outside the question's scope", id)
	}
	return t, nil
}

type searchMatch struct {
	Address string `json:"address"`
	Text    string `json:"text"`
}

type searchTrace struct {
	TraceID     string        `json:"trace_id"`
	Dataset     string        `json:"dataset,omitempty"`
	Index       int64         `json:"index"`
	Name        string        `json:"name,omitempty"`
	TimeCreated string        `json:"time_created"`
	Events      int           `json:"events"`
	Matches     []searchMatch `json:"matches,omitempty"`
}

func (tb *toolbox) search(ctx context.Context, raw []byte) (any, int, error) {
	var in struct {
		Query   string `json:"query"`
		Dataset string `json:"dataset"`
		Limit   int    `json:"limit"`
	}
	if err := decodeArgs(raw, &in); err != nil {
		return nil, 0, err
	}
	q, err := search.Parse(in.Query)
	if err != nil {
		return nil, 0, toolErrorf("invalid query: %v", err)
	}
	dsID, err := tb.datasetID(ctx, in.Dataset)
	if err != nil {
		return nil, 0, err
	}
	limit := toolSearchLimit
	if in.Limit > 0 {
		limit = min(in.Limit, 20)
	}
	query := in.Query
	if tb.sc.traceID != "" {
		query = "id:" + tb.sc.traceID + " (" + query + ")"
		if strings.TrimSpace(in.Query) == "" {
			query = "id:" + tb.sc.traceID
		}
	}
	req := store.SearchRequest{Query: query, Order: store.OrderTimeCreatedDesc, Limit: limit + 5, WithMessages: true,
		NoTotal: true, Now: tb.sc.now}
	tb.s.srv.SearchScope(tb.c, &req)
	if dsID != "" {
		req.DatasetIDs = []string{dsID}
	}
	res, err := tb.s.srv.Store().Search(ctx, req)
	var se *search.Error
	if errors.As(err, &se) {
		return nil, 0, toolErrorf("invalid query: %v", se)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("ask: search tool: %w", err)
	}
	out := []searchTrace{}
	for _, t := range res.Traces {
		name := tb.datasetName(ctx, t.DatasetID)
		if name == AskDataset || len(out) >= limit {
			continue
		}
		st := searchTrace{TraceID: t.ID, Dataset: name, Index: t.Index, Name: t.Name,
			TimeCreated: t.TimeCreated.UTC().Format(time.RFC3339), Events: t.MessageCount}
		msgs := make([][]byte, len(t.Messages))
		for i, m := range t.Messages {
			msgs[i] = m.Data
		}
		tr, _ := decodeTrace(t) // undecodable: matches without text
		for _, h := range search.Highlights(msgs, q.Terms()) {
			if len(st.Matches) >= toolMatches {
				break
			}
			m := searchMatch{Address: h.Address}
			if tr != nil {
				m.Text, _ = TextAt(tr, h.Address)
			}
			st.Matches = append(st.Matches, m)
		}
		out = append(out, st)
	}
	return map[string]any{"traces": out}, len(out), nil
}

func (tb *toolbox) getEvents(ctx context.Context, raw []byte) (any, int, error) {
	var in struct {
		TraceID string `json:"trace_id"`
		From    *int   `json:"from"`
		To      *int   `json:"to"`
	}
	if err := decodeArgs(raw, &in); err != nil {
		return nil, 0, err
	}
	t, err := tb.traceFor(ctx, in.TraceID, true)
	if err != nil {
		return nil, 0, err
	}
	from, to := 0, len(t.Messages)
	if in.From != nil {
		from = *in.From
	}
	if in.To != nil {
		to = min(*in.To, len(t.Messages))
	}
	if from < 0 || from > len(t.Messages) || to < from {
		return nil, 0, toolErrorf("from %d, to %d: the trace has %d events", from, to, len(t.Messages))
	}
	to = min(to, from+toolMaxEvents)
	type event struct {
		Address string          `json:"address"`
		Event   json.RawMessage `json:"event"`
	}
	out := []event{}
	for i := from; i < to; i++ {
		v, err := trace.ParseValue(t.Messages[i].Data)
		if err != nil {
			continue // stored events are JSON objects
		}
		out = append(out, event{Address: "messages." + strconv.Itoa(i), Event: trace.Marshal(truncateStrings(v))})
	}
	res := map[string]any{"trace_id": t.ID, "events": out, "total_events": len(t.Messages)}
	return res, len(out), nil
}

// truncateStrings shortens long strings of v (marked, so that a model
// does not quote the cut text as whole).
func truncateStrings(v trace.Value) trace.Value {
	switch x := v.(type) {
	case string:
		if utf8.RuneCountInString(x) > toolMaxString {
			r := []rune(x)
			return string(r[:toolMaxString]) + fmt.Sprintf("…[truncated: %d more characters; quote with an address range]", len(r)-toolMaxString)
		}
	case []trace.Value:
		out := make([]trace.Value, len(x))
		for i, e := range x {
			out[i] = truncateStrings(e)
		}
		return out
	case *trace.Object:
		o := &trace.Object{}
		for _, k := range x.Keys() {
			e, _ := x.Get(k)
			o.Set(k, truncateStrings(e))
		}
		return o
	}
	return v
}

type violationOut struct {
	TraceID   string   `json:"trace_id"`
	Message   string   `json:"message"`
	Addresses []string `json:"addresses"`
}

func (tb *toolbox) check(ctx context.Context, raw []byte) (any, int, error) {
	var in struct {
		Policy  string `json:"policy"`
		TraceID string `json:"trace_id"`
		Dataset string `json:"dataset"`
	}
	if err := decodeArgs(raw, &in); err != nil {
		return nil, 0, err
	}
	if strings.TrimSpace(in.Policy) == "" {
		return nil, 0, toolErrorf("policy is required")
	}
	p, err := tb.s.srv.Rules().Load(in.Policy)
	if err != nil {
		return nil, 0, toolErrorf("the policy does not load: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, toolCheckTimeout)
	defer cancel()
	var viols []violationOut
	checked := 0
	analyze := func(id string, events []byte) error {
		tr, err := trace.Decode(events)
		if err != nil {
			return nil // an undecodable trace has no violations to show
		}
		res, err := p.Analyze(ctx, tr, nil)
		if err != nil {
			return toolErrorf("trace %s: %v", id, err)
		}
		checked++
		ev := monitor.NewEvaluated(tr, nil)
		for _, v := range res.Errors {
			if len(viols) >= toolMaxViolations {
				break
			}
			vo := violationOut{TraceID: id, Message: v.Message, Addresses: []string{}}
			for _, c := range ev.Citations(v.Ranges) {
				vo.Addresses = append(vo.Addresses, c.Address)
			}
			viols = append(viols, vo)
		}
		return nil
	}
	traceID := in.TraceID
	if traceID == "" && in.Dataset == "" {
		traceID = tb.sc.traceID
	}
	switch {
	case traceID != "":
		t, err := tb.traceFor(ctx, traceID, true)
		if err != nil {
			return nil, 0, err
		}
		if err := analyze(t.ID, joinEvents(t)); err != nil {
			return nil, 0, err
		}
	default:
		dsID, err := tb.datasetID(ctx, in.Dataset)
		if err != nil {
			return nil, 0, err
		}
		if dsID == "" {
			return nil, 0, toolErrorf("give trace_id or dataset")
		}
		for te, err := range tb.s.srv.Store().IterTraceEvents(ctx, dsID, store.IterOptions{}) {
			if err != nil {
				if ctx.Err() != nil {
					return nil, 0, toolErrorf("check ran out of time after %d traces", checked)
				}
				return nil, 0, fmt.Errorf("ask: check tool: %w", err)
			}
			if err := analyze(te.Trace.ID, te.Events); err != nil {
				return nil, 0, err
			}
			if checked >= toolCheckTraces {
				break
			}
		}
	}
	if viols == nil {
		viols = []violationOut{}
	}
	return map[string]any{"traces_checked": checked, "violations": viols}, len(viols), nil
}

// joinEvents is the events of t (messages loaded) as one JSON array.
func joinEvents(t *store.Trace) []byte {
	b := []byte{'['}
	for i, m := range t.Messages {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, m.Data...)
	}
	return append(b, ']')
}

type findingOut struct {
	ID        string   `json:"id"`
	TraceID   string   `json:"trace_id"`
	Monitor   string   `json:"monitor"`
	Title     string   `json:"title"`
	Severity  string   `json:"severity"`
	Status    string   `json:"status"`
	Addresses []string `json:"addresses"`
	Reviews   []string `json:"reviews,omitempty"`
}

func (tb *toolbox) listFindings(ctx context.Context, raw []byte) (any, int, error) {
	var in struct {
		TraceID  string `json:"trace_id"`
		Dataset  string `json:"dataset"`
		Status   string `json:"status"`
		Severity string `json:"severity"`
		Monitor  string `json:"monitor"`
		Limit    int    `json:"limit"`
	}
	if err := decodeArgs(raw, &in); err != nil {
		return nil, 0, err
	}
	f := store.FindingFilter{Limit: maxFindings}
	if in.Status != "" {
		f.Status = []string{in.Status}
	}
	if in.Severity != "" {
		f.Severity = []string{in.Severity}
	}
	traceID := in.TraceID
	if traceID == "" {
		traceID = tb.sc.traceID
	}
	if traceID != "" {
		t, err := tb.traceFor(ctx, traceID, false)
		if err != nil {
			return nil, 0, err
		}
		f.RunID = t.ID
	} else if !tb.s.srv.FindingScope(tb.c, &f) {
		return nil, 0, toolErrorf("without an API key, findings are listed one trace at a time (trace_id)")
	}
	dsID, err := tb.datasetID(ctx, in.Dataset)
	if err != nil {
		return nil, 0, err
	}
	fs, err := tb.s.srv.Store().ListFindings(ctx, f)
	if err != nil {
		return nil, 0, fmt.Errorf("ask: list_findings tool: %w", err)
	}
	limit := toolMaxFindings
	if in.Limit > 0 {
		limit = min(in.Limit, toolMaxFindings)
	}
	out := []findingOut{}
	for _, x := range fs {
		if len(out) >= limit {
			break
		}
		if in.Monitor != "" && !strings.Contains(strings.ToLower(x.Monitor), strings.ToLower(in.Monitor)) {
			continue
		}
		t, err := tb.traceFor(ctx, x.RunID, false)
		if err != nil {
			var te *toolError
			if errors.As(err, &te) {
				continue // outside the scope
			}
			return nil, 0, err
		}
		if dsID != "" && t.DatasetID != dsID {
			continue
		}
		fo := findingOut{ID: x.ID, TraceID: x.RunID, Monitor: x.Monitor, Title: x.Title, Severity: x.Severity, Status: x.Status, Addresses: []string{}}
		var cites []struct {
			Address string `json:"address"`
		}
		_ = json.Unmarshal(x.Citations, &cites) // stored by the server: a JSON array
		for _, c := range cites {
			fo.Addresses = append(fo.Addresses, c.Address)
		}
		for _, h := range x.History {
			r := fmt.Sprintf("%s → %s by %s", h.From, h.To, h.By)
			if h.Note != "" {
				r += ": " + h.Note
			}
			fo.Reviews = append(fo.Reviews, r)
		}
		out = append(out, fo)
	}
	return map[string]any{"findings": out}, len(out), nil
}
