package bench

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// The Go peers: what a Go user would write instead of a locus pool. Each
// frees on the workers like the locus contenders do, and counts what it
// freed with one atomic add per list (the release the owner's wait and peak
// sampling read), published after every other write the worker makes.

type block = *[BlockSize]byte

// peerBase is what every Go peer shares: counts, workers, touch.
type peerBase struct {
	allocated uint64        // owner only
	freedN    atomic.Uint64 // added by workers after each list
	ws        workerSet
	toucher
}

func (c *peerBase) Drain() (int, error)      { return 0, nil }
func (c *peerBase) Counts() (uint64, uint64) { return c.allocated, c.freedN.Load() }
func (c *peerBase) freed() uint64            { return c.freedN.Load() }
func (c *peerBase) Wait(target uint64) error { return c.ws.w.waitUntil(target, c.freed, nil) }
func (c *peerBase) SetFill(v byte)           { c.setFill(v) }
func (c *peerBase) Dispatch(l, w int) error  { return c.ws.dispatch(l, w) }

func (c *peerBase) checkLive(live int) error {
	if got := c.allocated - c.freedN.Load(); got != uint64(live) {
		return fmt.Errorf("live %d (allocated %d - freed %d), want %d", got, c.allocated, c.freedN.Load(), live)
	}
	return nil
}

// goHeap: make([]byte, 4096) per block; the worker drops the references.
// make zeroes the block (a full write the other contenders do not pay
// before their touch).
type goHeap struct {
	peerBase
	lists [][][]byte
}

func (c *goHeap) Open(plan *Plan, touch TouchMode) error {
	c.setMode(touch)
	c.lists = make([][][]byte, plan.Lists())
	for i, n := range plan.ListCap {
		c.lists[i] = make([][]byte, 0, n)
	}
	c.ws.start(c.free)
	return nil
}

func (c *goHeap) free(_ int, l int32) {
	list := c.lists[l]
	n := len(list)
	clear(list)
	c.lists[l] = list[:0]
	c.freedN.Add(uint64(n))
}

func (c *goHeap) Alloc(lists []int32, n int) error {
	for _, l := range lists {
		list := c.lists[l]
		for range n {
			b := make([]byte, BlockSize)
			c.touch(b)
			list = append(list, b)
		}
		c.lists[l] = list
		c.allocated += uint64(n)
	}
	return nil
}

func (c *goHeap) Check(live int) error { return c.checkLive(live) }
func (c *goHeap) Close() error         { c.ws.stop(); c.lists = nil; return nil }

// syncPool: a sync.Pool of *[4096]byte; the worker Puts each block.
type syncPool struct {
	peerBase
	sp    sync.Pool
	lists [][]block
}

func (c *syncPool) Open(plan *Plan, touch TouchMode) error {
	c.setMode(touch)
	c.sp.New = func() any { return new([BlockSize]byte) }
	c.lists = make([][]block, plan.Lists())
	for i, n := range plan.ListCap {
		c.lists[i] = make([]block, 0, n)
	}
	c.ws.start(c.free)
	return nil
}

func (c *syncPool) free(_ int, l int32) {
	list := c.lists[l]
	for _, b := range list {
		c.sp.Put(b)
	}
	clear(list)
	c.lists[l] = list[:0]
	c.freedN.Add(uint64(len(list)))
}

func (c *syncPool) Alloc(lists []int32, n int) error {
	for _, l := range lists {
		list := c.lists[l]
		for range n {
			b := c.sp.Get().(block)
			c.touch(b[:])
			list = append(list, b)
		}
		c.lists[l] = list
		c.allocated += uint64(n)
	}
	return nil
}

func (c *syncPool) Check(live int) error { return c.checkLive(live) }
func (c *syncPool) Close() error         { c.ws.stop(); c.lists = nil; return nil }

// chanFreelist: a buffered channel holding every free block (capacity =
// the locus pool size, filled at Open); the worker sends each block back.
type chanFreelist struct {
	peerBase
	ch    chan block
	cap   int
	lists [][]block
}

func (c *chanFreelist) Open(plan *Plan, touch TouchMode) error {
	c.setMode(touch)
	c.cap = poolBlocks(plan)
	c.ch = make(chan block, c.cap)
	for range c.cap {
		c.ch <- new([BlockSize]byte)
	}
	c.lists = make([][]block, plan.Lists())
	for i, n := range plan.ListCap {
		c.lists[i] = make([]block, 0, n)
	}
	c.ws.start(c.free)
	return nil
}

