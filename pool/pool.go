package pool

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/locus-go/locus/internal/ids"
	"github.com/locus-go/locus/internal/invariants"
	"github.com/locus-go/locus/internal/nocopy"
	"github.com/locus-go/locus/internal/owner"
	"github.com/locus-go/locus/internal/snapshot"
	"github.com/locus-go/locus/internal/sysmem"
	"github.com/locus-go/locus/internal/typednil"
)

// MaxBlocks is the largest capacity a pool accepts (2^30 blocks: 4 TiB of
// 4 KiB blocks). It keeps block indices, the free list's power-of-two ring
// and their products within an int on 32-bit platforms too.
const MaxBlocks = 1 << 30

// Pool is a pool of fixed-size blocks composed of a backing B (the memory), a
// transport T (how blocks freed on other goroutines come back) and a reuse
// policy P (which free block is handed out next).
//
// A Pool has one owner goroutine: Alloc, AllocBytes, AllocChunk, Free,
// FreeChunk, Bytes, Drain, Stats and Close must be called by one goroutine
// at a time (or with external synchronization). Other goroutines free blocks
// through their own Sender, made by NewSender, which is safe to call from any
// goroutine, and read the accounting with Snapshot. Remotely freed blocks
// return to the free list only when the owner drains: explicitly, with Drain
// (once per scheduling step, off the allocation path), or implicitly, when
// an allocation finds the free list short.
//
// Every handle passed in is validated against the block's generation: a stale,
// double-freed, foreign, zero or out-of-range handle is rejected with an error
// (see ErrInvalidHandle) and changes nothing but the Rejected count. A block is
// never handed out twice while it is live.
//
// Use a Pool for many blocks of one size that one goroutine hands out and
// many goroutines give back, where a stale or double free must be an error
// rather than corruption: KV-cache blocks, I/O buffers of a fixed size.
// Do not use it for objects of many sizes (classes, pages), for blocks
// shared between sequences (kv counts references over a Pool), or when
// every goroutine allocates as much as it frees and a stale handle cannot
// happen: sync.Pool is simpler there.
//
// The zero Pool and a nil *Pool are not usable (their calls fail with an
// error matching ErrClosed); build one with New. A Pool must not be copied.
type Pool[B Backing, T Transport, P ReusePolicy] struct {
	_ nocopy.NoCopy
	c core
	b B
	t T
	p P

	senders senders
	final   Stats // Stats as they stood at Close
}

// core is the pool's per-block machinery, written without type parameters so
// that every per-block step compiles to direct, inlinable code.
type core struct {
	id     uint32 // 0 in a zero Pool, which is never usable
	fifo   bool
	closed bool
	size   int

	blocks [][]byte
	gens   []uint64 // per block; odd while allocated
	free   ring

	frees    uint64 // Allocs is frees + live: take needs no counter of its own
	drained  uint64
	rejected uint64
	hwm      int

	drains     uint64
	drainSizes [DrainBuckets]uint64

	// The first handle rejected by drains since the last report, kept
	// without allocating until Drain builds the error.
	rejN     int
	rejFirst Handle
	rejErr   error

	sink Sink

	// pub is the accounting as the owner last published it, for Snapshot.
	pub snapshot.Cell[Stats]
}

// poolIDs numbers the pools, so that a handle names its pool (ids.Source
// says when one could repeat).
var poolIDs ids.Source

// errZeroPool and errNilPool are what every call of a zero Pool and of a
// nil *Pool returns.
var (
	errZeroPool = fmt.Errorf("%w: zero Pool; make it with pool.New", ErrClosed)
	errNilPool  = fmt.Errorf("%w: nil *Pool", ErrClosed)
)

// metaBytesPerBlock is what the pool itself keeps per block: the slice
// header of its memory, its generation and up to two free-list slots.
const metaBytesPerBlock = 24 + 8 + 8

