package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/gateway/providertest"
	"github.com/vigilhq/vigil/ledger"
	"github.com/vigilhq/vigil/server"
	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/store/sqlite"

	_ "github.com/vigilhq/vigil/detect" // registers the detectors rules call
)

const adminKey = "vgl_test_admin_key_0123456789abcdef"

// env is a Vigil server with the embedded gateway, in front of a mock
// upstream, all on loopback.
type env struct {
	t     testing.TB
	mock  *providertest.Mock
	up    *httptest.Server
	srv   *server.Server
	st    store.Store
	ts    *httptest.Server
	gw    *gateway.Gateway
	rec   *gateway.IngestRecorder
	api   *client.Client
	base  string // the gateway's URL prefix
	extra func(*gateway.Options)
}

type envOption func(*gateway.Options)

func newEnv(t testing.TB, opts ...envOption) *env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "vigil.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := server.Bootstrap(ctx, st, server.BootstrapOptions{EnvKey: adminKey}); err != nil {
		t.Fatal(err)
	}
	key, err := ledger.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := server.New(server.Config{Store: st, LedgerKey: key, Logger: log, AccessLog: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	m := &providertest.Mock{Record: true}
	up := httptest.NewServer(m)
	t.Cleanup(up.Close)
	auth, rules, comp, rec := gateway.Embedded(srv, gateway.RecordOptions{})
	o := gateway.Options{
		Auth: auth, Rules: rules, Compiler: comp, Recorder: rec, Logger: log,
		Upstreams: []gateway.Upstream{
			{Name: "openai", BaseURL: up.URL + "/v1"},
			{Name: "anthropic", BaseURL: up.URL},
			{Name: "gemini", BaseURL: up.URL},
			{Name: "vllm", Type: gateway.TypeOpenAI, BaseURL: up.URL + "/v1", Auth: gateway.AuthNone},
		},
	}
	for _, f := range opts {
		f(&o)
	}
	gw, err := gateway.New(o)
	if err != nil {
		t.Fatal(err)
	}
	srv.Mount("/api/v1/gateway/", gw)
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		ts.Close()
		rec.Close()
		gw.Close()
	})
	return &env{t: t, mock: m, up: up, srv: srv, st: st, ts: ts, gw: gw, rec: rec,
		api: client.New(ts.URL, adminKey, client.WithRetries(0)), base: ts.URL + "/api/v1/gateway"}
}

// traces returns the traces of a dataset with their events, oldest first,
// after every queued record is written.
func (e *env) traces(dataset string) []*client.Trace {
	e.t.Helper()
	e.gw.Idle()
	e.rec.Flush()
	ctx := context.Background()
	d, err := e.api.GetDatasetByName(ctx, "admin", dataset)
	if err != nil {
		e.t.Fatalf("dataset %s: %v", dataset, err)
	}
	sums, err := e.api.ListTraces(ctx, d.ID, 1000, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []*client.Trace
	for _, s := range sums {
		tr, err := e.api.GetTrace(ctx, s.ID, true)
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, tr)
	}
	return out
}

// addGuardrail adds a dataset guardrail (creating the dataset).
func (e *env) addGuardrail(dataset, name, rule, action string, extra map[string]any) {
	e.t.Helper()
	ctx := context.Background()
	d, err := e.api.GetDatasetByName(ctx, "admin", dataset)
	if err != nil {
		if d, err = e.api.CreateDataset(ctx, dataset, nil, false); err != nil {
			e.t.Fatal(err)
		}
	}
	if _, err := e.api.CreateGuardrail(ctx, d.ID, client.GuardrailCreate{Name: name, Policy: rule, Action: action, ExtraMetadata: extra}); err != nil {
		e.t.Fatal(err)
	}
}

// post sends a raw request to the gateway.
func (e *env) post(path string, body string, hdr map[string]string) (*http.Response, []byte) {
	e.t.Helper()
	req, _ := http.NewRequest("POST", e.base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// eventsJSON is a trace's events as generic JSON, without the keys the
// store adds (message_id, timestamp, vigil_call).
func eventsJSON(t testing.TB, tr *client.Trace) []map[string]any {
	t.Helper()
	b, _ := json.Marshal(tr.Messages)
	var evs []map[string]any
	if err := json.Unmarshal(b, &evs); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		for _, k := range []string{"message_id", "timestamp", "vigil_call"} {
			delete(e, k)
		}
	}
	return evs
}

func jsonEq(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	var xa, ya any
	json.Unmarshal(x, &xa)
	json.Unmarshal(y, &ya)
	xs, _ := json.Marshal(xa)
	ys, _ := json.Marshal(ya)
	return string(xs) == string(ys)
}

var _ = time.Second

type clientTrace = client.Trace

// tracesMaybe is traces, or nil while the dataset does not exist.
func (e *env) tracesMaybe(dataset string) []*client.Trace {
	e.gw.Idle()
	e.rec.Flush()
	if _, err := e.api.GetDatasetByName(context.Background(), "admin", dataset); err != nil {
		return nil
	}
	return e.traces(dataset)
}

func clientFilter() client.GuardrailFilter { return client.GuardrailFilter{Kind: "llm"} }
