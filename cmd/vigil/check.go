package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/vigilhq/vigil/detect" // registers the detectors policies call
	"github.com/vigilhq/vigil/policy"
	"github.com/vigilhq/vigil/trace"
)

func init() {
	register(command{name: "check", summary: "evaluate a policy on a trace or a JSONL dataset", run: runCheck})
}

// paramFlags collects repeated --param NAME=VALUE flags.
type paramFlags map[string]any

func (p paramFlags) String() string { return "" }

func (p paramFlags) Set(s string) error {
	name, val, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return fmt.Errorf("want NAME=VALUE, got %q", s)
	}
	var v any
	dec := json.NewDecoder(strings.NewReader(val))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil || dec.More() {
		v = val
	} else {
		v = jsonNumbers(v)
	}
	p[name] = v
	return nil
}

// jsonNumbers turns json.Number into int64 or float64.
func jsonNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if !strings.ContainsAny(string(x), ".eE") {
			if i, err := x.Int64(); err == nil {
				return i
			}
			return x // an integer beyond int64: kept exact
		}
		f, _ := x.Float64()
		return f
	case []any:
		for i := range x {
			x[i] = jsonNumbers(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = jsonNumbers(x[k])
		}
	}
	return v
}

type checkConfig struct {
	policyFile, traceFile, datasetFile, format string
	pending                                    int
	params                                     paramFlags
	color                                      bool
	maxSteps                                   int64
	timeout                                    time.Duration
	maxViolations                              int
}

func runCheck(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	cfg := checkConfig{params: paramFlags{}}
	fileCfg, err := loadConfig(configFlag(args))
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	detCfg, err := fileCfg.detectorConfig()
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	fs := newFlagSet("check", "check --policy FILE (--trace FILE | --dataset FILE.jsonl) [--param NAME=VALUE]... [--pending N] [--format text|json]",
		`Evaluate the rules of a policy on a trace (a JSON event list or
{"messages": [...]}) or on every trace of a JSONL dataset, with no server.

Text output shows each violation with its message and the trace excerpt at
each range; JSON output is the result object {"errors", "failures",
"warnings"} (one JSON line per trace, with its "index", for a dataset).
A dataset's output ends with the total: traces checked, traces with
violations, violations, failures and errors (in JSON a last line
{"summary": {"traces", "traces_with_violations", "violations",
"failures", "errors"}}).

Load errors and warnings, analysis errors and the output of print() in a
policy go to standard error.

Exit status: 0 no violation, 1 violations, 2 load, input or analysis error,
3 rule failures without violations.

Model-backed detectors (moderated, llm, prompt_injection with a model, ...)
call the OpenAI-compatible endpoint of --detectors-base-url (env
VIGIL_DETECTORS_BASE_URL, or detectors.base_url in the configuration
file); without one, a policy using them fails to load. pii finds PERSON
and LOCATION offline, or asks the endpoint when one is set; an entities
type that no recogniser reports is a load warning.`, stderr)
	detCfg.RegisterFlags(fs)
	fs.String("config", "", configUsage)
	fs.StringVar(&cfg.policyFile, "policy", "", "policy `FILE` (required)")
	fs.StringVar(&cfg.traceFile, "trace", "", "trace `FILE` (JSON; - for standard input)")
	fs.StringVar(&cfg.datasetFile, "dataset", "", "dataset `FILE` (JSONL; - for standard input)")
	fs.Var(cfg.params, "param", "policy parameter `NAME=VALUE` for input.NAME (VALUE is JSON if it parses, else a string); repeatable")
	fs.IntVar(&cfg.pending, "pending", -1, "treat the first `N` events as past and report only violations involving later ones")
	fs.StringVar(&cfg.format, "format", "text", "output `format`: text or json")
	fs.Int64Var(&cfg.maxSteps, "max-steps", 0, "evaluation budget per rule in `steps` (0: the default, 10,000,000)")
	fs.DurationVar(&cfg.timeout, "timeout", 0, "wall-time budget per trace, e.g. 2s (0: none); rules cut short report budget_exceeded")
	fs.IntVar(&cfg.maxViolations, "max-violations", 0, "keep at most `N` violations per rule and trace; a rule going past it stops with budget_exceeded and is reported truncated (0: the default, 10,000; -1: no limit)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := detect.Configure(detCfg); err != nil {
		return fmt.Errorf("check: detectors: %w", err)
	}
	if len(pos) == 1 && cfg.traceFile == "" && cfg.datasetFile == "" {
		cfg.traceFile = pos[0]
	} else if len(pos) > 0 {
		return fmt.Errorf("check: unexpected arguments %q", pos)
	}
	switch {
	case cfg.policyFile == "":
		return errors.New("check: --policy is required")
	case (cfg.traceFile == "") == (cfg.datasetFile == ""):
		return errors.New("check: give exactly one of --trace and --dataset")
	case cfg.format != "text" && cfg.format != "json":
		return fmt.Errorf("check: --format must be text or json, not %q", cfg.format)
	case cfg.pending < 0 && flagSet(fs, "pending"):
		return fmt.Errorf("check: --pending must be 0 or more, not %d", cfg.pending)
	}
	if f, ok := stdout.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 && os.Getenv("NO_COLOR") == "" {
			cfg.color = true
		}
	}
	src, err := os.ReadFile(cfg.policyFile)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	p, err := policy.Load(string(src), policy.Options{Name: cfg.policyFile, Debug: stderr, MaxSteps: cfg.maxSteps, WallTime: cfg.timeout, MaxViolations: cfg.maxViolations})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitCode(2, "")
	}
	for _, w := range p.Warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w.Error())
	}
	if cfg.datasetFile != "" {
		return checkDataset(ctx, p, cfg, stdin, stdout, stderr)
	}
	data, err := readCheckInput(cfg.traceFile, stdin)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	t, err := trace.Decode(data)
	if err != nil {
		if msg := kindMismatch(cfg.traceFile, sniffFile(data, true), false, map[fileKind]string{
			kindDataset:    "use 'vigil check --dataset " + cfg.traceFile + "'",
			kindEventLines: "a trace is a JSON array of events; 'jq -s . " + cfg.traceFile + " > trace.json' makes one",
		}); msg != "" {
			return exitCode(2, "check: "+msg)
		}
		fmt.Fprintf(stderr, "vigil: check: %s: invalid_trace: %v\n", cfg.traceFile, err)
		return exitCode(2, "")
	}
	res, err := analyzeTrace(ctx, p, t, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "vigil: check: %s: %v\n", cfg.traceFile, err)
		return exitCode(2, "")
	}
	if cfg.format == "json" {
		if err := writeJSONLine(stdout, res); err != nil {
			return err
		}
	} else {
		printText(stdout, cfg, t, res)
	}
	return checkExit(len(res.Errors) > 0, len(res.Failures) > 0, false)
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// writeJSONLine writes v as one line of JSON, without HTML escaping (so a
// message reads "<b>" as the policy wrote it).
func writeJSONLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func readCheckInput(name string, stdin io.Reader) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(stdin)
	}
	return os.ReadFile(name)
}

