package server

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/store"
)

// TestVisibility checks explorer-api §1.4: owners and admins see
// everything of theirs, other users see public datasets only, anonymous
// callers see public ones only when anonymous_read_public is on, and what
// a caller cannot see is 404.
func TestVisibility(t *testing.T) {
	for _, anon := range []bool{false, true} {
		ts := newTestServer(t, openSQLite(t), func(c *Config) { c.AnonymousReadPublic = anon })
		ctx := context.Background()
		bob := &store.User{Username: "bob", Role: store.RoleMember}
		if err := ts.st.CreateUser(ctx, bob); err != nil {
			t.Fatal(err)
		}
		bk, err := ts.c.CreateKey(ctx, client.KeyCreate{User: "bob", Scope: "full"})
		if err != nil {
			t.Fatal(err)
		}
		bc := client.New(ts.URL, bk.Key, client.WithRetries(0))
		anonc := client.New(ts.URL, "", client.WithRetries(0))
		priv, _ := ts.c.Push(ctx, client.PushRequest{Dataset: "private", Messages: [][]any{{map[string]any{"role": "user", "content": "p"}}}})
		pub, _ := ts.c.Push(ctx, client.PushRequest{Dataset: "public", Messages: [][]any{{map[string]any{"role": "user", "content": "q"}}}})
		pd, _ := ts.c.GetDatasetByName(ctx, "admin", "public")
		if st, b := ts.do(t, "PUT", "/api/v1/dataset/byid/"+pd.ID, adminKey, `{"is_public": true}`); st != 200 {
			t.Fatalf("make public: %d %s", st, b)
		}
		if _, err := bc.GetTrace(ctx, priv.ID[0], false); !client.IsNotFound(err) {
			t.Errorf("bob reads private trace: %v", err)
		}
		if _, err := bc.GetTrace(ctx, pub.ID[0], false); err != nil {
			t.Errorf("bob reads public trace: %v", err)
		}
		// Bob can read but not delete or append to admin's public trace.
		if err := bc.DeleteTrace(ctx, pub.ID[0]); !client.IsNotFound(err) {
			t.Errorf("bob deletes admin's trace: %v", err)
		}
		if _, err := bc.Append(ctx, pub.ID[0], []any{map[string]any{"role": "user"}}, nil); !client.IsNotFound(err) {
			t.Errorf("bob appends to admin's trace: %v", err)
		}
		// Bob may annotate a trace he can read, but not edit admin's annotation.
		a, err := ts.c.Annotate(ctx, pub.ID[0], client.AnnotationCreate{Content: "mine", Address: "messages.0"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bc.Annotate(ctx, pub.ID[0], client.AnnotationCreate{Content: "bob's", Address: "<root>"}); err != nil {
			t.Errorf("bob annotates a public trace: %v", err)
		}
		if err := bc.DeleteAnnotation(ctx, pub.ID[0], a.ID); err == nil || !strings.Contains(err.Error(), "Unauthorized delete") {
			t.Errorf("bob deletes admin's annotation: %v", err)
		}
		list, err := bc.ListDatasets(ctx, "")
		if err != nil || len(list) != 1 || list[0].Name != "public" {
			t.Errorf("bob's dataset list: %v %+v", err, list)
		}
		_, err = anonc.GetTrace(ctx, pub.ID[0], false)
		if anon && err != nil {
			t.Errorf("anonymous read with anonymous_read_public: %v", err)
		}
		if !anon && !client.IsNotFound(err) {
			t.Errorf("anonymous read without anonymous_read_public: %v", err)
		}
		if _, err := anonc.GetTrace(ctx, priv.ID[0], false); !client.IsNotFound(err) {
			t.Errorf("anonymous reads a private trace: %v", err)
		}
		st, body := ts.do(t, "GET", "/api/v1/user/info", "", nil)
		if st != 200 || !strings.Contains(string(body), `"signedUp":false`) {
			t.Errorf("anonymous user info: %d %s", st, body)
		}
		// issue_17_public_run_reads: the run and ledger reads of a public
		// dataset's trace are open to its readers (they were 404); those of
		// a private one and every ledger write are not.
		for _, path := range []string{"/api/v1/runs/%s", "/api/v1/runs/%s/nodes", "/api/v1/runs/%s/verify",
			"/api/v1/ledger/sessions/%s", "/api/v1/ledger/sessions/%s/receipts", "/api/v1/ledger/sessions/%s/verify"} {
			if st, b := ts.do(t, "GET", fmt.Sprintf(path, pub.ID[0]), bk.Key, nil); st != 200 {
				t.Errorf("bob reads %s of a public run: %d %s", path, st, b)
			}
			if st, b := ts.do(t, "GET", fmt.Sprintf(path, priv.ID[0]), bk.Key, nil); st != 404 {
				t.Errorf("bob reads %s of a private run: %d %s", path, st, b)
			}
		}
		if st, b := ts.do(t, "POST", "/api/v1/runs/"+pub.ID[0]+"/finish", bk.Key, `{"status":"completed"}`); st != 404 {
			t.Errorf("bob finishes admin's public run: %d %s", st, b)
		}
	}
}
