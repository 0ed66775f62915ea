package gateway

import (
	"bytes"
	"errors"
	"io"
	"time"
)

// frameKind is the class of an upstream stream event (spec §6.4).
type frameKind uint8

const (
	kindNeutral frameKind = iota // no content: released once all earlier events are
	kindText                     // covers a span of a choice's visible text
	kindTool                     // part of a tool call
	kindFinal                    // finish reasons, usage, [DONE], end of stream
)

// span says that a text event ends at code point end of choice's text.
type span struct {
	choice int
	end    int
}

// frame is one upstream stream event: its bytes, forwarded verbatim, and
// its parsed payload and class.
type frame struct {
	raw   []byte
	event string // SSE event name, "" when none
	data  []byte // the data lines joined with \n (may share raw's array); nil for comment-only frames
	kind  frameKind
	spans []span
	tool  string // the tool call of a kindTool event
	at    time.Time
}

// streamParser accumulates one response stream (spec §4.3–4.5).
type streamParser interface {
	// feed classifies f (kind, spans, tool) and accumulates its content.
	feed(f *frame)
	// finish is called when the upstream stream ended.
	finish()
	// textLens is the length in code points of each choice's text.
	textLens() map[int]int
	// toolDone reports whether a tool call is complete.
	toolDone(key string) bool
	// draft is the draft assistant event of each choice with its complete
	// tool calls, and the keys of those calls.
	draft() ([]event, []string)
	// output is the accumulated response.
	output() *callOutput
}

// maxFrame is the largest SSE frame the parser inspects (spec §4.3).
const maxFrame = 4 << 20

var errFrameTooLarge = errors.New("stream frame over 4 MiB")

// sseReader splits an SSE byte stream into frames, buffering partial
// frames across reads and accepting \r\n line ends.
type sseReader struct {
	r   io.Reader
	buf []byte
	eof bool
}

// newSSEReader reads r. Its buffer starts at 4 KiB (the size of the
// upstream connection's read buffer) and grows for longer frames.
func newSSEReader(r io.Reader) *sseReader { return &sseReader{r: r, buf: make([]byte, 0, 4<<10)} }

// next returns the next complete frame (its raw bytes include the blank
// line that ends it). At the end of the stream a last unterminated frame
// is returned, then io.EOF.
func (s *sseReader) next() (*frame, error) {
	for {
		if i, n := frameEnd(s.buf); i >= 0 {
			raw := make([]byte, i+n)
			copy(raw, s.buf[:i+n])
			s.buf = s.buf[:copy(s.buf, s.buf[i+n:])]
			return parseFrame(raw), nil
		}
		if len(s.buf) > maxFrame {
			return nil, errFrameTooLarge
		}
		if s.eof {
			if len(bytes.TrimSpace(s.buf)) == 0 {
				return nil, io.EOF
			}
			raw := append([]byte(nil), s.buf...)
			s.buf = s.buf[:0]
			return parseFrame(raw), nil
		}
		if cap(s.buf)-len(s.buf) < 4096 {
			nb := make([]byte, len(s.buf), 2*cap(s.buf)+4096)
			copy(nb, s.buf)
			s.buf = nb
		}
		n, err := s.r.Read(s.buf[len(s.buf):cap(s.buf)])
		s.buf = s.buf[:len(s.buf)+n]
		if err != nil {
			if err != io.EOF {
				return nil, err
			}
			s.eof = true
		}
	}
}

// rest returns the bytes read but not yet returned as frames.
func (s *sseReader) rest() []byte { return s.buf }

// frameEnd finds the first blank line: the index of the line break
// before it and the length of both line breaks. A \r at the end of b
// may be the start of \r\n, so it waits for more input.
func frameEnd(b []byte) (int, int) {
	brk := func(j int) int { // length of the line break at j, -1 if unknown yet
		switch {
		case j >= len(b):
			return 0
		case b[j] == '\n':
			return 1
		case b[j] == '\r':
			if j+1 >= len(b) {
				return -1
			}
			if b[j+1] == '\n' {
				return 2
			}
			return 1
		}
		return 0
	}
	for i := 0; i < len(b); i++ {
		l1 := brk(i)
		if l1 < 0 {
			return -1, 0
		}
		if l1 == 0 {
			continue
		}
		l2 := brk(i + l1)
		if l2 < 0 {
			return -1, 0
		}
		if l2 > 0 {
			return i, l1 + l2
		}
		i += l1 - 1
	}
	return -1, 0
}

// parseFrame reads the event name and the data lines of one frame.
func parseFrame(raw []byte) *frame {
	f := &frame{raw: raw}
	rest := raw
	for len(rest) > 0 {
		line := rest
		if i := bytes.IndexAny(rest, "\r\n"); i >= 0 {
			line = rest[:i]
			if rest[i] == '\r' && i+1 < len(rest) && rest[i+1] == '\n' {
				rest = rest[i+2:]
			} else {
				rest = rest[i+1:]
			}
		} else {
			rest = nil
		}
		if len(line) == 0 || line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		switch string(field) {
		case "event":
			f.event = string(value)
		case "data":
			if f.data == nil {
				// The usual single data line is read in place; a
				// second one appends to a copy (the capacity ends
				// with the line, so raw is never written).
				f.data = value[:len(value):len(value)]
				if f.data == nil {
					f.data = []byte{}
				}
				break
			}
			f.data = append(f.data, '\n')
			f.data = append(f.data, value...)
		}
	}
	return f
}
