package conformance

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
	"github.com/locus-go/locus/transport/sharded"
)

// Deliberately broken pools: real pools wrapped to break one contract, and
// one written from scratch (noGenPool).

// realPool builds a heap pool of 128 blocks over tr with LIFO reuse.
func realPool(tr pool.Transport) (subject, error) {
	b, err := heap.New(64, 128)
	if err != nil {
		return nil, err
	}
	p, err := pool.New(b, tr, lifo.Policy{})
	if err != nil {
		return nil, err
	}
	return poolSubject[*heap.Backing, pool.Transport, lifo.Policy]{p}, nil
}

func mailboxPool() (subject, error) { return realPool(mailbox.New()) }

func tinyShardedPool() (subject, error) {
	tr, err := sharded.New(sharded.WithCapacity(4), sharded.WithBatch(2))
	if err != nil {
		return nil, err
	}
	return realPool(tr)
}

// wrapped builds broken pools from real ones.
func wrapped(base func() (subject, error), wrap func(subject) subject) func() (subject, error) {
	return func() (subject, error) {
		s, err := base()
		if err != nil {
			return nil, err
		}
		return wrap(s), nil
	}
}

// mislabeled is a real FIFO pool that claims to be LIFO.
type mislabeled struct{ subject }

func (mislabeled) order() pool.Order { return pool.LIFO }

// lazyPool's allocations never drain: a short free list is exhaustion.
type lazyPool struct{ subject }

// open returns what a closed pool's calls return: the wrappers below must
// not hide it.
func open(s subject) error { return s.AllocChunk(nil) }

func (p lazyPool) Alloc() (pool.Handle, error) {
	if err := open(p.subject); err != nil {
		return pool.Handle{}, err
	}
	if p.Stats().Free == 0 {
		return pool.Handle{}, pool.ErrExhausted
	}
	return p.subject.Alloc()
}

func (p lazyPool) AllocBytes() (pool.Handle, []byte, error) {
	if err := open(p.subject); err != nil {
		return pool.Handle{}, nil, err
	}
	if p.Stats().Free == 0 {
		return pool.Handle{}, nil, pool.ErrExhausted
	}
	return p.subject.AllocBytes()
}

func (p lazyPool) AllocChunk(dst []pool.Handle) error {
	if err := open(p.subject); err != nil {
		return err
	}
	if p.Stats().Free < len(dst) {
		return pool.ErrExhausted
	}
	return p.subject.AllocChunk(dst)
}

// oneDrainPool's allocations drain once at most: a bounded transport that
// hands over a batch per drain leaves them short.
type oneDrainPool struct{ subject }

func (p oneDrainPool) short(n int) bool {
	if open(p.subject) != nil || p.Stats().Free >= n {
		return false
	}
	_, _ = p.subject.Drain()
	return p.Stats().Free < n
}

func (p oneDrainPool) Alloc() (pool.Handle, error) {
	if p.short(1) {
		return pool.Handle{}, pool.ErrExhausted
	}
	return p.subject.Alloc()
}

func (p oneDrainPool) AllocBytes() (pool.Handle, []byte, error) {
	if p.short(1) {
		return pool.Handle{}, nil, pool.ErrExhausted
	}
	return p.subject.AllocBytes()
}

func (p oneDrainPool) AllocChunk(dst []pool.Handle) error {
	if len(dst) > 0 && p.short(len(dst)) {
		return pool.ErrExhausted
	}
	return p.subject.AllocChunk(dst)
}

// zombiePool's senders ignore Close.
type zombiePool struct{ subject }

type zombieSender struct{ sender }

func (zombieSender) Close() error { return nil }

func (p zombiePool) NewSender() (sender, error) {
	snd, err := p.subject.NewSender()
	if err != nil {
		return nil, err
	}
	return zombieSender{snd}, nil
}

// keeperPool remembers every sender it made, retired or not.
type keeperPool struct {
	subject
	mu   *sync.Mutex
	keep *[]sender
}

func (p keeperPool) NewSender() (sender, error) {
	snd, err := p.subject.NewSender()
	if err == nil {
		p.mu.Lock()
		*p.keep = append(*p.keep, snd)
		p.mu.Unlock()
	}
	return snd, err
}

