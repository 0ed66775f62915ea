package ask

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/vigilhq/vigil/search"
	"github.com/vigilhq/vigil/server"
	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/trace"
)

// The model-free answer: the question's plan run as searches, plus the
// findings and annotations that match, each piece of evidence quoted
// from the store and ranked. The same store and question give the same
// evidence in the same order.

// AskDataset is the dataset (in the caller's namespace) that exchanges
// with the model are recorded in; its traces are never evidence.
const AskDataset = "vigil-ask"

// Search and ranking limits.
const (
	searchLimit       = 25  // traces per search
	maxFindings       = 100 // findings looked at (critical first)
	maxPerTermInTrace = 5   // highlights of one term in one trace
	maxToolDatasets   = 50  // datasets whose tool names are read
	strictEnough      = 10  // traces matching every term that make the any-term search unneeded
)

// item is one piece of evidence being ranked.
type item struct {
	ev    server.AskEvidence
	score float64
}

// hitTrace is one trace the evidence comes from.
type hitTrace struct {
	t       *store.Trace
	decoded *trace.Trace // nil when the events do not decode
	score   float64      // how well the trace matches the plan, 0..1+
}

// collector gathers the evidence of one question.
type collector struct {
	s      *Service
	c      *server.Caller
	sc     *scope
	plan   *Plan
	traces map[string]*hitTrace
	order  []string // trace ids in the order found
	items  map[[2]string]*item
	dsets  map[string]*store.Dataset
	users  map[string]string
}

// evidence answers a question with evidence only.
func (s *Service) evidence(ctx context.Context, c *server.Caller, sc *scope, question string) (*server.AskAnswer, error) {
	voc, err := s.vocabulary(ctx, c, sc)
	if err != nil {
		return nil, err
	}
	plan, err := MakePlan(question, voc, sc.now)
	if err != nil {
		return nil, badRequest("%v", err)
	}
	col := &collector{s: s, c: c, sc: sc, plan: plan, traces: map[string]*hitTrace{}, items: map[[2]string]*item{},
		dsets: map[string]*store.Dataset{}, users: map[string]string{}}
	ans := &server.AskAnswer{Question: question, Mode: "evidence", Evidence: []server.AskEvidence{},
		Citations: []server.AskCitation{}, ToolCalls: []server.AskToolCall{}}
	ans.Query = col.query(plan.Query())
	if err := col.search(ctx); err != nil {
		return nil, err
	}
	if err := col.findings(ctx); err != nil {
		return nil, err
	}
	if err := col.annotations(ctx); err != nil {
		return nil, err
	}
	ans.Evidence = col.ranked()
	if len(ans.Evidence) == 0 {
		ans.Note = "No stored event matches the question."
	}
	return ans, nil
}

// vocabulary lists the tool names and argument keys of the datasets in
// scope (at most maxToolDatasets datasets).
func (s *Service) vocabulary(ctx context.Context, c *server.Caller, sc *scope) (Vocabulary, error) {
	var voc Vocabulary
	st := s.srv.Store()
	var ids []string
	if sc.datasetID != "" {
		ids = []string{sc.datasetID}
	} else {
		f := store.DatasetFilter{Limit: maxToolDatasets}
		var access store.SearchRequest
		s.srv.SearchScope(c, &access)
		switch {
		case c == nil && !access.Public:
			return voc, nil // an anonymous caller who may read nothing
		case c == nil:
			f.PublicOnly = true
		case !c.IsAdmin():
			f.VisibleTo = c.User.ID
		}
		ds, err := st.ListDatasets(ctx, f)
		if err != nil {
			return voc, fmt.Errorf("ask: datasets: %w", err)
		}
		for _, d := range ds {
			ids = append(ids, d.ID)
		}
	}
	for _, id := range ids {
		ts, err := st.ListTools(ctx, id)
		if err != nil {
			return voc, fmt.Errorf("ask: tools of dataset %s: %w", id, err)
		}
		for _, t := range ts {
			voc.Tools = appendNew(voc.Tools, t.Name)
			for _, k := range t.ArgumentKeys {
				voc.ArgumentKeys = appendNew(voc.ArgumentKeys, strings.ToLower(k))
			}
		}
	}
	slices.Sort(voc.Tools)
	slices.Sort(voc.ArgumentKeys)
	return voc, nil
}

