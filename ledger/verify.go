package ledger

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"slices"
	"sync"
)

// Reason is a verification reason code (§5.2, §6.4, §7.5).
type Reason string

// The reason codes, in rank order.
const (
	ReasonHashMismatch      Reason = "hash_mismatch"       // rank 1
	ReasonLinkage           Reason = "linkage"             // rank 2
	ReasonSignature         Reason = "signature"           // rank 3
	ReasonDuplicateID       Reason = "duplicate_id"        // rank 4
	ReasonSessionMismatch   Reason = "session_mismatch"    // rank 5
	ReasonTimestampOrder    Reason = "timestamp_order"     // rank 6
	ReasonEventMismatch     Reason = "event_mismatch"      // rank 7 (runs, §7.5)
	ReasonMissingReceipt    Reason = "missing_receipt"     // rank 8 (runs)
	ReasonMissingEvent      Reason = "missing_event"       // rank 8 (runs)
	ReasonCloseHashMismatch Reason = "close_hash_mismatch" // rank 9
	ReasonCloseSignature    Reason = "close_signature"     // rank 10 (sessions, §6.4)
	ReasonClientReported    Reason = "client_reported"     // a tamper reason only (§10), never in a result
	// ReasonMissingSession: run verification (§7.5) found no session row
	// for the run (it was deleted from the database), so nothing vouches
	// for its events. A Vigil extension; it ranks first, at index 0.
	ReasonMissingSession Reason = "missing_session"
)

// Rank returns the reason's rank: errors at one index sort by it. Unknown
// reasons rank last.
func (r Reason) Rank() int {
	switch r {
	case ReasonMissingSession:
		return 0
	case ReasonHashMismatch:
		return 1
	case ReasonLinkage:
		return 2
	case ReasonSignature:
		return 3
	case ReasonDuplicateID:
		return 4
	case ReasonSessionMismatch:
		return 5
	case ReasonTimestampOrder:
		return 6
	case ReasonEventMismatch:
		return 7
	case ReasonMissingReceipt, ReasonMissingEvent:
		return 8
	case ReasonCloseHashMismatch:
		return 9
	case ReasonCloseSignature:
		return 10
	}
	return 100
}

// VerifyError is one failed check: the receipt index and the reason.
type VerifyError struct {
	Index  int    `json:"index"`
	Reason Reason `json:"reason"`
}

// Result is the outcome of a verification (§5.3). Its JSON is exactly
// {"valid","brokenAt","reason","errors"} in that order; Errors is never nil
// in a Result made by this package.
type Result struct {
	Valid    bool          `json:"valid"`
	BrokenAt *int          `json:"brokenAt"`
	Reason   *Reason       `json:"reason"`
	Errors   []VerifyError `json:"errors"`
}

// NewResult returns the Result for errs: sorted by (index, rank), valid
// exactly when errs is empty, brokenAt and reason from the first error.
func NewResult(errs []VerifyError) Result {
	errs = slices.Clone(errs)
	if errs == nil {
		errs = []VerifyError{}
	}
	slices.SortStableFunc(errs, func(a, b VerifyError) int {
		if a.Index != b.Index {
			return a.Index - b.Index
		}
		return a.Reason.Rank() - b.Reason.Rank()
	})
	res := Result{Valid: len(errs) == 0, Errors: errs}
	if len(errs) > 0 {
		i, r := errs[0].Index, errs[0].Reason
		res.BrokenAt, res.Reason = &i, &r
	}
	return res
}

// With returns the result with more errors added (the server's ranks 7, 8
// and 10), re-sorted.
func (r Result) With(errs ...VerifyError) Result {
	return NewResult(append(slices.Clone(r.Errors), errs...))
}

// Messages returns the errors as "receipt <index>: <reason>" strings, the
// form of the SDK-compatible GET /v1/sessions/{id}/verify (§10). Never nil.
func (r Result) Messages() []string {
	out := make([]string, len(r.Errors))
	for i, e := range r.Errors {
		out[i] = fmt.Sprintf("receipt %d: %s", e.Index, e.Reason)
	}
	return out
}

// VerifyOptions are the optional inputs of chain verification (§5).
type VerifyOptions struct {
	// PublicKey turns on signature checks; nil ignores signatures.
	PublicKey ed25519.PublicKey
	// SessionID, when not "", is the id every receipt must carry.
	SessionID string
	// CloseHash, when not "", is the hash the chain must end with: "0" or
	// 64 lowercase hex characters.
	CloseHash string
	// Workers bounds the goroutines that check hashes and signatures;
	// 0 means GOMAXPROCS.
	Workers int

	// failSignatures makes every signature check fail: session
	// verification when the signer's key is not in the ring (§6.4).
	failSignatures bool
}

