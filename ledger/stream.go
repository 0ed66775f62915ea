package ledger

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
)

// StreamInfo describes what VerifyStream read besides the verdict.
type StreamInfo struct {
	// Receipts is the number of receipts verified.
	Receipts int
	// CloseHash is the top-level string "closeHash" of an object input, ""
	// when absent. It was checked when opts.CloseHash was "".
	CloseHash string
}

// VerifyStream verifies the chain read from r without holding it in memory:
// r holds a JSON array of receipts, or an object with a "receipts" array
// (other members are ignored, except a top-level string "closeHash", which
// is checked when opts.CloseHash is ""; for duplicate members the last one
// wins, as in JavaScript). A small splitter cuts the array into receipts;
// each is parsed with the §2.1 decoder and its hash and signature are
// checked on opts.Workers goroutines while the input is still being read;
// the sequential checks keep only ids and hashes.
//
// The error wraps ErrBadInput (and ErrSyntax for JSON errors, with the byte
// offset) when the input is rejected as a whole (§5.1); the Result is then
// zero.
func VerifyStream(r io.Reader, opts VerifyOptions) (Result, StreamInfo, error) {
	var info StreamInfo
	if err := opts.check(); err != nil {
		return Result{}, info, err
	}
	s := &splitter{r: r, buf: make([]byte, 0, 256<<10)}
	if err := s.skipBOM(); err != nil {
		return Result{}, info, err
	}
	c, err := s.peekNonSpace()
	if err != nil {
		return Result{}, info, s.eofErr(err)
	}
	var v *Verifier
	switch c {
	case '[':
		s.pos++
		if v, err = verifyArray(s, opts, false); err != nil {
			return Result{}, info, err
		}
	case '{':
		s.pos++
		if v, info.CloseHash, err = verifyObject(s, opts); err != nil {
			return Result{}, info, err
		}
	default:
		return Result{}, info, &InputError{Index: -1, Msg: "want a JSON array of receipts or an object with a \"receipts\" array"}
	}
	if c, err := s.peekNonSpace(); err == nil {
		return Result{}, info, s.syntaxErr(fmt.Sprintf("unexpected %q after the top-level value", c))
	} else if !errors.Is(err, io.EOF) {
		return Result{}, info, err
	}
	info.Receipts = v.Len()
	if opts.CloseHash == "" && info.CloseHash != "" {
		if err := v.SetCloseHash(info.CloseHash); err != nil {
			return Result{}, info, err
		}
	}
	return v.Result(), info, nil
}

// verifyObject reads the members of a top-level object after its '{'.
func verifyObject(s *splitter, opts VerifyOptions) (*Verifier, string, error) {
	var v *Verifier
	var pending error // a rejected "receipts" array, unless a later one replaces it
	var closeHash string
	c, err := s.peekNonSpace()
	if err != nil {
		return nil, "", s.eofErr(err)
	}
	if c == '}' {
		s.pos++
		return nil, "", &InputError{Index: -1, Field: "receipts", Msg: "missing"}
	}
	for {
		if c, err = s.peekNonSpace(); err != nil {
			return nil, "", s.eofErr(err)
		}
		if c != '"' {
			return nil, "", s.syntaxErr(fmt.Sprintf("unexpected %q, want a string key", c))
		}
		keyRaw, err := s.value()
		if err != nil {
			return nil, "", err
		}
		kv, err := Parse(keyRaw)
		if err != nil {
			return nil, "", &InputError{Index: -1, Msg: "object key: " + err.Error(), Err: err}
		}
		key, _ := kv.(string)
		if err := s.expect(':'); err != nil {
			return nil, "", err
		}
		if c, err = s.peekNonSpace(); err != nil {
			return nil, "", s.eofErr(err)
		}
		if key == "receipts" {
			if c != '[' {
				return nil, "", &InputError{Index: -1, Field: "receipts", Msg: "want an array"}
			}
			s.pos++
			var ie *InputError
			// The file's "closeHash" (before or after, the last one wins)
			// is checked at the end: keep where each hash occurs.
			switch v, err = verifyArray(s, opts, opts.CloseHash == ""); {
			case err == nil:
				pending = nil
			case errors.As(err, &ie) && !errors.Is(err, ErrSyntax):
				pending, v = err, &Verifier{}
			default:
				return nil, "", err
			}
		} else {
			raw, err := s.value()
			if err != nil {
				return nil, "", err
			}
			val, err := Parse(raw) // as strict as the receipts
			if err != nil {
				return nil, "", &InputError{Index: -1, Field: key, Msg: err.Error(), Err: err}
			}
			if key == "closeHash" {
				closeHash, _ = val.(string)
			}
		}
		if c, err = s.peekNonSpace(); err != nil {
			return nil, "", s.eofErr(err)
		}
		s.pos++
		if c == '}' {
			break
		}
		if c != ',' {
			s.pos--
			return nil, "", s.syntaxErr(fmt.Sprintf("unexpected %q, want ',' or '}'", c))
		}
	}
	if pending != nil {
		return nil, "", pending
	}
	if v == nil {
		return nil, "", &InputError{Index: -1, Field: "receipts", Msg: "missing"}
	}
	return v, closeHash, nil
}

