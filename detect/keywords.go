package detect

import "sync/atomic"

// keywordSet finds many keywords at once, ignoring ASCII case, with an
// Aho-Corasick automaton run as a DFA over byte classes. It is the
// prefilter of the secrets scanner: one pass over the text tells which
// rules can possibly match, so clean text costs one table lookup per
// byte.
//
// The DFA is built lazily: construction makes the trie and its failure
// links (a few thousand small writes), and a transition is computed from
// them the first time a scan takes it, then stored. A text only ever
// visits a small part of the table, so a process that scans a few short
// texts never touches most of it (filling all of it up front was most of
// the secrets detector's first-call cost). Scans may run concurrently:
// entries are read and written atomically, and computing one twice
// stores the same value. The atomic loads make that scan loop ~15%
// slower, so once fullAfter bytes have been scanned the whole table is
// built and published, and later scans run on it with plain loads.
type keywordSet struct {
	words []string
	// classM1 maps a byte to its class minus one (class 0 is a byte in no
	// keyword; upper-case letters share their lower-case class).
	classM1 [256]int32
	nclass  int
	// delta holds one row of nclass entries per state. An entry is 0 until
	// computed, then (next state*nclass + 1), negated when the next state
	// has output. A scan keeps its state as (state*nclass + 1), so the
	// entry for byte b is delta[state + classM1[b]].
	delta []int32
	out   [][]int32 // state -> keyword indexes ending there

	// The trie, with edges as sibling lists, and failure links; order is
	// the states breadth first (root excluded).
	firstChild, nextSibling, fail []int32
	label                         []int32 // class of the edge into a state
	order                         []int32

	// full is the complete table (entries as in delta, none 0), built
	// once scanned reaches keywordFullAfter bytes.
	full     atomic.Pointer[[]int32]
	scanned  atomic.Int64
	building atomic.Bool
}

// keywordFullAfter is the number of bytes scanned after which a keyword
// set builds its complete table. Tests change it.
var keywordFullAfter int64 = 1 << 20

// keywordHit is the occurrence of keyword Word ending at byte End.
type keywordHit struct {
	Word int32
	End  int
}

func lowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// newKeywordSet compiles words (compared with ASCII case folded).
func newKeywordSet(words []string) *keywordSet {
	k := &keywordSet{words: words}
	var class [256]int32
	for _, w := range words {
		for i := 0; i < len(w); i++ {
			c := lowerASCII(w[i])
			if class[c] == 0 {
				k.nclass++
				class[c] = int32(k.nclass)
			}
		}
	}
	for c := 'A'; c <= 'Z'; c++ {
		class[c] = class[c+'a'-'A']
	}
	k.nclass++ // class 0
	for b := range class {
		k.classM1[b] = class[b] - 1
	}
	maxStates := 1
	for _, w := range words {
		maxStates += len(w)
	}
	k.firstChild = make([]int32, 1, maxStates)
	k.nextSibling = make([]int32, 1, maxStates)
	k.label = make([]int32, 1, maxStates)
	k.out = make([][]int32, 1, maxStates)
	k.firstChild[0], k.nextSibling[0] = -1, -1
	for wi, w := range words {
		s := int32(0)
		for i := 0; i < len(w); i++ {
			c := class[lowerASCII(w[i])]
			n := k.child(s, c)
			if n < 0 {
				n = int32(len(k.out))
				k.firstChild = append(k.firstChild, -1)
				k.nextSibling = append(k.nextSibling, k.firstChild[s])
				k.label = append(k.label, c)
				k.out = append(k.out, nil)
				k.firstChild[s] = n
			}
			s = n
		}
		if len(w) > 0 {
			k.out[s] = append(k.out[s], int32(wi))
		}
	}
	// Failure links, breadth first; a state's output includes that of its
	// failure state (shallower, so complete when the state is dequeued).
	nstates := len(k.out)
	k.fail = make([]int32, nstates)
	queue := make([]int32, 0, nstates)
	for n := k.firstChild[0]; n >= 0; n = k.nextSibling[n] {
		queue = append(queue, n)
	}
	for qi := 0; qi < len(queue); qi++ {
		s := queue[qi]
		if f := k.fail[s]; len(k.out[f]) > 0 {
			k.out[s] = append(k.out[s][:len(k.out[s]):len(k.out[s])], k.out[f]...)
		}
		for n := k.firstChild[s]; n >= 0; n = k.nextSibling[n] {
			k.fail[n] = k.next(k.fail[s], k.label[n])
			queue = append(queue, n)
		}
	}
	k.order = queue
	// Fresh memory: only the rows that scans visit are ever faulted in.
	k.delta = make([]int32, nstates*k.nclass)
	return k
}