// query adds the scope's filters to a plan query.
func (col *collector) query(q string) string {
	var parts []string
	if col.sc.traceID != "" {
		parts = append(parts, "id:"+col.sc.traceID)
	}
	if col.sc.since != "" {
		parts = append(parts, "after:"+quoteValue(col.sc.since))
	}
	if q != "" {
		parts = append(parts, q)
	}
	return strings.Join(parts, " ")
}

// search runs the plan's searches: every term required, then any term.
func (col *collector) search(ctx context.Context) error {
	p := col.plan
	var queries []string
	if q := p.strictQuery(); q != "" {
		queries = append(queries, col.query(q))
	}
	for _, q := range []string{p.annotationQuery(), p.errorQuery()} {
		if q != "" {
			queries = append(queries, col.query(q))
		}
	}
	main := col.query(p.Query())
	if main == "" && col.sc.datasetID == "" {
		if len(queries) == 0 {
			return nil // nothing to search for: findings only
		}
	} else {
		queries = append(queries, main)
	}
	strictHits := 0
	for k, q := range queries {
		if k > 0 && k == len(queries)-1 && p.strictQuery() != "" && strictHits >= strictEnough {
			break // every term matched in enough traces: the any-term search adds only weaker ones
		}
		req := store.SearchRequest{Query: q, Order: store.OrderTimeCreatedDesc, Limit: searchLimit,
			WithMessages: true, NoTotal: true, Now: col.sc.now}
		col.s.srv.SearchScope(col.c, &req)
		if col.sc.datasetID != "" {
			req.DatasetIDs = []string{col.sc.datasetID}
		}
		res, err := col.s.srv.Store().Search(ctx, req)
		var se *search.Error
		if errors.As(err, &se) {
			return badRequest("the search %q made of the question is invalid: %v", q, se)
		}
		if err != nil {
			return fmt.Errorf("ask: search %q: %w", q, err)
		}
		for _, t := range res.Traces {
			if _, ok := col.traces[t.ID]; ok {
				continue
			}
			if col.isAskTrace(ctx, t) {
				continue
			}
			ht := col.addTrace(t)
			if k == 0 && len(queries) > 1 && p.strictQuery() != "" {
				ht.score += 0.5 // every term matched
				strictHits++
			}
			col.traceItems(ht)
		}
	}
	return nil
}

// isAskTrace reports whether t is a recorded exchange (never evidence).
func (col *collector) isAskTrace(ctx context.Context, t *store.Trace) bool {
	d := col.dataset(ctx, t.DatasetID)
	return d != nil && d.Name == AskDataset
}

// dataset returns dataset id (cached); nil for none.
func (col *collector) dataset(ctx context.Context, id string) *store.Dataset {
	if id == "" {
		return nil
	}
	if d, ok := col.dsets[id]; ok {
		return d
	}
	d, err := col.s.srv.Store().GetDataset(ctx, id)
	if err != nil {
		d = nil // deleted meanwhile: no name to show
	}
	col.dsets[id] = d
	if d != nil {
		if _, ok := col.users[d.OwnerID]; !ok {
			if u, err := col.s.srv.Store().GetUser(ctx, d.OwnerID); err == nil {
				col.users[d.OwnerID] = u.Username
			}
		}
	}
	return d
}

// addTrace registers a trace (its messages loaded).
func (col *collector) addTrace(t *store.Trace) *hitTrace {
	ht := &hitTrace{t: t}
	ht.decoded, _ = decodeTrace(t) // undecodable: its text is still searched, nothing resolves
	col.traces[t.ID] = ht
	col.order = append(col.order, t.ID)
	return ht
}

