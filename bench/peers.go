package bench

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// The Go peers: what a Go user would write instead of a locus pool. Each
// frees on the workers like the locus contenders do; the workers' done count
// (one atomic add per list, published after every other write the worker
// makes) is the peer's freed count.

type block = *[BlockSize]byte

// peerBase is what every Go peer shares: counts, workers, touch.
type peerBase struct {
	allocated uint64 // owner only
	ws        workers
	toucher
}

func (c *peerBase) drain() (int, error)      { return 0, nil }
func (c *peerBase) barrier() error           { return c.ws.wait(nil) }
func (c *peerBase) counts() (uint64, uint64) { return c.allocated, c.ws.done.Load() }
func (c *peerBase) setFill(v byte)           { c.toucher.setFill(v) }

func (c *peerBase) checkLive(live int) error {
	if got := c.allocated - c.ws.done.Load(); got != uint64(live) {
		return fmt.Errorf("live %d (allocated %d - freed %d), want %d", got, c.allocated, c.ws.done.Load(), live)
	}
	return nil
}

// newLists returns one empty list per plan list, with the plan's capacity.
func newLists[E any](plan *Plan) [][]E {
	ls := make([][]E, plan.Lists())
	for i, n := range plan.ListCap {
		ls[i] = make([]E, 0, n)
	}
	return ls
}

// goHeap: make([]byte, 4096) per block; the worker drops the references.
// make zeroes the block (a full write the other contenders do not pay
// before their touch).
type goHeap struct {
	peerBase
	lists [][][]byte
}

func (c *goHeap) open(plan *Plan, touch TouchMode) error {
	c.setMode(touch)
	c.lists = newLists[[]byte](plan)
	c.ws.start(plan.Workers, c.free)
	return nil
}

func (c *goHeap) free(_ int, l int32) int {
	list := c.lists[l]
	clear(list)
	c.lists[l] = list[:0]
	return len(list)
}

