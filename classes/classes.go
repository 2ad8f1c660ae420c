package classes

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/internal/nocopy"
	"github.com/locus-go/locus/internal/snapshot"
	"github.com/locus-go/locus/internal/typednil"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
)

// Errors of this package; every other error is pool's. Match them with
// errors.Is.
var (
	// ErrUnknownClass: a handle's class index is not a class of this
	// allocator. It matches pool.ErrInvalidHandle.
	ErrUnknownClass error = &handleError{"classes: handle names no class of this allocator"}
	// ErrTooLarge: an allocation is larger than the largest class. It
	// matches pool.ErrInvalidArgument.
	ErrTooLarge = fmt.Errorf("classes: larger than the largest class: %w", pool.ErrInvalidArgument)
	// ErrInvalidSize: an allocation of 0 bytes or less. It matches
	// pool.ErrInvalidArgument.
	ErrInvalidSize = fmt.Errorf("classes: allocation size must be positive: %w", pool.ErrInvalidArgument)
)

type handleError struct{ msg string }

func (e *handleError) Error() string        { return e.msg }
func (e *handleError) Is(target error) bool { return target == pool.ErrInvalidHandle }

var (
	errZeroPool = fmt.Errorf("%w: zero classes.Pool; make it with classes.New", pool.ErrClosed)
	errNilPool  = fmt.Errorf("%w: nil *classes.Pool", pool.ErrClosed)
)

// DefaultPool is the type Default returns: every class a pool of Go-heap
// blocks with a chunk mailbox, reused last in, first out.
type DefaultPool = Pool[*heap.Backing, *mailbox.Transport, lifo.Policy]

// Pool is several fixed-size pools behind one allocator, one per size
// class: an allocation of n bytes takes a block of the smallest class whose
// blocks hold n bytes. Each class is a pool.Pool with the pool's guarantees:
// generation-checked handles, exact accounting, remote frees through
// senders drained by the owner.
//
// A Pool has one owner goroutine, as a pool.Pool does: every method but
// NewSender and Snapshot must be called by one goroutine at a time. Other
// goroutines free blocks of any class through their own Sender and read
// the accounting with Snapshot.
//
// The zero Pool is not usable (its calls fail with pool.ErrClosed); build
// one with New or Default. A Pool must not be copied.
type Pool[B pool.Backing, T pool.Transport, P pool.ReusePolicy] struct {
	_   nocopy.NoCopy
	cls []class[B, T, P] // ascending sizes

	rejected       uint64        // handles naming no class, refused by the owner
	remoteRejected atomic.Uint64 // and by senders
	closed         bool
	isClosed       atomic.Bool     // closed, for senders
	scratch        [][]pool.Handle // FreeChunk's per-class chunks

	// pub is the accounting as the owner last published it, for Snapshot:
	// every class at one moment.
	pub snapshot.Cell[Stats]
}

type class[B pool.Backing, T pool.Transport, P pool.ReusePolicy] struct {
	size      int
	blocks    int // as configured; the pool's capacity reads 0 once closed
	p         *pool.Pool[B, T, P]
	requested uint64
}

// New builds one pool per class with build, which returns the class's
// backing, transport and policy, and composes them into an allocator.
// Classes may come in any order; their sizes must differ. Class k of the
// Pool (in Handle.Class, Stats.Classes and Classes) is the k-th smallest.
//
// It fails with an error wrapping pool.ErrInvalidConfig if there are no
// classes or more than MaxClasses, if a size or block count is not
// positive, if two classes have the same size or if build is nil; and with
// build's or pool.New's error for a class. On failure it closes what it
// built, including the components build returned.
func New[B pool.Backing, T pool.Transport, P pool.ReusePolicy](classes []Class, build func(Class) (B, T, P, error)) (*Pool[B, T, P], error) {
	if len(classes) == 0 || len(classes) > MaxClasses || build == nil {
		return nil, fmt.Errorf("%w: %d classes (want 1 to %d) and a build function", pool.ErrInvalidConfig, len(classes), MaxClasses)
	}
	cs := slices.SortedFunc(slices.Values(classes), func(a, b Class) int { return cmp.Compare(a.Size, b.Size) })
	for k, cl := range cs {
		if cl.Size <= 0 || cl.Blocks <= 0 || (k > 0 && cs[k-1].Size == cl.Size) {
			return nil, fmt.Errorf("%w: class of %d blocks of %d bytes (sizes must be positive and distinct)", pool.ErrInvalidConfig, cl.Blocks, cl.Size)
		}
	}
	c := &Pool[B, T, P]{cls: make([]class[B, T, P], 0, len(cs)), scratch: make([][]pool.Handle, len(cs))}
	for _, cl := range cs {
		p, err := newClass(cl, build)
		if err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("classes: class of %d-byte blocks: %w", cl.Size, err)
		}
		c.cls = append(c.cls, class[B, T, P]{size: cl.Size, blocks: cl.Blocks, p: p})
	}
	c.pub.Init(c.stats().clone())
	return c, nil
}