func analyzeTrace(ctx context.Context, p *policy.Policy, t *trace.Trace, cfg checkConfig) (*policy.Result, error) {
	if cfg.pending < 0 {
		return p.Analyze(ctx, t, cfg.params)
	}
	n := min(cfg.pending, len(t.Events))
	past := &trace.Trace{Events: t.Events[:n]}
	pending := &trace.Trace{Events: t.Events[n:]}
	return p.AnalyzePending(ctx, past, pending, cfg.params)
}

func checkExit(violations, failures, errs bool) error {
	switch {
	case errs:
		return exitCode(2, "")
	case violations:
		return exitCode(1, "")
	case failures:
		return exitCode(3, "")
	}
	return nil
}

func checkDataset(ctx context.Context, p *policy.Policy, cfg checkConfig, stdin io.Reader, stdout, stderr io.Writer) error {
	var in io.Reader = stdin
	if cfg.datasetFile != "-" {
		f, err := os.Open(cfg.datasetFile)
		if err != nil {
			return fmt.Errorf("check: %w", err)
		}
		defer f.Close()
		in = f
	}
	head, br, complete := peekHead(in)
	if msg := kindMismatch(cfg.datasetFile, sniffFile(head, complete), true, map[fileKind]string{
		kindTrace:      "use 'vigil check --trace " + cfg.datasetFile + "'",
		kindEventLines: "a trace is a JSON array of events; 'jq -s . " + cfg.datasetFile + " > trace.json' makes one for 'vigil check --trace trace.json'",
	}); msg != "" {
		return exitCode(2, "check: "+msg)
	}
	r := trace.NewReader(br)
	r.ContinueOnError = true
	var violations, failures, errs bool
	var sum datasetSummary
	for pos := 0; ; {
		e, err := r.Next()
		if err == io.EOF {
			break
		}
		if e == nil {
			fmt.Fprintf(stderr, "vigil: check: %s: %v\n", cfg.datasetFile, err)
			errs = true
			sum.Errors++
			var le *trace.LineError
			if !errors.As(err, &le) {
				break
			}
			continue
		}
		index := int64(pos)
		if e.HasIndex {
			index = e.Index
		}
		pos++
		if err != nil {
			fmt.Fprintf(stderr, "vigil: check: %s: trace %d: invalid_trace: %v\n", cfg.datasetFile, index, err)
			errs = true
			sum.Errors++
			continue
		}
		res, err := analyzeTrace(ctx, p, e.Trace, cfg)
		if err != nil {
			fmt.Fprintf(stderr, "vigil: check: %s: trace %d: %v\n", cfg.datasetFile, index, err)
			errs = true
			sum.Errors++
			if errors.Is(err, policy.ErrCancelled) {
				break
			}
			continue
		}
		violations = violations || len(res.Errors) > 0
		failures = failures || len(res.Failures) > 0
		sum.add(res)
		if cfg.format == "json" {
			if err := writeJSONLine(stdout, struct {
				Index int64 `json:"index"`
				*policy.Result
			}{index, res}); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(stdout, "== trace %d\n", index)
			printText(stdout, cfg, e.Trace, res)
		}
	}
	if cfg.format == "json" {
		if err := writeJSONLine(stdout, struct {
			Summary datasetSummary `json:"summary"`
		}{sum}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "== total: %d trace(s) checked, %d with violations; %d violation(s), %d failure(s), %d error(s)\n",
			sum.Traces, sum.TracesWithViolations, sum.Violations, sum.Failures, sum.Errors)
	}
	return checkExit(violations, failures, errs)
}

