package web

import (
	"encoding/json"
	"io"
	"net/url"
	"strings"

	"github.com/vigilhq/vigil/store"
)

// apiDataset is the API's dataset object (explorer-api §2.5), as pages
// read it.
type apiDataset struct {
	ID              string          `json:"id"`
	Name            string          `json:"name"`
	ExtraMetadata   json.RawMessage `json:"extra_metadata"`
	IsPublic        bool            `json:"is_public"`
	UserID          string          `json:"user_id"`
	TimeCreated     string          `json:"time_created"`
	LatestTraceTime *string         `json:"latest_trace_time"`
	User            *struct {
		Username string `json:"username"`
	} `json:"user"`
	NumTraces *int             `json:"num_traces"`
	Queries   []savedQueryView `json:"queries"`
}

type savedQueryView struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Query     string `json:"query"`
	Count     *int   `json:"count"`
	Deletable bool   `json:"deletable"`
}

func (d *apiDataset) username() string {
	if d.User != nil {
		return d.User.Username
	}
	return ""
}

type homeView struct {
	Layout
	Datasets []homeDataset
	Error    string
	Host     string
}

type homeDataset struct {
	DatasetRef
	Public     bool
	Traces     int
	Events     int64 // the sum of its traces' events
	LastPush   string
	Open       map[string]int // open findings by severity
	Guardrails int            // enabled
}

func (h *Handler) homePage(q *request) error {
	if err := q.needLogin(); err != nil {
		return err
	}
	v := &homeView{Layout: q.layout("Datasets"), Host: q.r.Host}
	v.Section = "datasets"
	return h.renderHome(q, v)
}

func (h *Handler) renderHome(q *request, v *homeView) error {
	if !q.caller.CanRead() {
		v.Error = "This session's key has scope \"" + q.caller.Scope() + "\": it can push traces and run the playground, but it cannot read datasets."
		return q.render("home", v)
	}
	var list []apiDataset
	if err := q.api("GET", "/api/v1/dataset/list", nil, &list); err != nil {
		return err
	}
	ctx := q.r.Context()
	byID := map[string]int{}
	for _, d := range list {
		hd := homeDataset{DatasetRef: DatasetRef{ID: d.ID, User: d.username(), Name: d.Name, Owner: d.UserID == q.caller.User.ID},
			Public: d.IsPublic, Open: map[string]int{}}
		if d.LatestTraceTime != nil {
			hd.LastPush = shortTime(*d.LatestTraceTime)
		}
		if sd, err := q.store().GetDataset(ctx, d.ID); err == nil {
			hd.Traces = sd.NumTraces
		}
		if gs, err := q.store().ListGuardrails(ctx, d.ID); err == nil {
			for _, g := range gs {
				if g.Enabled {
					hd.Guardrails++
				}
			}
		}
		byID[d.ID] = len(v.Datasets)
		v.Datasets = append(v.Datasets, hd)
	}
	// Events: one grouped query over the datasets listed.
	ids := make([]string, 0, len(v.Datasets))
	for _, d := range v.Datasets {
		ids = append(ids, d.ID)
	}
	if ev, err := q.store().CountEvents(ctx, ids); err == nil {
		for i := range v.Datasets {
			v.Datasets[i].Events = ev[v.Datasets[i].ID]
		}
	} else {
		h.log.Error("count events", "err", err)
	}
	// Open findings by severity, grouped by the dataset of their run.
	f := store.FindingFilter{Status: []string{store.FindingOpen}, Limit: 5000}
	if !q.caller.IsAdmin() {
		f.OwnerID = q.caller.User.ID
	}
	if fs, err := q.store().ListFindings(ctx, f); err == nil && len(fs) > 0 {
		ids := make([]string, 0, len(fs))
		for _, x := range fs {
			ids = append(ids, x.RunID)
		}
		if ts, err := q.store().ListTraces(ctx, store.TraceFilter{IDs: ids}); err == nil {
			ds := map[string]string{}
			for _, t := range ts {
				ds[t.ID] = t.DatasetID
			}
			for _, x := range fs {
				if i, ok := byID[ds[x.RunID]]; ok {
					v.Datasets[i].Open[x.Severity]++
				}
			}
		}
	}
	return q.render("home", v)
}

// shortTime renders an API time (RFC 3339) as "2006-01-02 15:04".
func shortTime(s string) string {
	if len(s) >= 16 {
		return strings.Replace(s[:16], "T", " ", 1)
	}
	return s
}

// datasetCreate serves the new-dataset form: empty, or a JSONL upload
// (the JavaScript sends uploads straight to the API to show progress;
// this is the path without it).
func (h *Handler) datasetCreate(q *request) error {
	if err := q.needLogin(); err != nil {
		return err
	}
	name := strings.TrimSpace(q.form("name"))
	public := q.form("is_public") == "on"
	var err error
	if file, _, ferr := q.r.FormFile("file"); ferr == nil {
		defer file.Close()
		body, rerr := io.ReadAll(file)
		if rerr != nil {
			return rerr
		}
		target := "/api/v1/dataset/upload?name=" + url.QueryEscape(name)
		if public {
			target += "&is_public=true"
		}
		err = q.apiRaw("POST", target, body, nil)
	} else {
		err = q.api("POST", "/api/v1/dataset/create", map[string]any{"name": name, "is_public": public}, nil)
	}
	if err != nil {
		v := &homeView{Layout: q.layout("Datasets"), Host: q.r.Host, Error: errText(err)}
		v.Section = "datasets"
		q.status = 400
		return h.renderHome(q, v)
	}
	return redirect("/u/" + url.PathEscape(q.caller.User.Username) + "/" + url.PathEscape(name))
}

// errText is the message of an API error for a form.
func errText(err error) string {
	if ae := asAPIError(err); ae != nil {
		return ae.Detail
	}
	return err.Error()
}