// streamBatch is the unit of work of verifyArray: consecutive receipts
// parsed and checked by one worker.
type streamBatch struct {
	start int
	raws  [][]byte
	offs  []int64 // byte offset of each raw in the input
	out   []checked
	err   error // the first §5.1 error in the batch (an *InputError)
	done  chan struct{}
}

// verifyArray verifies the elements of the array whose '[' was just read,
// and reads the closing ']'. After a receipt is rejected it still reads to
// the end of the array (the caller may go on), checking nothing more.
func verifyArray(s *splitter, opts VerifyOptions, track bool) (*Verifier, error) {
	v, err := newVerifier(opts, track)
	if err != nil {
		return nil, err
	}
	workers := opts.workers()
	kv := v.kv
	work := make(chan *streamBatch, workers)
	ordered := make(chan *streamBatch, 2*workers)
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for b := range work {
				rs := make([]*Receipt, 0, len(b.raws))
				for j, raw := range b.raws {
					r, err := ParseReceipt(raw)
					if err != nil {
						var ie *InputError
						if errors.As(err, &ie) {
							ie.Index = b.start + j
							if errors.Is(err, ErrSyntax) {
								ie.Msg = fmt.Sprintf("%s (the receipt starts at byte %d)", ie.Msg, b.offs[j])
							}
						}
						b.err = err
						failed.Store(true)
						break
					}
					rs = append(rs, r)
				}
				if b.err == nil {
					b.out = make([]checked, len(rs))
					checkChunk(rs, &opts, kv, b.out)
				}
				b.raws = nil
				close(b.done)
			}
		})
	}
	// The consumer applies the sequential checks in chain order.
	var firstErr error
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		for b := range ordered {
			<-b.done
			if firstErr != nil {
				continue
			}
			if b.err != nil {
				firstErr = b.err
				continue
			}
			for _, c := range b.out {
				v.add(c)
			}
		}
	}()
	readErr := func() error {
		n := 0
		cur := &streamBatch{done: make(chan struct{})}
		flush := func() {
			if len(cur.raws) > 0 && !failed.Load() {
				ordered <- cur
				work <- cur
			}
			cur = &streamBatch{start: n, done: make(chan struct{})}
		}
		defer flush()
		c, err := s.peekNonSpace()
		if err != nil {
			return s.eofErr(err)
		}
		if c == ']' {
			s.pos++
			return nil
		}
		for {
			off := s.offset()
			raw, err := s.value()
			if err != nil {
				return err
			}
			if !failed.Load() {
				cur.raws = append(cur.raws, raw)
				cur.offs = append(cur.offs, off)
			}
			n++
			if len(cur.raws) == checkChunkSize {
				flush()
			}
			if c, err = s.peekNonSpace(); err != nil {
				return s.eofErr(err)
			}
			s.pos++
			if c == ']' {
				return nil
			}
			if c != ',' {
				s.pos--
				return s.syntaxErr(fmt.Sprintf("unexpected %q, want ',' or ']'", c))
			}
		}
	}()
	close(work)
	close(ordered)
	wg.Wait()
	<-consumed
	if readErr != nil {
		return nil, readErr
	}
	if firstErr != nil {
		return nil, firstErr
	}
	return v, nil
}

// splitter reads a JSON text from a stream and cuts out whole values by
// their structure (brackets and strings) without validating them: every
// value it returns is then parsed strictly with Parse.
type splitter struct {
	r    io.Reader
	buf  []byte
	pos  int   // next unread byte in buf
	base int64 // input offset of buf[0]
	eof  bool
	err  error // a read error other than io.EOF
}

