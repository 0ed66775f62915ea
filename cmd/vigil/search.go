package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/vigilhq/vigil/client"
)

func init() {
	register(command{name: "search", summary: "search the traces on a server (the search-box query language)", run: runSearch})
}

// datasetList is a repeatable --dataset flag.
type datasetList []string

func (d *datasetList) String() string     { return strings.Join(*d, ",") }
func (d *datasetList) Set(v string) error { *d = append(*d, v); return nil }

func runSearch(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("search", "search QUERY [--dataset D]... [--format text|json] [--limit N] [--sort S] [--url URL] [--api-key KEY]",
		`Search the traces on a Vigil server with the search-box query language.
Free-text terms match case-insensitive substrings of message text, tool
names, tool arguments, errors and trace names; "quote" phrases. Terms and
filters combine with AND (or a space), OR, -x (NOT) and (groups).

Filters:
  is:X, not:X        X = annotated, flagged, blocked, shared, snippet, gateway, mcp, otel
  meta:PATH          metadata path present; meta:PATH OP VALUE with OP one of
                     = != < <= > >= % (contains), e.g. meta:env=prod, meta:n>=3
  source:S  guardrail:NAME[*]  severity:[OP]info|warn|critical  annotation:TEXT
  tool:NAME          a tool call of that name (* matches anything)
  session:KEY  dataset:NAME|USER/NAME|ID
  after:T  before:T  updated-after:T  updated-before:T
                     T = RFC 3339 time, YYYY-MM-DD, or -N(s|m|h|d|w) ago
  id:UUID,...  index:N,A..B,...

A query starting with "-" follows "--": vigil search -- -is:annotated

Text output: one line per trace (dataset/index, id, name, severity and
highlights), then the total. JSON output: the server's response.

Exit status: 0 (also when nothing matched), 1 when the query is invalid,
2 on usage or connection errors.`, stderr)
	var datasets datasetList
	fs.Var(&datasets, "dataset", "restrict to a dataset: NAME, USER/NAME or id (repeatable)")
	format := fs.String("format", "text", "output format: text or json")
	limit := fs.Int("limit", 50, "traces to show, 1 to 1000")
	sortBy := fs.String("sort", "", "index, -index, time_created, -time_created, time_last_pushed or -time_last_pushed (default: index in one dataset, else -time_created)")
	var sf serverFlags
	sf.register(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fs.Usage()
		return exitCode(2, "search: want exactly one QUERY argument (quote it)")
	}
	if *format != "text" && *format != "json" {
		return exitCode(2, fmt.Sprintf("search: --format must be text or json, got %q", *format))
	}
	if *limit < 1 || *limit > 1000 {
		return exitCode(2, fmt.Sprintf("search: --limit must be from 1 to 1000, got %d", *limit))
	}
	query := pos[0]
	c, err := sf.client()
	if err != nil {
		return fmt.Errorf("search: %w", err)
	}
	res, err := c.Search(ctx, query, client.SearchOptions{Datasets: datasets, Limit: *limit, Sort: *sortBy})
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Code == "query_invalid" {
		p, _ := ae.Body["position"].(float64)
		return exitCode(1, fmt.Sprintf("search: %s\n  %s\n  %s^", ae.Detail, query, caretPad(query, int(p))))
	}
	if err != nil {
		return fmt.Errorf("search: %w", err)
	}
	if *format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	for _, h := range res.Traces {
		where := "snippet"
		if h.Dataset != nil {
			where = fmt.Sprintf("%s/%s#%d", h.Dataset.User, h.Dataset.Name, h.Index)
		}
		line := where + "  " + h.ID
		if h.Name != nil {
			line += "  " + *h.Name
		}
		if h.MaxSeverity != nil {
			line += "  [" + *h.MaxSeverity + "]"
		}
		fmt.Fprintln(stdout, line)
		addrs := make([]string, 0, len(h.Highlights))
		for a := range h.Highlights {
			addrs = append(addrs, a)
		}
		sort.Strings(addrs)
		for _, a := range addrs {
			fmt.Fprintf(stdout, "    %s  %q\n", a, h.Highlights[a].Content)
		}
	}
	total := fmt.Sprintf("%d", res.Total)
	if res.TotalIsEstimate {
		total = "at least " + total
	}
	fmt.Fprintf(stdout, "%s matching traces (%d shown); query: %s\n", total, len(res.Traces), res.Parsed)
	return nil
}

// caretPad is the spaces that put a caret under code point pos of q.
func caretPad(q string, pos int) string {
	r := []rune(q)
	if pos > len(r) {
		pos = len(r)
	}
	var b strings.Builder
	for _, c := range r[:max(pos, 0)] {
		if c == '\t' {
			b.WriteByte('\t')
		} else {
			b.WriteByte(' ')
		}
	}
	return b.String()
}