// add records evidence at addr of ht, merging with what is there.
func (col *collector) add(ht *hitTrace, addr, why string, score float64) {
	if ht.decoded == nil {
		return
	}
	quote := ""
	if addr != "<root>" {
		var err error
		if quote, err = TextAt(ht.decoded, addr); err != nil {
			return // an address that no longer resolves proves nothing
		}
	}
	k := [2]string{ht.t.ID, addr}
	if it, ok := col.items[k]; ok {
		if !strings.Contains(it.ev.Why, why) {
			it.ev.Why += "; " + why
		}
		it.score = max(it.score, score) + 0.5
		return
	}
	col.items[k] = &item{ev: server.AskEvidence{TraceID: ht.t.ID, Address: addr, Quote: quote, Why: why,
		TraceIndex: ht.t.Index}, score: score}
}

// termWeight favours long, specific terms.
func termWeight(t string) float64 {
	return 1 + math.Min(float64(utf8.RuneCountInString(t)), 12)/6
}

// traceItems adds the evidence inside trace ht: the plan's tool calls,
// its terms' occurrences and, when it asks about errors, error fields.
func (col *collector) traceItems(ht *hitTrace) {
	p := col.plan
	msgs := make([][]byte, len(ht.t.Messages))
	roles := make([]string, len(ht.t.Messages))
	for i, m := range ht.t.Messages {
		msgs[i] = m.Data
		roles[i] = messageRole(m.Data)
	}
	roleOK := func(addr string) bool {
		if len(p.Roles) == 0 {
			return true
		}
		i := messageIndex(addr)
		return i >= 0 && i < len(roles) && slices.Contains(p.Roles, roles[i])
	}
	// Which terms the trace holds, for its score.
	terms := append(slices.Clone(p.Phrases), p.Terms...)
	hs := search.Highlights(msgs, terms)
	matched := map[string]bool{}
	for _, h := range hs {
		matched[h.Term] = true
	}
	var total, got float64
	for _, t := range terms {
		w := termWeight(t)
		if slices.Contains(p.Phrases, t) {
			w *= 2
		}
		total += w
		if matched[t] {
			got += w
		}
	}
	if total > 0 {
		ht.score += got / total
	} else {
		ht.score += 1
	}
	// Tool calls the question names.
	toolItems, excluded := 0, 0
	if len(p.Tools) > 0 {
		for i, data := range msgs {
			for j, name := range toolCallNames(data) {
				if !matchesTool(p.Tools, name) {
					continue
				}
				addr := "messages." + strconv.Itoa(i) + ".tool_calls." + strconv.Itoa(j) + ".function.arguments"
				if ht.decoded != nil && len(p.Excluded) > 0 {
					text, _ := TextAt(ht.decoded, addr)
					if holdsAny(text, p.Excluded) {
						excluded++
						continue
					}
				}
				toolItems++
				col.add(ht, addr, "tool: "+name, 3+ht.score*4)
			}
		}
		if toolItems == 0 && excluded > 0 {
			// Every call it made is one the question puts outside.
			col.dropTrace(ht.t.ID)
			return
		}
	}
	perTerm := map[string]int{}
	for _, h := range hs {
		if !roleOK(h.Address) || perTerm[h.Term] >= maxPerTermInTrace {
			continue
		}
		if len(p.Excluded) > 0 && holdsAny(h.Term, p.Excluded) {
			continue
		}
		perTerm[h.Term]++
		w := termWeight(h.Term)
		if slices.Contains(p.Phrases, h.Term) {
			w *= 2
		}
		col.add(ht, h.Address, "search: "+h.Term, w+ht.score*4)
	}
	if len(p.Tools) == 0 {
		// The calls a run made say what it did: low-ranked context,
		// higher for a tool the question hints at.
		for i, data := range msgs {
			for j, name := range toolCallNames(data) {
				addr := "messages." + strconv.Itoa(i) + ".tool_calls." + strconv.Itoa(j) + ".function.arguments"
				if matchesTool(p.ToolHints, name) {
					col.add(ht, addr, "tool: "+name, 2+ht.score*4)
				} else {
					col.add(ht, addr, "tool call: "+name, 0.5+ht.score*2)
				}
			}
		}
		// So does its last answer.
		for i := len(msgs) - 1; i >= 0; i-- {
			if messageRole(msgs[i]) == "assistant" && len(toolCallNames(msgs[i])) == 0 {
				col.add(ht, "messages."+strconv.Itoa(i)+".content", "final answer", 0.5+ht.score*2)
				break
			}
		}
		if len(terms) == 0 && len(msgs) > 0 && !p.Errors {
			col.add(ht, firstTextAddress(msgs), "first message", 1+ht.score*2)
		}
	}
	if p.Errors {
		for i, data := range msgs {
			var e struct {
				Error json.RawMessage `json:"error"`
			}
			if json.Unmarshal(data, &e) == nil && len(e.Error) > 0 && string(e.Error) != "null" {
				col.add(ht, "messages."+strconv.Itoa(i)+".error", "error", 3+ht.score*4)
			}
		}
	}
}

