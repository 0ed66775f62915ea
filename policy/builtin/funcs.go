package builtin

import (
	"fmt"
	"math/big"
	"strings"
	"sync"
	"time"

	"github.com/dlclark/regexp2"

	"github.com/vigilhq/vigil/internal/lazyregexp"
)

// Compare orders two values (spec §6.2): numbers with numbers, strings with
// strings, lists with lists, tuples with tuples. It returns -1, 0 or 1, or a
// type_error.
func Compare(a, b Value) (int, error) {
	a, b = Strip(a), Strip(b)
	_, aBig := a.(*big.Int)
	_, bBig := b.(*big.Int)
	if aBig || bBig {
		if r, ok := compareBig(a, b); ok {
			return r, nil
		}
	}
	ai, af, afl, aok := Number(a)
	bi, bf, bfl, bok := Number(b)
	if aok && bok {
		if !afl && !bfl {
			return cmp3(ai < bi, ai > bi), nil
		}
		if afl != bfl {
			// int and float: exactly, as Python does.
			if r, ok := compareBig(a, b); ok {
				return r, nil
			}
		}
		x, y := af, bf
		if !afl {
			x = float64(ai)
		}
		if !bfl {
			y = float64(bi)
		}
		return cmp3(x < y, x > y), nil
	}
	switch x := a.(type) {
	case string:
		if y, ok := b.(string); ok {
			return strings.Compare(x, y), nil
		}
	case []Value:
		if y, ok := b.([]Value); ok {
			return compareSeq(x, y)
		}
	case Tuple:
		if y, ok := b.(Tuple); ok {
			return compareSeq(x, y)
		}
	}
	return 0, Errorf(TypeError, "'<' not supported between instances of '%s' and '%s'", TypeName(a), TypeName(b))
}

func cmp3(lt, gt bool) int {
	switch {
	case lt:
		return -1
	case gt:
		return 1
	}
	return 0
}

func compareSeq(x, y []Value) (int, error) {
	for i := 0; i < len(x) && i < len(y); i++ {
		if Equal(x[i], y[i]) {
			continue
		}
		return Compare(x[i], y[i])
	}
	return cmp3(len(x) < len(y), len(x) > len(y)), nil
}

func iterArg(c *Call, name string, v Value) ([]Value, error) {
	els, ok := Elements(v)
	if !ok {
		return nil, Errorf(TypeError, "%s(): '%s' object is not iterable", name, TypeName(v))
	}
	return els, nil
}

func fnAny(c *Call) (Value, error) {
	els, err := iterArg(c, "any", c.Arg(nil, 0, nil))
	if err != nil {
		return nil, err
	}
	for _, e := range els {
		if Truthy(e) {
			return true, nil
		}
	}
	return false, nil
}

func fnAll(c *Call) (Value, error) {
	els, err := iterArg(c, "all", c.Arg(nil, 0, nil))
	if err != nil {
		return nil, err
	}
	for _, e := range els {
		if !Truthy(e) {
			return false, nil
		}
	}
	return true, nil
}

// Len implements len().
func Len(v Value) (int, error) {
	switch x := Strip(v).(type) {
	case string:
		return RuneLen(x), nil
	case []Value:
		return len(x), nil
	case Tuple:
		return len(x), nil
	case *Dict:
		return x.Len(), nil
	case *Contents:
		return len(x.Chunks), nil
	}
	return 0, Errorf(TypeError, "object of type '%s' has no len()", TypeName(v))
}

func fnLen(c *Call) (Value, error) {
	n, err := Len(c.Arg(nil, 0, nil))
	return int64(n), err
}

func fnEmpty(c *Call) (Value, error) {
	n, err := Len(c.Arg(nil, 0, nil))
	return n == 0, err
}

func minMax(c *Call, name string, want int) (Value, error) {
	if c.Kwargs != nil && c.Kwargs.Len() > 0 {
		return nil, Errorf(TypeError, "%s() takes no keyword arguments", name)
	}
	items := c.Args
	if len(items) == 0 {
		return nil, Errorf(TypeError, "%s expected at least 1 argument, got 0", name)
	}
	if len(items) == 1 {
		els, err := iterArg(c, name, items[0])
		if err != nil {
			return nil, err
		}
		items = els
	}
	if len(items) == 0 {
		return nil, Errorf(ValueError, "%s() arg is an empty sequence", name)
	}
	best := items[0]
	for _, e := range items[1:] {
		r, err := Compare(e, best)
		if err != nil {
			return nil, err
		}
		if r == want {
			best = e
		}
	}
	return best, nil
}

func fnMin(c *Call) (Value, error) { return minMax(c, "min", -1) }
func fnMax(c *Call) (Value, error) { return minMax(c, "max", 1) }

