package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// procStatus reads one "Name: N kB" field of /proc/PID/status in bytes
// (VmRSS: resident now; VmHWM: the peak resident size so far).
func procStatus(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, field+":") {
			f := strings.Fields(line)
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// bigPushBody returns a push body of about mb megabytes of agent runs.
func bigPushBody(mb int) []byte {
	unit := pushBody(100, 20)
	n := max(1, mb<<20*100/len(unit))
	return pushBody(n, 20)
}

// TestPushPeakRSS pushes one body of VIGIL_BENCH_PUSH_MB megabytes (50 for
// issue 17's figure) to a fresh `vigil serve` and reports the server's
// peak resident size (VmHWM) before and after; it fails when the peak
// grows by more than 3× the body (the bound). Skipped unless the
// variable is set. VIGIL_BENCH_PUSH_CLIENTS pushes that many copies at
// once (the budget then answers some with 429).
func TestPushPeakRSS(t *testing.T) {
	mb, _ := strconv.Atoi(os.Getenv("VIGIL_BENCH_PUSH_MB"))
	if mb <= 0 {
		t.Skip("set VIGIL_BENCH_PUSH_MB (e.g. 50) to measure a large push's peak RSS")
	}
	clients := max(1, atoi(os.Getenv("VIGIL_BENCH_PUSH_CLIENTS")))
	dir := t.TempDir()
	bin := buildVigil(t, dir)
	body := bigPushBody(mb)
	p := startServe(t, bin, filepath.Join(dir, "data"))
	pid := p.cmd.Process.Pid
	post(t, p.url+"/api/v1/push/trace", pushBody(1, 2)) // warm up: dataset, caches
	base := procStatus(pid, "VmHWM")
	start := time.Now()
	var wg sync.WaitGroup
	codes := make([]int, clients)
	for c := range clients {
		wg.Go(func() {
			req, _ := http.NewRequest("POST", p.url+"/api/v1/push/trace", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+benchKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes[c] = resp.StatusCode
		})
	}
	wg.Wait()
	peak := procStatus(pid, "VmHWM")
	t.Logf("%d push(es) of %.1f MB in %s (status %v): server VmHWM %d MB before, %d MB after (+%.1f× the body)",
		clients, float64(len(body))/(1<<20), time.Since(start).Round(time.Millisecond), codes,
		base>>20, peak>>20, float64(peak-base)/float64(len(body)))
	if clients == 1 && codes[0] == http.StatusOK && peak-base > 3*int64(len(body)) {
		t.Errorf("peak RSS grew by %d MB for a %d MB push, more than 3×", (peak-base)>>20, len(body)>>20)
	}
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// TestStalledConnectionsRSS opens VIGIL_BENCH_STALLED connections (1000
// for issue 17's figure) that each declare a 60 MB push, send one byte and
// stall, then reports the server's resident size after
// VIGIL_BENCH_STALL_WAIT (default 3s) and after the body idle timeout
// (VIGIL_BENCH_IDLE, passed to --body-idle-timeout when set).
func TestStalledConnectionsRSS(t *testing.T) {
	n := atoi(os.Getenv("VIGIL_BENCH_STALLED"))
	if n <= 0 {
		t.Skip("set VIGIL_BENCH_STALLED (e.g. 1000) to measure stalled connections' RSS")
	}
	wait := 3 * time.Second
	if d, err := time.ParseDuration(os.Getenv("VIGIL_BENCH_STALL_WAIT")); err == nil {
		wait = d
	}
	dir := t.TempDir()
	bin := buildVigil(t, dir)
	var extra []string
	if v := os.Getenv("VIGIL_BENCH_SERVE_FLAGS"); v != "" {
		extra = strings.Fields(v)
	}
	p := startServe(t, bin, filepath.Join(dir, "data"), extra...)
	pid := p.cmd.Process.Pid
	post(t, p.url+"/api/v1/push/trace", pushBody(1, 2))
	base := procStatus(pid, "VmRSS")
	addr := strings.TrimPrefix(p.url, "http://")
	head := "POST /api/v1/push/trace HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer " + benchKey +
		"\r\nContent-Type: application/json\r\nContent-Length: 60000000\r\n\r\n{"
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	refused := 0
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			refused++
			continue
		}
		conns = append(conns, c)
		c.Write([]byte(head))
	}
	time.Sleep(wait)
	rss, hwm := procStatus(pid, "VmRSS"), procStatus(pid, "VmHWM")
	// How many got an answer (429 over the connection limit, 408 after
	// the idle timeout), were closed without one (over the limit while 64
	// answers were in progress) or are still held?
	answered := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			buf := make([]byte, 64)
			k, err := io.ReadAtLeast(c, buf, 12)
			status := "held"
			switch {
			case k >= 12:
				status = string(buf[9:12])
			case err != nil && !errors.Is(err, os.ErrDeadlineExceeded):
				status = "closed"
			}
			mu.Lock()
			answered[status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	t.Logf("%d stalled connections (%d refused at dial): server RSS %d MB before, %d MB after %s (VmHWM %d MB); answers %v",
		n, refused, base>>20, rss>>20, wait, hwm>>20, answered)
}
