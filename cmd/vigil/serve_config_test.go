package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/internal/pgtest"
)

// inProcessServe is `vigil serve` run in the test process.
type inProcessServe struct {
	url    string
	stderr *syncBuffer
	cancel context.CancelFunc
	done   chan struct{} // closed when run has returned
	code   int           // run's exit code, valid after done
}

// stop cancels the server and returns its exit code.
func (p *inProcessServe) stop(t *testing.T) int {
	t.Helper()
	p.cancel()
	select {
	case <-p.done:
		return p.code
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
		return -1
	}
}

// startInProcess runs `vigil serve --listen 127.0.0.1:0 args...` and waits
// for its listen line. The caller's environment (t.Setenv) applies.
func startInProcess(t *testing.T, args ...string) *inProcessServe {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &inProcessServe{stderr: &syncBuffer{}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.code = run(ctx, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...), strings.NewReader(""), io.Discard, p.stderr)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := listenRx.FindStringSubmatch(p.stderr.String()); m != nil {
			p.url = m[1]
			return p
		}
		select {
		case <-p.done:
			t.Fatalf("serve exited %d:\n%s", p.code, p.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start:\n%s", p.stderr.String())
		}
	}
}

// serveEnv clears the environment serve reads, with HOME in a fresh
// directory that the test can check stays empty.
func serveEnv(t *testing.T) (home string) {
	home = t.TempDir()
	t.Setenv("HOME", home)
	for _, k := range []string{"VIGIL_CONFIG", "VIGIL_DATA_DIR", "VIGIL_DB", "VIGIL_LEDGER_KEY", "VIGIL_LEDGER_KEY_FILE",
		"VIGIL_LOG_FORMAT", "VIGIL_LOG_LEVEL", "VIGIL_AUTH_ADMIN_USERNAME", "VIGIL_AUTH_ANONYMOUS_READ_PUBLIC",
		"VIGIL_SHARING_ENABLED", "VIGIL_METRICS_PUBLIC", "VIGIL_METRICS_TOKEN", "PROMETHEUS_TOKEN",
		"VIGIL_TLS_CERT_FILE", "VIGIL_TLS_KEY_FILE", "PORT"} {
		t.Setenv(k, "")
	}
	t.Setenv("VIGIL_API_KEY", testKey)
	// No ./vigil.yaml may be picked up from the package directory.
	t.Chdir(t.TempDir())
	return home
}

func getJSON(t *testing.T, c *http.Client, url, key string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	json.NewDecoder(resp.Body).Decode(&v)
	return resp.StatusCode, v
}

// TestServePostgresWritesNothingLocally: with --db postgres://… and no
// data dir or key file configured, vigil serve creates no ~/.vigil and no
// ledger.key; the ledger key seed lives in the database, so two processes
// on one database sign with the same key (issue 11 item 10: ~/.vigil/
// ledger.key was created, a different key per machine).
func TestServePostgresWritesNothingLocally(t *testing.T) {
	dsn := pgtest.DSN(t)
	home := serveEnv(t)
	a := startInProcess(t, "--db", dsn)
	b := startInProcess(t, "--db", dsn)
	var pubs []any
	for _, p := range []*inProcessServe{a, b} {
		st, v := getJSON(t, http.DefaultClient, p.url+"/api/v1/ledger/public-key", "")
		if st != 200 || v["publicKey"] == nil {
			t.Fatalf("public key: %d %v", st, v)
		}
		pubs = append(pubs, v["publicKey"])
		if !strings.Contains(p.stderr.String(), "ledger_key=database") {
			t.Errorf("listen line does not name the key's source:\n%s", p.stderr.String())
		}
	}
	if pubs[0] != pubs[1] {
		t.Errorf("two servers on one database sign with different keys: %v", pubs)
	}
	a.stop(t)
	b.stop(t)
	// A restart keeps the key.
	c := startInProcess(t, "--db", dsn)
	if _, v := getJSON(t, http.DefaultClient, c.url+"/api/v1/ledger/public-key", ""); v["publicKey"] != pubs[0] {
		t.Errorf("key after restart %v, want %v", v["publicKey"], pubs[0])
	}
	c.stop(t)
	entries, err := os.ReadDir(home)
	if err != nil || len(entries) != 0 {
		t.Errorf("serve with PostgreSQL wrote to the home directory: %v %v", entries, err)
	}
	// A configured key file is used (and created) instead.
	kf := filepath.Join(t.TempDir(), "ledger.key")
	d := startInProcess(t, "--db", dsn, "--ledger-key-file", kf)
	if _, err := os.Stat(kf); err != nil {
		t.Errorf("configured key file not created: %v", err)
	}
	if _, v := getJSON(t, http.DefaultClient, d.url+"/api/v1/ledger/public-key", ""); v["publicKey"] == pubs[0] {
		t.Error("the configured key file was not used")
	}
}

