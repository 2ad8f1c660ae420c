package conformance

import (
	"errors"
	"slices"
	"sync"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/pool"
)

// Deliberately broken backings and policies.

func mustHeapBacking(size, n int) *heap.Backing {
	b, err := heap.New(size, n)
	if err != nil {
		panic(err)
	}
	return b
}

// overlapBacking returns the same memory for blocks 2k and 2k+1.
type overlapBacking struct{ *heap.Backing }

func (b overlapBacking) Block(i int) []byte { return b.Backing.Block(i &^ 1) }

// dirtyBacking hands out blocks that are not zeroed.
type dirtyBacking struct{ *heap.Backing }

func newDirty() pool.Backing {
	b := mustHeapBacking(64, 8)
	for i := range b.Len() {
		b.Block(i)[5] = 1
	}
	return dirtyBacking{b}
}

// farAliasBacking has 300 blocks in the memory of 256: block i and block
// i+256 are one.
type farAliasBacking struct{ *heap.Backing }

func (b farAliasBacking) Len() int           { return 300 }
func (b farAliasBacking) Block(i int) []byte { return b.Backing.Block(i % 256) }

// sharedBacking: every instance made by one constructor has the same
// blocks.
type sharedBacking struct{ *heap.Backing }

func (sharedBacking) Close() error { return nil }

func newSharedBackings() func() (pool.Backing, error) {
	region := mustHeapBacking(64, 16)
	return func() (pool.Backing, error) { return sharedBacking{region}, nil }
}

// recyclingBacking: Close returns the region to its constructor, which
// hands it to the next instance without zeroing it.
type recyclingBacking struct {
	*heap.Backing
	free   *[]*heap.Backing
	mu     *sync.Mutex
	closed bool
}

func (b *recyclingBacking) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		*b.free = append(*b.free, b.Backing)
	}
	return nil
}

func newRecyclingBackings() func() (pool.Backing, error) {
	var free []*heap.Backing
	var mu sync.Mutex
	return func() (pool.Backing, error) {
		mu.Lock()
		defer mu.Unlock()
		b := &recyclingBacking{free: &free, mu: &mu}
		if k := len(free); k > 0 {
			b.Backing, free = free[k-1], free[:k-1]
		} else {
			b.Backing = mustHeapBacking(64, 16)
		}
		return b, nil
	}
}

// unstableBacking returns a copy of block i on every 300th call of
// Block(i).
type unstableBacking struct {
	*heap.Backing
	calls []int
}

func (b *unstableBacking) Block(i int) []byte {
	if i >= 0 && i < len(b.calls) {
		if b.calls[i]++; b.calls[i]%300 == 0 {
			return slices.Clone(b.Backing.Block(i))
		}
	}
	return b.Backing.Block(i)
}

// lenLiarBacking reports one block more on every 500th call of Len.
type lenLiarBacking struct {
	*heap.Backing
	calls int
}

func (b *lenLiarBacking) Len() int {
	if b.calls++; b.calls%500 == 0 {
		return b.Backing.Len() + 1
	}
	return b.Backing.Len()
}

// closeErrBacking's Close always fails.
type closeErrBacking struct{ *heap.Backing }

func (b closeErrBacking) Close() error {
	_ = b.Backing.Close()
	return errors.New("close failed")
}

// spareCapBacking's last block has spare capacity: an append to it would
// run past the block.
type spareCapBacking struct{ *heap.Backing }

func (b spareCapBacking) Block(i int) []byte {
	blk := b.Backing.Block(i)
	if i == b.Len()-1 && len(blk) > 1 {
		return blk[: len(blk)-1 : len(blk)]
	}
	return blk
}

// panicTwiceBacking panics when it is closed a second time.
type panicTwiceBacking struct {
	*heap.Backing
	closed bool
}

func (b *panicTwiceBacking) Close() error {
	if b.closed {
		panic("closed twice")
	}
	b.closed = true
	return b.Backing.Close()
}

// flipPolicy changes its order on every call.
type flipPolicy struct{ n *int }

func (p flipPolicy) Order() pool.Order {
	*p.n++
	if *p.n%2 == 0 {
		return pool.FIFO
	}
	return pool.LIFO
}

// lateFlipPolicy changes its order after 500 calls.
type lateFlipPolicy struct{ n *int }

func (p lateFlipPolicy) Order() pool.Order {
	if *p.n++; *p.n > 500 {
		return pool.FIFO
	}
	return pool.LIFO
}

// fixedPolicy is a correct policy.
type fixedPolicy pool.Order

func (p fixedPolicy) Order() pool.Order { return pool.Order(p) }

// invalidPolicy returns an order that is neither LIFO nor FIFO.
type invalidPolicy struct{}

func (invalidPolicy) Order() pool.Order { return pool.Order(7) }

// newEveryThird makes policies of which every third flips on every call.
func newEveryThird() func() (pool.ReusePolicy, error) {
	made := 0
	return func() (pool.ReusePolicy, error) {
		if made++; made%3 == 0 {
			return flipPolicy{new(int)}, nil
		}
		return fixedPolicy(pool.LIFO), nil
	}
}
