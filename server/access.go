package server

import (
	"errors"
	"net/http"

	"github.com/vigilhq/vigil/store"
)

// Visibility (explorer-api §1.4): owners and admins read and write; any
// authenticated caller reads public datasets; anonymous callers read them
// when AnonymousReadPublic is set. What a caller cannot see is 404.

// canWrite reports whether p may change resources of ownerID.
func (s *Server) canWrite(p *principal, ownerID string) bool {
	return p != nil && (p.User.ID == ownerID || p.isAdmin())
}

// canReadDataset reports whether p may read d.
func (s *Server) canReadDataset(p *principal, d *store.Dataset) bool {
	if p != nil && (p.User.ID == d.OwnerID || p.isAdmin()) {
		return true
	}
	if !d.IsPublic {
		return false
	}
	return p != nil || s.cfg.AnonymousReadPublic
}

// canReadTrace reports whether p may read t (its dataset's rule; snippets
// only for their owner and admins).
func (s *Server) canReadTrace(r *http.Request, p *principal, t *store.Trace) (bool, error) {
	if p != nil && (p.User.ID == t.OwnerID || p.isAdmin()) {
		return true, nil
	}
	if t.DatasetID == "" {
		return false, nil
	}
	d, err := s.st.GetDataset(r.Context(), t.DatasetID)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return s.canReadDataset(p, d), nil
}

// datasetFromPath resolves {id} or {username}/{name} to a dataset the
// caller may read, or 404.
func (s *Server) datasetFromPath(r *http.Request, p *principal) (*store.Dataset, error) {
	var d *store.Dataset
	var err error
	if id := r.PathValue("id"); id != "" {
		d, err = s.st.GetDataset(r.Context(), id)
	} else {
		var u *store.User
		u, err = s.st.GetUserByName(r.Context(), r.PathValue("username"))
		if err == nil {
			d, err = s.st.GetDatasetByName(r.Context(), u.ID, r.PathValue("name"))
		}
	}
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("Dataset not found")
	}
	if err != nil {
		return nil, err
	}
	if !s.canReadDataset(p, d) {
		return nil, notFound("Dataset not found")
	}
	return d, nil
}

// datasetForWrite is datasetFromPath plus write access (404 otherwise).
func (s *Server) datasetForWrite(r *http.Request, p *principal) (*store.Dataset, error) {
	d, err := s.datasetFromPath(r, p)
	if err != nil {
		return nil, err
	}
	if !s.canWrite(p, d.OwnerID) {
		return nil, notFound("Dataset not found")
	}
	return d, nil
}

// storeError maps the store's sentinels to API errors (nil for others).
func storeError(err error) *Error {
	var taken *store.IndexTakenError
	switch {
	case errors.Is(err, store.ErrNotFound):
		return notFound("not found: %v", err)
	case errors.Is(err, store.ErrFinished):
		return apiErr(http.StatusConflict, CodeRunFinished, "%v", err)
	case errors.As(err, &taken):
		return apiErr(http.StatusConflict, CodeIndexConflict, "%v: leave the index out of the new traces (or use unused indices) to give them the next free ones", taken)
	case errors.Is(err, store.ErrConflict):
		return apiErr(http.StatusConflict, CodeVersionConflict, "%v", err)
	case errors.Is(err, store.ErrInvalidText):
		return badRequest("a name, id or text field holds a NUL character (\\u0000) or invalid UTF-8, which cannot be stored")
	}
	return nil
}
