package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	plat := runtime.GOOS + "/" + runtime.GOARCH
	vcs := func(kv ...string) []debug.BuildSetting {
		var out []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			out = append(out, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	tests := []struct {
		name     string
		bi       *debug.BuildInfo
		override string
		want     Info
		str      string
	}{
		{"no build information", nil, "", Info{Version: "dev", Go: runtime.Version(), Platform: plat}, "dev (commit unknown; " + runtime.Version() + ", " + plat + ")"},
		{"devel build without VCS (a git worktree, -buildvcs=false)",
			&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, "dev",
			Info{Version: "dev", Go: "go1.26.8", Platform: plat}, "dev (commit unknown; go1.26.8, " + plat + ")"},
		{"go install of a release", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}}, "",
			Info{Version: "v1.2.3", Go: "go1.26.8", Platform: plat}, "v1.2.3 (commit unknown; go1.26.8, " + plat + ")"},
		{"go build in a clone with changes",
			&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261126013700-c59707174f02+dirty"},
				Settings: vcs("vcs", "git", "vcs.revision", "c59707174f0270c05c88346c8eccd975b733c484", "vcs.time", "2026-11-26T01:37:00Z", "vcs.modified", "true")}, "",
			Info{Version: "v0.0.0-20261126013700-c59707174f02", Commit: "c59707174f0270c05c88346c8eccd975b733c484", CommitTime: "2026-11-26T01:37:00Z", Modified: true, Go: "go1.26.8", Platform: plat},
			"v0.0.0-20261126013700-c59707174f02 (commit c59707174f0270c05c88346c8eccd975b733c484, 2026-11-26T01:37:00Z, modified; go1.26.8, " + plat + ")"},
		{"clean clone: vcs.modified false",
			&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs("vcs.revision", "abc", "vcs.modified", "false")}, "",
			Info{Version: "dev", Commit: "abc", Go: "go1.26.8", Platform: plat}, "dev (commit abc; go1.26.8, " + plat + ")"},
		{"go install of a commit: the pseudo-version names it",
			&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.4-0.20261126013700-c59707174f02"}}, "",
			Info{Version: "v1.2.4-0.20261126013700-c59707174f02", Commit: "c59707174f02", CommitTime: "2026-11-26T01:37:00Z", Go: "go1.26.8", Platform: plat},
			"v1.2.4-0.20261126013700-c59707174f02 (commit c59707174f02, 2026-11-26T01:37:00Z; go1.26.8, " + plat + ")"},
		{"pre-release pseudo-version",
			&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.3.0-rc.1.0.20261126013700-0123456789ab"}}, "",
			Info{Version: "v1.3.0-rc.1.0.20261126013700-0123456789ab", Commit: "0123456789ab", CommitTime: "2026-11-26T01:37:00Z", Go: "go1.26.8", Platform: plat}, ""},
		{"a tag with a hash-like suffix is not a pseudo-version",
			&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.0.0-beta-0123456789ab"}}, "",
			Info{Version: "v1.0.0-beta-0123456789ab", Go: "go1.26.8", Platform: plat}, ""},
		{"link-time version overrides the module's, keeps the commit",
			&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs("vcs.revision", "abc")}, "v2.0.0",
			Info{Version: "v2.0.0", Commit: "abc", Go: "go1.26.8", Platform: plat}, "v2.0.0 (commit abc; go1.26.8, " + plat + ")"},
	}
	for _, tt := range tests {
		got := FromBuildInfo(tt.bi, tt.override)
		if got != tt.want {
			t.Errorf("%s: got %+v, want %+v", tt.name, got, tt.want)
		}
		if tt.str != "" && got.String() != tt.str {
			t.Errorf("%s: String() = %q, want %q", tt.name, got.String(), tt.str)
		}
	}
}

// TestRead reads this test binary's own build information.
func TestRead(t *testing.T) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		t.Skip("test binary has no build information")
	}
	if got, want := Read(""), FromBuildInfo(bi, ""); got != want {
		t.Errorf("Read() = %+v, want %+v", got, want)
	}
	if got := Read("v9.9.9"); got.Version != "v9.9.9" {
		t.Errorf("Read(v9.9.9).Version = %q", got.Version)
	}
}
