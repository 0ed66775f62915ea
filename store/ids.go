package store

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// NewID returns a new UUIDv7 (RFC 9562) in canonical lowercase text: the
// id of new datasets, traces, annotations, users and keys
// (explorer-api §1.6). Ids made by one process sort by creation time.
func NewID() string {
	var b [16]byte
	uuidMu.Lock()
	ms := uint64(time.Now().UnixMilli())
	if ms <= uuidLastMS {
		// Same millisecond (or a clock step back): keep ids increasing by
		// bumping the 12-bit sequence in rand_a, then the millisecond.
		uuidSeq++
		if uuidSeq > 0xfff {
			uuidSeq = 0
			uuidLastMS++
		}
		ms = uuidLastMS
	} else {
		uuidLastMS = ms
		uuidSeq = 0
	}
	seq := uuidSeq
	uuidMu.Unlock()
	binary.BigEndian.PutUint64(b[0:8], ms<<16)
	_, _ = rand.Read(b[8:])
	b[6] = 0x70 | byte(seq>>8)
	b[7] = byte(seq)
	b[8] = 0x80 | (b[8] & 0x3f)
	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:], b[10:])
	return string(out[:])
}

var (
	uuidMu     sync.Mutex
	uuidLastMS uint64
	uuidSeq    uint16
)

// NewULID returns a new monotonic ULID (26 uppercase Crockford base32
// characters): the fallback message id when a write carries none.
func NewULID() string {
	ulidMu.Lock()
	defer ulidMu.Unlock()
	return ulid.MustNew(ulid.Now(), ulidEntropy).String()
}

var (
	ulidMu      sync.Mutex
	ulidEntropy = ulid.Monotonic(rand.Reader, 0)
)

// HashKey returns hex(sha256(secret)): the stored form of API keys and
// browser-session tokens (explorer-api §1.3).
func HashKey(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}
