package detect

// keywordSet finds many keywords at once, ignoring ASCII case, with an
// Aho-Corasick automaton compiled to a dense DFA over byte classes. It is
// the prefilter of the secrets scanner: one pass over the text tells
// which rules can possibly match, so clean text costs one table lookup
// per byte.
type keywordSet struct {
	words    []string
	class    [256]uint16 // byte -> class (0 = a byte in no keyword)
	nclass   int
	delta    []int32   // state*nclass + class -> next state
	out      [][]int32 // state -> keyword indexes ending there
	firstOut int32     // premultiplied states >= firstOut have output
	maxWord  int
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
	// Trie.
	type node struct {
		next map[uint16]int32
		fail int32
		out  []int32
	}
	nodes := []node{{next: map[uint16]int32{}}}
	for wi, w := range words {
		s := int32(0)
		for i := 0; i < len(w); i++ {
			c := k.class[lowerASCII(w[i])]
			n, ok := nodes[s].next[c]
			if !ok {
				n = int32(len(nodes))
				nodes = append(nodes, node{next: map[uint16]int32{}})
				nodes[s].next[c] = n
			}
			s = n
		}
		if len(w) > 0 {
			nodes[s].out = append(nodes[s].out, int32(wi))
		}
	}
	// BFS for failure links, filling the dense table.
	k.delta = make([]int32, len(nodes)*k.nclass)
	queue := []int32{}
	for c := 0; c < k.nclass; c++ {
		if n, ok := nodes[0].next[uint16(c)]; ok && c != 0 {
			nodes[n].fail = 0
			k.delta[c] = n
			queue = append(queue, n)
		}
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		f := nodes[s].fail
		nodes[s].out = append(nodes[s].out, nodes[f].out...)
		for c := 0; c < k.nclass; c++ {
			if n, ok := nodes[s].next[uint16(c)]; ok && c != 0 {
				nodes[n].fail = k.delta[int(f)*k.nclass+c]
				k.delta[int(s)*k.nclass+c] = n
				queue = append(queue, n)
			} else {
				k.delta[int(s)*k.nclass+c] = k.delta[int(f)*k.nclass+c]
			}
		}
	}
	// Renumber states so that those with output come last (a single
	// comparison in the scan loop) and premultiply by nclass.
	perm := make([]int32, len(nodes))
	next := int32(0)
	for pass := 0; pass < 2; pass++ {
		for i, n := range nodes {
			if (len(n.out) > 0) == (pass == 1) {
				perm[i] = next
				next++
			}
		}
	}
	k.firstOut = int32(len(nodes))
	k.out = make([][]int32, len(nodes))
	for i, n := range nodes {
		if len(n.out) > 0 && perm[i] < k.firstOut {
			k.firstOut = perm[i]
		}
		k.out[perm[i]] = n.out
	}
	delta := make([]int32, len(k.delta))
	for s := range nodes {
		for c := 0; c < k.nclass; c++ {
			delta[int(perm[s])*k.nclass+c] = perm[k.delta[s*k.nclass+c]] * int32(k.nclass)
		}
	}
	k.delta = delta
	k.firstOut *= int32(k.nclass)
	return k
}

// scan appends every keyword occurrence in s to hits and returns it.
func (k *keywordSet) scan(s string, hits []keywordHit) []keywordHit {
	state := int32(0) // premultiplied by nclass
	delta, class, firstOut := k.delta, &k.class, k.firstOut
	nc := int32(k.nclass)
	for i := 0; i < len(s); i++ {
		state = delta[state+int32(class[s[i]])]
		if state >= firstOut {
			for _, w := range k.out[state/nc] {
				hits = append(hits, keywordHit{Word: w, End: i + 1})
			}
		}
	}
	return hits
}
