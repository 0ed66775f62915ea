package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Progress of vigil import and export, in traces and events as well as
// bytes. A JSONL transfer has two phases on import: sending the file,
// then waiting while the server stores it (it answers only when every
// trace is stored). Both are shown as they are: a rate and an ETA while
// sending, then the server phase with a spinner and the time it has taken.
// On a terminal the line is redrawn; otherwise a plain line is written
// every few seconds; with -q nothing is written.

// progress reports a transfer on stderr. All methods are safe for
// concurrent use.
type progress struct {
	w           io.Writer
	label       string
	totalBytes  int64 // size of the file, -1 when unknown
	totalTraces int64 // traces expected (export), -1 when unknown
	tty, off    bool
	tracesOnly  bool // count traces alone: no events or bytes (backtest)
	interval    time.Duration
	now         func() time.Time // time.Now; tests set it

	mu                    sync.Mutex
	bytes, traces, events int64
	start, last           time.Time
	storing               time.Time // when the server phase began; zero before
	frame                 int       // spinner frame
	stop                  chan struct{}
	stopped               bool
}

func newProgress(w io.Writer, label string, totalBytes int64, quiet bool) *progress {
	p := &progress{w: w, label: label, totalBytes: totalBytes, totalTraces: -1, off: quiet, interval: 5 * time.Second, now: time.Now}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty, p.interval = true, 100*time.Millisecond
		}
	}
	p.start = p.now()
	p.last = p.start
	return p
}

// line records one JSONL line of n bytes holding a trace with events
// events (trace false for the dataset line or a blank line).
func (p *progress) line(n int, trace bool, events int) {
	if p.off {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bytes += int64(n)
	if trace {
		p.traces++
		p.events += int64(events)
	}
	if now := p.now(); now.Sub(p.last) >= p.interval {
		p.last = now
		p.draw(now, false)
	}
}

// serverPhase marks the end of sending: from now on the server works
// and a ticker keeps the line alive until done.
func (p *progress) serverPhase() {
	if p.off {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.storing.IsZero() || p.stopped {
		return
	}
	p.storing = p.now()
	p.draw(p.storing, false)
	p.stop = make(chan struct{})
	go p.tick(p.stop)
}

func (p *progress) tick(stop chan struct{}) {
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			p.mu.Lock()
			if !p.stopped {
				p.frame++
				p.draw(p.now(), false)
			}
			p.mu.Unlock()
		}
	}
}

// done draws the final state on success; on failure it only ends a
// redrawn line (the caller reports the error).
func (p *progress) done(ok bool) {
	if p.off {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	p.stopped = true
	if p.stop != nil {
		close(p.stop)
	}
	switch {
	case ok:
		p.draw(p.now(), true)
	case p.tty: // end the redrawn line where the transfer stopped
		p.draw(p.now(), false)
		fmt.Fprintln(p.w)
	}
}

var spinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// status renders the current state at now (with p.mu held).
func (p *progress) status(now time.Time, final bool) string {
	el := now.Sub(p.start)
	counts := fmt.Sprintf("%s traces, %s events", thousands(p.traces), thousands(p.events))
	if p.totalTraces >= 0 {
		counts = fmt.Sprintf("%s of %s traces, %s events", thousands(p.traces), thousands(p.totalTraces), thousands(p.events))
	}
	if p.tracesOnly {
		counts, _, _ = strings.Cut(counts, ", ")
	}
	switch {
	case final && !p.storing.IsZero():
		return fmt.Sprintf("%s stored in %s (%s; server %s)", counts, round(el), perSecond(p.traces, el), round(now.Sub(p.storing)))
	case final && p.tracesOnly:
		return fmt.Sprintf("%s in %s (%s)", counts, round(el), perSecond(p.traces, el))
	case final:
		return fmt.Sprintf("%s, %s in %s (%s)", counts, humanBytes(p.bytes), round(el), perSecond(p.traces, el))
	case !p.storing.IsZero():
		spin := ""
		if p.tty {
			spin = spinner[p.frame%len(spinner)] + " "
		}
		return fmt.Sprintf("uploaded %s (%s); %sserver storing %s traces… %s", humanBytes(p.bytes), counts, spin, thousands(p.traces), round(now.Sub(p.storing)))
	}
	s := counts
	if !p.tracesOnly {
		s += ", " + humanBytes(p.bytes)
	}
	frac := -1.0
	switch {
	case p.totalTraces > 0:
		frac = float64(p.traces) / float64(p.totalTraces)
	case p.totalBytes > 0:
		frac = float64(p.bytes) / float64(p.totalBytes)
		s += " of " + humanBytes(p.totalBytes)
	}
	if frac >= 0 {
		s += fmt.Sprintf(" (%.0f%%)", min(frac, 1)*100)
	}
	s += ", " + perSecond(p.traces, el)
	if frac > 0 && frac < 1 && el > 0 {
		s += ", ETA " + round(time.Duration(float64(el)*(1-frac)/frac)).String()
	}
	return s
}

func (p *progress) draw(now time.Time, final bool) {
	line := p.label + ": " + p.status(now, final)
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		if final {
			fmt.Fprintln(p.w)
		}
		return
	}
	fmt.Fprintf(p.w, "vigil: %s\n", line)
}