func fnSum(c *Call) (Value, error) {
	b, _ := Lookup("sum")
	els, err := iterArg(c, "sum", c.Arg(b, 0, nil))
	if err != nil {
		return nil, err
	}
	acc := c.Arg(b, 1, int64(0))
	for _, e := range els {
		acc, err = Add(acc, e)
		if err != nil {
			return nil, err
		}
	}
	return acc, nil
}

// Add adds two numbers (used by sum; the evaluator has the full operator).
func Add(a, b Value) (Value, error) {
	_, aBig := Strip(a).(*big.Int)
	_, bBig := Strip(b).(*big.Int)
	if aBig || bBig {
		x, ok1 := BigInt(a)
		y, ok2 := BigInt(b)
		if ok1 && ok2 {
			return IntValue(new(big.Int).Add(x, y)), nil
		}
		f, g := ToFloat(a), ToFloat(b)
		if f == nil || g == nil {
			return nil, Errorf(TypeError, "unsupported operand type(s) for +: '%s' and '%s'", TypeName(a), TypeName(b))
		}
		return *f + *g, nil
	}
	ai, af, afl, aok := Number(a)
	bi, bf, bfl, bok := Number(b)
	if !aok || !bok {
		return nil, Errorf(TypeError, "unsupported operand type(s) for +: '%s' and '%s'", TypeName(a), TypeName(b))
	}
	if !afl && !bfl {
		s := ai + bi
		if (s > ai) != (bi > 0) {
			return IntValue(new(big.Int).Add(big.NewInt(ai), big.NewInt(bi))), nil
		}
		return s, nil
	}
	if !afl {
		af = float64(ai)
	}
	if !bfl {
		bf = float64(bi)
	}
	return af + bf, nil
}

func fnTuple(c *Call) (Value, error) {
	b, _ := Lookup("tuple")
	v := c.Arg(b, 0, Tuple{})
	els, err := iterArg(c, "tuple", v)
	if err != nil {
		return nil, err
	}
	return Tuple(append([]Value(nil), els...)), nil
}

// regexCache is a bounded cache of compiled expressions: patterns can come
// from trace data (match(input.x, ...), json values), so it starts afresh
// when full rather than growing without bound.
type regexCache struct {
	mu sync.Mutex
	m  map[any]any
}

const regexCacheMax = 4096

// Load returns the cached value for k.
func (c *regexCache) Load(k any) (any, bool) {
	c.mu.Lock()
	v, ok := c.m[k]
	c.mu.Unlock()
	return v, ok
}

// Store caches v for k, starting afresh when the cache is full.
func (c *regexCache) Store(k, v any) {
	c.mu.Lock()
	if c.m == nil || len(c.m) >= regexCacheMax {
		c.m = make(map[any]any)
	}
	c.m[k] = v
	c.mu.Unlock()
}

// ToFloat converts a number (bool, int, big int, float) to float64, or
// returns nil.
func ToFloat(v Value) *float64 {
	var f float64
	switch x := Strip(v).(type) {
	case *big.Int:
		f, _ = new(big.Float).SetInt(x).Float64()
	default:
		i, fl, isF, ok := Number(x)
		if !ok {
			return nil
		}
		f = fl
		if !isF {
			f = float64(i)
		}
	}
	return &f
}

var reCache regexCache // pattern -> *regexp2.Regexp or error

// Regexp compiles a Python-syntax regular expression (spec §13.1) for the
// backtracking engine, with a cache. Errors are regex_error.
func Regexp(pattern string) (*regexp2.Regexp, error) {
	if v, ok := reCache.Load(pattern); ok {
		if re, ok := v.(*regexp2.Regexp); ok {
			return re, nil
		}
		return nil, v.(error)
	}
	re, err := regexp2.Compile(translatePython(pattern), regexp2.Unicode)
	if err != nil {
		e := Errorf(RegexError, "invalid regular expression %q: %v", pattern, err)
		reCache.Store(pattern, e)
		return nil, e
	}
	reCache.Store(pattern, re)
	return re, nil
}

// translatePython rewrites the Python re syntax that differs in .NET's
// dialect: (?P<n>…) → (?<n>…), (?P=n) → \k<n>, \Z → \z, and drops (?a).
func translatePython(p string) string {
	if !strings.Contains(p, "(?P") && !strings.Contains(p, `\Z`) && !strings.Contains(p, "(?a") {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		switch {
		case p[i] == '\\' && i+1 < len(p):
			if p[i+1] == 'Z' {
				b.WriteString(`\z`)
			} else {
				b.WriteString(p[i : i+2])
			}
			i++
		case strings.HasPrefix(p[i:], "(?P<"):
			b.WriteString("(?<")
			i += 3
		case strings.HasPrefix(p[i:], "(?P="):
			j := strings.IndexByte(p[i:], ')')
			if j < 0 {
				b.WriteString(p[i:])
				i = len(p)
				continue
			}
			b.WriteString(`\k<` + p[i+4:i+j] + ">")
			i += j
		case strings.HasPrefix(p[i:], "(?a)"):
			i += 3
		default:
			b.WriteByte(p[i])
		}
	}
	return b.String()
}

