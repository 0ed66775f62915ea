package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/vigilhq/vigil/trace"
)

func init() {
	register(command{name: "trace", summary: "lint trace files and datasets, read parts of a trace by address", run: runTrace})
}

const traceUsage = `Usage: vigil trace <subcommand> [flags] [arguments]

Work with trace files: a JSON trace (an event list or {"messages": [...]})
or a JSONL dataset (the Explorer upload/export format).

Subcommands:
  lint FILE...         check files and print every problem as file:line:col: path: message
  get FILE ADDRESS     print the value or text an address points to

Run 'vigil trace <subcommand> -h' for its flags.
`

func runTrace(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, traceUsage)
		return exitCode(2, "")
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, traceUsage)
		return nil
	case "lint":
		return runTraceLint(args[1:], stdin, stdout, stderr)
	case "get":
		return runTraceGet(args[1:], stdin, stdout, stderr)
	}
	fmt.Fprint(stderr, traceUsage)
	return exitCode(2, fmt.Sprintf("trace: unknown subcommand %q", args[0]))
}

func runTraceLint(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("trace lint", "trace lint [flags] FILE...",
		`Check trace files: JSON traces (.json, an event list or {"messages": [...]})
and JSONL datasets (.jsonl, or detected from the content). Every problem is
printed on stdout as

  file:line:col: path: message

warnings (such as tool arguments that are not a JSON object) as
"file:line:col: path: warning: message". "-" reads standard input.

Exit status: 0 all files valid, 1 some file invalid, 2 some file unreadable.`, stderr)
	verbose := fs.Bool("v", false, "also print a summary line for each valid file")
	noWarn := fs.Bool("no-warnings", false, "do not print warnings")
	files, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		fs.Usage()
		return exitCode(2, "trace lint: no files given")
	}
	worst := 0
	for _, name := range files {
		l := linter{name: name, out: stdout, warnings: !*noWarn}
		summary, err := l.file(name, stdin, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "vigil: trace lint: %v\n", err)
			worst = 2
			continue
		}
		if l.problems > 0 {
			worst = max(worst, 1)
		} else if *verbose {
			fmt.Fprintf(stdout, "%s: ok (%s)\n", name, summary)
		}
	}
	if worst != 0 {
		return exitCode(worst, "")
	}
	return nil
}

func readTraceInput(name string, stdin io.Reader) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(stdin)
	}
	return os.ReadFile(name)
}

func hasJSONLExt(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".jsonl", ".ndjson":
		return true
	}
	return false
}

// isJSONL tells a JSONL dataset from a JSON trace: by extension, else by
// content (the whole input is not one JSON value, but its first line is).
func isJSONL(name string, data []byte) bool {
	if hasJSONLExt(name) {
		return true
	}
	if strings.EqualFold(filepath.Ext(name), ".json") {
		return false
	}
	if _, err := trace.ParseValue(data); err == nil {
		return false
	}
	first, rest, _ := bytes.Cut(bytes.TrimLeft(data, " \t\r\n"), []byte("\n"))
	if len(bytes.TrimSpace(rest)) == 0 {
		return false
	}
	_, err := trace.ParseValue(first)
	return err == nil
}

// file lints the file name ("-" for stdin) as what its content is: a
// JSONL dataset streams (memory bounded by its longest line), a JSON trace
// is read whole. The extension decides only when the content does not; a
// content that contradicts it gets a note on stderr. A file of one event
// per line is one problem, not one per line. The error is a read error.
func (l *linter) file(name string, stdin io.Reader, stderr io.Writer) (string, error) {
	var r io.Reader = stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return "", err
		}
		defer f.Close()
		r = f
	}
	head, br, complete := peekHead(r)
	dataset := hasJSONLExt(name)
	var data []byte // all of the input, once read
	if !dataset && !complete {
		// Not named as a dataset: likely a trace, which is read whole
		// anyway, so classify all of it.
		var err error
		if data, err = io.ReadAll(br); err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		head, complete = data, true
	}
	kind := sniffFile(head, complete)
	switch {
	case kind == kindEventLines:
		l.report(1, 1, "", kindMismatch(name, kind, dataset, map[fileKind]string{
			kindEventLines: "'jq -s . " + name + " > trace.json' makes a trace of them, 'jq -cs . " + name + " > trace.jsonl' a one-trace dataset"}))
		return "", nil
	case kind == kindTrace && dataset:
		fmt.Fprintf(stderr, "vigil: trace lint: %s\n", kindMismatch(name, kind, true, map[fileKind]string{kindTrace: "checked as a JSON trace (name it .json)"}))
		dataset = false
	case kind == kindDataset && !dataset:
		if strings.EqualFold(filepath.Ext(name), ".json") {
			fmt.Fprintf(stderr, "vigil: trace lint: %s\n", kindMismatch(name, kind, false, map[fileKind]string{kindDataset: "checked as a dataset (name it .jsonl)"}))
		}
		dataset = true
	}
	var in io.Reader = br
	if data != nil {
		in = bytes.NewReader(data)
	}
	if dataset {
		summary, err := l.dataset(in)
		if err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		return summary, nil
	}
	if data == nil {
		var err error
		if data, err = io.ReadAll(br); err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
	}
	if kind == kindUnknown && isJSONL(name, data) {
		return l.dataset(bytes.NewReader(data))
	}
	return l.trace(data), nil
}

type linter struct {
	name     string
	out      io.Writer
	warnings bool
	problems int
}

func (l *linter) report(line, col int, path, msg string) {
	l.problems++
	l.print(line, col, path, msg)
}

func (l *linter) print(line, col int, path, msg string) {
	if line <= 0 {
		line, col = 1, 1
	}
	if path != "" {
		fmt.Fprintf(l.out, "%s:%d:%d: %s: %s\n", l.name, line, col, path, msg)
	} else {
		fmt.Fprintf(l.out, "%s:%d:%d: %s\n", l.name, line, col, msg)
	}
}

