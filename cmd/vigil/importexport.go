package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/vigilhq/vigil/client"
)

// vigil import / vigil export: client-side JSONL transfer against a
// running server (docs/api.md, "Upload and export"; docs/configuration.md
// for the server address and key). Both stream: memory stays bounded whatever the
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
	fs.BoolVar(&sf.quiet, "quiet", false, "alias of -q")
}

// client returns the client for the flags and environment, or the error
// of an unusable server URL (before anything is read or sent).
func (sf *serverFlags) client() (*client.Client, error) {
	u, k := sf.url, sf.key
	if u == "" {
		u = client.EnvURL()
	}
	if k == "" {
		k = client.EnvKey()
	}
	if _, err := client.ParseURL(u); err != nil {
		return nil, err
	}
	return client.New(u, k, client.WithUserAgent("vigil-cli/"+version)), nil
}

func runImport(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("import", "import FILE.jsonl --dataset NAME [--append] [--renumber] [--public] [--url URL] [--api-key KEY] [-q]",
		"Upload a JSONL dataset file (one trace per line; the format is in docs/api.md) into\ndataset NAME on a server. The file is streamed; FILE may be - for stdin. Prints the\ndataset as JSON on stdout. Progress goes to stderr: traces and events sent with a rate\nand an ETA, then the server's storing phase (redrawn on a terminal, a line every 5 s\notherwise, nothing with -q). With --append, the file's trace indices must be unused in\nthe dataset; --renumber drops them instead.", stderr)
	var sf serverFlags
	sf.register(fs)
	dataset := fs.String("dataset", "", "dataset name (required)")
	appendMode := fs.Bool("append", false, "add to a dataset that already has traces (the file's indices must be unused there; see --renumber)")
	renumber := fs.Bool("renumber", false, "drop the file's trace indices: the traces get the dataset's next free ones (to append a file exported from a dataset)")
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
	c, err := sf.client()
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	head, br, complete := peekHead(src)
	if msg := kindMismatch(pos[0], sniffFile(head, complete), true, map[fileKind]string{
		kindTrace:      "'jq -c . " + pos[0] + " > trace.jsonl' makes it a one-trace dataset to import",
		kindEventLines: "'jq -cs . " + pos[0] + " > trace.jsonl' makes them a one-trace dataset to import",
	}); msg != "" {
		return errors.New("import: " + msg)
	}
	// Check the key before streaming the file: a server refuses a large
	// upload by a bad key before reading it and closes the connection, and
	// the client would then see only "connection reset by peer".
	if _, err := c.Identity(ctx); err != nil {
		return fmt.Errorf("import %s: check the API key: %w", pos[0], err)
	}
	prog := newProgress(stderr, "import "+pos[0], total, sf.quiet)
	body := newJSONLStream(br, prog)
	body.renumber, body.serverPhase = *renumber, true
	d, err := c.Upload(ctx, *dataset, body, client.UploadOptions{IsPublic: *public, Append: *appendMode})
	prog.done(err == nil)
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Code == "index_conflict" {
		return fmt.Errorf("import %s: %s; add --renumber to give the file's traces the dataset's next free indices instead of their own", pos[0], detailBefore(ae.Detail, ": leave the index out"))
	}
	if errors.As(err, &ae) && strings.HasPrefix(ae.Detail, "Dataset with the same name already exists with traces") {
		return fmt.Errorf("import %s: dataset %q already has traces; add --append to add the file's traces to it", pos[0], *dataset)
	}
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
		"Download dataset NAME from a server as JSONL, streamed to FILE or stdout. Progress (traces\nof the total, events, rate, ETA) goes to stderr: redrawn on a terminal, a line every 5 s\notherwise, nothing with -q.", stderr)
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
	c, err := sf.client()
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	d, err := resolveDataset(ctx, c, *dataset, *owner)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	body, err := c.Export(ctx, d.ID, client.ExportOptions{IncludeTraceIDs: *ids, OnlyAnnotated: *annotated})
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
	if d.NumTraces != nil && !*annotated {
		prog.totalTraces = int64(*d.NumTraces)
	}
	_, err = io.Copy(dst, newJSONLStream(body, prog))
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

// resolveDataset returns dataset nameOrID (a name in owner's namespace,
// default the key's user, or an id).
func resolveDataset(ctx context.Context, c *client.Client, nameOrID, owner string) (*client.Dataset, error) {
	if owner == "" {
		if strings.Count(nameOrID, "-") == 4 && len(nameOrID) == 36 {
			if d, err := c.GetDataset(ctx, nameOrID); err == nil {
				return d, nil
			}
		}
		me, err := c.Identity(ctx)
		var down *client.UnreachableError
		if errors.As(err, &down) {
			return nil, err // says all: no "who am I" in front
		}
		if err != nil {
			return nil, fmt.Errorf("find the dataset owner (the key's user): %w", err)
		}
		owner = me.Username
	}
	d, err := c.GetDatasetByName(ctx, owner, nameOrID)
	if err != nil {
		return nil, fmt.Errorf("dataset %s/%s: %w", owner, nameOrID, err)
	}
	return d, nil
}

// detailBefore is the part of an API error detail before the server's
// advice sep (the CLI gives its own, in terms of its flags).
func detailBefore(detail, sep string) string {
	before, _, _ := strings.Cut(detail, sep)
	return before
}
