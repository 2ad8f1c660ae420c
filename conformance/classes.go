package conformance

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/locus-go/locus/classes"
	"github.com/locus-go/locus/pool"
)

// Classes is the surface of a size-class allocator that TestClasses and
// CheckClasses exercise: *classes.Pool has it, with S = *classes.Sender.
// The suite takes this interface rather than *classes.Pool so that any
// allocator that keeps the contract of package classes (its Handle, Class,
// Stats and errors) can be checked, a wrapper around a *classes.Pool (one
// that adds metrics, say) or another implementation; it holds the methods
// the suite checks and nothing more. S is the allocator's sender type, so
// that *classes.Pool satisfies Classes as it is, and the type arguments of
// TestClasses and CheckClasses are inferred from the constructor.
type Classes[S ClassesSender] interface {
	Alloc(n int) (classes.Handle, error)
	AllocBytes(n int) (classes.Handle, []byte, error)
	AllocClass(k, n int) (classes.Handle, error)
	Free(h classes.Handle) error
	FreeChunk(chunk []classes.Handle) error
	Bytes(h classes.Handle) ([]byte, error)
	Drain() (int, error)
	NewSender() (S, error)
	Stats() classes.Stats
	Snapshot() classes.Stats
	Classes() []classes.Class
	ClassOf(n int) (int, error)
	Close() error
}

// ClassesSender is the remote side of a Classes allocator: *classes.Sender,
// or a wrapper's sender. Only the type parameter of TestClasses and
// CheckClasses needs it; code that frees blocks uses its own sender type.
type ClassesSender interface {
	FreeChunk(chunk []classes.Handle) error
	Free(h classes.Handle) error
	Submitted() uint64
	Close() error
}

// TestClasses runs the size-class suite over an allocator of several block
// sizes. It checks, each case on fresh allocators from newC:
//
//   - classes: an allocation of n bytes, for n at every class boundary and
//     its neighbours, takes a block of the smallest class that holds it,
//     exactly that class's size, and counts n in Requested; an exhausted
//     class refuses with pool.ErrExhausted and lends nothing to the
//     others; AllocClass takes the class asked for; bad sizes and classes
//     are pool.ErrInvalidArgument (classes.ErrTooLarge above the largest);
//   - handles: freed, double-freed, reused, foreign, zero, re-classed,
//     unknown-class and forged handles are rejected on every path, local
//     and remote, with the pool error that says why, counted in the class
//     they name (or in Stats.Rejected), and never reach a live block;
//     allocators made by one constructor are independent, their memory
//     disjoint; FreeChunk frees the good handles of a mixed chunk and
//     reports the bad ones in a *pool.RejectedError; a handle is still
//     stale after 2^16+1 reuses of its block, and handles of a closed
//     allocator are foreign to the allocators made after it;
//   - remote frees: blocks of every class freed through senders by racing
//     workers, in mixed chunks and one by one, with senders kept or made
//     and retired per request, come back exactly once, never handed out
//     twice meanwhile; an allocation that finds its class short drains;
//     senders refuse unknown classes and fail with pool.ErrClosed once
//     retired;
//   - accounting: after every operation of thousands, every class's stats
//     equal a model, and the identities of pool.Stats hold; snapshots read
//     by another goroutine are consistent and never go back, and fresh for
//     an owner that only drains; the slices of Stats, Snapshot and Classes
//     are the caller's;
//   - close semantics and allocation-free hot paths, FreeChunk of many
//     handles per class included.
//
// newC should return a fresh allocator of at least two classes of at least
// 8 blocks each (a few dozen blocks per class exercise more). The suite
// closes the allocators it is given. Use it for a size-class allocator as a
// whole; the pools behind its classes are checked by TestPool, its
// components by TestBacking, TestTransport and TestPolicy.
//
// The watchdog cannot close an allocator's transports without freeing its
// memory, which a stuck case may still touch: a case blocked in a call into
// the allocator is reported as ErrDeadlock, and its allocators are closed
// only once it returns.
func TestClasses[C Classes[S], S ClassesSender](t *testing.T, newC func(t *testing.T) C) {
	t.Helper()
	classesSuite().runT(t, adaptT(newC, func(c C) clsSubject { return clsAdapter[S]{c} }))
}

// CheckClasses runs the size-class suite outside go test (it calls no
// testing function) and returns every violation found, joined with
// errors.Join.
func CheckClasses[C Classes[S], S ClassesSender](newC func() (C, error)) error {
	return classesSuite().runCheck(adapt(newC, func(c C) clsSubject { return clsAdapter[S]{c} }))
}

// clsSubject is what the cases exercise: a Classes whose senders are seen
// through the interface. The suite's own tests feed it broken allocators.
type clsSubject = Classes[ClassesSender]

// clsAdapter turns a Classes[S] into a clsSubject.
type clsAdapter[S ClassesSender] struct{ allocator[S] }

// allocator names the embedded Classes, whose Classes method a field of
// that name would hide.
type allocator[S ClassesSender] = Classes[S]

func (a clsAdapter[S]) NewSender() (ClassesSender, error) {
	s, err := a.allocator.NewSender()
	if err != nil {
		return nil, err
	}
	return s, nil
}

func classesSuite() suite[clsSubject] {
	return suite[clsSubject]{
		cases:   classesCases,
		abort:   func(clsSubject) {},
		release: func(c clsSubject) { _ = c.Close() },
	}
}

type clCase = run[clsSubject]

var classesCases = []testCase[clsSubject]{
	{
		name:        "SmallestClass",
		explanation: "an allocation of n bytes, for n at every class boundary and one byte either side, by Alloc and AllocBytes, takes a block of the smallest class whose blocks hold n, exactly that class's size, as ClassOf says, and counts n in its Requested; Classes lists distinct sizes, smallest first, as Stats does; sizes of 0, below 0 or above the largest class are refused with pool.ErrInvalidArgument (classes.ErrTooLarge above) and change nothing",
		run:         checkClassesSmallest,
	},
	{
		name:        "AllocClass",
		explanation: "AllocClass(k, n) takes a block of class k for any n from 1 to its size, also when a smaller class would hold n or the smallest is exhausted, and counts n; a class or size out of range is pool.ErrInvalidArgument and changes nothing",
		run:         checkClassesAllocClass,
	},
	{
		name:        "NoFallback",
		explanation: "an allocation whose class has no free block fails with pool.ErrExhausted, for every class, without taking a block of a larger class or changing any count, while the other classes still allocate",
		run:         checkClassesNoFallback,
	},
	{
		name:        "NoAliasing",
		explanation: "through thousands of random allocations of every size and frees, live blocks never share memory, and a block's memory is exactly its class's size",
		run:         checkClassesNoAliasing,
	},
	{
		name:        "StaleHandle",
		explanation: "a freed handle is rejected by Free, FreeChunk, Bytes and a remote free with pool.ErrStaleHandle, also double-freed and after its block is reused, in every class, hundreds of times, and after 2^16 reuses of its block (generations do not wrap at 16 bits), counted in its class, and never reaches the new owner's memory",
		run:         checkClassesStale,
	},
	{
		name:        "ForeignHandle",
		explanation: "allocators made by one constructor are independent: a handle of one is rejected by another on every path with pool.ErrForeignHandle, counted there, changing nothing, also by allocators made after it was closed that hand out the very same blocks, and their blocks are disjoint memory",
		run:         checkClassesForeign,
	},
	{
		name:        "ForgedHandle",
		explanation: "the zero handle (pool.ErrZeroHandle), handles naming no class (classes.ErrUnknownClass, counted in Stats.Rejected), a live block re-classed to another class (pool.ErrForeignHandle) and forged block handles (pool.ErrOutOfRange, pool.ErrStaleHandle, pool.ErrForeignHandle) are rejected on every path, thousands of times; only the exact live handle is accepted",
		run:         checkClassesForged,
	},
	{
		name:        "FreeChunk",
		explanation: "FreeChunk frees chunks of every length mixing every class; bad handles among them are skipped, counted and reported in one *pool.RejectedError whose count is theirs and whose First is one of them, and the good ones are freed",
		run:         checkClassesFreeChunk,
	},
	{
		name:        "DrainOnExhaustion",
		explanation: "an allocation whose class has no free block drains the blocks freed through senders first: with every block of a class freed remotely and no Drain, every allocation of that class succeeds",
		run:         checkClassesDrainOnExhaustion,
	},
	{
		name:        "RemoteExactlyOnce",
		explanation: "with workers freeing mixed-class chunks of every length through their own senders (FreeChunk and Free; senders kept, or made and retired per request) while the owner allocates and drains, every block comes back exactly once, counted in its class, and no live block is handed out twice",
		run:         checkClassesRemote,
	},
	{
		name:        "SenderRejects",
		explanation: "a sender refuses handles naming no class in a *pool.RejectedError matching classes.ErrUnknownClass, counted in Stats.Rejected, and sends the rest; a drain rejects bad remotely freed handles, counts them in their class and frees the good ones beside them",
		run:         checkClassesSenderRejects,
	},
	{
		name:        "SenderRetire",
		explanation: "after Sender.Close every send path of that sender fails with pool.ErrClosed at every length, Close again returns nil, and what it freed before is drained exactly once and counted",
		run:         checkClassesSenderRetire,
	},
	{
		name:        "Accounting",
		explanation: "after every operation of thousands of random allocations (Alloc, AllocBytes, AllocClass), local and remote frees, mixed chunks and rejected calls, every class's stats equal a model (live, free, high water, allocations, frees, requested bytes, remote frees, rejections) and satisfy the identities of pool.Stats, with Requested at most Allocs × BlockSize",
		run:         checkClassesAccounting,
	},
	{
		name:        "Snapshot",
		explanation: "Snapshot may be read by another goroutine while the owner, and workers, keep the allocator busy: every snapshot has every class, satisfies the identities, never goes back, and after Stats it equals Stats; an owner that only drains still publishes when a Snapshot asks; and the slices of Stats, Snapshot and Classes are the caller's: they do not change as the allocator goes on, and edits to them change nothing in the allocator",
		run:         checkClassesSnapshot,
	},
	{
		name:        "Close",
		explanation: "after Close every call fails with pool.ErrClosed (NewSender, and the senders made before, at every length, too), Close again too, and Stats and Snapshot keep the accounting as it stood at Close",
		run:         checkClassesClose,
	},
	{
		name:        "ZeroAllocs",
		explanation: "Alloc, AllocBytes, AllocClass, Free, Bytes, FreeChunk of a mixed chunk, with one handle of each class or many, a rejected Free, a sender's FreeChunk and Free with the Drain that returns them, and an idle Drain allocate nothing in steady state (Stats and Snapshot return a new slice and are left out)",
		run:         checkClassesAllocs,
		whole:       true,
	},
}

