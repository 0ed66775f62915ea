package storetest

import (
	"testing"
	"time"

	"github.com/vigilhq/vigil/store"
)

func init() {
	register("Users", testUsers)
	register("APIKeys", testAPIKeys)
	register("WebSessions", testWebSessions)
}

func testUsers(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	admin := &store.User{Username: "admin", Role: store.RoleAdmin, Email: "a@example.com"}
	must(t, s.CreateUser(ctx, admin))
	if admin.ID == "" || admin.TimeCreated.IsZero() {
		t.Fatalf("CreateUser did not fill ID and TimeCreated: %+v", admin)
	}
	wantErr(t, s.CreateUser(ctx, &store.User{Username: "admin"}), store.ErrConflict)
	bob := newUser(t, s, "bob")

	got, err := s.GetUser(ctx, admin.ID)
	must(t, err)
	if got.Username != "admin" || got.Role != store.RoleAdmin || got.Email != "a@example.com" || got.Disabled ||
		!got.TimeCreated.Equal(admin.TimeCreated) {
		t.Errorf("GetUser = %+v, want %+v", got, admin)
	}
	got, err = s.GetUserByName(ctx, "bob")
	must(t, err)
	if got.ID != bob.ID {
		t.Errorf("GetUserByName(bob).ID = %s, want %s", got.ID, bob.ID)
	}
	_, err = s.GetUserByName(ctx, "BOB")
	wantErr(t, err, store.ErrNotFound)
	_, err = s.GetUser(ctx, store.NewID())
	wantErr(t, err, store.ErrNotFound)

	n, err := s.CountUsers(ctx)
	must(t, err)
	list, err := s.ListUsers(ctx)
	must(t, err)
	if n != 2 || len(list) != 2 || list[0].ID != admin.ID || list[1].ID != bob.ID {
		t.Errorf("CountUsers = %d, ListUsers = %v", n, list)
	}

	yes, member, mail := true, store.RoleMember, "b@example.com"
	up, err := s.UpdateUser(ctx, admin.ID, store.UserUpdate{Disabled: &yes, Role: &member, Email: &mail})
	must(t, err)
	got, err = s.GetUser(ctx, admin.ID)
	must(t, err)
	if !up.Disabled || !got.Disabled || got.Role != store.RoleMember || got.Email != mail {
		t.Errorf("after UpdateUser: %+v", got)
	}
	_, err = s.UpdateUser(ctx, store.NewID(), store.UserUpdate{Disabled: &yes})
	wantErr(t, err, store.ErrNotFound)

	// A user who owns a dataset cannot be deleted.
	must(t, s.CreateDataset(ctx, &store.Dataset{OwnerID: bob.ID, Name: "d"}))
	wantErr(t, s.DeleteUser(ctx, bob.ID), store.ErrConflict)
	k := &store.APIKey{Hash: store.HashKey("vgl-admin-key-0000000000"), Scope: store.ScopeAdmin, OwnerID: admin.ID}
	must(t, s.CreateAPIKey(ctx, k))
	must(t, s.DeleteUser(ctx, admin.ID))
	_, err = s.GetUser(ctx, admin.ID)
	wantErr(t, err, store.ErrNotFound)
	_, err = s.GetAPIKey(ctx, k.ID)
	wantErr(t, err, store.ErrNotFound)
	wantErr(t, s.DeleteUser(ctx, admin.ID), store.ErrNotFound)
}

