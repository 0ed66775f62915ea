package server

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// TestBadInput checks that each kind of bad request gets the right status,
// code and a message naming the problem.
func TestBadInput(t *testing.T) {
	ts := newTestServer(t, openSQLite(t), func(c *Config) { c.MaxJSONBytes = 4096 })
	// A trace to append to, and an ingest-only key.
	_, body := ts.do(t, "POST", "/api/v1/push/trace", adminKey, `{"messages": [[{"role": "user", "content": "x"}]], "dataset": "ok"}`)
	var pr struct{ ID []string }
	json.Unmarshal(body, &pr)
	tid := pr.ID[0]
	_, kb := ts.do(t, "POST", "/api/v1/keys/create", adminKey, `{"scope": "ingest", "name": "agent"}`)
	var k struct{ Key string }
	json.Unmarshal(kb, &k)
	_, rb := ts.do(t, "POST", "/api/v1/keys/create", adminKey, `{"scope": "read", "name": "reader"}`)
	var rk struct{ Key string }
	json.Unmarshal(rb, &rk)

	huge := `{"messages": [[{"role": "user", "content": "` + strings.Repeat("a", 5000) + `"}]]}`
	tests := []struct {
		name, method, path, key, body string
		status                        int
		code, detail                  string
	}{
		{"malformed json", "POST", "/api/v1/push/trace", adminKey, `{"messages": [[`, 400, "invalid_json", "invalid JSON"},
		{"json syntax position", "POST", "/api/v1/push/trace", adminKey, "{\n\"messages\": x}", 400, "invalid_json", "line 2"},
		{"empty body", "POST", "/api/v1/dataset/create", adminKey, ``, 400, "invalid_json", "empty"},
		{"body not object", "POST", "/api/v1/push/trace", adminKey, `[1]`, 400, "invalid_request", "must be"},
		{"messages missing", "POST", "/api/v1/push/trace", adminKey, `{"dataset": "x"}`, 400, "invalid_request", "messages must be a list of traces"},
		{"messages not list", "POST", "/api/v1/push/trace", adminKey, `{"messages": "hi"}`, 400, "invalid_request", "messages must be a list of traces"},
		{"messages empty", "POST", "/api/v1/push/trace", adminKey, `{"messages": []}`, 400, "invalid_request", "messages must not be empty"},
		{"trace not list", "POST", "/api/v1/push/trace", adminKey, `{"messages": [{"role": "user"}]}`, 400, "invalid_request", "trace 0 must be a list of objects"},
		{"event not object", "POST", "/api/v1/push/trace", adminKey, `{"messages": [[{"role":"user"}], [1]]}`, 400, "invalid_request", "trace 1 must be a list of objects"},
		{"annotations wrong type", "POST", "/api/v1/push/trace", adminKey, `{"messages": [[]], "annotations": 3}`, 400, "invalid_request", "annotations must be a list of annotations"},
		{"annotations length", "POST", "/api/v1/push/trace", adminKey, `{"messages": [[]], "annotations": [[], []]}`, 400, "invalid_request", "annotations must be the same length as messages"},
		{"metadata wrong type", "POST", "/api/v1/push/trace", adminKey, `{"messages": [[]], "metadata": {}}`, 400, "invalid_request", "metadata must be a list of metadata"},
		{"metadata length", "POST", "/api/v1/push/trace", adminKey, `{"messages": [[]], "metadata": [{}, {}]}`, 400, "invalid_request", "metadata must be the same length as messages"},
		{"dataset not string", "POST", "/api/v1/push/trace", adminKey, `{"messages": [[]], "dataset": 5}`, 400, "invalid_request", "dataset name must be a string"},
		{"dataset bad name", "POST", "/api/v1/push/trace", adminKey, `{"messages": [[]], "dataset": "a b"}`, 400, "invalid_dataset_name", "Dataset name can only contain A-Z, a-z, 0-9, - and _"},
		{"annotation without address", "POST", "/api/v1/push/trace", adminKey, `{"messages": [[{"role":"user"}]], "annotations": [[{"content": "x"}]]}`, 400, "invalid_request", "Failed to parse annotation"},
		{"annotation bad address", "POST", "/api/v1/push/trace", adminKey, `{"messages": [[{"role":"user"}]], "annotations": [[{"content": "x", "address": "foo.1"}]]}`, 400, "invalid_address", "messages"},
		{"huge body", "POST", "/api/v1/push/trace", adminKey, huge, 413, "too_large", "4096 bytes"},
		{"append not list", "POST", "/api/v1/trace/" + tid + "/messages", adminKey, `{"messages": {}}`, 400, "invalid_request", "Invalid messages format - expected a non-empty list of dictionaries"},
		{"append empty", "POST", "/api/v1/trace/" + tid + "/messages", adminKey, `{"messages": []}`, 400, "invalid_request", "Invalid messages format"},
		{"append bad annotations", "POST", "/api/v1/trace/" + tid + "/messages", adminKey, `{"messages": [{"role":"user"}], "annotations": [1]}`, 400, "invalid_request", "Invalid annotations format - expected a list of dictionaries or an empty list"},
		{"append bad timestamp", "POST", "/api/v1/trace/" + tid + "/messages", adminKey, `{"messages": [{"role":"user", "timestamp": "yesterday"}]}`, 400, "invalid_request", "Invalid timestamp format in message: yesterday. Expected format: ISO 8601"},
		{"append unknown trace", "POST", "/api/v1/trace/00000000-0000-7000-8000-000000000000/messages", adminKey, `{"messages": [{"role":"user"}]}`, 404, "not_found", "Trace not found"},
		{"create no name", "POST", "/api/v1/dataset/create", adminKey, `{}`, 400, "invalid_request", "name must be provided"},
		{"create name not string", "POST", "/api/v1/dataset/create", adminKey, `{"name": 1}`, 400, "invalid_request", "name must be a string"},
		{"create bad name", "POST", "/api/v1/dataset/create", adminKey, `{"name": "../x"}`, 400, "invalid_dataset_name", "Dataset name can only contain"},
		{"create metadata not dict", "POST", "/api/v1/dataset/create", adminKey, `{"name": "m", "metadata": [1]}`, 400, "invalid_request", "metadata must be a dictionary"},
		{"create is_public not bool", "POST", "/api/v1/dataset/create", adminKey, `{"name": "m", "is_public": "yes"}`, 400, "invalid_request", "is_public must be a boolean"},
		{"metadata put not dict", "PUT", "/api/v1/dataset/metadata/ok", adminKey, `{"metadata": 1}`, 400, "invalid_request", "metadata must be a dictionary"},
		{"metadata replace_all not bool", "PUT", "/api/v1/dataset/metadata/ok", adminKey, `{"metadata": {}, "replace_all": 1}`, 400, "invalid_request", "replace_all must be a boolean"},
		{"metadata bad accuracy", "PUT", "/api/v1/dataset/metadata/ok", adminKey, `{"metadata": {"accuracy": -1}}`, 400, "invalid_request", "accuracy"},
		{"metadata policies read-only", "PUT", "/api/v1/dataset/metadata/ok", adminKey, `{"metadata": {"policies": []}}`, 400, "invalid_request", "policies"},
		{"metadata unknown dataset", "GET", "/api/v1/dataset/metadata/nope", adminKey, ``, 404, "not_found", "Dataset not found"},
		{"unknown dataset id", "GET", "/api/v1/dataset/byid/nope", adminKey, ``, 404, "not_found", "Dataset not found"},
		{"unknown dataset name", "GET", "/api/v1/dataset/byuser/admin/nope", adminKey, ``, 404, "not_found", "Dataset not found"},
		{"unknown trace", "GET", "/api/v1/trace/nope", adminKey, ``, 404, "not_found", "Trace not found"},
		{"bad key", "GET", "/api/v1/dataset/list", "wrong-key-0000000000000", ``, 401, "unauthenticated", "Invalid API key"},
		{"bad key on anon endpoint", "GET", "/api/v1/user/info", "wrong-key-0000000000000", ``, 401, "unauthenticated", "Invalid API key"},
		{"no key on push", "POST", "/api/v1/push/trace", "", `{"messages": [[]]}`, 401, "unauthenticated", "Missing API key"},
		{"ingest key cannot read", "GET", "/api/v1/trace/" + tid, k.Key, ``, 403, "forbidden", "needs read"},
		{"read key cannot write metadata", "PUT", "/api/v1/dataset/metadata/ok", rk.Key, `{"metadata": {"benchmark": "x"}}`, 403, "forbidden", "needs ingest"},
		{"ingest key cannot create keys", "POST", "/api/v1/keys/create", k.Key, `{}`, 403, "forbidden", "needs full"},
		{"unknown api path", "GET", "/api/v1/nothing/here", adminKey, ``, 404, "not_found", "no such endpoint"},
		{"wrong method", "DELETE", "/api/v1/push/trace", adminKey, ``, 404, "not_found", "no such endpoint"},
		{"max_length not int", "GET", "/api/v1/trace/" + tid + "?max_length=x", adminKey, ``, 400, "invalid_request", "max_length"},
		{"stateless verify bad shape", "POST", "/api/v1/ledger/verify", adminKey, `{"receipts": [1]}`, 400, "invalid_request", "receipt 0"},
		{"stateless verify bad key", "POST", "/api/v1/ledger/verify", adminKey, `{"receipts": [], "publicKey": "zz"}`, 400, "invalid_request", "publicKey"},
		{"finish bad status", "POST", "/api/v1/runs/" + tid + "/finish", adminKey, `{"status": "maybe"}`, 400, "invalid_request", "status must be completed or failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body any
			if tt.body != "" {
				body = tt.body
			}
			status, resp := ts.do(t, tt.method, tt.path, tt.key, body)
			var e struct {
				Detail string `json:"detail"`
				Code   string `json:"code"`
			}
			if err := json.Unmarshal(resp, &e); err != nil {
				t.Fatalf("status %d, body not the JSON error shape: %s", status, resp)
			}
			if status != tt.status || e.Code != tt.code || !strings.Contains(e.Detail, tt.detail) {
				t.Errorf("got %d %s %q, want %d %s containing %q", status, e.Code, e.Detail, tt.status, tt.code, tt.detail)
			}
		})
	}
}

