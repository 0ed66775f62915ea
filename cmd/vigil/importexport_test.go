package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/ledger"
	"github.com/vigilhq/vigil/server"
	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/store/sqlite"
)

// newInProcessServer starts the real server on a loopback port with a
// SQLite store and returns its URL and the ledger public key.
func newInProcessServer(t *testing.T) (string, string) {
	url, _, key := startInProcessServer(t)
	return url, ledger.PublicKeyHex(ledger.PublicOf(key))
}

// startInProcessServer starts the real server on a loopback port with a
// SQLite store bootstrapped with testKey, and returns its URL, the store
// and the ledger key.
func startInProcessServer(t *testing.T) (string, store.Store, ed25519.PrivateKey) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "vigil.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := server.Bootstrap(ctx, st, server.BootstrapOptions{EnvKey: testKey}); err != nil {
		t.Fatal(err)
	}
	key, _ := ledger.GenerateKey()
	srv, err := server.New(server.Config{Store: st, LedgerKey: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return hs.URL, st, key
}

func TestImportExportCommands(t *testing.T) {
	url, _ := newInProcessServer(t)
	t.Setenv("VIGIL_URL", url)
	t.Setenv("VIGIL_API_KEY", testKey)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	data := `{"metadata": {"benchmark": "cli"}}
{"index": 0, "name": "first", "messages": [{"role": "user", "content": "hello"}], "metadata": {}, "annotations": []}
{"index": 1, "name": "second", "messages": [{"role": "user", "content": "bye"}], "metadata": {"x": 1}, "annotations": [{"content": "c", "address": "messages.0.content:0-3"}]}
`
	os.WriteFile(in, []byte(data), 0o644)
	code, out, errs := runVigil(t, "", "import", in, "--dataset", "cli")
	if code != 0 || !strings.Contains(out, `"num_traces":2`) {
		t.Fatalf("import: %d %s %s", code, out, errs)
	}
	if !strings.Contains(errs, "vigil: import "+in) { // not a terminal: plain progress lines
		t.Errorf("import progress: %q", errs)
	}
	outFile := filepath.Join(dir, "out.jsonl")
	code, _, errs = runVigil(t, "", "export", "--dataset", "cli", "-o", outFile, "-q")
	if code != 0 || errs != "" {
		t.Fatalf("export: %d %s", code, errs)
	}
	got, _ := os.ReadFile(outFile)
	lines := strings.Split(strings.TrimSpace(string(got)), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], `"benchmark":"cli"`) || !strings.HasPrefix(lines[2], `{"index":1,"name":"second","messages":[{"role":"user","content":"bye","message_id":`) {
		t.Fatalf("export:\n%s", got)
	}
	// Re-import the export through stdin, --url given explicitly, with the
	// Invariant environment names.
	t.Setenv("VIGIL_URL", "")
	t.Setenv("VIGIL_API_KEY", "")
	t.Setenv("INVARIANT_API_KEY", testKey)
	code, out, errs = runVigil(t, string(got), "import", "-", "--dataset", "copy", "--url", url, "-q")
	if code != 0 || !strings.Contains(out, `"num_traces":2`) {
		t.Fatalf("re-import: %d %s %s", code, out, errs)
	}
	// Errors: a server-side validation error names the line; usage errors exit 2.
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte("[{\"role\": \"user\"}]\n{\"messages\": []}\n"), 0o644)
	code, _, errs = runVigil(t, "", "import", bad, "--dataset", "bad", "--url", url, "-q")
	if code != 2 || !strings.Contains(errs, "line 2: The file cannot contain both raw event lists and annotated event lists.") {
		t.Fatalf("bad import: %d %s", code, errs)
	}
	if code, _, errs = runVigil(t, "", "import", in); code != 2 || !strings.Contains(errs, "--dataset is required") {
		t.Fatalf("missing --dataset: %d %s", code, errs)
	}
	if code, _, errs = runVigil(t, "", "export", "--dataset", "nope", "--url", url, "-q"); code != 2 || !strings.Contains(errs, "404") {
		t.Fatalf("unknown dataset: %d %s", code, errs)
	}
}

