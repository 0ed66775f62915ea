package ledger

import (
	"bufio"
	"bytes"
	"encoding/json"
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

// streamBatch is the unit of work of VerifyStream: consecutive receipts
// parsed and checked by one worker.
type streamBatch struct {
	start int
	raws  [][]byte
	out   []checked
	err   error // the first §5.1 error in the batch (an *InputError)
	done  chan struct{}
}

// VerifyStream verifies the chain read from r without holding it in memory:
// r holds a JSON array of receipts, or an object with a "receipts" array
// (other members are ignored, except a top-level string "closeHash", which
// is checked when opts.CloseHash is ""; for duplicate members the last one
// wins, as in JavaScript). Each receipt is parsed with the §2.1 decoder and
// its hash and signature are checked on opts.Workers goroutines while the
// input is still being read; the sequential checks keep only ids and hashes.
//
// The error wraps ErrBadInput (and, for JSON errors, names the byte offset)
// when the input is rejected as a whole (§5.1); the Result is then zero.
func VerifyStream(r io.Reader, opts VerifyOptions) (Result, StreamInfo, error) {
	if err := opts.check(); err != nil {
		return Result{}, StreamInfo{}, err
	}
	br := bufio.NewReaderSize(r, 64<<10)
	if b, err := br.Peek(3); err == nil && bytes.Equal(b, []byte{0xEF, 0xBB, 0xBF}) {
		br.Discard(3)
	}
	dec := json.NewDecoder(br)
	var info StreamInfo
	tok, err := dec.Token()
	if err != nil {
		return Result{}, info, jsonError(dec, err)
	}
	var v *Verifier
	switch tok {
	case json.Delim('['):
		if v, err = verifyArray(dec, opts); err != nil {
			return Result{}, info, err
		}
	case json.Delim('{'):
		var pending error // a rejected "receipts" array
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return Result{}, info, jsonError(dec, err)
			}
			key, _ := kt.(string)
			switch key {
			case "receipts":
				t, err := dec.Token()
				if err != nil {
					return Result{}, info, jsonError(dec, err)
				}
				if t != json.Delim('[') {
					return Result{}, info, &InputError{Index: -1, Field: "receipts", Msg: "want an array"}
				}
				// The last "receipts" wins (§2.1), so a rejected array only
				// counts if no other one follows.
				var ie *InputError
				switch v, err = verifyArray(dec, opts); {
				case err == nil:
					pending = nil
				case errors.As(err, &ie) && !errors.Is(err, ErrSyntax):
					pending, v = err, &Verifier{}
				default:
					return Result{}, info, err
				}
			default:
				var raw json.RawMessage
				if err := dec.Decode(&raw); err != nil {
					return Result{}, info, jsonError(dec, err)
				}
				val, err := Parse(raw) // same strictness as the receipts
				if err != nil {
					return Result{}, info, &InputError{Index: -1, Field: key, Msg: err.Error(), Err: err}
				}
				if key == "closeHash" {
					info.CloseHash, _ = val.(string)
				}
			}
		}
		if _, err := dec.Token(); err != nil { // '}'
			return Result{}, info, jsonError(dec, err)
		}
		if pending != nil {
			return Result{}, info, pending
		}
		if v == nil {
			return Result{}, info, &InputError{Index: -1, Field: "receipts", Msg: "missing"}
		}
	default:
		return Result{}, info, &InputError{Index: -1, Msg: "want a JSON array of receipts or an object with a \"receipts\" array"}
	}
	if _, err := dec.Token(); err != io.EOF {
		if err == nil {
			err = errors.New("unexpected data after the top-level value")
		}
		return Result{}, info, jsonError(dec, err)
	}
	info.Receipts = v.Len()
	if opts.CloseHash == "" && info.CloseHash != "" {
		if err := v.SetCloseHash(info.CloseHash); err != nil {
			return Result{}, info, err
		}
	}
	return v.Result(), info, nil
}

func jsonError(dec *json.Decoder, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return &InputError{Index: -1, Msg: fmt.Sprintf("invalid JSON at byte %d: %v", se.Offset, err), Err: ErrSyntax}
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &InputError{Index: -1, Msg: fmt.Sprintf("invalid JSON: unexpected end of input at byte %d", dec.InputOffset()), Err: ErrSyntax}
	}
	var ue *json.UnmarshalTypeError
	if errors.As(err, &ue) {
		return &InputError{Index: -1, Msg: err.Error()}
	}
	if errors.Is(err, ErrBadInput) {
		return err
	}
	return &InputError{Index: -1, Msg: fmt.Sprintf("at byte %d: %v", dec.InputOffset(), err), Err: err}
}

// verifyArray verifies the elements of the array whose '[' dec just read,
// and reads the closing ']'.
func verifyArray(dec *json.Decoder, opts VerifyOptions) (*Verifier, error) {
	v, err := NewVerifier(opts)
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
	var readErr error
	n := 0
	cur := &streamBatch{start: 0, done: make(chan struct{})}
	flush := func() {
		if len(cur.raws) == 0 {
			return
		}
		ordered <- cur
		work <- cur
		cur = &streamBatch{start: n, done: make(chan struct{})}
	}
	for dec.More() && !failed.Load() {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			readErr = jsonError(dec, err)
			break
		}
		cur.raws = append(cur.raws, raw)
		n++
		if len(cur.raws) == checkChunkSize {
			flush()
		}
	}
	flush()
	if failed.Load() && readErr == nil {
		// Skip the rest of the array so the caller can go on reading.
		for dec.More() {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				readErr = jsonError(dec, err)
				break
			}
		}
	}
	close(work)
	close(ordered)
	wg.Wait()
	<-consumed
	if readErr != nil && (firstErr == nil || errors.Is(readErr, ErrSyntax)) {
		return nil, readErr
	}
	if _, err := dec.Token(); err != nil { // ']'
		return nil, jsonError(dec, err)
	}
	if firstErr != nil {
		return nil, firstErr
	}
	return v, nil
}
