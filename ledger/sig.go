package ledger

// sig.go: Ed25519 signature verification as @noble/ed25519 does it by
// default (ZIP-215: the cofactored equation [8][S]B = [8]R + [8][k]A, S
// canonical, point encodings decoded as most implementations do), single
// and in batches. crypto/ed25519 checks the cofactorless equation instead;
// the two agree on every honestly made signature and differ only on
// crafted ones (spec/ledger.md §11.8), and the cofactored one is what
// makes batch verification sound and what the SDK's verifier accepts.

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha512"
	"encoding/hex"

	"filippo.io/edwards25519"
)

// keyVerifier checks signatures by one public key.
type keyVerifier struct {
	pub  []byte
	negA *edwards25519.Point // −A; nil when pub is not a curve point
}

// newKeyVerifier prepares pub. A key that is not a curve point, or is a
// point of small order (such as all zero bytes), verifies nothing: under
// the cofactored equation anyone could forge signatures for it, and honest
// key generation never yields one.
func newKeyVerifier(pub ed25519.PublicKey) *keyVerifier {
	kv := &keyVerifier{pub: pub}
	if len(pub) == ed25519.PublicKeySize {
		a, err := new(edwards25519.Point).SetBytes(pub)
		if err == nil && new(edwards25519.Point).MultByCofactor(a).Equal(edwards25519.NewIdentityPoint()) != 1 {
			kv.negA = new(edwards25519.Point).Negate(a)
		}
	}
	return kv
}

// parsedSig is a decoded signature: R as a point, S as a canonical scalar.
type parsedSig struct {
	r *edwards25519.Point
	s *edwards25519.Scalar
	k *edwards25519.Scalar // SHA-512(R ‖ A ‖ M) mod L
}

// parse decodes a 128-hex signature over msg; ok is false when it is not
// 128 hex characters, R is not a point or S is not canonical.
func (kv *keyVerifier) parse(msg []byte, sigHex string) (parsedSig, bool) {
	var raw [ed25519.SignatureSize]byte
	if kv.negA == nil || len(sigHex) != 2*ed25519.SignatureSize {
		return parsedSig{}, false
	}
	if _, err := hex.Decode(raw[:], []byte(sigHex)); err != nil {
		return parsedSig{}, false
	}
	r, err := new(edwards25519.Point).SetBytes(raw[:32])
	if err != nil {
		return parsedSig{}, false
	}
	s, err := edwards25519.NewScalar().SetCanonicalBytes(raw[32:])
	if err != nil {
		return parsedSig{}, false
	}
	h := sha512.New()
	h.Write(raw[:32])
	h.Write(kv.pub)
	h.Write(msg)
	var digest [64]byte
	k, err := edwards25519.NewScalar().SetUniformBytes(h.Sum(digest[:0]))
	if err != nil {
		return parsedSig{}, false
	}
	return parsedSig{r: r, s: s, k: k}, true
}

// check verifies one parsed signature: [8]([S]B − [k]A − R) = 0.
func (kv *keyVerifier) check(p parsedSig) bool {
	q := new(edwards25519.Point).VarTimeDoubleScalarBaseMult(p.k, kv.negA, p.s)
	q.Subtract(q, p.r)
	q.MultByCofactor(q)
	return q.Equal(edwards25519.NewIdentityPoint()) == 1
}

// verify reports whether sigHex is a valid signature over msg.
func (kv *keyVerifier) verify(msg []byte, sigHex string) bool {
	p, ok := kv.parse(msg, sigHex)
	return ok && kv.check(p)
}

// verifyAll sets ok[i] to whether sigs[i] is a valid signature over
// msgs[i]. The well-formed signatures are first checked together with
// one random linear combination, [8](Σ zᵢRᵢ + [Σ zᵢkᵢ]A − [Σ zᵢSᵢ]B) = 0,
// about four times cheaper per signature than one by one; only when that
// fails are they checked one by one to find the bad ones. A false "all
// valid" needs a 2^-128 chance.
func (kv *keyVerifier) verifyAll(msgs [][]byte, sigs []string, ok []bool) {
	parsed := make([]parsedSig, len(msgs))
	idx := make([]int, 0, len(msgs))
	for i := range msgs {
		var good bool
		parsed[i], good = kv.parse(msgs[i], sigs[i])
		ok[i] = false
		if good {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return
	}
	if len(idx) > 1 && kv.batch(parsed, idx) {
		for _, i := range idx {
			ok[i] = true
		}
		return
	}
	for _, i := range idx {
		ok[i] = kv.check(parsed[i])
	}
}

func (kv *keyVerifier) batch(parsed []parsedSig, idx []int) bool {
	n := len(idx)
	zs := make([]byte, 16*n)
	if _, err := rand.Read(zs); err != nil {
		return false
	}
	scalars := make([]*edwards25519.Scalar, 0, n+2)
	points := make([]*edwards25519.Point, 0, n+2)
	sumS := edwards25519.NewScalar()
	sumK := edwards25519.NewScalar()
	var zb [32]byte
	for j, i := range idx {
		p := parsed[i]
		copy(zb[:16], zs[16*j:16*j+16]) // a 128-bit z, zero-padded: canonical
		z, err := edwards25519.NewScalar().SetCanonicalBytes(zb[:])
		if err != nil {
			return false
		}
		sumS.MultiplyAdd(z, p.s, sumS)
		sumK.MultiplyAdd(z, p.k, sumK)
		scalars = append(scalars, z)
		points = append(points, p.r)
	}
	// Σ zᵢRᵢ − [Σ zᵢkᵢ](−A) − [Σ zᵢSᵢ]B, using −A as stored.
	scalars = append(scalars, edwards25519.NewScalar().Negate(sumK), edwards25519.NewScalar().Negate(sumS))
	points = append(points, kv.negA, edwards25519.NewGeneratorPoint())
	q := new(edwards25519.Point).VarTimeMultiScalarMult(scalars, points)
	q.MultByCofactor(q)
	return q.Equal(edwards25519.NewIdentityPoint()) == 1
}
