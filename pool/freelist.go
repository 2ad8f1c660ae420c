package pool

// ring is the pool's free list: a deque of block indices over a power-of-two
// array, with head and tail counting up and masked on access. It never holds
// more than the pool's capacity, and the array is at least that long, so
// pushes never overflow. LIFO pops the back, FIFO the front; frees push the
// back. All of it is concrete and inlines into the pool's hot path.
type ring struct {
	buf  []uint32
	mask uint32
	head uint32 // index of the front element
	tail uint32 // one past the back element
}

func newRing(n int) ring {
	size := 1
	for size < n {
		size <<= 1
	}
	return ring{buf: make([]uint32, size), mask: uint32(size - 1)}
}

func (r *ring) len() int { return int(r.tail - r.head) }

func (r *ring) pushBack(i uint32) {
	r.buf[r.tail&r.mask] = i
	r.tail++
}

// pop removes the front element if front is set, else the back one; the
// ring must not be empty. One function with the branch inside keeps the
// pool's take within the inlining budget.
func (r *ring) pop(front bool) uint32 {
	var at uint32
	if front {
		at = r.head
		r.head++
	} else {
		r.tail--
		at = r.tail
	}
	return r.buf[at&r.mask]
}
