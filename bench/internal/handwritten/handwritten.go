// Package handwritten is the reference that shows what generics cost: the
// path of pool.Pool[*heap.Backing, *mailbox.Transport, lifo.Policy]
// (generation-checked LIFO ring, 64-bit generations, pool id in every handle,
// exact counters, the same error values, a closed check on senders, and
// per-producer chunk mailboxes with node recycling) written by hand with no
// type parameters and no interfaces, so every call is direct and the
// mailbox's drain frees straight into the ring.
//
// bench's BenchmarkPool and the contender locus-handwritten run it
// beside the composed pool; keep it the same path as the real one.
package handwritten

import (
	"sync"
	"sync/atomic"

	"golang.org/x/sys/cpu"

	"github.com/locus-go/locus/pool"
)

// Handle is a generation-checked handle, laid out like pool.Handle.
type Handle struct {
	gen  uint64
	idx  uint32
	pool uint32
}

// Index returns the block index.
func (h Handle) Index() int { return int(h.idx) }

// Pool is the hand-written pool. Its owner methods are for one goroutine;
// Senders are for one goroutine each.
type Pool struct {
	id     uint32
	blocks [][]byte
	gens   []uint64
	buf    []uint32 // free ring
	mask   uint32
	head   uint32
	tail   uint32

	frees, drained, rejected uint64 // allocations are frees + live, as in pool
	hwm                      int

	closed  atomic.Bool
	mu      sync.Mutex
	boxes   []*box
	senders []*Sender
}

const nodeHandles = 32 // as in transport/mailbox

type node struct {
	next    *node
	handles []Handle
}

type box struct {
	_     cpu.CacheLinePad
	head  atomic.Pointer[node]
	_     cpu.CacheLinePad
	spare atomic.Pointer[node]
	_     cpu.CacheLinePad
}

// Sender frees chunks from one worker goroutine.
type Sender struct {
	_         cpu.CacheLinePad
	submitted atomic.Uint64
	box       *box
	cache     *node
	owned     int
	closed    *atomic.Bool
	_         cpu.CacheLinePad
}

var lastID atomic.Uint32

// New returns a pool of blocks zeroed blocks of blockSize bytes.
func New(blockSize, blocks int) *Pool {
	size := 1
	for size < blocks {
		size <<= 1
	}
	p := &Pool{id: lastID.Add(1) | 1<<31, blocks: make([][]byte, blocks), gens: make([]uint64, blocks),
		buf: make([]uint32, size), mask: uint32(size - 1)}
	for i := range p.blocks {
		p.blocks[i] = make([]byte, blockSize)
	}
	for i := blocks - 1; i >= 0; i-- {
		p.buf[p.tail&p.mask] = uint32(i)
		p.tail++
	}
	return p
}

func (p *Pool) take() Handle {
	p.tail--
	i := p.buf[p.tail&p.mask]
	g := p.gens[i] + 1
	p.gens[i] = g
	return Handle{gen: g, idx: i, pool: p.id}
}

func (p *Pool) live() int { return len(p.gens) - int(p.tail-p.head) }

func (p *Pool) markHigh() {
	if live := p.live(); live > p.hwm {
		p.hwm = live
	}
}

func (p *Pool) refill(n int) error {
	if p.closed.Load() {
		return pool.ErrClosed
	}
	if int(p.tail-p.head) < n {
		p.Drain()
		if int(p.tail-p.head) < n {
			return pool.ErrExhausted
		}
	}
	return nil
}

// Alloc hands out a block, draining first if none is free.
func (p *Pool) Alloc() (Handle, error) {
	if p.tail == p.head {
		if err := p.refill(1); err != nil {
			return Handle{}, err
		}
	}
	return p.take(), nil
}

// AllocBytes is Alloc that also returns the block's memory.
func (p *Pool) AllocBytes() (Handle, []byte, error) {
	if p.tail == p.head {
		if err := p.refill(1); err != nil {
			return Handle{}, nil, err
		}
	}
	h := p.take()
	return h, p.blocks[h.idx], nil
}

// AllocChunk fills dst, all or nothing.
func (p *Pool) AllocChunk(dst []Handle) error {
	if int(p.tail-p.head) < len(dst) {
		if err := p.refill(len(dst)); err != nil {
			return err
		}
	}
	for i := range dst {
		dst[i] = p.take()
	}
	return nil
}

