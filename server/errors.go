package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"unicode/utf8"

	"github.com/vigilhq/vigil/ingest"
	"github.com/vigilhq/vigil/trace"
)

// Error codes of the one JSON error shape (explorer-api §1.5). The ledger's
// codes keep their upper-case names (ledger.md §10).
const (
	CodeInvalidJSON        = "invalid_json"
	CodeInvalidRequest     = "invalid_request"
	CodeInvalidDatasetName = "invalid_dataset_name"
	CodeDatasetExists      = "dataset_exists"
	CodeInvalidAddress     = "invalid_address"
	CodeUnauthenticated    = "unauthenticated"
	CodeForbidden          = "forbidden"
	CodeNotFound           = "not_found"
	CodeVersionConflict    = "version_conflict"
	CodeIndexConflict      = "index_conflict" // a trace index already used in the dataset
	CodeReadOnly           = "read_only"
	CodeRunFinished        = "RUN_FINISHED"
	CodeSessionClosed      = "SESSION_CLOSED"
	CodeReceiptConflict    = "receipt_conflict"
	CodeTooLarge           = "too_large"
	CodeUnsupportedMedia   = "unsupported_media_type"
	CodeOverloaded         = "overloaded"
	CodeNotReady           = "not_ready"
	CodeInternal           = "internal"
	CodeNotSupported       = "not_supported"
)

// Error is an API error: an HTTP status plus the body
// {"detail": Detail, "code": Code, ...Extra}. Handlers return it; the
// handler wrapper writes it. Detail is always a string, because the
// Invariant clients read it.
type Error struct {
	Status int
	Code   string
	Detail string
	Extra  map[string]any // optional additional members, e.g. "line"
	Err    error          // optional cause, logged, never sent
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%d %s: %s: %v", e.Status, e.Code, e.Detail, e.Err)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Detail)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// checkUTF8 refuses a JSON body holding invalid UTF-8 with a 400 naming
// the JSON path of the string, its line and byte offset. encoding/json
// would replace it with U+FFFD, so what Vigil stored (and signed) would
// differ from what was sent. A valid body costs one utf8.Valid pass.
func checkUTF8(b []byte) error {
	if utf8.Valid(b) {
		return nil
	}
	_, err := trace.ParseValue(b)
	var se *trace.SyntaxError
	if errors.As(err, &se) && se.Path != "" {
		return utf8Error(se)
	}
	// Invalid UTF-8 outside a string, or the JSON is malformed before it:
	// the JSON decoder's error names that.
	return nil
}

// utf8Error is the 400 for invalid UTF-8 in a JSON string, naming its JSON
// path (se.Path, set by the trace scanner for that error only).
func utf8Error(se *trace.SyntaxError) *Error {
	return &Error{Status: http.StatusBadRequest, Code: CodeInvalidJSON,
		Detail: fmt.Sprintf("invalid UTF-8 at line %d, column %d (byte %d) in the string at %s", se.Line, se.Col, se.Offset, se.Path),
		Extra:  map[string]any{"line": se.Line, "position": se.Offset, "path": se.Path}}
}

// apiErr builds an *Error with a formatted detail.
func apiErr(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Detail: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) *Error {
	return apiErr(http.StatusBadRequest, CodeInvalidRequest, format, args...)
}

func notFound(format string, args ...any) *Error {
	return apiErr(http.StatusNotFound, CodeNotFound, format, args...)
}

// toAPIError maps any error a handler returns to the error it sends.
// Known causes (body limits, store sentinels) get their status; anything
// else is a 500 "internal" whose cause is logged but not sent.
func toAPIError(err error) *Error {
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	var ie *ingest.Error
	if errors.As(err, &ie) {
		return ingestError(ie)
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge,
			Detail: fmt.Sprintf("request body larger than %d bytes", mbe.Limit)}
	}
	if e := storeError(err); e != nil {
		return e
	}
	return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Detail: "internal server error", Err: err}
}

// writeError writes err in the one error shape and logs 5xx causes.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	ae := toAPIError(err)
	if ae.Status >= 500 && log != nil {
		log.Error("request failed", "method", r.Method, "path", r.URL.Path, "status", ae.Status, "err", err)
	}
	body := make(map[string]any, 2+len(ae.Extra))
	for k, v := range ae.Extra {
		body[k] = v
	}
	body["detail"] = ae.Detail
	body["code"] = ae.Code
	if ae.Status == http.StatusTooManyRequests || ae.Status == http.StatusServiceUnavailable {
		if w.Header().Get("Retry-After") == "" {
			w.Header().Set("Retry-After", "1")
		}
	}
	writeJSON(w, ae.Status, body)
}

// writeJSON writes v as JSON with status, without HTML escaping.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
