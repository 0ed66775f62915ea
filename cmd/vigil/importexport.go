package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/vigilhq/vigil/client"
)

// vigil import / vigil export: client-side JSONL transfer against a
// running server (spec/explorer-api.md §8, spec/gateway.md §10 for the
// server address and key). Both stream: memory stays bounded whatever the
// file size.

func init() {
	register(command{name: "import", summary: "upload a JSONL dataset file to a server", run: runImport})
	register(command{name: "export", summary: "download a dataset from a server as JSONL", run: runExport})
}

// serverFlags are the flags every client-side command shares.
type serverFlags struct {
	url, key string
	quiet    bool
}

func (sf *serverFlags) register(fs interface {
	StringVar(*string, string, string, string)
	BoolVar(*bool, string, bool, string)
}) {
	fs.StringVar(&sf.url, "url", "", "server `URL`; without a scheme it is http (127.0.0.1:8080, localhost:8080, :8080) (default $VIGIL_URL, $INVARIANT_API_ENDPOINT, $INVARIANT_API_URL, else "+client.DefaultURL+")")
	fs.StringVar(&sf.url, "server", "", "alias of --url")
	fs.StringVar(&sf.key, "api-key", "", "API key (default $VIGIL_API_KEY, else $INVARIANT_API_KEY)")
	fs.BoolVar(&sf.quiet, "q", false, "no progress output")
}

func (sf *serverFlags) client() *client.Client {
	u, k := sf.url, sf.key
	if u == "" {
		u = client.EnvURL()
	}
	if k == "" {
		k = client.EnvKey()
	}
	return client.New(u, k, client.WithUserAgent("vigil-cli/"+version))
}

func runImport(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("import", "import FILE.jsonl --dataset NAME [--append] [--public] [--url URL] [--api-key KEY] [-q]",
		"Upload a JSONL dataset file (explorer-api §8.1) into dataset NAME on a server. The file is\nstreamed; FILE may be - for stdin. Prints the dataset as JSON on stdout.", stderr)
	var sf serverFlags
	sf.register(fs)
	dataset := fs.String("dataset", "", "dataset name (required)")
	appendMode := fs.Bool("append", false, "add to a dataset that already has traces")
	public := fs.Bool("public", false, "make a new dataset public")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("import: want exactly one FILE argument")
	}
	if *dataset == "" {
		return errors.New("import: --dataset is required")
	}
	var src io.Reader
	var total int64 = -1
	if pos[0] == "-" {
		src = stdin
	} else {
		f, err := os.Open(pos[0])
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil {
			total = st.Size()
		}
		src = f
	}
	prog := newProgress(stderr, "import "+pos[0], total, sf.quiet)
	d, err := sf.client().Upload(ctx, *dataset, &countingReader{r: src, p: prog}, client.UploadOptions{IsPublic: *public, Append: *appendMode})
	prog.done(err == nil)
	if err != nil {
		return fmt.Errorf("import %s: %w", pos[0], err)
	}
	n := 0
	if d.NumTraces != nil {
		n = *d.NumTraces
	}
	fmt.Fprintf(stdout, "{\"id\":%q,\"name\":%q,\"num_traces\":%d}\n", d.ID, d.Name, n)
	return nil
}

func runExport(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("export", "export --dataset NAME [-o FILE] [--owner USER] [--include-trace-ids] [--only-annotated] [--url URL] [--api-key KEY] [-q]",
		"Download dataset NAME from a server as JSONL (explorer-api §8.1), streamed to FILE or stdout.", stderr)
	var sf serverFlags
	sf.register(fs)
	dataset := fs.String("dataset", "", "dataset name, or its id (required)")
	out := fs.String("o", "", "output file (default stdout)")
	owner := fs.String("owner", "", "the dataset owner's username (default: the key's user)")
	ids := fs.Bool("include-trace-ids", false, "include trace ids")
	annotated := fs.Bool("only-annotated", false, "only traces with annotations")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return fmt.Errorf("export: unexpected argument %q", pos[0])
	}
	if *dataset == "" {
		return errors.New("export: --dataset is required")
	}
	c := sf.client()
	id, err := resolveDataset(ctx, c, *dataset, *owner)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	body, err := c.Export(ctx, id, client.ExportOptions{IncludeTraceIDs: *ids, OnlyAnnotated: *annotated})
	if err != nil {
		return fmt.Errorf("export %s: %w", *dataset, err)
	}
	defer body.Close()
	var dst io.Writer = stdout
	var f *os.File
	if *out != "" && *out != "-" {
		// Write beside the target and rename on success, so a failed
		// export never leaves a truncated file that looks complete.
		if f, err = os.CreateTemp(filepath.Dir(*out), "."+filepath.Base(*out)+".*.part"); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		defer os.Remove(f.Name()) // no-op after the rename
		dst = f
	}
	prog := newProgress(stderr, "export "+*dataset, -1, sf.quiet)
	_, err = io.Copy(dst, &countingReader{r: body, p: prog})
	if f != nil {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			if err = os.Chmod(f.Name(), 0o644); err == nil {
				err = os.Rename(f.Name(), *out)
			}
		}
	}
	prog.done(err == nil)
	if err != nil {
		return fmt.Errorf("export %s: %w", *dataset, err)
	}
	return nil
}

