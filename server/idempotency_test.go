package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/store"
)

// idemRequest is one keyed request.
type idemRequest struct {
	method, path, ctype string
	body                []byte
}

// sendKeyed sends rq with Idempotency-Key key (none when "") as apiKey.
func (ts *testServer) sendKeyed(t *testing.T, rq idemRequest, key, apiKey string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(rq.method, ts.URL+rq.path, bytes.NewReader(rq.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	if rq.ctype != "" {
		req.Header.Set("Content-Type", rq.ctype)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func jsonRequest(path string, v any) idemRequest {
	b, _ := json.Marshal(v)
	return idemRequest{method: "POST", path: path, ctype: "application/json", body: b}
}

func multipartUpload(name, file string) idemRequest {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	mw.WriteField("name", name)
	fw, _ := mw.CreateFormFile("file", "data.jsonl")
	fw.Write([]byte(file))
	mw.Close()
	return idemRequest{method: "POST", path: "/api/v1/dataset/upload", ctype: mw.FormDataContentType(), body: buf.Bytes()}
}

// TestIdempotencyKeys runs every endpoint of explorer-api §1.6 the server
// has through the same sequence: a keyed request; the same again (replayed:
// same status and body, no new side effect); the same key with another
// body (409 idempotency_mismatch); the other body with a fresh key (runs).
func TestIdempotencyKeys(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		ctx := context.Background()
		admin, err := ts.st.GetUserByName(ctx, "admin")
		if err != nil {
			t.Fatal(err)
		}
		// A trace to append to and annotate.
		st, b := ts.sendKeyed(t, jsonRequest("/api/v1/push/trace", map[string]any{
			"messages": [][]map[string]any{{{"role": "user", "content": "base"}}}, "dataset": "base"}), "", adminKey)
		if st.StatusCode != 200 {
			t.Fatalf("setup push: %d %s", st.StatusCode, b)
		}
		var pushed struct{ ID []string }
		json.Unmarshal(b, &pushed)
		traceID := pushed.ID[0]

		traces := func(name string) func(t *testing.T) int {
			return func(t *testing.T) int {
				d, err := ts.st.GetDatasetByName(ctx, admin.ID, name)
				if errors.Is(err, store.ErrNotFound) {
					return 0
				}
				if err != nil {
					t.Fatal(err)
				}
				return d.NumTraces
			}
		}
		datasets := func(t *testing.T) int {
			ds, err := ts.st.ListDatasets(ctx, store.DatasetFilter{OwnerID: admin.ID})
			if err != nil {
				t.Fatal(err)
			}
			return len(ds)
		}
		bigLine := `{"messages": [{"role": "user", "content": "` + strings.Repeat("x", 2<<20) + `"}]}` + "\n"
		for _, tc := range []struct {
			name        string
			req, other  idemRequest
			sideEffects func(t *testing.T) int
		}{
			{"push",
				jsonRequest("/api/v1/push/trace", map[string]any{"messages": [][]map[string]any{{{"role": "user", "content": "a"}}}, "dataset": "p"}),
				jsonRequest("/api/v1/push/trace", map[string]any{"messages": [][]map[string]any{{{"role": "user", "content": "b"}}}, "dataset": "p"}),
				traces("p")},
			{"append",
				jsonRequest("/api/v1/trace/"+traceID+"/messages", map[string]any{"messages": []map[string]any{{"role": "user", "content": "more"}}}),
				jsonRequest("/api/v1/trace/"+traceID+"/messages", map[string]any{"messages": []map[string]any{{"role": "user", "content": "other"}}}),
				func(t *testing.T) int {
					ids, err := ts.st.MessageIDs(ctx, traceID)
					if err != nil {
						t.Fatal(err)
					}
					return len(ids)
				}},
			{"annotate",
				jsonRequest("/api/v1/trace/"+traceID+"/annotate", map[string]any{"content": "note", "address": "messages.0.content:0-2"}),
				jsonRequest("/api/v1/trace/"+traceID+"/annotate", map[string]any{"content": "other", "address": "messages.0"}),
				func(t *testing.T) int {
					as, err := ts.st.ListAnnotations(ctx, traceID, nil)
					if err != nil {
						t.Fatal(err)
					}
					return len(as)
				}},
			{"dataset create",
				jsonRequest("/api/v1/dataset/create", map[string]any{"name": "created"}),
				jsonRequest("/api/v1/dataset/create", map[string]any{"name": "created2"}),
				datasets},
			{"snippet",
				jsonRequest("/api/v1/trace/snippets/new", map[string]any{"content": []map[string]any{{"role": "user", "content": "s"}}}),
				jsonRequest("/api/v1/trace/snippets/new", map[string]any{"content": []map[string]any{{"role": "user", "content": "t"}}}),
				func(t *testing.T) int {
					n, err := ts.st.CountTraces(ctx, store.TraceFilter{OwnerID: admin.ID, Snippets: true})
					if err != nil {
						t.Fatal(err)
					}
					return n
				}},
			{"upload raw",
				idemRequest{method: "POST", path: "/api/v1/dataset/upload?name=raw", ctype: "application/x-ndjson", body: []byte(uploadFile)},
				idemRequest{method: "POST", path: "/api/v1/dataset/upload?name=raw&mode=append", ctype: "application/x-ndjson", body: []byte("[{\"role\": \"user\", \"content\": \"raw\"}]\n")},
				traces("raw")},
			// Over idempotencyMemBody: the body is spooled to a file to hash it.
			{"upload multipart, large",
				multipartUpload("mp", bigLine+bigLine),
				multipartUpload("mp2", bigLine),
				func(t *testing.T) int { return traces("mp")(t) + traces("mp2")(t) }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				key := "k-" + strings.ReplaceAll(tc.name, " ", "-")
				before := tc.sideEffects(t)
				r1, b1 := ts.sendKeyed(t, tc.req, key, adminKey)
				if r1.StatusCode != 200 {
					t.Fatalf("first: %d %s", r1.StatusCode, b1)
				}
				after := tc.sideEffects(t)
				if after == before {
					t.Fatalf("first request had no side effect (%d)", after)
				}
				r2, b2 := ts.sendKeyed(t, tc.req, key, adminKey)
				if r2.StatusCode != r1.StatusCode || !bytes.Equal(b1, b2) || r2.Header.Get("Idempotent-Replayed") != "true" ||
					r2.Header.Get("Content-Type") != r1.Header.Get("Content-Type") {
					t.Fatalf("replay: %d %q %s\nwant %d %s", r2.StatusCode, r2.Header.Get("Idempotent-Replayed"), b2, r1.StatusCode, b1)
				}
				if n := tc.sideEffects(t); n != after {
					t.Fatalf("replay had a side effect: %d, want %d", n, after)
				}
				r3, b3 := ts.sendKeyed(t, tc.other, key, adminKey)
				if r3.StatusCode != 409 || !strings.Contains(string(b3), `"code":"idempotency_mismatch"`) {
					t.Fatalf("other body, same key: %d %s", r3.StatusCode, b3)
				}
				if n := tc.sideEffects(t); n != after {
					t.Fatalf("mismatch had a side effect: %d, want %d", n, after)
				}
				if r4, b4 := ts.sendKeyed(t, tc.other, key+"-2", adminKey); r4.StatusCode != 200 || tc.sideEffects(t) == after {
					t.Fatalf("other body, new key: %d %s", r4.StatusCode, b4)
				}
			})
		}
	})
}

// TestIdempotencyEdges covers what happens around the main flow: failures
// release the key, key length, principals, expiry, requests in flight and
// reservations left behind.
func TestIdempotencyEdges(t *testing.T) {
	var mu sync.Mutex
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return clock
	}
	advance := func(d time.Duration) {
		mu.Lock()
		clock = clock.Add(d)
		mu.Unlock()
	}
	ts := newTestServer(t, openSQLite(t), func(c *Config) { c.Now = now })
	ctx := context.Background()
	admin, _ := ts.st.GetUserByName(ctx, "admin")
	push := func(content string) idemRequest {
		return jsonRequest("/api/v1/push/trace", map[string]any{"messages": [][]map[string]any{{{"role": "user", "content": content}}}, "dataset": "e"})
	}
	count := func() int {
		d, err := ts.st.GetDatasetByName(ctx, admin.ID, "e")
		if err != nil {
			return 0
		}
		return d.NumTraces
	}

	// A failed request stores nothing and releases the key: the same key
	// then works with a corrected body.
	bad := jsonRequest("/api/v1/push/trace", map[string]any{"messages": []any{}})
	if r, b := ts.sendKeyed(t, bad, "fix-me", adminKey); r.StatusCode != 400 {
		t.Fatalf("bad push: %d %s", r.StatusCode, b)
	}
	if r, b := ts.sendKeyed(t, push("fixed"), "fix-me", adminKey); r.StatusCode != 200 || count() != 1 {
		t.Fatalf("push after a failed one with the same key: %d %s", r.StatusCode, b)
	}

	// The Go client sends the key of its context.
	n := count()
	kctx := client.WithIdempotencyKey(ctx, "client-key")
	preq := client.PushRequest{Dataset: "e", Messages: [][]any{{map[string]any{"role": "user", "content": "via client"}}}}
	r1, err := ts.c.Push(kctx, preq)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := ts.c.Push(kctx, preq)
	if err != nil || r2.ID[0] != r1.ID[0] || count() != n+1 {
		t.Fatalf("client push replay: %v %v %v (%d traces, want %d)", err, r1.ID, r2, count(), n+1)
	}

	// At most 128 characters.
	if r, b := ts.sendKeyed(t, push("x"), strings.Repeat("k", 129), adminKey); r.StatusCode != 400 || !strings.Contains(string(b), "Idempotency-Key is longer than 128") {
		t.Fatalf("long key: %d %s", r.StatusCode, b)
	}
	if r, _ := ts.sendKeyed(t, push("x"), strings.Repeat("k", 128), adminKey); r.StatusCode != 200 {
		t.Fatalf("128-character key: %d", r.StatusCode)
	}

	// Keys are per principal: another API key's same key is its own.
	out, err := ts.c.CreateKey(ctx, client.KeyCreate{Name: "second"})
	if err != nil {
		t.Fatal(err)
	}
	n = count()
	ts.sendKeyed(t, push("shared"), "shared", adminKey)
	if r, b := ts.sendKeyed(t, push("shared, other key"), "shared", out.Key); r.StatusCode != 200 || count() != n+2 {
		t.Fatalf("same key, other principal: %d %s (%d traces, want %d)", r.StatusCode, b, count(), n+2)
	}

	// Within 24 h the key replays; after, it is a new request.
	n = count()
	ts.sendKeyed(t, push("daily"), "daily", adminKey)
	advance(23 * time.Hour)
	if r, _ := ts.sendKeyed(t, push("daily"), "daily", adminKey); r.Header.Get("Idempotent-Replayed") != "true" || count() != n+1 {
		t.Fatalf("replay within 24 h: %d traces, want %d", count(), n+1)
	}
	advance(2 * time.Hour)
	if r, _ := ts.sendKeyed(t, push("daily"), "daily", adminKey); r.StatusCode != 200 || r.Header.Get("Idempotent-Replayed") != "" || count() != n+2 {
		t.Fatalf("after 24 h: %d traces, want %d", count(), n+2)
	}

	// A request still in flight (a pending reservation): 429 with
	// Retry-After. One pending for more than an hour is taken over.
	req := push("pending")
	hr := httptest.NewRequest(req.method, req.path, bytes.NewReader(req.body))
	hash, cleanup, err := hashRequest(httptest.NewRecorder(), hr, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	cleanup()
	key, err := ts.st.GetAPIKeyByHash(ctx, store.HashKey(adminKey))
	if err != nil {
		t.Fatal(err)
	}
	rec := &store.IdempotencyRecord{Principal: "key:" + key.ID, Key: "pending", RequestHash: hash, CreatedAt: now()}
	if _, created, err := ts.st.ReserveIdempotencyKey(ctx, rec, now().Add(-24*time.Hour)); err != nil || !created {
		t.Fatalf("reserve: %v %v", created, err)
	}
	n = count()
	if r, b := ts.sendKeyed(t, req, "pending", adminKey); r.StatusCode != 429 || r.Header.Get("Retry-After") == "" || count() != n {
		t.Fatalf("in flight: %d %s", r.StatusCode, b)
	}
	advance(2 * time.Hour)
	if r, b := ts.sendKeyed(t, req, "pending", adminKey); r.StatusCode != 200 || count() != n+1 {
		t.Fatalf("stale reservation: %d %s", r.StatusCode, b)
	}
}
