package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/internal/buildinfo"
)

// TestVersionMatchesAPI: `vigil version` and the running server's GET
// /api/v1/version report the same build (module version and commit from
// the build information, not a fixed "dev").
func TestVersionMatchesAPI(t *testing.T) {
	code, out, errOut := runVigil(t, "", "version")
	if code != 0 {
		t.Fatalf("vigil version: exit %d: %s", code, errOut)
	}
	want := buildinfo.Read(version)
	if line := "vigil " + want.String() + "\n"; out != line {
		t.Errorf("vigil version printed %q, want %q", out, line)
	}
	if !strings.Contains(out, "(commit ") {
		t.Errorf("vigil version %q names no commit", out)
	}

	p := startServe(t, t.TempDir(), "VIGIL_API_KEY="+testKey)
	resp, err := http.Get(p.url + "/api/v1/version")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got buildinfo.Info
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("/api/v1/version reports %+v, vigil version %+v", got, want)
	}
}

// TestVersionLinkTime: a version set with -ldflags "-X main.version=…"
// replaces the module version and keeps the commit.
func TestVersionLinkTime(t *testing.T) {
	defer func(v string) { version = v }(version)
	version = "v1.2.3"
	_, out, _ := runVigil(t, "", "version")
	if want := "vigil v1.2.3 (commit "; !strings.HasPrefix(out, want) {
		t.Errorf("vigil version printed %q, want it to start with %q", out, want)
	}
}