// perSecond is "N traces/s" over el.
func perSecond(n int64, el time.Duration) string {
	if el <= 0 {
		return "- traces/s"
	}
	return thousands(int64(float64(n)/el.Seconds())) + " traces/s"
}

// round shortens d for display: 0.1 s steps below a minute, else seconds.
func round(d time.Duration) time.Duration {
	if d < time.Minute {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}

// thousands formats n with comma separators: 12,000.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
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

// jsonlStream passes a JSONL file through line by line, counting traces
// and events for a progress, and with renumber drops the "index" member of
// every trace line (the server then gives the traces the dataset's next
// indices). Memory is bounded by the longest line. At the end of the input
// it starts the progress's server phase (the body is sent; the server is
// at work) when serverPhase is set.
type jsonlStream struct {
	r           *bufio.Reader
	p           *progress
	renumber    bool
	serverPhase bool
	line        []byte
	off         int
	err         error
}

func newJSONLStream(r io.Reader, p *progress) *jsonlStream {
	return &jsonlStream{r: bufio.NewReaderSize(r, 256<<10), p: p}
}

func (s *jsonlStream) Read(b []byte) (int, error) {
	for s.off >= len(s.line) {
		if s.err != nil {
			if s.err == io.EOF && s.serverPhase {
				s.p.serverPhase()
			}
			return 0, s.err
		}
		s.next()
	}
	n := copy(b, s.line[s.off:])
	s.off += n
	return n, nil
}

// next reads the next line into s.line.
func (s *jsonlStream) next() {
	s.line, s.off = s.line[:0], 0
	for {
		chunk, err := s.r.ReadSlice('\n')
		s.line = append(s.line, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		s.err = err
		break
	}
	n := len(s.line)
	st := scanJSONLLine(s.line)
	if s.renumber && st.trace && st.hasIndex {
		s.line = dropIndex(s.line, st)
	}
	s.p.line(n, st.trace, st.events)
}

// lineStats is what scanJSONLLine found on a line.
type lineStats struct {
	trace    bool // an event list, or an object with "messages"
	events   int  // elements of the event list
	hasIndex bool // an object with a top-level "index"
	// indexStart and indexEnd span the first top-level "index" member,
	// from its key's quote to the end of its value.
	indexStart, indexEnd int
}

// scanJSONLLine looks at a JSONL line without decoding it: a JSON array is
// an event list; an object with a "messages" array is a trace. Malformed
// JSON yields what was found before the error (the server reports it).
func scanJSONLLine(b []byte) lineStats {
	var st lineStats
	i := skipSpace(b, 0)
	if i >= len(b) {
		return st
	}
	switch b[i] {
	case '[':
		st.trace, st.events = true, countElems(b, i)
	case '{':
		i = skipSpace(b, i+1)
		for i < len(b) && b[i] == '"' {
			ks := i
			i = skipString(b, i)
			key := b[ks+1 : max(ks+1, i-1)]
			i = skipSpace(b, i)
			if i >= len(b) || b[i] != ':' {
				return st
			}
			i = skipSpace(b, i+1)
			switch string(key) {
			case "messages":
				if i < len(b) && b[i] == '[' {
					st.trace, st.events = true, countElems(b, i)
				}
			}
			end := skipValue(b, i)
			if string(key) == "index" && !st.hasIndex {
				st.hasIndex, st.indexStart, st.indexEnd = true, ks, end
			}
			i = skipSpace(b, end)
			if i >= len(b) || b[i] != ',' {
				return st
			}
			i = skipSpace(b, i+1)
		}
	}
	return st
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] == '"'.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipValue returns the index after the JSON value starting at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	}
	for i < len(b) && strings.IndexByte(",}] \t\r\n", b[i]) < 0 {
		i++
	}
	return i
}

// countElems counts the elements of the array starting at b[i] == '['.
func countElems(b []byte, i int) int {
	i = skipSpace(b, i+1)
	if i >= len(b) || b[i] == ']' {
		return 0
	}
	n := 0
	for i < len(b) {
		i = skipSpace(b, skipValue(b, i))
		n++
		if i >= len(b) || b[i] != ',' {
			break
		}
		i = skipSpace(b, i+1)
	}
	return n
}

// dropIndex removes the top-level "index" members of an object line
// (st is scanJSONLLine's result for it) with the comma that joins each to
// its neighbour, in place, leaving every other byte as it was.
func dropIndex(line []byte, st lineStats) []byte {
	for st.hasIndex && st.indexEnd <= len(line) {
		from, to := st.indexStart, st.indexEnd
		if after := skipSpace(line, to); after < len(line) && line[after] == ',' {
			to = skipSpace(line, after+1) // "index": 1, "name" -> "name"
		} else {
			before := from - 1
			for before > 0 && strings.IndexByte(" \t\r\n", line[before]) >= 0 {
				before--
			}
			if before > 0 && line[before] == ',' {
				from = before // "name": "x", "index": 1} -> "name": "x"}
			}
		}
		line = append(line[:from], line[to:]...)
		st = scanJSONLLine(line)
	}
	return line
}
