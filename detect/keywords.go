package detect

// keywordSet finds many keywords at once, ignoring ASCII case, with an
// Aho-Corasick automaton compiled to a dense DFA over byte classes. It is
// the prefilter of the secrets scanner: one pass over the text tells
// which rules can possibly match, so clean text costs one table lookup
// per byte.
type keywordSet struct {
	words  []string
	class  [256]uint16 // byte -> class (0 = a byte in no keyword)
	nclass int
	// delta maps state*nclass + class to the next state times nclass,
	// negated when that state has output.
	delta   []int32
	out     [][]int32 // state -> keyword indexes ending there
	maxWord int
}

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
	// Byte classes: every distinct (lowercased) byte of a keyword gets a
	// class; upper-case letters share their lower-case class.
	for _, w := range words {
		for i := 0; i < len(w); i++ {
			c := lowerASCII(w[i])
			if k.class[c] == 0 {
				k.nclass++
				k.class[c] = uint16(k.nclass)
			}
		}
		if len(w) > k.maxWord {
			k.maxWord = len(w)
		}
	}
	for c := 'A'; c <= 'Z'; c++ {
		k.class[c] = k.class[c+'a'-'A']
	}
	k.nclass++ // class 0
	nc := k.nclass
	// Trie as a flat goto table, row per state: 0 is "no edge" (no edge
	// leads back to the root). Maps per node made building the secrets
	// scanner's 244 keywords take ~7 ms; this takes a fraction of that.
	maxStates := 1
	for _, w := range words {
		maxStates += len(w)
	}
	trie := make([]int32, nc, maxStates*nc)
	out := make([][]int32, 1, maxStates) // state -> keyword indexes ending there
	for wi, w := range words {
		s := 0
		for i := 0; i < len(w); i++ {
			e := s*nc + int(k.class[lowerASCII(w[i])])
			if trie[e] == 0 {
				trie[e] = int32(len(out))
				out = append(out, nil)
				trie = trie[:len(trie)+nc] // zero: allocated with maxStates rows
			}
			s = int(trie[e])
		}
		if len(w) > 0 {
			out[s] = append(out[s], int32(wi))
		}
	}
	nstates := len(out)
	// BFS for failure links, turning the goto table into the DFA in
	// place: a state's row still holds its trie edges when it is
	// dequeued, and every shallower row is complete by then. Class 0 (a
	// byte in no keyword) always leads back to the root.
	fail := make([]int32, nstates)
	queue := make([]int32, 0, nstates)
	for c := 1; c < nc; c++ {
		if n := trie[c]; n != 0 {
			queue = append(queue, n)
		}
	}
	for qi := 0; qi < len(queue); qi++ {
		s := int(queue[qi])
		f := int(fail[s])
		if len(out[f]) > 0 {
			out[s] = append(out[s][:len(out[s]):len(out[s])], out[f]...)
		}
		for c := 1; c < nc; c++ {
			if n := trie[s*nc+c]; n != 0 {
				fail[n] = trie[f*nc+c]
				queue = append(queue, n)
			} else {
				trie[s*nc+c] = trie[f*nc+c]
			}
		}
	}
	// Premultiply by nclass in place, and negate the entries that lead to
	// a state with output (never the root): a single sign test in the
	// scan loop, and no second table.
	for e, n := range trie {
		v := n * int32(nc)
		if len(out[n]) > 0 {
			v = -v
		}
		trie[e] = v
	}
	k.delta = trie
	k.out = out
	return k
}

// scan appends every keyword occurrence in s to hits and returns it.
func (k *keywordSet) scan(s string, hits []keywordHit) []keywordHit {
	state := int32(0) // premultiplied by nclass
	delta, class := k.delta, &k.class
	nc := int32(k.nclass)
	for i := 0; i < len(s); i++ {
		state = delta[state+int32(class[s[i]])]
		if state < 0 {
			state = -state
			for _, w := range k.out[state/nc] {
				hits = append(hits, keywordHit{Word: w, End: i + 1})
			}
		}
	}
	return hits
}