// child returns the trie child of s on class c, or -1.
func (k *keywordSet) child(s, c int32) int32 {
	for n := k.firstChild[s]; n >= 0; n = k.nextSibling[n] {
		if k.label[n] == c {
			return n
		}
	}
	return -1
}

// next returns the state after s on class c, following failure links.
func (k *keywordSet) next(s, c int32) int32 {
	if c == 0 {
		return 0
	}
	for {
		if n := k.child(s, c); n >= 0 {
			return n
		}
		if s == 0 {
			return 0
		}
		s = k.fail[s]
	}
}

// fill computes, stores and returns the delta entry at e.
func (k *keywordSet) fill(e int32) int32 {
	nc := int32(k.nclass)
	n := k.next(e/nc, e%nc)
	v := n*nc + 1
	if len(k.out[n]) > 0 {
		v = -v
	}
	atomic.StoreInt32(&k.delta[e], v)
	return v
}

// buildFull returns the complete table: each state's row is its failure
// state's row (complete: shallower) with its own trie edges over it.
func (k *keywordSet) buildFull() []int32 {
	nc := int32(k.nclass)
	d := make([]int32, len(k.delta))
	enc := func(n int32) int32 {
		if len(k.out[n]) > 0 {
			return -(n*nc + 1)
		}
		return n*nc + 1
	}
	for c := range nc {
		d[c] = 1 // the root
	}
	for n := k.firstChild[0]; n >= 0; n = k.nextSibling[n] {
		d[k.label[n]] = enc(n)
	}
	for _, s := range k.order {
		row := d[s*nc : (s+1)*nc]
		copy(row, d[k.fail[s]*nc:(k.fail[s]+1)*nc])
		for n := k.firstChild[s]; n >= 0; n = k.nextSibling[n] {
			row[k.label[n]] = enc(n)
		}
	}
	return d
}

// scan appends every keyword occurrence in s to hits and returns it.
func (k *keywordSet) scan(s string, hits []keywordHit) []keywordHit {
	if d := k.full.Load(); d != nil {
		return k.scanFull(*d, s, hits)
	}
	hits = k.scanLazy(s, hits)
	if k.scanned.Add(int64(len(s))) >= keywordFullAfter && k.building.CompareAndSwap(false, true) {
		d := k.buildFull()
		k.full.Store(&d)
	}
	return hits
}

// scanFull is scan on the complete table.
func (k *keywordSet) scanFull(delta []int32, s string, hits []keywordHit) []keywordHit {
	state := int32(1) // the root, as (state*nclass + 1)
	classM1 := &k.classM1
	nc := int32(k.nclass)
	for i := 0; i < len(s); i++ {
		v := delta[state+classM1[s[i]]]
		if v < 0 {
			v = -v
			for _, w := range k.out[(v-1)/nc] {
				hits = append(hits, keywordHit{Word: w, End: i + 1})
			}
		}
		state = v
	}
	return hits
}

// scanLazy is scan on the lazily filled table.
func (k *keywordSet) scanLazy(s string, hits []keywordHit) []keywordHit {
	state := int32(1) // the root, as (state*nclass + 1)
	delta, classM1 := k.delta, &k.classM1
	nc := int32(k.nclass)
	for i := 0; i < len(s); i++ {
		e := state + classM1[s[i]]
		v := atomic.LoadInt32(&delta[e])
		if v <= 0 {
			if v == 0 {
				v = k.fill(e)
			}
			if v < 0 {
				v = -v
				for _, w := range k.out[(v-1)/nc] {
					hits = append(hits, keywordHit{Word: w, End: i + 1})
				}
			}
		}
		state = v
	}
	return hits
}