// more reads more input into buf, dropping what is before keep. It returns
// false at the end of the input or on a read error (s.err).
func (s *splitter) more(keep int) bool {
	if s.eof || s.err != nil {
		return false
	}
	if keep > 0 {
		n := copy(s.buf, s.buf[keep:])
		s.buf = s.buf[:n]
		s.pos -= keep
		s.base += int64(keep)
	}
	if len(s.buf) == cap(s.buf) {
		s.buf = append(s.buf, make([]byte, cap(s.buf))...)[:len(s.buf)]
	}
	n, err := s.r.Read(s.buf[len(s.buf):cap(s.buf)])
	s.buf = s.buf[:len(s.buf)+n]
	if err == io.EOF {
		s.eof = true
	} else if err != nil {
		s.err = err
	}
	return n > 0 || (!s.eof && s.err == nil)
}

func (s *splitter) offset() int64 { return s.base + int64(s.pos) }

func (s *splitter) skipBOM() error {
	for len(s.buf)-s.pos < 3 && s.more(s.pos) {
	}
	if s.err != nil {
		return s.readErr()
	}
	if bytes.HasPrefix(s.buf[s.pos:], []byte{0xEF, 0xBB, 0xBF}) {
		s.pos += 3
	}
	return nil
}

// peekNonSpace skips whitespace and returns the next byte without
// consuming it; io.EOF at the end of the input.
func (s *splitter) peekNonSpace() (byte, error) {
	for {
		for s.pos < len(s.buf) {
			switch c := s.buf[s.pos]; c {
			case ' ', '\t', '\n', '\r':
				s.pos++
			default:
				return c, nil
			}
		}
		if !s.more(s.pos) {
			if s.err != nil {
				return 0, s.readErr()
			}
			return 0, io.EOF
		}
	}
}

func (s *splitter) expect(want byte) error {
	c, err := s.peekNonSpace()
	if err != nil {
		return s.eofErr(err)
	}
	if c != want {
		return s.syntaxErr(fmt.Sprintf("unexpected %q, want %q", c, want))
	}
	s.pos++
	return nil
}

// value returns a copy of the next JSON value's bytes (after whitespace).
func (s *splitter) value() ([]byte, error) {
	if _, err := s.peekNonSpace(); err != nil {
		return nil, s.eofErr(err)
	}
	start := s.pos
	depth := 0
	inString, escaped := false, false
	i := s.pos
	for {
		for ; i < len(s.buf); i++ {
			c := s.buf[i]
			if inString {
				switch {
				case escaped:
					escaped = false
				case c == '\\':
					escaped = true
				case c == '"':
					inString = false
					if depth == 0 {
						return s.cut(start, i+1), nil
					}
				}
				continue
			}
			switch c {
			case '"':
				inString = true
			case '{', '[':
				depth++
			case '}', ']':
				if depth == 0 { // ends a scalar
					return s.cut(start, i), nil
				}
				depth--
				if depth == 0 {
					return s.cut(start, i+1), nil
				}
			case ',', ' ', '\t', '\n', '\r':
				if depth == 0 {
					return s.cut(start, i), nil
				}
			}
			if depth > MaxDepth {
				s.pos = i
				return nil, s.syntaxErr(fmt.Sprintf("nesting deeper than %d", MaxDepth))
			}
		}
		i -= start
		s.pos = start
		if !s.more(start) {
			if s.err != nil {
				return nil, s.readErr()
			}
			if depth == 0 && !inString && len(s.buf) > s.pos { // a scalar at the end
				return s.cut(s.pos, len(s.buf)), nil
			}
			s.pos = len(s.buf)
			return nil, s.syntaxErr("unexpected end of input")
		}
		start = s.pos
		i += start
	}
}

func (s *splitter) cut(start, end int) []byte {
	s.pos = end
	return bytes.Clone(s.buf[start:end])
}

func (s *splitter) syntaxErr(msg string) error {
	return &InputError{Index: -1, Msg: fmt.Sprintf("invalid JSON at byte %d: %s", s.offset(), msg), Err: ErrSyntax}
}

func (s *splitter) eofErr(err error) error {
	if errors.Is(err, io.EOF) {
		return s.syntaxErr("unexpected end of input")
	}
	return err
}

func (s *splitter) readErr() error {
	return &InputError{Index: -1, Msg: fmt.Sprintf("read at byte %d: %v", s.offset(), s.err), Err: s.err}
}