func (p *Pool) valid(h Handle) bool {
	return h.pool == p.id && uint(h.idx) < uint(len(p.gens)) && p.gens[h.idx] == h.gen && h.gen&1 == 1
}

func (p *Pool) put(h Handle) bool {
	if !p.valid(h) {
		return false
	}
	p.gens[h.idx] = h.gen + 1
	p.buf[p.tail&p.mask] = h.idx
	p.tail++
	return true
}

func (p *Pool) reject(h Handle) error {
	p.rejected++
	switch {
	case h == Handle{}:
		return pool.ErrZeroHandle
	case h.pool != p.id:
		return pool.ErrForeignHandle
	case uint(h.idx) >= uint(len(p.gens)):
		return pool.ErrOutOfRange
	}
	return pool.ErrStaleHandle
}

// Free returns a block to the free list.
func (p *Pool) Free(h Handle) error {
	p.markHigh()
	if p.put(h) {
		p.frees++
		return nil
	}
	return p.reject(h)
}

// Bytes returns a live block's memory.
func (p *Pool) Bytes(h Handle) ([]byte, error) {
	if p.valid(h) {
		return p.blocks[h.idx], nil
	}
	return nil, p.reject(h)
}

// NewSender adds a mailbox for one worker.
func (p *Pool) NewSender() *Sender {
	b := new(box)
	s := &Sender{box: b, closed: &p.closed}
	p.mu.Lock()
	p.boxes = append(p.boxes, b)
	p.senders = append(p.senders, s)
	p.mu.Unlock()
	return s
}

// FreeChunk publishes a copy of chunk, in nodes of nodeHandles handles, with
// one CAS.
func (s *Sender) FreeChunk(chunk []Handle) error {
	if s.closed.Load() {
		return pool.ErrClosed
	}
	if len(chunk) == 0 {
		return nil
	}
	s.submitted.Add(uint64(len(chunk)))
	var top, bottom *node
	for len(chunk) > 0 {
		n := s.cache
		if n == nil {
			if n = s.box.spare.Swap(nil); n == nil {
				n = s.grow()
			}
		}
		s.cache = n.next
		k := min(len(chunk), nodeHandles)
		n.handles = append(n.handles[:0], chunk[:k]...)
		chunk = chunk[k:]
		n.next = top
		if bottom == nil {
			bottom = n
		}
		top = n
	}
	old := s.box.head.Load()
	for {
		bottom.next = old
		if s.box.head.CompareAndSwap(old, top) {
			return nil
		}
		old = s.box.head.Load()
	}
}

// grow doubles the sender's nodes, as transport/mailbox does.
func (s *Sender) grow() *node {
	k := max(s.owned, 1)
	s.owned += k
	nodes := make([]node, k)
	hs := make([]Handle, k*nodeHandles)
	for i := range nodes {
		nodes[i].handles = hs[i*nodeHandles : i*nodeHandles : (i+1)*nodeHandles]
		if i+1 < k {
			nodes[i].next = &nodes[i+1]
		}
	}
	return &nodes[0]
}

// Drain takes every mailbox and frees its handles oldest first; it returns
// how many blocks it freed.
func (p *Pool) Drain() int {
	before := p.frees
	for _, b := range p.boxes {
		if b.head.Load() == nil {
			continue
		}
		newest := b.head.Swap(nil)
		var oldest *node
		for n := newest; n != nil; {
			next := n.next
			n.next = oldest
			oldest, n = n, next
		}
		for n := oldest; n != nil; n = n.next {
			p.drained += uint64(len(n.handles))
			p.markHigh()
			freed := 0
			for _, h := range n.handles {
				if p.put(h) {
					freed++
				} else {
					p.rejected++
				}
			}
			p.frees += uint64(freed)
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

// Counts is the pool's accounting.
type Counts struct {
	Allocs, Frees, Submitted, Drained, Rejected uint64
}

// Counts returns the pool's accounting.
func (p *Pool) Counts() Counts {
	c := Counts{Allocs: p.frees + uint64(p.live()), Frees: p.frees, Drained: p.drained, Rejected: p.rejected}
	p.mu.Lock()
	for _, s := range p.senders {
		c.Submitted += s.submitted.Load()
	}
	p.mu.Unlock()
	return c
}

// Frees returns how many blocks went back to the free list.
func (p *Pool) Frees() uint64 { return p.frees }

// Close makes senders fail.
func (p *Pool) Close() { p.closed.Store(true) }
