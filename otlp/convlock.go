package otlp

import "sync"

// convLocks are per-conversation locks: requests touching the same
// conversation are serialised, others run side by side (and their
// appends share transactions, see combiner). A lock exists while held or
// awaited, so memory follows the requests in flight.
type convLocks struct {
	mu    sync.Mutex
	locks map[string]*convLock
}

type convLock struct {
	mu   sync.Mutex
	refs int
}

// lock takes the locks of keys, which must be sorted and distinct
// (callers lock in one order, so they cannot deadlock), and returns the
// function that releases them.
func (l *convLocks) lock(keys []string) (unlock func()) {
	held := make([]*convLock, len(keys))
	l.mu.Lock()
	if l.locks == nil {
		l.locks = map[string]*convLock{}
	}
	for i, k := range keys {
		c := l.locks[k]
		if c == nil {
			c = &convLock{}
			l.locks[k] = c
		}
		c.refs++
		held[i] = c
	}
	l.mu.Unlock()
	for _, c := range held {
		c.mu.Lock()
	}
	return func() {
		for _, c := range held {
			c.mu.Unlock()
		}
		l.mu.Lock()
		for i, c := range held {
			if c.refs--; c.refs == 0 {
				delete(l.locks, keys[i])
			}
		}
		l.mu.Unlock()
	}
}
