// Package heap is a pool backing on the Go heap: one contiguous, zeroed
// region, block i at offset i×blockSize.
//
// Choose it by default. The race detector sees Go-heap memory, so handoffs of
// block contents between goroutines are checked under -race, and the garbage
// collector never scans the blocks (they hold no pointers). Choose
// backing/mmap instead for a region that can be bound to a NUMA node, backed
// by huge pages or locked in memory.
//
// A file that also imports container/heap needs an import alias for one of
// the two.
package heap

import (
	"fmt"

	"github.com/locus-go/locus/internal/sysmem"
	"github.com/locus-go/locus/pool"
)

// Backing is blocks of Go-heap memory in one region. Build it with New. It is
// owned by the pool it is given to; like the pool, it is not safe for
// concurrent use. A nil or zero Backing has no blocks.
type Backing struct {
	region []byte
	size   int
}

var _ pool.Backing = (*Backing)(nil)

// New allocates blocks blocks of blockSize bytes each, zeroed, in one region.
// It fails with an error wrapping pool.ErrInvalidConfig if either is not
// positive, if blocks exceeds pool.MaxBlocks, or if blockSize×blocks
// overflows an int or exceeds the memory this process may use (the smaller
// of its Go memory limit and the machine's physical memory), rather than
// letting the runtime die out of memory.
func New(blockSize, blocks int) (*Backing, error) {
	if blockSize <= 0 || blocks <= 0 || blocks > pool.MaxBlocks {
		return nil, fmt.Errorf("%w: heap backing of %d blocks of %d bytes", pool.ErrInvalidConfig, blocks, blockSize)
	}
	// A pool over it must fit too: refuse before taking the region.
	if err := pool.CheckBlocks(blocks); err != nil {
		return nil, err
	}
	total, ok := sysmem.Product(blockSize, blocks)
	if !ok {
		return nil, fmt.Errorf("%w: %d blocks of %d bytes overflow an int", pool.ErrInvalidConfig, blocks, blockSize)
	}
	if err := sysmem.Fits(uint64(total)); err != nil {
		return nil, fmt.Errorf("%w: heap backing of %d blocks of %d bytes: %v", pool.ErrInvalidConfig, blocks, blockSize, err)
	}
	return &Backing{region: make([]byte, total), size: blockSize}, nil
}

// Len returns the number of blocks; 0 after Close.
func (b *Backing) Len() int {
	if b == nil || b.size == 0 {
		return 0
	}
	return len(b.region) / b.size
}

// Block returns block i, with no spare capacity: an append to it cannot reach
// block i+1. It returns nil for an i out of range.
func (b *Backing) Block(i int) []byte {
	if i < 0 || i >= b.Len() {
		return nil
	}
	off := i * b.size
	return b.region[off : off+b.size : off+b.size]
}

// Close drops the region, leaving it to the garbage collector. Closing twice
// is harmless.
func (b *Backing) Close() error {
	if b != nil {
		b.region = nil
	}
	return nil
}