// traceErrors reports a Decode error; lineBase shifts line numbers (for a
// JSONL line, the line's number minus one).
func (l *linter) traceErrors(err error, lineBase int) {
	var se *trace.SyntaxError
	var list trace.ErrorList
	switch {
	case errors.As(err, &se):
		l.report(lineBase+se.Line, se.Col, "", se.Msg)
	case errors.As(err, &list):
		for _, e := range list {
			line := e.Line
			if line > 0 {
				line += lineBase
			}
			l.report(line, e.Col, e.Path, e.Msg)
		}
	default:
		l.report(lineBase+1, 1, "", err.Error())
	}
}

func (l *linter) traceWarnings(t *trace.Trace, lineBase int) {
	if !l.warnings || t == nil {
		return
	}
	for _, w := range t.Warnings {
		line := w.Line
		if line > 0 {
			line += lineBase
		}
		l.print(line, w.Col, w.Path, "warning: "+w.Msg)
	}
}

func (l *linter) trace(data []byte) string {
	t, err := trace.Decode(data)
	if err != nil {
		l.traceErrors(err, 0)
	}
	l.traceWarnings(t, 0)
	if t == nil {
		return ""
	}
	return fmt.Sprintf("%d events", len(t.Events))
}

// dataset lints a JSONL dataset read from r. The error is a read error
// (the file is unreadable), not a problem in it.
func (l *linter) dataset(r io.Reader) (string, error) {
	rd := trace.NewReader(r)
	rd.ContinueOnError = true
	n := 0
	for {
		e, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			var le *trace.LineError
			if !errors.As(err, &le) {
				return "", err
			}
			if errors.Is(le.Err, trace.ErrDataset) {
				msg := strings.TrimPrefix(le.Err.Error(), trace.ErrDataset.Error()+": ")
				l.report(le.Line, 1, "", msg)
			} else {
				l.traceErrors(le.Err, le.Line-1)
			}
		}
		if e != nil {
			n++
			l.traceWarnings(e.Trace, e.Line-1)
		}
	}
	return fmt.Sprintf("%d traces", n), nil
}

func runTraceGet(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("trace get", "trace get [flags] FILE ADDRESS",
		`Print what ADDRESS points to in the trace in FILE: a string as its raw
text, a range or line selector as the selected text, anything else as
JSON. Addresses follow the Explorer grammar: messages.3.content:5-10,
messages[2].tool_calls[0].function.arguments, messages.0.content:L2,
messages.@<message_id>.content, <root>. Offsets count Unicode code points.

For a JSONL dataset, -n picks the trace (0-based among the trace lines).
Addresses are positions in the file; with -normalized they are trace
indices as the policy engine reports them (events numbered from 0, each tool
of a {"tools": [...]} element counting as one event).

Exit status: 0 printed, 1 the address does not resolve, 2 bad usage,
unreadable file or bad address.`, stderr)
	n := fs.Int("n", 0, "trace number in a JSONL dataset (0-based)")
	asJSON := fs.Bool("json", false, "print strings as JSON too")
	normalized := fs.Bool("normalized", false, "ADDRESS is in the normalised trace, as 'vigil check' prints ranges\n(each tool of a {\"tools\": [...]} element counts as one event)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		fs.Usage()
		return exitCode(2, "trace get: want FILE and ADDRESS")
	}
	addr, err := trace.ParseAddress(pos[1])
	if err != nil {
		return fmt.Errorf("trace get: %w", err)
	}
	var t *trace.Trace
	if hasJSONLExt(pos[0]) {
		f, err := os.Open(pos[0])
		if err != nil {
			return fmt.Errorf("trace get: %w", err)
		}
		t, err = nthTrace(f, *n)
		f.Close()
		if err != nil {
			return fmt.Errorf("trace get %s: %w", pos[0], err)
		}
	} else if data, err := readTraceInput(pos[0], stdin); err != nil {
		return fmt.Errorf("trace get: %w", err)
	} else if isJSONL(pos[0], data) {
		t, err = nthTrace(bytes.NewReader(data), *n)
		if err != nil {
			return fmt.Errorf("trace get %s: %w", pos[0], err)
		}
	} else {
		t, err = trace.Decode(data)
		if t == nil {
			return fmt.Errorf("trace get %s: %w", pos[0], err)
		}
	}
	if *normalized {
		stored, ok := trace.StoredAddress(t.Flatten(), addr)
		if !ok {
			return exitCode(1, fmt.Sprintf("%s: %v: no event has that trace index", addr, trace.ErrUnresolved))
		}
		addr = stored
	}
	r, err := t.Resolve(addr)
	if err != nil {
		return exitCode(1, err.Error())
	}
	var out []byte
	switch {
	case addr.Selector.Kind == trace.SelectRange || addr.Selector.Kind == trace.SelectLine:
		if *asJSON {
			out = trace.Marshal(r.Text)
		} else {
			out = []byte(r.Text)
		}
	default:
		if s, ok := r.Value.(string); ok && !*asJSON {
			out = []byte(s)
		} else {
			out = trace.Marshal(r.Value)
		}
	}
	out = append(out, '\n')
	_, err = stdout.Write(out)
	return err
}

// nthTrace returns trace n (0-based among trace lines) of a JSONL dataset.
func nthTrace(rd io.Reader, n int) (*trace.Trace, error) {
	r := trace.NewReader(rd)
	for i := 0; ; i++ {
		e, err := r.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("the dataset has %d traces, no trace %d", i, n)
		}
		if e == nil {
			return nil, err
		}
		if i == n {
			return e.Trace, nil
		}
	}
}
