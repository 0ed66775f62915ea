package ledger

// sig.go: Ed25519 signature verification as @noble/ed25519 does it by
// default (ZIP-215: the cofactored equation [8][S]B = [8]R + [8][k]A, S
// canonical, point encodings decoded as most implementations do), single
// and in batches, by curve25519-voi. crypto/ed25519 checks the
// cofactorless equation instead; the two agree on every honestly made
// signature and differ only on crafted ones (spec/ledger.md §11.8), and the
// cofactored one is what makes batch verification sound and what the
// SDK's verifier accepts.

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"

	voied25519 "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// verifyOptions are ZIP-215 except that a small-order public key is
// rejected: under the cofactored equation anyone could forge signatures
// for it, and honest key generation never yields one.
var verifyOptions = &voied25519.Options{Verify: &voied25519.VerifyOptions{
	AllowSmallOrderA:   false,
	AllowSmallOrderR:   true,
	AllowNonCanonicalA: true,
	AllowNonCanonicalR: true,
}}

// keyVerifier checks signatures by one public key.
type keyVerifier struct {
	pub []byte
	exp *voied25519.ExpandedPublicKey // nil when pub is not 32 bytes or not a point
}

// newKeyVerifier prepares pub. A key that is not a curve point, or is a
// point of small order (such as all zero bytes), verifies nothing.
func newKeyVerifier(pub ed25519.PublicKey) *keyVerifier {
	kv := &keyVerifier{pub: pub}
	if len(pub) == ed25519.PublicKeySize {
		if e, err := voied25519.NewExpandedPublicKey(voied25519.PublicKey(pub)); err == nil {
			kv.exp = e
		}
	}
	return kv
}

// decode decodes a 128-hex signature; ok is false when it is not.
func (kv *keyVerifier) decode(sigHex string, raw *[ed25519.SignatureSize]byte) bool {
	if kv.exp == nil || len(sigHex) != 2*ed25519.SignatureSize {
		return false
	}
	_, err := hex.Decode(raw[:], []byte(sigHex))
	return err == nil
}

// verify reports whether sigHex is a valid signature over msg.
func (kv *keyVerifier) verify(msg []byte, sigHex string) bool {
	var raw [ed25519.SignatureSize]byte
	return kv.decode(sigHex, &raw) && voied25519.VerifyExpandedWithOptions(kv.exp, msg, raw[:], verifyOptions)
}

// verifyAll sets ok[i] to whether sigs[i] is a valid signature over
// msgs[i]. The well-formed signatures are checked together (one random
// linear combination, voi's batch verifier), which is several times
// cheaper per signature than one by one; only when that fails are they
// checked one by one to find the bad ones.
func (kv *keyVerifier) verifyAll(msgs [][]byte, sigs []string, ok []bool) {
	idx := make([]int, 0, len(msgs))
	raws := make([]byte, ed25519.SignatureSize*len(msgs))
	for i := range msgs {
		ok[i] = false
		raw := (*[ed25519.SignatureSize]byte)(raws[ed25519.SignatureSize*i:])
		if kv.decode(sigs[i], raw) {
			idx = append(idx, i)
		}
	}
	switch len(idx) {
	case 0:
		return
	case 1:
		i := idx[0]
		ok[i] = voied25519.VerifyExpandedWithOptions(kv.exp, msgs[i], raws[ed25519.SignatureSize*i:ed25519.SignatureSize*(i+1)], verifyOptions)
		return
	}
	bv := voied25519.NewBatchVerifierWithCapacity(len(idx))
	for _, i := range idx {
		bv.AddExpandedWithOptions(kv.exp, msgs[i], raws[ed25519.SignatureSize*i:ed25519.SignatureSize*(i+1)], verifyOptions)
	}
	_, valid := bv.Verify(rand.Reader)
	for j, i := range idx {
		ok[i] = valid[j]
	}
}
