package ledger

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// Receipt is one signed, hash-linked record of one action (§4.1).
//
// Input, Output and Error hold values of the canonical value model (see
// Parse). A receipt parsed with ParseReceipt keeps its exact JSON text in
// Raw; one made by Append has Raw set to the JSON Vigil emits. Store Raw,
// never a re-encoding: verification re-parses it (§7.6).
type Receipt struct {
	ID        string
	SessionID string
	Agent     string
	Action    string
	// Input is hashed as is; when InputAbsent is true the member is left
	// out of the hash object (JS undefined), which differs from null.
	Input       any
	InputAbsent bool
	// Output and Error: nil means absent or null (both hash as null).
	// Error is a string when Vigil creates the receipt; any value is
	// accepted when verifying.
	Output any
	Error  any
	// Timestamp is in milliseconds since the Unix epoch. It is a float64
	// because verification hashes exactly the number JavaScript saw;
	// receipts Vigil creates carry integers (see Millis).
	Timestamp    float64
	Hash         string
	PreviousHash string
	// Signature is 128 lowercase hex characters, or "" when unsigned.
	Signature string
	// ContractID, CounterAgentID and CounterSignature are kept as received:
	// not hashed and never verified (shown as "unverified").
	ContractID       string
	CounterAgentID   string
	CounterSignature string
	// ClientSignature is the agent's own signature, kept unverified when
	// the server re-signed a receipt of an agent with no registered key
	// (§7.4). Not hashed.
	ClientSignature string
	// Raw is the exact JSON text of the receipt (see above).
	Raw []byte
}

// Millis returns Timestamp as integer milliseconds (truncated).
func (r *Receipt) Millis() int64 { return int64(r.Timestamp) }

// Tail returns the chain state after r: the tail the next receipt links to.
func (r *Receipt) Tail() Tail { return Tail{Hash: r.Hash, Timestamp: r.Timestamp} }

// Tail is the end of a chain: the stored hash and timestamp of its last
// receipt. The zero Tail is an empty chain.
type Tail struct {
	Hash      string // "" or "0" for an empty chain
	Timestamp float64
}

// PreviousHash returns the previousHash the next receipt carries: the tail
// hash, or "0" for an empty chain.
func (t Tail) PreviousHash() string {
	if t.Hash == "" {
		return "0"
	}
	return t.Hash
}

// ErrBadInput is wrapped by every error for input that is rejected as a
// whole instead of producing a verification result (§5.1): a receipt of
// the wrong shape, an invalid key or close hash, invalid JSON.
var ErrBadInput = errors.New("bad input")

// InputError is a §5.1 rejection of one receipt or record. It wraps
// ErrBadInput and, for invalid JSON, the *SyntaxError.
type InputError struct {
	Index int    // position in the chain or record list; -1 when not known
	Field string // the member at fault, "" for the whole element
	Msg   string
	Err   error // underlying error, may be nil
}

func (e *InputError) Error() string {
	where := ""
	if e.Index >= 0 {
		where = fmt.Sprintf("receipt %d: ", e.Index)
	}
	if e.Field != "" {
		where += e.Field + ": "
	}
	return where + e.Msg
}

// Unwrap returns ErrBadInput and the underlying error.
func (e *InputError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrBadInput, e.Err}
	}
	return []error{ErrBadInput}
}

// ParseReceipt parses one receipt's JSON text with the §2.1 decoder and
// checks its shape (§5.1). It never checks the hash or signature. The
// returned receipt's Raw is data itself (not copied).
func ParseReceipt(data []byte) (*Receipt, error) {
	v, err := Parse(data)
	if err != nil {
		return nil, &InputError{Index: -1, Msg: err.Error(), Err: err}
	}
	r, err := ReceiptFromValue(v)
	if err != nil {
		return nil, err
	}
	r.Raw = data
	return r, nil
}

