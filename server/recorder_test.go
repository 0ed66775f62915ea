package server

import (
	"bytes"
	"net/http"
	"net/http/httptest"
)

type recorder struct {
	h    http.Header
	code int
	body bytes.Buffer
}

func newRecorder() *recorder                    { return &recorder{h: http.Header{}} }
func (r *recorder) Header() http.Header         { return r.h }
func (r *recorder) WriteHeader(c int)           { r.code = c }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func httptestRequest(m, p string) *http.Request { return httptest.NewRequest(m, p, nil) }
