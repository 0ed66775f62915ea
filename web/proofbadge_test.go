package web_test

import (
	"database/sql"
	"encoding/json"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// tamperReceipt alters the first receipt of run tid in the SQLite store
// (its action), as someone with access to the database file could.
func tamperReceipt(t *testing.T, e *env, tid string) {
	t.Helper()
	db, err := sql.Open("sqlite", e.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var run struct {
		SessionID string `json:"sessionId"`
	}
	e.api(t, "GET", "/api/v1/runs/"+tid, adminKey, nil, &run)
	sid := run.SessionID
	var text string
	if err := db.QueryRow(`SELECT text FROM receipts WHERE session_id = ? ORDER BY seq LIMIT 1`, sid).Scan(&text); err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(text), &rec); err != nil {
		t.Fatal(err)
	}
	rec["action"] = "nothing.happened"
	b, _ := json.Marshal(rec)
	res, err := db.Exec(`UPDATE receipts SET text = ? WHERE session_id = ? AND seq = (SELECT min(seq) FROM receipts WHERE session_id = ?)`, string(b), sid, sid)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("tamper: %d receipts changed", n)
	}
}

// TestProofBadge: the trace header never verifies while rendering; it
// says "unverified" with the verify endpoint for the page's script, and
// "tampered" once a verification failed.
func TestProofBadge(t *testing.T) {
	e := newEnv(t)
	tid, _ := seed(t, e)
	b := e.browser(t, adminKey)
	_, body, _ := b.get(t, "/trace/"+tid)
	want := `<a class="badge proof-unverified" href="/runs/` + tid + `?verify=1" title="Signed; open the proof to verify it" data-verify="/api/v1/runs/` + tid + `/verify">unverified</a>`
	if !strings.Contains(body, want) {
		t.Fatalf("intact run: no unverified badge %s", want)
	}
	if strings.Contains(body, ">signed<") {
		t.Error("the badge says signed")
	}
	code, out := b.apiJSON(t, "GET", "/api/v1/runs/"+tid+"/verify", "", nil)
	if code != 200 || !strings.Contains(out, `"valid":true`) {
		t.Fatalf("verify intact: %d %s", code, out)
	}

	tamperReceipt(t, e, tid)
	if _, body, _ = b.get(t, "/trace/"+tid); !strings.Contains(body, "proof-unverified") {
		t.Error("the page verified while rendering (badge is not unverified before the script's call)")
	}
	code, out = b.apiJSON(t, "GET", "/api/v1/runs/"+tid+"/verify", "", nil)
	if code != 200 || !strings.Contains(out, `"valid":false`) {
		t.Fatalf("verify tampered: %d %s", code, out)
	}
	if _, body, _ = b.get(t, "/trace/"+tid); !strings.Contains(body, `class="badge proof-tampered"`) || strings.Contains(body, "data-verify") {
		t.Error("after a failed verification the header does not say tampered")
	}
}

func TestBrowserProofBadge(t *testing.T) {
	needChromium(t)
	e := newEnv(t)
	tid, _ := seed(t, e)
	tb := newTab(t, e)
	tb.login(t, adminKey)
	tb.do(t, "intact", chromedp.Navigate(tb.url("/trace/"+tid)), chromedp.WaitVisible(chromedp.CSS(`.trace-head .badge.proof-verified`)))
	if s := tb.text(t, ".trace-head .badge"); s != "verified" {
		t.Fatalf("intact run badge %q", s)
	}
	tamperReceipt(t, e, tid)
	tb.do(t, "tampered", chromedp.Navigate(tb.url("/trace/"+tid)), chromedp.WaitVisible(chromedp.CSS(`.trace-head .badge.proof-tampered`)))
	if s := tb.text(t, ".trace-head .badge"); s != "tampered" {
		t.Fatalf("tampered run badge %q", s)
	}
	if h := eval[string](t, tb, `document.querySelector(".trace-head .badge").getAttribute("href")`); h != "/runs/"+tid+"?verify=1" {
		t.Fatalf("tampered badge links to %s", h)
	}
}