// ReceiptFromValue reads a receipt from a parsed value (members by exact
// name, §11.5) and checks its shape (§5.1). Raw is left nil.
func ReceiptFromValue(v any) (*Receipt, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &InputError{Index: -1, Msg: fmt.Sprintf("receipt is %s, want an object", typeName(v))}
	}
	r := &Receipt{}
	for _, f := range []struct {
		name string
		dst  *string
	}{
		{"id", &r.ID}, {"sessionId", &r.SessionID}, {"agent", &r.Agent}, {"action", &r.Action},
		{"hash", &r.Hash}, {"previousHash", &r.PreviousHash},
	} {
		x, present := m[f.name]
		s, isString := x.(string)
		if !present || !isString {
			msg := "missing"
			if present {
				msg = fmt.Sprintf("is %s, want a string", typeName(x))
			}
			return nil, &InputError{Index: -1, Field: f.name, Msg: msg}
		}
		*f.dst = s
	}
	ts, present := m["timestamp"]
	f, isNum := ts.(float64)
	if !present || !isNum {
		msg := "missing"
		if present {
			msg = fmt.Sprintf("is %s, want a number", typeName(ts))
		}
		return nil, &InputError{Index: -1, Field: "timestamp", Msg: msg}
	}
	r.Timestamp = f
	switch s := m["signature"].(type) {
	case nil:
	case string:
		r.Signature = s
	default:
		return nil, &InputError{Index: -1, Field: "signature", Msg: fmt.Sprintf("is %s, want a string or null", typeName(s))}
	}
	r.Input, present = m["input"]
	r.InputAbsent = !present
	r.Output = m["output"]
	r.Error = m["error"]
	r.ContractID, _ = m["contractId"].(string)
	r.CounterAgentID, _ = m["counterAgentId"].(string)
	r.CounterSignature, _ = m["counterSignature"].(string)
	r.ClientSignature, _ = m["clientSignature"].(string)
	return r, nil
}

// typeName names a value-model value's JSON type for error messages.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	default:
		return fmt.Sprintf("a %T", v)
	}
}

// HashInput returns the canonical bytes that are hashed for r (§4.2):
// {action, agent, error, id, input, output, previousHash, sessionId,
// timestamp}, with input left out when absent.
func (r *Receipt) HashInput() ([]byte, error) {
	return r.appendHashInput(make([]byte, 0, 256))
}

func (r *Receipt) appendHashInput(b []byte) ([]byte, error) {
	return r.appendHashInputWith(b, nil)
}

// appendHashInputWith is appendHashInput with the canonical input given
// (nil: computed here).
func (r *Receipt) appendHashInputWith(b, input []byte) ([]byte, error) {
	var err error
	// Members in their sorted order, written directly.
	b = append(b, `{"action":`...)
	if b, err = appendString(b, r.Action); err != nil {
		return nil, fmt.Errorf("action: %w", err)
	}
	b = append(b, `,"agent":`...)
	if b, err = appendString(b, r.Agent); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	b = append(b, `,"error":`...)
	if b, err = appendValue(b, r.Error, 1); err != nil {
		return nil, fmt.Errorf("error: %w", err)
	}
	b = append(b, `,"id":`...)
	if b, err = appendString(b, r.ID); err != nil {
		return nil, fmt.Errorf("id: %w", err)
	}
	if !r.InputAbsent {
		b = append(b, `,"input":`...)
		if input != nil {
			b = append(b, input...)
		} else if b, err = appendValue(b, r.Input, 1); err != nil {
			return nil, fmt.Errorf("input: %w", err)
		}
	}
	b = append(b, `,"output":`...)
	if b, err = appendValue(b, r.Output, 1); err != nil {
		return nil, fmt.Errorf("output: %w", err)
	}
	b = append(b, `,"previousHash":`...)
	if b, err = appendString(b, r.PreviousHash); err != nil {
		return nil, fmt.Errorf("previousHash: %w", err)
	}
	b = append(b, `,"sessionId":`...)
	if b, err = appendString(b, r.SessionID); err != nil {
		return nil, fmt.Errorf("sessionId: %w", err)
	}
	b = append(b, `,"timestamp":`...)
	b = AppendNumber(b, r.Timestamp)
	return append(b, '}'), nil
}

// ComputeHash returns the §4.2 hash of r: the lowercase hex SHA-256 of
// HashInput. It does not look at r.Hash.
func (r *Receipt) ComputeHash() (string, error) {
	var buf [512]byte
	return r.computeHash(buf[:0], nil)
}