// tornPool's Snapshot mixes two publications: Free is from the one before.
type tornPool struct {
	subject
	mu   *sync.Mutex
	last *pool.Stats
	free *int
}

func (p tornPool) Snapshot() pool.Stats {
	st := p.subject.Snapshot()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last.Capacity == 0 {
		*p.last, *p.free = st, st.Free
	}
	if st != *p.last {
		*p.free, *p.last = p.last.Free, st
	}
	st.Free = *p.free
	return st
}

// statsOnlyPool's Snapshot is refreshed only by Stats: a scraper of an
// owner that only drains stays stale.
type statsOnlyPool struct {
	subject
	mu   *sync.Mutex
	last *pool.Stats
}

func (p statsOnlyPool) Stats() pool.Stats {
	st := p.subject.Stats()
	p.mu.Lock()
	*p.last = st
	p.mu.Unlock()
	return st
}

func (p statsOnlyPool) Snapshot() pool.Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last.Capacity == 0 {
		*p.last = p.subject.Stats() // the owner's first publication
	}
	return *p.last
}

// allocPool's Alloc allocates on every 100th call.
type allocPool struct {
	subject
	n       *int
	garbage *[]byte
}

func (p allocPool) Alloc() (pool.Handle, error) {
	if *p.n++; *p.n%100 == 0 {
		*p.garbage = make([]byte, 32+*p.n%5)
	}
	return p.subject.Alloc()
}

// leakyClosePool's senders still send chunks longer than 8 after Close.
type leakyClosePool struct {
	subject
	closed *bool
}

type leakySender struct {
	sender
	closed *bool
}

func (p leakyClosePool) Close() error {
	*p.closed = true
	return p.subject.Close()
}

func (p leakyClosePool) NewSender() (sender, error) {
	snd, err := p.subject.NewSender()
	if err != nil {
		return nil, err
	}
	return leakySender{snd, p.closed}, nil
}

func (s leakySender) FreeChunk(c []pool.Handle) error {
	if *s.closed && len(c) > 8 {
		return nil
	}
	return s.sender.FreeChunk(c)
}

// tryLiarPool's senders report every TryFreeChunk as complete.
type tryLiarPool struct{ subject }

type tryLiar struct{ sender }

func (s tryLiar) TryFreeChunk(c []pool.Handle) (int, error) {
	n, err := s.sender.TryFreeChunk(c)
	if errors.Is(err, pool.ErrFull) {
		return len(c), nil
	}
	return n, err
}

func (p tryLiarPool) NewSender() (sender, error) {
	snd, err := p.subject.NewSender()
	if err != nil {
		return nil, err
	}
	return tryLiar{snd}, nil
}

// histogramPool's Stats leave drains that took nothing out of the drain
// histogram.
type histogramPool struct{ subject }

func (p histogramPool) Stats() pool.Stats {
	st := p.subject.Stats()
	st.DrainSizes[0] = 0
	return st
}

// oneIDPool gives every pool the same id: handles of one pool pass for
// another's.
type oneIDPool struct {
	subject
	id  *uint32 // the real id, learned from the first handle
	buf *[]pool.Handle
}

const sharedID = 42

func (p oneIDPool) out(h pool.Handle) pool.Handle {
	if *p.id == 0 {
		*p.id = poolID(h)
	}
	return mkHandle(sharedID, uint32(h.Index()), h.Generation())
}

func (p oneIDPool) in(h pool.Handle) pool.Handle {
	if poolID(h) == sharedID && *p.id != 0 {
		return mkHandle(*p.id, uint32(h.Index()), h.Generation())
	}
	return h
}

func (p oneIDPool) ins(c []pool.Handle) []pool.Handle {
	*p.buf = (*p.buf)[:0]
	for _, h := range c {
		*p.buf = append(*p.buf, p.in(h))
	}
	return *p.buf
}

func (p oneIDPool) Alloc() (pool.Handle, error) {
	h, err := p.subject.Alloc()
	if err != nil {
		return h, err
	}
	return p.out(h), nil
}

