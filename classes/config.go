package classes

import (
	"fmt"
	"math/bits"

	"github.com/locus-go/locus/pool"
)

// MaxClasses is the most size classes an allocator takes.
const MaxClasses = 64

// Class is one size class: Blocks blocks of Size bytes, one pool.
type Class struct {
	Size   int // bytes per block
	Blocks int // blocks in the class
}

// Split divides a byte budget among classes of the given sizes: class k gets
// budget×weights[k]/sum(weights) bytes, rounded down to whole blocks. With
// nil weights every class gets an equal share of the bytes (so small classes
// get more blocks). Weight classes by the bytes you expect each to hold:
// with sizes 4 KiB and 64 KiB and weights 1 and 3, a quarter of the budget
// goes to 4 KiB blocks.
//
// It fails with an error wrapping pool.ErrInvalidConfig if budget or a size
// is not positive, if weights is neither nil nor one positive weight per
// size, or if a class's share is smaller than one of its blocks.
func Split(budget int, sizes []int, weights []int) ([]Class, error) {
	if budget <= 0 || len(sizes) == 0 || len(sizes) > MaxClasses {
		return nil, fmt.Errorf("%w: budget %d over %d classes", pool.ErrInvalidConfig, budget, len(sizes))
	}
	if weights != nil && len(weights) != len(sizes) {
		return nil, fmt.Errorf("%w: %d weights for %d sizes", pool.ErrInvalidConfig, len(weights), len(sizes))
	}
	var sum uint64
	for k := range sizes {
		w := 1
		if weights != nil {
			w = weights[k]
		}
		if w <= 0 {
			return nil, fmt.Errorf("%w: weight %d of class %d", pool.ErrInvalidConfig, w, k)
		}
		sum += uint64(w) // at most 64 int weights: cannot overflow a uint64
	}
	out := make([]Class, len(sizes))
	for k, size := range sizes {
		w := uint64(1)
		if weights != nil {
			w = uint64(weights[k])
		}
		if size <= 0 {
			return nil, fmt.Errorf("%w: size %d of class %d", pool.ErrInvalidConfig, size, k)
		}
		hi, lo := bits.Mul64(uint64(budget), w)
		share, _ := bits.Div64(hi, lo, sum) // <= budget, since w <= sum
		blocks := int(share / uint64(size))
		if blocks == 0 {
			return nil, fmt.Errorf("%w: class %d gets %d bytes, less than one block of %d", pool.ErrInvalidConfig, k, share, size)
		}
		if err := pool.CheckBlocks(blocks); err != nil {
			return nil, fmt.Errorf("class %d (%d-byte blocks): %w", k, size, err)
		}
		out[k] = Class{Size: size, Blocks: blocks}
	}
	return out, nil
}