func newClass[B pool.Backing, T pool.Transport, P pool.ReusePolicy](cl Class, build func(Class) (B, T, P, error)) (*pool.Pool[B, T, P], error) {
	b, t, pol, err := build(cl)
	if err == nil {
		var p *pool.Pool[B, T, P]
		if p, err = pool.New(b, t, pol); err == nil {
			if p.BlockSize() == cl.Size && p.Capacity() == cl.Blocks {
				return p, nil
			}
			err = fmt.Errorf("%w: build made %d blocks of %d bytes", pool.ErrInvalidConfig, p.Capacity(), p.BlockSize())
			return nil, errors.Join(err, p.Close())
		}
	}
	// The components are still ours: close the ones that exist.
	for _, c := range []any{b, t} {
		if cl, ok := c.(interface{ Close() error }); ok && !typednil.Is(c) {
			err = errors.Join(err, cl.Close())
		}
	}
	return nil, err
}

// Default builds an allocator whose classes are pools of zeroed Go-heap
// blocks (backing/heap), freed remotely through chunk mailboxes
// (transport/mailbox) and reused last in, first out (policy/lifo): the
// shipped pool design, once per class.
func Default(classes []Class) (*DefaultPool, error) {
	return New(classes, func(c Class) (*heap.Backing, *mailbox.Transport, lifo.Policy, error) {
		b, err := heap.New(c.Size, c.Blocks)
		return b, mailbox.New(), lifo.Policy{}, err
	})
}

// Alloc hands out a block of the smallest class whose blocks hold n bytes.
// If that class has no free block even after draining its remote frees, it
// returns pool.ErrExhausted: it does not fall back to a larger class (call
// AllocClass for that). A size of 0 or less fails with an error wrapping
// pool.ErrInvalidArgument, one above the largest class with ErrTooLarge.
func (c *Pool[B, T, P]) Alloc(n int) (Handle, error) {
	if c == nil {
		return Handle{}, errNilPool
	}
	k := 0
	for k < len(c.cls) && c.cls[k].size < n {
		k++
	}
	if k == len(c.cls) || n <= 0 {
		return Handle{}, c.refuse(n)
	}
	cl := &c.cls[k]
	h, err := cl.p.Alloc()
	if err != nil {
		return Handle{}, err
	}
	cl.requested += uint64(n)
	return Handle{block: h, class: uint32(k)}, nil
}

// refuse returns the error of an allocation of n bytes that no class takes,
// without a call, so that Alloc stays small enough to inline.
func (c *Pool[B, T, P]) refuse(n int) error {
	switch {
	case c.cls == nil:
		return errZeroPool
	case c.closed:
		return pool.ErrClosed
	case n <= 0:
		return ErrInvalidSize
	}
	return ErrTooLarge
}

// AllocBytes is Alloc that also returns the block's memory: the whole block
// of its class (at least n bytes), as Bytes would.
func (c *Pool[B, T, P]) AllocBytes(n int) (Handle, []byte, error) {
	if c == nil {
		return Handle{}, nil, errNilPool
	}
	for k := range c.cls {
		if cl := &c.cls[k]; n <= cl.size && n > 0 {
			h, buf, err := cl.p.AllocBytes()
			if err != nil {
				return Handle{}, nil, err
			}
			cl.requested += uint64(n)
			return Handle{block: h, class: uint32(k)}, buf, nil
		}
	}
	return Handle{}, nil, c.badSize(n)
}

