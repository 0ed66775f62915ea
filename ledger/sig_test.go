package ledger

import (
	"crypto/ed25519"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/oasisprotocol/curve25519-voi/curve"
	"github.com/oasisprotocol/curve25519-voi/curve/scalar"
)

// order8Point is the encoding of a point of order 8 (a torsion point).
const order8Point = "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a"

// torsionSignature signs msg with seed so that R carries a torsion
// component: [S]B = R' − T + [k]A with R' = R + T. The cofactored
// (ZIP-215, @noble/ed25519) equation accepts it; crypto/ed25519's
// cofactorless one rejects it.
func torsionSignature(t testing.TB, seed string, msg []byte) string {
	t.Helper()
	seedBytes, _ := hex.DecodeString(seed)
	h := sha512.Sum512(seedBytes)
	h[0] &= 248
	h[31] &= 127
	h[31] |= 64
	a, err := scalar.NewFromBits(h[:32])
	if err != nil {
		t.Fatal(err)
	}
	A := curve.NewEdwardsPoint().MulBasepoint(curve.ED25519_BASEPOINT_TABLE, a)
	var rb [64]byte
	copy(rb[:], "a fixed nonce for a test signature, 64 bytes long, no more.....")
	r, _ := scalar.NewFromBytesModOrderWide(rb[:])
	T := mustPoint(t, order8Point)
	R := curve.NewEdwardsPoint().MulBasepoint(curve.ED25519_BASEPOINT_TABLE, r)
	R.Add(R, T)
	rBytes, aBytes := pointBytes(R), pointBytes(A)
	kh := sha512.New()
	kh.Write(rBytes)
	kh.Write(aBytes)
	kh.Write(msg)
	k, _ := scalar.NewFromBytesModOrderWide(kh.Sum(nil))
	sc := scalar.New().Mul(k, a)
	sc.Add(sc, r)
	return hex.EncodeToString(append(rBytes, scalarBytes(sc)...))
}

