package web

// SetInlineFacetsMax sets the largest dataset whose trace list counts its
// sidebar inline, until the returned function restores it.
func SetInlineFacetsMax(n int) (restore func()) {
	old := inlineFacetsMax
	inlineFacetsMax = n
	return func() { inlineFacetsMax = old }
}
