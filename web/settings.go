package web

import (
	"bytes"
	"encoding/json"
	"github.com/vigilhq/vigil/server"
	"github.com/vigilhq/vigil/store"
	"net/url"
	"strings"
)

type dsettingsView struct {
	Layout
	DS       *apiDataset
	Metadata string
	Error    string
	Saved    bool
}

// datasetSettingsPage: metadata, visibility, download, delete (owner).
func (h *Handler) datasetSettingsPage(q *request) error {
	d, ref, err := q.datasetFromPath()
	if err != nil {
		return err
	}
	if !ref.Owner {
		return notFound()
	}
	return h.renderDatasetSettings(q, d, ref, "")
}

func (h *Handler) renderDatasetSettings(q *request, d *apiDataset, ref *DatasetRef, msg string) error {
	md := map[string]any{}
	dec := json.NewDecoder(bytes.NewReader(d.ExtraMetadata))
	dec.UseNumber()
	_ = dec.Decode(&md)
	delete(md, "policies") // synthesized for owners, never stored (API §2.5)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // the text area shows the metadata as stored
	_ = enc.Encode(md)
	b := bytes.TrimSpace(buf.Bytes())
	v := &dsettingsView{Layout: q.layout("Settings · " + d.Name), DS: d, Metadata: pretty(b), Error: msg, Saved: q.r.URL.Query().Get("saved") != ""}
	v.Dataset, v.Section = ref, "dsettings"
	return q.render("dsettings", v)
}

func (h *Handler) datasetSettingsPost(q *request) error {
	if err := q.needLogin(); err != nil {
		return err
	}
	d, ref, err := q.datasetFromPath()
	if err != nil {
		return err
	}
	if !ref.Owner {
		return notFound()
	}
	target := "/api/v1/dataset/byid/" + url.PathEscape(d.ID)
	switch q.form("action") {
	case "visibility":
		err = q.api("PUT", target, map[string]any{"is_public": q.form("is_public") == "on"}, nil)
	case "metadata":
		var md map[string]json.RawMessage
		if jerr := json.Unmarshal([]byte(q.form("metadata")), &md); jerr != nil || md == nil {
			q.status = 400
			return h.renderDatasetSettings(q, d, ref, "Metadata must be a JSON object: "+errString(jerr))
		}
		if q.caller.User.ID != d.UserID {
			q.status = 400
			return h.renderDatasetSettings(q, d, ref, "Only the owner's own key can change metadata (the metadata API works in the key owner's namespace).")
		}
		err = q.api("PUT", "/api/v1/dataset/metadata/"+url.PathEscape(d.Name), map[string]any{"metadata": md, "replace_all": true}, nil)
	case "delete":
		if strings.TrimSpace(q.form("confirm")) != d.Name {
			q.status = 400
			return h.renderDatasetSettings(q, d, ref, "Type the dataset's name to delete it.")
		}
		if err := q.api("DELETE", target, nil, nil); err != nil {
			return err
		}
		return redirect("/")
	default:
		return &httpError{400, "Unknown settings action."}
	}
	if err != nil {
		if ae := asAPIError(err); ae != nil && ae.Status == 400 {
			q.status = 400
			return h.renderDatasetSettings(q, d, ref, ae.Detail)
		}
		return err
	}
	return redirect(ref.URL() + "/settings?saved=1")
}

func errString(err error) string {
	if err == nil {
		return "got null"
	}
	return err.Error()
}

type settingsView struct {
	Layout
	Sessions []sessionRow
	Keys     []apiKey
	KeysNote string
	NewKey   *newKey
	Users    []apiUser
	Error    string
}

type apiKey struct {
	ID          string  `json:"id"`
	TimeCreated string  `json:"time_created"`
	Expired     bool    `json:"expired"`
	Last4       string  `json:"hashed_key"`
	Name        string  `json:"name"`
	Scope       string  `json:"scope"`
	Prefix      string  `json:"prefix"`
	LastUsedAt  *string `json:"last_used_at"`
	ExpiresAt   *string `json:"expires_at"`
}

type sessionRow struct {
	Hash, Scope, Key, Created, LastUsed string
	Current                             bool
}

type newKey struct {
	Key   string `json:"key"`
	Name  string `json:"name"`
	Scope string `json:"scope"`
}

type apiUser struct {
	ID       string `json:"id"`
	Username string `json:"username"`
	Role     string `json:"role"`
	Disabled bool   `json:"disabled"`
}

