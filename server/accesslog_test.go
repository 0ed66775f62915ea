package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/vigilhq/vigil/ledger"
	"github.com/vigilhq/vigil/store"
)

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestAccessLog: one line per request with method, path, status, bytes,
// duration and key id, never the key (issue 11 item 8: there was no
// access log).
func TestAccessLog(t *testing.T) {
	var buf syncBuffer
	ts := newTestServer(t, openSQLite(t), func(c *Config) {
		c.AccessLog = slog.New(slog.NewJSONHandler(&buf, nil))
	})
	admin, err := ts.st.GetAPIKeyByHash(context.Background(), store.HashKey(adminKey))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method, path, key string
		body              any
		wantStatus        int
		wantKeyID         string
	}{
		{"GET", "/api/v1/version", "", nil, 200, ""},
		{"POST", "/api/v1/push/trace", adminKey, `{"messages": [[{"role": "user", "content": "hi"}]]}`, 200, admin.ID},
		{"GET", "/api/v1/no/such/thing?api_key=" + adminKey, adminKey, nil, 404, ""},
		{"GET", "/api/v1/keys/list", "", nil, 401, ""},
		{"GET", "/api/v1/dataset/list", "wrong-key-0123456789", nil, 401, ""},
		{"GET", "/api/v1/user/identity", adminKey, nil, 200, admin.ID},
	} {
		before := len(buf.String())
		st, body := ts.do(t, tc.method, tc.path, tc.key, tc.body)
		if st != tc.wantStatus {
			t.Fatalf("%s %s: %d %s", tc.method, tc.path, st, body)
		}
		lines := strings.Split(strings.TrimSpace(buf.String()[before:]), "\n")
		if len(lines) != 1 {
			t.Fatalf("%s %s: %d log lines: %q", tc.method, tc.path, len(lines), lines)
		}
		var rec struct {
			Level, Msg, Method, Path string
			Status, Bytes            int
			DurationMS               *float64 `json:"duration_ms"`
			KeyID                    string   `json:"key_id"`
		}
		if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
			t.Fatalf("log line is not JSON: %s", lines[0])
		}
		wantPath, _, _ := strings.Cut(tc.path, "?")
		if rec.Level != "INFO" || rec.Msg != "request" || rec.Method != tc.method || rec.Path != wantPath ||
			rec.Status != tc.wantStatus || rec.Bytes != len(body) || rec.DurationMS == nil || *rec.DurationMS < 0 || rec.KeyID != tc.wantKeyID {
			t.Errorf("%s %s: log line %s (body %d bytes)", tc.method, tc.path, lines[0], len(body))
		}
		if strings.Contains(lines[0], adminKey) || strings.Contains(lines[0], "wrong-key") {
			t.Errorf("log line holds a key: %s", lines[0])
		}
	}
}

// TestAccessLogOff: without Config.AccessLog nothing is logged per request.
func TestAccessLogOff(t *testing.T) {
	var buf syncBuffer
	ts := newTestServer(t, openSQLite(t), func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&buf, nil)) })
	if st, _ := ts.do(t, "GET", "/api/v1/version", "", nil); st != 200 {
		t.Fatal(st)
	}
	if buf.String() != "" {
		t.Errorf("logged without an access log: %s", buf.String())
	}
}

// BenchmarkAccessLog measures what the access log adds to a request
// (GET /api/v1/version through the whole handler chain, JSON lines to a
// discarding writer).
func BenchmarkAccessLog(b *testing.B) {
	for _, name := range []string{"off", "level-error", "on"} {
		b.Run(name, func(b *testing.B) {
			st := openSQLite(b)
			key, _ := ledger.GenerateKey()
			cfg := Config{Store: st, LedgerKey: key, Logger: discardLogger()}
			switch name {
			case "on":
				cfg.AccessLog = slog.New(slog.NewJSONHandler(io.Discard, nil))
			case "level-error":
				cfg.AccessLog = slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError}))
			}
			srv, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			req := httptest.NewRequest("GET", "/api/v1/version", nil)
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				srv.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Fatal(w.Code)
				}
			}
		})
	}
}

// TestAccessLogLevel: an access log whose level is above info (vigil
// serve --log-level warn or error) writes no line, and requests, keyed
// ones included, are served as before.
func TestAccessLogLevel(t *testing.T) {
	var buf syncBuffer
	ts := newTestServer(t, openSQLite(t), func(c *Config) {
		c.AccessLog = slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	if st, _ := ts.do(t, "GET", "/api/v1/version", "", nil); st != 200 {
		t.Fatal(st)
	}
	if st, _ := ts.do(t, "GET", "/api/v1/dataset/list", adminKey, nil); st != 200 {
		t.Fatalf("keyed request: %d", st)
	}
	if buf.String() != "" {
		t.Errorf("logged below the log's level: %s", buf.String())
	}
}