// TestGzipBodies checks Content-Encoding: gzip on push and its size limit,
// which applies to the decompressed bytes too.
func TestGzipBodies(t *testing.T) {
	ts := newTestServer(t, openSQLite(t), func(c *Config) { c.MaxJSONBytes = 4096; c.MaxUploadBytes = 8192 })
	send := func(payload string) (int, string) { return sendGzip(t, ts, "/api/v1/push/trace", payload) }
	if st, b := send(`{"messages": [[{"role": "user", "content": "zip"}]], "dataset": "z"}`); st != 200 {
		t.Fatalf("gzip push: %d %s", st, b)
	}
	// 100 KB of zeros compresses to a few hundred bytes but expands past the limit.
	if st, b := send(`{"messages": [[{"role": "user", "content": "` + strings.Repeat("0", 100000) + `"}]]}`); st != 413 || !strings.Contains(b, "too_large") {
		t.Fatalf("gzip bomb: %d %s", st, b)
	}
	// The limit is inclusive, as http.MaxBytesReader's: a body that
	// decompresses to exactly 4096 bytes is accepted, one more is a 413
	// that names the limit.
	atLimit := func(n int) string {
		p := `{"messages": [[{"role": "user", "content": "exact"}]], "dataset": "z"}`
		return p + strings.Repeat(" ", n-len(p))
	}
	if st, b := send(atLimit(4096)); st != 200 {
		t.Fatalf("gzip body of exactly the limit: %d %s", st, b)
	}
	if st, b := send(atLimit(4097)); st != 413 || !strings.Contains(b, "larger than 4096 bytes") {
		t.Fatalf("gzip body one byte over the limit: %d %s", st, b)
	}
	if st, b := send(`{"messages": [[{"role": "user", "content": "` + strings.Repeat("0", 100000) + `"}]]}`); !strings.Contains(b, "larger than 4096 bytes") {
		t.Fatalf("gzip bomb does not name the limit: %d %s", st, b)
	}
	// issue_gzip_upload_limit: a gzipped upload past the limit names the
	// limit, not the bytes left when it was crossed.
	line := `[{"role": "user", "content": "` + strings.Repeat("u", 100) + `"}]` + "\n"
	if st, b := sendGzip(t, ts, "/api/v1/dataset/upload?name=gz", strings.Repeat(line, 100)); st != 413 || !strings.Contains(b, "larger than 8192 bytes") {
		t.Fatalf("gzip upload over the limit: %d %s", st, b)
	}
	req, _ := http.NewRequest("POST", ts.URL+"/api/v1/push/trace", strings.NewReader("x"))
	req.Header.Set("Authorization", "Bearer "+adminKey)
	req.Header.Set("Content-Encoding", "br")
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 415 {
		t.Fatalf("br encoding: %d", resp.StatusCode)
	}
}

