package otlp_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"go.opentelemetry.io/otel/attribute"

	"github.com/vigilhq/vigil/internal/pgtest"
	"github.com/vigilhq/vigil/ledger"
	"github.com/vigilhq/vigil/otlp"
	"github.com/vigilhq/vigil/server"
	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/store/postgres"
	"github.com/vigilhq/vigil/store/sqlite"
)

// backend is a real Vigil server (server.New over a real store, behind
// httptest on loopback) with the OTLP handler mounted.
type backend struct {
	url string
	key string
	st  store.Store
	srv *server.Server
	h   *otlp.Handler
	// bodies records the protobuf export requests the SDK sent through
	// the recording proxy (proxyURL), to replay them as retries.
	mu       sync.Mutex
	bodies   [][]byte
	proxyURL string
}

type storeKind string

const (
	sqliteStore   storeKind = "sqlite"
	postgresStore storeKind = "postgres"
)

func newBackend(t testing.TB, kind storeKind, cfg otlp.Config) *backend {
	t.Helper()
	ctx := context.Background()
	var st store.Store
	var err error
	switch kind {
	case postgresStore:
		st, err = postgres.Open(ctx, pgtest.DSN(t), nil)
	default:
		st, err = sqlite.Open(ctx, filepath.Join(t.TempDir(), "vigil.db"), nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ledger.GenerateKey()
	srv, err := server.New(server.Config{Store: st, LedgerKey: key})
	if err != nil {
		t.Fatal(err)
	}
	boot, err := server.Bootstrap(ctx, st, server.BootstrapOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := otlp.New(srv, cfg)
	otlp.Mount(srv, h)
	hs := httptest.NewServer(srv)
	b := &backend{url: hs.URL, key: boot.GeneratedKey, st: st, srv: srv, h: h}
	// The recording proxy: forwards to the server, keeping each body;
	// with json=true on the request it converts the protobuf body to the
	// OTLP JSON form (hex ids) first.
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body []byte
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			body, _ = io.ReadAll(zr)
		} else {
			body, _ = io.ReadAll(r.Body)
		}
		b.mu.Lock()
		b.bodies = append(b.bodies, body)
		b.mu.Unlock()
		ct := r.Header.Get("Content-Type")
		if r.Header.Get("X-Test-Json") == "1" {
			body, ct = toJSON(t, body), "application/json"
		}
		var zb bytes.Buffer
		zw := gzip.NewWriter(&zb)
		zw.Write(body)
		zw.Close()
		req, _ := http.NewRequest("POST", hs.URL+r.URL.Path, &zb)
		req.Header = r.Header.Clone()
		req.Header.Set("Content-Type", ct)
		req.Header.Set("Content-Encoding", "gzip")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), 502)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	b.proxyURL = proxy.URL
	t.Cleanup(func() { proxy.Close(); hs.Close(); h.Close(); srv.Close(); st.Close() })
	return b
}

// toJSON re-encodes a protobuf ExportTraceServiceRequest as OTLP JSON
// with hex trace and span ids (the OTLP JSON mapping).
func toJSON(t testing.TB, body []byte) []byte {
	req := &coltracepb.ExportTraceServiceRequest{}
	if err := proto.Unmarshal(body, req); err != nil {
		t.Errorf("proxy: %v", err)
		return body
	}
	j, _ := protojson.Marshal(req)
	var v any
	_ = json.Unmarshal(j, &v)
	hexIDs(v)
	out, _ := json.Marshal(v)
	return out
}

func hexIDs(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && (k == "traceId" || k == "spanId" || k == "parentSpanId") {
				x[k] = b64ToHex(s)
				continue
			}
			hexIDs(e)
		}
	case []any:
		for _, e := range x {
			hexIDs(e)
		}
	}
}

// provider returns a tracer provider exporting synchronously (one
// export request per span) through the recording proxy, in protobuf or
// (converted by the proxy) JSON, gzip on.
func (b *backend) provider(t testing.TB, service string, jsonEnc bool, headers map[string]string) *sdktrace.TracerProvider {
	h := map[string]string{"Authorization": "Bearer " + b.key}
	if jsonEnc {
		h["X-Test-Json"] = "1"
	}
	for k, v := range headers {
		h[k] = v
	}
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(b.proxyURL+"/v1/traces"),
		otlptracehttp.WithHeaders(h), otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
	if err != nil {
		t.Fatal(err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", service))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(res))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return tp
}

// traces returns the dataset's traces with their events decoded.
func (b *backend) traces(t testing.TB, dataset string) []*storedTrace {
	t.Helper()
	ctx := context.Background()
	users, _ := b.st.ListUsers(ctx)
	d, err := b.st.GetDatasetByName(ctx, users[0].ID, dataset)
	if err != nil {
		t.Fatalf("dataset %s: %v", dataset, err)
	}
	ts, err := b.st.ListTraces(ctx, store.TraceFilter{DatasetID: d.ID, WithMessages: true, Order: store.OrderIndex})
	if err != nil {
		t.Fatal(err)
	}
	var out []*storedTrace
	for _, tr := range ts {
		s := &storedTrace{Trace: tr}
		for _, m := range tr.Messages {
			var ev map[string]any
			if err := json.Unmarshal(m.Data, &ev); err != nil {
				t.Fatal(err)
			}
			delete(ev, "message_id")
			delete(ev, "timestamp")
			s.events = append(s.events, ev)
		}
		_ = json.Unmarshal(tr.Metadata, &s.meta)
		out = append(out, s)
	}
	return out
}

type storedTrace struct {
	*store.Trace
	events []map[string]any
	meta   map[string]any
}

// summary is a compact, comparable form of events: role, text, tool
// calls (id name args) and tool_call_id.
func summary(evs []map[string]any) string {
	var lines []string
	for _, e := range evs {
		var b strings.Builder
		b.WriteString(e["role"].(string))
		if c, ok := e["content"]; ok && c != nil && c != "" {
			cj, _ := json.Marshal(c)
			b.WriteString(" " + string(cj))
		}
		if tcs, ok := e["tool_calls"].([]any); ok {
			for _, tc := range tcs {
				m := tc.(map[string]any)
				f := m["function"].(map[string]any)
				aj, _ := json.Marshal(f["arguments"])
				b.WriteString(" call(" + m["id"].(string) + " " + f["name"].(string) + " " + string(aj) + ")")
			}
		}
		if id, ok := e["tool_call_id"].(string); ok {
			b.WriteString(" for " + id)
		}
		lines = append(lines, b.String())
	}
	return strings.Join(lines, "\n")
}

// waitFor polls cond for up to 10 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