// datasetSummary is the total of check --dataset, the last line of its
// output: traces analysed, those with at least one violation, violations
// and rule failures over all of them, and traces (or lines) that could not
// be checked.
type datasetSummary struct {
	Traces               int `json:"traces"`
	TracesWithViolations int `json:"traces_with_violations"`
	Violations           int `json:"violations"`
	Failures             int `json:"failures"`
	Errors               int `json:"errors"`
}

func (s *datasetSummary) add(res *policy.Result) {
	s.Traces++
	s.Violations += len(res.Errors)
	s.Failures += len(res.Failures)
	if len(res.Errors) > 0 {
		s.TracesWithViolations++
	}
}

// printText renders a result for people: each violation with its message
// and the excerpt of the trace at each range.
func printText(w io.Writer, cfg checkConfig, t *trace.Trace, res *policy.Result) {
	items := t.Flatten()
	// Messages, keys and ranges may carry trace text: safe keeps its
	// control characters from reaching the terminal.
	for i, v := range res.Errors {
		fmt.Fprintf(w, "violation %d: %s\n", i+1, safe(v.Message))
		fmt.Fprintf(w, "  rule %d, key %s\n", v.Rule, safe(v.Key))
		if len(v.Kwargs) > 0 {
			var b bytes.Buffer
			if writeJSONLine(&b, v.Kwargs) == nil {
				fmt.Fprintf(w, "  %s\n", safe(shorten(strings.TrimSpace(b.String()), 4*excerptContext)))
			}
		}
		for _, rg := range v.Ranges {
			fmt.Fprintf(w, "  %s: %s\n", safe(rg), excerpt(t, items, rg, cfg.color))
		}
	}
	for _, f := range res.Failures {
		fmt.Fprintf(w, "failure: rule %d at %s:%d:%d: %s: %s\n", f.Rule, safe(cfg.policyFile), f.Line, f.Column, f.Kind, safe(f.Message))
	}
	for _, s := range res.Warnings {
		fmt.Fprintf(w, "warning: %s\n", safe(s))
	}
	for _, r := range res.Truncated {
		fmt.Fprintf(w, "truncated: rule %d stopped at a budget; it may have more violations than shown\n", r)
	}
	fmt.Fprintf(w, "%d violation(s), %d failure(s), %d warning(s)\n", len(res.Errors), len(res.Failures), len(res.Warnings))
}

const excerptContext = 30

// excerpt returns the text a range points to: a string with its marked
// part highlighted (ANSI colour on a terminal, [[...]] otherwise) and some
// context, or the compact JSON of an object, shortened.
func excerpt(t *trace.Trace, items []trace.Item, rng string, color bool) string {
	a, err := trace.ParseAddress(rng)
	if err != nil {
		return "(" + safe(err.Error()) + ")"
	}
	stored, ok := trace.StoredAddress(items, a)
	if !ok {
		return "(not in the trace)"
	}
	r, err := t.Resolve(stored)
	if err != nil {
		return "(" + safe(err.Error()) + ")"
	}
	if r.Text == "" && r.Start == 0 && r.End == 0 {
		b := bytes.TrimSpace(trace.Marshal(r.Value))
		return safe(shorten(string(b), 2*excerptContext+20))
	}
	s, _ := r.Value.(string)
	before := tail(s[:r.ByteStart], excerptContext)
	after := head(s[r.ByteEnd:], excerptContext)
	open, close := "[[", "]]"
	if color {
		open, close = "\x1b[1;31m", "\x1b[0m"
	}
	return `"` + esc(before) + open + esc(s[r.ByteStart:r.ByteEnd]) + close + esc(after) + `"`
}

// esc escapes a piece of text the way a Go string literal would, without
// the quotes, so control characters cannot reach the terminal.
func esc(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// safe escapes the characters of s that are not printable (control
// characters, C1 controls, invalid UTF-8) as a Go string literal would,
// and leaves everything else as it is.
func safe(s string) string {
	clean := true
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if n == 1 && r == utf8.RuneError || r != ' ' && !strconv.IsPrint(r) {
			clean = false
			break
		}
		i += n
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if n == 1 && r == utf8.RuneError || r != ' ' && !strconv.IsPrint(r) {
			b.WriteString(esc(s[i : i+n]))
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func tail(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return "…" + string(r[len(r)-n:])
}

func head(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

func shorten(s string, n int) string { return head(s, n) }

var _ flag.Value = paramFlags{}