func (p oneIDPool) AllocBytes() (pool.Handle, []byte, error) {
	h, b, err := p.subject.AllocBytes()
	if err != nil {
		return h, b, err
	}
	return p.out(h), b, nil
}

func (p oneIDPool) AllocChunk(dst []pool.Handle) error {
	if err := p.subject.AllocChunk(dst); err != nil {
		return err
	}
	for i, h := range dst {
		dst[i] = p.out(h)
	}
	return nil
}

func (p oneIDPool) Free(h pool.Handle) error            { return p.subject.Free(p.in(h)) }
func (p oneIDPool) FreeChunk(c []pool.Handle) error     { return p.subject.FreeChunk(p.ins(c)) }
func (p oneIDPool) Bytes(h pool.Handle) ([]byte, error) { return p.subject.Bytes(p.in(h)) }

func (p oneIDPool) NewSender() (sender, error) {
	snd, err := p.subject.NewSender()
	if err != nil {
		return nil, err
	}
	return &oneIDSender{sender: snd, p: p}, nil
}

type oneIDSender struct {
	sender
	p   oneIDPool
	buf []pool.Handle
}

func (s *oneIDSender) conv(c []pool.Handle) []pool.Handle {
	s.buf = s.buf[:0]
	for _, h := range c {
		s.buf = append(s.buf, s.p.in(h))
	}
	return s.buf
}

func (s *oneIDSender) FreeChunk(c []pool.Handle) error { return s.sender.FreeChunk(s.conv(c)) }
func (s *oneIDSender) Free(h pool.Handle) error        { return s.sender.Free(s.p.in(h)) }
func (s *oneIDSender) TryFreeChunk(c []pool.Handle) (int, error) {
	return s.sender.TryFreeChunk(s.conv(c))
}

// noGenPool is a pool that ignores generations: a handle is good while its
// block is allocated, whoever it was allocated to.
type noGenPool struct {
	mu     sync.Mutex // its sender is itself, used from other goroutines
	blocks [][]byte
	free   []int
	used   []bool
	stats  pool.Stats
	closed bool
}

func newNoGenPool() *noGenPool {
	p := &noGenPool{blocks: make([][]byte, 64), used: make([]bool, 64)}
	for i := range p.blocks {
		p.blocks[i] = make([]byte, 64)
	}
	for i := 63; i >= 0; i-- {
		p.free = append(p.free, i)
	}
	p.stats = pool.Stats{BlockSize: 64, Capacity: 64, Order: pool.LIFO, Free: 64}
	return p
}

func (p *noGenPool) handle(i int) pool.Handle { return mkHandle(99, uint32(i), 1) }
func (p *noGenPool) Alloc() (pool.Handle, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return pool.Handle{}, pool.ErrClosed
	}
	if len(p.free) == 0 {
		return pool.Handle{}, pool.ErrExhausted
	}
	i := p.free[len(p.free)-1]
	p.free = p.free[:len(p.free)-1]
	p.used[i] = true
	p.stats.Allocs++
	p.stats.Live++
	p.stats.Free--
	p.stats.HighWater = max(p.stats.HighWater, p.stats.Live)
	return p.handle(i), nil
}
func (p *noGenPool) AllocBytes() (pool.Handle, []byte, error) {
	h, err := p.Alloc()
	if err != nil {
		return h, nil, err
	}
	b, err := p.Bytes(h)
	return h, b, err
}
func (p *noGenPool) AllocChunk(dst []pool.Handle) error {
	p.mu.Lock()
	short := len(p.free) < len(dst)
	p.mu.Unlock()
	if short {
		return pool.ErrExhausted
	}
	for i := range dst {
		dst[i], _ = p.Alloc()
	}
	return nil
}
func (p *noGenPool) Free(h pool.Handle) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return pool.ErrClosed
	}
	i := h.Index()
	if h.IsZero() || i >= len(p.used) || !p.used[i] {
		p.stats.Rejected++
		return pool.ErrStaleHandle
	}
	p.used[i] = false
	p.free = append(p.free, i)
	p.stats.Frees++
	p.stats.Live--
	p.stats.Free++
	return nil
}
func (p *noGenPool) FreeChunk(c []pool.Handle) error {
	var err error
	for _, h := range c {
		err = errors.Join(err, p.Free(h))
	}
	return err
}
func (p *noGenPool) TryFreeChunk(c []pool.Handle) (int, error) { return len(c), p.FreeChunk(c) }
func (p *noGenPool) Bytes(h pool.Handle) ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i := h.Index(); i < len(p.used) && p.used[i] {
		return p.blocks[i], nil
	}
	return nil, pool.ErrStaleHandle
}
func (p *noGenPool) Drain() (int, error)         { return 0, nil }
func (p *noGenPool) NewSender() (sender, error)  { return p, nil }
func (p *noGenPool) Stats() pool.Stats           { p.mu.Lock(); defer p.mu.Unlock(); return p.stats }
func (p *noGenPool) Snapshot() pool.Stats        { return p.Stats() }
func (p *noGenPool) Submitted() uint64           { return 0 }
func (p *noGenPool) order() pool.Order           { return pool.LIFO }
func (p *noGenPool) Close() error                { p.mu.Lock(); p.closed = true; p.mu.Unlock(); return nil }
func (p *noGenPool) abort()                      {}
func (p *noGenPool) bounds() (pool.Bounds, bool) { return pool.Bounds{}, false }

