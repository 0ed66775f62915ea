package eval

import (
	"math"
	"math/big"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/vigilhq/vigil/policy/builtin"
	"github.com/vigilhq/vigil/policy/syntax"
)

// rtError is a runtime error raised at a position (spec §10.9). It travels
// as a panic inside this package and is recovered by the rule executor.
type rtError struct {
	pos  syntax.Pos
	kind builtin.ErrorKind
	msg  string
}

func throw(pos syntax.Pos, kind builtin.ErrorKind, format string, args ...any) {
	panic(&rtError{pos: pos, kind: kind, msg: sprintf(format, args...)})
}

func throwErr(pos syntax.Pos, err error) {
	panic(&rtError{pos: pos, kind: builtin.KindOf(err), msg: err.Error()})
}

func neg(f *frame, pos syntax.Pos, v builtin.Value) builtin.Value {
	if b, ok := builtin.Strip(v).(*big.Int); ok {
		return builtin.IntValue(new(big.Int).Neg(b))
	}
	i, fl, isF, ok := builtin.Number(v)
	if !ok {
		throw(pos, builtin.TypeError, "bad operand type for unary -: '%s'", builtin.TypeName(v))
	}
	if isF {
		return -fl
	}
	if i == math.MinInt64 {
		return new(big.Int).Neg(big.NewInt(i))
	}
	return -i
}

func arith(f *frame, pos syntax.Pos, op syntax.Token, a, b builtin.Value) builtin.Value {
	a, b = builtin.Strip(a), builtin.Strip(b)
	_, aBig := a.(*big.Int)
	_, bBig := b.(*big.Int)
	if aBig || bBig {
		if v, ok := bigArith(pos, op, a, b); ok {
			return v
		}
	}
	ai, af, afl, aok := builtin.Number(a)
	bi, bf, bfl, bok := builtin.Number(b)
	if aok && bok {
		if !afl && !bfl {
			return intOp(pos, op, ai, bi)
		}
		if !afl {
			af = float64(ai)
		}
		if !bfl {
			bf = float64(bi)
		}
		return floatOp(pos, op, af, bf)
	}
	switch op {
	case syntax.PLUS:
		switch x := a.(type) {
		case string:
			if y, ok := b.(string); ok {
				f.charge(int64(len(x)) + int64(len(y)))
				return x + y
			}
		case []builtin.Value:
			if y, ok := b.([]builtin.Value); ok {
				f.chargeConcat(x, y)
				out := make([]builtin.Value, 0, len(x)+len(y))
				return append(append(out, x...), y...)
			}
		case builtin.Tuple:
			if y, ok := b.(builtin.Tuple); ok {
				f.chargeConcat(x, y)
				out := make(builtin.Tuple, 0, len(x)+len(y))
				return append(append(out, x...), y...)
			}
		}
	case syntax.STAR:
		if aBig {
			a, b = b, a
			bBig = true
		}
		if _, isSeq := a.([]builtin.Value); bBig && (builtin.IsStr(a) || isSeq) {
			// A count beyond int64: empty when negative, else too large
			// (Python: "" and OverflowError), not an operand type error.
			if b.(*big.Int).Sign() < 0 {
				if isSeq {
					return []builtin.Value{}
				}
				return ""
			}
			throw(pos, builtin.ValueError, "repetition too large")
		}
		if aok && !afl {
			a, b, bi = b, a, ai
		}
		if _, _, bfl2, ok := builtin.Number(b); ok && !bfl2 {
			n := int(bi)
			if n < 0 {
				n = 0
			}
			switch x := a.(type) {
			case string:
				if size := mulSize(int64(len(x)), int64(n)); size < math.MaxInt64 {
					f.charge(size) // beyond int64 it is Python's OverflowError
				}
				if len(x) > 0 && n > (1<<24)/len(x) { // with no budget
					throw(pos, builtin.ValueError, "repetition too large")
				}
				return strings.Repeat(x, n)
			case []builtin.Value:
				if len(x) == 0 {
					return []builtin.Value{}
				}
				if f.an != nil {
					if size := mulSize(elemSize*deepCount(x, f.an.maxValue/elemSize), int64(n)); size < math.MaxInt64 {
						f.charge(size)
					}
				}
				if n > (1<<20)/len(x) { // with no budget
					throw(pos, builtin.ValueError, "repetition too large")
				}
				out := make([]builtin.Value, 0, len(x)*n)
				for range n {
					out = append(out, x...)
				}
				return out
			}
		}
	}
	throw(pos, builtin.TypeError, "unsupported operand type(s) for %s: '%s' and '%s'", op, builtin.TypeName(a), builtin.TypeName(b))
	return nil
}