// TestPanicRecovered checks that a panicking handler gives a 500 in the
// error shape and the server keeps serving.
func TestPanicRecovered(t *testing.T) {
	ts := newTestServer(t, openSQLite(t))
	mux := http.NewServeMux()
	ts.srv.handle(mux, "GET /boom", accessNone, func(w http.ResponseWriter, r *http.Request, p *principal) error {
		var m map[string]int
		m["x"] = 1 // nil map write: panics
		return nil
	})
	h := ts.srv.recoverMiddleware(mux)
	rec := newRecorder()
	h.ServeHTTP(rec, httptestRequest("GET", "/boom"))
	if rec.code != 500 || !strings.Contains(rec.body.String(), `"code":"internal"`) {
		t.Fatalf("panic response: %d %s", rec.code, rec.body.String())
	}
	if st, _ := ts.do(t, "GET", "/healthz", "", nil); st != 200 {
		t.Fatalf("healthz after panic: %d", st)
	}
}

// sendGzip posts payload gzipped to path with the admin key and returns
// the status and body.
func sendGzip(t *testing.T, ts *testServer, path, payload string) (int, string) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write([]byte(payload))
	zw.Close()
	req, _ := http.NewRequest("POST", ts.URL+path, &buf)
	req.Header.Set("Authorization", "Bearer "+adminKey)
	req.Header.Set("Content-Encoding", "gzip")
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// TestLimitedReader checks the decompressed-body limit on its own, with
// small reads: exactly n bytes pass (as with http.MaxBytesReader), and the
// error past n carries the limit, not the bytes that were left.
func TestLimitedReader(t *testing.T) {
	for _, tt := range []struct {
		in    string
		limit int64
		err   bool
	}{
		{"abcd", 4, false},
		{"abcd", 5, false},
		{"abcd", 3, true},
		{"", 0, false},
		{"a", 0, true},
	} {
		lr := &limitedReader{r: iotest.OneByteReader(strings.NewReader(tt.in)), n: tt.limit, limit: tt.limit}
		got, err := io.ReadAll(lr)
		var mbe *http.MaxBytesError
		switch {
		case !tt.err && (err != nil || string(got) != tt.in):
			t.Errorf("%q limit %d: got %q, %v; want all of it", tt.in, tt.limit, got, err)
		case tt.err && (!errors.As(err, &mbe) || mbe.Limit != tt.limit || int64(len(got)) != tt.limit):
			t.Errorf("%q limit %d: got %q, %v; want %d bytes and a MaxBytesError with Limit %d", tt.in, tt.limit, got, err, tt.limit, tt.limit)
		}
	}
}