type timedKey struct {
	pattern string
	timeout time.Duration
}

var timedCache regexCache // timedKey -> *regexp2.Regexp

// regexp returns the compiled pattern with the env's match timeout. Each
// (pattern, timeout) pair is compiled once and shared, so that regexp2's
// runner pool is reused across matches.
func (e *Env) regexp(pattern string) (*regexp2.Regexp, error) {
	t := e.RegexTimeout
	if t <= 0 {
		t = time.Second
	}
	k := timedKey{pattern, t}
	if v, ok := timedCache.Load(k); ok {
		return v.(*regexp2.Regexp), nil
	}
	if _, err := Regexp(pattern); err != nil {
		return nil, err
	}
	re, err := regexp2.Compile(translatePython(pattern), regexp2.Unicode)
	if err != nil {
		return nil, Errorf(RegexError, "invalid regular expression %q: %v", pattern, err)
	}
	re.MatchTimeout = t
	timedCache.Store(k, re)
	return re, nil
}

type wrapKey struct {
	pattern string
	timeout time.Duration
	full    bool
}

var wrapCache regexCache // wrapKey -> *regexp2.Regexp

// wrapped returns pattern compiled the way MatchStart (full false) or
// FullMatch (full true) use it, cached per (pattern, timeout, kind): a
// match then costs one cache look-up instead of validating the pattern,
// finding its leading flags and building the wrapper each time.
func (e *Env) wrapped(pattern string, full bool) (*regexp2.Regexp, error) {
	k := wrapKey{pattern, e.RegexTimeout, full}
	if v, ok := wrapCache.Load(k); ok {
		return v.(*regexp2.Regexp), nil
	}
	// The pattern must be valid on its own: an unbalanced one such as
	// "a)|(b" would otherwise close the wrapper and match unanchored.
	if _, err := Regexp(pattern); err != nil {
		return nil, err
	}
	var src string
	if full {
		flags, rest := leadingFlags(pattern)
		src = flags + `\A(?s:(?:` + rest + `))$`
	} else {
		src = `\A(?:` + pattern + `)`
	}
	re, err := e.regexp(src)
	if err != nil {
		return nil, err
	}
	wrapCache.Store(k, re)
	return re, nil
}

func regexErr(pattern string, err error) error {
	return Errorf(RegexError, "regular expression %q: %v", pattern, err)
}

// MatchStart reports whether pattern matches at the start of s.
func (e *Env) MatchStart(pattern, s string) (bool, error) {
	re, err := e.wrapped(pattern, false)
	if err != nil {
		return false, err
	}
	m, err := re.MatchString(s)
	if err != nil {
		return false, regexErr(pattern, err)
	}
	return m, nil
}

// FullMatch reports whether pattern matches the whole of s the way tool
// pattern strings do (spec §9): DOTALL, anchored at the start, ending at the
// end or before a final newline. Leading inline flags stay global.
func (e *Env) FullMatch(pattern, s string) (bool, error) {
	re, err := e.wrapped(pattern, true)
	if err != nil {
		return false, err
	}
	m, err := re.MatchString(s)
	if err != nil {
		return false, regexErr(pattern, err)
	}
	return m, nil
}

var flagsRE = lazyregexp.New(`^(\(\?[aiLmsux]+\))+`)

func leadingFlags(p string) (string, string) {
	loc := flagsRE.FindStringIndex(p)
	if loc == nil {
		return "", p
	}
	return strings.ReplaceAll(p[:loc[1]], "a", ""), p[loc[1]:]
}

// FindAll returns the non-overlapping matches of pattern in s as code-point
// ranges, following Python's finditer for empty matches.
func (e *Env) FindAll(pattern, s string) ([]Match, error) {
	re, err := e.regexp(pattern)
	if err != nil {
		return nil, err
	}
	var out []Match
	m, err := re.FindStringMatch(s)
	for m != nil && err == nil {
		out = append(out, Match{Start: m.Index, End: m.Index + m.Length, Label: m.String()})
		m, err = re.FindNextMatch(m)
	}
	if err != nil {
		return nil, regexErr(pattern, err)
	}
	return out, nil
}