// intOp applies op to two int64 values; results that do not fit an int64
// are computed exactly with big integers (spec §2.4: arbitrary precision).
func intOp(pos syntax.Pos, op syntax.Token, a, b int64) builtin.Value {
	switch op {
	case syntax.PLUS:
		s := a + b
		if (s > a) != (b > 0) {
			return bigOp(pos, op, big.NewInt(a), big.NewInt(b))
		}
		return s
	case syntax.MINUS:
		s := a - b
		if (s < a) != (b > 0) {
			return bigOp(pos, op, big.NewInt(a), big.NewInt(b))
		}
		return s
	case syntax.STAR:
		if a == 0 || b == 0 {
			return int64(0)
		}
		p := a * b
		if p/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
			return bigOp(pos, op, big.NewInt(a), big.NewInt(b))
		}
		return p
	case syntax.SLASH:
		if b == 0 {
			throw(pos, builtin.ZeroDivision, "division by zero")
		}
		return float64(a) / float64(b)
	case syntax.PERCENT:
		if b == 0 {
			throw(pos, builtin.ZeroDivision, "integer modulo by zero")
		}
		if b == -1 {
			return int64(0)
		}
		m := a % b
		if m != 0 && (m < 0) != (b < 0) {
			m += b
		}
		return m
	case syntax.POW:
		if b < 0 {
			if a == 0 {
				throw(pos, builtin.ZeroDivision, "0 cannot be raised to a negative power")
			}
			return math.Pow(float64(a), float64(b))
		}
		return bigOp(pos, op, big.NewInt(a), big.NewInt(b))
	}
	throw(pos, builtin.TypeError, "unsupported operator %s", op)
	return nil
}

// maxBigBits bounds the size of integer results (a budget: 2 ** 10 ** 9
// would otherwise exhaust memory).
const maxBigBits = 1 << 16

// bigArith applies op when an operand is a big integer; ok is false when
// the operands are not both numbers (the caller reports the type error).
func bigArith(pos syntax.Pos, op syntax.Token, a, b builtin.Value) (builtin.Value, bool) {
	x, ok1 := builtin.BigInt(a)
	y, ok2 := builtin.BigInt(b)
	if ok1 && ok2 {
		return bigOp(pos, op, x, y), true
	}
	fa, fb := builtin.ToFloat(a), builtin.ToFloat(b)
	if fa == nil || fb == nil {
		return nil, false
	}
	return floatOp(pos, op, *fa, *fb), true
}

func bigOp(pos syntax.Pos, op syntax.Token, x, y *big.Int) builtin.Value {
	r := new(big.Int)
	switch op {
	case syntax.PLUS:
		r.Add(x, y)
	case syntax.MINUS:
		r.Sub(x, y)
	case syntax.STAR:
		if x.BitLen()+y.BitLen() > maxBigBits {
			throw(pos, builtin.ValueError, "integer result too large")
		}
		r.Mul(x, y)
	case syntax.SLASH:
		if y.Sign() == 0 {
			throw(pos, builtin.ZeroDivision, "division by zero")
		}
		f, _ := new(big.Rat).SetFrac(x, y).Float64()
		return f
	case syntax.PERCENT:
		if y.Sign() == 0 {
			throw(pos, builtin.ZeroDivision, "integer modulo by zero")
		}
		r.Rem(x, y)
		if r.Sign() != 0 && r.Sign() != y.Sign() {
			r.Add(r, y)
		}
	case syntax.POW:
		if y.Sign() < 0 {
			if x.Sign() == 0 {
				throw(pos, builtin.ZeroDivision, "0 cannot be raised to a negative power")
			}
			fx, _ := new(big.Float).SetInt(x).Float64()
			fy, _ := new(big.Float).SetInt(y).Float64()
			return math.Pow(fx, fy)
		}
		if x.BitLen() > 1 && (!y.IsInt64() || int64(x.BitLen())*y.Int64() > maxBigBits) {
			throw(pos, builtin.ValueError, "integer result too large")
		}
		r.Exp(x, y, nil)
	default:
		throw(pos, builtin.TypeError, "unsupported operator %s", op)
	}
	return builtin.IntValue(r)
}