// cappedTryPool's senders free at most 16 handles per TryFreeChunk, even
// on an unbounded transport, and report pool.ErrFull for the rest.
type cappedTryPool struct{ subject }

type cappedTry struct{ sender }

func (s cappedTry) TryFreeChunk(c []pool.Handle) (int, error) {
	if len(c) <= 16 {
		return s.sender.TryFreeChunk(c)
	}
	n, err := s.sender.TryFreeChunk(c[:16])
	if err == nil {
		err = pool.ErrFull
	}
	return n, err
}

func (p cappedTryPool) NewSender() (sender, error) {
	snd, err := p.subject.NewSender()
	if err != nil {
		return nil, err
	}
	return cappedTry{snd}, nil
}

// closeTwicePool's senders fail a second Close.
type closeTwicePool struct{ subject }

type closeTwiceSender struct {
	sender
	closed *bool
}

func (s closeTwiceSender) Close() error {
	if *s.closed {
		return errors.New("sender closed already")
	}
	*s.closed = true
	return s.sender.Close()
}

func (p closeTwicePool) NewSender() (sender, error) {
	snd, err := p.subject.NewSender()
	if err != nil {
		return nil, err
	}
	return closeTwiceSender{snd, new(bool)}, nil
}

// undercountPool's senders report one handle fewer once they have sent
// more than 200.
type undercountPool struct{ subject }

type undercounter struct{ sender }

func (s undercounter) Submitted() uint64 {
	if n := s.sender.Submitted(); n > 200 {
		return n - 1
	}
	return s.sender.Submitted()
}

func (p undercountPool) NewSender() (sender, error) {
	snd, err := p.subject.NewSender()
	if err != nil {
		return nil, err
	}
	return undercounter{snd}, nil
}

// remappedPool hands out mem[i] as the memory of block i: memory that
// other blocks, or other pools, may share.
type remappedPool struct {
	subject
	mem [][]byte
}

func (p remappedPool) Bytes(h pool.Handle) ([]byte, error) {
	if _, err := p.subject.Bytes(h); err != nil {
		return nil, err
	}
	return p.mem[h.Index()], nil
}

func (p remappedPool) AllocBytes() (pool.Handle, []byte, error) {
	h, _, err := p.subject.AllocBytes()
	if err != nil {
		return h, nil, err
	}
	return h, p.mem[h.Index()], nil
}

func blocks(n int) [][]byte {
	mem := make([][]byte, n)
	for i := range mem {
		mem[i] = make([]byte, 64)
	}
	return mem
}

// newSharedMemoryPools makes pools that all have the same memory.
func newSharedMemoryPools() func() (subject, error) {
	mem := blocks(128)
	return wrapped(mailboxPool, func(s subject) subject { return remappedPool{s, mem} })
}