func strArg(c *Call, i int, name string) (string, error) {
	if i >= len(c.Args) {
		return "", Errorf(TypeError, "%s() missing argument %d", c.Name, i+1)
	}
	s, ok := Strip(c.Args[i]).(string)
	if !ok {
		return "", Errorf(TypeError, "%s(): %s must be str, not %s", c.Name, name, TypeName(c.Args[i]))
	}
	return s, nil
}

func fnMatch(c *Call) (Value, error) {
	p, err := strArg(c, 0, "pattern")
	if err != nil {
		return nil, err
	}
	s, err := strArg(c, 1, "string")
	if err != nil {
		return nil, err
	}
	return c.Env.MatchStart(p, s)
}

func fnFind(c *Call) (Value, error) {
	p, err := strArg(c, 0, "pattern")
	if err != nil {
		return nil, err
	}
	s, err := strArg(c, 1, "string")
	if err != nil {
		return nil, err
	}
	ms, err := c.Env.FindAll(p, s)
	if err != nil {
		return nil, err
	}
	out := make([]Value, len(ms))
	for i, m := range ms {
		out[i] = m.Label
		c.Mark(c.Args[1], m.Start, m.End)
	}
	return out, nil
}

func fnJSONLoads(c *Call) (Value, error) {
	s, err := strArg(c, 0, "s")
	if err != nil {
		return nil, err
	}
	v, err := DecodeJSON([]byte(s))
	if err != nil {
		return nil, &RuntimeError{Kind: JSONError, Msg: "invalid JSON: " + err.Error(), Err: err}
	}
	return v, nil
}

func fnPrint(c *Call) (Value, error) {
	if c.Env.Debug != nil {
		parts := make([]string, len(c.Args))
		for i, a := range c.Args {
			parts[i] = Display(a)
		}
		fmt.Fprintln(c.Env.Debug, strings.Join(parts, " "))
	}
	return true, nil
}

func fnToolCall(c *Call) (Value, error) {
	o, ok := c.Arg(nil, 0, nil).(*ToolOutput)
	if !ok {
		return nil, Errorf(ValueError, "tool_call() needs a ToolOutput, not %s", TypeName(c.Arg(nil, 0, nil)))
	}
	if o.Call == nil {
		return nil, nil
	}
	return o.Call, nil
}

func fnServer(c *Call) (Value, error) {
	if e, ok := c.Arg(nil, 0, nil).(Event); ok {
		return e.ServerValue(), nil
	}
	return nil, nil
}

func fnText(c *Call) (Value, error) {
	out := []Value{}
	for _, a := range c.Args {
		out = append(out, Texts(a)...)
	}
	return out, nil
}

func fnImage(c *Call) (Value, error) {
	out := []Value{}
	for _, a := range c.Args {
		out = append(out, Images(a)...)
	}
	return out, nil
}

func fnViolation(c *Call) (Value, error) {
	v := &Violation{Args: c.Args, Kwargs: c.Kwargs}
	if v.Kwargs == nil {
		v.Kwargs = NewDict(0)
	}
	return v, nil
}

// linkRE is the links pattern of spec §13.3. Its "word characters" are
// Python's Unicode \w (letters, numbers, underscore), not RE2's ASCII \w.
var linkRE = lazyregexp.New(`https?://(?:[\p{L}\p{N}_.\-]|%[0-9A-Fa-f]{2})+(?:/[^ \n"]*)*`)

// Links returns the URLs of spec §13.3 in s, without repeats, in order.
func Links(s string, seen map[string]bool) []string {
	var out []string
	for _, u := range linkRE.FindAllString(s, -1) {
		if !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	return out
}

func fnLinks(c *Call) (Value, error) {
	seen := map[string]bool{}
	out := []Value{}
	for _, s := range Texts(c.Arg(nil, 0, nil)) {
		for _, u := range Links(Str(s), seen) {
			out = append(out, u)
		}
	}
	return out, nil
}

func fnShouldAllowRBAC(c *Call) (Value, error) {
	b, _ := Lookup("should_allow_rbac")
	scope := Strip(c.Arg(b, 1, nil))
	user := Strip(c.Arg(b, 2, nil))
	roles, _ := Strip(c.Arg(b, 3, nil)).(*Dict)
	grants, _ := Strip(c.Arg(b, 4, nil)).(*Dict)
	us, ok := user.(string)
	if roles == nil || grants == nil || !ok {
		return false, nil
	}
	rl, _ := roles.Get(us)
	els, _ := Elements(rl)
	sc, _ := scope.(string)
	for _, r := range els {
		rs, ok := Strip(r).(string)
		if !ok {
			continue
		}
		g, _ := grants.Get(rs)
		if gd, ok := Strip(g).(*Dict); ok {
			if v, ok := gd.Get(sc); ok && Truthy(v) {
				return true, nil
			}
		}
	}
	return false, nil
}