// CheckBlocks returns nil if a pool of n blocks can be built: n is 1 to
// MaxBlocks and the pool's own metadata for them fits this process's
// memory. Otherwise the error wraps ErrInvalidConfig and names the limit.
// New checks it; a constructor that makes a backing calls it first, so that
// a size no pool would accept is refused before any memory is taken.
func CheckBlocks(n int) error {
	if n <= 0 || n > MaxBlocks {
		return fmt.Errorf("%w: %d blocks, want 1 to %d", ErrInvalidConfig, n, MaxBlocks)
	}
	if err := sysmem.Fits(uint64(n) * metaBytesPerBlock); err != nil {
		return fmt.Errorf("%w: metadata of %d blocks: %v", ErrInvalidConfig, n, err)
	}
	return nil
}

// New composes a pool from a backing, a transport and a reuse policy. Callers
// never write the type arguments; they are inferred:
//
//	p, err := pool.New(b, mailbox.New(), lifo.Policy{})
//
// The pool takes ownership of b and t and releases them in Close: a
// component belongs to one pool (two pools sharing a transport would each
// reject the other's frees as foreign). New fails
// with an error wrapping ErrInvalidConfig if a component is nil (a nil
// interface or a typed nil pointer), the policy's order is invalid, or the
// backing's blocks are empty, of unequal sizes, too many (see MaxBlocks) or
// have spare capacity; then b and t are still the caller's.
func New[B Backing, T Transport, P ReusePolicy](b B, t T, p P) (*Pool[B, T, P], error) {
	for _, c := range []struct {
		what string
		v    any
	}{{"backing", b}, {"transport", t}, {"policy", p}} {
		if typednil.Is(c.v) {
			return nil, fmt.Errorf("%w: nil %s", ErrInvalidConfig, c.what)
		}
	}
	order := p.Order()
	if !order.Valid() {
		return nil, fmt.Errorf("%w: policy order %v", ErrInvalidConfig, order)
	}
	n := b.Len()
	if err := CheckBlocks(n); err != nil {
		return nil, err
	}
	size := len(b.Block(0))
	blocks := make([][]byte, n)
	for i := range blocks {
		blk := b.Block(i)
		if len(blk) == 0 || len(blk) != size || cap(blk) != len(blk) {
			return nil, fmt.Errorf("%w: backing block %d has len %d cap %d, want len = cap = %d > 0",
				ErrInvalidConfig, i, len(blk), cap(blk), size)
		}
		blocks[i] = blk
	}
	pl := &Pool[B, T, P]{b: b, t: t, p: p}
	if err := pl.claim(); err != nil {
		return nil, err
	}
	c := &pl.c
	c.id = poolIDs.Next()
	c.fifo = order == FIFO
	c.size = size
	c.blocks = blocks
	c.gens = make([]uint64, n)
	c.free = newRing(n)
	// The initial layout: [n-1, ..., 1, 0] from front to back, so LIFO
	// hands out 0, 1, 2, ... and FIFO n-1, n-2, ...
	for i := n - 1; i >= 0; i-- {
		c.free.pushBack(uint32(i))
	}
	c.sink.c = c
	c.pub.Init(pl.stats())
	return pl, nil
}

// Alloc hands out a free block. If none is free it first drains pending remote
// frees (counting them in Stats like any drain); if still none is free it
// returns ErrExhausted. It never waits.
func (p *Pool[B, T, P]) Alloc() (Handle, error) {
	if p != nil && p.c.free.len() > 0 {
		return p.c.take(), nil
	}
	return p.allocSlow()
}

func (p *Pool[B, T, P]) allocSlow() (Handle, error) {
	if p == nil {
		return Handle{}, errNilPool
	}
	if err := p.refill(1); err != nil {
		return Handle{}, err
	}
	return p.c.take(), nil
}

