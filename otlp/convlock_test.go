package otlp

import (
	"sync"
	"testing"
)

// TestConvLocks: goroutines locking overlapping sorted key sets never run
// together on a shared key, never deadlock, and leave no lock behind.
func TestConvLocks(t *testing.T) {
	var l convLocks
	sets := [][]string{{"a", "b"}, {"b", "c"}, {"a", "c"}, {"d"}, {"a", "b", "c", "d"}}
	inUse := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				keys := sets[(g+i)%len(sets)]
				unlock := l.lock(keys)
				mu.Lock()
				for _, k := range keys {
					if inUse[k]++; inUse[k] > 1 {
						t.Errorf("key %s held twice", k)
					}
				}
				mu.Unlock()
				mu.Lock()
				for _, k := range keys {
					inUse[k]--
				}
				mu.Unlock()
				unlock()
			}
		}()
	}
	wg.Wait()
	if len(l.locks) != 0 {
		t.Errorf("%d locks left after all were released", len(l.locks))
	}
}
