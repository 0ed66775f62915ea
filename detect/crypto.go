package detect

import (
	"crypto/sha256"
	"strings"
)

const base58Alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

var base58Index [256]int8

func init() {
	for i := range base58Index {
		base58Index[i] = -1
	}
	for i := 0; i < len(base58Alphabet); i++ {
		base58Index[base58Alphabet[i]] = int8(i)
	}
}

// scanBase58Check recognises a legacy Bitcoin address at i (P2PKH "1…" or
// P2SH "3…", 26–35 base58 characters) whose base58check checksum holds.
func scanBase58Check(text string, i int) (int, bool) {
	e := i
	for e < len(text) && e-i <= 35 && base58Index[text[e]] >= 0 {
		e++
	}
	if e-i < 26 || e-i > 35 || !tokenEnd(text, e) {
		return 0, false
	}
	b, ok := base58Decode(text[i:e])
	if !ok || len(b) != 25 || (b[0] != 0x00 && b[0] != 0x05) {
		return 0, false
	}
	h1 := sha256.Sum256(b[:21])
	h2 := sha256.Sum256(h1[:])
	if string(h2[:4]) != string(b[21:]) {
		return 0, false
	}
	return e, true
}

// base58Decode decodes s; leading '1's are leading zero bytes.
func base58Decode(s string) ([]byte, bool) {
	zeros := 0
	for zeros < len(s) && s[zeros] == '1' {
		zeros++
	}
	// Big-endian base-256 accumulator.
	var num []byte
	for i := zeros; i < len(s); i++ {
		v := base58Index[s[i]]
		if v < 0 {
			return nil, false
		}
		carry := int(v)
		for j := len(num) - 1; j >= 0; j-- {
			carry += int(num[j]) * 58
			num[j] = byte(carry)
			carry >>= 8
		}
		for carry > 0 {
			num = append([]byte{byte(carry)}, num...)
			carry >>= 8
		}
	}
	return append(make([]byte, zeros), num...), true
}

const bech32Charset = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"

// scanBech32 recognises a SegWit Bitcoin address at i ("bc1…", bech32 or
// bech32m) whose checksum holds.
func scanBech32(text string, i int) (int, bool) {
	e := i + 3
	for e < len(text) && e-i <= 90 && (isDigit(text[e]) || text[e] >= 'a' && text[e] <= 'z' || text[e] >= 'A' && text[e] <= 'Z') {
		e++
	}
	if e-i < 14 || e-i > 74 || !tokenEnd(text, e) {
		return 0, false
	}
	addr := text[i:e]
	if addr != strings.ToLower(addr) && addr != strings.ToUpper(addr) {
		return 0, false
	}
	addr = strings.ToLower(addr)
	data := make([]byte, 0, len(addr)-3)
	for j := 3; j < len(addr); j++ {
		k := strings.IndexByte(bech32Charset, addr[j])
		if k < 0 {
			return 0, false
		}
		data = append(data, byte(k))
	}
	values := []byte{3, 3, 0, 2, 3} // hrp "bc" expanded
	values = append(values, data...)
	pm := bech32Polymod(values)
	if pm != 1 && pm != 0x2bc830a3 {
		return 0, false
	}
	return e, true
}

func bech32Polymod(values []byte) uint32 {
	gen := [5]uint32{0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3}
	chk := uint32(1)
	for _, v := range values {
		top := chk >> 25
		chk = (chk&0x1ffffff)<<5 ^ uint32(v)
		for i := 0; i < 5; i++ {
			if (top>>i)&1 == 1 {
				chk ^= gen[i]
			}
		}
	}
	return chk
}