// refill makes sure n blocks are free, draining while the free list is short
// and drains still bring handles back: a bounded transport hands over at most
// a batch per queue per drain, and rejected handles (double frees) may be
// queued ahead of good ones.
func (p *Pool[B, T, P]) refill(n int) error {
	if err := p.c.usable(); err != nil {
		return err
	}
	if p.c.free.len() >= n {
		return nil
	}
	// Every drain that does not end the loop takes at least one handle. The
	// budget is the handles pending when the refill started (submitted by
	// senders, not yet drained) plus the pool's size for handles sent
	// meanwhile or by producers the pool did not make, so the loop ends even
	// when producers keep sending.
	budget := uint64(len(p.c.gens))
	if sub := p.senders.submitted(); sub > p.c.drained {
		budget += sub - p.c.drained
	}
	for p.c.free.len() < n {
		got := p.drainOnce()
		if got == 0 || got >= budget {
			break
		}
		budget -= got
	}
	if p.c.free.len() >= n {
		return nil
	}
	return ErrExhausted
}

// drainOnce drains the transport once and returns how many handles it took.
func (p *Pool[B, T, P]) drainOnce() uint64 {
	before := p.c.drained
	p.t.Drain(&p.c.sink)
	got := p.c.drained - before
	p.c.drains++
	p.c.drainSizes[drainBucket(got)]++
	return got
}

// AllocBytes is Alloc that also returns the block's memory, as Bytes would,
// without validating the handle a second time: allocate and fill a block in
// one call.
func (p *Pool[B, T, P]) AllocBytes() (Handle, []byte, error) {
	if p == nil {
		return Handle{}, nil, errNilPool
	}
	if p.c.free.len() == 0 {
		if err := p.refill(1); err != nil {
			return Handle{}, nil, err
		}
	}
	h := p.c.take()
	return h, p.c.blocks[h.idx], nil
}

// AllocChunk fills dst with newly allocated blocks, all or nothing: if fewer
// than len(dst) blocks are free even after draining until no more remote
// frees arrive, it allocates none and returns ErrExhausted. An empty dst
// allocates nothing and returns nil (ErrClosed on a closed pool).
func (p *Pool[B, T, P]) AllocChunk(dst []Handle) error {
	if p == nil {
		return errNilPool
	}
	if p.c.free.len() < len(dst) || len(dst) == 0 {
		if err := p.refill(len(dst)); err != nil {
			return err
		}
	}
	for i := range dst {
		dst[i] = p.c.take()
	}
	return nil
}

// Free returns a block to the free list. A bad handle gets one of the handle
// errors (errors.Is(err, ErrInvalidHandle)) and changes nothing else.
func (p *Pool[B, T, P]) Free(h Handle) error {
	if p == nil {
		return errNilPool
	}
	return p.c.freeOne(h)
}

// FreeChunk frees every handle of chunk. Bad handles are skipped, counted and
// reported in a *RejectedError; the good ones are freed.
func (p *Pool[B, T, P]) FreeChunk(chunk []Handle) error {
	if p == nil {
		return errNilPool
	}
	if err := p.c.usable(); err != nil {
		return err
	}
	var first Handle
	var firstErr error
	bad := 0
	p.c.markHigh()
	for _, h := range chunk {
		if p.c.put(h) {
			p.c.frees++
			continue
		}
		if err := p.c.reject(h); bad == 0 {
			first, firstErr = h, err
		}
		bad++
	}
	if bad > 0 {
		return &RejectedError{Rejected: bad, First: first, Err: firstErr}
	}
	return nil
}

// Bytes returns the memory of a live block: BlockSize bytes, with no spare
// capacity. The slice stays valid until the pool is closed, but the block
// belongs to the caller only until it is freed.
func (p *Pool[B, T, P]) Bytes(h Handle) ([]byte, error) {
	if p == nil {
		return nil, errNilPool
	}
	if p.c.valid(h) {
		return p.c.blocks[h.idx], nil
	}
	return nil, p.c.reject(h)
}

