package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// What a trace file holds, told from its content, so that a file given
// where the other kind is expected gets one sentence naming the command
// or flag that fits, not an error for each of its lines.

// fileKind is what sniffFile found.
type fileKind int

const (
	// kindUnknown: invalid or unrecognised; the command reports its own errors.
	kindUnknown fileKind = iota
	// kindOneLine: a single one-line trace, valid both as a JSON trace and
	// as a one-trace JSONL dataset.
	kindOneLine
	// kindTrace: one JSON trace (an event list or {"messages": [...]})
	// over several lines: not JSONL.
	kindTrace
	// kindDataset: JSONL with a trace on each line.
	kindDataset
	// kindEventLines: JSONL with one event (a message) on each line.
	kindEventLines
)

// sniffHead is how much of a stream sniffing looks at.
const sniffHead = 1 << 20

// sniffFile classifies head, the start of a file (complete: the whole
// file). It looks at the first line and, when that is not JSON by itself,
// at the JSON value that starts there.
func sniffFile(head []byte, complete bool) fileKind {
	head = bytes.TrimLeft(head, " \t\r\n")
	if len(head) == 0 {
		return kindUnknown
	}
	first, rest, hasMore := bytes.Cut(head, []byte("\n"))
	if !json.Valid(first) {
		if head[0] != '[' && head[0] != '{' {
			return kindUnknown
		}
		var v json.RawMessage
		err := json.NewDecoder(bytes.NewReader(head)).Decode(&v)
		switch {
		case err == nil && lineShape(v) == shapeTrace && bytes.ContainsRune(v, '\n'):
			return kindTrace
		case errors.Is(err, io.ErrUnexpectedEOF) && !complete && hasMore && (head[0] == '[' || bytes.Contains(head, []byte(`"messages"`))):
			return kindTrace // a multi-line value longer than the head
		}
		return kindUnknown
	}
	shape := lineShape(first)
	if shape == shapeMetadata { // the dataset line: the next line tells
		next, _, _ := bytes.Cut(bytes.TrimLeft(rest, " \t\r\n"), []byte("\n"))
		if !json.Valid(next) {
			return kindUnknown
		}
		hasMore, shape = true, lineShape(next)
	}
	more := !complete || len(bytes.TrimSpace(rest)) > 0
	switch {
	case shape == shapeEvent && (hasMore || more):
		return kindEventLines
	case shape == shapeTrace && more:
		return kindDataset
	case shape == shapeTrace:
		return kindOneLine
	}
	return kindUnknown
}

type shape int

const (
	shapeOther    shape = iota
	shapeTrace          // an event list or an object with "messages"
	shapeMetadata       // an object with "metadata" and no "messages": a dataset line
	shapeEvent          // an object with "role" or "tool_calls", no "messages"
)

// lineShape tells what one JSON value is.
func lineShape(v []byte) shape {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return shapeOther
	}
	if v[0] == '[' {
		return shapeTrace
	}
	var obj map[string]json.RawMessage
	if v[0] != '{' || json.Unmarshal(v, &obj) != nil {
		return shapeOther
	}
	_, msgs := obj["messages"]
	_, meta := obj["metadata"]
	_, role := obj["role"]
	_, calls := obj["tool_calls"]
	switch {
	case msgs:
		return shapeTrace
	case role || calls:
		return shapeEvent
	case meta:
		return shapeMetadata
	}
	return shapeOther
}

// kindMismatch returns the sentence for a file of kind given where a
// JSONL dataset (wantDataset) or a single trace was expected, ending with
// the advice for that kind (which command or flag fits); "" when the kind
// fits, is unknown, or has no advice.
func kindMismatch(name string, kind fileKind, wantDataset bool, advice map[fileKind]string) string {
	a := advice[kind]
	want := "a single JSON trace"
	if wantDataset {
		want = "a JSONL dataset (one trace per line)"
	}
	switch {
	case a == "":
		return ""
	case kind == kindEventLines:
		return fmt.Sprintf("%s holds one event per line (JSONL of messages), not %s: %s", name, want, a)
	case wantDataset && kind == kindTrace:
		return fmt.Sprintf("%s is a JSON trace over several lines, not %s: %s", name, want, a)
	case !wantDataset && kind == kindDataset:
		return fmt.Sprintf("%s is a JSONL dataset (one trace per line), not %s: %s", name, want, a)
	}
	return ""
}

// peekHead returns the start of r without consuming it, the reader to
// read the whole from, and whether the head is all of r. It reads only
// until sniffFile has what it needs (the first line, the line after a
// dataset line, or the whole of a value spanning lines), at most
// sniffHead bytes, so a dataset streamed through a pipe is not held up.
func peekHead(r io.Reader) ([]byte, *bufio.Reader, bool) {
	br := bufio.NewReaderSize(r, sniffHead)
	for {
		if br.Buffered() >= sniffHead {
			head, _ := br.Peek(br.Buffered())
			return head, br, false
		}
		_, err := br.Peek(br.Buffered() + 1) // blocks for one more read
		head, _ := br.Peek(br.Buffered())
		if err != nil {
			return head, br, true
		}
		if sniffEnough(head) {
			return head, br, false
		}
	}
}

// sniffEnough reports whether head holds what sniffFile looks at.
func sniffEnough(head []byte) bool {
	head = bytes.TrimLeft(head, " \t\r\n")
	first, rest, ok := bytes.Cut(head, []byte("\n"))
	switch {
	case !ok:
		return false
	case json.Valid(first):
		if lineShape(first) != shapeMetadata {
			return true
		}
		_, _, ok = bytes.Cut(bytes.TrimLeft(rest, " \t\r\n"), []byte("\n"))
		return ok
	}
	var v json.RawMessage
	err := json.NewDecoder(bytes.NewReader(head)).Decode(&v)
	return !errors.Is(err, io.ErrUnexpectedEOF)
}
