package vigil_test

// readme_test runs every command of README.md's ```sh blocks, so the README
// cannot drift from the code (expr's examples_test, applied to a shell README).
//
// Rules, so that the README stays plain to read:
//   - Each non-empty line of a ```sh block is one command, run by bash with
//     a freshly built vigil first on PATH; "go run ./cmd/vigil" means vigil.
//   - A trailing "# exit N" comment gives the expected exit status (default 0).
//   - "export K=V" lines set the environment of later lines.
//   - "vigil serve" (with or without a trailing &) starts a server in the
//     background on a free loopback port; the test waits for /healthz and
//     stops the server at the end of the block.
//   - "go test" lines are skipped (this test is part of that run).
//   - Paths under /tmp/ are rewritten into the test's own temporary folder,
//     and 127.0.0.1:8080 into the test server's address.

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

type readmeLine struct {
	lineNo   int
	cmd      string
	wantExit int
}

type readmeBlock struct {
	startLine int
	lines     []readmeLine
}

var exitComment = regexp.MustCompile(`#\s*exit\s+(\d+)`)

// parseReadme returns the ```sh blocks of a markdown text.
func parseReadme(text string) []readmeBlock {
	var blocks []readmeBlock
	var cur *readmeBlock
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && trimmed == "```sh":
			blocks = append(blocks, readmeBlock{startLine: n})
			cur = &blocks[len(blocks)-1]
		case cur != nil && trimmed == "```":
			cur = nil
		case cur != nil && trimmed != "":
			l := readmeLine{lineNo: n, cmd: trimmed}
			if m := exitComment.FindStringSubmatch(trimmed); m != nil {
				l.wantExit, _ = strconv.Atoi(m[1])
			}
			// Drop a trailing comment: two spaces then '#', outside quotes in our README.
			if i := strings.Index(l.cmd, "  #"); i >= 0 {
				l.cmd = strings.TrimSpace(l.cmd[:i])
			}
			cur.lines = append(cur.lines, l)
		}
	}
	return blocks
}

func TestReadmeParse(t *testing.T) {
	blocks := parseReadme("text\n```sh\nvigil a   # exit 1\n\nexport X=1\n```\n```go\nnot run\n```\n")
	if len(blocks) != 1 || len(blocks[0].lines) != 2 {
		t.Fatalf("blocks = %+v", blocks)
	}
	if l := blocks[0].lines[0]; l.cmd != "vigil a" || l.wantExit != 1 || l.lineNo != 3 {
		t.Errorf("line = %+v", l)
	}
}

func TestReadmeExamples(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("README examples are bash commands")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not found: skipping README examples")
	}
	src, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := parseReadme(string(src))
	if len(blocks) == 0 {
		t.Fatal("README.md has no ```sh blocks")
	}

	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "vigil"), "./cmd/vigil")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/vigil: %v\n%s", err, out)
	}
	tmp := t.TempDir()
	home := filepath.Join(tmp, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	env := append(os.Environ(),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HOME="+home,
		"VIGIL_LISTEN="+addr,
		"VIGIL_URL=http://"+addr,
		"NO_COLOR=1",
	)
	for _, b := range blocks {
		t.Run(fmt.Sprintf("line%d", b.startLine), func(t *testing.T) {
			var servers []*exec.Cmd
			defer func() {
				for _, s := range servers {
					s.Process.Signal(syscall.SIGTERM)
					done := make(chan struct{})
					go func() { s.Wait(); close(done) }()
					select {
					case <-done:
					case <-time.After(10 * time.Second):
						s.Process.Kill()
						<-done
					}
				}
			}()
			for _, l := range b.lines {
				cmd := strings.ReplaceAll(l.cmd, "go run ./cmd/vigil", "vigil")
				cmd = strings.ReplaceAll(cmd, "/tmp/", tmp+"/")
				cmd = strings.ReplaceAll(cmd, "127.0.0.1:8080", addr)
				switch {
				case strings.HasPrefix(cmd, "go test"):
					continue
				case strings.HasPrefix(cmd, "export "):
					kv := strings.TrimPrefix(cmd, "export ")
					k, v, ok := strings.Cut(kv, "=")
					if !ok {
						t.Fatalf("README.md:%d: export without '='", l.lineNo)
					}
					env = append(env, k+"="+strings.Trim(v, `'"`))
					continue
				case strings.HasPrefix(cmd, "vigil serve"):
					cmd = strings.TrimSpace(strings.TrimSuffix(cmd, "&"))
					s := exec.Command("bash", "-c", "exec "+cmd)
					s.Env = env
					var out bytes.Buffer
					s.Stdout, s.Stderr = &out, &out
					if err := s.Start(); err != nil {
						t.Fatalf("README.md:%d: %s: %v", l.lineNo, l.cmd, err)
					}
					servers = append(servers, s)
					waitHealthy(t, "http://"+addr+"/healthz", &out, l)
					continue
				}
				c := exec.Command("bash", "-c", cmd)
				c.Env = env
				out, err := c.CombinedOutput()
				code := 0
				if ee, ok := err.(*exec.ExitError); ok {
					code = ee.ExitCode()
				} else if err != nil {
					t.Fatalf("README.md:%d: %s: %v", l.lineNo, l.cmd, err)
				}
				if code != l.wantExit {
					t.Errorf("README.md:%d: %s\nexit %d, want %d; output:\n%s", l.lineNo, l.cmd, code, l.wantExit, out)
				}
			}
		})
	}
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitHealthy(t *testing.T, url string, out *bytes.Buffer, l readmeLine) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("README.md:%d: %s: server not healthy within 30s; output:\n%s", l.lineNo, l.cmd, out)
}

// TestReadmeCitesNoDesignDocs fails on a README line that cites the design
// documents (shared/spec/…, "policy-language §13.3"): a user of the
// repository does not have them; the README cites docs/ instead.
func TestReadmeCitesNoDesignDocs(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	rx := regexp.MustCompile(`shared/|spec/|§|policy-language|explorer-api|gateway\.md|ledger\.md|web-ui\.md`)
	for i, line := range strings.Split(string(data), "\n") {
		if rx.MatchString(line) {
			t.Errorf("README.md:%d cites a design document: %s", i+1, line)
		}
	}
}