// newPairedPools makes pools whose blocks 2k and 2k+1 share memory.
func newPairedPools() func() (subject, error) {
	return wrapped(mailboxPool, func(s subject) subject {
		mem := blocks(128)
		for i := 1; i < len(mem); i += 2 {
			mem[i] = mem[i-1]
		}
		return remappedPool{s, mem}
	})
}

// futureGenPool's Bytes accepts a handle whose generation is two ahead of
// the live one: a forged handle of the block's next allocation.
type futureGenPool struct{ subject }

func (p futureGenPool) Bytes(h pool.Handle) ([]byte, error) {
	b, err := p.subject.Bytes(h)
	if errors.Is(err, pool.ErrStaleHandle) && h.Generation() >= 2 {
		if b, err2 := p.subject.Bytes(mkHandle(poolID(h), uint32(h.Index()), h.Generation()-2)); err2 == nil {
			return b, nil
		}
	}
	return b, err
}

// silentPool's AllocBytes on an exhausted pool returns the zero handle and
// no error.
type silentPool struct{ subject }

func (p silentPool) AllocBytes() (pool.Handle, []byte, error) {
	h, b, err := p.subject.AllocBytes()
	if errors.Is(err, pool.ErrExhausted) {
		return pool.Handle{}, nil, nil
	}
	return h, b, err
}

// backingPool builds a pool of a mailbox and LIFO reuse over the backings
// newB makes.
func backingPool(newB func() (pool.Backing, error)) func() (subject, error) {
	return func() (subject, error) {
		b, err := newB()
		if err != nil {
			return nil, err
		}
		p, err := pool.New(b, mailbox.New(), lifo.Policy{})
		if err != nil {
			return nil, err
		}
		return poolSubject[pool.Backing, *mailbox.Transport, lifo.Policy]{p}, nil
	}
}

// refPools runs the pool suite over pools of refTransports with bounds bd
// and defect d.
func refPools(bd pool.Bounds, d defect) func() ([]outcome, func()) {
	return func() ([]outcome, func()) {
		ctor, free := newRef(bd, d)
		return poolSuite().lite().run(func() (subject, error) {
			tr, err := ctor()
			if err != nil {
				return nil, err
			}
			return realPool(tr)
		}, "broken_test.go"), free
	}
}

// handleMap rewrites the handles a mappedPool hands out, and maps back the
// ones it is given; in may be called from senders' goroutines.
type handleMap interface {
	out(h pool.Handle) pool.Handle
	in(h pool.Handle) pool.Handle
}

// mappedPool hands out handles as m writes them.
type mappedPool struct {
	subject
	m   handleMap
	buf *[]pool.Handle
}

func (p mappedPool) Alloc() (pool.Handle, error) {
	h, err := p.subject.Alloc()
	if err != nil {
		return h, err
	}
	return p.m.out(h), nil
}

func (p mappedPool) AllocBytes() (pool.Handle, []byte, error) {
	h, b, err := p.subject.AllocBytes()
	if err != nil {
		return h, b, err
	}
	return p.m.out(h), b, nil
}

func (p mappedPool) AllocChunk(dst []pool.Handle) error {
	if err := p.subject.AllocChunk(dst); err != nil {
		return err
	}
	for i, h := range dst {
		dst[i] = p.m.out(h)
	}
	return nil
}

func (p mappedPool) ins(c []pool.Handle) []pool.Handle {
	*p.buf = (*p.buf)[:0]
	for _, h := range c {
		*p.buf = append(*p.buf, p.m.in(h))
	}
	return *p.buf
}

func (p mappedPool) Free(h pool.Handle) error            { return p.subject.Free(p.m.in(h)) }
func (p mappedPool) FreeChunk(c []pool.Handle) error     { return p.subject.FreeChunk(p.ins(c)) }
func (p mappedPool) Bytes(h pool.Handle) ([]byte, error) { return p.subject.Bytes(p.m.in(h)) }

