package web

import (
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/vigilhq/vigil/server"
)

// The ask box (issue 19, "where people ask"): a question over a
// dataset's traces or one trace, answered by the server's Asker. Without
// JavaScript the form posts to /ask and gets the answer page; app.js
// posts the same form and puts the page's answer in place.

// SetAsker gives the UI the service that answers questions (package ask
// implements server.Asker). Without one the ask box is not shown and
// POST /ask answers 404. Call it before serving.
func (h *Handler) SetAsker(a server.Asker) { h.asker = a }

// askBox is the ask form on a trace list or trace page.
type askBox struct {
	Dataset string // a dataset id ("" with TraceID)
	TraceID string
	Scope   string // what the question is about, for the placeholder
	Back    string // the page the box is on
}

// askView is the answer page (POST /ask).
type askView struct {
	Layout
	Box      askBox
	Question string
	Back     string
	Error    string
	Ans      *askAnswerView
}

type askAnswerView struct {
	Mode, Query string
	Parts       []answerPart // the model's answer, citation marks as links
	Citations   []askLink
	Evidence    []askLink
	Unsupported int
	Dropped     []askLink
	Refused     bool
	Note        string
	Exchange    string // URL of the recorded exchange ("" = none)
}

// answerPart is a run of answer text, or a citation mark (N > 0).
type answerPart struct {
	Text string
	N    int
	Href string
}

// askLink is a citation or evidence item with a link to its address.
type askLink struct {
	N       int
	Href    string
	Where   string // user/dataset#index, or the trace id
	Address string
	Quote   string
	Why     string // evidence: why it was chosen; dropped: the check that failed
}

var citeMark = regexp.MustCompile(`\[([1-9][0-9]*)\]`)

// askPost answers a question (POST /ask) as the page's caller.
func (h *Handler) askPost(q *request) error {
	if h.asker == nil {
		return notFound()
	}
	req := server.AskRequest{Question: strings.TrimSpace(q.form("question")), Dataset: q.form("dataset"), TraceID: q.form("trace_id")}
	v := &askView{Layout: q.layout("Ask"), Question: req.Question, Back: safeNext(q.form("back")),
		Box: askBox{Dataset: req.Dataset, TraceID: req.TraceID, Scope: q.form("scope")}}
	if req.Question == "" {
		v.Error = "Type a question first."
		q.status = http.StatusBadRequest
		return q.render("ask", v)
	}
	ans, err := h.asker.Ask(q.r.Context(), q.caller, req)
	if err != nil {
		ae := asAPIError(err)
		switch {
		case ae != nil && ae.Status == http.StatusBadRequest:
			v.Error, q.status = ae.Detail, http.StatusBadRequest
			return q.render("ask", v)
		case ae != nil && (ae.Status == http.StatusNotFound || ae.Status == http.StatusForbidden):
			return notFound()
		}
		return err
	}
	v.Ans = answerView(ans)
	return q.render("ask", v)
}

// answerView shapes an answer for the page.
func answerView(a *server.AskAnswer) *askAnswerView {
	v := &askAnswerView{Mode: a.Mode, Query: a.Query, Unsupported: a.UnsupportedClaims, Refused: a.Refused, Note: a.Note}
	for i, c := range a.Citations {
		v.Citations = append(v.Citations, askLink{N: i + 1, Href: addressURL(c.DatasetUser, c.Dataset, c.TraceIndex, c.TraceID, c.Address),
			Where: where(c.DatasetUser, c.Dataset, c.TraceIndex, c.TraceID), Address: c.Address, Quote: c.Quote})
	}
	for _, c := range a.Dropped {
		v.Dropped = append(v.Dropped, askLink{Where: c.TraceID, Address: c.Address, Quote: c.Quote, Why: c.Reason})
	}
	for i, e := range a.Evidence {
		v.Evidence = append(v.Evidence, askLink{N: i + 1, Href: addressURL(e.DatasetUser, e.Dataset, e.TraceIndex, e.TraceID, e.Address),
			Where: where(e.DatasetUser, e.Dataset, e.TraceIndex, e.TraceID), Address: e.Address, Quote: e.Quote, Why: e.Why})
	}
	if a.ExchangeTraceID != "" {
		v.Exchange = "/trace/" + url.PathEscape(a.ExchangeTraceID)
	}
	text := a.Answer
	for text != "" {
		loc := citeMark.FindStringSubmatchIndex(text)
		if loc == nil {
			v.Parts = append(v.Parts, answerPart{Text: text})
			break
		}
		n, _ := strconv.Atoi(text[loc[2]:loc[3]])
		if loc[0] > 0 {
			v.Parts = append(v.Parts, answerPart{Text: text[:loc[0]]})
		}
		if n >= 1 && n <= len(v.Citations) {
			v.Parts = append(v.Parts, answerPart{N: n, Href: v.Citations[n-1].Href})
		} else {
			v.Parts = append(v.Parts, answerPart{Text: text[loc[0]:loc[1]]}) // a mark without a valid citation stays text
		}
		text = text[loc[1]:]
	}
	return v
}

// addressURL is the trace page link that opens and flashes addr: the
// dataset's trace path when the trace has one, else /trace/{id}; with
// the event page holding addr when it is not the first.
func addressURL(user, dataset string, index int64, id, addr string) string {
	u := "/trace/" + url.PathEscape(id)
	if dataset != "" && user != "" {
		u = "/u/" + url.PathEscape(user) + "/" + url.PathEscape(dataset) + "/t/" + strconv.FormatInt(index, 10)
	}
	if a, ok := parseAddress(addr); ok {
		if i, ok := eventOf(a.Path); ok && i >= eventsPerPage {
			u += "?page=" + strconv.Itoa(i/eventsPerPage)
		}
	}
	if addr != "" {
		u += fragment(addr)
	}
	return u
}

func where(user, dataset string, index int64, id string) string {
	if dataset == "" {
		return id
	}
	return user + "/" + dataset + " #" + strconv.FormatInt(index, 10)
}