// firstTextAddress is the content address of the first user message
// (else of the first message).
func firstTextAddress(msgs [][]byte) string {
	for i, m := range msgs {
		if messageRole(m) == "user" {
			return "messages." + strconv.Itoa(i) + ".content"
		}
	}
	return "messages.0.content"
}

// dropTrace removes a trace and its evidence.
func (col *collector) dropTrace(id string) {
	for k := range col.items {
		if k[0] == id {
			delete(col.items, k)
		}
	}
	col.traces[id].score = -1
}

// toolCallNames returns the function names of an event's tool calls.
func toolCallNames(data []byte) []string {
	var e struct {
		ToolCalls []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tool_calls"`
	}
	if json.Unmarshal(data, &e) != nil {
		return nil
	}
	out := make([]string, len(e.ToolCalls))
	for i, tc := range e.ToolCalls {
		out[i] = tc.Function.Name
	}
	return out
}

// matchesTool reports whether name is one of tools (case-insensitive; a
// tool pattern may end in *).
func matchesTool(tools []string, name string) bool {
	for _, t := range tools {
		if strings.EqualFold(t, name) || strings.HasSuffix(t, "*") && strings.HasPrefix(strings.ToLower(name), strings.ToLower(strings.TrimSuffix(t, "*"))) {
			return true
		}
	}
	return false
}

// holdsAny reports whether text contains one of xs (case-insensitive).
func holdsAny(text string, xs []string) bool {
	ft := search.Fold(text)
	for _, x := range xs {
		if strings.Contains(ft, search.Fold(x)) {
			return true
		}
	}
	return false
}

// messageIndex is the event index of an address, -1 for none.
func messageIndex(addr string) int {
	rest, ok := strings.CutPrefix(addr, "messages.")
	if !ok {
		return -1
	}
	end := strings.IndexAny(rest, ".:")
	if end < 0 {
		end = len(rest)
	}
	i, err := strconv.Atoi(rest[:end])
	if err != nil {
		return -1
	}
	return i
}

// textTerms reports the weight of the plan's terms found in s.
func (col *collector) textTerms(s string) (float64, []string) {
	fs := search.Fold(s)
	var w float64
	var hit []string
	for _, t := range append(slices.Clone(col.plan.Phrases), col.plan.Terms...) {
		if strings.Contains(fs, search.Fold(t)) {
			w += termWeight(t)
			hit = append(hit, t)
		}
	}
	return w, hit
}

