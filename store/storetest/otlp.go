package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/vigilhq/vigil/store"
)

func init() {
	register("OTLPSpans", testOTLPSpans)
}

// testOTLPSpans: marked span ids are seen for their owner only, marking
// again keeps them, large lists work, and purging removes the old ones.
func testOTLPSpans(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	old := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	must(t, s.MarkOTLPSpans(ctx, "owner-a", []string{"s1", "s2"}, old))
	must(t, s.MarkOTLPSpans(ctx, "owner-a", []string{"s2", "s3"}, old.Add(time.Hour))) // s2 again: kept
	must(t, s.MarkOTLPSpans(ctx, "owner-b", []string{"s9"}, old))
	must(t, s.MarkOTLPSpans(ctx, "owner-b", nil, old))
	seen, err := s.SeenOTLPSpans(ctx, "owner-a", []string{"s1", "s2", "s3", "s4", "s9"})
	must(t, err)
	if len(seen) != 3 || !seen["s1"] || !seen["s2"] || !seen["s3"] {
		t.Errorf("SeenOTLPSpans(owner-a) = %v, want s1 s2 s3", seen)
	}
	if seen, err := s.SeenOTLPSpans(ctx, "owner-b", []string{"s1", "s9"}); err != nil || len(seen) != 1 || !seen["s9"] {
		t.Errorf("SeenOTLPSpans(owner-b) = %v, %v; want s9 only", seen, err)
	}
	// More ids than one statement holds.
	var many []string
	for i := range 1234 {
		many = append(many, fmt.Sprintf("m%04d", i))
	}
	must(t, s.MarkOTLPSpans(ctx, "owner-a", many[:1000], old.Add(2*time.Hour)))
	seen, err = s.SeenOTLPSpans(ctx, "owner-a", many)
	must(t, err)
	if len(seen) != 1000 || seen["m1000"] || !seen["m0999"] {
		t.Errorf("SeenOTLPSpans of 1234 ids: %d seen", len(seen))
	}
	// Purge: s1 (old) and s9 go; s2 keeps its first time (old), so it goes too.
	n, err := s.PurgeOTLPSpans(ctx, old.Add(time.Minute))
	must(t, err)
	if n != 3 {
		t.Errorf("PurgeOTLPSpans removed %d, want 3 (s1, s2, s9)", n)
	}
	if seen, _ := s.SeenOTLPSpans(ctx, "owner-a", []string{"s1", "s2", "s3"}); len(seen) != 1 || !seen["s3"] {
		t.Errorf("after purge: %v, want s3", seen)
	}
}
