package conformance

import (
	"testing"

	"github.com/locus-go/locus/pool"
)

// TestPool runs the end-to-end suite over a pool of any backing, transport
// and policy: generation safety (stale, double-freed, foreign, zero, forged
// and out-of-range handles rejected and never aliased to live memory, also
// after 2^16+1 reuses of a block and across pools closed before), the
// policy's reuse order, exhaustion and draining until an allocation is
// satisfied, exactly-once remote frees with workers racing the owner, every
// send path of a Sender and its retirement, exact accounting (also in
// snapshots read by another goroutine while the pool is busy), close
// semantics and allocation-free hot paths. newPool is called once per case,
// more often where a case needs several pools; it should return a fresh
// pool of at least 64 blocks. The suite closes the pools it is given.
func TestPool[B pool.Backing, T pool.Transport, P pool.ReusePolicy](t *testing.T, newPool func(t *testing.T) *pool.Pool[B, T, P]) {
	t.Helper()
	poolSuite().runT(t, adaptT(newPool, func(p *pool.Pool[B, T, P]) subject { return poolSubject[B, T, P]{p} }))
}

// CheckPool runs the pool suite outside go test (it calls no testing
// function) and returns every violation found, joined with errors.Join.
func CheckPool[B pool.Backing, T pool.Transport, P pool.ReusePolicy](newPool func() (*pool.Pool[B, T, P], error)) error {
	return poolSuite().runCheck(adapt(newPool, func(p *pool.Pool[B, T, P]) subject { return poolSubject[B, T, P]{p} }))
}

// subject is the pool surface the suite exercises. *pool.Pool satisfies it
// through poolSubject; the suite's own tests also feed it broken pools.
type subject interface {
	Alloc() (pool.Handle, error)
	AllocBytes() (pool.Handle, []byte, error)
	AllocChunk(dst []pool.Handle) error
	Free(h pool.Handle) error
	FreeChunk(chunk []pool.Handle) error
	Bytes(h pool.Handle) ([]byte, error)
	Drain() (int, error)
	NewSender() (sender, error)
	Stats() pool.Stats
	Snapshot() pool.Stats
	Close() error
	// order is the order the pool's policy declares.
	order() pool.Order
	// abort releases goroutines blocked in the pool's transport without
	// freeing the pool's memory.
	abort()
	// bounds reports the transport's bounds, if it is bounded.
	bounds() (pool.Bounds, bool)
}

// sender is the remote side of a subject: *pool.Sender.
type sender interface {
	FreeChunk(chunk []pool.Handle) error
	Free(h pool.Handle) error
	TryFreeChunk(chunk []pool.Handle) (int, error)
	Close() error
	Submitted() uint64
}

type poolSubject[B pool.Backing, T pool.Transport, P pool.ReusePolicy] struct {
	*pool.Pool[B, T, P]
}

func (s poolSubject[B, T, P]) NewSender() (sender, error) {
	snd, err := s.Pool.NewSender()
	if err != nil {
		return nil, err
	}
	return snd, nil
}

func (s poolSubject[B, T, P]) order() pool.Order { return s.Policy().Order() }
func (s poolSubject[B, T, P]) abort()            { _ = s.Transport().Close() }
func (s poolSubject[B, T, P]) bounds() (pool.Bounds, bool) {
	return boundsOf(s.Transport())
}

func poolSuite() suite[subject] {
	return suite[subject]{
		cases:   poolCases,
		abort:   func(s subject) { s.abort() },
		release: func(s subject) { _ = s.Close() },
	}
}

type plRun = run[subject]

