package ledger

import (
	"math"
	"strconv"
)

// AppendNumber appends f formatted as ECMAScript Number::toString does
// (spec/ledger.md §2.3): NaN and ±Infinity as null, ±0 as 0, the shortest
// round-trip digits laid out in fixed notation for 1e-6 ≤ |f| < 1e21 and in
// exponent notation (1e+21, 2.5e-7) otherwise.
func AppendNumber(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	if f == 0 {
		return append(dst, '0')
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	// Integers below 2^53 are exact and print as plain digits.
	if f < 1<<53 && f == math.Trunc(f) {
		return strconv.AppendUint(dst, uint64(f), 10)
	}
	var scratch [32]byte
	e := strconv.AppendFloat(scratch[:0], f, 'e', -1, 64)
	// e is d[.ddd]e±XX
	mant, exp := e, 0
	for i := 0; i < len(e); i++ {
		if e[i] == 'e' {
			mant = e[:i]
			x, _ := strconv.Atoi(string(e[i+1:]))
			exp = x
			break
		}
	}
	var digits [24]byte
	s := digits[:0]
	for _, c := range mant {
		if c != '.' {
			s = append(s, c)
		}
	}
	k := len(s)
	n := exp + 1
	switch {
	case k <= n && n <= 21:
		dst = append(dst, s...)
		for i := 0; i < n-k; i++ {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, s[:n]...)
		dst = append(dst, '.')
		dst = append(dst, s[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for i := 0; i < -n; i++ {
			dst = append(dst, '0')
		}
		dst = append(dst, s...)
	default:
		dst = append(dst, s[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, s[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		} else {
			dst = append(dst, '-')
		}
		dst = strconv.AppendInt(dst, int64(abs(n-1)), 10)
	}
	return dst
}

// FormatNumber returns f formatted per §2.3 (see AppendNumber).
func FormatNumber(f float64) string { return string(AppendNumber(nil, f)) }

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
