package ledger

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	voied25519 "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// ErrInvalidKey is wrapped by the errors for a key or signature that is not
// 64 (keys) or 128 (signatures) hex characters (§3).
var ErrInvalidKey = errors.New("invalid key")

// GenerateKey returns a new Ed25519 private key whose seed is 32 bytes from
// crypto/rand.
func GenerateKey() (ed25519.PrivateKey, error) {
	seed := make([]byte, ed25519.SeedSize)
	if _, err := rand.Read(seed); err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// ParsePrivateKey decodes a private key given as its 32-byte seed in 64 hex
// characters (either case).
func ParsePrivateKey(s string) (ed25519.PrivateKey, error) {
	seed, err := decodeHexN(s, ed25519.SeedSize)
	if err != nil {
		return nil, fmt.Errorf("%w: private key: %v", ErrInvalidKey, err)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// ParsePublicKey decodes a public key given as 64 hex characters (either case).
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	b, err := decodeHexN(s, ed25519.PublicKeySize)
	if err != nil {
		return nil, fmt.Errorf("%w: public key: %v", ErrInvalidKey, err)
	}
	return ed25519.PublicKey(b), nil
}

func decodeHexN(s string, n int) ([]byte, error) {
	if len(s) != 2*n {
		return nil, fmt.Errorf("want %d hex characters, got %d", 2*n, len(s))
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("not hex: %v", err)
	}
	return b, nil
}

// PrivateKeyHex returns the 64 lowercase hex characters of key's seed.
func PrivateKeyHex(key ed25519.PrivateKey) string { return hex.EncodeToString(key.Seed()) }

// PublicKeyHex returns the 64 lowercase hex characters of pub.
func PublicKeyHex(pub ed25519.PublicKey) string { return hex.EncodeToString(pub) }

// PublicOf returns the public half of key.
func PublicOf(key ed25519.PrivateKey) ed25519.PublicKey {
	return key.Public().(ed25519.PublicKey)
}

// SignHash signs the UTF-8 bytes of the hex hash string (not the digest
// bytes, §3) and returns the signature as 128 lowercase hex characters.
func SignHash(key ed25519.PrivateKey, hash string) string {
	var sig [2 * ed25519.SignatureSize]byte
	hex.Encode(sig[:], signBytes(key, []byte(hash)))
	return string(sig[:])
}

// signBytes is Ed25519 signing (RFC 8032, deterministic) by curve25519-voi,
// whose AVX2 backend signs in about half the time of crypto/ed25519 (which
// since Go 1.24 also re-derives the key on every call); the signatures are
// byte-identical (TestSignMatchesStdlib). key is a crypto/ed25519 key
// (seed ‖ public key), the same 64-byte layout voi uses.
func signBytes(key ed25519.PrivateKey, msg []byte) []byte {
	return voied25519.Sign(voied25519.PrivateKey(key), msg)
}

// VerifySignature reports whether sig is exactly 128 hex characters (either
// case) and a valid signature by pub over the UTF-8 bytes of msg (for a
// receipt, the hex hash string). It checks what @noble/ed25519 checks by
// default (ZIP-215, the cofactored equation; see sig.go).
func VerifySignature(pub ed25519.PublicKey, msg, sig string) bool {
	return newKeyVerifier(pub).verify([]byte(msg), sig)
}

// Server key files (§3).
const (
	// KeyFileName is the server key's file in the data dir: a 64-hex seed, mode 0600.
	KeyFileName = "ledger.key"
	// KeyRingDirName is the folder in the data dir with retired public keys,
	// one 64-hex key per *.pub file.
	KeyRingDirName = "ledger-keys.d"
	// KeyEnv is the environment variable that, when set, holds the server
	// key's 64-hex seed and overrides the key file.
	KeyEnv = "VIGIL_LEDGER_KEY"
)

// ServerKeyOptions says where the server key comes from (§3). The first
// that is set wins: Hex (the value of VIGIL_LEDGER_KEY), File
// (--ledger-key-file), DataDir/ledger.key.
type ServerKeyOptions struct {
	Hex     string // a 64-hex seed; "" = not given
	File    string // a key file path; "" = DataDir/ledger.key
	DataDir string
}

// LoadServerKey returns the server signing key. A key file that does not
// exist is created with a new key and mode 0600 (its folder with 0700); an
// existing one must hold a 64-hex seed (surrounding whitespace is ignored).
func LoadServerKey(opts ServerKeyOptions) (ed25519.PrivateKey, error) {
	if opts.Hex != "" {
		k, err := ParsePrivateKey(strings.TrimSpace(opts.Hex))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", KeyEnv, err)
		}
		return k, nil
	}
	path := opts.File
	if path == "" {
		if opts.DataDir == "" {
			return nil, errors.New("ledger key: no data dir or key file given")
		}
		path = filepath.Join(opts.DataDir, KeyFileName)
	}
	return LoadOrCreateKeyFile(path)
}

// LoadOrCreateKeyFile reads the 64-hex seed in path, or, when path does not
// exist, generates a key and writes it there with mode 0600. Creation is
// exclusive, so two processes starting together end up with the same key.
func LoadOrCreateKeyFile(path string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		k, err := ParsePrivateKey(strings.TrimSpace(string(b)))
		if err != nil {
			return nil, fmt.Errorf("ledger key file %s: %w", path, err)
		}
		return k, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("ledger key file: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("ledger key file: %w", err)
	}
	k, err := GenerateKey()
	if err != nil {
		return nil, err
	}
	// Write to a temp file and link it into place: readers never see a
	// half-written key, and a concurrent creator loses cleanly.
	tmp, err := os.CreateTemp(filepath.Dir(path), ".ledger-key-*")
	if err != nil {
		return nil, fmt.Errorf("ledger key file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("ledger key file: %w", err)
	}
	if _, err := tmp.WriteString(PrivateKeyHex(k) + "\n"); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("ledger key file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("ledger key file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("ledger key file: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return LoadOrCreateKeyFile(path) // another process won the race
		}
		return nil, fmt.Errorf("ledger key file: %w", err)
	}
	return k, nil
}

// LoadKeyRing reads the retired public keys in dir/*.pub (one hex key per
// file, surrounding whitespace ignored), sorted by file name. A missing dir
// is an empty ring; a malformed file is an error naming it.
func LoadKeyRing(dir string) ([]ed25519.PublicKey, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.pub"))
	if err != nil {
		return nil, fmt.Errorf("ledger key ring: %w", err)
	}
	sort.Strings(names)
	ring := make([]ed25519.PublicKey, 0, len(names))
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("ledger key ring: %w", err)
		}
		pub, err := ParsePublicKey(strings.TrimSpace(string(b)))
		if err != nil {
			return nil, fmt.Errorf("ledger key ring %s: %w", name, err)
		}
		ring = append(ring, pub)
	}
	return ring, nil
}