func floatOp(pos syntax.Pos, op syntax.Token, a, b float64) builtin.Value {
	switch op {
	case syntax.PLUS:
		return a + b
	case syntax.MINUS:
		return a - b
	case syntax.STAR:
		return a * b
	case syntax.SLASH:
		if b == 0 {
			throw(pos, builtin.ZeroDivision, "float division by zero")
		}
		return a / b
	case syntax.PERCENT:
		if b == 0 {
			throw(pos, builtin.ZeroDivision, "float modulo")
		}
		m := math.Mod(a, b)
		if m != 0 && (m < 0) != (b < 0) {
			m += b
		}
		return m
	case syntax.POW:
		if a == 0 && b < 0 {
			throw(pos, builtin.ZeroDivision, "0.0 cannot be raised to a negative power")
		}
		if a < 0 && !math.IsInf(b, 0) && b != math.Trunc(b) {
			// Python's result is a complex number, which the language lacks.
			throw(pos, builtin.ValueError, "negative number cannot be raised to a fractional power")
		}
		r := math.Pow(a, b)
		if math.IsInf(r, 0) && !math.IsInf(a, 0) && !math.IsInf(b, 0) {
			throw(pos, builtin.ValueError, "numerical result out of range")
		}
		return r
	}
	throw(pos, builtin.TypeError, "unsupported operator %s", op)
	return nil
}

// isNaN reports whether v is a float NaN.
func isNaN(v builtin.Value) bool {
	_, f, isF, ok := builtin.Number(v)
	return ok && isF && math.IsNaN(f)
}

func compareOp(f *frame, op syntax.CompareOp, a, b builtin.Value) builtin.Value {
	switch op.Op {
	case syntax.EQ:
		return builtin.Equal(a, b)
	case syntax.NE:
		return !builtin.Equal(a, b)
	case syntax.LT, syntax.GT, syntax.LE, syntax.GE:
		r, err := builtin.Compare(a, b)
		if err != nil {
			throwErr(op.OpPos, err)
		}
		if isNaN(a) || isNaN(b) {
			return false // unordered: every ordering is False, as in Python
		}
		switch op.Op {
		case syntax.LT:
			return r < 0
		case syntax.GT:
			return r > 0
		case syntax.LE:
			return r <= 0
		}
		return r >= 0
	case syntax.IN:
		return in(f, op.OpPos, a, b, true)
	case syntax.NOTIN:
		r := in(f, op.OpPos, a, b, false)
		if l, ok := r.([]builtin.Value); ok {
			out := make([]builtin.Value, len(l))
			for i, e := range l {
				out[i] = !builtin.Truthy(e)
			}
			return out
		}
		return !builtin.Truthy(r)
	case syntax.IS:
		return is(f, op.OpPos, a, b)
	case syntax.ISNOT:
		return !is(f, op.OpPos, a, b)
	case syntax.CONTAINS_ONLY:
		return containsOnly(f, op.OpPos, a, b)
	}
	throw(op.OpPos, builtin.TypeError, "unsupported comparison %s", op.Op)
	return nil
}

func is(f *frame, pos syntax.Pos, a, b builtin.Value) bool {
	if p, ok := b.(*pattern); ok {
		return p.matchValue(f, pos, a)
	}
	ab, aIsBool := builtin.Strip(a).(bool)
	bb, bIsBool := builtin.Strip(b).(bool)
	if aIsBool || bIsBool {
		return aIsBool && bIsBool && ab == bb
	}
	return builtin.Equal(a, b)
}

// in implements `a in b` (spec §8.3); mark says whether to mark occurrences.
func in(f *frame, pos syntax.Pos, a, b builtin.Value, mark bool) builtin.Value {
	bs := builtin.Strip(b)
	if bs == nil {
		return false
	}
	if l, ok := builtin.Strip(a).([]builtin.Value); ok {
		out := make([]builtin.Value, len(l))
		for i, e := range l {
			out[i] = in(f, pos, e, b, mark)
		}
		return out
	}
	as := builtin.Strip(a)
	switch y := bs.(type) {
	case string:
		x, ok := as.(string)
		if !ok {
			throw(pos, builtin.TypeError, "'in <string>' requires string as left operand, not %s", builtin.TypeName(a))
		}
		return strIn(f, x, y, builtin.At(b), mark)
	case *builtin.Contents:
		x, ok := as.(string)
		if !ok {
			for _, c := range y.Chunks {
				if builtin.Equal(a, c) {
					return true
				}
			}
			return false
		}
		found := false
		for _, c := range y.Chunks {
			switch ch := c.(type) {
			case *builtin.TextChunk:
				if strIn(f, x, ch.Text, ch.At.Child("text", 1), mark) {
					found = true
				}
			case *builtin.Image:
				if strIn(f, x, ch.URL, ch.At.Child("image_url", 1).Child("url", 0), mark) {
					found = true
				}
			}
			if found && !mark {
				return true
			}
		}
		return found
	case []builtin.Value:
		for _, e := range y {
			if builtin.Equal(a, e) {
				return true
			}
		}
		return false
	case builtin.Tuple:
		for _, e := range y {
			if builtin.Equal(a, e) {
				return true
			}
		}
		return false
	case *builtin.Dict:
		k, ok := as.(string)
		if !ok {
			return false
		}
		_, has := y.M[k]
		return has
	}
	throw(pos, builtin.TypeError, "argument of type '%s' is not iterable", builtin.TypeName(b))
	return nil
}