// computeHash is ComputeHash with a scratch buffer and, when not nil, the
// canonical input.
func (r *Receipt) computeHash(scratch, input []byte) (string, error) {
	b, err := r.appendHashInputWith(scratch, input)
	if err != nil {
		return "", fmt.Errorf("hash receipt %s: %w", r.ID, err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// MarshalJSON returns the JSON Vigil emits for r (§4.1): members in table
// order, output and error left out when null, signature always present,
// input and output in canonical form, no whitespace. It ignores Raw.
func (r *Receipt) MarshalJSON() ([]byte, error) {
	return r.AppendJSON(make([]byte, 0, 512))
}

// AppendJSON appends the JSON MarshalJSON returns to b.
func (r *Receipt) AppendJSON(b []byte) ([]byte, error) {
	return r.appendJSONWith(b, nil)
}

// appendJSONWith is AppendJSON with the canonical input given (nil:
// computed here).
func (r *Receipt) appendJSONWith(b, input []byte) ([]byte, error) {
	var err error
	str := func(name, s string) {
		if err != nil {
			return
		}
		b = append(b, ',', '"')
		b = append(b, name...)
		b = append(b, '"', ':')
		b, err = appendString(b, s)
	}
	val := func(name string, v any) {
		if err != nil {
			return
		}
		b = append(b, ',', '"')
		b = append(b, name...)
		b = append(b, '"', ':')
		b, err = appendValue(b, v, 1)
	}
	b = append(b, `{"id":`...)
	if b, err = appendString(b, r.ID); err != nil {
		return nil, err
	}
	str("sessionId", r.SessionID)
	str("agent", r.Agent)
	str("action", r.Action)
	if !r.InputAbsent {
		if input != nil {
			b = append(b, `,"input":`...)
			b = append(b, input...)
		} else {
			val("input", r.Input)
		}
	}
	if r.Output != nil {
		val("output", r.Output)
	}
	if r.Error != nil {
		val("error", r.Error)
	}
	if err == nil {
		b = append(b, `,"timestamp":`...)
		b = AppendNumber(b, r.Timestamp)
	}
	str("hash", r.Hash)
	str("previousHash", r.PreviousHash)
	str("signature", r.Signature)
	if r.ContractID != "" {
		str("contractId", r.ContractID)
	}
	if r.CounterAgentID != "" {
		str("counterAgentId", r.CounterAgentID)
	}
	if r.CounterSignature != "" {
		str("counterSignature", r.CounterSignature)
	}
	if r.ClientSignature != "" {
		str("clientSignature", r.ClientSignature)
	}
	if err != nil {
		return nil, fmt.Errorf("marshal receipt %s: %w", r.ID, err)
	}
	return append(b, '}'), nil
}

// UnmarshalJSON parses data with ParseReceipt (so lone surrogates, big
// numbers and member names are handled as §2.1 says) and keeps a copy of
// data in Raw.
func (r *Receipt) UnmarshalJSON(data []byte) error {
	p, err := ParseReceipt(append([]byte(nil), data...))
	if err != nil {
		return err
	}
	*r = *p
	return nil
}

// Action is what Append turns into a receipt.
type Action struct {
	// ID is used as given; "" means a new monotonic ULID (NewID).
	ID        string
	SessionID string
	Agent     string
	Action    string
	// Input is hashed and emitted as is (nil is null) unless OmitInput is
	// true, which leaves it out (JS undefined).
	Input     any
	OmitInput bool
	Output    any // nil = absent
	Error     any // nil = absent; a string when Vigil creates receipts
	// Timestamp is used as given; nil means max(now, tail timestamp).
	Timestamp *int64
	// Not hashed, kept as given.
	ContractID, CounterAgentID, CounterSignature, ClientSignature string
}

// Now returns the current time in integer milliseconds; tests may replace it.
var Now = func() int64 { return time.Now().UnixMilli() }

// Append makes the receipt that follows tail (§4.3): previousHash = the tail
// hash ("0" when empty), timestamp = a.Timestamp or max(now, tail
// timestamp), the hash, and the signature over it by key ("" when key is
// nil). Raw is set to the emitted JSON; r.Tail() is the new tail. It fails
// only for values outside the canonical value model.
func Append(tail Tail, a Action, key ed25519.PrivateKey) (*Receipt, error) {
	r := &Receipt{
		ID: a.ID, SessionID: a.SessionID, Agent: a.Agent, Action: a.Action,
		Input: a.Input, InputAbsent: a.OmitInput, Output: a.Output, Error: a.Error,
		PreviousHash:     tail.PreviousHash(),
		ContractID:       a.ContractID,
		CounterAgentID:   a.CounterAgentID,
		CounterSignature: a.CounterSignature,
		ClientSignature:  a.ClientSignature,
	}
	if r.ID == "" {
		r.ID = NewID()
	}
	if a.Timestamp != nil {
		r.Timestamp = float64(*a.Timestamp)
	} else {
		r.Timestamp = math.Max(float64(Now()), tail.Timestamp)
	}
	// The input is canonicalized once, for the hash and the emitted JSON.
	var input []byte
	buf := make([]byte, 0, 2048)
	if !r.InputAbsent {
		if in, err := appendValue(buf, r.Input, 1); err == nil {
			input = in
			buf = in[len(in):]
		}
	}
	h, err := r.computeHash(buf, input)
	if err != nil {
		return nil, err
	}
	r.Hash = h
	if key != nil {
		r.Signature = SignHash(key, h)
	}
	if r.Raw, err = r.appendJSONWith(make([]byte, 0, len(input)+512), input); err != nil {
		return nil, err
	}
	return r, nil
}

var (
	idMu      sync.Mutex
	idEntropy = ulid.Monotonic(rand.Reader, 0)
)

// NewID returns a new ULID: 26 uppercase Crockford base32 characters,
// monotonic within the process (§11.12).
func NewID() string {
	idMu.Lock()
	defer idMu.Unlock()
	return ulid.MustNew(ulid.Timestamp(time.Now()), idEntropy).String()
}