func (c *chanFreelist) free(_ int, l int32) {
	list := c.lists[l]
	for _, b := range list {
		c.ch <- b
	}
	clear(list)
	c.lists[l] = list[:0]
	c.freedN.Add(uint64(len(list)))
}

func (c *chanFreelist) Alloc(lists []int32, n int) error {
	for _, l := range lists {
		list := c.lists[l]
		for range n {
			var b block
			select {
			case b = <-c.ch:
			default:
				return errExhausted
			}
			c.touch(b[:])
			list = append(list, b)
		}
		c.lists[l] = list
		c.allocated += uint64(n)
	}
	return nil
}

func (c *chanFreelist) Check(live int) error {
	if err := c.checkLive(live); err != nil {
		return err
	}
	if got := len(c.ch); got != c.cap-live {
		return fmt.Errorf("free list holds %d blocks, want %d", got, c.cap-live)
	}
	return nil
}

func (c *chanFreelist) Close() error { c.ws.stop(); c.lists = nil; c.ch = nil; return nil }

// mutexFreelist: a sync.Mutex and a slice of free blocks, used the way a
// Go user writes one: the owner locks once per block it takes (Get), a
// worker once per list it returns (PutAll).
type mutexFreelist struct {
	peerBase
	mu    sync.Mutex
	free  []block
	cap   int
	lists [][]block
}

func (c *mutexFreelist) Open(plan *Plan, touch TouchMode) error {
	c.setMode(touch)
	c.cap = poolBlocks(plan)
	c.free = make([]block, c.cap)
	for i := range c.free {
		c.free[i] = new([BlockSize]byte)
	}
	c.lists = make([][]block, plan.Lists())
	for i, n := range plan.ListCap {
		c.lists[i] = make([]block, 0, n)
	}
	c.ws.start(c.freeList)
	return nil
}

func (c *mutexFreelist) freeList(_ int, l int32) {
	list := c.lists[l]
	c.mu.Lock()
	c.free = append(c.free, list...)
	c.mu.Unlock()
	clear(list)
	c.lists[l] = list[:0]
	c.freedN.Add(uint64(len(list)))
}

// get takes one free block.
func (c *mutexFreelist) get() block {
	c.mu.Lock()
	last := len(c.free) - 1
	if last < 0 {
		c.mu.Unlock()
		return nil
	}
	b := c.free[last]
	c.free[last] = nil
	c.free = c.free[:last]
	c.mu.Unlock()
	return b
}

func (c *mutexFreelist) Alloc(lists []int32, n int) error {
	for _, l := range lists {
		list := c.lists[l]
		for range n {
			b := c.get()
			if b == nil {
				return errExhausted
			}
			c.touch(b[:])
			list = append(list, b)
		}
		c.lists[l] = list
		c.allocated += uint64(n)
	}
	return nil
}

func (c *mutexFreelist) Check(live int) error {
	if err := c.checkLive(live); err != nil {
		return err
	}
	c.mu.Lock()
	got := len(c.free)
	c.mu.Unlock()
	if got != c.cap-live {
		return fmt.Errorf("free list holds %d blocks, want %d", got, c.cap-live)
	}
	return nil
}

func (c *mutexFreelist) Close() error { c.ws.stop(); c.lists = nil; c.free = nil; return nil }

func init() {
	register(
		Entry{Name: "go-heap", Group: GroupGo,
			Doc: "make([]byte, 4096) per block; workers drop the references (GC frees)",
			New: func() Contender { return new(goHeap) }},
		Entry{Name: "sync-pool", Group: GroupGo,
			Doc: "sync.Pool of *[4096]byte; workers Put each block",
			New: func() Contender { return new(syncPool) }},
		Entry{Name: "chan-freelist", Group: GroupGo,
			Doc: "buffered channel of *[4096]byte holding every free block; workers send blocks back",
			New: func() Contender { return new(chanFreelist) }},
		Entry{Name: "mutex-freelist", Group: GroupGo,
			Doc: "sync.Mutex + slice free list; one lock per block taken, one per list returned",
			New: func() Contender { return new(mutexFreelist) }},
	)
}
