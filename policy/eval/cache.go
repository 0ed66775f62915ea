package eval

import (
	"sync"

	"github.com/vigilhq/vigil/policy/builtin"
)

// Cache keeps the results of cacheable built-ins (model-backed detectors,
// and those marked Cache) for the lifetime of a policy (spec §13.5), keyed
// by the function, the argument values compared deeply without locations,
// and the keyword arguments. Marks are stored per argument string and
// replayed at the locations of the current arguments, so caching never
// changes a result. It is safe for concurrent use and bounded: when full it
// starts afresh.
type Cache struct {
	mu  sync.Mutex
	m   map[string]*cacheEntry
	max int
}

type cacheEntry struct {
	v     builtin.Value
	marks []cachedMark
	// blind lists the argument strings (by position) whose marks were not
	// recorded: they had no location, or the location of an earlier one.
	// A call that has a location there recomputes instead of losing marks.
	blind []int
}

// cachedMark is a mark on the text-th string of the call's arguments.
type cachedMark struct {
	text, start, end int
}

// NewCache returns a cache holding at most max results (0 means 4096).
func NewCache(max int) *Cache {
	if max <= 0 {
		max = 4096
	}
	return &Cache{m: map[string]*cacheEntry{}, max: max}
}

func cacheable(b *builtin.Builtin) bool { return b.Cache || b.Need == builtin.NeedProvider }

// argTexts lists the located strings of a call's arguments, in order.
func argTexts(args []builtin.Value, kw *builtin.Dict) []builtin.Value {
	var out []builtin.Value
	for _, a := range args {
		out = append(out, builtin.Texts(a)...)
	}
	if kw != nil {
		for _, k := range kw.Keys {
			out = append(out, builtin.Texts(kw.M[k])...)
		}
	}
	return out
}

func cacheKey(name string, args []builtin.Value, kw *builtin.Dict) string {
	var arr [256]byte
	b := append(arr[:0], name...)
	for _, a := range args {
		b = append(b, 0)
		b = builtin.AppendContentKey(b, a)
	}
	if kw != nil {
		for _, k := range kw.Keys {
			b = append(b, 1)
			b = append(b, k...)
			b = append(b, '=')
			b = builtin.AppendContentKey(b, kw.M[k])
		}
	}
	return string(b)
}

// call runs b through the cache.
func (c *Cache) call(f *frame, b *builtin.Builtin, args []builtin.Value, kw *builtin.Dict, run func(mark func(*builtin.Path, int, int)) (builtin.Value, error)) (builtin.Value, error) {
	key := cacheKey(b.Name, args, kw)
	c.mu.Lock()
	e := c.m[key]
	c.mu.Unlock()
	texts := argTexts(args, kw)
	if e != nil && b.Marks {
		for _, i := range e.blind {
			if i < len(texts) && builtin.At(texts[i]) != nil {
				e = nil // marks for this string were never recorded
				break
			}
		}
	}
	if e != nil {
		for _, m := range e.marks {
			if m.text < len(texts) {
				if at := builtin.At(texts[m.text]); at != nil {
					f.mark(at, m.start, m.end)
				}
			}
		}
		return e.v, nil
	}
	index := map[string]int{}
	e = &cacheEntry{}
	for i, t := range texts {
		at := builtin.At(t)
		if at == nil {
			e.blind = append(e.blind, i)
			continue
		}
		key := at.String()
		if _, dup := index[key]; dup {
			e.blind = append(e.blind, i)
			continue
		}
		index[key] = i
	}
	var buf [96]byte
	v, err := run(func(at *builtin.Path, start, end int) {
		if i, ok := index[string(at.AppendString(buf[:0]))]; ok {
			e.marks = append(e.marks, cachedMark{text: i, start: start, end: end})
		}
		f.mark(at, start, end)
	})
	if err != nil {
		return nil, err
	}
	e.v = v
	c.mu.Lock()
	if len(c.m) >= c.max {
		c.m = map[string]*cacheEntry{}
	}
	c.m[key] = e
	c.mu.Unlock()
	return v, nil
}