// TestServeConfigSections: the auth, sharing, metrics and log sections of
// the file take effect, and the environment wins over them (issue 11 item
// 12: they were ignored).
func TestServeConfigSections(t *testing.T) {
	serveEnv(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "vigil.yaml")
	os.WriteFile(cfg, []byte(`data_dir: `+filepath.Join(dir, "data")+`
log: {format: json, level: info}
auth: {admin_username: root, anonymous_read_public: true, session_ttl: 24h, secure_cookies: true}
sharing: {enabled: false}
metrics: {public: true}
gateway: {enabled: true, fail_mode: open}
`), 0o600)
	p := startInProcess(t, "--config", cfg)
	// admin_username: the first user's name.
	if st, v := getJSON(t, http.DefaultClient, p.url+"/api/v1/user/identity", testKey); st != 200 || v["username"] != "root" {
		t.Errorf("identity: %d %v, want user root", st, v)
	}
	// anonymous_read_public: anonymous callers read public datasets.
	if st := anonymousRead(t, p.url); st != 200 {
		t.Errorf("anonymous read of a public dataset: %d, want 200", st)
	}
	// metrics.public: /metrics without a token; the monitor pool's
	// counters are among the families.
	if resp, err := http.Get(p.url + "/metrics"); err != nil || resp.StatusCode != 200 {
		t.Errorf("public metrics: %v %v", err, resp.StatusCode)
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), "\nvigil_monitor_jobs_total ") {
			t.Errorf("metrics lack the monitor pool's vigil_monitor_jobs_total")
		}
	}
	// sharing.enabled=false: PUT …/shared is 403.
	if st, _ := pushOne(t, p.url); st != 200 {
		t.Fatalf("push: %d", st)
	}
	log := p.stderr.String()
	for _, want := range []string{`"msg":"request"`, `"path":"/api/v1/push/trace"`, `"key_id":"`} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %s:\n%s", want, log)
		}
	}
	if strings.Contains(log, testKey) {
		t.Errorf("the log holds the API key:\n%s", log)
	}
	p.stop(t)

	// The environment wins over the file.
	t.Setenv("VIGIL_AUTH_ANONYMOUS_READ_PUBLIC", "false")
	t.Setenv("VIGIL_METRICS_PUBLIC", "false")
	p = startInProcess(t, "--config", cfg)
	if st := anonymousRead(t, p.url); st != 404 && st != 401 {
		t.Errorf("anonymous read of a public dataset with the env override: %d, want 401 or 404", st)
	}
	if resp, err := http.Get(p.url + "/metrics"); err != nil || resp.StatusCode != 401 {
		t.Errorf("metrics with the env override: %v %v, want 401", err, resp.StatusCode)
	} else {
		resp.Body.Close()
	}
	p.stop(t)
	t.Setenv("VIGIL_SHARING_ENABLED", "maybe")
	if code, _, errOut := runVigil(t, "", "serve", "--config", cfg, "--listen", "127.0.0.1:0"); code == 0 || !strings.Contains(errOut, `VIGIL_SHARING_ENABLED: want true or false, got "maybe"`) {
		t.Errorf("bad boolean: exit %d, %s", code, errOut)
	}
}

