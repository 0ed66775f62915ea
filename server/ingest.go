package server

import (
	"net/http"
	"strings"
	"time"

	"github.com/vigilhq/vigil/ingest"
	"github.com/vigilhq/vigil/store"
)

// The ingest pipeline every write path shares (push, append, upload,
// snippets, SDK runs) is package ingest: normalisation (explorer-api §2.1
// rules: message ids, timestamps, images), tool-registry updates, and the
// seal callback that turns stored events into signed receipts in the same
// transaction (spec/ledger.md §7.3, §7.4). This file holds the server's
// side of it: the response's warning type and the mapping of ingest
// errors to API errors.

// maxWarnings caps the warnings of one response (explorer-api §2.1).
const maxWarnings = ingest.MaxWarnings

// Warning is a non-fatal ingest note: trace and message indices (-1 when
// not tied to one) and a message.
type Warning = ingest.Warning

type warnings = ingest.Warnings

func formatTime(t time.Time) string { return ingest.FormatTime(t) }

// parseInputTime accepts RFC 3339 and ISO 8601 with or without an offset
// (ingest.ParseTime).
func parseInputTime(s string) (time.Time, bool) { return ingest.ParseTime(s) }

// ingestError is the API error of bad ingest input: a 400 with the
// error's code, and its JSON path as "path" when it names one.
func ingestError(e *ingest.Error) *Error {
	ae := &Error{Status: http.StatusBadRequest, Code: e.Code, Detail: e.Detail}
	if e.Path != "" {
		ae.Extra = map[string]any{"path": e.Path}
	}
	return ae
}

// closeFunc returns the store callback that closes a session with a
// server-signed close statement (spec/ledger.md §6.3).
func (s *Server) closeFunc() store.CloseFunc { return s.ing.Close() }

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// validDatasetName reports whether name is a valid dataset name
// (explorer-api §2.5).
func validDatasetName(name string) bool {
	if name == "" || len(name) > 100 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func errDatasetName() *Error {
	return apiErr(http.StatusBadRequest, CodeInvalidDatasetName, "Dataset name can only contain A-Z, a-z, 0-9, - and _")
}

// isBlank reports whether a raw JSON member is absent or null.
func isBlank(b []byte) bool {
	s := strings.TrimSpace(string(b))
	return s == "" || s == "null"
}
