package pool_test

import (
	"sync/atomic"

	"golang.org/x/sys/cpu"

	"github.com/locus-go/locus/pool"
)

// The hand-written pool: the same path as Pool[*heap.Backing,
// *mailbox.Transport, lifo.Policy] (generation-checked LIFO ring, exact
// counters, per-producer chunk mailboxes with node recycling, a closed check
// on senders, the same error values) written without type parameters or
// interfaces, so every call is direct. BenchmarkPool runs both side by
// side: the gap is what the generic composition costs.

type hwHandle struct {
	gen  uint64
	idx  uint32
	pool uint32
}

type hwPool struct {
	id     uint32
	blocks [][]byte
	gens   []uint64
	buf    []uint32
	mask   uint32
	head   uint32
	tail   uint32

	allocs, frees, drained, rejected uint64
	hwm                              int

	closed atomic.Bool
	boxes  []*hwBox
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

func newHWPool(blockSize, n int) *hwPool {
	size := 1
	for size < n {
		size <<= 1
	}
	p := &hwPool{id: 1 << 31, blocks: make([][]byte, n), gens: make([]uint64, n), buf: make([]uint32, size), mask: uint32(size - 1)}
	for i := range p.blocks {
		p.blocks[i] = make([]byte, blockSize)
	}
	for i := n - 1; i >= 0; i-- {
		p.buf[p.tail&p.mask] = uint32(i)
		p.tail++
	}
	return p
}

func (p *hwPool) take() hwHandle {
	p.tail--
	i := p.buf[p.tail&p.mask]
	g := p.gens[i] + 1
	p.gens[i] = g
	p.allocs++
	return hwHandle{gen: g, idx: i, pool: p.id}
}

func (p *hwPool) markHigh() {
	if live := int(p.allocs - p.frees); live > p.hwm {
		p.hwm = live
	}
}

func (p *hwPool) alloc() (hwHandle, error) {
	if p.tail == p.head {
		p.drain()
		if p.tail == p.head {
			return hwHandle{}, pool.ErrExhausted
		}
	}
	return p.take(), nil
}

func (p *hwPool) allocChunk(dst []hwHandle) error {
	if int(p.tail-p.head) < len(dst) {
		p.drain()
		if int(p.tail-p.head) < len(dst) {
			return pool.ErrExhausted
		}
	}
	for i := range dst {
		dst[i] = p.take()
	}
	return nil
}

func (p *hwPool) put(h hwHandle) bool {
	if h.pool != p.id || h.idx >= uint32(len(p.gens)) || p.gens[h.idx] != h.gen || h.gen&1 != 1 {
		return false
	}
	p.gens[h.idx] = h.gen + 1
	p.buf[p.tail&p.mask] = h.idx
	p.tail++
	return true
}

func (p *hwPool) free(h hwHandle) error {
	p.markHigh()
	if p.put(h) {
		p.frees++
		return nil
	}
	return p.reject(h)
}

func (p *hwPool) reject(h hwHandle) error {
	p.rejected++
	switch {
	case h == hwHandle{}:
		return pool.ErrZeroHandle
	case h.pool != p.id:
		return pool.ErrForeignHandle
	case h.idx >= uint32(len(p.gens)):
		return pool.ErrOutOfRange
	}
	return pool.ErrStaleHandle
}

func (p *hwPool) newSender() *hwSender {
	b := new(hwBox)
	p.boxes = append(p.boxes, b)
	return &hwSender{box: b, closed: &p.closed}
}

func (s *hwSender) freeChunk(chunk []hwHandle) error {
	if s.closed.Load() {
		return pool.ErrClosed
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
			p.markHigh()
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