// settingsPage: the user's API keys and, for admins, the users.
func (h *Handler) settingsPage(q *request) error {
	return h.renderSettings(q, nil, "")
}

func (h *Handler) renderSettings(q *request, nk *newKey, msg string) error {
	if err := q.needLogin(); err != nil {
		return err
	}
	v := &settingsView{Layout: q.layout("Settings"), NewKey: nk, Error: msg}
	v.Section = "settings"
	var keys struct {
		Keys []apiKey `json:"keys"`
	}
	if err := q.api("GET", "/api/v1/keys/list", nil, &keys); err != nil {
		v.KeysNote = "This session's key (scope " + q.caller.Scope() + ") cannot manage keys; sign in with a full key."
	} else {
		v.Keys = keys.Keys
	}
	if ss, err := q.store().ListWebSessions(q.r.Context(), q.caller.User.ID); err == nil {
		cur := ""
		if c, err := q.r.Cookie(server.SessionCookie); err == nil {
			cur = store.HashKey(c.Value)
		}
		for _, s := range ss {
			row := sessionRow{Hash: s.TokenHash, Scope: s.Scope, Created: s.CreatedAt.UTC().Format("2006-01-02 15:04"),
				LastUsed: s.LastUsedAt.UTC().Format("2006-01-02 15:04"), Current: s.TokenHash == cur}
			if k, err := q.store().GetAPIKey(q.r.Context(), s.KeyID); err == nil {
				row.Key = k.Prefix + "…" + k.Last4
			}
			v.Sessions = append(v.Sessions, row)
		}
	}
	if q.caller.IsAdmin() {
		var us struct {
			Users []apiUser `json:"users"`
		}
		if q.api("GET", "/api/v1/users", nil, &us) == nil {
			v.Users = us.Users
		}
	}
	return q.render("settings", v)
}

func (h *Handler) keyCreate(q *request) error {
	if err := q.needLogin(); err != nil {
		return err
	}
	var nk newKey
	body := map[string]any{"name": strings.TrimSpace(q.form("name")), "scope": q.form("scope")}
	if u := strings.TrimSpace(q.form("user")); u != "" && u != q.caller.User.Username {
		body["user"] = u // admins only; the API refuses others
	}
	if err := q.api("POST", "/api/v1/keys/create", body, &nk); err != nil {
		if ae := asAPIError(err); ae != nil && ae.Status < 500 {
			q.status = ae.Status
			return h.renderSettings(q, nil, ae.Detail)
		}
		return err
	}
	return h.renderSettings(q, &nk, "")
}

func (h *Handler) keyRevoke(q *request) error {
	if err := q.needLogin(); err != nil {
		return err
	}
	if err := q.api("DELETE", "/api/v1/keys/"+url.PathEscape(q.r.PathValue("id")), nil, nil); err != nil {
		return err
	}
	return redirect("/settings")
}

// userCreate creates a user (admin; API §12.2).
func (h *Handler) userCreate(q *request) error {
	if err := q.needLogin(); err != nil {
		return err
	}
	body := map[string]any{"username": strings.TrimSpace(q.form("username")), "role": q.form("role")}
	if err := q.api("POST", "/api/v1/users", body, &map[string]any{}); err != nil {
		if ae := asAPIError(err); ae != nil && ae.Status < 500 {
			q.status = ae.Status
			return h.renderSettings(q, nil, ae.Detail)
		}
		return err
	}
	return redirect("/settings")
}

// userUpdate disables or enables a user (admin; API §12.2).
func (h *Handler) userUpdate(q *request) error {
	if err := q.needLogin(); err != nil {
		return err
	}
	body := map[string]any{"disabled": q.form("disabled") == "on"}
	if err := q.api("PATCH", "/api/v1/users/"+url.PathEscape(q.r.PathValue("id")), body, nil); err != nil {
		return err
	}
	return redirect("/settings")
}

// sessionEnd ends one of the caller's own browser sessions.
func (h *Handler) sessionEnd(q *request) error {
	if err := q.needLogin(); err != nil {
		return err
	}
	hash := q.r.PathValue("hash")
	ws, err := q.store().GetWebSession(q.r.Context(), hash)
	if err != nil || ws.UserID != q.caller.User.ID {
		return notFound()
	}
	if err := q.store().DeleteWebSession(q.r.Context(), hash); err != nil {
		return err
	}
	return redirect("/settings")
}