// TestReceiptsVerifyOnServerOutput checks that `vigil receipts verify`
// accepts exactly what GET /api/v1/ledger/sessions/{id}/receipts returns,
// and catches an edited receipt.
func TestReceiptsVerifyOnServerOutput(t *testing.T) {
	url, pub := newInProcessServer(t)
	c := client.New(url, testKey)
	ctx := context.Background()
	res, err := c.Push(ctx, client.PushRequest{Dataset: "proof", Messages: [][]any{{
		map[string]any{"role": "user", "content": "a <b> & \u2028 c"},
		map[string]any{"role": "assistant", "content": "ok", "tool_calls": []any{map[string]any{"type": "function", "function": map[string]any{"name": "f", "arguments": `{"n": 1e21}`}}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	id := res.ID[0]
	if _, err := c.Append(ctx, id, []any{map[string]any{"role": "user", "content": "more"}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Raw(ctx, "POST", "/api/v1/runs/"+id+"/finish", map[string]string{"status": "completed"}, nil); err != nil {
		t.Fatal(err)
	}
	body, err := c.SessionReceipts(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "receipts.json")
	os.WriteFile(file, body, 0o644)
	code, out, errs := runVigil(t, "", "receipts", "verify", file, "--public-key", pub, "--session-id", id)
	if code != 0 || strings.TrimSpace(out) != `{"valid":true,"brokenAt":null,"reason":null,"errors":[]}` {
		t.Fatalf("verify server receipts: %d %s %s", code, out, errs)
	}
	// Edit receipt 1's input: hash_mismatch at 1.
	var doc map[string]json.RawMessage
	json.Unmarshal(body, &doc)
	tampered := strings.Replace(string(body), `"content":"ok"`, `"content":"OK"`, 1)
	if tampered == string(body) {
		t.Fatal("tamper had no effect")
	}
	code, out, _ = runVigil(t, tampered, "receipts", "verify", "-", "--public-key", pub)
	if code != 1 || !strings.Contains(out, `"brokenAt":1,"reason":"hash_mismatch"`) {
		t.Fatalf("verify tampered: %d %s", code, out)
	}
	// Dropping the last receipt breaks the close hash the file carries.
	var parsed struct {
		Receipts  []json.RawMessage `json:"receipts"`
		CloseHash string            `json:"closeHash"`
	}
	json.Unmarshal(body, &parsed)
	short, _ := json.Marshal(map[string]any{"receipts": parsed.Receipts[:2], "closeHash": parsed.CloseHash})
	code, out, _ = runVigil(t, string(short), "receipts", "verify", "-", "--public-key", pub)
	if code != 1 || !strings.Contains(out, "close_hash_mismatch") {
		t.Fatalf("verify truncated: %d %s", code, out)
	}
}

// TestExportFailureLeavesNoFile: an export cut off mid-stream exits 2 and
// leaves neither a truncated -o file nor a temporary one behind.
func TestExportFailureLeavesNoFile(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/api/v1/user/identity":
			fmt.Fprint(w, `{"username": "admin", "id": "u1"}`)
		case strings.HasPrefix(r.URL.Path, "/api/v1/dataset/byuser/"):
			fmt.Fprint(w, `{"id": "01a1fcc7-12c3-7000-a251-20a6430ddaf7", "name": "d"}`)
		case strings.Contains(r.URL.Path, "download") || strings.Contains(r.URL.Path, "export"):
			w.Header().Set("Content-Type", "application/x-ndjson")
			fmt.Fprint(w, `{"metadata": {}}`+"\n"+`{"index": 0, "messages": [`)
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler) // the connection breaks mid-stream
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	out := filepath.Join(dir, "d.jsonl")
	code, _, errs := runVigil(t, "", "export", "--dataset", "d", "--url", srv.URL, "--api-key", testKey, "-o", out, "-q")
	if code != 2 {
		t.Fatalf("exit %d, want 2; stderr %s", code, errs)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Fatalf("a failed export left files behind: %v", entries)
	}
}

// TestClientServerAddress: --url without a scheme is http, and a server
// that is down gets one message naming the URL and `vigil serve` (it was
// "who am I: GET ...: dial tcp ...: connection refused").
func TestClientServerAddress(t *testing.T) {
	url, _ := newInProcessServer(t)
	t.Setenv("VIGIL_API_KEY", testKey)
	in := filepath.Join(t.TempDir(), "in.jsonl")
	os.WriteFile(in, []byte(`{"messages": [{"role": "user", "content": "hi"}]}`+"\n"), 0o644)
	hostPort := strings.TrimPrefix(url, "http://")
	_, port, _ := strings.Cut(hostPort, ":")
	for i, addr := range []string{hostPort, "localhost:" + port, ":" + port} {
		name := fmt.Sprintf("addr%d", i)
		if code, out, errs := runVigil(t, "", "import", in, "--dataset", name, "--url", addr, "-q"); code != 0 || !strings.Contains(out, `"num_traces":1`) {
			t.Fatalf("import --url %s: %d %s %s", addr, code, out, errs)
		}
		if code, out, errs := runVigil(t, "", "export", "--dataset", name, "--url", addr, "-q"); code != 0 || !strings.Contains(out, `"hi"`) {
			t.Fatalf("export --url %s: %d %s %s", addr, code, out, errs)
		}
	}

	for _, cmd := range [][]string{{"export", "--dataset", "d"}, {"import", in, "--dataset", "d"}} {
		code, _, errs := runVigil(t, "", append(cmd, "--url", "ftp://"+hostPort)...)
		want := "vigil: " + cmd[0] + `: server URL "ftp://` + hostPort + `": scheme "ftp" is not http or https (want e.g. http://127.0.0.1:8080)` + "\n"
		if code != 2 || errs != want {
			t.Errorf("%s --url ftp://...: exit %d, stderr %q, want %q", cmd[0], code, errs, want)
		}
	}

	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	want := "no Vigil server answers at " + down.URL + " (connection refused): start one with 'vigil serve'"
	for _, args := range [][]string{
		{"export", "--dataset", "d", "--url", strings.TrimPrefix(down.URL, "http://")},
		{"import", in, "--dataset", "d", "--url", down.URL, "-q"},
	} {
		code, _, errs := runVigil(t, "", args...)
		if code != 2 || !strings.Contains(errs, want) || strings.Contains(errs, "who am I") || strings.Count(errs, "\n") != 1 {
			t.Errorf("%s against a stopped server: exit %d, stderr %q; want 2 and %q", args[0], code, errs, want)
		}
	}
}

// TestImportAppendIndices: appending a file whose indices are taken says
// which index and what to do (it printed SQLite's "UNIQUE constraint
// failed"); --renumber gives the traces the next free indices.
func TestImportAppendIndices(t *testing.T) {
	url, _ := newInProcessServer(t)
	t.Setenv("VIGIL_URL", url)
	t.Setenv("VIGIL_API_KEY", testKey)
	in := filepath.Join(t.TempDir(), "in.jsonl")
	os.WriteFile(in, []byte(`{"metadata": {"k": 1}}
{"index": 0, "name": "a", "messages": [{"role": "user", "content": "one"}]}
{"index": 1, "messages": [{"role": "user", "content": "two"}, {"role": "assistant", "content": "2"}]}
`), 0o644)
	if code, _, errs := runVigil(t, "", "import", in, "--dataset", "d", "-q"); code != 0 {
		t.Fatalf("import: %d %s", code, errs)
	}
	code, _, errs := runVigil(t, "", "import", in, "--dataset", "d", "-q")
	if want := `vigil: import ` + in + `: dataset "d" already has traces; add --append to add the file's traces to it` + "\n"; code != 2 || errs != want {
		t.Fatalf("import into a dataset with traces: exit %d, stderr\n%s\nwant\n%s", code, errs, want)
	}
	code, _, errs = runVigil(t, "", "import", in, "--dataset", "d", "--append", "-q")
	want := `vigil: import ` + in + `: trace index 0 is already used in dataset "d"; add --renumber to give the file's traces the dataset's next free indices instead of their own` + "\n"
	if code != 2 || errs != want {
		t.Fatalf("append with taken indices: exit %d, stderr\n%s\nwant\n%s", code, errs, want)
	}
	code, out, errs := runVigil(t, "", "import", in, "--dataset", "d", "--append", "--renumber")
	if code != 0 || !strings.Contains(out, `"num_traces":4`) {
		t.Fatalf("append --renumber: %d %s %s", code, out, errs)
	}
	if !strings.Contains(errs, "vigil: import "+in+": 2 traces, 3 events stored in ") {
		t.Errorf("import progress: %q", errs)
	}
	code, out, errs = runVigil(t, "", "export", "--dataset", "d")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 5 || !strings.HasPrefix(lines[3], `{"index":2,"name":"a",`) || !strings.HasPrefix(lines[4], `{"index":3,`) {
		t.Fatalf("export after renumbered append: %d\n%s", code, out)
	}
	if !strings.Contains(errs, "vigil: export d: 4 of 4 traces, 6 events,") {
		t.Errorf("export progress: %q", errs)
	}
}

// TestRefusedKeyHint: a client command whose key the server refuses (none,
// or a wrong one) says where the key comes from and how to make one, after
// the server's own message.
func TestRefusedKeyHint(t *testing.T) {
	serve := startServe(t, t.TempDir(), "VIGIL_API_KEY="+testKey)
	url := serve.url
	in := filepath.Join(t.TempDir(), "in.jsonl")
	os.WriteFile(in, []byte(`{"messages": [{"role": "user", "content": "hi"}]}`+"\n"), 0o644)
	tests := []struct {
		name, key, detail string
		args              []string
	}{
		{"export-no-key", "", "Missing API key", []string{"export", "--dataset", "d", "-q"}},
		{"import-wrong-key", "vigil-wrong-key-0123456789", "Invalid API key", []string{"import", in, "--dataset", "d", "-q"}},
		{"findings-no-key", "", "Missing API key", []string{"findings", "list"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("VIGIL_API_KEY", tt.key)
			t.Setenv("INVARIANT_API_KEY", "")
			code, _, errs := runVigil(t, "", append(tt.args, "--url", url)...)
			for _, want := range []string{"401", tt.detail, "pass --api-key or set VIGIL_API_KEY", "'vigil keys create'"} {
				if !strings.Contains(errs, want) {
					t.Errorf("exit %d, stderr %q lacks %q", code, errs, want)
				}
			}
			if code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
		})
	}
	// import asks who the key is before it streams the file: a server
	// refuses a large upload by a bad key before reading it and closes the
	// connection, and the client then often saw only "connection reset by
	// peer" or "broken pipe" instead of the 401.
	if log := serve.stderr.String(); strings.Contains(log, "/api/v1/dataset/upload") {
		t.Errorf("an import with a refused key sent its file:\n%s", log)
	}
	// A good key and a failure of another kind get no key hint.
	t.Setenv("VIGIL_API_KEY", testKey)
	if _, _, errs := runVigil(t, "", "export", "--dataset", "no-such-dataset", "--url", url, "-q"); strings.Contains(errs, "VIGIL_API_KEY") {
		t.Errorf("a missing dataset got the key hint: %q", errs)
	}
}
