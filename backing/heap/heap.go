// Package heap is a pool backing on the Go heap: one slice per block, zeroed
// at construction.
//
// Choose it by default. The race detector sees Go-heap memory, so handoffs of
// block contents between goroutines are checked under -race, and the garbage
// collector never scans the blocks (they hold no pointers). Choose
// backing/mmap instead for one contiguous region that can be bound to a NUMA
// node, backed by huge pages or locked in memory.
//
// A file that also imports container/heap needs an import alias for one of
// the two.
package heap

import (
	"fmt"

	"github.com/locus-go/locus/pool"
)

// Backing is blocks of Go-heap memory, one slice each. Build it with New. It
// is owned by the pool it is given to; like the pool, it is not safe for
// concurrent use.
type Backing struct {
	blocks [][]byte
}

var _ pool.Backing = (*Backing)(nil)

// New allocates blocks blocks of blockSize bytes each, zeroed. It fails with
// an error wrapping pool.ErrInvalidConfig if either is not positive, if
// blocks exceeds pool.MaxBlocks, or if blockSize×blocks overflows an int.
func New(blockSize, blocks int) (*Backing, error) {
	if blockSize <= 0 || blocks <= 0 || blocks > pool.MaxBlocks {
		return nil, fmt.Errorf("%w: heap backing of %d blocks of %d bytes", pool.ErrInvalidConfig, blocks, blockSize)
	}
	if blockSize > int(^uint(0)>>1)/blocks {
		return nil, fmt.Errorf("%w: %d blocks of %d bytes overflow an int", pool.ErrInvalidConfig, blocks, blockSize)
	}
	b := &Backing{blocks: make([][]byte, blocks)}
	for i := range b.blocks {
		b.blocks[i] = make([]byte, blockSize)
	}
	return b, nil
}

// Len returns the number of blocks; 0 after Close.
func (b *Backing) Len() int { return len(b.blocks) }

// Block returns block i.
func (b *Backing) Block(i int) []byte { return b.blocks[i] }

// Close drops the blocks, leaving them to the garbage collector. Closing
// twice is harmless.
func (b *Backing) Close() error {
	b.blocks = nil
	return nil
}
