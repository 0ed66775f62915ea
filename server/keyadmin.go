package server

import (
	"context"
	"fmt"

	"github.com/vigilhq/vigil/store"
)

// IssueAPIKey generates a key for owner with direct store access, the way
// POST /api/v1/keys/create does for an admin caller: scope must be read,
// ingest, full or admin, and an admin key needs an admin owner. It returns
// the plaintext (to be shown once) and the stored row. `vigil keys create`
// uses it to recover access when no working admin key is left.
func IssueAPIKey(ctx context.Context, st store.Store, owner *store.User, name, scope string) (string, *store.APIKey, error) {
	switch scope {
	case store.ScopeRead, store.ScopeIngest, store.ScopeFull, store.ScopeAdmin:
	default:
		return "", nil, fmt.Errorf("scope must be read, ingest, full or admin, got %q", scope)
	}
	if scope == store.ScopeAdmin && owner.Role != store.RoleAdmin {
		return "", nil, fmt.Errorf("user %s is a %s: admin keys can only belong to admin users", owner.Username, owner.Role)
	}
	plain, err := generateKey()
	if err != nil {
		return "", nil, err
	}
	k := newKeyRow(plain, name, scope, owner.ID)
	if err := st.CreateAPIKey(ctx, k); err != nil {
		return "", nil, fmt.Errorf("create API key for %s: %w", owner.Username, err)
	}
	return plain, k, nil
}
