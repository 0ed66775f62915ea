package lazyregexp

import (
	"sync"
	"testing"
)

func TestLazyRegexp(t *testing.T) {
	r := New(`^a(b+)c$`)
	if r.Compiled() {
		t.Fatal("compiled by New")
	}
	if r.String() != `^a(b+)c$` {
		t.Errorf("String() = %q", r.String())
	}
	if r.Compiled() {
		t.Fatal("compiled by String")
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if !r.MatchString("abbc") || r.MatchString("ac") {
				t.Error("MatchString")
			}
		})
	}
	wg.Wait()
	if !r.Compiled() {
		t.Fatal("not compiled after use")
	}
	if loc := r.FindStringIndex("xabc"); loc != nil {
		t.Errorf("FindStringIndex = %v, want nil", loc)
	}
	if got := New(`b+`).FindAllStringIndex("abbcb", -1); len(got) != 2 || got[0][0] != 1 || got[1][1] != 5 {
		t.Errorf("FindAllStringIndex = %v", got)
	}
	if got := New(`b+`).FindAllString("abbcb", -1); len(got) != 2 || got[0] != "bb" {
		t.Errorf("FindAllString = %q", got)
	}
	if got := New(`(?m)^(x) y$`).ReplaceAllString("x y\nz", "$1 z"); got != "x z\nz" {
		t.Errorf("ReplaceAllString = %q", got)
	}
}

func TestInvalidPatternPanicsOnFirstUse(t *testing.T) {
	r := New(`(`)
	defer func() {
		if recover() == nil {
			t.Error("no panic for an invalid pattern")
		}
	}()
	r.MatchString("x")
}
