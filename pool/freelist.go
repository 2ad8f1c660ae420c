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

// popBack and popFront must only be called on a non-empty ring.
func (r *ring) popBack() uint32 {
	r.tail--
	return r.buf[r.tail&r.mask]
}

func (r *ring) popFront() uint32 {
	i := r.buf[r.head&r.mask]
	r.head++
	return i
}