var poolCases = []testCase[subject]{
	{name: "FreshOrder", run: checkFresh, explanation: "a fresh pool hands out every block once, 0, 1, 2, ... under LIFO and n-1, n-2, ... under FIFO, then reports pool.ErrExhausted; its blocks read as zero, also in pools made after others were written all over and closed, while from none to several others are live"},
	{name: "ReuseOrder", run: checkOrder, explanation: "over thousands of local and remote frees, LIFO hands out the most recently freed block first and FIFO the one free longest"},
	{name: "StaleHandle", run: checkStale, explanation: "a freed handle is rejected by Free, FreeChunk, Bytes and remote frees with pool.ErrStaleHandle, also after its block is reused, every time, and after 2^16 reuses of its block (generations do not wrap at 16 bits), and never reaches the new owner's memory"},
	{name: "ForeignHandle", run: checkForeign, explanation: "pools made by one constructor have distinct ids and disjoint memory, and a handle of one is rejected by another with pool.ErrForeignHandle, changing nothing, also by pools made after it was closed that hand out the very same blocks"},
	{name: "ForgedHandle", run: checkForged, explanation: "the zero handle, out-of-range indices and forged generations are rejected with pool.ErrZeroHandle, pool.ErrOutOfRange and pool.ErrStaleHandle; only the exact live handle is accepted"},
	{name: "NoAliasing", run: checkNoAliasing, explanation: "live blocks never share memory: what the owner writes into one live block stays there through churn"},
	{name: "Exhaustion", run: checkExhaustion, explanation: "an empty pool reports pool.ErrExhausted; AllocChunk is all or nothing; the high-water mark records the peak"},
	{name: "DrainOnExhaustion", run: checkDrainOnExhaustion, explanation: "an allocation that finds the free list short drains pending remote frees first, and counts those drains"},
	{name: "DrainUntilSatisfied", run: checkDrainUntilSatisfied, explanation: "with no block free and exactly k blocks freed through senders, Alloc k times and AllocChunk(k) succeed without a Drain (a bounded transport needs several drains), and AllocChunk(k+1) fails having allocated nothing"},
	{name: "RemoteExactlyOnce", run: checkRemote, explanation: "with workers freeing chunks of every length through their own senders (FreeChunk, Free and TryFreeChunk) while the owner allocates and drains, every block comes back exactly once and no live block is handed out twice"},
	{name: "RemoteRejects", run: checkRemoteRejects, explanation: "a drain rejects bad remotely freed handles, counts and reports them, and still frees the good handles beside them"},
	{name: "TryFreeChunk", run: checkTryFree, explanation: "Sender.TryFreeChunk frees from the front what the transport takes without waiting and reports pool.ErrFull for the rest, which stays live; on an unbounded transport it frees everything"},
	{name: "SenderRetire", run: checkSenderRetire, explanation: "after Sender.Close every send path of that sender fails with pool.ErrClosed at every length, Close again returns nil, and everything it freed before is drained exactly once and counted, also with per-request senders retiring while the owner drains"},
	{name: "RetiredSendersForgotten", run: checkRetiredSenders, whole: true, explanation: "thousands of retired senders, idle ones too, once drained, keep no memory and no goroutines in the pool or its transport"},
	{name: "Accounting", run: checkAccounting, explanation: "after every operation the counts match a model and the identities of pool.Stats hold: Allocs-Frees = Live, Live+Free = Capacity, HighWater = the peak of Live, RemoteSubmitted = what the senders submitted, the drain histogram sums to Drains"},
	{name: "Snapshot", run: checkSnapshot, explanation: "Snapshot may be read by another goroutine while the owner, and workers, keep the pool busy: every snapshot satisfies the identities of pool.Stats, counters never go back, a snapshot asked for while the owner only drains reflects the owner's allocations (the owner publishes at Drain when asked), and after the owner's last Drain it equals Stats"},
	{name: "Close", run: checkClose, explanation: "Close succeeds after every byte of every block was written; after it every call fails with pool.ErrClosed, every send path of every sender too at every chunk length, closing twice is safe, and a sender blocked on a full bounded transport is released"},
	{name: "ZeroAllocs", run: checkPoolAllocs, whole: true, explanation: "Alloc, AllocBytes, AllocChunk, Free, FreeChunk, Bytes, a rejected Free, every send path of a sender, Drain, Stats and Snapshot allocate nothing in steady state"},
}

func capacityOf(s subject) int { return s.Stats().Capacity }
