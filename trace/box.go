package trace

// box returns s as a Value of dynamic type string, or Number when number
// is set. (A slab of string headers behind hand-built interfaces saved an
// allocation per decoded string, but relied on the runtime's interface
// layout through unsafe; the plain conversion is kept instead.)
func box(s string, number bool) Value {
	if number {
		return Number(s)
	}
	return s
}