// instances returns models of the case's instance and of n-1 more from the
// same constructor.
func instances[X, M any](r *run[X], n int, model func(X) (M, error)) ([]M, error) {
	ms := make([]M, 0, n)
	for i := range n {
		x := r.x
		if i > 0 {
			var err error
			if x, err = r.another(); err != nil {
				return nil, err
			}
		}
		m, err := model(x)
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// Minimal geometry the suite takes.
const (
	classesMin      = 2
	classBlocksMin  = 8
	classesUnknownK = math.MaxUint32
)

// mkClassHandle builds an arbitrary handle through the public encoding.
func mkClassHandle(block pool.Handle, class uint32) classes.Handle {
	var b [classes.HandleSize]byte
	enc, _ := block.AppendBinary(b[:0])
	enc = append(enc, byte(class), byte(class>>8), byte(class>>16), byte(class>>24))
	var h classes.Handle
	_ = h.UnmarshalBinary(enc) // cannot fail: enc has the right length
	return h
}

// clModel is the suite's model of a size-class allocator: the live blocks
// with what was written into them, and every class's counts.
type clModel struct {
	c        clsSubject
	cls      []classes.Class
	want     []classes.ClassStats // Order, Drains and DrainSizes are the allocator's
	rejected uint64               // handles naming no class
	live     map[classes.Handle]*clBlock
	blocks   []*clBlock // the live blocks, in no order
	taken    [][]bool   // class, block index -> a live handle holds it
	stale    []classes.Handle
	ids      []uint32 // each class's pool id, from its first block
	tag      byte
}

type clBlock struct {
	h   classes.Handle
	k   int
	n   int // bytes asked for
	tag byte
	at  int // index in blocks
}

func newClModel(c clsSubject) (*clModel, error) {
	cls := slices.Clone(c.Classes()) // the model's own, whatever the allocator does with its
	if len(cls) < classesMin {
		return nil, &ctorError{fmt.Errorf("the size-class suite needs at least %d classes, got %d", classesMin, len(cls))}
	}
	for k, cl := range cls {
		if cl.Blocks < classBlocksMin {
			return nil, &ctorError{fmt.Errorf("the size-class suite needs classes of at least %d blocks; class %d has %d", classBlocksMin, k, cl.Blocks)}
		}
		if cl.Size <= 0 || (k > 0 && cls[k-1].Size >= cl.Size) {
			return nil, violationf(ErrContract, "Classes() = %v: sizes must be positive and distinct, smallest first", cls)
		}
	}
	m := &clModel{c: c, cls: cls, live: map[classes.Handle]*clBlock{}, want: make([]classes.ClassStats, len(cls)),
		taken: make([][]bool, len(cls)), ids: make([]uint32, len(cls))}
	for k, cl := range cls {
		m.want[k].BlockSize, m.want[k].Capacity, m.want[k].Free = cl.Size, cl.Blocks, cl.Blocks
		m.taken[k] = make([]bool, cl.Blocks)
	}
	if err := m.check("a fresh allocator"); err != nil {
		return nil, err
	}
	return m, nil
}

func newClassesModel(r *clCase) (*clModel, error) { return newClModel(r.x) }

// check compares Stats with the model, class by class.
func (m *clModel) check(what string) error {
	st := m.c.Stats()
	return m.compare(what, st)
}

func (m *clModel) compare(what string, st classes.Stats) error {
	if len(st.Classes) != len(m.cls) {
		return violationf(ErrAccounting, "%s: Stats has %d classes, Classes() %d", what, len(st.Classes), len(m.cls))
	}
	for k, got := range st.Classes {
		if err := identities(got.Stats); err != nil {
			return fmt.Errorf("%s: class %d: %w", what, k, err)
		}
		if got.Requested > got.HandedOut() {
			return violationf(ErrAccounting, "%s: class %d: Requested %d > Allocs × BlockSize %d", what, k, got.Requested, got.HandedOut())
		}
		w := m.want[k]
		w.Order, w.Drains, w.DrainSizes = got.Order, got.Drains, got.DrainSizes
		if got != w {
			return violationf(ErrAccounting, "%s: class %d (%d-byte blocks) differs from the model: %s", what, k, m.cls[k].Size, fieldDiff(got, w))
		}
	}
	if st.Rejected != m.rejected {
		return violationf(ErrAccounting, "%s: Stats.Rejected = %d, want %d handles naming no class", what, st.Rejected, m.rejected)
	}
	return nil
}

// classFor returns the class an allocation of n bytes takes, or -1.
func (m *clModel) classFor(n int) int {
	for k, cl := range m.cls {
		if n > 0 && n <= cl.Size {
			return k
		}
	}
	return -1
}

func (m *clModel) largest() int { return m.cls[len(m.cls)-1].Size }

// How an allocation is made.
const (
	viaAlloc = iota
	viaAllocBytes
	viaAllocClass
)

var viaNames = [...]string{"Alloc", "AllocBytes", "AllocClass"}

// alloc allocates n bytes (from class k with viaAllocClass) and checks the
// block; when the model agrees that the class is exhausted it returns nil
// and no error.
func (m *clModel) alloc(n, how, k int) (*clBlock, error) {
	if how != viaAllocClass {
		k = m.classFor(n)
	}
	what := fmt.Sprintf("%s(%d)", viaNames[how], n)
	if how == viaAllocClass {
		what = fmt.Sprintf("AllocClass(%d, %d)", k, n)
	}
	var h classes.Handle
	var buf []byte
	var err error
	switch how {
	case viaAlloc:
		h, err = m.c.Alloc(n)
	case viaAllocBytes:
		h, buf, err = m.c.AllocBytes(n)
	default:
		h, err = m.c.AllocClass(k, n)
	}
	w := &m.want[k]
	if w.Free == 0 {
		if err == nil {
			return nil, violationf(ErrDuplicated, "%s with every block of class %d live = %v, want pool.ErrExhausted", what, k, h)
		}
		if !errors.Is(err, pool.ErrExhausted) {
			return nil, violationf(ErrContract, "%s with class %d exhausted = %v, want pool.ErrExhausted", what, k, err)
		}
		return nil, nil
	}
	if err != nil {
		return nil, violationf(ErrContract, "%s with %d blocks of class %d free: %v", what, w.Free, k, err)
	}
	if h.Class() != k {
		return nil, violationf(ErrContract, "%s gave a block of class %d (%d bytes); the smallest class that holds it is %d (%d bytes)", what, h.Class(), m.sizeOf(h.Class()), k, m.cls[k].Size)
	}
	idx := h.Block().Index()
	if idx < 0 || idx >= m.cls[k].Blocks {
		return nil, violationf(ErrContract, "%s gave block %d of a class of %d blocks", what, idx, m.cls[k].Blocks)
	}
	if _, dup := m.live[h]; dup || m.taken[k][idx] {
		return nil, violationf(ErrDuplicated, "%s gave block %d of class %d, which a live handle holds", what, idx, k)
	}
	id := poolID(h.Block())
	switch {
	case m.ids[k] == 0:
		m.ids[k] = id
	case m.ids[k] != id:
		return nil, violationf(ErrContract, "%s gave a block of pool id %d; class %d's blocks carry %d", what, id, k, m.ids[k])
	}
	mem, err := m.c.Bytes(h)
	if err != nil || len(mem) != m.cls[k].Size || cap(mem) != len(mem) {
		return nil, violationf(ErrContract, "Bytes of the block %s gave: %d bytes, capacity %d, %v; want %d bytes, no spare capacity", what, len(mem), cap(mem), err, m.cls[k].Size)
	}
	if how == viaAllocBytes && (len(buf) != len(mem) || &buf[0] != &mem[0]) {
		return nil, violationf(ErrContract, "AllocBytes(%d) returned %d bytes that are not the block's memory", n, len(buf))
	}
	m.tag++
	stamp(mem, len(mem), m.tag)
	b := &clBlock{h: h, k: k, n: n, tag: m.tag, at: len(m.blocks)}
	m.live[h] = b
	m.blocks = append(m.blocks, b)
	m.taken[k][idx] = true
	w.Live++
	w.Free--
	w.Allocs++
	w.Requested += uint64(n)
	w.HighWater = max(w.HighWater, w.Live)
	return b, nil
}

func (m *clModel) sizeOf(k int) int {
	if k >= 0 && k < len(m.cls) {
		return m.cls[k].Size
	}
	return -1
}

// intact checks that b's memory kept what the model wrote.
func (m *clModel) intact(b *clBlock) error {
	mem, err := m.c.Bytes(b.h)
	if err != nil {
		return violationf(ErrContract, "Bytes of the live %v: %v", b.h, err)
	}
	if at, ok := stamped(mem, len(mem), b.tag); !ok {
		return violationf(ErrAliased, "byte %d of the live %v changed: another handle shares its memory", at, b.h)
	}
	return nil
}

// forget takes b out of the model, freed (remotely, once drained, with
// remote set).
func (m *clModel) forget(b *clBlock, remote bool) {
	last := m.blocks[len(m.blocks)-1]
	m.blocks[b.at], last.at = last, b.at
	m.blocks = m.blocks[:len(m.blocks)-1]
	delete(m.live, b.h)
	m.taken[b.k][b.h.Block().Index()] = false
	if len(m.stale) == staleKeep {
		m.stale = m.stale[1:]
	}
	m.stale = append(m.stale, b.h)
	w := &m.want[b.k]
	w.Live--
	w.Free++
	w.Frees++
	if remote {
		w.RemoteSubmitted++
		w.RemoteDrained++
	}
}

func (m *clModel) free(b *clBlock) error {
	if err := m.intact(b); err != nil {
		return err
	}
	if err := m.c.Free(b.h); err != nil {
		return violationf(ErrContract, "Free of the live %v: %v", b.h, err)
	}
	m.forget(b, false)
	return nil
}

// badHandle is a handle the allocator must refuse, why, and who counts it:
// the class it names, or -1 for Stats.Rejected.
type badHandle struct {
	h     classes.Handle
	why   error
	count int
}

// refused checks that every owner call with x's handle is refused as x
// says, and counts the refusals.
func (m *clModel) refused(what string, x badHandle) error {
	buf, bytesErr := m.c.Bytes(x.h)
	var rej *pool.RejectedError
	chunkErr := m.c.FreeChunk([]classes.Handle{x.h})
	for _, c := range [...]struct {
		name string
		err  error
	}{{"Bytes", bytesErr}, {"Free", m.c.Free(x.h)}, {"FreeChunk", chunkErr}} {
		switch {
		case c.err == nil:
			return violationf(ErrAliased, "%s of %s (%v) was accepted", c.name, what, x.h)
		case !errors.Is(c.err, x.why) || !errors.Is(c.err, pool.ErrInvalidHandle):
			return violationf(ErrContract, "%s of %s (%v) = %v, want %v", c.name, what, x.h, c.err, x.why)
		}
	}
	if !errors.As(chunkErr, &rej) || rej.Rejected != 1 || rej.First != x.h.Block() {
		return violationf(ErrContract, "FreeChunk of %s alone = %v, want a *pool.RejectedError of that one handle", what, chunkErr)
	}
	if buf != nil {
		return violationf(ErrAliased, "Bytes of %s (%v) returned %d bytes with its error", what, x.h, len(buf))
	}
	m.count(x, 3)
	return nil
}

// count counts n refusals of x where the allocator counts them.
func (m *clModel) count(x badHandle, n int) {
	if x.count < 0 {
		m.rejected += uint64(n)
	} else {
		m.want[x.count].Rejected += uint64(n)
	}
}

// staleOf returns h, stale, as a badHandle.
func staleOf(h classes.Handle) badHandle {
	return badHandle{h, pool.ErrStaleHandle, h.Class()}
}

// drainDry drains until a Drain brings nothing and returns what came. A
// drain that rejects a handle is a violation: callers send only handles
// freed once.
func (m *clModel) drainDry(ctx interface{ Err() error }) (int, error) {
	got := 0
	for {
		n, err := m.c.Drain()
		if err != nil {
			return got, violationf(ErrDuplicated, "a drain rejected handles that were freed once each: %v", err)
		}
		if n == 0 {
			return got, nil
		}
		got += n
		if ctx.Err() != nil {
			return got, violationf(ErrDeadlock, "drains kept freeing")
		}
	}
}

// sendDraining runs send on a goroutine of its own while the owner keeps
// draining, as a bounded transport needs, until a Drain that started after
// send returned brings nothing. It returns how many blocks the drains freed
// and the errors they reported.
func (m *clModel) sendDraining(r *clCase, send func() error) (int, []error, error) {
	var c crew
	c.Go(send)
	got := 0
	var reports []error
	var b backoff
	for {
		done := c.finished() // before the drain
		n, err := m.c.Drain()
		got += n
		if err != nil {
			reports = append(reports, err)
		}
		switch {
		case n > 0 || err != nil:
			b.reset()
			continue
		case done:
			return got, reports, c.wait(r.ctx, "senders")
		case !b.wait(r.ctx):
			return got, reports, c.stopped("senders were")
		}
	}
}

// remoteFree frees bs through snd (one by one with single) while the owner
// drains, and checks that every block came back once.
func (m *clModel) remoteFree(r *clCase, snd ClassesSender, bs []*clBlock, single bool) error {
	hs := make([]classes.Handle, len(bs))
	for i, b := range bs {
		if err := m.intact(b); err != nil {
			return err
		}
		hs[i] = b.h
	}
	before := snd.Submitted()
	got, reports, err := m.sendDraining(r, func() error {
		if single {
			for _, h := range hs {
				if err := snd.Free(h); err != nil {
					return violationf(ErrContract, "sender Free: %v", err)
				}
			}
			return nil
		}
		if err := snd.FreeChunk(hs); err != nil {
			return violationf(ErrContract, "sender FreeChunk of %d handles: %v", len(hs), err)
		}
		return nil
	})
	switch {
	case err != nil:
		return err
	case len(reports) > 0:
		return violationf(ErrDuplicated, "a drain rejected handles that were freed once each: %v", reports[0])
	case got > len(hs):
		return violationf(ErrDuplicated, "drains freed %d blocks, the sender freed %d", got, len(hs))
	case got < len(hs):
		return violationf(ErrLost, "%d of %d blocks freed through a sender never came back: a Drain after the send returned found nothing", len(hs)-got, len(hs))
	}
	if sub := snd.Submitted() - before; sub != uint64(len(hs)) {
		return violationf(ErrAccounting, "Sender.Submitted grew by %d for %d handles sent", sub, len(hs))
	}
	for _, b := range bs {
		m.forget(b, true)
	}
	return nil
}

// fillClass allocates every free block of class k.
func (m *clModel) fillClass(k int) ([]*clBlock, error) {
	var bs []*clBlock
	for m.want[k].Free > 0 {
		b, err := m.alloc(m.cls[k].Size, viaAlloc, 0)
		if err == nil && b == nil {
			err = violationf(ErrContract, "class %d refused an allocation with blocks free", k)
		}
		if err != nil {
			return nil, err
		}
		bs = append(bs, b)
	}
	return bs, nil
}

// freeAll frees every live block.
func (m *clModel) freeAll() error {
	for len(m.blocks) > 0 {
		if err := m.free(m.blocks[len(m.blocks)-1]); err != nil {
			return err
		}
	}
	return nil
}

// sizes returns the sizes at every class boundary and one byte either side.
func (m *clModel) sizes() []int {
	var ns []int
	for _, cl := range m.cls {
		ns = append(ns, cl.Size-1, cl.Size, cl.Size+1)
	}
	ns = append(ns, 1, 2)
	slices.Sort(ns)
	ns = slices.Compact(ns)
	return slices.DeleteFunc(ns, func(n int) bool { return n < 1 || n > m.largest() })
}

func checkClassesSmallest(r *clCase) error {
	m, err := newClassesModel(r)
	if err != nil {
		return err
	}
	c := m.c
	// Classes hands out a copy: a caller that edits what it got changes
	// neither a later Classes nor the routing (checked by the rest).
	mine := c.Classes()
	for i := range mine {
		mine[i] = classes.Class{Size: 1 << 30, Blocks: 1}
	}
	if again := c.Classes(); !slices.Equal(again, m.cls) {
		return violationf(ErrAliased, "Classes() returned a slice the allocator keeps: after the caller wrote to it, Classes() = %v, want %v", again, m.cls)
	}
	for round := range scaled(8) {
		for _, n := range m.sizes() {
			for _, how := range []int{viaAlloc, viaAllocBytes} {
				b, err := m.alloc(n, how, 0)
				if err == nil && b == nil {
					err = violationf(ErrContract, "%s(%d) refused on an empty allocator", viaNames[how], n)
				}
				if err != nil {
					return fmt.Errorf("round %d: %w", round, err)
				}
				if k, err := c.ClassOf(n); k != b.k || err != nil {
					return violationf(ErrContract, "ClassOf(%d) = %d, %v; the allocation took class %d", n, k, err, b.k)
				}
				if err := m.check(fmt.Sprintf("after %s(%d)", viaNames[how], n)); err != nil {
					return err
				}
				if round%2 == 0 {
					if err := m.free(b); err != nil {
						return err
					}
				}
			}
		}
		if err := m.freeAll(); err != nil {
			return err
		}
	}
	for _, n := range []int{0, -1, math.MinInt, m.largest() + 1, math.MaxInt} {
		_, aErr := c.Alloc(n)
		_, buf, bErr := c.AllocBytes(n)
		_, cErr := c.ClassOf(n)
		for _, call := range [...]struct {
			name string
			err  error
		}{{"Alloc", aErr}, {"AllocBytes", bErr}, {"ClassOf", cErr}} {
			if !errors.Is(call.err, pool.ErrInvalidArgument) {
				return violationf(ErrContract, "%s(%d) with classes up to %d bytes = %v, want pool.ErrInvalidArgument", call.name, n, m.largest(), call.err)
			}
			if n > m.largest() && !errors.Is(call.err, classes.ErrTooLarge) {
				return violationf(ErrContract, "%s(%d) with classes up to %d bytes = %v, want classes.ErrTooLarge", call.name, n, m.largest(), call.err)
			}
		}
		if buf != nil {
			return violationf(ErrContract, "AllocBytes(%d) returned memory with its error", n)
		}
	}
	return m.check("after refused sizes")
}

func checkClassesAllocClass(r *clCase) error {
	m, err := newClassesModel(r)
	if err != nil {
		return err
	}
	for k, cl := range m.cls {
		for _, n := range []int{1, cl.Size / 2, cl.Size - 1, cl.Size} {
			if n < 1 {
				continue
			}
			b, err := m.alloc(n, viaAllocClass, k)
			if err == nil && b == nil {
				err = violationf(ErrContract, "AllocClass(%d, %d) refused on an empty allocator", k, n)
			}
			if err != nil {
				return err
			}
			if err := m.check(fmt.Sprintf("after AllocClass(%d, %d)", k, n)); err != nil {
				return err
			}
		}
	}
	if err := m.freeAll(); err != nil {
		return err
	}
	for _, bad := range [][2]int{{-1, 1}, {len(m.cls), 1}, {math.MaxInt, 1}, {math.MinInt, 1}, {0, 0}, {0, -1}, {0, m.cls[0].Size + 1}, {len(m.cls) - 1, m.largest() + 1}, {1, math.MaxInt}} {
		if _, err := m.c.AllocClass(bad[0], bad[1]); !errors.Is(err, pool.ErrInvalidArgument) {
			return violationf(ErrContract, "AllocClass(%d, %d) = %v, want pool.ErrInvalidArgument", bad[0], bad[1], err)
		}
	}
	if err := m.check("after refused AllocClass calls"); err != nil {
		return err
	}
	// The caller's own fallback: the smallest class full, the next one
	// takes its sizes.
	if _, err := m.fillClass(0); err != nil {
		return err
	}
	for range 2 {
		if b, err := m.alloc(1, viaAllocClass, 1); err != nil || b == nil {
			return errors.Join(err, violationf(ErrContract, "AllocClass(1, 1) with class 0 exhausted failed"))
		}
	}
	return m.check("after falling back")
}

func checkClassesNoFallback(r *clCase) error {
	m, err := newClassesModel(r)
	if err != nil {
		return err
	}
	for k := range m.cls {
		if _, err := m.fillClass(k); err != nil {
			return err
		}
		lo := 1
		if k > 0 {
			lo = m.cls[k-1].Size + 1
		}
		for _, n := range []int{lo, m.cls[k].Size} {
			for _, how := range []int{viaAlloc, viaAllocBytes} {
				if b, err := m.alloc(n, how, 0); err != nil || b != nil {
					return errors.Join(err, violationf(ErrContract, "%s(%d) with class %d exhausted took a block", viaNames[how], n, k))
				}
			}
		}
		if err := m.check(fmt.Sprintf("after refused allocations from the exhausted class %d", k)); err != nil {
			return err
		}
		for j := range m.cls {
			if j != k && m.want[j].Free > 0 {
				b, err := m.alloc(m.cls[j].Size, viaAlloc, 0)
				if err == nil && b == nil {
					err = violationf(ErrContract, "class %d refused with class %d exhausted", j, k)
				}
				if err != nil {
					return err
				}
			}
		}
		if err := m.freeAll(); err != nil {
			return err
		}
	}
	return m.check("after every class was exhausted once")
}

func checkClassesNoAliasing(r *clCase) error {
	m, err := newClassesModel(r)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for step := range scaled(3000) {
		if r.ctx.Err() != nil {
			return violationf(ErrDeadlock, "step %d: stopped by the watchdog", step)
		}
		if len(m.blocks) > 0 && rng.IntN(5) < 2 {
			err = m.free(m.blocks[rng.IntN(len(m.blocks))])
		} else {
			_, err = m.alloc(1+rng.IntN(m.largest()), rng.IntN(2), 0)
		}
		if err == nil && step%128 == 127 {
			for _, b := range m.blocks {
				if err = m.intact(b); err != nil {
					break
				}
			}
		}
		if err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
	}
	if err := m.freeAll(); err != nil {
		return err
	}
	return m.check("after freeing everything")
}

func checkClassesStale(r *clCase) error {
	m, err := newClassesModel(r)
	if err != nil {
		return err
	}
	snd, err := m.c.NewSender()
	if err != nil {
		return violationf(ErrContract, "NewSender: %v", err)
	}
	var olds []classes.Handle
	for round := range scaled(300) {
		k := round % len(m.cls)
		b, err := m.alloc(m.cls[k].Size, viaAlloc, 0)
		if err == nil && b == nil {
			err = violationf(ErrContract, "round %d: class %d refused", round, k)
		}
		if err != nil {
			return err
		}
		old := b.h
		if err := m.free(b); err != nil {
			return err
		}
		if err := m.refused("a freed handle", staleOf(old)); err != nil {
			return fmt.Errorf("round %d: %w", round, err)
		}
		// The block again, with a new handle: the old one is still
		// refused, the new owner's memory untouched.
		nb, err := m.alloc(m.cls[k].Size, viaAlloc, 0)
		if err == nil && nb == nil {
			err = violationf(ErrContract, "round %d: class %d refused", round, k)
		}
		if err != nil {
			return err
		}
		if nb.h == old {
			return violationf(ErrAliased, "round %d: reuse gave %v, equal to the freed handle: the old handle would reach the new owner's block", round, nb.h)
		}
		if err := m.refused("a freed handle whose block was reused", staleOf(old)); err != nil {
			return fmt.Errorf("round %d: %w", round, err)
		}
		if err := m.intact(nb); err != nil {
			return fmt.Errorf("round %d: %w", round, err)
		}
		if round%25 == 0 {
			// Remotely: the drain refuses it, counts it, says why.
			if err := snd.Free(old); err != nil {
				return violationf(ErrContract, "sender Free: %v", err)
			}
			n, err := m.c.Drain()
			var rej *pool.RejectedError
			if n != 0 || !errors.As(err, &rej) || !errors.Is(err, pool.ErrStaleHandle) {
				return violationf(ErrAliased, "round %d: a drain of a remotely freed stale handle = (%d, %v), want (0, a *pool.RejectedError of a stale handle)", round, n, err)
			}
			w := &m.want[k]
			w.RemoteSubmitted++
			w.RemoteDrained++
			w.Rejected++
		}
		if err := m.free(nb); err != nil {
			return err
		}
		if len(olds) < 32 {
			olds = append(olds, old)
		}
		if err := m.check(fmt.Sprintf("round %d", round)); err != nil {
			return err
		}
	}
	for _, h := range olds {
		if err := m.refused("a handle freed hundreds of allocations ago", staleOf(h)); err != nil {
			return err
		}
	}
	if err := m.check("after the stale calls"); err != nil {
		return err
	}
	return checkClassesWrap(r, m)
}

func checkClassesForeign(r *clCase) error {
	models, err := instances(r, 3, newClModel)
	if err != nil {
		return err
	}
	if !slices.Equal(models[0].cls, models[1].cls) {
		return violationf(ErrContract, "one constructor made allocators of classes %v and %v", models[0].cls, models[1].cls)
	}
	// The same allocations on each: handles alike but for their pools.
	for k, m := range models {
		for j := range m.cls {
			if b, err := m.alloc(m.cls[j].Size, viaAlloc, 0); err != nil || b == nil {
				return errors.Join(err, violationf(ErrContract, "allocator %d: class %d refused", k, j))
			}
		}
	}
	for k, m := range models {
		for j, o := range models {
			if j == k {
				continue
			}
			for _, b := range o.blocks {
				if err := m.refused(fmt.Sprintf("a handle of allocator %d, given to allocator %d,", j, k), badHandle{b.h, pool.ErrForeignHandle, b.k}); err != nil {
					return err
				}
			}
		}
	}
	for k, m := range models {
		for _, b := range m.blocks {
			if err := m.intact(b); err != nil {
				return fmt.Errorf("allocator %d: %w", k, err)
			}
		}
		if err := m.check(fmt.Sprintf("allocator %d, after the others' handles were refused", k)); err != nil {
			return err
		}
		for i, id := range m.ids {
			for j, o := range models[:k] {
				if slices.Contains(o.ids, id) {
					return violationf(ErrAliased, "class %d of allocator %d has the pool id %d of a class of allocator %d", i, k, id, j)
				}
			}
		}
	}
	// Every block of every allocator: writes to one never show in another.
	for k, m := range models {
		for j := range m.cls {
			if _, err := m.fillClass(j); err != nil {
				return fmt.Errorf("allocator %d: %w", k, err)
			}
		}
	}
	for pass := range 2 {
		rng := rand.New(rand.NewPCG(uint64(pass), 5))
		for _, m := range models {
			for _, b := range m.blocks {
				mem, _ := m.c.Bytes(b.h)
				for i := range mem {
					mem[i] = byte(rng.Uint32())
				}
			}
		}
		rng = rand.New(rand.NewPCG(uint64(pass), 5))
		for k, m := range models {
			for _, b := range m.blocks {
				mem, _ := m.c.Bytes(b.h)
				for i, v := range mem {
					if v != byte(rng.Uint32()) {
						return violationf(ErrAliased, "byte %d of allocator %d's %v was overwritten by a write to another allocator's block", i, k, b.h)
					}
				}
			}
		}
	}
	return checkClassesClosedIdentity(r)
}

func checkClassesForged(r *clCase) error {
	m, err := newClassesModel(r)
	if err != nil {
		return err
	}
	// Half of every class live, every other block freed again.
	for k := range m.cls {
		for range m.cls[k].Blocks / 2 {
			if _, err := m.alloc(m.cls[k].Size, viaAlloc, 0); err != nil {
				return err
			}
		}
	}
	for i, b := range slices.Clone(m.blocks) {
		if i%2 == 0 {
			if err := m.free(b); err != nil {
				return err
			}
		}
	}
	first := m.blocks[0]
	nk := uint32(len(m.cls))
	fixed := []badHandle{
		{classes.Handle{}, pool.ErrZeroHandle, 0},
		{mkClassHandle(first.h.Block(), nk), classes.ErrUnknownClass, -1},
		{mkClassHandle(first.h.Block(), nk+1), classes.ErrUnknownClass, -1},
		{mkClassHandle(first.h.Block(), classesUnknownK), classes.ErrUnknownClass, -1},
		{mkClassHandle(pool.Handle{}, nk), classes.ErrUnknownClass, -1},
	}
	for _, b := range m.blocks {
		k2 := (b.k + 1) % len(m.cls)
		fixed = append(fixed, badHandle{mkClassHandle(b.h.Block(), uint32(k2)), pool.ErrForeignHandle, k2})
	}
	for _, x := range fixed {
		if err := m.refused(fmt.Sprintf("a forged handle (class %d)", x.h.Class()), x); err != nil {
			return err
		}
	}
	if err := m.check("after the forgeries"); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(6, 7))
	for i := range scaled(3000) {
		base := m.blocks[rng.IntN(len(m.blocks))]
		k, blk := base.k, base.h.Block()
		idx, gen, pid := uint32(blk.Index()), blk.Generation(), poolID(blk)
		switch rng.IntN(8) {
		case 0:
			gen += uint64(1 + rng.IntN(4))
		case 1:
			gen -= uint64(1 + rng.IntN(4))
		case 2:
			gen ^= 1 << rng.IntN(64)
		case 3:
			idx = uint32(rng.IntN(m.cls[k].Blocks + 8))
		case 4:
			idx = uint32(m.cls[k].Blocks) + rng.Uint32N(1<<20)
		case 5:
			pid ^= 1 << rng.IntN(32)
		case 6:
			gen = rng.Uint64()
		default:
			idx, gen = uint32(rng.IntN(m.cls[k].Blocks)), uint64(rng.IntN(8))
		}
		f := mkClassHandle(mkHandle(pid, idx, gen), uint32(k))
		if b, live := m.live[f]; live {
			if err := m.intact(b); err != nil {
				return fmt.Errorf("forgery %d: %w", i, err)
			}
			continue
		}
		var want error
		switch {
		case f.Block().IsZero():
			want = pool.ErrZeroHandle
		case pid != m.ids[k]:
			want = pool.ErrForeignHandle
		case int(idx) >= m.cls[k].Blocks:
			want = pool.ErrOutOfRange
		default:
			want = pool.ErrStaleHandle
		}
		var got error
		name := "Bytes"
		if i%2 == 0 {
			_, got = m.c.Bytes(f)
		} else {
			name, got = "Free", m.c.Free(f)
		}
		switch {
		case got == nil:
			return violationf(ErrAliased, "forgery %d: %s(%v) was accepted; it is no live handle", i, name, f)
		case !errors.Is(got, want):
			return violationf(ErrContract, "forgery %d: %s(%v) = %v, want %v", i, name, f, got, want)
		}
		m.want[k].Rejected++
	}
	for _, b := range m.blocks {
		if err := m.intact(b); err != nil {
			return err
		}
	}
	return m.check("after thousands of forgeries")
}

func checkClassesFreeChunk(r *clCase) error {
	m, err := newClassesModel(r)
	if err != nil {
		return err
	}
	total := 0
	for _, cl := range m.cls {
		total += cl.Blocks
	}
	rng := rand.New(rand.NewPCG(8, 9))
	for _, empty := range [][]classes.Handle{nil, {}} {
		if err := m.c.FreeChunk(empty); err != nil {
			return violationf(ErrContract, "FreeChunk of an empty chunk = %v", err)
		}
	}
	for length := 1; length <= min(total, 70); length++ {
		// Allocate blocks of random classes until length of them are live.
		for len(m.blocks) < length {
			k := rng.IntN(len(m.cls))
			if m.want[k].Free == 0 {
				continue
			}
			if _, err := m.alloc(1+rng.IntN(m.cls[k].Size), viaAllocClass, k); err != nil {
				return err
			}
		}
		chunk := slices.Clone(m.blocks[:length])
		rng.Shuffle(len(chunk), func(i, j int) { chunk[i], chunk[j] = chunk[j], chunk[i] })
		hs := make([]classes.Handle, 0, length+4)
		for _, b := range chunk {
			if err := m.intact(b); err != nil {
				return err
			}
			hs = append(hs, b.h)
		}
		var bad []badHandle
		if length%3 == 0 && len(m.stale) > 0 {
			bad = append(bad, staleOf(m.stale[rng.IntN(len(m.stale))]))
		}
		if length%4 == 0 {
			bad = append(bad, badHandle{mkClassHandle(chunk[0].h.Block(), uint32(len(m.cls))), classes.ErrUnknownClass, -1})
		}
		if length%5 == 0 {
			bad = append(bad, badHandle{classes.Handle{}, pool.ErrZeroHandle, 0})
		}
		for _, x := range bad {
			at := rng.IntN(len(hs) + 1)
			hs = slices.Insert(hs, at, x.h)
		}
		err := m.c.FreeChunk(hs)
		if len(bad) == 0 {
			if err != nil {
				return violationf(ErrContract, "FreeChunk of %d live handles: %v", length, err)
			}
		} else {
			var rej *pool.RejectedError
			switch {
			case !errors.As(err, &rej) || !errors.Is(err, pool.ErrInvalidHandle):
				return violationf(ErrContract, "FreeChunk of %d live and %d bad handles = %v, want a *pool.RejectedError", length, len(bad), err)
			case rej.Rejected != len(bad):
				return violationf(ErrAccounting, "FreeChunk of %d live and %d bad handles reported %d rejected", length, len(bad), rej.Rejected)
			case !slices.ContainsFunc(bad, func(x badHandle) bool { return x.h.Block() == rej.First }):
				return violationf(ErrContract, "FreeChunk's rejection names %v as the first refused, which is none of the bad handles", rej.First)
			}
			for _, x := range bad {
				m.count(x, 1)
			}
		}
		for _, b := range chunk {
			m.forget(b, false)
		}
		if err := m.check(fmt.Sprintf("after FreeChunk of %d live and %d bad handles", length, len(bad))); err != nil {
			return err
		}
	}
	return nil
}

func checkClassesDrainOnExhaustion(r *clCase) error {
	m, err := newClassesModel(r)
	if err != nil {
		return err
	}
	for k := range m.cls {
		bs, err := m.fillClass(k)
		if err != nil {
			return err
		}
		snd, err := m.c.NewSender()
		if err != nil {
			return violationf(ErrContract, "NewSender: %v", err)
		}
		// A worker frees the class's blocks one by one; the owner
		// reallocates as many as the worker has freed, with no Drain: the
		// allocations must drain. (A bounded transport may make the worker
		// wait for them.)
		var sent atomic.Int64
		var c crew
		c.Go(func() error {
			for _, b := range bs {
				if err := snd.Free(b.h); err != nil {
					return violationf(ErrContract, "sender Free: %v", err)
				}
				sent.Add(1)
			}
			return nil
		})
		var back backoff
		for got := 0; got < len(bs); {
			if int64(got) == sent.Load() {
				if c.finished() {
					return errors.Join(c.wait(r.ctx, "workers"), violationf(ErrLost, "class %d: the worker freed %d blocks, %d came back", k, len(bs), got))
				}
				if !back.wait(r.ctx) {
					return c.stopped("workers were")
				}
				continue
			}
			back.reset()
			h, err := m.c.Alloc(m.cls[k].Size)
			if err != nil {
				return errors.Join(violationf(ErrLost, "class %d: Alloc with %d of its blocks freed through a sender and no Drain: %v", k, sent.Load()-int64(got), err), c.wait(r.ctx, "workers"))
			}
			if h.Class() != k {
				return errors.Join(violationf(ErrContract, "Alloc(%d) took class %d, want %d", m.cls[k].Size, h.Class(), k), c.wait(r.ctx, "workers"))
			}
			m.forget(bs[got], true)
			mem, err := m.c.Bytes(h)
			if err != nil {
				return errors.Join(violationf(ErrContract, "Bytes of a new block: %v", err), c.wait(r.ctx, "workers"))
			}
			m.tag++
			stamp(mem, len(mem), m.tag)
			nb := &clBlock{h: h, k: k, n: m.cls[k].Size, tag: m.tag, at: len(m.blocks)}
			m.live[h], m.blocks = nb, append(m.blocks, nb)
			m.taken[k][h.Block().Index()] = true
			w := &m.want[k]
			w.Live++
			w.Free--
			w.Allocs++
			w.Requested += uint64(nb.n)
			got++
		}
		if err := c.wait(r.ctx, "workers"); err != nil {
			return err
		}
		if err := snd.Close(); err != nil {
			return violationf(ErrContract, "Sender.Close: %v", err)
		}
		if err := m.check(fmt.Sprintf("class %d, after allocations that drained", k)); err != nil {
			return err
		}
		if err := m.freeAll(); err != nil {
			return err
		}
	}
	return nil
}

func checkClassesRemote(r *clCase) error {
	if err := classesExchange(r, r.x, false); err != nil {
		return err
	}
	c, err := r.another()
	if err != nil {
		return err
	}
	if err := classesExchange(r, c, true); err != nil {
		return fmt.Errorf("with a sender per request: %w", err)
	}
	return nil
}

// classesExchange has workers free mixed-class chunks the owner allocates,
// through their own senders, while the owner allocates and drains, and
// checks that every block comes back exactly once. With perRequest each
// worker makes a sender per chunk and retires it once the chunk is freed.
func classesExchange(r *clCase, c clsSubject, perRequest bool) error {
	m, err := newClModel(c)
	if err != nil {
		return err
	}
	ctx := r.ctx
	const workers = 4
	chunks := scaled(150)
	type job struct {
		hs  []classes.Handle
		mem [][]byte
	}
	// live[k][i] is set by the owner when it hands block i of class k out
	// and cleared by the worker just before it frees the block.
	live := make([][]atomic.Bool, len(m.cls))
	for k, cl := range m.cls {
		live[k] = make([]atomic.Bool, cl.Blocks)
	}
	jobs := make([]chan job, workers)
	var freedJobs atomic.Int64
	var submitted [workers]atomic.Uint64
	var crw crew
	for w := range workers {
		jobs[w] = make(chan job, chunks)
		var snd ClassesSender
		if !perRequest {
			if snd, err = m.c.NewSender(); err != nil {
				return violationf(ErrContract, "NewSender: %v", err)
			}
		}
		crw.Go(func() error {
			var bad error
			for j := range jobs[w] {
				if perRequest {
					var err error
					if snd, err = m.c.NewSender(); err != nil {
						return violationf(ErrContract, "NewSender on a worker: %v", err)
					}
				}
				before := snd.Submitted()
				for i, h := range j.hs {
					if v := j.mem[i][0]; v != byte(h.Block().Generation()) && bad == nil {
						bad = violationf(ErrAliased, "worker read %#x in %v, the owner wrote %#x", v, h, byte(h.Block().Generation()))
					}
					j.mem[i][0] = 0
					live[h.Class()][h.Block().Index()].Store(false)
				}
				var err error
				if len(j.hs)%2 == 0 || len(j.hs) > 8 {
					err = snd.FreeChunk(j.hs)
				} else {
					for _, h := range j.hs {
						if err = snd.Free(h); err != nil {
							break
						}
					}
				}
				if err != nil && bad == nil {
					bad = violationf(ErrContract, "sender freeing %d handles: %v", len(j.hs), err)
				}
				if n := snd.Submitted() - before; n != uint64(len(j.hs)) && bad == nil {
					bad = violationf(ErrAccounting, "Sender.Submitted grew by %d for %d handles freed", n, len(j.hs))
				}
				submitted[w].Add(uint64(len(j.hs)))
				if perRequest {
					if err := snd.Close(); err != nil && bad == nil {
						bad = violationf(ErrContract, "Sender.Close = %v, want nil", err)
					}
					if err := snd.FreeChunk(j.hs[:1]); !errors.Is(err, pool.ErrClosed) && bad == nil {
						bad = violationf(ErrContract, "FreeChunk of a retired sender = %v, want pool.ErrClosed", err)
					}
				}
				freedJobs.Add(1)
				if ctx.Err() != nil {
					return bad
				}
			}
			return bad
		})
	}
	stop := func(err error) error {
		for _, j := range jobs {
			close(j)
		}
		var b backoff
		for !crw.finished() {
			if n, _ := m.c.Drain(); n > 0 {
				b.reset()
			} else if !b.wait(ctx) {
				return errors.Join(err, crw.stopped("workers were"))
			}
		}
		return errors.Join(err, crw.wait(ctx, "workers"))
	}
	drain := func() (int, error) {
		n, err := m.c.Drain()
		if err != nil {
			return n, violationf(ErrDuplicated, "a drain rejected handles that were freed once each: %v", err)
		}
		return n, nil
	}
	rng := rand.New(rand.NewPCG(1, 2))
	sent := make([]uint64, len(m.cls))
	var b backoff
	for dispatched := 0; dispatched < chunks*workers; {
		if _, err := drain(); err != nil {
			return stop(err)
		}
		want := 1 + rng.IntN(12)
		if rng.IntN(16) == 0 {
			want = 1 + rng.IntN(40)
		}
		var hs []classes.Handle
		var mem [][]byte
		for range want {
			n := 1 + rng.IntN(m.largest())
			h, buf, err := m.c.AllocBytes(n)
			if errors.Is(err, pool.ErrExhausted) {
				continue // workers hold that class: another size, or a smaller job
			} else if err != nil {
				return stop(violationf(ErrContract, "AllocBytes(%d): %v", n, err))
			}
			k, idx := h.Class(), h.Block().Index()
			if k < 0 || k >= len(m.cls) || idx < 0 || idx >= m.cls[k].Blocks {
				return stop(violationf(ErrContract, "AllocBytes(%d) gave block %d of class %d", n, idx, k))
			}
			if live[k][idx].Swap(true) {
				return stop(violationf(ErrDuplicated, "block %d of class %d handed out again while a worker still holds it", idx, k))
			}
			buf[0] = byte(h.Block().Generation())
			hs, mem = append(hs, h), append(mem, buf)
			sent[k]++
		}
		if len(hs) == 0 {
			// Workers hold the blocks: once every dispatched job has been
			// freed, a drain that brings nothing means blocks are lost.
			idle := freedJobs.Load() == int64(dispatched)
			n, err := drain()
			if err != nil {
				return stop(err)
			}
			if n == 0 && idle {
				return stop(violationf(ErrLost, "every job was freed by its worker, yet the allocator stays exhausted: %d blocks never came back", m.c.Stats().Live()))
			}
			if n > 0 {
				b.reset()
			} else if !b.wait(ctx) {
				return stop(violationf(ErrDeadlock, "allocator exhausted and workers stuck"))
			}
			continue
		}
		b.reset()
		jobs[dispatched%workers] <- job{hs, mem}
		dispatched++
	}
	if err := stop(nil); err != nil {
		return err
	}
	if _, err := m.drainDry(ctx); err != nil {
		return err
	}
	st := m.c.Stats()
	var total uint64
	for k, cs := range st.Classes {
		total += sent[k]
		switch {
		case cs.RemoteDrained > cs.RemoteSubmitted:
			return violationf(ErrDuplicated, "class %d: drained %d handles, senders submitted %d", k, cs.RemoteDrained, cs.RemoteSubmitted)
		case cs.Live != 0:
			return violationf(ErrLost, "class %d: %d blocks never came back (submitted %d, drained %d)", k, cs.Live, cs.RemoteSubmitted, cs.RemoteDrained)
		case cs.RemoteSubmitted != sent[k] || cs.RemoteDrained != sent[k] || cs.Frees != sent[k] || cs.Allocs != sent[k]:
			return violationf(ErrAccounting, "class %d: %d blocks freed remotely; stats say submitted %d, drained %d, frees %d, allocs %d",
				k, sent[k], cs.RemoteSubmitted, cs.RemoteDrained, cs.Frees, cs.Allocs)
		}
	}
	var subs uint64
	for w := range submitted {
		subs += submitted[w].Load()
	}
	if subs != total {
		return violationf(ErrAccounting, "the senders' Submitted sums to %d, they freed %d", subs, total)
	}
	return nil
}

func checkClassesSenderRejects(r *clCase) error {
	m, err := newClassesModel(r)
	if err != nil {
		return err
	}
	snd, err := m.c.NewSender()
	if err != nil {
		return violationf(ErrContract, "NewSender: %v", err)
	}
	for round := range scaled(40) {
		var good []*clBlock
		for k := range m.cls {
			for range 1 + round%3 {
				b, err := m.alloc(m.cls[k].Size, viaAlloc, 0)
				if err != nil || b == nil {
					return errors.Join(err, violationf(ErrContract, "round %d: class %d refused", round, k))
				}
				good = append(good, b)
			}
		}
		hs := make([]classes.Handle, 0, len(good)+2)
		for _, b := range good {
			hs = append(hs, b.h)
		}
		unknown := 1 + round%2
		for i := range unknown {
			hs = slices.Insert(hs, (i*7)%len(hs), mkClassHandle(good[i].h.Block(), uint32(len(m.cls)+i)))
		}
		before := snd.Submitted()
		var sendErr error
		got, reports, err := m.sendDraining(r, func() error { sendErr = snd.FreeChunk(hs); return nil })
		if err != nil {
			return err
		}
		var rej *pool.RejectedError
		switch {
		case !errors.As(sendErr, &rej) || !errors.Is(sendErr, classes.ErrUnknownClass) || !errors.Is(sendErr, pool.ErrInvalidHandle):
			return violationf(ErrContract, "round %d: sender FreeChunk with %d handles naming no class = %v, want a *pool.RejectedError matching classes.ErrUnknownClass", round, unknown, sendErr)
		case rej.Rejected != unknown:
			return violationf(ErrAccounting, "round %d: sender FreeChunk refused %d handles naming no class, reported %d", round, unknown, rej.Rejected)
		case snd.Submitted()-before != uint64(len(good)):
			return violationf(ErrAccounting, "round %d: Sender.Submitted grew by %d, %d good handles were sent", round, snd.Submitted()-before, len(good))
		case len(reports) > 0:
			return violationf(ErrDuplicated, "round %d: a drain rejected handles freed once each: %v", round, reports[0])
		case got != len(good):
			return violationf(ErrLost, "round %d: drains brought %d of the %d good handles sent beside bad ones", round, got, len(good))
		}
		m.rejected += uint64(unknown)
		for _, b := range good {
			m.forget(b, true)
		}
		if err := m.check(fmt.Sprintf("round %d, after a sender refused handles naming no class", round)); err != nil {
			return err
		}
		// Stale handles beside good ones: the drain refuses those, frees
		// these, and counts both.
		var more []*clBlock
		for k := range m.cls {
			b, err := m.alloc(m.cls[k].Size, viaAlloc, 0)
			if err != nil || b == nil {
				return errors.Join(err, violationf(ErrContract, "round %d: class %d refused", round, k))
			}
			more = append(more, b)
		}
		hs = hs[:0]
		for _, b := range more {
			hs = append(hs, b.h)
		}
		stale := good[round%len(good)].h
		hs = append(hs, stale)
		got, reports, err = m.sendDraining(r, func() error {
			if err := snd.FreeChunk(hs); err != nil {
				return violationf(ErrContract, "sender FreeChunk: %v", err)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if got != len(more) || len(reports) != 1 || !errors.As(reports[0], &rej) || !errors.Is(reports[0], pool.ErrStaleHandle) || rej.Rejected != 1 {
			return violationf(ErrContract, "round %d: drains of %d good handles and one stale one freed %d and reported %v, want %d freed and one *pool.RejectedError of a stale handle", round, len(more), got, reports, len(more))
		}
		for _, b := range more {
			m.forget(b, true)
		}
		w := &m.want[stale.Class()]
		w.RemoteSubmitted++
		w.RemoteDrained++
		w.Rejected++
		if err := m.check(fmt.Sprintf("round %d, after a drain refused a stale handle", round)); err != nil {
			return err
		}
	}
	return nil
}

// sendsFail checks that every send path of snd fails with pool.ErrClosed.
func classSendsFail(who string, snd ClassesSender, h classes.Handle) error {
	for _, n := range []int{0, 1, 2, 17} {
		chunk := make([]classes.Handle, n)
		for i := range chunk {
			chunk[i] = h
		}
		if err := snd.FreeChunk(chunk); !errors.Is(err, pool.ErrClosed) {
			return violationf(ErrContract, "FreeChunk of %d handles through %s = %v, want pool.ErrClosed", n, who, err)
		}
	}
	if err := snd.Free(h); !errors.Is(err, pool.ErrClosed) {
		return violationf(ErrContract, "Free through %s = %v, want pool.ErrClosed", who, err)
	}
	return nil
}

func checkClassesSenderRetire(r *clCase) error {
	m, err := newClassesModel(r)
	if err != nil {
		return err
	}
	for round := range scaled(20) {
		snd, err := m.c.NewSender()
		if err != nil {
			return violationf(ErrContract, "NewSender: %v", err)
		}
		var bs []*clBlock
		for k := range m.cls {
			for range 1 + round%3 {
				b, err := m.alloc(m.cls[k].Size, viaAlloc, 0)
				if err != nil || b == nil {
					return errors.Join(err, violationf(ErrContract, "class %d refused", k))
				}
				bs = append(bs, b)
			}
		}
		hs := make([]classes.Handle, len(bs))
		for i, b := range bs {
			hs[i] = b.h
		}
		// Freed, then retired before any drain: what it freed still
		// comes back.
		var c crew
		c.Go(func() error {
			if err := snd.FreeChunk(hs[:len(hs)/2]); err != nil {
				return violationf(ErrContract, "sender FreeChunk: %v", err)
			}
			for _, h := range hs[len(hs)/2:] {
				if err := snd.Free(h); err != nil {
					return violationf(ErrContract, "sender Free: %v", err)
				}
			}
			if err := snd.Close(); err != nil {
				return violationf(ErrContract, "Sender.Close = %v, want nil", err)
			}
			return nil
		})
		got := 0
		var back backoff
		for !c.finished() {
			n, err := m.c.Drain()
			if err != nil {
				return errors.Join(violationf(ErrDuplicated, "a drain rejected handles freed once each: %v", err), c.wait(r.ctx, "senders"))
			}
			got += n
			if n == 0 && !back.wait(r.ctx) {
				return c.stopped("senders were")
			}
		}
		if err := c.wait(r.ctx, "senders"); err != nil {
			return err
		}
		more, err := m.drainDry(r.ctx)
		if err != nil {
			return err
		}
		if got += more; got != len(bs) {
			return violationf(ErrLost, "round %d: drains brought %d of the %d blocks a sender freed before it retired", round, got, len(bs))
		}
		if sub := snd.Submitted(); sub != uint64(len(bs)) {
			return violationf(ErrAccounting, "round %d: a retired sender's Submitted = %d, it freed %d", round, sub, len(bs))
		}
		for _, b := range bs {
			m.forget(b, true)
		}
		if err := classSendsFail("a retired sender", snd, hs[0]); err != nil {
			return err
		}
		if err := snd.Close(); err != nil {
			return violationf(ErrContract, "a second Sender.Close = %v, want nil", err)
		}
		if err := m.check(fmt.Sprintf("round %d, after a sender retired", round)); err != nil {
			return err
		}
	}
	return nil
}

func checkClassesAccounting(r *clCase) error {
	m, err := newClassesModel(r)
	if err != nil {
		return err
	}
	snd, err := m.c.NewSender()
	if err != nil {
		return violationf(ErrContract, "NewSender: %v", err)
	}
	rng := rand.New(rand.NewPCG(10, 11))
	pick := func(most int) []*clBlock {
		n := 1 + rng.IntN(min(most, len(m.blocks)))
		var bs []*clBlock
		for _, i := range rng.Perm(len(m.blocks))[:n] {
			bs = append(bs, m.blocks[i])
		}
		return bs
	}
	for step := range scaled(3000) {
		if r.ctx.Err() != nil {
			return violationf(ErrDeadlock, "step %d: stopped by the watchdog", step)
		}
		var err error
		switch op := rng.IntN(20); {
		case op < 8 || len(m.blocks) == 0:
			k := rng.IntN(len(m.cls))
			n := 1 + rng.IntN(m.cls[k].Size)
			_, err = m.alloc(n, rng.IntN(3), k)
		case op < 11:
			err = m.free(m.blocks[rng.IntN(len(m.blocks))])
		case op < 13:
			bs := pick(8)
			hs := make([]classes.Handle, len(bs))
			for i, b := range bs {
				hs[i] = b.h
			}
			if err = m.c.FreeChunk(hs); err != nil {
				err = violationf(ErrContract, "FreeChunk of %d live handles: %v", len(hs), err)
			} else {
				for _, b := range bs {
					m.forget(b, false)
				}
			}
		case op < 15:
			err = m.remoteFree(r, snd, pick(8), op == 14)
		case op < 17 && len(m.stale) > 0:
			h := m.stale[rng.IntN(len(m.stale))]
			if got := m.c.Free(h); !errors.Is(got, pool.ErrStaleHandle) {
				err = violationf(ErrAliased, "Free of the stale %v = %v, want pool.ErrStaleHandle", h, got)
			} else {
				m.want[h.Class()].Rejected++
			}
		case op < 18:
			h := mkClassHandle(m.blocks[0].h.Block(), uint32(len(m.cls)+rng.IntN(3)))
			if got := m.c.Free(h); !errors.Is(got, classes.ErrUnknownClass) {
				err = violationf(ErrContract, "Free of a handle naming no class = %v, want classes.ErrUnknownClass", got)
			} else {
				m.rejected++
			}
		default:
			_, err = m.drainDry(r.ctx)
		}
		if err == nil {
			err = m.check("")
		}
		if err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
	}
	return nil
}

// classesNotBehind checks that st, read after prev, went back on no
// counter and changed no constant, class by class.
func classesNotBehind(prev, st classes.Stats) error {
	if len(st.Classes) != len(prev.Classes) {
		return violationf(ErrAccounting, "the number of classes changed from %d to %d", len(prev.Classes), len(st.Classes))
	}
	if st.Rejected < prev.Rejected {
		return violationf(ErrAccounting, "Rejected went back from %d to %d", prev.Rejected, st.Rejected)
	}
	for k := range st.Classes {
		if err := notBehind(prev.Classes[k].Stats, st.Classes[k].Stats); err != nil {
			return fmt.Errorf("class %d: %w", k, err)
		}
		if st.Classes[k].Requested < prev.Classes[k].Requested {
			return violationf(ErrAccounting, "class %d: Requested went back from %d to %d", k, prev.Classes[k].Requested, st.Classes[k].Requested)
		}
	}
	return nil
}

// classIdentities checks a snapshot: every class, each one's identities.
func classIdentities(st classes.Stats, n int) error {
	if len(st.Classes) != n {
		return violationf(ErrAccounting, "a snapshot has %d classes, the allocator %d", len(st.Classes), n)
	}
	for k, cs := range st.Classes {
		if err := identities(cs.Stats); err != nil {
			return fmt.Errorf("class %d: %w", k, err)
		}
		if cs.Requested > cs.HandedOut() {
			return violationf(ErrAccounting, "class %d: Requested %d > Allocs × BlockSize %d", k, cs.Requested, cs.HandedOut())
		}
	}
	return nil
}

func checkClassesSnapshot(r *clCase) error {
	m, err := newClassesModel(r)
	if err != nil {
		return err
	}
	ctx, c := r.ctx, m.c
	n := len(m.cls)
	if err := classIdentities(c.Snapshot(), n); err != nil {
		return fmt.Errorf("the first snapshot: %w", err)
	}
	if err := checkClassesSnapshotFresh(r, m); err != nil {
		return err
	}
	if err := checkClassesOwnSlices(m); err != nil {
		return err
	}
	quit := make(chan struct{})
	var scrape crew
	scrape.Go(func() error {
		prev := c.Snapshot()
		var first error
		for i := 1; ; i++ {
			select {
			case <-quit:
				return first
			case <-ctx.Done():
				return first
			default:
			}
			st := c.Snapshot()
			err := classIdentities(st, n)
			if err == nil {
				err = classesNotBehind(prev, st)
			}
			if err != nil && first == nil {
				first = fmt.Errorf("snapshot %d: %w", i, err)
			}
			prev = st
			if i%64 == 0 {
				var b backoff
				b.n = spinYields
				b.wait(ctx)
			}
		}
	})
	snd, err := c.NewSender()
	if err != nil {
		close(quit)
		return errors.Join(violationf(ErrContract, "NewSender: %v", err), scrape.wait(ctx, "scrapers"))
	}
	rng := rand.New(rand.NewPCG(12, 13))
	for step := range scaled(1500) {
		switch op := rng.IntN(10); {
		case op < 5 || len(m.blocks) == 0:
			_, err = m.alloc(1+rng.IntN(m.largest()), viaAlloc, 0)
		case op < 7:
			err = m.free(m.blocks[rng.IntN(len(m.blocks))])
		case op < 8:
			err = m.remoteFree(r, snd, m.blocks[len(m.blocks)-1:], false)
		case op < 9:
			if len(m.stale) > 0 {
				_ = c.Free(m.stale[rng.IntN(len(m.stale))]) // refused and counted
			}
			_, err = c.Drain()
		default:
			_, err = c.Drain()
		}
		if err != nil {
			close(quit)
			return errors.Join(fmt.Errorf("step %d: %w", step, err), scrape.wait(ctx, "scrapers"))
		}
	}
	close(quit)
	if err := scrape.wait(ctx, "scrapers"); err != nil {
		return err
	}
	st := c.Stats()
	snap := c.Snapshot()
	if !slices.Equal(st.Classes, snap.Classes) || st.Rejected != snap.Rejected {
		return violationf(ErrAccounting, "Snapshot right after Stats differs from it: %s", fieldDiff(snap, st))
	}
	return nil
}

func checkClassesClose(r *clCase) error {
	m, err := newClassesModel(r)
	if err != nil {
		return err
	}
	c := m.c
	var live []*clBlock
	for k := range m.cls {
		b, err := m.alloc(m.cls[k].Size, viaAlloc, 0)
		if err != nil || b == nil {
			return errors.Join(err, violationf(ErrContract, "class %d refused", k))
		}
		live = append(live, b)
	}
	snd, err := c.NewSender()
	if err != nil {
		return violationf(ErrContract, "NewSender: %v", err)
	}
	if err := m.remoteFree(r, snd, live[:1], false); err != nil {
		return err
	}
	h := live[1].h
	final := c.Stats()
	if err := c.Close(); err != nil {
		return violationf(ErrContract, "Close: %v", err)
	}
	_, aErr := c.Alloc(1)
	_, _, bErr := c.AllocBytes(1)
	_, cErr := c.AllocClass(0, 1)
	_, yErr := c.Bytes(h)
	_, dErr := c.Drain()
	_, sErr := c.NewSender()
	for _, call := range [...]struct {
		name string
		err  error
	}{
		{"Alloc", aErr}, {"AllocBytes", bErr}, {"AllocClass", cErr}, {"Bytes", yErr}, {"Drain", dErr},
		{"NewSender", sErr}, {"Free", c.Free(h)}, {"FreeChunk", c.FreeChunk([]classes.Handle{h})},
		{"Free of the zero handle", c.Free(classes.Handle{})}, {"Close", c.Close()},
	} {
		if !errors.Is(call.err, pool.ErrClosed) {
			return violationf(ErrContract, "%s after Close = %v, want pool.ErrClosed", call.name, call.err)
		}
	}
	if err := classSendsFail("a sender of a closed allocator", snd, h); err != nil {
		return err
	}
	if st := c.Stats(); !slices.Equal(st.Classes, final.Classes) || st.Rejected != final.Rejected {
		return violationf(ErrAccounting, "Stats after Close differs from Stats at Close: %s", fieldDiff(st, final))
	}
	if snap := c.Snapshot(); !slices.Equal(snap.Classes, final.Classes) || snap.Rejected != final.Rejected {
		return violationf(ErrAccounting, "Snapshot after Close differs from Stats at Close: %s", fieldDiff(snap, final))
	}
	return nil
}

func checkClassesAllocs(r *clCase) error {
	m, err := newClassesModel(r)
	if err != nil {
		return err
	}
	c := m.c
	snd, err := c.NewSender()
	if err != nil {
		return violationf(ErrContract, "NewSender: %v", err)
	}
	stale, err := c.Alloc(1)
	if err != nil {
		return violationf(ErrContract, "Alloc: %v", err)
	}
	if err := c.Free(stale); err != nil {
		return violationf(ErrContract, "Free: %v", err)
	}
	// One handle of every class per chunk: it fits any transport.
	chunk := make([]classes.Handle, len(m.cls))
	rng := rand.New(rand.NewPCG(31, 32))
	big := make([]classes.Handle, 0, 16*len(m.cls))
	fill := func() error {
		for k := range chunk {
			h, err := c.Alloc(m.cls[k].Size)
			if err != nil {
				return violationf(ErrContract, "Alloc(%d): %v", m.cls[k].Size, err)
			}
			chunk[k] = h
		}
		return nil
	}
	for _, op := range []struct {
		name string
		op   func() error
	}{
		{"Alloc+Free", func() error {
			h, err := c.Alloc(m.cls[1].Size)
			if err != nil {
				return contractErr("Alloc", err)
			}
			return contractErr("Free", c.Free(h))
		}},
		{"AllocBytes+Bytes+Free", func() error {
			h, _, err := c.AllocBytes(m.cls[0].Size)
			if err != nil {
				return contractErr("AllocBytes", err)
			}
			if _, err := c.Bytes(h); err != nil {
				return contractErr("Bytes", err)
			}
			return contractErr("Free", c.Free(h))
		}},
		{"AllocClass+Free", func() error {
			h, err := c.AllocClass(len(m.cls)-1, 1)
			if err != nil {
				return contractErr("AllocClass", err)
			}
			return contractErr("Free", c.Free(h))
		}},
		{"FreeChunk of a mixed chunk", func() error {
			if err := fill(); err != nil {
				return err
			}
			return contractErr("FreeChunk", c.FreeChunk(chunk))
		}},
		{"FreeChunk of 16 handles per class", func() error {
			var err error
			if big, err = bigChunk(m, rng, 16, big); err != nil {
				return err
			}
			return contractErr("FreeChunk", c.FreeChunk(big))
		}},
		{"a rejected Free", func() error {
			if err := c.Free(stale); !errors.Is(err, pool.ErrStaleHandle) {
				return violationf(ErrContract, "Free of a stale handle = %v", err)
			}
			return nil
		}},
		{"sender FreeChunk+Drain", func() error {
			if err := fill(); err != nil {
				return err
			}
			if err := snd.FreeChunk(chunk); err != nil {
				return contractErr("sender FreeChunk", err)
			}
			return drainBlocks(c.Drain, len(chunk))
		}},
		{"sender Free+Drain", func() error {
			h, err := c.Alloc(1)
			if err != nil {
				return contractErr("Alloc", err)
			}
			if err := snd.Free(h); err != nil {
				return contractErr("sender Free", err)
			}
			return drainBlocks(c.Drain, 1)
		}},
		{"an idle Drain", func() error {
			_, err := c.Drain()
			return contractErr("Drain", err)
		}},
	} {
		if err := noAllocs(r.allocRuns(), op.name, op.op); err != nil {
			return err
		}
	}
	return nil
}
