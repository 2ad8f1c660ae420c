package bench

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/cpu"
)

// The hand-written mailbox pool (locus-handwritten): a concrete,
// non-generic copy of the path locus-mailbox runs — the pool core of package
// pool (generation-checked LIFO ring, 64-bit generations, pool id in every
// handle, counters, closed checks) and transport/mailbox (per-producer
// Treiber stacks with node recycling through a spare stack, oldest-first
// delivery), with the transport's drain calling the pool's release
// directly. The difference between the two contenders is what the generic
// composition costs.

type hwHandle struct {
	gen  uint64
	idx  uint32
	pool uint32
}

type hwNode struct {
	next    *hwNode
	handles []hwHandle
}

type hwBox struct {
	_     cpu.CacheLinePad
	head  atomic.Pointer[hwNode]
	_     cpu.CacheLinePad
	spare atomic.Pointer[hwNode]
	_     cpu.CacheLinePad
}

type hwSender struct {
	_         cpu.CacheLinePad
	submitted atomic.Uint64
	box       *hwBox
	cache     *hwNode
	closed    *atomic.Bool
	_         cpu.CacheLinePad
}

var hwLastID atomic.Uint32

type hwPool struct {
	id     uint32
	blocks [][]byte
	gens   []uint64
	buf    []uint32 // free ring
	mask   uint32
	head   uint32
	tail   uint32

	allocs, frees, drained, rejected uint64
	hwm                              int

	closed  atomic.Bool
	mu      sync.Mutex
	boxes   []*hwBox
	senders []*hwSender
}

func newHWPool(blocks int) *hwPool {
	size := 1
	for size < blocks {
		size <<= 1
	}
	p := &hwPool{id: hwLastID.Add(1), blocks: make([][]byte, blocks), gens: make([]uint64, blocks),
		buf: make([]uint32, size), mask: uint32(size - 1)}
	for i := range p.blocks {
		p.blocks[i] = make([]byte, BlockSize)
	}
	for i := blocks - 1; i >= 0; i-- {
		p.buf[p.tail&p.mask] = uint32(i)
		p.tail++
	}
	return p
}

func (p *hwPool) alloc() (hwHandle, error) {
	if p.tail == p.head {
		p.drain()
		if p.tail == p.head {
			return hwHandle{}, errExhausted
		}
	}
	p.tail--
	i := p.buf[p.tail&p.mask]
	g := p.gens[i] + 1
	p.gens[i] = g
	p.allocs++
	if live := int(p.allocs - p.frees); live > p.hwm {
		p.hwm = live
	}
	return hwHandle{gen: g, idx: i, pool: p.id}, nil
}

func (p *hwPool) valid(h hwHandle) bool {
	return h.pool == p.id && h.idx < uint32(len(p.gens)) && p.gens[h.idx] == h.gen && h.gen&1 == 1
}

func (p *hwPool) bytes(h hwHandle) ([]byte, error) {
	if p.valid(h) {
		return p.blocks[h.idx], nil
	}
	p.rejected++
	return nil, errors.New("bench: handwritten: invalid handle")
}

func (p *hwPool) put(h hwHandle) bool {
	if !p.valid(h) {
		return false
	}
	p.gens[h.idx] = h.gen + 1
	p.buf[p.tail&p.mask] = h.idx
	p.tail++
	return true
}

func (p *hwPool) newSender() *hwSender {
	b := new(hwBox)
	s := &hwSender{box: b, closed: &p.closed}
	p.mu.Lock()
	p.boxes = append(p.boxes, b)
	p.senders = append(p.senders, s)
	p.mu.Unlock()
	return s
}

// freeChunk publishes a copy of chunk with one CAS (Sender.FreeChunk +
// mailbox.Producer.Send).
func (s *hwSender) freeChunk(chunk []hwHandle) error {
	if s.closed.Load() {
		return errors.New("bench: handwritten: closed")
	}
	if len(chunk) == 0 {
		return nil
	}
	s.submitted.Add(uint64(len(chunk)))
	n := s.cache
	if n == nil {
		if n = s.box.spare.Swap(nil); n == nil {
			n = new(hwNode)
		}
	}
	s.cache = n.next
	n.handles = append(n.handles[:0], chunk...)
	old := s.box.head.Load()
	for {
		n.next = old
		if s.box.head.CompareAndSwap(old, n) {
			return nil
		}
		old = s.box.head.Load()
	}
}

