package trace

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// jsonl.go reads and writes JSONL datasets, the Explorer upload and export
// format (explorer-api §8.1): an optional first line {"metadata": {...}},
// then one trace per line, either as a bare event list or as an annotated
// object {index?, id?, name?, hierarchy_path?, messages, metadata?,
// annotations?}, never both forms in one file.

// ErrDataset is matched (errors.Is) by every JSONL dataset error that is
// not a problem inside one trace (those match ErrInvalidTrace or ErrSyntax).
var ErrDataset = errors.New("invalid dataset")

// DefaultMaxLineBytes is the longest JSONL line a Reader accepts by default.
const DefaultMaxLineBytes = 64 << 20

// LineError is an error on one line of a JSONL file. Err is a
// *SyntaxError, an ErrorList of trace problems (whose Line and Col are
// relative to the line: Line 1 and the column within it), or an error
// matching ErrDataset.
type LineError struct {
	Line int // 1-based line number in the file
	Err  error
}

// Error renders "line N: problem", one line per problem of an invalid trace.
func (e *LineError) Error() string {
	var l ErrorList
	if errors.As(e.Err, &l) && len(l) > 1 {
		var b strings.Builder
		for i, x := range l {
			if i > 0 {
				b.WriteByte('\n')
			}
			fmt.Fprintf(&b, "line %d: %s", e.Line, x.Error())
		}
		return b.String()
	}
	return fmt.Sprintf("line %d: %v", e.Line, e.Err)
}

// Unwrap returns the underlying error.
func (e *LineError) Unwrap() error { return e.Err }

// EntryForm is the form of a trace line.
type EntryForm uint8

// Trace line forms.
const (
	// EntryRaw is a bare event list: [event, ...].
	EntryRaw EntryForm = iota
	// EntryAnnotated is an object with "messages" and optional index,
	// id, name, hierarchy_path, metadata and annotations.
	EntryAnnotated
)

// Entry is one trace line of a JSONL dataset.
type Entry struct {
	// Line is the 1-based line number the entry was read from (0 when
	// built in memory).
	Line int
	// Form is the line's form.
	Form EntryForm
	// Trace is the decoded trace. For an annotated line it is FormObject
	// and its Envelope is the whole line object (Encode writes the line).
	// For a raw line whose first element only carried metadata, that
	// element is removed and its metadata is Trace.Metadata.
	Trace *Trace
	// Index is the line's "index" when HasIndex.
	Index    int64
	HasIndex bool
	// ID and Name are the "id" and "name" members ("" when absent).
	ID, Name string
	// HierarchyPath is the "hierarchy_path" member, or nil.
	HierarchyPath []string
	// Annotations are the line's annotations, in order.
	Annotations []Annotation
	// MetadataElement is, for a raw line, the removed first element that
	// carried the trace metadata (written back by Writer), or nil.
	MetadataElement *Object
}

// Annotation is an annotation of an annotated JSONL line.
type Annotation struct {
	// Content is the annotation text (a non-string content is its JSON).
	Content string
	// Address is where it points (explorer-api §2.3), as written.
	Address string
	// ExtraMetadata is the extra_metadata object, or nil.
	ExtraMetadata *Object
	// Raw is the annotation object as given.
	Raw *Object
}

// Reader reads a JSONL dataset one line at a time. Memory use is bounded by
// the longest line plus the set of indices seen (for duplicate checks); it
// does not grow with the number of lines otherwise.
type Reader struct {
	// MaxLineBytes limits a line's length; 0 means DefaultMaxLineBytes.
	MaxLineBytes int
	// ContinueOnError makes Next go on after a syntax or dataset error
	// (the error is still returned, with a nil entry), so a linter can
	// report every bad line. Read errors still stop the reader.
	ContinueOnError bool

	br       *bufio.Reader
	buf      []byte
	line     int
	metadata *Object
	sawTrace bool
	form     EntryForm
	hasIndex int // 0 unknown, 1 every line has an index, 2 none has
	indices  map[int64]struct{}
	err      error
}

// NewReader returns a Reader reading from r.
func NewReader(r io.Reader) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, 64<<10)}
}

// Metadata returns the dataset metadata line's "metadata" object, or nil.
// It is known once Next has returned the first entry (or io.EOF).
func (r *Reader) Metadata() *Object { return r.metadata }

