package sessions

import "sort"

// Alignments.
const (
	bufAlign    = 64      // Alloc's granule: a cache line of the engine's DDR port
	regionAlign = 4 << 10 // session regions and the program area
)

// extent is the byte range [base, end).
type extent struct{ base, end uint64 }

// arena is a first-fit allocator over one address range. Its free list is
// sorted by address and coalesced: no two free extents touch. high is the
// end of the highest extent it ever handed out (0: none): nothing above it
// was written through the arena.
type arena struct {
	free []extent
	high uint64
}

func newArena(base, end uint64) arena {
	if end <= base {
		return arena{}
	}
	return arena{free: []extent{{base, end}}}
}

// alloc carves n bytes aligned to align (a power of two) from the lowest
// free extent that holds them.
func (a *arena) alloc(n, align uint64) (uint64, bool) {
	if n == 0 {
		return 0, false
	}
	for k, f := range a.free {
		start := (f.base + align - 1) &^ (align - 1)
		if start < f.base || start >= f.end || n > f.end-start {
			continue
		}
		var rest []extent
		if start > f.base {
			rest = append(rest, extent{f.base, start})
		}
		if start+n < f.end {
			rest = append(rest, extent{start + n, f.end})
		}
		a.free = append(a.free[:k], append(rest, a.free[k+1:]...)...)
		a.high = max(a.high, start+n)
		return start, true
	}
	return 0, false
}

// release returns [base, base+n) to the free list, merging it with the
// free extents it touches.
func (a *arena) release(base, n uint64) {
	if n == 0 {
		return
	}
	e := extent{base, base + n}
	k := sort.Search(len(a.free), func(i int) bool { return a.free[i].base >= e.base })
	if k > 0 && a.free[k-1].end == e.base {
		k--
		e.base = a.free[k].base
		a.free = append(a.free[:k], a.free[k+1:]...)
	}
	if k < len(a.free) && a.free[k].base == e.end {
		e.end = a.free[k].end
		a.free = append(a.free[:k], a.free[k+1:]...)
	}
	a.free = append(a.free, extent{})
	copy(a.free[k+1:], a.free[k:])
	a.free[k] = e
}

func roundUp(n, align uint64) uint64 { return (n + align - 1) &^ (align - 1) }
