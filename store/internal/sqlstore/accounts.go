package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/vigilhq/vigil/store"
)

const userCols = `id, username, role, email, disabled, time_created`

func scanUser(r interface{ Scan(...any) error }) (*store.User, error) {
	u := &store.User{}
	var tc int64
	if err := r.Scan(&u.ID, &u.Username, &u.Role, &u.Email, &u.Disabled, &tc); err != nil {
		return nil, err
	}
	u.TimeCreated = fromMicros(tc)
	return u, nil
}

// CreateUser implements store.Users.
func (s *Store) CreateUser(ctx context.Context, u *store.User) error {
	if u.ID == "" {
		u.ID = store.NewID()
	}
	u.TimeCreated = orNow(u.TimeCreated)
	if u.Role == "" {
		u.Role = store.RoleMember
	}
	_, err := s.b.Writer().Exec(ctx, `INSERT INTO users (`+userCols+`) VALUES ($1, $2, $3, $4, $5, $6)`,
		u.ID, u.Username, u.Role, u.Email, u.Disabled, micros(u.TimeCreated))
	if err != nil {
		return s.conflict(err, fmt.Sprintf("create user %q", u.Username))
	}
	return nil
}

// GetUser implements store.Users.
func (s *Store) GetUser(ctx context.Context, id string) (*store.User, error) {
	u, err := scanUser(s.b.Reader().QueryRow(ctx, `SELECT `+userCols+` FROM users WHERE id = $1`, id))
	if err != nil {
		return nil, notFound(err, "user "+id)
	}
	return u, nil
}

// GetUserByName implements store.Users.
func (s *Store) GetUserByName(ctx context.Context, username string) (*store.User, error) {
	u, err := scanUser(s.b.Reader().QueryRow(ctx, `SELECT `+userCols+` FROM users WHERE username = $1`, username))
	if err != nil {
		return nil, notFound(err, fmt.Sprintf("user %q", username))
	}
	return u, nil
}