// Next returns the next trace line. At the end of the input it returns
// io.EOF. Any other error is a *LineError naming the line; after a syntax
// or dataset error (ErrSyntax, ErrDataset) the reader stops and returns the
// same error again (unless ContinueOnError is set), while after a line
// whose trace is invalid (ErrInvalidTrace) the entry is still returned with
// the error and reading may continue.
func (r *Reader) Next() (*Entry, error) {
	if r.err != nil {
		return nil, r.err
	}
	for {
		line, err := r.readLine()
		if err != nil {
			var le *LineError
			if err != io.EOF && !(r.ContinueOnError && errors.As(err, &le)) {
				r.err = err
			}
			return nil, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		e, err := r.parseLine(line)
		switch {
		case err != nil && e == nil:
			if !r.ContinueOnError {
				r.err = err
			}
			return nil, err
		case e == nil: // the dataset metadata line
			continue
		}
		return e, err
	}
}

func (r *Reader) readLine() ([]byte, error) {
	max := r.MaxLineBytes
	if max <= 0 {
		max = DefaultMaxLineBytes
	}
	r.buf = r.buf[:0]
	for {
		chunk, err := r.br.ReadSlice('\n')
		n := len(r.buf) + len(chunk)
		if err == nil {
			n-- // the newline is not part of the line
		}
		if n > max {
			r.line++
			err := &LineError{Line: r.line, Err: fmt.Errorf("%w: line longer than %d bytes", ErrDataset, max)}
			if r.ContinueOnError {
				r.skipRestOfLine(chunk)
			}
			return nil, err
		}
		r.buf = append(r.buf, chunk...)
		switch err {
		case nil:
			r.line++
			return r.buf, nil
		case bufio.ErrBufferFull:
			continue
		case io.EOF:
			if len(r.buf) == 0 {
				return nil, io.EOF
			}
			r.line++
			return r.buf, nil
		default:
			return nil, fmt.Errorf("read line %d: %w", r.line+1, err)
		}
	}
}

// skipRestOfLine discards input up to and including the next newline,
// given the last chunk read.
func (r *Reader) skipRestOfLine(chunk []byte) {
	if len(chunk) > 0 && chunk[len(chunk)-1] == '\n' {
		return
	}
	for {
		c, err := r.br.ReadSlice('\n')
		if err != bufio.ErrBufferFull || len(c) == 0 {
			return
		}
	}
}

func (r *Reader) datasetErr(format string, args ...any) error {
	return &LineError{Line: r.line, Err: fmt.Errorf("%w: %s", ErrDataset, fmt.Sprintf(format, args...))}
}

// parseLine returns (nil, nil) for the dataset metadata line.
func (r *Reader) parseLine(line []byte) (*Entry, error) {
	v, err := ParseValue(line)
	if err != nil {
		return nil, &LineError{Line: r.line, Err: err}
	}
	switch v := v.(type) {
	case *Object:
		if !v.Has("messages") {
			if !v.Has("metadata") {
				return nil, r.datasetErr(`an object line needs "messages" (a trace) or "metadata" (the dataset line)`)
			}
			if r.metadata != nil {
				return nil, r.datasetErr("The metadata row can appear at most once in the file.")
			}
			if r.sawTrace {
				return nil, r.datasetErr("The metadata row must be the first row in the file.")
			}
			md, _ := v.Get("metadata")
			mo, ok := md.(*Object)
			if !ok {
				return nil, r.datasetErr(`dataset "metadata" is %s, want an object`, TypeName(md))
			}
			r.metadata = mo
			return nil, nil
		}
		if err := r.checkForm(EntryAnnotated); err != nil {
			return nil, err
		}
		return r.annotated(line, v)
	case []Value:
		if err := r.checkForm(EntryRaw); err != nil {
			return nil, err
		}
		if err := r.checkIndex(false, 0); err != nil {
			return nil, err
		}
		return r.raw(line, v)
	default:
		return nil, r.datasetErr("line is %s, want an event list or an object", TypeName(v))
	}
}

func (r *Reader) checkForm(f EntryForm) error {
	if r.sawTrace && r.form != f {
		return r.datasetErr("The file cannot contain both raw event lists and annotated event lists.")
	}
	r.sawTrace, r.form = true, f
	return nil
}

func (r *Reader) checkIndex(has bool, i int64) error {
	want := 2
	if has {
		want = 1
	}
	if r.hasIndex != 0 && r.hasIndex != want {
		return r.datasetErr("The 'index' key is inconsistently present — found in some events but missing in others.")
	}
	r.hasIndex = want
	if has {
		if r.indices == nil {
			r.indices = map[int64]struct{}{}
		}
		if _, dup := r.indices[i]; dup {
			return r.datasetErr("Duplicate index found: %d in the file.", i)
		}
		r.indices[i] = struct{}{}
	}
	return nil
}

func lineErr(line int, err error) error {
	if err == nil {
		return nil
	}
	return &LineError{Line: line, Err: err}
}

func (r *Reader) raw(line []byte, v []Value) (*Entry, error) {
	t, err := decodeParsed(line, v)
	if t == nil {
		return nil, lineErr(r.line, err)
	}
	e := &Entry{Line: r.line, Form: EntryRaw, Trace: t}
	if len(t.Events) > 0 {
		if o, ok := t.Events[0].Raw.(*Object); ok && isMetadataElement(o) {
			e.MetadataElement = o
			md, _ := o.Get("metadata")
			t.Metadata, _ = md.(*Object)
			t.Events = t.Events[1:]
			err = dropFirstElementErrors(err)
			ws := t.Warnings[:0]
			for _, w := range t.Warnings {
				w.Index--
				w.Msg = "invalid tool arguments at event " + strconv.Itoa(w.Index)
				ws = append(ws, w)
			}
			t.Warnings = ws
		}
	}
	return e, lineErr(r.line, err)
}

// isMetadataElement reports whether the first element of a raw line only
// carries trace metadata: it has "metadata" and none of role, type, tools.
func isMetadataElement(o *Object) bool {
	return o.Has("metadata") && !o.Has("role") && !o.Has("type") && !o.Has("tools")
}

func dropFirstElementErrors(err error) error {
	var l ErrorList
	if !errors.As(err, &l) {
		return err
	}
	var out ErrorList
	for _, e := range l {
		if e.Path == "events[0]" || strings.HasPrefix(e.Path, "events[0].") || strings.HasPrefix(e.Path, "events[0][") {
			continue
		}
		out = append(out, e)
	}
	return out.Err()
}

func (r *Reader) annotated(line []byte, o *Object) (*Entry, error) {
	e := &Entry{Line: r.line, Form: EntryAnnotated}
	iv, has := o.Get("index")
	if has {
		n, ok := iv.(Number)
		i, isInt := n.Int64()
		if !ok || !isInt {
			return nil, r.datasetErr("Invalid index found: %s in the file. Index must be an integer.", Marshal(iv))
		}
		e.Index, e.HasIndex = i, true
	}
	if err := r.checkIndex(has, e.Index); err != nil {
		return nil, err
	}
	if v, ok := o.Get("id"); ok {
		s, ok := v.(string)
		if !ok {
			return nil, r.datasetErr(`"id" is %s, want a string`, TypeName(v))
		}
		e.ID = s
	}
	if v, ok := o.Get("name"); ok && v != nil {
		s, ok := v.(string)
		if !ok {
			return nil, r.datasetErr(`"name" is %s, want a string`, TypeName(v))
		}
		e.Name = s
	}
	if v, ok := o.Get("hierarchy_path"); ok && v != nil {
		list, ok := v.([]Value)
		if !ok {
			return nil, r.datasetErr(`"hierarchy_path" is %s, want an array of strings`, TypeName(v))
		}
		e.HierarchyPath = make([]string, len(list))
		for i, x := range list {
			s, ok := x.(string)
			if !ok {
				return nil, r.datasetErr(`"hierarchy_path"[%d] is %s, want a string`, i, TypeName(x))
			}
			e.HierarchyPath[i] = s
		}
	}
	if v, ok := o.Get("annotations"); ok && v != nil {
		list, ok := v.([]Value)
		if !ok {
			return nil, r.datasetErr(`"annotations" is %s, want an array`, TypeName(v))
		}
		for _, x := range list {
			a, ok := parseAnnotation(x)
			if !ok {
				return nil, r.datasetErr("Failed to parse annotation: %s", Marshal(x))
			}
			e.Annotations = append(e.Annotations, a)
		}
	}
	t, err := decodeParsed(line, o)
	if t == nil {
		return nil, lineErr(r.line, err)
	}
	e.Trace = t
	return e, lineErr(r.line, err)
}

func parseAnnotation(v Value) (Annotation, bool) {
	o, ok := v.(*Object)
	if !ok {
		return Annotation{}, false
	}
	c, okc := o.Get("content")
	addr, oka := o.Get("address")
	as, oks := addr.(string)
	if !okc || !oka || !oks {
		return Annotation{}, false
	}
	a := Annotation{Address: as, Raw: o}
	if s, ok := c.(string); ok {
		a.Content = s
	} else {
		a.Content = string(Marshal(c))
	}
	if em, ok := o.Get("extra_metadata"); ok {
		a.ExtraMetadata, _ = em.(*Object)
	}
	return a, true
}

// Writer writes a JSONL dataset: an optional metadata line, then entries,
// one per line, all in one form. Call Flush at the end.
type Writer struct {
	w       *bufio.Writer
	buf     []byte
	lines   int
	entries int
	form    EntryForm
}

// NewWriter returns a Writer writing to w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: bufio.NewWriterSize(w, 64<<10)}
}

