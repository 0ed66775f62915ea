package check

import (
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/vigilhq/vigil/policy/syntax"
)

// Limits on values computed at load time, so that a hostile policy cannot
// make the loader allocate without bound. Larger results are left to the
// evaluator (and its budgets).
const (
	maxFoldLen  = 1 << 16 // code points of a string, elements of a list
	maxFoldBits = 1 << 12 // bits of an integer
)

func known(v any) vtype {
	t := vtype{known: true, val: v}
	switch v.(type) {
	case nil:
		t.kind = tNone
	case bool:
		t.kind = tBool
	case *big.Int:
		t.kind = tInt
	case float64:
		t.kind = tFloat
	case string:
		t.kind = tStr
	case List:
		t.kind = tList
	case Tuple:
		t.kind = tTuple
	case *Dict:
		t.kind = tDict
	}
	return t
}

// literal returns the value of a basic literal.
func literal(b *syntax.BasicLit) vtype {
	switch b.Kind {
	case syntax.LitInt:
		n, ok := new(big.Int).SetString(b.Value, 10)
		if !ok {
			return vtype{kind: tInt}
		}
		return known(n)
	case syntax.LitFloat:
		f, err := strconv.ParseFloat(b.Raw, 64)
		if err != nil && !math.IsInf(f, 0) {
			return vtype{kind: tFloat}
		}
		return known(f)
	case syntax.LitString:
		return known(b.Value)
	case syntax.LitTrue:
		return known(true)
	case syntax.LitFalse:
		return known(false)
	}
	return known(nil)
}

// num returns a numeric value as *big.Int or float64 (bool as int).
func num(v any) (i *big.Int, f float64, isInt, ok bool) {
	switch x := v.(type) {
	case bool:
		if x {
			return big.NewInt(1), 0, true, true
		}
		return big.NewInt(0), 0, true, true
	case *big.Int:
		return x, 0, true, true
	case float64:
		return nil, x, false, true
	}
	return nil, 0, false, false
}

func toFloat(i *big.Int, f float64, isInt bool) (float64, bool) {
	if !isInt {
		return f, true
	}
	r, acc := new(big.Float).SetInt(i).Float64()
	if math.IsInf(r, 0) && acc != big.Exact {
		return 0, false
	}
	return r, true
}

func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case *big.Int:
		return x.Sign() != 0
	case float64:
		return x != 0
	case string:
		return x != ""
	case List:
		return len(x) > 0
	case Tuple:
		return len(x) > 0
	case *Dict:
		return len(x.Keys) > 0
	}
	return true
}

// foldUnary computes op x, or reports ok=false when it cannot (or would be
// a runtime error).
func foldUnary(op syntax.Token, x any) (any, bool) {
	if op == syntax.NOT {
		return !truthy(x), true
	}
	i, f, isInt, ok := num(x)
	if !ok {
		return nil, false
	}
	switch {
	case op == syntax.MINUS && isInt:
		return new(big.Int).Neg(i), true
	case op == syntax.MINUS:
		return -f, true
	case isInt:
		return new(big.Int).Set(i), true
	}
	return f, true
}

func strLen(s string) int { return len([]rune(s)) }

// foldBinary computes x op y for the arithmetic operators (spec §6.3), or
// reports ok=false.
func foldBinary(op syntax.Token, x, y any) (any, bool) {
	switch op {
	case syntax.AND:
		if !truthy(x) {
			return x, true
		}
		return y, true
	case syntax.OR:
		if truthy(x) {
			return x, true
		}
		return y, true
	}
	// Sequences.
	switch a := x.(type) {
	case string:
		if b, ok := y.(string); ok && op == syntax.PLUS {
			if strLen(a)+strLen(b) > maxFoldLen {
				return nil, false
			}
			return a + b, true
		}
		if op == syntax.STAR {
			return repeatStr(a, y)
		}
		return nil, false
	case List:
		if b, ok := y.(List); ok && op == syntax.PLUS {
			if len(a)+len(b) > maxFoldLen {
				return nil, false
			}
			return append(append(List{}, a...), b...), true
		}
		return nil, false
	case Tuple:
		if b, ok := y.(Tuple); ok && op == syntax.PLUS {
			if len(a)+len(b) > maxFoldLen {
				return nil, false
			}
			return append(append(Tuple{}, a...), b...), true
		}
		return nil, false
	}
	if s, ok := y.(string); ok && op == syntax.STAR {
		return repeatStr(s, x)
	}
	ai, af, aInt, ok1 := num(x)
	bi, bf, bInt, ok2 := num(y)
	if !ok1 || !ok2 {
		return nil, false
	}
	if aInt && bInt {
		switch op {
		case syntax.PLUS:
			return limitInt(new(big.Int).Add(ai, bi))
		case syntax.MINUS:
			return limitInt(new(big.Int).Sub(ai, bi))
		case syntax.STAR:
			if ai.BitLen()+bi.BitLen() > maxFoldBits {
				return nil, false
			}
			return new(big.Int).Mul(ai, bi), true
		case syntax.PERCENT:
			if bi.Sign() == 0 {
				return nil, false
			}
			m := new(big.Int).Mod(ai, bi) // Euclidean: 0 <= m < |b|
			if m.Sign() != 0 && bi.Sign() < 0 {
				m.Add(m, bi) // Python: the sign of the divisor
			}
			return m, true
		case syntax.POW:
			if bi.Sign() < 0 || !bi.IsInt64() || int64(ai.BitLen())*bi.Int64() > maxFoldBits {
				return nil, false
			}
			return new(big.Int).Exp(ai, bi, nil), true
		case syntax.SLASH:
			// True division: fall through to floats.
		default:
			return nil, false
		}
	}
	a, okA := toFloat(ai, af, aInt)
	b, okB := toFloat(bi, bf, bInt)
	if !okA || !okB {
		return nil, false
	}
	var r float64
	switch op {
	case syntax.PLUS:
		r = a + b
	case syntax.MINUS:
		r = a - b
	case syntax.STAR:
		r = a * b
	case syntax.SLASH:
		if b == 0 {
			return nil, false
		}
		r = a / b
	case syntax.PERCENT:
		if b == 0 {
			return nil, false
		}
		r = math.Mod(a, b)
		if r != 0 && (r < 0) != (b < 0) {
			r += b
		}
	case syntax.POW:
		if a == 0 && b < 0 {
			return nil, false
		}
		r = math.Pow(a, b)
		if math.IsNaN(r) {
			return nil, false // complex result in Python
		}
	default:
		return nil, false
	}
	if math.IsInf(r, 0) && !math.IsInf(a, 0) && !math.IsInf(b, 0) {
		return nil, false // overflow is a runtime error in Python
	}
	return r, true
}

func limitInt(n *big.Int) (any, bool) {
	if n.BitLen() > maxFoldBits {
		return nil, false
	}
	return n, true
}

func repeatStr(s string, n any) (any, bool) {
	i, ok := n.(*big.Int)
	if b, isBool := n.(bool); isBool {
		i, ok = big.NewInt(0), true
		if b {
			i = big.NewInt(1)
		}
	}
	if !ok {
		return nil, false
	}
	if i.Sign() <= 0 || s == "" {
		return "", true
	}
	if !i.IsInt64() || i.Int64() > int64(maxFoldLen/strLen(s)) {
		return nil, false
	}
	return strings.Repeat(s, int(i.Int64())), true
}