// resolveDataset returns the id of dataset nameOrID (a name in owner's
// namespace, default the key's user, or an id).
func resolveDataset(ctx context.Context, c *client.Client, nameOrID, owner string) (string, error) {
	if owner == "" {
		if strings.Count(nameOrID, "-") == 4 && len(nameOrID) == 36 {
			if d, err := c.GetDataset(ctx, nameOrID); err == nil {
				return d.ID, nil
			}
		}
		me, err := c.Identity(ctx)
		var down *client.UnreachableError
		if errors.As(err, &down) {
			return "", err // says all: no "who am I" in front
		}
		if err != nil {
			return "", fmt.Errorf("find the dataset owner (the key's user): %w", err)
		}
		owner = me.Username
	}
	d, err := c.GetDatasetByName(ctx, owner, nameOrID)
	if err != nil {
		return "", fmt.Errorf("dataset %s/%s: %w", owner, nameOrID, err)
	}
	return d.ID, nil
}

// progress reports transferred bytes on stderr: a redrawn bar on a
// terminal, a plain line every few seconds otherwise, nothing when quiet.
type progress struct {
	w        io.Writer
	label    string
	total    int64
	tty      bool
	off      bool
	mu       sync.Mutex
	n        int64
	start    time.Time
	last     time.Time
	interval time.Duration
}

func newProgress(w io.Writer, label string, total int64, quiet bool) *progress {
	p := &progress{w: w, label: label, total: total, off: quiet, start: time.Now(), interval: 5 * time.Second}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty, p.interval = true, 100*time.Millisecond
		}
	}
	p.last = p.start
	return p
}

func (p *progress) add(n int) {
	if p.off {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n += int64(n)
	if now := time.Now(); now.Sub(p.last) >= p.interval {
		p.last = now
		p.draw(false)
	}
}

func (p *progress) draw(final bool) {
	el := time.Since(p.start).Seconds()
	rate := ""
	if el > 0 {
		rate = fmt.Sprintf(" %s/s", humanBytes(int64(float64(p.n)/el)))
	}
	var line string
	if p.total > 0 {
		pct := float64(p.n) / float64(p.total)
		if pct > 1 {
			pct = 1
		}
		if p.tty {
			const width = 30
			fill := int(pct * width)
			line = fmt.Sprintf("%s [%s%s] %3.0f%% %s/%s%s", p.label, strings.Repeat("=", fill), strings.Repeat(" ", width-fill), pct*100, humanBytes(p.n), humanBytes(p.total), rate)
		} else {
			line = fmt.Sprintf("%s: %s of %s (%.0f%%)%s", p.label, humanBytes(p.n), humanBytes(p.total), pct*100, rate)
		}
	} else {
		line = fmt.Sprintf("%s: %s%s", p.label, humanBytes(p.n), rate)
	}
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		if final {
			fmt.Fprintln(p.w)
		}
	} else {
		fmt.Fprintf(p.w, "vigil: %s\n", line)
	}
}

// done draws the last state (only on success, or on a terminal to end the line).
func (p *progress) done(ok bool) {
	if p.off {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if ok || p.tty {
		p.draw(true)
	}
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// countingReader reports bytes read to a progress.
type countingReader struct {
	r io.Reader
	p *progress
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.p.add(n)
	return n, err
}
