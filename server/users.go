package server

import (
	"errors"
	"net/http"

	"github.com/vigilhq/vigil/internal/lazyregexp"
	"github.com/vigilhq/vigil/store"
)

// User administration (explorer-api §12.2, admin keys only).

var usernameRx = lazyregexp.New(`^[a-zA-Z0-9_.-]{1,64}$`)

type userJSON struct {
	ID          string  `json:"id"`
	Username    string  `json:"username"`
	Role        string  `json:"role"`
	Email       *string `json:"email"`
	Disabled    bool    `json:"disabled"`
	TimeCreated string  `json:"time_created"`
}

func userOut(u *store.User) userJSON {
	return userJSON{ID: u.ID, Username: u.Username, Role: u.Role, Email: optString(u.Email), Disabled: u.Disabled, TimeCreated: formatTime(u.TimeCreated)}
}

func (s *Server) handleUserList(w http.ResponseWriter, r *http.Request, p *principal) error {
	users, err := s.st.ListUsers(r.Context())
	if err != nil {
		return err
	}
	out := make([]userJSON, len(users))
	for i, u := range users {
		out[i] = userOut(u)
	}
	writeJSON(w, http.StatusOK, map[string]any{"users": out})
	return nil
}

func checkRole(role string) error {
	if role != store.RoleAdmin && role != store.RoleMember {
		return badRequest("role must be admin or member, got %q", role)
	}
	return nil
}

func (s *Server) handleUserCreate(w http.ResponseWriter, r *http.Request, p *principal) error {
	var in struct {
		Username string `json:"username"`
		Role     string `json:"role"`
		Email    string `json:"email"`
	}
	if err := s.decodeJSON(w, r, &in, false); err != nil {
		return err
	}
	if !usernameRx.MatchString(in.Username) {
		return badRequest("username must match %s", usernameRx)
	}
	if in.Role == "" {
		in.Role = store.RoleMember
	}
	if err := checkRole(in.Role); err != nil {
		return err
	}
	u := &store.User{Username: in.Username, Role: in.Role, Email: in.Email}
	if err := s.st.CreateUser(r.Context(), u); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return badRequest("username %q is taken", in.Username)
		}
		return err
	}
	writeJSON(w, http.StatusOK, userOut(u))
	return nil
}

func (s *Server) handleUserUpdate(w http.ResponseWriter, r *http.Request, p *principal) error {
	var in struct {
		Role     *string `json:"role"`
		Email    *string `json:"email"`
		Disabled *bool   `json:"disabled"`
	}
	if err := s.decodeJSON(w, r, &in, false); err != nil {
		return err
	}
	if in.Role != nil {
		if err := checkRole(*in.Role); err != nil {
			return err
		}
	}
	u, err := s.st.UpdateUser(r.Context(), r.PathValue("id"), store.UserUpdate{Role: in.Role, Email: in.Email, Disabled: in.Disabled})
	if errors.Is(err, store.ErrNotFound) {
		return notFound("User not found")
	}
	if err != nil {
		return err
	}
	s.forgetUser(u.ID) // a disabled user's keys fail at once
	writeJSON(w, http.StatusOK, userOut(u))
	return nil
}

func (s *Server) handleUserDelete(w http.ResponseWriter, r *http.Request, p *principal) error {
	id := r.PathValue("id")
	if id == p.User.ID {
		return badRequest("an admin cannot delete their own user")
	}
	err := s.st.DeleteUser(r.Context(), id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return notFound("User not found")
	case errors.Is(err, store.ErrConflict):
		return apiErr(http.StatusConflict, CodeVersionConflict, "user %s still owns datasets", id)
	case err != nil:
		return err
	}
	s.forgetUser(id)
	writeJSON(w, http.StatusOK, map[string]bool{"success": true})
	return nil
}

// forgetUser evicts every cached key of a user.
func (s *Server) forgetUser(userID string) {
	s.authCache.Range(func(k, v any) bool {
		if v.(*cachedPrincipal).p.User.ID == userID {
			s.authCache.Delete(k)
		}
		return true
	})
}
