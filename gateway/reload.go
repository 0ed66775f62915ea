package gateway

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"
)

// Global rule files reload live (spec §5, §10): their modification time
// and size are checked every interval (2 s in vigil serve and vigil
// gateway) and the rules are reloaded on a change or on SIGHUP. A new
// version that does not load is logged and the old rules stay.

// Global returns the global guardrails in force.
func (g *Gateway) Global() []*Guardrail {
	if p := g.global.Load(); p != nil {
		return *p
	}
	return nil
}

// SetGlobal replaces the global guardrails (compiled, Policy set); calls
// that started earlier keep the rules they resolved.
func (g *Gateway) SetGlobal(gs []*Guardrail) {
	gs = append([]*Guardrail(nil), gs...)
	g.global.Store(&gs)
}

// WatchGlobal reloads the global guardrails with load whenever one of
// files changes and then stays unchanged for one interval (checked every
// interval), or hup receives, until ctx is done. A load error is logged and the previous rules stay in force.
// It returns at once; the watch runs in its own goroutine.
func (g *Gateway) WatchGlobal(ctx context.Context, files []string, interval time.Duration, hup <-chan os.Signal, load func() ([]*Guardrail, error)) {
	if interval <= 0 {
		interval = 2 * time.Second
	}
	last := fileStamps(files)
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		// A change is loaded once the files have stopped changing for one
		// interval: an editor or a script that truncates and then writes
		// would otherwise have its empty, half-written file loaded as
		// the new rules.
		pending := ""
		for {
			why := ""
			select {
			case <-ctx.Done():
				return
			case <-hup:
				why = "SIGHUP"
			case <-t.C:
			}
			now := fileStamps(files)
			if why == "" {
				if now == last {
					pending = ""
					continue
				}
				if now != pending {
					pending = now
					continue
				}
				why = "a rule file changed"
			}
			last, pending = now, ""
			gs, err := load()
			if err != nil {
				g.log.Error("gateway: global guardrails not reloaded; the previous rules stay in force", "reason", why, "err", err)
				continue
			}
			g.SetGlobal(gs)
			g.log.Info("gateway: global guardrails reloaded", "reason", why, "rules", len(gs))
		}
	}()
}

// fileStamps is the modification time and size of each file, one
// string (a missing file has its error instead).
func fileStamps(files []string) string {
	var b strings.Builder
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", f, err)
			continue
		}
		fmt.Fprintf(&b, "%s %d %d\n", f, fi.ModTime().UnixNano(), fi.Size())
	}
	return b.String()
}
