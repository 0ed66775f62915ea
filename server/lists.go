package server

import (
	"bufio"
	"bytes"
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
	var bw *bufio.Writer
	var elem bytes.Buffer
	enc := json.NewEncoder(&elem)
	enc.SetEscapeHTML(false)
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
		if bw == nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			bw = bufio.NewWriterSize(w, 64<<10)
			bw.WriteByte('[')
		}
		for _, v := range rows {
			elem.Reset()
			if err := enc.Encode(v); err != nil {
				return err
			}
			if n > 0 {
				bw.WriteByte(',')
			}
			bw.Write(elem.Bytes()[:elem.Len()-1]) // without the encoder's newline
			n++
		}
		if len(page) < pf.Limit || (limit > 0 && n >= limit) {
			break
		}
		last := page[len(page)-1].Index
		f.AfterIndex, f.Offset = &last, 0
	}
	bw.WriteString("]\n")
	return bw.Flush()
}