// Drain moves pending remote frees back onto the free list and returns how
// many blocks it freed; call it once per scheduling step. It takes every
// chunk published before it started, except that a bounded transport
// (BoundedTransport) hands over at most Bounds().Batch items per queue per
// Drain: call Drain again while it returns more to empty such a transport.
// Allocations that find the free list short drain as often as that takes.
//
// Handles that fail validation (here or in a drain done by an earlier
// allocation) are counted in Stats.Rejected and reported in a
// *RejectedError; the good handles beside them are freed all the same.
// Drain also publishes the accounting when a Snapshot asked for it.
func (p *Pool[B, T, P]) Drain() (int, error) {
	if p == nil {
		return 0, errNilPool
	}
	if err := p.c.usable(); err != nil {
		return 0, err
	}
	before := p.c.frees
	p.drainOnce()
	if p.c.pub.Wanted() {
		p.Stats() // publishes
	}
	return int(p.c.frees - before), p.c.report()
}

// Senders returns how many senders are open: made by NewSender and not yet
// closed. Each holds an endpoint of the transport that every Drain visits,
// so a count that only grows means senders that are never closed (a
// million cost hundreds of MiB and milliseconds per Drain). Safe to call
// from any goroutine; 0 for a nil, zero or closed pool.
func (p *Pool[B, T, P]) Senders() int {
	if p == nil || p.c.id == 0 || p.senders.closed.Load() {
		return 0
	}
	p.senders.mu.Lock()
	defer p.senders.mu.Unlock()
	return len(p.senders.live)
}

// NewSender returns a Sender for one producer goroutine. Senders are cheap,
// but each holds an endpoint of the transport until it is closed: make one
// per worker goroutine, or one per request and Close it when done (Senders
// counts the open ones).
func (p *Pool[B, T, P]) NewSender() (*Sender, error) {
	if p == nil {
		return nil, errNilPool
	}
	if p.c.id == 0 {
		return nil, errZeroPool
	}
	if p.senders.closed.Load() {
		return nil, ErrClosed
	}
	prod, err := p.t.NewProducer()
	if err != nil {
		return nil, err
	}
	if typednil.Is(prod) {
		return nil, fmt.Errorf("%w: transport returned a nil producer", ErrInvalidConfig)
	}
	s := &Sender{prod: prod, set: &p.senders}
	s.try, _ = prod.(TryProducer)
	p.senders.add(s)
	return s, nil
}

// Stats returns the pool's accounting as it is now; after Close, as it stood
// at Close. Only the owner may call it, like every other Pool method but
// Snapshot; it also publishes what it returns for Snapshot.
func (p *Pool[B, T, P]) Stats() Stats {
	if p == nil {
		return Stats{}
	}
	st := p.stats()
	if p.c.id != 0 && !p.c.closed {
		p.c.pub.Publish(st)
	}
	return st
}

// stats computes Stats without publishing.
func (p *Pool[B, T, P]) stats() Stats {
	c := &p.c
	if c.closed {
		return p.final
	}
	c.markHigh()
	order := LIFO
	if c.fifo {
		order = FIFO
	}
	st := Stats{
		BlockSize:     c.size,
		Capacity:      len(c.gens),
		Order:         order,
		Free:          c.free.len(),
		HighWater:     c.hwm,
		Allocs:        c.frees + uint64(c.live()),
		Frees:         c.frees,
		RemoteDrained: c.drained,
		Rejected:      c.rejected,
		Drains:        c.drains,
		DrainSizes:    c.drainSizes,
	}
	st.Live = c.live()
	if c.id != 0 {
		st.RemoteSubmitted = p.senders.submitted()
	}
	return st
}

