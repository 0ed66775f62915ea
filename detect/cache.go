package detect

import (
	"container/list"
	"crypto/sha256"
	"sync"
)

// Cache is a bounded least-recently-used map from a detector call
// (detector name, canonical arguments, SHA-256 of the text) to its
// result. Results are stored with code-point offsets into the text, so a
// hit reproduces the marks at the location of the current argument
// (policy-language §13.5). It is safe for concurrent use; the zero value
// is not usable, use NewCache.
type Cache struct {
	mu    sync.Mutex
	max   int
	ll    *list.List
	items map[cacheKey]*list.Element
	hits  int64
	miss  int64
}

type cacheKey struct {
	detector string
	args     string
	text     [32]byte
}

type cacheEntry struct {
	key cacheKey
	val any
}

// NewCache returns a cache holding at most size entries (at least 1).
func NewCache(size int) *Cache {
	return &Cache{max: max(1, size), ll: list.New(), items: map[cacheKey]*list.Element{}}
}

// Do returns the cached result of detector with args on text, computing
// and storing it with f on a miss. f runs without the lock held, so two
// concurrent misses may both compute. Errors are not cached.
func (c *Cache) Do(detector, args, text string, f func() (any, error)) (any, error) {
	k := cacheKey{detector: detector, args: args, text: sha256.Sum256([]byte(text))}
	c.mu.Lock()
	if e, ok := c.items[k]; ok {
		c.ll.MoveToFront(e)
		c.hits++
		v := e.Value.(*cacheEntry).val
		c.mu.Unlock()
		return v, nil
	}
	c.miss++
	c.mu.Unlock()
	v, err := f()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.ll.MoveToFront(e)
		return v, nil
	}
	c.items[k] = c.ll.PushFront(&cacheEntry{key: k, val: v})
	for c.ll.Len() > c.max {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.items, last.Value.(*cacheEntry).key)
	}
	return v, nil
}

// Stats returns the number of hits and misses so far.
func (c *Cache) Stats() (hits, misses int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits, c.miss
}

// Len returns the number of cached entries.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}