// findings adds the findings that match: those of the traces found,
// and, when the question asks about violations or approvals, every
// finding in scope, scored by how well title and monitor match.
func (col *collector) findings(ctx context.Context) error {
	p := col.plan
	st := col.s.srv.Store()
	var fs []*store.Finding
	var err error
	switch f := (store.FindingFilter{Limit: maxFindings, ReviewOrder: true}); {
	case col.sc.traceID != "":
		f.RunID = col.sc.traceID
		fs, err = st.ListFindings(ctx, f)
	case col.s.srv.FindingScope(col.c, &f):
		fs, err = st.ListFindings(ctx, f)
	default:
		// Anonymous callers: the findings of the traces found only.
		if f.RunIDs = col.liveTraceIDs(); len(f.RunIDs) == 0 {
			return nil
		}
		fs, err = st.ListFindings(ctx, f)
	}
	if err != nil {
		return fmt.Errorf("ask: findings: %w", err)
	}
	for _, f := range fs {
		w, hit := col.textTerms(f.Title + " " + f.Monitor)
		_, found := col.traces[f.RunID]
		if !found && w == 0 && !p.Findings && !p.Approvals && !slices.Contains(p.Status, f.Status) {
			continue // about something else, in a run not found
		}
		ht, err := col.traceOf(ctx, f.RunID)
		if err != nil {
			return err
		}
		if ht == nil || ht.score < 0 {
			continue
		}
		score := 2 + w
		if p.Findings {
			score += 4
		}
		if p.Findings && len(hit) == 0 && len(p.Terms) > 0 && !slices.Contains(col.order, f.RunID) {
			score -= 3 // a finding about something else
		}
		if slices.Contains(p.Status, f.Status) {
			score += 4
		}
		why := fmt.Sprintf("finding %s (%s, %s, %s): %s", f.ID, f.Monitor, f.Severity, f.Status, f.Title)
		if p.Approvals {
			if f.Status == store.FindingAccepted {
				score += 5
				for _, h := range f.History {
					if h.To == store.FindingAccepted {
						why += fmt.Sprintf("; accepted by %s", h.By)
						if h.Note != "" {
							why += ": " + h.Note
						}
					}
				}
			} else {
				score -= 1
			}
		}
		var cites []struct {
			Address string `json:"address"`
		}
		_ = json.Unmarshal(f.Citations, &cites) // stored by the server: a JSON array
		if len(cites) == 0 {
			cites = append(cites, struct {
				Address string `json:"address"`
			}{"<root>"})
		}
		for _, ct := range cites {
			col.add(ht, ct.Address, why, score)
		}
	}
	return nil
}

// liveTraceIDs are the ids of the traces found and not dropped.
func (col *collector) liveTraceIDs() []string {
	var ids []string
	for _, id := range col.order {
		if col.traces[id].score >= 0 {
			ids = append(ids, id)
		}
	}
	return ids
}

// traceOf returns the trace of a finding, loading it when the searches
// did not find it; nil when the caller may not read it, it lies outside
// the scope, or it is a recorded exchange.
func (col *collector) traceOf(ctx context.Context, id string) (*hitTrace, error) {
	if ht, ok := col.traces[id]; ok {
		return ht, nil
	}
	t, err := col.s.srv.TraceFor(ctx, col.c, id, true)
	if errors.Is(err, store.ErrNotFound) {
		col.traces[id] = &hitTrace{score: -1}
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ask: trace %s: %w", id, err)
	}
	if col.sc.datasetID != "" && t.DatasetID != col.sc.datasetID || col.isAskTrace(ctx, t) || !col.inTime(t) {
		col.traces[id] = &hitTrace{t: t, score: -1}
		return nil, nil
	}
	ht := col.addTrace(t)
	col.traceItemsScoreOnly(ht)
	return ht, nil
}

// inTime reports whether t passes the plan's and scope's time filters.
func (col *collector) inTime(t *store.Trace) bool {
	var fs []string
	for _, f := range col.plan.Filters {
		if strings.HasPrefix(f, "after:") || strings.HasPrefix(f, "before:") {
			fs = append(fs, f)
		}
	}
	if col.sc.since != "" {
		fs = append(fs, "after:"+quoteValue(col.sc.since))
	}
	for _, f := range fs {
		q, err := search.Parse(f)
		if err != nil {
			continue
		}
		tm, ok := q.Root.(*search.Time)
		if !ok {
			continue
		}
		at := tm.At(col.sc.now)
		if tm.After() && t.TimeCreated.Before(at) || !tm.After() && !t.TimeCreated.Before(at) {
			return false
		}
	}
	return true
}