func strIn(f *frame, needle, hay string, at *builtin.Path, mark bool) bool {
	i := strings.Index(hay, needle)
	if i < 0 {
		return false
	}
	if !mark || at == nil || needle == "" || f == nil {
		return true
	}
	nl := utf8.RuneCountInString(needle)
	off := 0  // byte offset scanned
	roff := 0 // rune offset of off
	for i >= 0 {
		roff += utf8.RuneCountInString(hay[off : off+i])
		f.mark(at, roff, roff+nl)
		off += i + len(needle)
		roff += nl
		i = strings.Index(hay[off:], needle)
	}
	return true
}

func containsOnly(f *frame, pos syntax.Pos, a, b builtin.Value) bool {
	var els []builtin.Value
	switch x := builtin.Strip(a).(type) {
	case string, []builtin.Value, builtin.Tuple, *builtin.Dict:
		els, _ = builtin.Elements(x)
	default:
		throw(pos, builtin.TypeError, "contains_only needs a list, tuple, dict or str on the left, not %s", builtin.TypeName(a))
	}
	for _, e := range els {
		if !builtin.Truthy(in(f, pos, e, b, false)) {
			return false
		}
	}
	return true
}

// flowTest implements a -> b and a ~> b (spec §8.6).
func flowTest(f *frame, pos syntax.Pos, a, b builtin.Value, immediate bool) bool {
	ea, ok1 := a.(builtin.Event)
	eb, ok2 := b.(builtin.Event)
	if !ok1 || !ok2 || (isTool(a) && false) {
		throw(pos, builtin.FlowError, "flow operands must be events of the trace, not %s and %s", builtin.TypeName(a), builtin.TypeName(b))
	}
	if immediate {
		return ea.Seq()+1 == eb.Seq()
	}
	return ea.Seq() < eb.Seq()
}

func isTool(v builtin.Value) bool { _, ok := v.(*builtin.Tool); return ok }

// index implements e[k] (spec §6.6).
func index(f *frame, pos syntax.Pos, x, k builtin.Value) builtin.Value {
	at := builtin.At(x)
	ks := builtin.Strip(k)
	switch c := builtin.Strip(x).(type) {
	case []builtin.Value, builtin.Tuple, string, *builtin.Contents:
		i, ok := ks.(int64)
		if b, isB := ks.(bool); isB {
			i, ok = 0, true
			if b {
				i = 1
			}
		}
		if _, isBig := ks.(*big.Int); isBig {
			throw(pos, builtin.KeyError, "index out of range") // beyond any length
		}
		if !ok {
			throw(pos, builtin.TypeError, "indices must be integers, not %s", builtin.TypeName(k))
		}
		switch s := c.(type) {
		case string:
			rs := []rune(s)
			j := normIndex(pos, i, len(rs))
			return string(rs[j])
		case *builtin.Contents:
			return s.Chunks[normIndex(pos, i, len(s.Chunks))]
		case builtin.Tuple:
			return s[normIndex(pos, i, len(s))]
		case []builtin.Value:
			j := normIndex(pos, i, len(s))
			return builtin.ChildAt(at, itoa(j), j, s[j])
		}
	case *builtin.Dict:
		key, ok := ks.(string)
		if !ok {
			throw(pos, builtin.TypeError, "dict keys are strings, not %s", builtin.TypeName(k))
		}
		v, ok := c.M[key]
		if !ok {
			throw(pos, builtin.KeyError, "missing key %s", key)
		}
		return builtin.ChildAt(at, key, keyOrd(c, key), v)
	}
	throw(pos, builtin.TypeError, "'%s' object is not subscriptable", builtin.TypeName(x))
	return nil
}

func normIndex(pos syntax.Pos, i int64, n int) int {
	if i < 0 {
		i += int64(n)
	}
	if i < 0 || i >= int64(n) {
		throw(pos, builtin.KeyError, "index out of range")
	}
	return int(i)
}

func keyOrd(d *builtin.Dict, k string) int { return d.Ord(k) }

func isSpace(r rune) bool {
	return unicode.IsSpace(r) || r == 0x1c || r == 0x1d || r == 0x1e || r == 0x1f
}
