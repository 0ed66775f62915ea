package server

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/vigilhq/vigil/store"
)

// TestAskExports: the permission helpers package ask uses apply the
// server's visibility rules to a Caller.
func TestAskExports(t *testing.T) {
	ts := newTestServer(t, openSQLite(t))
	ctx := context.Background()
	status, body := ts.do(t, "POST", "/api/v1/push/trace", adminKey, map[string]any{"dataset": "private",
		"messages": [][]map[string]any{{{"role": "user", "content": "hello"}}}})
	var pushed struct{ ID []string }
	if status != 200 || json.Unmarshal(body, &pushed) != nil {
		t.Fatalf("push: %d %s", status, body)
	}
	id := pushed.ID[0]
	u := &store.User{Username: "member", Role: store.RoleMember}
	if err := ts.st.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	const memberKey = "vigil-ask-exports-member-key-0123456789"
	if err := ts.st.CreateAPIKey(ctx, newKeyRow(memberKey, "m", store.ScopeRead, u.ID)); err != nil {
		t.Fatal(err)
	}
	admin, err := ts.srv.AuthenticateKey(ctx, adminKey)
	if err != nil {
		t.Fatal(err)
	}
	member, err := ts.srv.AuthenticateKey(ctx, memberKey)
	if err != nil {
		t.Fatal(err)
	}

	if tr, err := ts.srv.TraceFor(ctx, admin, id, true); err != nil || len(tr.Messages) != 1 {
		t.Fatalf("admin TraceFor: %v", err)
	}
	for _, c := range []*Caller{member, nil} {
		_, err := ts.srv.TraceFor(ctx, c, id, false)
		var ae *Error
		if !errors.Is(err, store.ErrNotFound) || !errors.As(err, &ae) || ae.Status != 404 {
			t.Errorf("TraceFor(%v): %v, want a 404 matching ErrNotFound", c, err)
		}
	}
	if d, err := ts.srv.DatasetFor(ctx, admin, "private"); err != nil || d.Name != "private" {
		t.Errorf("admin DatasetFor: %v %v", d, err)
	}
	if _, err := ts.srv.DatasetFor(ctx, member, "admin/private"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("member DatasetFor: %v", err)
	}

	var req store.SearchRequest
	ts.srv.SearchScope(member, &req)
	if req.AllOwners || req.OwnerID != u.ID || !req.Public {
		t.Errorf("member SearchScope: %+v", req)
	}
	req = store.SearchRequest{}
	ts.srv.SearchScope(admin, &req)
	if !req.AllOwners {
		t.Errorf("admin SearchScope: %+v", req)
	}
	var f store.FindingFilter
	if ts.srv.FindingScope(nil, &f) {
		t.Error("an anonymous caller lists no findings across runs")
	}
	if !ts.srv.FindingScope(member, &f) || f.OwnerID != u.ID {
		t.Errorf("member FindingScope: %+v", f)
	}
	f = store.FindingFilter{}
	if !ts.srv.FindingScope(admin, &f) || f.OwnerID != "" {
		t.Errorf("admin FindingScope: %+v", f)
	}

}
