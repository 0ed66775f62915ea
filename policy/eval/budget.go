package eval

import (
	"fmt"
	"math"

	"github.com/vigilhq/vigil/policy/builtin"
)

// This file holds the memory budgets of an analysis (spec §10.10 counts
// steps; these bound what a rule builds): one value may not exceed
// Options.MaxValueSize and all the values a rule builds in an analysis
// may not exceed Options.MaxAlloc. Sizes are counted in bytes: a string's
// bytes, elemSize per list or tuple element, 2*elemSize per dict entry.
// Values read from the trace cost nothing (they are already in memory);
// values the evaluator builds are charged where they are built, before
// the allocation when their size is known in advance (+, *, join, split,
// f-strings and format of containers) and right after it otherwise.

// Defaults of the budgets of Options (spec §10.10 and issue 17: a server
// runs users' rules, so every budget is on by default).
const (
	// DefaultMaxViolations is the default cap on the satisfying bindings
	// (and, separately, the distinct failures) of one rule in an analysis.
	DefaultMaxViolations = 10_000
	// DefaultMaxValueSize is the default size limit of one value a rule
	// builds: 16 MiB of string, or a list of 1,048,576 elements.
	DefaultMaxValueSize = 16 << 20
	// DefaultMaxAlloc is the default limit on the total size of the values
	// one rule builds in an analysis: 256 MiB.
	DefaultMaxAlloc = 256 << 20
)

// elemSize is the size charged for one list or tuple element (an
// interface value).
const elemSize = 16

// limit returns the budget v with its default d: 0 means d, a negative
// value means no limit (math.MaxInt64).
func limit(v, d int64) int64 {
	switch {
	case v == 0:
		return d
	case v < 0:
		return math.MaxInt64
	}
	return v
}

// charge accounts a value of n bytes that the rule being evaluated builds.
// It stops the rule with budget_exceeded when the value is larger than
// MaxValueSize or the rule's values add up to more than MaxAlloc.
func (an *analysis) charge(n int64) {
	if n > an.maxValue {
		panic(&budgetError{msg: fmt.Sprintf("rule built a value of %d bytes, over its budget of %d bytes per value", n, an.maxValue)})
	}
	an.chargeTotal(n)
}

// chargeTotal accounts n bytes against MaxAlloc only: work and copies
// proportional to values the rule passes on (a detector's input, a
// violation's arguments), which may be trace values of any size.
func (an *analysis) chargeTotal(n int64) {
	an.allocated += n
	if an.allocated > an.maxAlloc {
		panic(&budgetError{msg: fmt.Sprintf("rule built more than %d bytes of values, its memory budget", an.maxAlloc)})
	}
}

// charge accounts n bytes to the frame's analysis (a frame without one,
// such as the loader's, has no budget).
func (f *frame) charge(n int64) {
	if f.an != nil {
		f.an.charge(n)
	}
}

// fits stops the rule when a value being built would reach n bytes, over
// the budget per value (nothing is charged: the finished value is).
func (f *frame) fits(n int64) {
	if f.an != nil && n > f.an.maxValue {
		f.an.charge(n)
	}
}

// chargeElems accounts a new list or tuple of n elements.
func (f *frame) chargeElems(n int) { f.charge(int64(n) * elemSize) }

// chargeDeep accounts a new container by its elements counted deeply
// (deepCount): a list that holds one list many times costs what it stands
// for, so that nesting repeated lists cannot make a value whose traversal
// (==, in, text(), display) is far larger than the memory it uses.
func (f *frame) chargeDeep(v builtin.Value) {
	if f.an != nil {
		f.an.charge(elemSize * deepCount(v, f.an.maxValue/elemSize))
	}
}

// chargeConcat accounts the concatenation of two lists or tuples, before
// it is built.
func (f *frame) chargeConcat(x, y []builtin.Value) {
	if f.an != nil {
		max := f.an.maxValue / elemSize
		n := seqCount(x, max)
		f.an.charge(elemSize * (n + seqCount(y, max-n)))
	}
}

// deepCount counts the elements of the containers in v, recursively
// (a dict entry counts two), until the count passes max.
func deepCount(v builtin.Value, max int64) int64 {
	switch x := builtin.Strip(v).(type) {
	case []builtin.Value:
		return seqCount(x, max)
	case builtin.Tuple:
		return seqCount(x, max)
	case *builtin.Dict:
		if x == nil {
			return 0
		}
		n := 2 * int64(len(x.Keys))
		for _, k := range x.Keys {
			if n > max {
				break
			}
			n += deepCount(x.M[k], max-n)
		}
		return n
	}
	return 0
}

func seqCount(xs []builtin.Value, max int64) int64 {
	n := int64(len(xs))
	for _, e := range xs {
		if n > max {
			break
		}
		switch e.(type) { // the common case, a leaf, needs no call
		case string, int64, bool, nil, float64:
			continue
		}
		n += deepCount(e, max-n)
	}
	return n
}

