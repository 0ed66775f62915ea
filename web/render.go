package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/vigilhq/vigil/server"
	"github.com/vigilhq/vigil/store"
)

// pageNames are the registered pages: one templates/pages/<name>.html
// each. New fails when a page file is not registered or a registered page
// has no file.
var pageNames = []string{"login", "home", "traces", "trace", "guardrails", "findings",
	"dsettings", "proof", "playground", "mcp", "settings", "error", "ask"}

// Layout is what the base template needs on every page.
type Layout struct {
	Title   string
	Me      *Me    // nil when signed out
	Section string // the active navigation entry
	Dataset *DatasetRef
	Flash   string
}

// Me is the signed-in caller.
type Me struct {
	Username string
	Role     string
	Scope    string
	Admin    bool
	CanWrite bool
}

// DatasetRef names a dataset in the page's navigation.
type DatasetRef struct {
	ID, User, Name string
	Owner          bool
}

// URL is the dataset's trace list path.
func (d *DatasetRef) URL() string {
	return "/u/" + url.PathEscape(d.User) + "/" + url.PathEscape(d.Name)
}

func (h *Handler) parseTemplates() error {
	funcs := template.FuncMap{
		"static":   h.staticURL,
		"add":      func(a, b int) int { return a + b },
		"pathesc":  url.PathEscape,
		"queryesc": url.QueryEscape,
		"join":     strings.Join,
		"list3":    func(a, b, c string) []string { return []string{a, b, c} },
		"ms": func(ms int64) string {
			if ms == 0 {
				return ""
			}
			return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05")
		},
		"short": func(s string, n int) string {
			if len(s) <= n {
				return s
			}
			return s[:n]
		},
	}
	base, err := template.New("base").Funcs(funcs).ParseFS(files, "templates/layout/*.html")
	if err != nil {
		return fmt.Errorf("web: parse layout templates: %w", err)
	}
	h.pages = map[string]*template.Template{}
	found, err := fs.Glob(files, "templates/pages/*.html")
	if err != nil {
		return err
	}
	registered := map[string]bool{}
	for _, n := range pageNames {
		registered[n] = true
	}
	for _, f := range found {
		name := strings.TrimSuffix(path.Base(f), ".html")
		if !registered[name] {
			return fmt.Errorf("web: page template %s is not registered in pageNames", f)
		}
		t, err := template.Must(base.Clone()).ParseFS(files, f)
		if err != nil {
			return fmt.Errorf("web: parse %s: %w", f, err)
		}
		h.pages[name] = t
	}
	for _, n := range pageNames {
		if h.pages[n] == nil {
			return fmt.Errorf("web: registered page %q has no templates/pages/%s.html", n, n)
		}
	}
	return nil
}

// request is one page request: the caller and helpers.
type request struct {
	h      *Handler
	w      http.ResponseWriter
	r      *http.Request
	caller *server.Caller
	status int // the status render writes (0: 200)
}

// pageFunc serves a page; an error is rendered as the HTML error page.
type pageFunc func(q *request) error

// httpError is an error with the status to render.
type httpError struct {
	Status int
	Msg    string
}

func (e *httpError) Error() string { return e.Msg }

func notFound() error {
	return &httpError{http.StatusNotFound, "This page does not exist, or you cannot see it."}
}

// redirect is returned by a page to redirect (303) after a POST or to
// the login page.
type redirect string

func (r redirect) Error() string { return "redirect to " + string(r) }

func (h *Handler) page(f pageFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q := &request{h: h, w: w, r: r}
		err := h.serve(q, f)
		if err == nil {
			return
		}
		var rd redirect
		if errors.As(err, &rd) {
			http.Redirect(w, r, string(rd), http.StatusSeeOther)
			return
		}
		status, msg := http.StatusInternalServerError, "Something went wrong on the server; it is logged."
		var he *httpError
		var ae *server.Error
		switch {
		case errors.As(err, &he):
			status, msg = he.Status, he.Msg
		case errors.As(err, &ae):
			status, msg = ae.Status, ae.Detail
		default:
			h.log.Error("web page failed", "path", r.URL.Path, "err", err)
		}
		if status == http.StatusNotFound {
			msg = "This page does not exist, or you cannot see it."
		}
		q.status = status
		_ = q.renderOnly("error", &errorView{Layout: q.layout("Error"), Status: status, Message: msg})
	}
}

