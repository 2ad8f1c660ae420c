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

// spillBacking: instances of blocks blocks come from their constructor's list of closed
// regions; a region is zeroed again only while fewer than two instances
// are live (the "burst" path skips it).
type spillBacking struct {
	*heap.Backing
	pool   *spillPool
	closed bool
}

type spillPool struct {
	mu   sync.Mutex
	live int
	free []*heap.Backing
}

func (b *spillBacking) Close() error {
	b.pool.mu.Lock()
	defer b.pool.mu.Unlock()
	if !b.closed {
		b.closed = true
		b.pool.live--
		b.pool.free = append(b.pool.free, b.Backing)
	}
	return nil
}

func newSpillBackings(blocks int) func() (pool.Backing, error) {
	sp := &spillPool{}
	return func() (pool.Backing, error) {
		sp.mu.Lock()
		defer sp.mu.Unlock()
		b := &spillBacking{pool: sp}
		if k := len(sp.free); k > 0 {
			b.Backing, sp.free = sp.free[k-1], sp.free[:k-1]
			if sp.live < 2 {
				for i := range b.Len() {
					clear(b.Backing.Block(i))
				}
			}
		} else {
			b.Backing = mustHeapBacking(64, blocks)
		}
		sp.live++
		return b, nil
	}
}

// arenaBacking: instance k of a constructor shares its memory with instance
// k-4, live or not.
type arenaBacking struct{ *heap.Backing }

func (arenaBacking) Close() error { return nil }

func newFourArenas() func() (pool.Backing, error) {
	var arenas []*heap.Backing
	return func() (pool.Backing, error) {
		k := len(arenas)
		b := mustHeapBacking(64, 16)
		if k >= 4 {
			b = arenas[k-4]
			for i := range b.Len() {
				clear(b.Block(i))
			}
		}
		arenas = append(arenas, b)
		return arenaBacking{b}, nil
	}
}

// lateMoveBacking returns copies of its blocks after 50000 Block calls.
type lateMoveBacking struct {
	*heap.Backing
	calls int
}

func (b *lateMoveBacking) Block(i int) []byte {
	if b.calls++; b.calls > 50000 {
		return slices.Clone(b.Backing.Block(i))
	}
	return b.Backing.Block(i)
}

// lateLenBacking reports one block less after 50000 calls of Len.
type lateLenBacking struct {
	*heap.Backing
	calls int
}

func (b *lateLenBacking) Len() int {
	if b.calls++; b.calls > 50000 {
		return b.Backing.Len() - 1
	}
	return b.Backing.Len()
}

// canaryBacking's Close fails when the last byte of its last block is not
// zero (a misplaced overrun canary).
type canaryBacking struct{ *heap.Backing }

func (b canaryBacking) Close() error {
	last := b.Block(b.Len() - 1)
	if last != nil && last[len(last)-1] != 0 {
		_ = b.Backing.Close()
		return errors.New("canary overwritten")
	}
	return b.Backing.Close()
}

// lateFlipPolicy50k changes its order after 50000 calls.
type lateFlipPolicy50k struct{ n *int }

func (p lateFlipPolicy50k) Order() pool.Order {
	if *p.n++; *p.n > 50000 {
		return pool.FIFO
	}
	return pool.LIFO
}

// lateFlipPolicy300k changes its order after 300000 calls: past the calls
// of every case but StableOrder.
type lateFlipPolicy300k struct{ n *int }

func (p lateFlipPolicy300k) Order() pool.Order {
	if *p.n++; *p.n > 300000 {
		return pool.FIFO
	}
	return pool.LIFO
}

// sharedFlipPolicy changes its order after 2000000 calls, counted over
// every instance that shares its counter.
type sharedFlipPolicy struct{ n *int }

func (p sharedFlipPolicy) Order() pool.Order {
	if *p.n++; *p.n > 2000000 {
		return pool.FIFO
	}
	return pool.LIFO
}
