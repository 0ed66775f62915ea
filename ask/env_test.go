package ask_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vigilhq/vigil/ask"
	"github.com/vigilhq/vigil/ingest"
	"github.com/vigilhq/vigil/ledger"
	"github.com/vigilhq/vigil/server"
	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/store/sqlite"
)

// adminKey is the bootstrap admin key of test servers.
const adminKey = "vigil-ask-test-admin-key-0123456789"

// testNow is the clock of the seeded dataset: trace times count back
// from it.
var testNow = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)

// env is a real server on a real SQLite store, with the ask service.
type env struct {
	st    store.Store
	srv   *server.Server
	hs    *httptest.Server
	svc   *ask.Service
	admin *server.Caller
	ids   map[string]string // trace name -> id
}

// newEnv starts a server; cfg configures the ask service (Now defaults
// to testNow).
func newEnv(t testing.TB, cfg ask.Config, mod ...func(*server.Config)) *env {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "vigil.db"), &sqlite.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return newEnvOn(t, cfg, st, mod...)
}

// newEnvOn is newEnv on store st.
func newEnvOn(t testing.TB, cfg ask.Config, st store.Store, mod ...func(*server.Config)) *env {
	t.Helper()
	ctx := context.Background()
	if _, err := server.Bootstrap(ctx, st, server.BootstrapOptions{EnvKey: adminKey}); err != nil {
		t.Fatal(err)
	}
	key, err := ledger.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	scfg := server.Config{Store: st, LedgerKey: key, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now: func() time.Time { return testNow }}
	for _, m := range mod {
		m(&scfg)
	}
	srv, err := server.New(scfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return testNow }
	}
	svc, err := ask.New(srv, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv.Mount("POST /api/v1/ask", ask.Handler(srv, svc))
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	admin, err := srv.AuthenticateKey(ctx, adminKey)
	if err != nil {
		t.Fatal(err)
	}
	return &env{st: st, srv: srv, hs: hs, svc: svc, admin: admin, ids: map[string]string{}}
}

// user creates a member with a key of scope and returns its caller and key.
func (e *env) user(t testing.TB, name, scope string) (*server.Caller, string) {
	t.Helper()
	ctx := context.Background()
	u := &store.User{Username: name, Role: store.RoleMember}
	if err := e.st.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	plain := "vigil-ask-test-key-of-" + name + "-0123456789"
	sum := sha256.Sum256([]byte(plain))
	k := &store.APIKey{Hash: hex.EncodeToString(sum[:]), Prefix: plain[:8], Last4: plain[len(plain)-4:], Name: name,
		Scope: scope, OwnerID: u.ID, TimeCreated: testNow}
	if err := e.st.CreateAPIKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	c, err := e.srv.AuthenticateKey(ctx, plain)
	if err != nil {
		t.Fatal(err)
	}
	return c, plain
}

// seedTrace is one trace of testdata/agents.json.
type seedTrace struct {
	Name        string            `json:"name"`
	HoursAgo    float64           `json:"hours_ago"`
	Messages    []json.RawMessage `json:"messages"`
	Metadata    json.RawMessage   `json:"metadata"`
	Annotations []struct {
		Address string `json:"address"`
		Content string `json:"content"`
	} `json:"annotations"`
	Findings []struct {
		Monitor   string   `json:"monitor"`
		Title     string   `json:"title"`
		Severity  string   `json:"severity"`
		Status    string   `json:"status"`
		Citations []string `json:"citations"`
		By        string   `json:"by"`
		Note      string   `json:"note"`
	} `json:"findings"`
}

// seed pushes testdata/agents.json as dataset of owner through the
// server's Ingester, with its annotations, and stores its findings.
func (e *env) seed(t testing.TB, owner *server.Caller, dataset string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "agents.json"))
	if err != nil {
		t.Fatal(err)
	}
	var traces []seedTrace
	if err := json.Unmarshal(b, &traces); err != nil {
		t.Fatal(err)
	}
	e.push(t, owner, dataset, traces)
}

func (e *env) push(t testing.TB, owner *server.Caller, dataset string, traces []seedTrace) {
	t.Helper()
	ctx := context.Background()
	var nts []store.NewTrace
	tools := map[string]*store.ToolUse{}
	for i, tr := range traces {
		raw, _ := json.Marshal(tr.Messages)
		id := store.NewID()
		var warn ingest.Warnings
		pe, err := ingest.Prepare(raw, ingest.TraceOptions{TraceIdx: i, TraceID: id}, &warn)
		if err != nil {
			t.Fatalf("trace %s: %v", tr.Name, err)
		}
		ingest.MergeTools(tools, pe.Tools)
		nt := store.NewTrace{ID: id, Name: tr.Name, Metadata: tr.Metadata, Messages: pe.Messages,
			TimeCreated: testNow.Add(-time.Duration(tr.HoursAgo * float64(time.Hour)))}
		for _, a := range tr.Annotations {
			idx, rest := splitAddress(t, a.Address)
			nt.Annotations = append(nt.Annotations, &store.Annotation{Content: a.Content, Address: rest, AnchorIndex: &idx,
				UserID: owner.User.ID, OwnerID: owner.User.ID, Resolved: true, TimeCreated: nt.TimeCreated,
				ExtraMetadata: json.RawMessage(`{}`)})
		}
		nts = append(nts, nt)
		e.ids[tr.Name] = id
	}
	_, err := e.srv.Ingester().Push(ctx, ingest.PushRequest{PushRequest: store.PushRequest{OwnerID: owner.User.ID,
		DatasetName: dataset, CreateIfMissing: true, Traces: nts, Tools: ingest.ToolList(tools)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range traces {
		for k, f := range tr.Findings {
			var cites []map[string]any
			for _, a := range f.Citations {
				cites = append(cites, map[string]any{"nodeId": nil, "address": a})
			}
			cj, _ := json.Marshal(cites)
			at := testNow.Add(-time.Duration(tr.HoursAgo * float64(time.Hour)))
			sf := &store.Finding{ID: ulidFor(tr.Name, k), RunID: e.ids[tr.Name], OwnerID: owner.User.ID, MonitorID: "mon-" + f.Monitor,
				Monitor: f.Monitor, Key: tr.Name, Title: f.Title, Severity: f.Severity, Score: 0.6, Citations: cj,
				Status: store.FindingOpen, CreatedAt: at, UpdatedAt: at}
			if _, _, err := e.st.UpsertFinding(ctx, sf); err != nil {
				t.Fatalf("finding of %s: %v", tr.Name, err)
			}
			if f.Status != store.FindingOpen {
				if _, err := e.st.SetFindingStatus(ctx, sf.ID, f.Status, f.By, f.Note, at.Add(time.Hour)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// splitAddress splits "messages.4.tool_calls.0" into 4 and ".tool_calls.0".
func splitAddress(t testing.TB, a string) (int, string) {
	t.Helper()
	var idx int
	var rest string
	n, _ := fmtSscan(a, &idx, &rest)
	if n < 1 {
		t.Fatalf("bad seed address %q", a)
	}
	return idx, rest
}