// AllocClass hands out a block of class k for an allocation of n bytes,
// for a caller that chooses the class itself: to fall back to a larger
// class when the smallest one is exhausted, say. n counts in Requested; it
// must be 1 to the class's size.
func (c *Pool[B, T, P]) AllocClass(k, n int) (Handle, error) {
	if err := c.usable(); err != nil {
		return Handle{}, err
	}
	if k < 0 || k >= len(c.cls) || n <= 0 || n > c.cls[k].size {
		return Handle{}, fmt.Errorf("%w: %d bytes from class %d of %d", pool.ErrInvalidArgument, n, k, len(c.cls))
	}
	h, err := c.cls[k].p.Alloc()
	if err != nil {
		return Handle{}, err
	}
	c.cls[k].requested += uint64(n)
	return Handle{block: h, class: uint32(k)}, nil
}

func (c *Pool[B, T, P]) badSize(n int) error {
	if err := c.usable(); err != nil {
		return err
	}
	if n <= 0 {
		return fmt.Errorf("%w: allocation of %d bytes", pool.ErrInvalidArgument, n)
	}
	return ErrTooLarge
}

// Free returns a block to its class. A bad handle gets an error matching
// pool.ErrInvalidHandle and changes nothing else.
func (c *Pool[B, T, P]) Free(h Handle) error {
	if c == nil {
		return errNilPool
	}
	if h.class >= uint32(len(c.cls)) {
		return c.rejectClass()
	}
	return c.cls[h.class].p.Free(h.block)
}

// FreeChunk frees every handle of chunk, one pool.FreeChunk per class. Bad
// handles are skipped, counted and reported in a *pool.RejectedError (its
// First is the first refused block handle of the lowest class that refused
// one, or of a handle naming no class); the good ones are freed.
func (c *Pool[B, T, P]) FreeChunk(chunk []Handle) error {
	if err := c.usable(); err != nil {
		return err
	}
	rej := rejection{}
	for _, h := range chunk {
		if h.class < uint32(len(c.cls)) {
			c.scratch[h.class] = append(c.scratch[h.class], h.block)
		} else {
			rej.add(1, h.block, c.rejectClass())
		}
	}
	var other error
	for k, part := range c.scratch {
		if len(part) == 0 {
			continue
		}
		err := c.cls[k].p.FreeChunk(part)
		c.scratch[k] = part[:0]
		if re, ok := err.(*pool.RejectedError); ok { // pool.FreeChunk returns it unwrapped
			rej.add(re.Rejected, re.First, re.Err)
		} else if err != nil {
			other = errors.Join(other, err)
		}
	}
	if other != nil {
		return errors.Join(other, rej.err())
	}
	return rej.err()
}

// rejection collects the rejections of a chunk split over classes.
type rejection struct {
	n     int
	first pool.Handle
	why   error
}

func (r *rejection) add(n int, first pool.Handle, why error) {
	if r.n == 0 {
		r.first, r.why = first, why
	}
	r.n += n
}

func (r *rejection) err() error {
	if r.n == 0 {
		return nil
	}
	return &pool.RejectedError{Rejected: r.n, First: r.first, Err: r.why}
}

// Bytes returns the memory of a live block: the whole block of its class.
func (c *Pool[B, T, P]) Bytes(h Handle) ([]byte, error) {
	if c == nil {
		return nil, errNilPool
	}
	if h.class < uint32(len(c.cls)) {
		return c.cls[h.class].p.Bytes(h.block)
	}
	return nil, c.rejectClass()
}

// rejectClass counts a handle that names no class and says why.
func (c *Pool[B, T, P]) rejectClass() error {
	if c.cls == nil || c.closed {
		return c.usable()
	}
	c.rejected++
	return ErrUnknownClass
}

