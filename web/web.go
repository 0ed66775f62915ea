// Package web is Vigil's browser UI: server-rendered html/template pages,
// a little vanilla JavaScript and one stylesheet, all embedded in the
// binary and served by vigil serve on the API's listener.
//
// Goals: every page reads and writes through the API's own handlers,
// called in-process with (*server.Server).Do, so that a page shows
// exactly what the API shows the same key and never grows a second
// implementation of a permission rule; hostile trace content is escaped by
// html/template in its context and no script builds HTML from data; every
// page works for reading without JavaScript.
//
// Non-goals: a JavaScript application, third-party scripts, a build step.
package web

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"path"
	"strings"

	"github.com/vigilhq/vigil/server"
)

//go:embed templates static
var files embed.FS

// CSP is the Content-Security-Policy of every page (no inline script or
// style anywhere).
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; frame-ancestors 'none'; base-uri 'none'"

// Handler serves the UI. Mount it at "/" on the server.
type Handler struct {
	srv    *server.Server
	log    *slog.Logger
	mux    *http.ServeMux
	pages  map[string]*template.Template
	static map[string]staticFile // by name, e.g. "css/app.css"
	asker  server.Asker          // nil: no ask box (SetAsker)
}

type staticFile struct {
	sum   string // first 12 hex characters of the SHA-256
	data  []byte
	ctype string
}

// New returns the UI handler of srv. It fails when a template does not
// parse or a page is not registered (a startup check).
func New(srv *server.Server) (*Handler, error) {
	h := &Handler{srv: srv, log: srv.Logger(), mux: http.NewServeMux(), static: map[string]staticFile{}}
	err := fs.WalkDir(files, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		name := strings.TrimPrefix(p, "static/")
		h.static[name] = staticFile{sum: hex.EncodeToString(sum[:6]), data: b, ctype: mime.TypeByExtension(path.Ext(p))}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("web: read static files: %w", err)
	}
	if err := h.parseTemplates(); err != nil {
		return nil, err
	}
	h.routes()
	return h, nil
}

// routes is the UI's whole route table (web-ui.md §1).
func (h *Handler) routes() {
	m := h.mux
	m.HandleFunc("GET /static/{sum}/{name...}", h.serveStatic)
	m.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, h.staticURL("img/icon.svg"), http.StatusMovedPermanently)
	})
	m.HandleFunc("GET /login", h.page(h.loginPage))
	m.HandleFunc("POST /login", h.page(h.loginPost))
	m.HandleFunc("POST /logout", h.page(h.logoutPost))
	m.HandleFunc("GET /{$}", h.page(h.homePage))
	m.HandleFunc("POST /datasets/new", h.page(h.datasetCreate))
	m.HandleFunc("GET /u/{user}/{dataset}", h.page(h.tracesPage))
	m.HandleFunc("GET /u/{user}/{dataset}/facets", h.page(h.facetsFragment))
	m.HandleFunc("GET /u/{user}/{dataset}/t/{index}", h.page(h.traceByIndex))
	m.HandleFunc("GET /trace/{id}", h.page(h.traceByID))
	m.HandleFunc("POST /trace/{id}/comments", h.page(h.commentAdd))
	m.HandleFunc("POST /trace/{id}/delete", h.page(h.traceDelete))
	m.HandleFunc("POST /trace/{id}/share", h.page(h.traceShare))
	m.HandleFunc("POST /trace/{id}/comments/{aid}", h.page(h.commentEdit))
	m.HandleFunc("POST /trace/{id}/comments/{aid}/delete", h.page(h.commentDelete))
	m.HandleFunc("GET /u/{user}/{dataset}/guardrails", h.page(h.guardrailsPage))
	m.HandleFunc("POST /u/{user}/{dataset}/guardrails", h.page(h.guardrailSave))
	m.HandleFunc("POST /u/{user}/{dataset}/guardrails/{gid}/restore/{n}", h.page(h.guardrailRestore))
	m.HandleFunc("GET /u/{user}/{dataset}/findings", h.page(h.findingsPage))
	m.HandleFunc("POST /u/{user}/{dataset}/findings", h.page(h.findingsTriage))
	m.HandleFunc("GET /u/{user}/{dataset}/settings", h.page(h.datasetSettingsPage))
	m.HandleFunc("POST /u/{user}/{dataset}/settings", h.page(h.datasetSettingsPost))
	m.HandleFunc("GET /runs/{id}", h.page(h.proofPage))
	m.HandleFunc("GET /playground", h.page(h.playgroundPage))
	m.HandleFunc("POST /playground", h.page(h.playgroundPage))
	m.HandleFunc("GET /mcp", h.page(h.mcpPage))
	m.HandleFunc("POST /mcp/pins/{id}/approve", h.page(h.pinApprove))
	m.HandleFunc("POST /mcp/pins/{id}/forget", h.page(h.pinForget))
	m.HandleFunc("GET /settings", h.page(h.settingsPage))
	m.HandleFunc("POST /settings/keys", h.page(h.keyCreate))
	m.HandleFunc("POST /settings/keys/{id}/revoke", h.page(h.keyRevoke))
	m.HandleFunc("POST /settings/sessions/{hash}/end", h.page(h.sessionEnd))
	m.HandleFunc("POST /settings/users", h.page(h.userCreate))
	m.HandleFunc("POST /settings/users/{id}", h.page(h.userUpdate))
	m.HandleFunc("POST /u/{user}/{dataset}/queries", h.page(h.querySave))
	m.HandleFunc("POST /u/{user}/{dataset}/queries/{id}/delete", h.page(h.queryDelete))
	m.HandleFunc("POST /ask", h.page(h.askPost))
	m.HandleFunc("/", h.page(h.notFoundPage))
}

// ServeHTTP serves one UI request with the security headers of
// web-ui.md §6.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", CSP)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("X-Frame-Options", "DENY")
	h.mux.ServeHTTP(w, r)
}

func (h *Handler) serveStatic(w http.ResponseWriter, r *http.Request) {
	f, ok := h.static[r.PathValue("name")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	if r.PathValue("sum") == f.sum {
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		w.Header().Set("Cache-Control", "no-cache") // an old checksum: serve the current file, uncached
	}
	w.Header().Set("Content-Type", f.ctype)
	w.Write(f.data)
}

// staticURL is the content-hashed URL of a static file.
func (h *Handler) staticURL(name string) string {
	f, ok := h.static[name]
	if !ok {
		panic("web: no static file " + name) // caught by the startup template check
	}
	return "/static/" + f.sum + "/" + name
}

// StaticBytes returns the total size of the JavaScript and CSS every page
// loads (web-ui.md §7 budget: under 100 KB).
func (h *Handler) StaticBytes() int {
	n := 0
	for name, f := range h.static {
		if strings.HasSuffix(name, ".js") || strings.HasSuffix(name, ".css") {
			n += len(f.data)
		}
	}
	return n
}
