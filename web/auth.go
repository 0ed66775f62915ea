package web

import (
	"errors"
	"net/url"
	"strings"

	"github.com/vigilhq/vigil/server"
)

type loginView struct {
	Layout
	Next  string
	Error string
}

// safeNext keeps a ?next= target on this site (a path, never a URL to
// elsewhere).
func safeNext(next string) string {
	if next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return "/"
	}
	if u, err := url.Parse(next); err != nil || u.Host != "" || u.Scheme != "" {
		return "/"
	}
	return next
}

func (h *Handler) loginPage(q *request) error {
	return q.render("login", &loginView{Layout: q.layout("Sign in"), Next: safeNext(q.r.URL.Query().Get("next"))})
}

func (h *Handler) loginPost(q *request) error {
	next := safeNext(q.form("next"))
	key := strings.TrimSpace(q.form("api_key"))
	if key == "" {
		return q.render("login", &loginView{Layout: q.layout("Sign in"), Next: next, Error: "Paste an API key."})
	}
	if _, err := h.srv.Login(q.w, q.r, key); err != nil {
		if errors.Is(err, server.ErrInvalidKey) {
			q.status = 401
			return q.render("login", &loginView{Layout: q.layout("Sign in"), Next: next, Error: "This API key is unknown, revoked or expired."})
		}
		return err
	}
	return redirect(next)
}

func (h *Handler) logoutPost(q *request) error {
	if err := h.srv.Logout(q.w, q.r); err != nil {
		return err
	}
	return redirect("/login")
}