// anonymousRead makes sure dataset "pub" of user root exists and is
// public, then reads it without a key and returns the status.
func anonymousRead(t *testing.T, url string) int {
	t.Helper()
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/api/v1/dataset/create", `{"name": "pub", "is_public": true}`},
		{"PUT", "/api/v1/dataset/byuser/root/pub", `{"is_public": true}`},
	} {
		req, _ := http.NewRequest(r.method, url+r.path, strings.NewReader(r.body))
		req.Header.Set("Authorization", "Bearer "+testKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	st, _ := getJSON(t, http.DefaultClient, url+"/api/v1/dataset/byuser/root/pub", "")
	return st
}

// TestServeBadLogSettings: a log format or level serve cannot use stops
// it with an error naming the value (an unknown format was taken as
// text).
func TestServeBadLogSettings(t *testing.T) {
	serveEnv(t)
	data := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--log-format", "xml"}, `log format "xml": want text or json`},
		{[]string{"--log-level", "loud"}, `log level "loud": want debug, info, warn or error`},
	} {
		code, _, errOut := runVigil(t, "", append([]string{"serve", "--data-dir", data, "--listen", "127.0.0.1:0"}, tc.args...)...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("serve %v: exit %d, %s", tc.args, code, errOut)
		}
	}
}

// pushOne pushes a one-event trace and tries to share it; it returns the
// push status and the share status.
func pushOne(t *testing.T, url string) (int, int) {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/api/v1/push/trace", strings.NewReader(`{"messages": [[{"role": "user", "content": "hi"}]]}`))
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ ID []string }
	json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return resp.StatusCode, 0
	}
	req, _ = http.NewRequest("PUT", url+"/api/v1/trace/"+out.ID[0]+"/shared", nil)
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != 403 {
		t.Errorf("share with sharing.enabled=false: %d, want 403", resp2.StatusCode)
	}
	return resp.StatusCode, resp2.StatusCode
}

// TestServeTLS: tls.cert_file and tls.key_file make vigil serve speak
// HTTPS (issue 11 item 12: the tls section was ignored).
func TestServeTLS(t *testing.T) {
	serveEnv(t)
	dir := t.TempDir()
	certFile, keyFile := writeTestCert(t, dir)
	cfg := filepath.Join(dir, "vigil.yaml")
	os.WriteFile(cfg, []byte("data_dir: "+filepath.Join(dir, "data")+"\ntls: {cert_file: "+certFile+", key_file: "+keyFile+"}\n"), 0o600)
	p := startInProcess(t, "--config", cfg)
	if !strings.HasPrefix(p.url, "https://") {
		t.Fatalf("listen URL %s, want https", p.url)
	}
	pool := x509.NewCertPool()
	pem, _ := os.ReadFile(certFile)
	pool.AppendCertsFromPEM(pem)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if st, v := getJSON(t, c, p.url+"/healthz", ""); st != 200 || v["status"] != "ok" {
		t.Errorf("healthz over TLS: %d %v", st, v)
	}
	p.stop(t)
	// Half a pair is an error naming both keys.
	os.WriteFile(cfg, []byte("data_dir: "+filepath.Join(dir, "data")+"\ntls: {cert_file: "+certFile+"}\n"), 0o600)
	if code, _, errOut := runVigil(t, "", "serve", "--config", cfg); code == 0 || !strings.Contains(errOut, "cert_file and key_file") {
		t.Errorf("half a TLS pair: exit %d, %s", code, errOut)
	}
}

// writeTestCert writes a self-signed certificate for 127.0.0.1.
func writeTestCert(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "vigil test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	return certFile, keyFile
}
