package server

import (
	"encoding/json"
	"testing"

	"github.com/vigilhq/vigil/internal/buildinfo"
)

// TestVersionEndpoint: GET /api/v1/version reports the build information
// as buildinfo.Read does for `vigil version` (module version, commit,
// commit time, modified, toolchain), with a link-time version replacing
// the module's. It said "dev" for every binary not built with -ldflags.
func TestVersionEndpoint(t *testing.T) {
	for _, tt := range []struct {
		name, configured string
	}{
		{"from the build information", ""},
		{"dev is no override", "dev"},
		{"link-time version", "v1.2.3"},
	} {
		ts := newTestServer(t, openSQLite(t), func(c *Config) { c.Version = tt.configured })
		status, body := ts.do(t, "GET", "/api/v1/version", "", nil)
		if status != 200 {
			t.Fatalf("%s: status %d: %s", tt.name, status, body)
		}
		var fields map[string]any
		if err := json.Unmarshal(body, &fields); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"version", "commit", "commit_time", "modified", "go", "platform", "store", "schema_version"} {
			if _, ok := fields[k]; !ok {
				t.Errorf("%s: no %q in %s", tt.name, k, body)
			}
		}
		var got buildinfo.Info
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		if want := buildinfo.Read(tt.configured); got != want {
			t.Errorf("%s: reported %+v, want %+v", tt.name, got, want)
		}
		if tt.configured == "v1.2.3" && got.Version != "v1.2.3" {
			t.Errorf("%s: version %q", tt.name, got.Version)
		}
	}
}
