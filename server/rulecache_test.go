package server

import (
	"errors"
	"fmt"
	"testing"

	"github.com/vigilhq/vigil/policy"
)

func TestRuleCache(t *testing.T) {
	c := NewRuleCache(2, policy.Options{})
	rule := func(i int) string {
		return fmt.Sprintf("raise \"r%d\" if:\n    (msg: Message)\n    msg.role == \"user\"\n", i)
	}
	p1, err := c.Load(rule(1))
	if err != nil {
		t.Fatal(err)
	}
	again, _ := c.Load(rule(1))
	if again != p1 {
		t.Error("the same text compiled twice")
	}
	c.Load(rule(2))
	c.Load(rule(1)) // 1 is now the most recently used
	c.Load(rule(3)) // evicts 2
	if c.Len() != 2 {
		t.Errorf("Len = %d, want the size 2", c.Len())
	}
	if hits, misses := c.Stats(); hits != 2 || misses != 3 {
		t.Errorf("hits, misses = %d, %d; want 2, 3", hits, misses)
	}
	if p, _ := c.Load(rule(1)); p != p1 {
		t.Error("the most recently used rule was evicted")
	}
	if _, misses := c.Stats(); misses != 3 {
		t.Error("rule 1 recompiled")
	}
	c.Load(rule(2))
	if _, misses := c.Stats(); misses != 4 {
		t.Error("rule 2 was not evicted")
	}
	// Load errors are returned, not cached.
	for range 2 {
		if _, err := c.Load(ruleBad); !errors.Is(err, policy.ErrLoad) {
			t.Fatalf("bad rule: %v", err)
		}
	}
	if _, misses := c.Stats(); misses != 6 || c.Len() != 2 {
		t.Errorf("a load error was cached: misses %d, len %d", misses, c.Len())
	}
}

func BenchmarkRuleCacheHit(b *testing.B) {
	c := NewRuleCache(0, policy.Options{})
	if _, err := c.Load(ruleEmail); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Load(ruleEmail); err != nil {
			b.Fatal(err)
		}
	}
}
