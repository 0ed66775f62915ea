// Package buildinfo says which build of vigil is running: the module
// version and the VCS commit it was built from, read from the Go build
// information (runtime/debug.ReadBuildInfo). `vigil version` and
// GET /api/v1/version both report Read, so they always agree.
//
// Goals: one answer for every way vigil is built — `go install
// …/cmd/vigil@v1.2.3` (the module version), `go build` in a git clone
// (a pseudo-version and vcs.revision, vcs.time, vcs.modified), a release
// build that sets the version with -ldflags. Non-goals: asking git at run
// time; a build with neither (-buildvcs=false, or a git worktree, which
// the go command does not stamp) is "dev" with no commit.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// Info describes the running binary's build.
type Info struct {
	// Version is the module version ("v1.2.3", or a pseudo-version such as
	// "v0.0.0-20261126013700-c59707174f02" for a build from a commit), or
	// "dev" when the build recorded none.
	Version string `json:"version"`
	// Commit is the full VCS revision ("" when unknown); for a
	// pseudo-version without VCS information, its 12-character prefix.
	Commit string `json:"commit"`
	// CommitTime is the commit's time in RFC 3339 ("" when unknown).
	CommitTime string `json:"commit_time"`
	// Modified is true when the binary was built from a tree with
	// uncommitted changes.
	Modified bool `json:"modified"`
	// Go is the toolchain that built the binary ("go1.26.8").
	Go string `json:"go"`
	// Platform is the binary's GOOS/GOARCH ("linux/amd64").
	Platform string `json:"platform"`
}

// Read returns the running binary's build information. A non-empty
// override other than "dev" (a version set at link time with -ldflags
// "-X main.version=v1.2.3") replaces the module version.
func Read(override string) Info {
	bi, _ := debug.ReadBuildInfo()
	return FromBuildInfo(bi, override)
}

// FromBuildInfo is Read for the build information bi (nil: none).
func FromBuildInfo(bi *debug.BuildInfo, override string) Info {
	info := Info{Version: "dev", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi != nil {
		if bi.GoVersion != "" {
			info.Go = bi.GoVersion
		}
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			info.Version = v
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Commit = s.Value
			case "vcs.time":
				info.CommitTime = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
	}
	// The go command marks a version built from a modified tree "+dirty".
	if base, dirty := strings.CutSuffix(info.Version, "+dirty"); dirty {
		info.Version, info.Modified = base, true
	}
	if info.Commit == "" {
		info.Commit, info.CommitTime = fromPseudoVersion(info.Version)
	}
	if override != "" && override != "dev" {
		info.Version = override
	}
	return info
}

// fromPseudoVersion returns the commit prefix and time of a
// pseudo-version (vX.Y.Z-[pre.]yyyymmddhhmmss-abcdef123456), or "", "".
func fromPseudoVersion(v string) (commit, when string) {
	i := strings.LastIndexByte(v, '-')
	if i < 0 || len(v)-i-1 != 12 {
		return "", ""
	}
	rev := v[i+1:]
	for _, c := range rev {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", ""
		}
	}
	stamp := v[:i]
	stamp = stamp[max(strings.LastIndexByte(stamp, '-'), strings.LastIndexByte(stamp, '.'))+1:]
	t, err := time.Parse("20060102150405", stamp)
	if err != nil {
		return "", ""
	}
	return rev, t.UTC().Format(time.RFC3339)
}

// String renders the build for humans: "v1.2.3 (commit 0123abcd…,
// 2026-11-26T01:37:00Z, modified; go1.26.8, linux/amd64)", or "dev
// (commit unknown; go1.26.8, linux/amd64)".
func (i Info) String() string {
	var b strings.Builder
	b.WriteString(i.Version)
	b.WriteString(" (commit ")
	if i.Commit == "" {
		b.WriteString("unknown")
	} else {
		b.WriteString(i.Commit)
	}
	if i.CommitTime != "" {
		b.WriteString(", ")
		b.WriteString(i.CommitTime)
	}
	if i.Modified {
		b.WriteString(", modified")
	}
	b.WriteString("; ")
	b.WriteString(i.Go)
	b.WriteString(", ")
	b.WriteString(i.Platform)
	b.WriteString(")")
	return b.String()
}