// Drain drains every class's remote frees (see pool.Pool.Drain) and returns
// how many blocks came back; call it once per scheduling step. Rejections
// of remotely freed handles are reported as pool.Drain reports them, joined
// over the classes. Drain also publishes the accounting when a Snapshot
// asked for it.
func (c *Pool[B, T, P]) Drain() (int, error) {
	if err := c.usable(); err != nil {
		return 0, err
	}
	total := 0
	var errs []error
	for k := range c.cls {
		n, err := c.cls[k].p.Drain()
		total += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	if c.pub.Wanted() {
		c.Stats() // publishes
	}
	return total, errors.Join(errs...)
}

// NewSender returns a Sender for one producer goroutine, covering every
// class: make one per worker goroutine, or one per request and Close it
// when done. It is safe to call from any goroutine.
func (c *Pool[B, T, P]) NewSender() (*Sender, error) {
	if c == nil {
		return nil, errNilPool
	}
	if c.cls == nil { // set once in New; closed is the owner's, so the pools report it
		return nil, errZeroPool
	}
	s := &Sender{per: make([]*pool.Sender, len(c.cls)), parts: make([][]pool.Handle, len(c.cls)),
		rejected: &c.remoteRejected, closed: &c.isClosed}
	for k := range c.cls {
		ps, err := c.cls[k].p.NewSender()
		if err != nil {
			s.per = s.per[:k]
			return nil, errors.Join(err, s.Close())
		}
		s.per[k] = ps
	}
	return s, nil
}

// Stats returns the accounting as it is now (after Close, as it stood at
// Close): one ClassStats per class, smallest first. Only the owner may call
// it; it also publishes what it returns for Snapshot.
func (c *Pool[B, T, P]) Stats() Stats {
	if c == nil {
		return Stats{}
	}
	st := c.stats()
	if c.cls != nil && !c.closed {
		c.pub.Publish(st.clone())
	}
	return st
}

func (c *Pool[B, T, P]) stats() Stats {
	st := Stats{Classes: make([]ClassStats, len(c.cls)), Rejected: c.rejected + c.remoteRejected.Load()}
	for k := range c.cls {
		st.Classes[k] = ClassStats{Stats: c.cls[k].p.Stats(), Requested: c.cls[k].requested}
	}
	return st
}

// Snapshot returns the accounting as the owner publishes it, every class at
// one moment, for any goroutine (a metrics scraper), concurrently with the
// owner. The owner publishes at New, Stats and Close, and at a Drain when a
// Snapshot has asked since the last publication; as pool.Pool.Snapshot,
// Snapshot returns a value published in the last millisecond at once, and
// otherwise waits for the owner's next Drain, up to 100 ms, and returns the
// latest value. After Close it returns the final counts at once.
func (c *Pool[B, T, P]) Snapshot() Stats {
	if c == nil || c.cls == nil {
		return Stats{}
	}
	return c.pub.Get().clone()
}

// Classes returns the classes, smallest first; Handle.Class indexes it.
func (c *Pool[B, T, P]) Classes() []Class {
	if c == nil {
		return nil
	}
	out := make([]Class, len(c.cls))
	for k, cl := range c.cls {
		out[k] = Class{Size: cl.size, Blocks: cl.blocks}
	}
	return out
}

// ClassOf returns the class an allocation of n bytes takes, or an error as
// Alloc would return it.
func (c *Pool[B, T, P]) ClassOf(n int) (int, error) {
	if c == nil {
		return 0, errNilPool
	}
	for k := range c.cls {
		if n <= c.cls[k].size && n > 0 {
			return k, nil
		}
	}
	return 0, c.badSize(n)
}

// Class returns the pool of class k, for what the allocator does not offer
// (its Backing, say). Allocating from it directly bypasses the allocator's
// Requested count; freeing through it is fine.
func (c *Pool[B, T, P]) Class(k int) (*pool.Pool[B, T, P], error) {
	if c == nil {
		return nil, errNilPool
	}
	if k < 0 || k >= len(c.cls) {
		return nil, fmt.Errorf("%w: class %d of %d", pool.ErrInvalidArgument, k, len(c.cls))
	}
	return c.cls[k].p, nil
}

// Close closes every class's pool. Later calls of every method, Close
// included, return pool.ErrClosed, and so do the senders.
func (c *Pool[B, T, P]) Close() error {
	if err := c.usable(); err != nil {
		return err
	}
	final := c.stats()
	var errs []error
	for k := range c.cls {
		errs = append(errs, c.cls[k].p.Close())
	}
	c.closed = true
	c.isClosed.Store(true)
	c.pub.Seal(final.clone())
	return errors.Join(errs...)
}

func (c *Pool[B, T, P]) usable() error {
	switch {
	case c == nil:
		return errNilPool
	case c.cls == nil:
		return errZeroPool
	case c.closed:
		return pool.ErrClosed
	}
	return nil
}