// TestNULInStoredText: a string holding U+0000 where the store keeps it
// as a column (trace name, annotation content and source, session id and
// name, key name, agent) is either stored or refused with a 400 naming
// the problem; PostgreSQL's TEXT cannot hold it, which was a 500.
func TestNULInStoredText(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		for _, tc := range []struct{ method, path, body string }{
			{"POST", "/api/v1/push/trace", `{"messages": [[{"role": "user", "content": "x"}]], "metadata": [{"name": "a\u0000b"}]}`},
			{"POST", "/api/v1/push/trace", `{"messages": [[{"role": "user", "content": "x"}]], "annotations": [[{"content": "a\u0000b", "address": "messages.0"}]]}`},
			{"POST", "/api/v1/push/trace", `{"messages": [[{"role": "user", "content": "x"}]], "annotations": [[{"content": "ab", "address": "messages.0", "extra_metadata": {"source": "s\u0000"}}]]}`},
			{"POST", "/v1/sessions", `{"id": "s\u0000", "name": "n"}`},
			{"POST", "/v1/sessions", `{"id": "nul-name", "name": "n\u0000"}`},
			{"POST", "/api/v1/keys/create", `{"name": "k\u0000"}`},
			{"POST", "/api/v1/ledger/agents", `{"agent": "a\u0000", "publicKey": "03a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8"}`},
		} {
			st, b := ts.do(t, tc.method, tc.path, adminKey, tc.body)
			if st >= 300 && (st != 400 || !strings.Contains(string(b), "NUL")) {
				t.Errorf("%s %s %s: %d %s, want success or a 400 naming the NUL", tc.method, tc.path, tc.body, st, b)
			}
		}
	})
}

// TestDeclaredLengthNotPreallocated: the JSON body buffer is not sized
// from Content-Length up front, or a few connections that declare the
// limit and send nothing hold limit-sized buffers each (a key holder's
// memory exhaustion: the body read has no deadline).
func TestDeclaredLengthNotPreallocated(t *testing.T) {
	const limit = 32 << 20
	ts := newTestServer(t, openSQLite(t), func(c *Config) { c.MaxJSONBytes = limit })
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	addr := strings.TrimPrefix(ts.URL, "http://")
	for range 4 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /api/v1/push/trace HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", adminKey, limit)
	}
	time.Sleep(300 * time.Millisecond) // the handlers are now blocked reading
	if grew := int64(heap()) - int64(before); grew > 16<<20 {
		t.Errorf("heap grew by %d MB for 4 stalled requests declaring %d MB each", grew>>20, limit>>20)
	}
}
