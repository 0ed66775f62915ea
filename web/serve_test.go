package web_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// The browser tests run against a real vigil serve: the binary built
// from ./cmd/vigil once per test binary, started on a free loopback port
// with its own data directory (SQLite, monitors on, so guardrails turn
// pushes into findings as in production).

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

func vigilBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "vigil-web-test")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "vigil")
		out, err := exec.Command("go", "build", "-o", binPath, "../cmd/vigil").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build ../cmd/vigil: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// newServeEnv starts vigil serve for one test; the env has no in-process
// server (srv, ui and st are nil): tests use its URL and the API.
func newServeEnv(t *testing.T) *env {
	t.Helper()
	bin := vigilBinary(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "serve", "--data-dir", dir, "--listen", addr, "--log-level", "warn")
	cmd.Env = append(os.Environ(), "VIGIL_API_KEY="+adminKey, "HOME="+dir)
	logf, err := os.Create(filepath.Join(dir, "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "serve.log"))
			t.Logf("vigil serve log:\n%s", b)
		}
	})
	url := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("vigil serve did not become ready on %s", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return &env{Server: &httptest.Server{URL: url}, dbPath: filepath.Join(dir, "vigil.db")}
}
