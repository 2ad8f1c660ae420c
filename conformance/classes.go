package conformance

import (
	"math"
	"testing"

	"github.com/locus-go/locus/classes"
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
	{name: "SmallestClass", run: clModeled(checkClassesSmallest), explanation: "an allocation of n bytes, for n at every class boundary and one byte either side, by Alloc and AllocBytes, takes a block of the smallest class whose blocks hold n, exactly that class's size, as ClassOf says, and counts n in its Requested; Classes lists distinct sizes, smallest first, as Stats does; sizes of 0, below 0 or above the largest class are refused with pool.ErrInvalidArgument (classes.ErrTooLarge above) and change nothing"},
	{name: "AllocClass", run: clModeled(checkClassesAllocClass), explanation: "AllocClass(k, n) takes a block of class k for any n from 1 to its size, also when a smaller class would hold n or the smallest is exhausted, and counts n; a class or size out of range is pool.ErrInvalidArgument and changes nothing"},
	{name: "NoFallback", run: clModeled(checkClassesNoFallback), explanation: "an allocation whose class has no free block fails with pool.ErrExhausted, for every class, without taking a block of a larger class or changing any count, while the other classes still allocate"},
	{name: "NoAliasing", run: clModeled(checkClassesNoAliasing), explanation: "through thousands of random allocations of every size and frees, live blocks never share memory, and a block's memory is exactly its class's size"},
	{name: "StaleHandle", run: clModeled(checkClassesStale), explanation: "a freed handle is rejected by Free, FreeChunk, Bytes and a remote free with pool.ErrStaleHandle, also double-freed and after its block is reused, in every class, hundreds of times, and after 2^16 reuses of its block (generations do not wrap at 16 bits), counted in its class, and never reaches the new owner's memory"},
	{name: "ForeignHandle", run: checkClassesForeign, explanation: "allocators made by one constructor are independent: a handle of one is rejected by another on every path with pool.ErrForeignHandle, counted there, changing nothing, also by allocators made after it was closed that hand out the very same blocks, and their blocks are disjoint memory"},
	{name: "ForgedHandle", run: clModeled(checkClassesForged), explanation: "the zero handle (pool.ErrZeroHandle), handles naming no class (classes.ErrUnknownClass, counted in Stats.Rejected), a live block re-classed to another class (pool.ErrForeignHandle) and forged block handles (pool.ErrOutOfRange, pool.ErrStaleHandle, pool.ErrForeignHandle) are rejected on every path, thousands of times; only the exact live handle is accepted"},
	{name: "FreeChunk", run: clModeled(checkClassesFreeChunk), explanation: "FreeChunk frees chunks of every length mixing every class; bad handles among them are skipped, counted and reported in one *pool.RejectedError whose count is theirs and whose First is one of them, and the good ones are freed"},
	{name: "DrainOnExhaustion", run: clModeled(checkClassesDrainOnExhaustion), explanation: "an allocation whose class has no free block drains the blocks freed through senders first: with every block of a class freed remotely and no Drain, every allocation of that class succeeds"},
	{name: "RemoteExactlyOnce", run: checkClassesRemote, explanation: "with workers freeing mixed-class chunks of every length through their own senders (FreeChunk and Free; senders kept, or made and retired per request) while the owner allocates and drains, every block comes back exactly once, counted in its class, and no live block is handed out twice"},
	{name: "SenderRejects", run: clModeled(checkClassesSenderRejects), explanation: "a sender refuses handles naming no class in a *pool.RejectedError matching classes.ErrUnknownClass, counted in Stats.Rejected, and sends the rest; a drain rejects bad remotely freed handles, counts them in their class and frees the good ones beside them"},
	{name: "SenderRetire", run: clModeled(checkClassesSenderRetire), explanation: "after Sender.Close every send path of that sender fails with pool.ErrClosed at every length, Close again returns nil, and what it freed before is drained exactly once and counted"},
	{name: "Accounting", run: clModeled(checkClassesAccounting), explanation: "after every operation of thousands of random allocations (Alloc, AllocBytes, AllocClass), local and remote frees, mixed chunks and rejected calls, every class's stats equal a model (live, free, high water, allocations, frees, requested bytes, remote frees, rejections) and satisfy the identities of pool.Stats, with Requested at most Allocs × BlockSize"},
	{name: "Snapshot", run: clModeled(checkClassesSnapshot), explanation: "Snapshot may be read by another goroutine while the owner, and workers, keep the allocator busy: every snapshot has every class, satisfies the identities, never goes back, and after Stats it equals Stats; an owner that only drains still publishes when a Snapshot asks; and the slices of Stats, Snapshot and Classes are the caller's: they do not change as the allocator goes on, and edits to them change nothing in the allocator"},
	{name: "Close", run: clModeled(checkClassesClose), explanation: "after Close every call fails with pool.ErrClosed (NewSender, and the senders made before, at every length, too), Close again too, and Stats and Snapshot keep the accounting as it stood at Close"},
	{name: "ZeroAllocs", run: clModeled(checkClassesAllocs), whole: true, explanation: "Alloc, AllocBytes, AllocClass, Free, Bytes, FreeChunk of a mixed chunk, with one handle of each class or many, a rejected Free, a sender's FreeChunk and Free with the Drain that returns them, and an idle Drain allocate nothing in steady state (Stats and Snapshot return a new slice and are left out)"},
}

// Minimal geometry the suite takes.
const (
	classesMin      = 2
	classBlocksMin  = 8
	classesUnknownK = math.MaxUint32
)
