package ledger

import (
	"bytes"
	"crypto/ed25519"
	"math/rand/v2"
	"testing"
)

// TestSignMatchesStdlib signs random (seed, message) pairs with the ledger's
// signer (curve25519-voi) and crypto/ed25519: RFC 8032 signatures are
// deterministic, so they must be byte-identical.
func TestSignMatchesStdlib(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	n := 2000
	if testing.Short() {
		n = 200
	}
	for i := range n {
		seed := make([]byte, ed25519.SeedSize)
		for k := range seed {
			seed[k] = byte(rng.UintN(256))
		}
		msg := make([]byte, rng.IntN(300))
		for k := range msg {
			msg[k] = byte(rng.UintN(256))
		}
		key := ed25519.NewKeyFromSeed(seed)
		got, want := signBytes(key, msg), ed25519.Sign(key, msg)
		if !bytes.Equal(got, want) {
			t.Fatalf("pair %d: voi %x, stdlib %x", i, got, want)
		}
		if h := hexString(want); SignHash(key, string(msg)) != h {
			t.Fatalf("pair %d: SignHash differs from stdlib", i)
		}
	}
}

func hexString(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 2*len(b))
	for i, c := range b {
		out[2*i], out[2*i+1] = digits[c>>4], digits[c&15]
	}
	return string(out)
}
