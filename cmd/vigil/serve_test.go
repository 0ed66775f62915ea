package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/store/sqlite"
)

// TestServeHelperProcess is not a test: when VIGIL_SERVE_HELPER is set, the
// re-executed test binary runs "vigil <args>" (args in VIGIL_SERVE_ARGS,
// separated by \x1f) as the real binary would, and exits.
func TestServeHelperProcess(t *testing.T) {
	if os.Getenv("VIGIL_SERVE_HELPER") != "1" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, strings.Split(os.Getenv("VIGIL_SERVE_ARGS"), "\x1f"), os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const testKey = "serve-test-key-0123456789"

// serveProc is a `vigil serve` subprocess.
type serveProc struct {
	cmd    *exec.Cmd
	url    string
	stderr *syncBuffer
	done   chan struct{} // closed when the process has exited
	err    error         // its Wait error, valid after done
}

// wait waits for the process to exit and returns its Wait error.
func (p *serveProc) wait() error {
	<-p.done
	return p.err
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

var listenRx = regexp.MustCompile(`listening on (https?://[^\s"]+)`)

// startServe starts `vigil serve --listen 127.0.0.1:0 --data-dir dir` in a
// re-executed test binary and waits until it listens.
func startServe(t *testing.T, dir string, env ...string) *serveProc {
	t.Helper()
	args := []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dir}
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeHelperProcess$")
	cmd.Env = append(os.Environ(), "VIGIL_SERVE_HELPER=1", "VIGIL_SERVE_ARGS="+strings.Join(args, "\x1f"), "VIGIL_LEDGER_KEY=")
	cmd.Env = append(cmd.Env, env...)
	pr, pw := io.Pipe()
	p := &serveProc{cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = io.MultiWriter(p.stderr, pw) // buffer first: whatever precedes the listen line is in p.stderr once it is seen
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); pw.Close(); close(p.done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		p.wait()
	})
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := listenRx.FindStringSubmatch(sc.Text()); m != nil {
				urlc <- m[1]
			}
		}
		io.Copy(io.Discard, pr)
	}()
	select {
	case p.url = <-urlc:
	case <-p.done:
		t.Fatalf("serve exited: %v\n%s", p.err, p.stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not start:\n%s", p.stderr.String())
	}
	return p
}