func (p mappedPool) NewSender() (sender, error) {
	snd, err := p.subject.NewSender()
	if err != nil {
		return nil, err
	}
	return &mappedSender{sender: snd, m: p.m}, nil
}

type mappedSender struct {
	sender
	m   handleMap
	buf []pool.Handle
}

func (s *mappedSender) conv(c []pool.Handle) []pool.Handle {
	s.buf = s.buf[:0]
	for _, h := range c {
		s.buf = append(s.buf, s.m.in(h))
	}
	return s.buf
}

func (s *mappedSender) FreeChunk(c []pool.Handle) error { return s.sender.FreeChunk(s.conv(c)) }
func (s *mappedSender) Free(h pool.Handle) error        { return s.sender.Free(s.m.in(h)) }
func (s *mappedSender) TryFreeChunk(c []pool.Handle) (int, error) {
	return s.sender.TryFreeChunk(s.conv(c))
}

// gen16 keeps generations in 16 bits: it hands out a block's handle with
// the low 16 bits of its generation, and takes any handle whose generation
// matches those bits for the block's latest.
type gen16 struct{ gens []atomic.Uint64 }

func (g *gen16) out(h pool.Handle) pool.Handle {
	g.gens[h.Index()].Store(h.Generation())
	return mkHandle(idOf(h), uint32(h.Index()), h.Generation()&(1<<16-1))
}

func (g *gen16) in(h pool.Handle) pool.Handle {
	if i := h.Index(); i < len(g.gens) {
		if cur := g.gens[i].Load(); cur != 0 && cur&(1<<16-1) == h.Generation() {
			return mkHandle(idOf(h), uint32(i), cur)
		}
	}
	return h
}

// recycledIDs gives each open pool a slot, and its handles the slot's id:
// a pool made after another was closed takes its slot, and its id.
type recycledIDs struct {
	slot uint32
	real atomic.Uint32 // the pool's own id, learned from its first handle
}

var poolSlots struct {
	sync.Mutex
	free []uint32
	next uint32
}

func (r *recycledIDs) virtual() uint32 { return 0x7e000000 | r.slot }

func (r *recycledIDs) out(h pool.Handle) pool.Handle {
	r.real.Store(idOf(h))
	return mkHandle(r.virtual(), uint32(h.Index()), h.Generation())
}

func (r *recycledIDs) in(h pool.Handle) pool.Handle {
	if id := r.real.Load(); id != 0 && idOf(h) == r.virtual() {
		return mkHandle(id, uint32(h.Index()), h.Generation())
	}
	return h
}

// recyclingPool gives its slot back at Close.
type recyclingPool struct {
	mappedPool
	ids    *recycledIDs
	closed *bool
}

func (p recyclingPool) Close() error {
	err := p.mappedPool.Close()
	if err == nil && !*p.closed {
		*p.closed = true
		poolSlots.Lock()
		poolSlots.free = append(poolSlots.free, p.ids.slot)
		poolSlots.Unlock()
	}
	return err
}

func newRecyclingPool(s subject) subject {
	ids := &recycledIDs{}
	poolSlots.Lock()
	if n := len(poolSlots.free); n > 0 {
		ids.slot, poolSlots.free = poolSlots.free[n-1], poolSlots.free[:n-1]
	} else {
		poolSlots.next++
		ids.slot = poolSlots.next
	}
	poolSlots.Unlock()
	return recyclingPool{mappedPool{s, ids, new([]pool.Handle)}, ids, new(bool)}
}

// outErr names the first handle of a rejection as the pool handed it out.
func (p recyclingPool) outErr(err error) error {
	if err == nil {
		return nil
	}
	var re *pool.RejectedError
	if !errors.As(err, &re) || idOf(re.First) != p.ids.real.Load() {
		return err
	}
	c := *re
	c.First = mkHandle(p.ids.virtual(), uint32(re.First.Index()), re.First.Generation())
	return &c
}

func (p recyclingPool) Drain() (int, error) {
	n, err := p.mappedPool.Drain()
	return n, p.outErr(err)
}

func (p recyclingPool) FreeChunk(c []pool.Handle) error {
	return p.outErr(p.mappedPool.FreeChunk(c))
}