func mustPoint(t testing.TB, h string) *curve.EdwardsPoint {
	t.Helper()
	b, _ := hex.DecodeString(h)
	c, err := curve.NewCompressedEdwardsYFromBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	p, err := curve.NewEdwardsPoint().SetCompressedY(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func pointBytes(p *curve.EdwardsPoint) []byte {
	var c curve.CompressedEdwardsY
	c.SetEdwardsPoint(p)
	return c[:]
}

func scalarBytes(s *scalar.Scalar) []byte {
	b := make([]byte, 32)
	if err := s.ToBytes(b); err != nil {
		panic(err)
	}
	return b
}

func TestSignatureEdgeCases(t *testing.T) {
	key := mustKey(t, specSeed)
	pub := PublicOf(key)
	msg := specHashes[0].hash
	T := mustPoint(t, order8Point)
	if T.IsIdentity() || !curve.NewEdwardsPoint().MulByCofactor(T).IsIdentity() {
		t.Fatal("order8Point is not a torsion point")
	}
	torsion := torsionSignature(t, specSeed, []byte(msg))
	raw, _ := hex.DecodeString(torsion)
	if ed25519.Verify(pub, []byte(msg), raw) {
		t.Fatal("crypto/ed25519 accepted the torsion signature; the test no longer tests anything")
	}
	if !VerifySignature(pub, msg, torsion) {
		t.Error("the cofactored check must accept a signature whose R has a torsion component (as @noble/ed25519 does)")
	}
	// S + L is a non-canonical S: rejected, as everywhere.
	good, _ := hex.DecodeString(specHashes[0].sig)
	l, _ := new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10)
	sLE := make([]byte, 32)
	copy(sLE, good[32:])
	for i, j := 0, 31; i < j; i, j = i+1, j-1 {
		sLE[i], sLE[j] = sLE[j], sLE[i]
	}
	sum := new(big.Int).Add(new(big.Int).SetBytes(sLE), l).FillBytes(make([]byte, 32))
	for i, j := 0, 31; i < j; i, j = i+1, j-1 {
		sum[i], sum[j] = sum[j], sum[i]
	}
	nonCanonical := hex.EncodeToString(append(append([]byte{}, good[:32]...), sum...))
	if VerifySignature(pub, msg, nonCanonical) {
		t.Error("accepted a non-canonical S")
	}
	// R that is not a point, a public key that is not a point.
	if VerifySignature(pub, msg, "ff"+specHashes[0].sig[2:]) || VerifySignature(pub, msg, "02"+specHashes[0].sig[2:]) {
		t.Error("accepted signatures with a mangled R")
	}
	notPoint, _ := hex.DecodeString("0200000000000000000000000000000000000000000000000000000000000000")
	if VerifySignature(notPoint, msg, specHashes[0].sig) {
		t.Error("accepted with a public key that is not a point")
	}
}

// TestSmallOrderKeysVerifyNothing: for a small-order public key the
// cofactored equation holds for R = [S]B whatever the message, so such
// keys (all zero bytes, the identity, the torsion points) must verify no
// signature at all — a server that passes an all-zero key to mean "no
// key" must not accept forgeries.
func TestSmallOrderKeysVerifyNothing(t *testing.T) {
	var sb [64]byte
	copy(sb[:], "any scalar will do for this forgery; the key has small order!!!")
	s, _ := scalar.NewFromBytesModOrderWide(sb[:])
	R := curve.NewEdwardsPoint().MulBasepoint(curve.ED25519_BASEPOINT_TABLE, s)
	forged := hex.EncodeToString(append(pointBytes(R), scalarBytes(s)...))
	for _, k := range []string{strings.Repeat("00", 32), "01" + strings.Repeat("00", 31), order8Point} {
		pub, err := ParsePublicKey(k)
		if err != nil {
			t.Fatal(err)
		}
		if VerifySignature(pub, specHashes[0].hash, forged) {
			t.Errorf("key %s accepted a forged signature", k)
		}
		res, err := VerifyChain([]*Receipt{{Hash: "h", PreviousHash: "0", Signature: forged}, {Hash: "h2", PreviousHash: "h", Signature: forged}}, VerifyOptions{PublicKey: pub})
		if err != nil || asJSON(res.Errors) != `[{"index":0,"reason":"hash_mismatch"},{"index":0,"reason":"signature"},{"index":1,"reason":"hash_mismatch"},{"index":1,"reason":"signature"},{"index":1,"reason":"duplicate_id"}]` {
			t.Errorf("key %s: %s %v", k, asJSON(res.Errors), err)
		}
	}
}

// TestBatchFindsEachBadSignature checks chunks mixing good and bad
// signatures: the batch check must fall back and flag exactly the bad ones.
func TestBatchFindsEachBadSignature(t *testing.T) {
	key := mustKey(t, specSeed)
	pub := PublicOf(key)
	bad := map[int]string{5: "other", 150: "empty", 299: "flipped", 300: "torsion-ok"}
	var rs []*Receipt
	var tail Tail
	for i := range 301 {
		r, err := Append(tail, benchAction(i), key)
		if err != nil {
			t.Fatal(err)
		}
		switch bad[i] {
		case "other":
			r.Signature = SignHash(mustKey(t, seed42), r.Hash)
		case "empty":
			r.Signature = ""
		case "flipped":
			r.Signature = r.Signature[:100] + fmt.Sprintf("%02x", r.Signature[100]^1) + r.Signature[102:]
		case "torsion-ok":
			r.Signature = torsionSignature(t, specSeed, []byte(r.Hash))
		}
		rs = append(rs, r)
		tail = r.Tail()
	}
	for _, workers := range []int{1, 2} {
		res, err := VerifyChain(rs, VerifyOptions{PublicKey: pub, Workers: workers})
		if err != nil {
			t.Fatal(err)
		}
		if got := asJSON(res.Errors); got != `[{"index":5,"reason":"signature"},{"index":150,"reason":"signature"},{"index":299,"reason":"signature"}]` {
			t.Fatalf("workers=%d: %s", workers, got)
		}
	}
}