// traceItemsScoreOnly scores a trace loaded for its findings by the
// plan's terms, without adding its text as evidence.
func (col *collector) traceItemsScoreOnly(ht *hitTrace) {
	var text strings.Builder
	for _, m := range ht.t.Messages {
		for _, f := range search.Fields(0, m.Data) {
			text.WriteString(f.Text)
			text.WriteByte('\n')
		}
	}
	w, _ := col.textTerms(text.String())
	var total float64
	for _, t := range append(slices.Clone(col.plan.Phrases), col.plan.Terms...) {
		total += termWeight(t)
	}
	if total > 0 {
		ht.score = w / total
	}
}

// approvalText marks annotations that record an approval.
var approvalText = []string{"approv", "accepted", "waive", "sign-off", "signed off", "lgtm"}

// annotations adds the stored annotations of the traces found whose
// content matches the question (or records an approval, when it asks).
func (col *collector) annotations(ctx context.Context) error {
	ids := col.liveTraceIDs()
	if len(ids) == 0 {
		return nil
	}
	st := col.s.srv.Store()
	counts, err := st.CountAnnotationsBySource(ctx, ids)
	if err != nil {
		return fmt.Errorf("ask: annotation counts: %w", err)
	}
	for _, id := range ids {
		if len(counts[id]) == 0 {
			continue
		}
		ht := col.traces[id]
		anns, err := st.ListAnnotations(ctx, id, nil)
		if err != nil {
			return fmt.Errorf("ask: annotations of trace %s: %w", id, err)
		}
		for _, a := range anns {
			w, _ := col.textTerms(a.Content)
			approval := col.plan.Approvals && holdsAny(a.Content, approvalText)
			if w == 0 && !approval {
				continue
			}
			score := 2 + w + ht.score*2
			if approval {
				score += 5
			}
			addr := annotationAddress(ht.t, a)
			col.add(ht, addr, fmt.Sprintf("annotation %s: %s", a.ID, a.Content), score)
		}
	}
	return nil
}

// annotationAddress is the positional address of a stored annotation.
func annotationAddress(t *store.Trace, a *store.Annotation) string {
	if a.MessageID == "" {
		return a.Address
	}
	for i, m := range t.Messages {
		if m.ID == a.MessageID {
			return "messages." + strconv.Itoa(i) + a.Address
		}
	}
	return "<root>"
}

// ranked orders the evidence: by score, where each further item of the
// same trace counts for less (so that the first places show several
// traces), then trace id and address; at most MaxEvidence.
func (col *collector) ranked() []server.AskEvidence {
	byTrace := map[string][]*item{}
	for _, it := range col.items {
		if ht := col.traces[it.ev.TraceID]; ht == nil || ht.score < 0 {
			continue
		}
		byTrace[it.ev.TraceID] = append(byTrace[it.ev.TraceID], it)
	}
	var all []*item
	for _, its := range byTrace {
		slices.SortFunc(its, func(a, b *item) int {
			return cmp.Or(cmp.Compare(b.score, a.score), strings.Compare(a.ev.Address, b.ev.Address))
		})
		for k, it := range its {
			it.ev.Score = math.Round(it.score*math.Pow(0.8, float64(k))*1000) / 1000
			all = append(all, it)
		}
	}
	slices.SortFunc(all, func(a, b *item) int {
		return cmp.Or(cmp.Compare(b.ev.Score, a.ev.Score), strings.Compare(a.ev.TraceID, b.ev.TraceID),
			strings.Compare(a.ev.Address, b.ev.Address))
	})
	out := make([]server.AskEvidence, 0, min(len(all), MaxEvidence))
	for _, it := range all[:min(len(all), MaxEvidence)] {
		ev := it.ev
		if ht := col.traces[ev.TraceID]; ht != nil && ht.t != nil {
			if d := col.dsets[ht.t.DatasetID]; d != nil {
				ev.Dataset, ev.DatasetUser = d.Name, col.users[d.OwnerID]
			}
		}
		out = append(out, ev)
	}
	return out
}