func (o VerifyOptions) check() error {
	if o.PublicKey != nil && len(o.PublicKey) != ed25519.PublicKeySize {
		return &InputError{Index: -1, Field: "publicKey", Msg: fmt.Sprintf("want %d bytes, got %d", ed25519.PublicKeySize, len(o.PublicKey)), Err: ErrInvalidKey}
	}
	if o.CloseHash != "" && !validCloseHash(o.CloseHash) {
		return &InputError{Index: -1, Field: "closeHash", Msg: fmt.Sprintf("%q is neither \"0\" nor 64 lowercase hex characters", o.CloseHash)}
	}
	return nil
}

func validCloseHash(s string) bool {
	if s == "0" {
		return true
	}
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func (o VerifyOptions) workers() int {
	if o.Workers > 0 {
		return o.Workers
	}
	return runtime.GOMAXPROCS(0)
}

// checked is what the independent per-receipt checks (rank 1 and 3) found,
// plus the members the sequential checks need.
type checked struct {
	id, sessionID, hash, previousHash string
	timestamp                         float64
	hashOK, sigOK                     bool
}

// checkChunk runs the checks that need no other receipt (hash, signature)
// on rs, writing out[i] for rs[i]. Signatures of a chunk are verified as a
// batch (sig.go). kv is nil when signatures are not checked.
func checkChunk(rs []*Receipt, opts *VerifyOptions, kv *keyVerifier, out []checked) {
	for i, r := range rs {
		h, err := r.ComputeHash()
		out[i] = checked{id: r.ID, sessionID: r.SessionID, hash: r.Hash, previousHash: r.PreviousHash,
			timestamp: r.Timestamp, hashOK: err == nil && h == r.Hash, sigOK: !opts.failSignatures}
	}
	if opts.failSignatures || kv == nil {
		return
	}
	msgs := make([][]byte, len(rs))
	sigs := make([]string, len(rs))
	ok := make([]bool, len(rs))
	for i, r := range rs {
		msgs[i], sigs[i] = []byte(r.Hash), r.Signature
	}
	kv.verifyAll(msgs, sigs, ok)
	for i := range rs {
		out[i].sigOK = ok[i]
	}
}

// keyVerifier returns the verifier of opts.PublicKey, nil without a key.
func (o *VerifyOptions) keyVerifier() *keyVerifier {
	if o.PublicKey == nil {
		return nil
	}
	return newKeyVerifier(o.PublicKey)
}

// checkChunkSize is how many receipts one worker checks at a time (and
// one signature batch). Larger batches amortise the batch verifier's
// setup: 512 verifies with about 10% less CPU per receipt than 128.
const checkChunkSize = 512

// Verifier runs the §5.2 checks over receipts given one at a time, in
// chain order. It is what VerifyChain and VerifyStream use, and what a
// store uses to check a receipt against a stored tail. It keeps the ids and
// hashes seen (not the receipts). Not safe for concurrent use.
//
// Its state grows by about 100 bytes per receipt: a 128-bit digest of each
// id (for duplicate_id) and, only while a close hash may still be set
// later (SetCloseHash), the first index of each stored hash.
type Verifier struct {
	opts         VerifyOptions
	kv           *keyVerifier
	n            int
	prevHash     string
	prevTS       float64
	firstSession string
	ids          map[[16]byte]struct{} // SHA-256 prefix of each id
	errs         []VerifyError

	// Where a close hash first occurs as a stored hash (rank 9 indexes):
	// closeAt for opts.CloseHash as it was during Add; zeroAt for "0";
	// hashes for every 64-hex hash, kept only when track is set.
	closeAt, zeroAt int
	closeAtFor      string
	track           bool
	hashes          map[[32]byte]int
}

// NewVerifier returns a Verifier for a chain that starts at index 0. It
// fails (wrapping ErrBadInput) for an invalid public key or close hash.
func NewVerifier(opts VerifyOptions) (*Verifier, error) {
	return newVerifier(opts, true)
}

// newVerifier is NewVerifier; track says whether SetCloseHash may be
// called after Add (so every stored hash's first index is kept).
func newVerifier(opts VerifyOptions, track bool) (*Verifier, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	v := &Verifier{opts: opts, kv: opts.keyVerifier(), ids: map[[16]byte]struct{}{},
		closeAt: -1, zeroAt: -1, closeAtFor: opts.CloseHash, track: track}
	if track {
		v.hashes = map[[32]byte]int{}
	}
	return v, nil
}

// hashKey decodes a 64-lowercase-hex hash (the only kind a valid close
// hash can equal, besides "0").
func hashKey(h string) ([32]byte, bool) {
	var k [32]byte
	if len(h) != 64 || !validCloseHash(h) {
		return k, false
	}
	_, err := hex.Decode(k[:], []byte(h))
	return k, err == nil
}

// firstIndex returns the first index whose stored hash is h, or -1.
func (v *Verifier) firstIndex(h string) int {
	switch {
	case h == v.closeAtFor && h != "":
		return v.closeAt
	case h == "0":
		return v.zeroAt
	}
	if k, ok := hashKey(h); ok && v.track {
		if i, seen := v.hashes[k]; seen {
			return i
		}
	}
	return -1
}

// Add checks the next receipt of the chain.
func (v *Verifier) Add(r *Receipt) {
	var c [1]checked
	checkChunk([]*Receipt{r}, &v.opts, v.kv, c[:])
	v.add(c[0])
}

func (v *Verifier) add(c checked) {
	i := v.n
	fail := func(reason Reason) { v.errs = append(v.errs, VerifyError{Index: i, Reason: reason}) }
	if !c.hashOK {
		fail(ReasonHashMismatch)
	}
	if (i == 0 && c.previousHash != "0") || (i > 0 && c.previousHash != v.prevHash) {
		fail(ReasonLinkage)
	}
	if !c.sigOK {
		fail(ReasonSignature)
	}
	sum := sha256.Sum256([]byte(c.id))
	idKey := [16]byte(sum[:16])
	if _, dup := v.ids[idKey]; dup {
		fail(ReasonDuplicateID)
	} else {
		v.ids[idKey] = struct{}{}
	}
	if v.opts.SessionID != "" {
		if c.sessionID != v.opts.SessionID {
			fail(ReasonSessionMismatch)
		}
	} else if i == 0 {
		v.firstSession = c.sessionID
	} else if c.sessionID != v.firstSession {
		fail(ReasonSessionMismatch)
	}
	if i > 0 && c.timestamp < v.prevTS {
		fail(ReasonTimestampOrder)
	}
	if v.closeAt < 0 && c.hash == v.closeAtFor {
		v.closeAt = i
	}
	if v.zeroAt < 0 && c.hash == "0" {
		v.zeroAt = i
	}
	if v.track {
		if k, ok := hashKey(c.hash); ok {
			if _, seen := v.hashes[k]; !seen {
				v.hashes[k] = i
			}
		}
	}
	v.prevHash, v.prevTS = c.hash, c.timestamp
	v.n++
}

// Len returns the number of receipts added.
func (v *Verifier) Len() int { return v.n }

// SetCloseHash sets the close hash to check in Result (for a close hash
// found after the receipts, as in a streamed file). It fails like
// NewVerifier for an invalid hash.
func (v *Verifier) SetCloseHash(h string) error {
	o := v.opts
	o.CloseHash = h
	if err := o.check(); err != nil {
		return err
	}
	v.opts.CloseHash = h
	return nil
}

// Result returns the verification result so far, with the close hash check
// (rank 9) when a close hash is set.
func (v *Verifier) Result() Result {
	errs := v.errs
	if ch := v.opts.CloseHash; ch != "" {
		last := "0"
		if v.n > 0 {
			last = v.prevHash
		}
		if last != ch {
			idx := v.n
			if k := v.firstIndex(ch); k >= 0 && k < v.n-1 {
				idx = k + 1
			}
			errs = append(slices.Clone(errs), VerifyError{Index: idx, Reason: ReasonCloseHashMismatch})
		}
	}
	return NewResult(errs)
}

// VerifyChain verifies receipts with the §5.2 rules. Hashes and signatures
// are checked in parallel (opts.Workers). The error, wrapping ErrBadInput,
// is only for an invalid key or close hash (receipts of the wrong shape
// cannot be represented as a *Receipt; ParseReceipt rejects them).
func VerifyChain(receipts []*Receipt, opts VerifyOptions) (Result, error) {
	v, err := newVerifier(opts, false)
	if err != nil {
		return Result{}, err
	}
	cs := make([]checked, len(receipts))
	parallelChunks(len(receipts), opts.workers(), func(lo, hi int) {
		checkChunk(receipts[lo:hi], &opts, v.kv, cs[lo:hi])
	})
	for _, c := range cs {
		v.add(c)
	}
	return v.Result(), nil
}

// parallelChunks calls f(lo, hi) for consecutive chunks of [0, n) of
// checkChunkSize on up to workers goroutines.
func parallelChunks(n, workers int, f func(lo, hi int)) {
	if workers <= 1 || n <= checkChunkSize {
		for lo := 0; lo < n; lo += checkChunkSize {
			f(lo, min(lo+checkChunkSize, n))
		}
		return
	}
	var wg sync.WaitGroup
	next := make(chan int, workers)
	for range workers {
		wg.Go(func() {
			for lo := range next {
				f(lo, min(lo+checkChunkSize, n))
			}
		})
	}
	for lo := 0; lo < n; lo += checkChunkSize {
		next <- lo
	}
	close(next)
	wg.Wait()
}