func (h *Handler) serve(q *request, f pageFunc) (err error) {
	c, err := h.srv.Authenticate(q.r)
	if err != nil {
		var ae *server.Error
		if errors.As(err, &ae) && ae.Status == http.StatusUnauthorized {
			c = nil // a bad bearer header: treat as signed out
		} else {
			return err
		}
	}
	q.caller = c
	if q.r.Method == http.MethodPost {
		if err := server.CheckOrigin(q.r); err != nil {
			return &httpError{http.StatusForbidden, "This form was sent from another site; it was refused (CSRF check)."}
		}
		if err := q.r.ParseMultipartForm(64 << 20); err != nil && !errors.Is(err, http.ErrNotMultipart) {
			return &httpError{http.StatusBadRequest, "Could not read the form: " + err.Error()}
		}
	}
	return f(q)
}

type errorView struct {
	Layout
	Status  int
	Message string
}

func (h *Handler) notFoundPage(q *request) error { return notFound() }

// layout returns the common page fields.
func (q *request) layout(title string) Layout {
	l := Layout{Title: title}
	if c := q.caller; c != nil {
		l.Me = &Me{Username: c.User.Username, Role: c.User.Role, Scope: c.Scope(), Admin: c.IsAdmin(), CanWrite: c.CanWrite()}
	}
	return l
}

// render writes page name with view v (a typed view struct).
func (q *request) render(name string, v any) error {
	q.w.Header().Set("Content-Type", "text/html; charset=utf-8")
	return q.renderOnly(name, v)
}

func (q *request) renderOnly(name string, v any) error {
	t := q.h.pages[name]
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, "base", v); err != nil {
		return fmt.Errorf("render page %s: %w", name, err)
	}
	q.w.Header().Set("Content-Type", "text/html; charset=utf-8")
	q.w.Header().Set("Cache-Control", "no-store")
	if q.status != 0 {
		q.w.WriteHeader(q.status)
	}
	_, err := q.w.Write(b.Bytes())
	return err
}

// needLogin redirects a signed-out caller to the login page.
func (q *request) needLogin() error {
	if q.caller != nil {
		return nil
	}
	return redirect("/login?next=" + url.QueryEscape(q.r.URL.RequestURI()))
}

// api calls the API in-process as the page's caller and decodes a 2xx
// JSON answer into out (nil: ignore the body). A non-2xx answer is
// returned as a *server.Error carrying its status and detail.
func (q *request) api(method, target string, body any, out any) error {
	var b []byte
	if body != nil {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // text is stored as typed, never as \u003c
		if err := enc.Encode(body); err != nil {
			return fmt.Errorf("encode %s %s: %w", method, target, err)
		}
		b = buf.Bytes()
	}
	return q.apiRaw(method, target, b, out)
}

// apiRaw is api with a body sent as is.
func (q *request) apiRaw(method, target string, b []byte, out any) error {
	resp := q.h.srv.Do(q.r, q.caller, method, target, b)
	if !resp.OK() {
		var e struct {
			Detail string `json:"detail"`
			Code   string `json:"code"`
			Errors []struct {
				Line    int    `json:"line"`
				Column  int    `json:"column"`
				Message string `json:"message"`
			} `json:"errors"`
			Position *int `json:"position"`
		}
		_ = json.Unmarshal(resp.Body, &e)
		ae := &server.Error{Status: resp.Status, Code: e.Code, Detail: e.Detail}
		if len(e.Errors) > 0 || e.Position != nil {
			ae.Extra = map[string]any{}
			if len(e.Errors) > 0 {
				ae.Extra["errors"] = e.Errors
			}
			if e.Position != nil {
				ae.Extra["position"] = *e.Position
			}
		}
		if resp.Status == http.StatusForbidden && q.caller != nil && method == http.MethodGet {
			ae.Status = http.StatusNotFound // pages never say what exists (§6)
		}
		if resp.Status == http.StatusUnauthorized {
			return redirect("/login?next=" + url.QueryEscape(q.r.URL.RequestURI()))
		}
		return ae
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(resp.Body, out); err != nil {
		return fmt.Errorf("decode %s %s: %w", method, target, err)
	}
	return nil
}

// store is the server's store, for what the API has no endpoint for in
// the shape a page needs; every such use checks access through an api
// call first.
func (q *request) store() store.Store { return q.h.srv.Store() }

// form value helper.
func (q *request) form(k string) string { return q.r.FormValue(k) }

func asAPIError(err error) *server.Error {
	var ae *server.Error
	if errors.As(err, &ae) {
		return ae
	}
	return nil
}