// drain takes every mailbox and frees its handles oldest first; it returns
// how many blocks it freed.
func (p *hwPool) drain() int {
	before := p.frees
	for _, b := range p.boxes {
		if b.head.Load() == nil {
			continue
		}
		newest := b.head.Swap(nil)
		var oldest *hwNode
		for n := newest; n != nil; {
			next := n.next
			n.next = oldest
			oldest, n = n, next
		}
		for n := oldest; n != nil; n = n.next {
			p.drained += uint64(len(n.handles))
			for _, h := range n.handles {
				if p.put(h) {
					p.frees++
				} else {
					p.rejected++
				}
			}
		}
		old := b.spare.Load()
		for {
			newest.next = old
			if b.spare.CompareAndSwap(old, oldest) {
				break
			}
			old = b.spare.Load()
		}
	}
	return int(p.frees - before)
}

func (p *hwPool) submitted() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n uint64
	for _, s := range p.senders {
		n += s.submitted.Load()
	}
	return n
}

type handwritten struct {
	p       *hwPool
	lists   [][]hwHandle
	senders [Workers]*hwSender
	ws      workerSet
	toucher
}

func (c *handwritten) Open(plan *Plan, touch TouchMode) error {
	c.p = newHWPool(poolBlocks(plan))
	c.setMode(touch)
	c.lists = make([][]hwHandle, plan.Lists())
	for i, n := range plan.ListCap {
		c.lists[i] = make([]hwHandle, 0, n)
	}
	for w := range c.senders {
		c.senders[w] = c.p.newSender()
	}
	c.ws.start(c.free)
	return nil
}

func (c *handwritten) free(w int, l int32) {
	list := c.lists[l]
	c.lists[l] = list[:0]
	_ = c.senders[w].freeChunk(list)
}

func (c *handwritten) Alloc(lists []int32, n int) error {
	for _, l := range lists {
		list := c.lists[l]
		for range n {
			h, err := c.p.alloc()
			if err != nil {
				return err
			}
			if c.mode != TouchNone {
				b, err := c.p.bytes(h)
				if err != nil {
					return err
				}
				c.touch(b)
			}
			list = append(list, h)
		}
		c.lists[l] = list
	}
	return nil
}

func (c *handwritten) Dispatch(l, w int) error { return c.ws.dispatch(l, w) }
func (c *handwritten) Drain() (int, error)     { return c.p.drain(), nil }
func (c *handwritten) Counts() (uint64, uint64) {
	return c.p.allocs, c.p.frees
}
func (c *handwritten) freed() uint64 { return c.p.frees }
func (c *handwritten) Wait(target uint64) error {
	return c.ws.w.waitUntil(target, c.freed, c.Drain)
}
func (c *handwritten) SetFill(v byte) { c.setFill(v) }

func (c *handwritten) Check(live int) error {
	var errs []error
	if s := c.p.submitted(); s != c.p.drained {
		errs = append(errs, fmt.Errorf("submitted %d != drained %d", s, c.p.drained))
	}
	if c.p.rejected != 0 {
		errs = append(errs, fmt.Errorf("%d handles rejected", c.p.rejected))
	}
	if got := c.p.allocs - c.p.frees; got != uint64(live) {
		errs = append(errs, fmt.Errorf("live %d, want %d", got, live))
	}
	return errors.Join(errs...)
}

func (c *handwritten) Close() error {
	if c.p == nil {
		return nil
	}
	c.ws.stop()
	c.p.closed.Store(true)
	c.p = nil
	c.lists = nil
	return nil
}

func init() {
	register(Entry{Name: "locus-handwritten", Group: GroupLocus,
		Doc: "hand-written non-generic copy of locus-mailbox's path (shows what generics cost)",
		New: func() Contender { return new(handwritten) }})
}
