package ask

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/vigilhq/vigil/server"
)

// maxBodyBytes bounds the body of POST /api/v1/ask: a question of
// MaxQuestionBytes, escaped, plus the other fields.
const maxBodyBytes = 8*MaxQuestionBytes + 4096

// Handler serves POST /api/v1/ask for srv with a (mount it with
// srv.Mount("POST /api/v1/ask", Handler(srv, a))). It authenticates the
// caller as the API does (an anonymous caller sees public datasets only
// when the server allows it) and answers with the AskAnswer as JSON;
// errors are the API's JSON error shape.
func Handler(srv *server.Server, a server.Asker) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := serveAsk(w, r, srv, a); err != nil {
			srv.WriteError(w, r, err)
		}
	})
}

func serveAsk(w http.ResponseWriter, r *http.Request, srv *server.Server, a server.Asker) error {
	c, err := srv.Authenticate(r)
	if err != nil {
		return &server.Error{Status: http.StatusUnauthorized, Code: server.CodeUnauthenticated, Detail: "Invalid API key", Err: err}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return &server.Error{Status: http.StatusRequestEntityTooLarge, Code: server.CodeTooLarge,
			Detail: fmt.Sprintf("request body is larger than %d bytes; a question may have at most %d bytes", maxBodyBytes, MaxQuestionBytes)}
	}
	if err != nil {
		return fmt.Errorf("ask: read body: %w", err)
	}
	var req server.AskRequest
	dec := json.NewDecoder(bytesReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return &server.Error{Status: http.StatusBadRequest, Code: server.CodeInvalidJSON,
			Detail: "invalid JSON body: " + err.Error() + " (want {question, dataset?, trace_id?, since?, model?})"}
	}
	ans, err := a.Ask(r.Context(), c, req)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(ans)
}