// WriteMetadata writes the dataset line {"metadata": md}. It must come
// before any entry.
func (w *Writer) WriteMetadata(md *Object) error {
	if w.lines > 0 {
		return fmt.Errorf("write dataset metadata: %w: The metadata row must be the first row in the file.", ErrDataset)
	}
	if md == nil {
		md = &Object{}
	}
	w.buf = append(w.buf[:0], `{"metadata":`...)
	w.buf = AppendValue(w.buf, md)
	w.buf = append(w.buf, '}', '\n')
	w.lines++
	_, err := w.w.Write(w.buf)
	return err
}

// Write writes one trace line. An annotated entry whose Trace has an
// Envelope is written as that envelope (so a read entry round-trips);
// otherwise its fields are written in export order: index, id, name,
// hierarchy_path, messages, metadata, annotations. A raw entry is written
// as its events, preceded by MetadataElement (or {"metadata": ...} when
// only Trace.Metadata is set). Mixing forms is an error.
func (w *Writer) Write(e *Entry) error {
	if e.Trace == nil {
		return fmt.Errorf("write entry: %w: entry has no trace", ErrDataset)
	}
	if w.entries > 0 && w.form != e.Form {
		return fmt.Errorf("write entry: %w: The file cannot contain both raw event lists and annotated event lists.", ErrDataset)
	}
	w.form = e.Form
	b := w.buf[:0]
	if e.Form == EntryAnnotated {
		if e.Trace.Form == FormObject && e.Trace.Envelope != nil {
			b = e.Trace.AppendJSON(b)
		} else {
			b = AppendValue(b, e.envelope())
		}
	} else {
		b = append(b, '[')
		n := 0
		if e.MetadataElement != nil {
			b = AppendValue(b, e.MetadataElement)
			n++
		} else if e.Trace.Metadata != nil {
			b = append(b, `{"metadata":`...)
			b = AppendValue(b, e.Trace.Metadata)
			b = append(b, '}')
			n++
		}
		for _, ev := range e.Trace.Events {
			if n > 0 {
				b = append(b, ',')
			}
			b = AppendValue(b, ev.Raw)
			n++
		}
		b = append(b, ']')
	}
	b = append(b, '\n')
	w.buf = b
	w.lines++
	w.entries++
	_, err := w.w.Write(b)
	return err
}

