package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const benchKey = "bench-admin-key-0123456789"

// buildVigil builds ./cmd/vigil once into dir.
func buildVigil(t testing.TB, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "vigil")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/vigilhq/vigil/cmd/vigil")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

type serveProc struct {
	cmd *exec.Cmd
	url string
}

var listenRx = regexp.MustCompile(`listening on (https?://[^\s"]+)`)

// startServe runs `vigil serve` on a free loopback port with data in dir.
func startServe(t testing.TB, bin, dir string, extra ...string) *serveProc {
	t.Helper()
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dir}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "VIGIL_API_KEY="+benchKey)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if m := listenRx.FindStringSubmatch(sc.Text()); m != nil {
			go io.Copy(io.Discard, stderr)
			return &serveProc{cmd: cmd, url: m[1]}
		}
	}
	t.Fatal("serve did not start")
	return nil
}

// rssBytes reads a process's resident set size from /proc.
func rssBytes(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func post(t testing.TB, url string, body []byte) {
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+benchKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s: %d %s", url, resp.StatusCode, b)
	}
	io.Copy(io.Discard, resp.Body)
}

// TestExportFullSize generates a dataset of VIGIL_BENCH_EXPORT_MB megabytes
// (1024 for the 1 GB run) through the push API, then exports it
// while sampling the server's RSS, and fails if the peak during the export
// exceeds VIGIL_BENCH_EXPORT_MAX_RSS_MB (default 100). Skipped unless
// VIGIL_BENCH_EXPORT_MB is set. Add --db postgres://… through
// VIGIL_BENCH_DB to run it on PostgreSQL.
func TestExportFullSize(t *testing.T) {
	mb, _ := strconv.Atoi(os.Getenv("VIGIL_BENCH_EXPORT_MB"))
	if mb <= 0 {
		t.Skip("set VIGIL_BENCH_EXPORT_MB (e.g. 1024) to run the full-size export benchmark")
	}
	maxRSS := int64(100)
	if v, _ := strconv.Atoi(os.Getenv("VIGIL_BENCH_EXPORT_MAX_RSS_MB")); v > 0 {
		maxRSS = int64(v)
	}
	dir := t.TempDir()
	bin := buildVigil(t, dir)
	var extra []string
	if db := os.Getenv("VIGIL_BENCH_DB"); db != "" {
		extra = append(extra, "--db", db)
	}
	p := startServe(t, bin, filepath.Join(dir, "data"), extra...)

	// Generate: batches of 100 traces × 20 events of ~512 bytes each
	// (~1 MB of events per request), pushed by two clients.
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 11)
	var batch []any
	for i := 0; i < 100; i++ {
		tr := make([]any, 20)
		for k := range tr {
			tr[k] = map[string]any{"role": []string{"user", "assistant"}[k%2], "content": text}
		}
		batch = append(batch, tr)
	}
	body, _ := json.Marshal(map[string]any{"messages": batch, "dataset": "big"})
	requests := mb * (1 << 20) / len(body)
	start := time.Now()
	var wg sync.WaitGroup
	next := make(chan struct{}, requests)
	for i := 0; i < requests; i++ {
		next <- struct{}{}
	}
	close(next)
	for c := 0; c < 2; c++ {
		wg.Go(func() {
			for range next {
				post(t, p.url+"/api/v1/push/trace", body)
			}
		})
	}
	wg.Wait()
	ingest := time.Since(start)
	t.Logf("ingested %d requests (%d MB of JSON, %d events) in %s: %.0f events/s", requests, requests*len(body)>>20,
		requests*2000, ingest.Round(time.Millisecond), float64(requests*2000)/ingest.Seconds())

	// Restart the server so the export is measured on its own, not on
	// top of the heap the ingest left behind; then export while sampling
	// RSS.
	p.cmd.Process.Signal(os.Interrupt)
	p.cmd.Wait()
	p = startServe(t, bin, filepath.Join(dir, "data"), extra...)
	time.Sleep(200 * time.Millisecond)
	before := rssBytes(p.cmd.Process.Pid)
	var peak int64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				peak = max(peak, rssBytes(p.cmd.Process.Pid))
			}
		}
	})
	var id struct{ ID string }
	req, _ := http.NewRequest("GET", p.url+"/api/v1/dataset/byuser/admin/big", nil)
	req.Header.Set("Authorization", "Bearer "+benchKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&id)
	resp.Body.Close()
	start = time.Now()
	req, _ = http.NewRequestWithContext(context.Background(), "GET", p.url+"/api/v1/dataset/byid/"+id.ID+"/download", nil)
	req.Header.Set("Authorization", "Bearer "+benchKey)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	close(stop)
	sampler.Wait()
	if err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	t.Logf("exported %d MB in %s (%.0f MB/s); server RSS before %d MB, peak during export %d MB",
		n>>20, el.Round(time.Millisecond), float64(n>>20)/el.Seconds(), before>>20, peak>>20)
	if n < int64(mb)<<20*9/10 {
		t.Errorf("exported %d bytes, want about %d MB", n, mb)
	}
	if peak > maxRSS<<20 {
		t.Errorf("peak RSS %d MB during export exceeds %d MB", peak>>20, maxRSS)
	}
}
