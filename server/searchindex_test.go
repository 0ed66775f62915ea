package server

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/vigilhq/vigil/store"
)

// indexedTraces reads vigil_search_indexed_traces_total from srv's metrics
// (0 before the indexer's first round).
func indexedTraces(t *testing.T, srv *Server) int {
	t.Helper()
	var buf bytes.Buffer
	if err := srv.Metrics().Write(&buf); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^vigil_search_indexed_traces_total (\d+)$`).FindSubmatch(buf.Bytes())
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// TestSearchIndexer checks that the server's background indexer drains
// what pushes list for indexing, with no search asking, and that Close
// stops it.
func TestSearchIndexer(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			ctx := context.Background()
			ts := newTestServer(t, be.open(t))
			admin, err := ts.st.GetUserByName(ctx, "admin")
			if err != nil {
				t.Fatal(err)
			}
			pushN := func(n int) {
				t.Helper()
				req := store.PushRequest{OwnerID: admin.ID, DatasetName: "d", CreateIfMissing: true}
				for i := range n {
					req.Traces = append(req.Traces, store.NewTrace{Name: fmt.Sprintf("t%d", i),
						Messages: []store.Message{{ID: fmt.Sprintf("m%d", i), NodeIDs: []string{}, Data: []byte(`{"role":"user","content":"Pangolin"}`)}}})
				}
				if _, err := ts.st.PushTraces(ctx, req); err != nil {
					t.Fatal(err)
				}
			}
			pushN(3)
			for deadline := time.Now().Add(20 * time.Second); indexedTraces(t, ts.srv) < 3; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the indexer took %d of 3 traces in 20 s", indexedTraces(t, ts.srv))
				}
			}
			if n, err := ts.st.IndexPending(ctx, 0); err != nil || n != 0 {
				t.Errorf("IndexPending after the indexer ran = %d, %v; want 0", n, err)
			}
			ts.srv.Close()
			pushN(2)
			time.Sleep(3 * searchIndexIdle)
			if n, err := ts.st.IndexPending(ctx, 0); err != nil || n != 2 {
				t.Errorf("IndexPending after Close and a push of 2 = %d, %v; want 2 (the stopped indexer took none)", n, err)
			}
		})
	}
}
