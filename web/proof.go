package web

import (
	"encoding/json"
	"net/url"
)

type proofView struct {
	Layout
	Run       apiRun
	Session   apiSession
	Receipts  []receiptRow
	PublicKey string
	Verified  *apiVerify
	Command   string
	TraceURL  string
}

type apiRun struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	AgentID   string `json:"agentId"`
	Status    string `json:"status"`
	StartedAt int64  `json:"startedAt"`
	EndedAt   *int64 `json:"endedAt"`
	SessionID string `json:"sessionId"`
}

type apiSession struct {
	ID           string          `json:"id"`
	Signer       string          `json:"signer"`
	SignerKey    *string         `json:"signerPublicKey"`
	Status       string          `json:"status"`
	CreatedAt    int64           `json:"createdAt"`
	ClosedAt     *int64          `json:"closedAt"`
	ReceiptCount int             `json:"receiptCount"`
	TamperReason json.RawMessage `json:"tamperReason"`
	CloseHash    *string         `json:"closeHash"`
}

type apiVerify struct {
	Valid    bool            `json:"valid"`
	BrokenAt *int            `json:"brokenAt"`
	Reason   json.RawMessage `json:"reason"`
	Status   string          `json:"status"`
	Count    int             `json:"receiptCount"`
	Errors   json.RawMessage `json:"errors"`
}

// ReasonText is the verification failure reason as text.
func (v *apiVerify) ReasonText() string {
	if len(v.Reason) == 0 || string(v.Reason) == "null" {
		return ""
	}
	if s, ok := str(v.Reason); ok {
		return s
	}
	return string(v.Reason)
}

type receiptRow struct {
	Index     int
	ID        string
	Action    string
	Time      int64
	Hash      string
	Signature string
	Broken    bool
}

// proofPage shows a run's receipt chain and verifies it on request
// (web-ui.md §5).
func (h *Handler) proofPage(q *request) error {
	id := q.r.PathValue("id")
	v := &proofView{Layout: q.layout("Proof")}
	if err := q.api("GET", "/api/v1/runs/"+url.PathEscape(id), nil, &v.Run); err != nil {
		if ae := asAPIError(err); ae != nil && (ae.Status == 404 || ae.Status == 401 || ae.Status == 403) {
			if q.caller == nil {
				return q.needLogin()
			}
			return notFound()
		}
		return err
	}
	v.Title = "Proof · " + v.Run.Name
	v.TraceURL = "/trace/" + url.PathEscape(v.Run.ID)
	sid := v.Run.SessionID
	_ = q.api("GET", "/api/v1/ledger/sessions/"+url.PathEscape(sid), nil, &v.Session)
	var recs struct {
		Receipts []struct {
			ID        string  `json:"id"`
			Action    string  `json:"action"`
			Timestamp float64 `json:"timestamp"`
			Hash      string  `json:"hash"`
			Signature string  `json:"signature"`
		} `json:"receipts"`
	}
	if err := q.api("GET", "/api/v1/ledger/sessions/"+url.PathEscape(sid)+"/receipts", nil, &recs); err != nil {
		return err
	}
	var pk struct {
		PublicKey string `json:"publicKey"`
	}
	_ = q.api("GET", "/api/v1/ledger/public-key", nil, &pk)
	v.PublicKey = pk.PublicKey
	if v.Session.SignerKey != nil && *v.Session.SignerKey != "" {
		v.PublicKey = *v.Session.SignerKey
	}
	if q.r.URL.Query().Get("verify") != "" {
		var res apiVerify
		if err := q.api("GET", "/api/v1/runs/"+url.PathEscape(id)+"/verify", nil, &res); err != nil {
			return err
		}
		v.Verified = &res
	}
	for i, r := range recs.Receipts {
		row := receiptRow{Index: i, ID: r.ID, Action: r.Action, Time: int64(r.Timestamp), Hash: r.Hash, Signature: "unsigned"}
		if r.Signature != "" {
			row.Signature = "signed"
		}
		if v.Verified != nil && v.Verified.BrokenAt != nil && *v.Verified.BrokenAt == i {
			row.Broken = true
		}
		v.Receipts = append(v.Receipts, row)
	}
	v.Command = "curl -s -H \"Authorization: Bearer $VIGIL_API_KEY\" http://" + q.r.Host + "/api/v1/ledger/sessions/" + sid + "/receipts \\\n  | vigil receipts verify --session-id " + sid
	if v.PublicKey != "" {
		v.Command += " --public-key " + v.PublicKey
	}
	if v.Session.CloseHash != nil && *v.Session.CloseHash != "" {
		v.Command += " --close-hash " + *v.Session.CloseHash
	}
	v.Command += " -"
	return q.render("proof", v)
}