// Snapshot returns the pool's accounting as the owner publishes it, for any
// goroutine (a metrics scraper, say), concurrently with the owner.
//
// The owner publishes at Stats and Close, and at a Drain when a Snapshot has
// asked since the last publication; a Drain that nobody asked costs one
// atomic load more. So Snapshot returns a value published in the last
// millisecond at once; otherwise it asks and waits for the owner's next
// Drain, up to 100 ms, and then returns the latest value, which from an idle
// owner is what it last published. After Close it returns the final counts
// at once. RemoteSubmitted is read at the call, so a snapshot may count
// submissions its drains do not show yet, never the reverse; every other
// count is as published, and the identities of Stats hold within one
// snapshot. The owner itself reads its accounting with Stats: a Snapshot on
// the owner's goroutine cannot be served by a Drain, so unless the owner
// published in the last millisecond it waits the full 100 ms.
func (p *Pool[B, T, P]) Snapshot() Stats {
	if p == nil || p.c.id == 0 {
		return Stats{}
	}
	st := p.c.pub.Get()
	st.RemoteSubmitted = max(st.RemoteSubmitted, p.senders.submitted())
	return st
}

// BlockSize returns the size of every block in bytes.
func (p *Pool[B, T, P]) BlockSize() int {
	if p == nil {
		return 0
	}
	return p.c.size
}

// Live returns how many blocks are allocated and not yet back on the free
// list (frees still in a transport count as live until a Drain). Unlike
// Stats it publishes nothing to Snapshot readers; owner goroutine only. It
// returns 0 for a nil, zero or closed pool.
func (p *Pool[B, T, P]) Live() int {
	if p == nil || p.c.usable() != nil {
		return 0
	}
	return p.c.live()
}

// Capacity returns the number of blocks in the pool; 0 after Close.
func (p *Pool[B, T, P]) Capacity() int {
	if p == nil {
		return 0
	}
	return len(p.c.gens)
}

// Backing returns the pool's backing.
func (p *Pool[B, T, P]) Backing() B {
	if p == nil {
		var zero B
		return zero
	}
	return p.b
}

// Transport returns the pool's transport.
func (p *Pool[B, T, P]) Transport() T {
	if p == nil {
		var zero T
		return zero
	}
	return p.t
}

// Policy returns the pool's reuse policy.
func (p *Pool[B, T, P]) Policy() P {
	if p == nil {
		var zero P
		return zero
	}
	return p.p
}

// Close closes the transport and the backing. Later calls of every method,
// Close included, return ErrClosed, and so do the pool's senders. Slices
// returned by Bytes must not be used after Close.
func (p *Pool[B, T, P]) Close() error {
	if p == nil {
		return errNilPool
	}
	if err := p.c.usable(); err != nil {
		return err
	}
	c := &p.c
	p.senders.closed.Store(true) // senders stop first, so final counts hold still
	p.final = p.stats()
	c.pub.Seal(p.final)
	c.closed = true
	// Dropping the metadata makes every handle fail validation (index out
	// of range), which reject turns into ErrClosed: the hot path needs no
	// closed check of its own.
	c.blocks, c.gens, c.free = nil, nil, ring{}
	p.release()
	return errors.Join(p.t.Close(), p.b.Close())
}

// Every backing's memory and every transport belongs to one live pool: two
// pools over the same region would hand out the same bytes twice, and two
// over one transport would take each other's frees. regions is keyed by
// the address of block 0, transports by the transport's pointer.
var regions, transports owner.Registry

// claim makes p the owner of its backing's memory and its transport (when
// the transport is a pointer), or says which one another open pool holds.
func (p *Pool[B, T, P]) claim() error {
	mem := reflect.ValueOf(p.b.Block(0)).Pointer()
	if err := owner.Claim(&regions, mem, p); err != nil {
		return fmt.Errorf("%w: the backing's memory is %v by another open pool", ErrInvalidConfig, err)
	}
	if t := reflect.ValueOf(p.t); t.Kind() == reflect.Pointer {
		if err := owner.Claim(&transports, t.Pointer(), p); err != nil {
			owner.Release(&regions, mem, p)
			return fmt.Errorf("%w: the transport is %v by another open pool", ErrInvalidConfig, err)
		}
	}
	return nil
}

