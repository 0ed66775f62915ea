package trace

import "unsafe"

// box.go boxes the decoder's strings into Values in batches. Converting a
// string to an interface allocates a 16-byte header per string, which was
// a third of Decode's allocations; here the headers live in a shared slab
// and the interface points at its element, as the runtime's own
// conversion would point at its private copy. The slab elements are never
// written after they are boxed.

// maxSlab is the most string headers per slab allocation; slabs start
// small (a tool call's arguments hold a few strings) and double.
const maxSlab = 64

// eface is the layout of an empty interface (runtime.eface).
type eface struct {
	typ  unsafe.Pointer
	data unsafe.Pointer
}

var (
	stringType = (*eface)(unsafe.Pointer(&[]any{""}[0])).typ
	numberType = (*eface)(unsafe.Pointer(&[]any{Number("")}[0])).typ
)

// strSlab hands out string headers for boxing.
type strSlab struct {
	free []string
	next int // size of the next slab
}

// box returns s as a Value of dynamic type string (number false) or
// Number (number true).
func (b *strSlab) box(s string, number bool) Value {
	if len(b.free) == 0 {
		b.next = min(max(2*b.next, 4), maxSlab)
		b.free = make([]string, b.next)
	}
	p := &b.free[0]
	*p = s
	b.free = b.free[1:]
	var v Value
	e := (*eface)(unsafe.Pointer(&v))
	if number {
		e.typ = numberType
	} else {
		e.typ = stringType
	}
	e.data = unsafe.Pointer(p)
	return v
}
