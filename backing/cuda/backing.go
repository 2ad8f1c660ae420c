package cuda

import (
	"fmt"
	"math"
)

// Backing is a pool.Backing whose blocks live in device memory: blocks
// blocks of blockSize bytes, contiguous in one Region. Give it to pool.New
// for a pool of device blocks, or make it with one block of pageSize*pages
// bytes and give it to pages.New for a pages region on the device.
//
// A pool hands out []byte through Block, and device memory must never be
// one: host code would read or write it by mistake. Block therefore returns
// a stand-in of the same length over host address space that no access may
// touch (PROT_NONE, no memory behind it): the pool and pages can cut and
// hand it out, and a host read or write of it faults at once instead of
// touching the device. The blocks' device addresses come from Ptr, from
// pool.Pool.DeviceAddr (which checks the handle first), or for a pages run
// from Ptr(0) plus its first page times the page size (pages.Pool.Span).
type Backing struct {
	r     *Region
	size  int
	n     int
	fence []byte
}

// NewBacking maps a Region for blocks blocks of blockSize bytes each. It
// fails with an error wrapping ErrInvalidArgument if either count is not
// positive or their product overflows, and as NewRegion does otherwise.
func (d *Device) NewBacking(blockSize, blocks int) (*Backing, error) {
	if d.unusable() {
		return nil, fmt.Errorf("%w: a Device not made by Open", ErrClosed)
	}
	if blockSize <= 0 || blocks <= 0 || blockSize > math.MaxInt/blocks {
		return nil, fmt.Errorf("%w: %d blocks of %d bytes", ErrInvalidArgument, blocks, blockSize)
	}
	fence, err := mapFence(blockSize * blocks)
	if err != nil {
		return nil, err
	}
	r, err := d.NewRegion(int64(blockSize * blocks))
	if err != nil {
		_ = unmapFence(fence)
		return nil, err
	}
	return &Backing{r: r, size: blockSize, n: blocks, fence: fence}, nil
}

// Len returns the number of blocks; 0 after Close.
func (b *Backing) Len() int {
	if b == nil || b.fence == nil {
		return 0
	}
	return b.n
}

// Block returns block i's host stand-in: blockSize bytes that fault when
// touched (see Backing). It returns nil after Close or for i out of range.
func (b *Backing) Block(i int) []byte {
	if b == nil || b.fence == nil || i < 0 || i >= b.n {
		return nil
	}
	lo, hi := i*b.size, (i+1)*b.size
	return b.fence[lo:hi:hi]
}

// Ptr returns block i's device address, or 0 for i out of range and after
// Close.
func (b *Backing) Ptr(i int) DevicePtr {
	if b == nil || b.fence == nil || i < 0 || i >= b.n {
		return 0
	}
	return b.r.Ptr().Add(i * b.size)
}

// DeviceAddr is Ptr as a uintptr, for pool.DeviceBacking: it lets
// pool.Pool.DeviceAddr return a checked handle's device address.
func (b *Backing) DeviceAddr(i int) uintptr { return uintptr(b.Ptr(i)) }

// BlockSize returns the size of a block in bytes.
func (b *Backing) BlockSize() int {
	if b == nil {
		return 0
	}
	return b.size
}

// Region returns the device region under the blocks, for Sleep and Wake.
func (b *Backing) Region() *Region {
	if b == nil {
		return nil
	}
	return b.r
}

// Close releases the device memory and the stand-in, once; later calls do
// nothing. The pool that owns the backing calls it from Pool.Close.
func (b *Backing) Close() error {
	if b == nil || b.fence == nil {
		return nil
	}
	err := b.r.Close()
	if e := unmapFence(b.fence); err == nil {
		err = e
	}
	b.fence = nil
	return err
}