// release gives up what claim took; Close calls it before it closes the
// components.
func (p *Pool[B, T, P]) release() {
	if blk := p.b.Block(0); len(blk) > 0 {
		owner.Release(&regions, reflect.ValueOf(blk).Pointer(), p)
	}
	if t := reflect.ValueOf(p.t); t.Kind() == reflect.Pointer {
		owner.Release(&transports, t.Pointer(), p)
	}
}

// usable returns the error of a pool that may not be used: ErrClosed once
// closed, and for a zero Pool.
func (c *core) usable() error {
	switch {
	case c.id == 0:
		return errZeroPool
	case c.closed:
		return ErrClosed
	}
	return nil
}

// freeOne is Free's body, kept out of line so that Free itself inlines: a
// layer over the pool (classes) then pays one call per free, not two.
//
//go:noinline
func (c *core) freeOne(h Handle) error {
	c.markHigh()
	if c.put(h) {
		c.frees++
		return nil
	}
	return c.reject(h)
}

// take pops a free block; the free list must not be empty.
func (c *core) take() Handle {
	i := c.free.pop(c.fifo)
	g := c.gens[i] + 1
	c.gens[i] = g
	return Handle{gen: g, idx: i, pool: c.id}
}

// live returns how many blocks are allocated: every block is either on the
// free list or live.
func (c *core) live() int { return len(c.gens) - c.free.len() }

// markHigh records the live count in the high-water mark. Live grows only in
// take and shrinks only in put, so its peak is always seen by calling
// markHigh before every put and in Stats; take stays small enough to inline.
func (c *core) markHigh() {
	if live := c.live(); live > c.hwm {
		c.hwm = live
	}
}

// valid reports whether h names a live block of this pool. A handle is live
// iff its generation equals the block's and is odd: the odd test stops a
// forged even generation from matching a free block. The range test is
// written on uint so that the compiler drops the bounds check of gens[h.idx]
// on every architecture (an int conversion would keep it on 32-bit ones,
// where a forged index of 2^31 or more turns negative).
func (c *core) valid(h Handle) bool {
	return h.pool == c.id && uint(h.idx) < uint(len(c.gens)) && c.gens[h.idx] == h.gen && h.gen&1 == 1
}

// put frees h if it is live and reports whether it did. The caller counts.
func (c *core) put(h Handle) bool {
	if !c.valid(h) {
		return false
	}
	c.gens[h.idx] = h.gen + 1
	if invariants.Enabled {
		invariants.Poison(c.blocks[h.idx])
	}
	c.free.pushBack(h.idx)
	return true
}

// reject counts a refused handle and says why it was refused.
func (c *core) reject(h Handle) error {
	if err := c.usable(); err != nil {
		return err
	}
	c.rejected++
	switch {
	case h.IsZero():
		return ErrZeroHandle
	case h.pool != c.id:
		return ErrForeignHandle
	case uint(h.idx) >= uint(len(c.gens)):
		return ErrOutOfRange
	}
	return ErrStaleHandle
}

// release is the pool's Sink: it frees a drained chunk.
func (c *core) release(chunk []Handle) {
	c.drained += uint64(len(chunk))
	c.markHigh()
	freed := 0 // counted here, not in c.frees, so the loop keeps it in a register
	for _, h := range chunk {
		if c.put(h) {
			freed++
			continue
		}
		if err := c.reject(h); c.rejN == 0 {
			c.rejFirst, c.rejErr = h, err
		}
		c.rejN++
	}
	c.frees += uint64(freed)
}

// report returns and forgets the drains' rejections.
func (c *core) report() error {
	if c.rejN == 0 {
		return nil
	}
	err := &RejectedError{Rejected: c.rejN, First: c.rejFirst, Err: c.rejErr}
	c.rejN, c.rejFirst, c.rejErr = 0, Handle{}, nil
	return err
}