func (c *goHeap) alloc(lists []int32, n int) error {
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

func (c *goHeap) dispatch(l int32, w int) error { return c.ws.dispatch(l, w, len(c.lists[l])) }
func (c *goHeap) check(live int) error          { return c.checkLive(live) }
func (c *goHeap) close() error                  { c.ws.stop(); c.lists = nil; return nil }

// syncPool: a sync.Pool of *[4096]byte; the worker Puts each block.
type syncPool struct {
	peerBase
	sp    sync.Pool
	lists [][]block
}

func (c *syncPool) open(plan *Plan, touch TouchMode) error {
	c.setMode(touch)
	c.sp.New = func() any { return new([BlockSize]byte) }
	c.lists = newLists[block](plan)
	c.ws.start(plan.Workers, c.free)
	return nil
}

func (c *syncPool) free(_ int, l int32) int {
	list := c.lists[l]
	for _, b := range list {
		c.sp.Put(b)
	}
	clear(list)
	c.lists[l] = list[:0]
	return len(list)
}

func (c *syncPool) alloc(lists []int32, n int) error {
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

func (c *syncPool) dispatch(l int32, w int) error { return c.ws.dispatch(l, w, len(c.lists[l])) }
func (c *syncPool) check(live int) error          { return c.checkLive(live) }
func (c *syncPool) close() error                  { c.ws.stop(); c.lists = nil; return nil }

// chanFreelist: a buffered channel holding every free block (capacity =
// the locus pool size, filled at open); the worker sends each block back.
type chanFreelist struct {
	peerBase
	ch    chan block
	cap   int
	lists [][]block
}

func (c *chanFreelist) open(plan *Plan, touch TouchMode) error {
	c.setMode(touch)
	c.cap = poolBlocks(plan)
	c.ch = make(chan block, c.cap)
	for range c.cap {
		c.ch <- new([BlockSize]byte)
	}
	c.lists = newLists[block](plan)
	c.ws.start(plan.Workers, c.free)
	return nil
}

func (c *chanFreelist) free(_ int, l int32) int {
	list := c.lists[l]
	for _, b := range list {
		c.ch <- b
	}
	clear(list)
	c.lists[l] = list[:0]
	return len(list)
}

func (c *chanFreelist) alloc(lists []int32, n int) error {
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

func (c *chanFreelist) dispatch(l int32, w int) error { return c.ws.dispatch(l, w, len(c.lists[l])) }

func (c *chanFreelist) check(live int) error {
	if err := c.checkLive(live); err != nil {
		return err
	}
	if got := len(c.ch); got != c.cap-live {
		return fmt.Errorf("free list holds %d blocks, want %d", got, c.cap-live)
	}
	return nil
}

func (c *chanFreelist) close() error { c.ws.stop(); c.lists = nil; c.ch = nil; return nil }

// mutexFreelist: a sync.Mutex and a slice of free blocks, used the way a
// Go user writes one: the owner locks once per block it takes, a worker
// once per list it returns. Nothing checks what is returned: a double free
// hands the same block out twice.
type mutexFreelist struct {
	peerBase
	mu    sync.Mutex
	free  []block
	cap   int
	lists [][]block
}

func (c *mutexFreelist) open(plan *Plan, touch TouchMode) error {
	c.setMode(touch)
	c.cap = poolBlocks(plan)
	c.free = make([]block, c.cap)
	for i := range c.free {
		c.free[i] = new([BlockSize]byte)
	}
	c.lists = newLists[block](plan)
	c.ws.start(plan.Workers, c.putList)
	return nil
}

func (c *mutexFreelist) putList(_ int, l int32) int {
	list := c.lists[l]
	c.mu.Lock()
	c.free = append(c.free, list...)
	c.mu.Unlock()
	clear(list)
	c.lists[l] = list[:0]
	return len(list)
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

func (c *mutexFreelist) alloc(lists []int32, n int) error {
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

func (c *mutexFreelist) dispatch(l int32, w int) error { return c.ws.dispatch(l, w, len(c.lists[l])) }

func (c *mutexFreelist) check(live int) error {
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

func (c *mutexFreelist) close() error { c.ws.stop(); c.lists = nil; c.free = nil; return nil }

// checkedHandle is mutex-freelist-checked's handle, laid out like
// pool.Handle: a 64-bit generation (odd while the block is live), the block
// index and the free list's id.
type checkedHandle struct {
	gen  uint64
	idx  uint32
	pool uint32
}

var lastCheckedID atomic.Uint32

// checkedFreelist is the mutex free list with locus's safety contract: one
// contiguous region of blocks, a generation per block, handles that carry
// the generation and the list's id, and a free that validates every handle
// under the lock and rejects a stale, double or foreign one (counting it)
// instead of handing its block out twice. The owner locks once per block it
// takes, a worker once per list it returns, as in mutexFreelist.
type checkedFreelist struct {
	peerBase
	mu       sync.Mutex
	id       uint32
	mem      []byte
	gens     []uint64
	free     []uint32
	rejected uint64 // under mu
	lists    [][]checkedHandle
}

func (c *checkedFreelist) open(plan *Plan, touch TouchMode) error {
	c.setMode(touch)
	n := poolBlocks(plan)
	c.id = lastCheckedID.Add(1)
	c.mem = make([]byte, n*BlockSize)
	c.gens = make([]uint64, n)
	c.free = make([]uint32, n)
	for i := range c.free {
		c.free[i] = uint32(n - 1 - i)
	}
	c.lists = newLists[checkedHandle](plan)
	c.ws.start(plan.Workers, c.putList)
	return nil
}

// get takes one free block.
func (c *checkedFreelist) get() (checkedHandle, []byte, bool) {
	c.mu.Lock()
	last := len(c.free) - 1
	if last < 0 {
		c.mu.Unlock()
		return checkedHandle{}, nil, false
	}
	i := c.free[last]
	c.free = c.free[:last]
	g := c.gens[i] + 1
	c.gens[i] = g
	c.mu.Unlock()
	off := int(i) * BlockSize
	return checkedHandle{gen: g, idx: i, pool: c.id}, c.mem[off : off+BlockSize : off+BlockSize], true
}

// putList frees every handle of list l that is live in this list, rejecting
// the others.
func (c *checkedFreelist) putList(_ int, l int32) int {
	list := c.lists[l]
	c.mu.Lock()
	for _, h := range list {
		if h.pool != c.id || h.idx >= uint32(len(c.gens)) || c.gens[h.idx] != h.gen || h.gen&1 == 0 {
			c.rejected++
			continue
		}
		c.gens[h.idx] = h.gen + 1
		c.free = append(c.free, h.idx)
	}
	c.mu.Unlock()
	c.lists[l] = list[:0]
	return len(list)
}

func (c *checkedFreelist) alloc(lists []int32, n int) error {
	for _, l := range lists {
		list := c.lists[l]
		for range n {
			h, b, ok := c.get()
			if !ok {
				return errExhausted
			}
			c.touch(b)
			list = append(list, h)
		}
		c.lists[l] = list
		c.allocated += uint64(n)
	}
	return nil
}

func (c *checkedFreelist) dispatch(l int32, w int) error { return c.ws.dispatch(l, w, len(c.lists[l])) }

func (c *checkedFreelist) check(live int) error {
	if err := c.checkLive(live); err != nil {
		return err
	}
	c.mu.Lock()
	got, rejected := len(c.free), c.rejected
	c.mu.Unlock()
	if rejected != 0 {
		return fmt.Errorf("%d handles rejected", rejected)
	}
	if got != len(c.gens)-live {
		return fmt.Errorf("free list holds %d blocks, want %d", got, len(c.gens)-live)
	}
	return nil
}

func (c *checkedFreelist) close() error {
	c.ws.stop()
	c.lists, c.mem, c.gens, c.free = nil, nil, nil, nil
	return nil
}

func init() {
	register(
		Entry{Name: "go-heap", Group: GroupGo,
			Doc: "make([]byte, 4096) per block; workers drop the references (GC frees)",
			new: func() contender { return new(goHeap) }},
		Entry{Name: "sync-pool", Group: GroupGo,
			Doc: "sync.Pool of *[4096]byte; workers Put each block",
			new: func() contender { return new(syncPool) }},
		Entry{Name: "chan-freelist", Group: GroupGo,
			Doc: "buffered channel of *[4096]byte holding every free block; workers send blocks back",
			new: func() contender { return new(chanFreelist) }},
		Entry{Name: "mutex-freelist", Group: GroupGo,
			Doc: "sync.Mutex + slice free list; one lock per block taken, one per list returned; nothing checked",
			new: func() contender { return new(mutexFreelist) }},
		Entry{Name: "mutex-freelist-checked", Group: GroupGo, Checked: true,
			Doc: "mutex free list with generation-checked 16-byte handles: stale, double and foreign frees rejected",
			new: func() contender { return new(checkedFreelist) }},
	)
}