// ListUsers implements store.Users.
func (s *Store) ListUsers(ctx context.Context) ([]*store.User, error) {
	rows, err := s.b.Reader().Query(ctx, `SELECT `+userCols+` FROM users ORDER BY time_created, id`)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	defer rows.Close()
	var out []*store.User
	for rows.Next() {
		u, err := scanUser(rows)
		if err != nil {
			return nil, fmt.Errorf("list users: %w", err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	return out, nil
}

// CountUsers implements store.Users.
func (s *Store) CountUsers(ctx context.Context) (int, error) {
	var n int
	if err := s.b.Reader().QueryRow(ctx, `SELECT COUNT(*) FROM users`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count users: %w", err)
	}
	return n, nil
}

// UpdateUser implements store.Users.
func (s *Store) UpdateUser(ctx context.Context, id string, up store.UserUpdate) (*store.User, error) {
	var u *store.User
	err := s.inTx(ctx, func(tx Tx) error {
		var err error
		u, err = scanUser(tx.QueryRow(ctx, `SELECT `+userCols+` FROM users WHERE id = $1`+s.b.ForUpdate(), id))
		if err != nil {
			return notFound(err, "user "+id)
		}
		if up.Role != nil {
			u.Role = *up.Role
		}
		if up.Email != nil {
			u.Email = *up.Email
		}
		if up.Disabled != nil {
			u.Disabled = *up.Disabled
		}
		if _, err := tx.Exec(ctx, `UPDATE users SET role = $2, email = $3, disabled = $4 WHERE id = $1`,
			id, u.Role, u.Email, u.Disabled); err != nil {
			return fmt.Errorf("update user %s: %w", id, err)
		}
		return nil
	})
	return u, err
}

// DeleteUser implements store.Users.
func (s *Store) DeleteUser(ctx context.Context, id string) error {
	return s.inTx(ctx, func(tx Tx) error {
		var one int
		if err := tx.QueryRow(ctx, `SELECT 1 FROM users WHERE id = $1`+s.b.ForUpdate(), id).Scan(&one); err != nil {
			return notFound(err, "user "+id)
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM datasets WHERE owner_id = $1`, id).Scan(&n); err != nil {
			return fmt.Errorf("delete user %s: %w", id, err)
		}
		if n > 0 {
			return fmt.Errorf("delete user %s: owns %d datasets: %w", id, n, store.ErrConflict)
		}
		for _, q := range []string{
			`DELETE FROM web_sessions WHERE user_id = $1`,
			`DELETE FROM api_keys WHERE owner_id = $1`,
			`DELETE FROM users WHERE id = $1`,
		} {
			if _, err := tx.Exec(ctx, q, id); err != nil {
				return fmt.Errorf("delete user %s: %w", id, err)
			}
		}
		return nil
	})
}

const keyCols = `id, key_hash, prefix, last4, name, scope, owner_id, time_created, expires_at, revoked_at, last_used_at`

func scanKey(r interface{ Scan(...any) error }) (*store.APIKey, error) {
	k := &store.APIKey{}
	var tc int64
	var exp, rev, used *int64
	if err := r.Scan(&k.ID, &k.Hash, &k.Prefix, &k.Last4, &k.Name, &k.Scope, &k.OwnerID, &tc, &exp, &rev, &used); err != nil {
		return nil, err
	}
	k.TimeCreated = fromMicros(tc)
	k.ExpiresAt, k.RevokedAt, k.LastUsedAt = fromMicrosPtr(exp), fromMicrosPtr(rev), fromMicrosPtr(used)
	return k, nil
}

// CreateAPIKey implements store.APIKeys.
func (s *Store) CreateAPIKey(ctx context.Context, k *store.APIKey) error {
	if k.ID == "" {
		k.ID = store.NewID()
	}
	k.TimeCreated = orNow(k.TimeCreated)
	_, err := s.b.Writer().Exec(ctx, `INSERT INTO api_keys (`+keyCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		k.ID, k.Hash, k.Prefix, k.Last4, k.Name, k.Scope, k.OwnerID, micros(k.TimeCreated),
		microsPtr(k.ExpiresAt), microsPtr(k.RevokedAt), microsPtr(k.LastUsedAt))
	if err != nil {
		return s.conflict(err, "create API key "+k.ID)
	}
	return nil
}

// GetAPIKeyByHash implements store.APIKeys.
func (s *Store) GetAPIKeyByHash(ctx context.Context, hash string) (*store.APIKey, error) {
	k, err := scanKey(s.b.Reader().QueryRow(ctx, `SELECT `+keyCols+` FROM api_keys WHERE key_hash = $1`, hash))
	if err != nil {
		return nil, notFound(err, "API key by hash")
	}
	return k, nil
}

// GetAPIKey implements store.APIKeys.
func (s *Store) GetAPIKey(ctx context.Context, id string) (*store.APIKey, error) {
	k, err := scanKey(s.b.Reader().QueryRow(ctx, `SELECT `+keyCols+` FROM api_keys WHERE id = $1`, id))
	if err != nil {
		return nil, notFound(err, "API key "+id)
	}
	return k, nil
}

// ListAPIKeys implements store.APIKeys.
func (s *Store) ListAPIKeys(ctx context.Context, ownerID string) ([]*store.APIKey, error) {
	q := `SELECT ` + keyCols + ` FROM api_keys`
	var args []any
	if ownerID != "" {
		q += ` WHERE owner_id = $1`
		args = append(args, ownerID)
	}
	rows, err := s.b.Reader().Query(ctx, q+` ORDER BY time_created, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("list API keys: %w", err)
	}
	defer rows.Close()
	var out []*store.APIKey
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, fmt.Errorf("list API keys: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list API keys: %w", err)
	}
	return out, nil
}

// RevokeAPIKey implements store.APIKeys.
func (s *Store) RevokeAPIKey(ctx context.Context, id string, at time.Time) error {
	return s.inTx(ctx, func(tx Tx) error {
		n, err := tx.Exec(ctx, `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1`, id, micros(orNow(at)))
		if err != nil {
			return fmt.Errorf("revoke API key %s: %w", id, err)
		}
		if n == 0 {
			return fmt.Errorf("revoke API key %s: %w", id, store.ErrNotFound)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM web_sessions WHERE key_id = $1`, id); err != nil {
			return fmt.Errorf("revoke API key %s: %w", id, err)
		}
		return nil
	})
}

// TouchAPIKey implements store.APIKeys.
func (s *Store) TouchAPIKey(ctx context.Context, id string, at time.Time) error {
	t := micros(orNow(at))
	n, err := s.b.Writer().Exec(ctx, `UPDATE api_keys SET last_used_at = $2
		WHERE id = $1 AND (last_used_at IS NULL OR last_used_at <= $3)`, id, t, t-int64(time.Minute/time.Microsecond))
	if err != nil {
		return fmt.Errorf("touch API key %s: %w", id, err)
	}
	if n == 0 {
		if _, err := s.GetAPIKey(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// CreateWebSession implements store.WebSessions.
func (s *Store) CreateWebSession(ctx context.Context, ws *store.WebSession) error {
	ws.CreatedAt = orNow(ws.CreatedAt)
	if ws.LastUsedAt.IsZero() {
		ws.LastUsedAt = ws.CreatedAt
	}
	_, err := s.b.Writer().Exec(ctx, `INSERT INTO web_sessions (token_hash, key_id, user_id, scope, created_at, last_used_at)
		VALUES ($1, $2, $3, $4, $5, $6)`, ws.TokenHash, ws.KeyID, ws.UserID, ws.Scope, micros(ws.CreatedAt), micros(ws.LastUsedAt))
	if err != nil {
		return s.conflict(err, "create web session")
	}
	return nil
}

// GetWebSession implements store.WebSessions.
func (s *Store) GetWebSession(ctx context.Context, tokenHash string) (*store.WebSession, error) {
	ws := &store.WebSession{}
	var c, u int64
	err := s.b.Reader().QueryRow(ctx, `SELECT token_hash, key_id, user_id, scope, created_at, last_used_at
		FROM web_sessions WHERE token_hash = $1`, tokenHash).Scan(&ws.TokenHash, &ws.KeyID, &ws.UserID, &ws.Scope, &c, &u)
	if err != nil {
		return nil, notFound(err, "web session")
	}
	ws.CreatedAt, ws.LastUsedAt = fromMicros(c), fromMicros(u)
	return ws, nil
}

// TouchWebSession implements store.WebSessions.
func (s *Store) TouchWebSession(ctx context.Context, tokenHash string, at time.Time) error {
	n, err := s.b.Writer().Exec(ctx, `UPDATE web_sessions SET last_used_at = $2 WHERE token_hash = $1`, tokenHash, micros(orNow(at)))
	if err != nil {
		return fmt.Errorf("touch web session: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("touch web session: %w", store.ErrNotFound)
	}
	return nil
}

// DeleteWebSession implements store.WebSessions.
func (s *Store) DeleteWebSession(ctx context.Context, tokenHash string) error {
	if _, err := s.b.Writer().Exec(ctx, `DELETE FROM web_sessions WHERE token_hash = $1`, tokenHash); err != nil {
		return fmt.Errorf("delete web session: %w", err)
	}
	return nil
}

// ListWebSessions implements store.WebSessions.
func (s *Store) ListWebSessions(ctx context.Context, userID string) ([]*store.WebSession, error) {
	rows, err := s.b.Reader().Query(ctx, `SELECT token_hash, key_id, user_id, scope, created_at, last_used_at
		FROM web_sessions WHERE user_id = $1 ORDER BY last_used_at DESC, token_hash`, userID)
	if err != nil {
		return nil, fmt.Errorf("list web sessions of user %s: %w", userID, err)
	}
	defer rows.Close()
	var out []*store.WebSession
	for rows.Next() {
		ws := &store.WebSession{}
		var c, u int64
		if err := rows.Scan(&ws.TokenHash, &ws.KeyID, &ws.UserID, &ws.Scope, &c, &u); err != nil {
			return nil, fmt.Errorf("list web sessions of user %s: %w", userID, err)
		}
		ws.CreatedAt, ws.LastUsedAt = fromMicros(c), fromMicros(u)
		out = append(out, ws)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list web sessions of user %s: %w", userID, err)
	}
	return out, nil
}
