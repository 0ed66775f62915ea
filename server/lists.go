package server

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"net/http"

	"github.com/vigilhq/vigil/store"
)

// listPageSize is how many traces the unpaginated Invariant list endpoints
// (…/indices, …/traces) read per query; a variable so tests can make pages
// small.
var listPageSize = 1000

// streamTraceList writes the JSON array of row(t) for every trace matching
// f (in index order, honouring f.Limit and f.Offset), reading listPageSize
// traces a query on the index keyset and writing each page as it comes,
// so memory stays bounded whatever the dataset size (issue 17: a 200,000
// trace dataset built a 40 MB response in memory). The bytes are those of
// writeJSON on the whole list. An error before the first page is an
// ordinary error response; after it, handle aborts the connection so the
// client sees a truncated body, never a short valid list.
func (s *Server) streamTraceList(w http.ResponseWriter, r *http.Request, f store.TraceFilter, row func(page []*store.Trace) ([]any, error)) error {
	f.Order = store.OrderIndex
	limit := f.Limit
	var jw *jsonWriter
	n := 0
	for {
		pf := f
		pf.Limit = listPageSize
		if limit > 0 {
			pf.Limit = min(listPageSize, limit-n)
		}
		page, err := s.st.ListTraces(r.Context(), pf)
		if err != nil {
			return err
		}
		rows, err := row(page)
		if err != nil {
			return err
		}
		if jw == nil {
			jw = newJSONWriter(w)
			jw.raw("[")
		}
		for _, v := range rows {
			if n > 0 {
				jw.raw(",")
			}
			jw.value(v)
			n++
		}
		if len(page) < pf.Limit || (limit > 0 && n >= limit) {
			break
		}
		last := page[len(page)-1].Index
		f.AfterIndex, f.Offset = &last, 0
	}
	jw.raw("]\n")
	return jw.flush()
}

// jsonWriter writes a 200 JSON response piece by piece through a buffer:
// value writes one value as writeJSON would (no HTML escaping) without the
// encoder's newline; raw writes punctuation. The first error sticks and
// flush returns it.
type jsonWriter struct {
	bw   *bufio.Writer
	elem bytes.Buffer
	enc  *json.Encoder
	err  error
}

func newJSONWriter(w http.ResponseWriter) *jsonWriter {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	jw := &jsonWriter{bw: bufio.NewWriterSize(w, 64<<10)}
	jw.enc = json.NewEncoder(&jw.elem)
	jw.enc.SetEscapeHTML(false)
	return jw
}

func (jw *jsonWriter) value(v any) {
	jw.elem.Reset()
	if err := jw.enc.Encode(v); err != nil {
		jw.err = cmp.Or(jw.err, err)
		return
	}
	jw.bw.Write(jw.elem.Bytes()[:jw.elem.Len()-1])
}

func (jw *jsonWriter) raw(s string) { jw.bw.WriteString(s) }

func (jw *jsonWriter) flush() error { return cmp.Or(jw.err, jw.bw.Flush()) }