// ingest pushes batches from several goroutines until stop is closed and
// returns the acknowledged trace ids with their event counts.
func ingest(url string, stop <-chan struct{}) map[string]int {
	var mu sync.Mutex
	acked := map[string]int{}
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		wg.Go(func() {
			c := client.New(url, testKey, client.WithRetries(0))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				req := client.PushRequest{Dataset: "crash"}
				for k := 0; k < 5; k++ {
					req.Messages = append(req.Messages, []any{
						map[string]any{"role": "user", "content": fmt.Sprintf("worker %d batch %d trace %d", w, i, k)},
						map[string]any{"role": "assistant", "content": "ok"},
					})
				}
				res, err := c.Push(context.Background(), req)
				if err != nil {
					return // the server went away
				}
				mu.Lock()
				for _, id := range res.ID {
					acked[id] = 2
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return acked
}

// checkAcked reopens the store and checks that every acknowledged trace
// is there with all its events and one receipt per event.
func checkAcked(t *testing.T, dir string, acked map[string]int) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "vigil.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	for id, n := range acked {
		tr, err := st.GetTrace(ctx, id, true)
		if err != nil {
			t.Fatalf("acknowledged trace %s lost: %v", id, err)
		}
		if len(tr.Messages) != n {
			t.Fatalf("trace %s has %d events, want %d", id, len(tr.Messages), n)
		}
		recs, err := st.ListReceipts(ctx, tr.SessionID, 0, 0)
		if err != nil || len(recs) != n {
			t.Fatalf("trace %s: %d receipts (%v), want %d", id, len(recs), err, n)
		}
	}
}

// TestServeKillLosesNoAcknowledgedTrace SIGKILLs the server mid-ingest and
// checks, after reopening the store, that every trace the server
// acknowledged is stored with its events and receipts.
func TestServeKillLosesNoAcknowledgedTrace(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	dir := t.TempDir()
	p := startServe(t, dir, "VIGIL_API_KEY="+testKey)
	stop := make(chan struct{})
	res := make(chan map[string]int)
	go func() { res <- ingest(p.url, stop) }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		if n := countTraces(t, p.url); n >= 100 {
			break
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait()
	close(stop)
	acked := <-res
	if len(acked) == 0 {
		t.Fatalf("nothing was acknowledged before the kill:\n%s", p.stderr.String())
	}
	t.Logf("%d traces acknowledged before SIGKILL", len(acked))
	checkAcked(t, dir, acked)
}

// TestServeGracefulShutdown sends SIGTERM mid-ingest: the server exits 0
// and every acknowledged trace is stored.
func TestServeGracefulShutdown(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	dir := t.TempDir()
	p := startServe(t, dir, "VIGIL_API_KEY="+testKey)
	stop := make(chan struct{})
	res := make(chan map[string]int)
	go func() { res <- ingest(p.url, stop) }()
	time.Sleep(500 * time.Millisecond)
	p.cmd.Process.Signal(syscall.SIGTERM)
	err := p.wait()
	close(stop)
	acked := <-res
	if err != nil {
		t.Fatalf("serve exit after SIGTERM: %v\n%s", err, p.stderr.String())
	}
	if !strings.Contains(p.stderr.String(), "shutting down") {
		t.Errorf("no shutdown log:\n%s", p.stderr.String())
	}
	checkAcked(t, dir, acked)
}

// TestServeFirstStart checks the bootstrap key is printed once, works, and
// that the ledger key file is created with mode 0600.
func TestServeFirstStart(t *testing.T) {
	dir := t.TempDir()
	p := startServe(t, dir, "VIGIL_API_KEY=")
	m := regexp.MustCompile(`created admin API key \(shown once, store it now\): (vgl-[0-9a-f]{64})`).FindStringSubmatch(p.stderr.String())
	if m == nil {
		t.Fatalf("no admin key printed:\n%s", p.stderr.String())
	}
	id, err := client.New(p.url, m[1]).Identity(context.Background())
	if err != nil || id.Username != "admin" || id.Scope != store.ScopeAdmin {
		t.Fatalf("identity with printed key: %v %+v", err, id)
	}
	fi, err := os.Stat(filepath.Join(dir, "ledger.key"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("ledger key file: %v %v", err, fi)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.wait()
	p2 := startServe(t, dir, "VIGIL_API_KEY=")
	if strings.Contains(p2.stderr.String(), "created admin API key") {
		t.Fatalf("second start printed a key again:\n%s", p2.stderr.String())
	}
}

func countTraces(t *testing.T, url string) int {
	req, _ := http.NewRequest("GET", url+"/api/v1/dataset/byuser/admin/crash", nil)
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var d struct {
		NumTraces int `json:"num_traces"`
	}
	json.NewDecoder(resp.Body).Decode(&d)
	return d.NumTraces
}

// TestEnvSize checks the size syntax of VIGIL_LIMITS_*; a size too large
// for int64 is an error, not a wrapped (negative, so silently default)
// limit.
func TestEnvSize(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		err  bool
	}{
		{"", 0, false},
		{"4096", 4096, false},
		{" 64 MiB ", 64 << 20, false},
		{"2KiB", 2048, false},
		{"1GiB", 1 << 30, false},
		{"0", 0, true},
		{"-1MiB", 0, true},
		{"lots", 0, true},
		{"8589934592GiB", 0, true},
		{"9007199254740992KiB", 0, true},
	} {
		t.Setenv("VIGIL_TEST_SIZE", tt.in)
		got, err := envSize("VIGIL_TEST_SIZE")
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("envSize(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

// TestServeLimitsFromConfig: the config file's limits section reaches the
// server: max_json_bytes (413), max_connections (429 with Retry-After)
// and body_idle_timeout (408).
func TestServeLimitsFromConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "vigil.yaml")
	os.WriteFile(cfg, []byte("limits:\n  max_json_bytes: 1KiB\n  max_connections: 2\n  body_idle_timeout: 2s\n"), 0o644)
	p := startServe(t, filepath.Join(dir, "data"), "VIGIL_CONFIG="+cfg, "VIGIL_API_KEY="+testKey)
	addr := strings.TrimPrefix(p.url, "http://")
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	status := func(c net.Conn, br *bufio.Reader) (int, string) {
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("read response: %v", err)
		}
		defer resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	push := func(length int, part string) string {
		return fmt.Sprintf("POST /api/v1/push/trace HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s", testKey, length, part)
	}
	// Two connections stall in their bodies; a third is over the limit.
	var held [2]struct {
		c  net.Conn
		br *bufio.Reader
	}
	for i := range held {
		held[i].c, held[i].br = dial()
		io.WriteString(held[i].c, push(500, `{"messages":`))
	}
	time.Sleep(200 * time.Millisecond)
	c, br := dial()
	io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	if code, ra := status(c, br); code != http.StatusTooManyRequests || ra == "" {
		t.Errorf("third connection: %d (Retry-After %q), want 429 with Retry-After", code, ra)
	}
	// The stalled bodies are cut off after the idle timeout.
	for _, h := range held {
		if code, _ := status(h.c, h.br); code != http.StatusRequestTimeout {
			t.Errorf("stalled body: %d, want 408", code)
		}
	}
	// A body over max_json_bytes is refused (once the server has closed
	// the cut-off connections and freed their slots).
	body := `{"messages":[[{"role":"user","content":"` + strings.Repeat("x", 2000) + `"}]]}`
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		c, br = dial()
		io.WriteString(c, push(len(body), body))
		code, _ := status(c, br)
		if code == http.StatusTooManyRequests && time.Now().Before(deadline) {
			continue
		}
		if code != http.StatusRequestEntityTooLarge {
			t.Errorf("2 KB push: %d, want 413", code)
		}
		break
	}
}