// Flush writes buffered data to the underlying writer.
func (w *Writer) Flush() error { return w.w.Flush() }

func (e *Entry) envelope() *Object {
	o := &Object{}
	if e.HasIndex {
		o.Set("index", Number(strconv.FormatInt(e.Index, 10)))
	}
	if e.ID != "" {
		o.Set("id", e.ID)
	}
	if e.Name != "" {
		o.Set("name", e.Name)
	}
	if e.HierarchyPath != nil {
		hp := make([]Value, len(e.HierarchyPath))
		for i, s := range e.HierarchyPath {
			hp[i] = s
		}
		o.Set("hierarchy_path", hp)
	}
	o.Set("messages", e.Trace.Values())
	if e.Trace.Metadata != nil {
		o.Set("metadata", e.Trace.Metadata)
	} else {
		o.Set("metadata", &Object{})
	}
	anns := make([]Value, len(e.Annotations))
	for i, a := range e.Annotations {
		if a.Raw != nil {
			anns[i] = a.Raw
			continue
		}
		ao := NewObject("content", a.Content, "address", a.Address)
		if a.ExtraMetadata != nil {
			ao.Set("extra_metadata", a.ExtraMetadata)
		}
		anns[i] = ao
	}
	o.Set("annotations", anns)
	return o
}
