package monitor

import (
	"container/list"
	"crypto/sha256"
	"sync"

	"github.com/vigilhq/vigil/policy"
)

// ruleCache is an LRU of compiled rules keyed by the SHA-256 of the rule
// text. Load errors are cached too, so a stored rule that does not load
// is not recompiled for every job.
type ruleCache struct {
	opts policy.Options
	max  int

	mu sync.Mutex
	ll *list.List // of *ruleEntry, most recent first
	m  map[[32]byte]*list.Element
}

type ruleEntry struct {
	key [32]byte
	pol *policy.Policy
	err error
}

func newRuleCache(max int, opts policy.Options) *ruleCache {
	return &ruleCache{opts: opts, max: max, ll: list.New(), m: map[[32]byte]*list.Element{}}
}

// load returns the compiled rule text, compiling it on a miss. Two callers
// missing at once may both compile; the first stored result wins.
func (c *ruleCache) load(src string) (*policy.Policy, error) {
	key := sha256.Sum256([]byte(src))
	c.mu.Lock()
	if el, ok := c.m[key]; ok {
		c.ll.MoveToFront(el)
		e := el.Value.(*ruleEntry)
		c.mu.Unlock()
		return e.pol, e.err
	}
	c.mu.Unlock()
	pol, err := policy.Load(src, c.opts)
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.m[key]; ok {
		e := el.Value.(*ruleEntry)
		return e.pol, e.err
	}
	c.m[key] = c.ll.PushFront(&ruleEntry{key: key, pol: pol, err: err})
	for c.ll.Len() > c.max {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.m, last.Value.(*ruleEntry).key)
	}
	return pol, err
}
