package disk

import "reflect"

// Direct I/O (WithDirectIO) moves bytes between the device and the
// caller's memory with no page cache between them, so the kernel asks
// that buffer addresses, file offsets and lengths all be multiples of the
// device's logical block size: pageSize covers every common device.
// Offsets and lengths are aligned by the slot layout; buffers are
// aligned here.

// addrMod returns the address of b's first byte modulo pageSize.
//
// It reads the address with reflect instead of unsafe (which this
// package may not import): reflect.Value.Pointer returns it as an
// integer. The integer is only tested for alignment, never turned back
// into a pointer, and Go's collector does not move heap objects, so the
// answer holds for as long as b is alive.
func addrMod(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	return int(reflect.ValueOf(b).Pointer() % pageSize)
}

// aligned reports whether b starts at a page boundary and is whole pages:
// a buffer direct I/O takes as it is.
func aligned(b []byte) bool { return len(b)%pageSize == 0 && addrMod(b) == 0 }

// alignedBuf returns n zeroed bytes starting at a page boundary, from the
// Go heap: it allocates a page more than n and starts at the first page
// boundary inside it (allocations of several pages are page-aligned in
// practice already, so the spare page is rarely used).
func alignedBuf(n int) []byte {
	b := make([]byte, n+pageSize)
	off := 0
	if m := addrMod(b); m != 0 {
		off = pageSize - m
	}
	return b[off : off+n : off+n]
}