func testAPIKeys(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "alice")
	v := newUser(t, s, "victor")
	plain := "vgl-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	if h := store.HashKey(plain); len(h) != 64 || h != store.HashKey(plain) || h == store.HashKey(plain+"x") {
		t.Fatalf("HashKey = %q", h)
	}
	exp := time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)
	k := &store.APIKey{Hash: store.HashKey(plain), Prefix: plain[:8], Last4: plain[len(plain)-4:], Name: "ci",
		Scope: store.ScopeIngest, OwnerID: u.ID, ExpiresAt: &exp}
	must(t, s.CreateAPIKey(ctx, k))
	wantErr(t, s.CreateAPIKey(ctx, &store.APIKey{Hash: k.Hash, Scope: store.ScopeFull, OwnerID: v.ID}), store.ErrConflict)
	k2 := &store.APIKey{Hash: store.HashKey("another-key-of-twenty-chars"), Scope: store.ScopeFull, OwnerID: u.ID}
	must(t, s.CreateAPIKey(ctx, k2))
	must(t, s.CreateAPIKey(ctx, &store.APIKey{Hash: store.HashKey("victor-key-of-twenty-chars"), Scope: store.ScopeRead, OwnerID: v.ID}))

	got, err := s.GetAPIKeyByHash(ctx, store.HashKey(plain))
	must(t, err)
	if got.ID != k.ID || got.Scope != store.ScopeIngest || got.Prefix != "vgl-0123" || got.Last4 != "cdef" || got.Name != "ci" ||
		got.ExpiresAt == nil || !got.ExpiresAt.Equal(exp) || got.RevokedAt != nil || got.LastUsedAt != nil {
		t.Errorf("GetAPIKeyByHash = %+v", got)
	}
	_, err = s.GetAPIKeyByHash(ctx, store.HashKey("unknown"))
	wantErr(t, err, store.ErrNotFound)

	list, err := s.ListAPIKeys(ctx, u.ID)
	must(t, err)
	if len(list) != 2 || list[0].ID != k.ID || list[1].ID != k2.ID {
		t.Errorf("ListAPIKeys(alice) = %d keys", len(list))
	}
	all, err := s.ListAPIKeys(ctx, "")
	must(t, err)
	if len(all) != 3 {
		t.Errorf("ListAPIKeys(all) = %d keys, want 3", len(all))
	}

	// Touch writes at most once a minute.
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	must(t, s.TouchAPIKey(ctx, k.ID, t0))
	must(t, s.TouchAPIKey(ctx, k.ID, t0.Add(30*time.Second)))
	got, _ = s.GetAPIKey(ctx, k.ID)
	if got.LastUsedAt == nil || !got.LastUsedAt.Equal(t0) {
		t.Errorf("LastUsedAt = %v, want %v (second touch within a minute ignored)", got.LastUsedAt, t0)
	}
	must(t, s.TouchAPIKey(ctx, k.ID, t0.Add(2*time.Minute)))
	got, _ = s.GetAPIKey(ctx, k.ID)
	if got.LastUsedAt == nil || !got.LastUsedAt.Equal(t0.Add(2*time.Minute)) {
		t.Errorf("LastUsedAt = %v, want %v", got.LastUsedAt, t0.Add(2*time.Minute))
	}
	wantErr(t, s.TouchAPIKey(ctx, store.NewID(), t0), store.ErrNotFound)

	// Revoking keeps the row and the first revocation time, and kills the
	// browser sessions made from the key.
	must(t, s.CreateWebSession(ctx, &store.WebSession{TokenHash: store.HashKey("cookie"), KeyID: k.ID, UserID: u.ID, Scope: k.Scope}))
	r1 := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	must(t, s.RevokeAPIKey(ctx, k.ID, r1))
	must(t, s.RevokeAPIKey(ctx, k.ID, r1.Add(time.Hour)))
	got, err = s.GetAPIKeyByHash(ctx, k.Hash)
	must(t, err)
	if got.RevokedAt == nil || !got.RevokedAt.Equal(r1) {
		t.Errorf("RevokedAt = %v, want %v", got.RevokedAt, r1)
	}
	_, err = s.GetWebSession(ctx, store.HashKey("cookie"))
	wantErr(t, err, store.ErrNotFound)
	wantErr(t, s.RevokeAPIKey(ctx, store.NewID(), r1), store.ErrNotFound)
	// A revoked hash is never re-activated.
	wantErr(t, s.CreateAPIKey(ctx, &store.APIKey{Hash: k.Hash, Scope: store.ScopeAdmin, OwnerID: u.ID}), store.ErrConflict)
}

func testWebSessions(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	u := newUser(t, s, "carol")
	created := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	ws := &store.WebSession{TokenHash: store.HashKey("tok"), KeyID: "k1", UserID: u.ID, Scope: store.ScopeFull, CreatedAt: created}
	must(t, s.CreateWebSession(ctx, ws))
	wantErr(t, s.CreateWebSession(ctx, &store.WebSession{TokenHash: ws.TokenHash, KeyID: "k2", UserID: u.ID}), store.ErrConflict)
	got, err := s.GetWebSession(ctx, ws.TokenHash)
	must(t, err)
	if got.UserID != u.ID || got.KeyID != "k1" || got.Scope != store.ScopeFull || !got.CreatedAt.Equal(created) || !got.LastUsedAt.Equal(created) {
		t.Errorf("GetWebSession = %+v", got)
	}
	must(t, s.TouchWebSession(ctx, ws.TokenHash, created.Add(time.Hour)))
	got, _ = s.GetWebSession(ctx, ws.TokenHash)
	if !got.LastUsedAt.Equal(created.Add(time.Hour)) {
		t.Errorf("LastUsedAt = %v", got.LastUsedAt)
	}
	ws2 := &store.WebSession{TokenHash: store.HashKey("tok2"), KeyID: "k1", UserID: u.ID, Scope: store.ScopeRead, CreatedAt: created}
	must(t, s.CreateWebSession(ctx, ws2))
	list, err := s.ListWebSessions(ctx, u.ID)
	must(t, err)
	if len(list) != 2 || list[0].TokenHash != ws.TokenHash || list[1].Scope != store.ScopeRead {
		t.Errorf("ListWebSessions = %+v, want the touched session first", list)
	}
	if other, err := s.ListWebSessions(ctx, "nobody"); err != nil || len(other) != 0 {
		t.Errorf("ListWebSessions(nobody) = %v, %v", other, err)
	}
	must(t, s.DeleteWebSession(ctx, ws2.TokenHash))
	must(t, s.DeleteWebSession(ctx, ws.TokenHash))
	must(t, s.DeleteWebSession(ctx, ws.TokenHash))
	_, err = s.GetWebSession(ctx, ws.TokenHash)
	wantErr(t, err, store.ErrNotFound)
	wantErr(t, s.TouchWebSession(ctx, ws.TokenHash, created), store.ErrNotFound)
}