// mulSize returns a*b, or math.MaxInt64 when it overflows.
func mulSize(a, b int64) int64 {
	if a > 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}

// display returns the display string of v (spec §6.4), charging its size.
// A container whose display would exceed the budget per value stops the
// rule before the string is built.
func (f *frame) display(v builtin.Value) string {
	if s, ok := builtin.Strip(v).(string); ok {
		return s // not copied
	}
	if f.an == nil {
		return builtin.Display(v)
	}
	if n := displaySize(v, f.an.maxValue); n > f.an.maxValue {
		f.an.charge(n)
	}
	s := builtin.Display(v)
	f.an.charge(int64(len(s)))
	return s
}

// displaySize bounds the length of builtin.Display(v) from above; it
// stops counting once the bound passes max, so its cost is O(max) even
// for a list that repeats one large string many times. Other values
// (events, numbers) are measured by displaying them.
func displaySize(v builtin.Value, max int64) int64 {
	return sizeOf(v, max, func(v builtin.Value) int64 { return int64(len(builtin.Display(v))) })
}

// outputSize estimates the size of a violation argument as the result
// writes it: containers as displaySize counts them, strings by their
// length, other values (events, which are in the trace already, numbers)
// as 16 bytes. It allocates nothing and stops counting past max.
func outputSize(v builtin.Value, max int64) int64 {
	if s, ok := builtin.Strip(v).(string); ok {
		return int64(len(s)) + 2
	}
	return sizeOf(v, max, func(builtin.Value) int64 { return 16 })
}

// inputSize estimates the work of a built-in that reads its arguments
// whole (a detector scans their text, text() and image() flatten them, a
// cache key or print() renders them): string bytes plus elemSize per
// container element, an event or Contents by its text, counted until the
// total passes max. Lists that repeat one large value many times, or
// nest such lists, are therefore as expensive as what they stand for.
func inputSize(v builtin.Value, max int64) int64 {
	switch x := builtin.Strip(v).(type) {
	case string:
		return int64(len(x))
	case []builtin.Value:
		return seqInputSize(x, max)
	case builtin.Tuple:
		return seqInputSize(x, max)
	case *builtin.Dict:
		if x == nil {
			return elemSize
		}
		n := int64(elemSize)
		for _, k := range x.Keys {
			n += 2*elemSize + int64(len(k)) + inputSize(x.M[k], max-n)
			if n > max {
				break
			}
		}
		return n
	case builtin.Event, *builtin.Contents:
		return elemSize + int64(builtin.TextSize(v))
	}
	return elemSize
}

func seqInputSize(xs []builtin.Value, max int64) int64 {
	n := int64(elemSize)
	for _, e := range xs {
		n += elemSize + inputSize(e, max-n)
		if n > max {
			break
		}
	}
	return n
}

// argsInputSize is inputSize over a call's arguments.
func argsInputSize(args []builtin.Value, kw *builtin.Dict, max int64) int64 {
	var n int64
	for _, a := range args {
		n += inputSize(a, max-n)
		if n > max {
			return n
		}
	}
	if kw != nil {
		for _, k := range kw.Keys {
			n += inputSize(kw.M[k], max-n)
			if n > max {
				return n
			}
		}
	}
	return n
}

// sizeOf is displaySize with the size of values that are neither strings
// nor containers given by leaf.
func sizeOf(v builtin.Value, max int64, leaf func(builtin.Value) int64) int64 {
	switch x := builtin.Strip(v).(type) {
	case string:
		return reprSize(x)
	case []builtin.Value:
		return seqSize(x, max, leaf)
	case builtin.Tuple:
		return seqSize(x, max, leaf)
	case *builtin.Dict:
		if x == nil {
			return 4
		}
		n := int64(2)
		for _, k := range x.Keys {
			n += reprSize(k) + 4 + sizeOf(x.M[k], max-n, leaf)
			if n > max {
				break
			}
		}
		return n
	}
	return leaf(v)
}

// reprSize bounds the length of a string's repr: its quotes, four bytes
// for an ASCII byte that may be escaped (\xNN), three for a byte of a
// non-ASCII rune (\U0001XXXX is 10 bytes for 4), one for other bytes.
func reprSize(s string) int64 {
	n := int64(len(s)) + 2
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 0x80:
			n += 2
		case c < 0x20 || c == 0x7f || c == '\\' || c == '\'' || c == '"':
			n += 3
		}
	}
	return n
}

func seqSize(xs []builtin.Value, max int64, leaf func(builtin.Value) int64) int64 {
	n := int64(3)
	for _, e := range xs {
		n += sizeOf(e, max-n, leaf) + 2
		if n > max {
			break
		}
	}
	return n
}
