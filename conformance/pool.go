package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/locus-go/locus/internal/race"
	"github.com/locus-go/locus/pool"
)

// TestPool runs the end-to-end suite over a pool of any backing, transport
// and policy: generation safety (stale, double-freed, foreign, zero and
// out-of-range handles rejected and never aliased to live memory), exact
// accounting, reuse order, exhaustion and drain-on-exhaustion, exactly-once
// remote frees with producers racing the owner, close semantics and
// allocation-free hot paths. newPool is called once per case (one case calls
// it twice, for a foreign pool); it should return a fresh pool of at least 64
// blocks. The suite closes the pools it is given.
func TestPool[B pool.Backing, T pool.Transport, P pool.ReusePolicy](t *testing.T, newPool func(t *testing.T) *pool.Pool[B, T, P]) {
	t.Helper()
	poolSuite().runT(t, func(t *testing.T) subject {
		return wrapPool(newPool(t), func() subject { return wrapPool(newPool(t), nil) })
	})
}

// CheckPool runs the pool suite outside go test and returns every violation
// found.
func CheckPool[B pool.Backing, T pool.Transport, P pool.ReusePolicy](newPool func() (*pool.Pool[B, T, P], error)) error {
	return poolSuite().runCheck(func() (subject, error) {
		p, err := newPool()
		if err != nil {
			return nil, err
		}
		return wrapPool(p, func() subject {
			q, err := newPool()
			if err != nil {
				return nil
			}
			return wrapPool(q, nil)
		}), nil
	})
}

// subject is the pool surface the suite exercises. *pool.Pool satisfies it
// through poolSubject; the suite's own tests also feed it broken pools.
type subject interface {
	Alloc() (pool.Handle, error)
	AllocChunk(dst []pool.Handle) error
	Free(h pool.Handle) error
	FreeChunk(chunk []pool.Handle) error
	Bytes(h pool.Handle) ([]byte, error)
	Drain() (int, error)
	NewSender() (sender, error)
	Stats() pool.Stats
	Order() pool.Order
	Close() error
	// other returns a second, independent pool of the same kind, or nil.
	other() subject
	// abort releases goroutines blocked in the pool's transport without
	// freeing the pool's memory.
	abort()
	// bounds reports the transport's bounds, if it is bounded.
	bounds() (pool.Bounds, bool)
}

// sender is the remote side of a subject.
type sender interface {
	FreeChunk(chunk []pool.Handle) error
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

func (s poolSubject[B, T, P]) Order() pool.Order { return s.Policy().Order() }
func (s poolSubject[B, T, P]) other() subject    { return nil }
func (s poolSubject[B, T, P]) abort()            { _ = s.Transport().Close() }
func (s poolSubject[B, T, P]) bounds() (pool.Bounds, bool) {
	if b, ok := any(s.Transport()).(pool.BoundedTransport); ok {
		return b.Bounds(), true
	}
	return pool.Bounds{}, false
}

// sendDraining frees chunk through snd on another goroutine while the owner
// keeps draining, as a bounded transport needs. It returns how many blocks
// the drains freed and what they reported; a failed send is a violation.
func sendDraining(ctx context.Context, s subject, snd sender, chunk []pool.Handle) (int, []error, error) {
	done := make(chan error, 1)
	go func() { done <- snd.FreeChunk(chunk) }()
	drained := 0
	var reports []error
	for {
		select {
		case err := <-done:
			if err != nil {
				return drained, reports, violationf(ErrContract, "sender FreeChunk: %v", err)
			}
			return drained, reports, nil
		case <-ctx.Done():
			return drained, reports, violationf(ErrDeadlock, "sender FreeChunk did not return while the owner drained")
		default:
		}
		n, err := s.Drain()
		drained += n
		if err != nil {
			reports = append(reports, err)
		}
		if n == 0 {
			runtime.Gosched()
		}
	}
}

type withOther struct {
	subject
	mk func() subject
}

func (w withOther) other() subject { return w.mk() }

func wrapPool[B pool.Backing, T pool.Transport, P pool.ReusePolicy](p *pool.Pool[B, T, P], mk func() subject) subject {
	s := poolSubject[B, T, P]{p}
	if mk == nil {
		return s
	}
	return withOther{s, mk}
}

func poolSuite() suite[subject] {
	return suite[subject]{
		cases:   poolCases,
		abort:   func(s subject) { s.abort() },
		release: func(s subject) { _ = s.Close() },
	}
}

var poolCases = []testCase[subject]{
	{
		name:        "FreshOrder",
		explanation: "a fresh pool hands out every block once, 0, 1, 2, ... under LIFO and n-1, n-2, ... under FIFO, then reports pool.ErrExhausted",
		run:         checkFresh,
	},
	{
		name:        "ReuseOrder",
		explanation: "LIFO hands out the most recently freed block first, FIFO the one free longest",
		run:         checkOrder,
	},
	{
		name:        "StaleHandle",
		explanation: "a freed handle is rejected by Free and Bytes with pool.ErrStaleHandle, also after its block is reused, and never reaches the new owner's memory",
		run:         checkStale,
	},
	{
		name:        "ForeignHandle",
		explanation: "a handle of another pool is rejected with pool.ErrForeignHandle and changes nothing",
		run:         checkForeign,
	},
	{
		name:        "ForgedHandle",
		explanation: "the zero handle, an out-of-range index and a forged generation are rejected with pool.ErrZeroHandle, pool.ErrOutOfRange and pool.ErrStaleHandle",
		run:         checkForged,
	},
	{
		name:        "Exhaustion",
		explanation: "an empty pool reports pool.ErrExhausted; AllocChunk is all or nothing; the high-water mark records the peak",
		run:         checkExhaustion,
	},
	{
		name:        "DrainOnExhaustion",
		explanation: "an allocation that finds the free list empty drains pending remote frees first and counts them",
		run:         checkDrainOnExhaustion,
	},
	{
		name:        "RemoteExactlyOnce",
		explanation: "with workers freeing chunks through their own senders while the owner allocates and drains, every block comes back exactly once and no live block is handed out twice",
		run:         checkRemote,
	},
	{
		name:        "RemoteRejects",
		explanation: "a drain rejects bad remotely freed handles, counts and reports them, and still frees the good handles beside them",
		run:         checkRemoteRejects,
	},
	{
		name:        "Accounting",
		explanation: "after every operation Allocs-Frees = Live, Live+Free = Capacity, HighWater = the peak of Live, and the counts match a model",
		run:         checkAccounting,
	},
	{
		name:        "NoAliasing",
		explanation: "live blocks never share memory: what the owner writes into one live block stays there through churn",
		run:         checkNoAliasing,
	},
	{
		name:        "Close",
		explanation: "after Close every call fails with pool.ErrClosed, senders too, and closing twice is safe",
		run:         checkClose,
	},
	{
		name:        "ZeroAllocs",
		explanation: "Alloc, Free, Bytes, a sender's FreeChunk and Drain allocate nothing in steady state",
		run:         checkPoolAllocs,
	},
}

func capacityOf(s subject) int { return s.Stats().Capacity }

func wantIs(what string, err, target error) error {
	if !errors.Is(err, target) {
		return violationf(ErrContract, "%s = %v, want %v", what, err, target)
	}
	return nil
}

// stats compares the counts that a case expects.
func statsWant(s subject, live int, allocs, frees, rejected uint64) error {
	st := s.Stats()
	if st.Live != live || st.Allocs != allocs || st.Frees != frees || st.Rejected != rejected {
		return violationf(ErrAccounting, "stats live=%d allocs=%d frees=%d rejected=%d, want %d %d %d %d",
			st.Live, st.Allocs, st.Frees, st.Rejected, live, allocs, frees, rejected)
	}
	if st.Live+st.Free != st.Capacity || int(st.Allocs-st.Frees) != st.Live {
		return violationf(ErrAccounting, "stats %+v break Live+Free = Capacity or Allocs-Frees = Live", st)
	}
	return nil
}

func checkFresh(ctx context.Context, s subject) error {
	n := capacityOf(s)
	fifo := s.Order() == pool.FIFO
	for i := range n {
		h, err := s.Alloc()
		if err != nil {
			return violationf(ErrContract, "Alloc %d of %d: %v", i+1, n, err)
		}
		want := i
		if fifo {
			want = n - 1 - i
		}
		if h.Index() != want {
			return violationf(ErrOrder, "%v pool's allocation %d is block %d, want %d", s.Order(), i, h.Index(), want)
		}
	}
	if _, err := s.Alloc(); !errors.Is(err, pool.ErrExhausted) {
		return violationf(ErrDuplicated, "Alloc on a pool with every block live = %v, want pool.ErrExhausted", err)
	}
	return statsWant(s, n, uint64(n), 0, 0)
}

func checkOrder(ctx context.Context, s subject) error {
	n := capacityOf(s)
	hs := make([]pool.Handle, n)
	if err := s.AllocChunk(hs); err != nil {
		return violationf(ErrContract, "AllocChunk(%d) on a fresh pool: %v", n, err)
	}
	// Free three blocks in a known order; only they are free now.
	picks := []int{n / 2, 0, n - 1}
	for _, i := range picks {
		if err := s.Free(hs[i]); err != nil {
			return violationf(ErrContract, "Free: %v", err)
		}
	}
	want := []int{n - 1, 0, n / 2} // LIFO: newest first
	if s.Order() == pool.FIFO {
		want = []int{n / 2, 0, n - 1}
	}
	for k, w := range want {
		h, err := s.Alloc()
		if err != nil {
			return violationf(ErrContract, "Alloc: %v", err)
		}
		if h.Index() != hs[w].Index() {
			return violationf(ErrOrder, "%v reuse %d is block %d, want block %d (freed blocks %d, %d, %d in that order)",
				s.Order(), k, h.Index(), hs[w].Index(), hs[picks[0]].Index(), hs[picks[1]].Index(), hs[picks[2]].Index())
		}
	}
	return nil
}

func checkStale(ctx context.Context, s subject) error {
	n := capacityOf(s)
	hs := make([]pool.Handle, n)
	if err := s.AllocChunk(hs); err != nil {
		return violationf(ErrContract, "AllocChunk: %v", err)
	}
	old := hs[3]
	if err := s.Free(old); err != nil {
		return violationf(ErrContract, "Free: %v", err)
	}
	if err := wantIs("second Free of a handle", s.Free(old), pool.ErrStaleHandle); err != nil {
		return fmt.Errorf("%w (%w)", ErrAliased, err)
	}
	if b, err := s.Bytes(old); err == nil || b != nil {
		return violationf(ErrAliased, "Bytes of a freed handle = (%d bytes, %v), want pool.ErrStaleHandle", len(b), err)
	}
	// The only free block is old's: the next allocation reuses it.
	h, err := s.Alloc()
	if err != nil {
		return violationf(ErrContract, "Alloc: %v", err)
	}
	if h == old {
		return violationf(ErrAliased, "reuse gave %v, equal to the freed handle: the old handle would reach the new owner's block", h)
	}
	if h.Index() != old.Index() {
		return violationf(ErrOrder, "the only free block is %d, but Alloc gave %v", old.Index(), h)
	}
	mem, err := s.Bytes(h)
	if err != nil {
		return violationf(ErrContract, "Bytes of the new handle: %v", err)
	}
	fill(mem, 0x5a)
	if b, err := s.Bytes(old); !errors.Is(err, pool.ErrStaleHandle) || b != nil {
		return violationf(ErrAliased, "Bytes of the old handle after reuse = (%d bytes, %v), want pool.ErrStaleHandle", len(b), err)
	}
	if err := s.Free(old); !errors.Is(err, pool.ErrStaleHandle) {
		return violationf(ErrAliased, "Free of the old handle after reuse = %v, want pool.ErrStaleHandle: it would free the new owner's block", err)
	}
	if _, ok := check(mem, 0x5a); !ok {
		return violationf(ErrAliased, "the new owner's block changed")
	}
	if _, err := s.Bytes(h); err != nil {
		return violationf(ErrAliased, "the new handle stopped working after stale calls: %v", err)
	}
	return statsWant(s, n, uint64(n)+1, 1, 4)
}

func checkForeign(ctx context.Context, s subject) error {
	o := s.other()
	if o == nil {
		return nil // no second pool to be had
	}
	defer o.Close()
	foreign, err := o.Alloc()
	if err != nil {
		return violationf(ErrContract, "Alloc on the other pool: %v", err)
	}
	mine, err := s.Alloc()
	if err != nil {
		return violationf(ErrContract, "Alloc: %v", err)
	}
	if foreign.Index() != mine.Index() {
		return violationf(ErrContract, "two fresh pools of one kind started at blocks %d and %d", foreign.Index(), mine.Index())
	}
	if err := wantIs("Free of another pool's handle", s.Free(foreign), pool.ErrForeignHandle); err != nil {
		return fmt.Errorf("%w (%w)", ErrAliased, err)
	}
	if _, err := s.Bytes(foreign); !errors.Is(err, pool.ErrForeignHandle) {
		return violationf(ErrAliased, "Bytes of another pool's handle = %v, want pool.ErrForeignHandle", err)
	}
	if _, err := s.Bytes(mine); err != nil {
		return violationf(ErrContract, "own handle after a foreign free: %v", err)
	}
	return statsWant(s, 1, 1, 0, 2)
}

func checkForged(ctx context.Context, s subject) error {
	h, err := s.Alloc()
	if err != nil {
		return violationf(ErrContract, "Alloc: %v", err)
	}
	n := capacityOf(s)
	if err := wantIs("Free(Handle{})", s.Free(pool.Handle{}), pool.ErrZeroHandle); err != nil {
		return err
	}
	id := poolID(h)
	if err := wantIs("Free of an index past capacity", s.Free(mkHandle(id, uint32(n), h.Generation())), pool.ErrOutOfRange); err != nil {
		return err
	}
	// Block 1 is free, at generation 0: a forged even generation must not
	// match it, nor must a guessed future generation of the live block.
	if _, err := s.Bytes(mkHandle(id, uint32(n-1), 0)); !errors.Is(err, pool.ErrStaleHandle) {
		return violationf(ErrAliased, "Bytes of a free block with a forged generation = %v, want pool.ErrStaleHandle", err)
	}
	if _, err := s.Bytes(mkHandle(id, uint32(h.Index()), h.Generation()+2)); !errors.Is(err, pool.ErrStaleHandle) {
		return violationf(ErrAliased, "Bytes with a guessed generation = %v, want pool.ErrStaleHandle", err)
	}
	return statsWant(s, 1, 1, 0, 4)
}

func checkExhaustion(ctx context.Context, s subject) error {
	n := capacityOf(s)
	hs := make([]pool.Handle, n)
	if err := s.AllocChunk(hs); err != nil {
		return violationf(ErrContract, "AllocChunk(%d): %v", n, err)
	}
	if _, err := s.Alloc(); !errors.Is(err, pool.ErrExhausted) {
		return violationf(ErrContract, "Alloc on an empty pool = %v, want pool.ErrExhausted", err)
	}
	for _, h := range hs[:2] {
		if err := s.Free(h); err != nil {
			return violationf(ErrContract, "Free: %v", err)
		}
	}
	three := make([]pool.Handle, 3)
	if err := s.AllocChunk(three); !errors.Is(err, pool.ErrExhausted) {
		return violationf(ErrContract, "AllocChunk(3) with 2 free = %v, want pool.ErrExhausted", err)
	}
	if err := statsWant(s, n-2, uint64(n), 2, 0); err != nil {
		return fmt.Errorf("after a failed AllocChunk, nothing may be allocated: %w", err)
	}
	if err := s.AllocChunk(three[:2]); err != nil {
		return violationf(ErrContract, "AllocChunk(2) with 2 free: %v", err)
	}
	if hw := s.Stats().HighWater; hw != n {
		return violationf(ErrAccounting, "HighWater = %d, want %d", hw, n)
	}
	return statsWant(s, n, uint64(n)+2, 2, 0)
}

func checkDrainOnExhaustion(ctx context.Context, s subject) error {
	n := capacityOf(s)
	hs := make([]pool.Handle, n)
	if err := s.AllocChunk(hs); err != nil {
		return violationf(ErrContract, "AllocChunk: %v", err)
	}
	snd, err := s.NewSender()
	if err != nil {
		return violationf(ErrContract, "NewSender: %v", err)
	}
	errc := make(chan error, 1)
	go func() { errc <- snd.FreeChunk(hs[:3]) }() // a worker frees 3 blocks
	select {
	case err := <-errc:
		if err != nil {
			return violationf(ErrContract, "sender FreeChunk: %v", err)
		}
	case <-ctx.Done():
		return violationf(ErrDeadlock, "sender FreeChunk did not return")
	}
	// No explicit Drain: the allocation must find the three itself.
	for i := range 3 {
		if _, err := s.Alloc(); err != nil {
			return violationf(ErrLost, "Alloc %d with 3 blocks remotely freed and no Drain: %v", i+1, err)
		}
	}
	st := s.Stats()
	if st.RemoteSubmitted != 3 || st.RemoteDrained != 3 || st.Frees != 3 {
		return violationf(ErrAccounting, "after drain-on-exhaustion: submitted %d drained %d frees %d, want 3 3 3 (a drain inside Alloc must be counted)",
			st.RemoteSubmitted, st.RemoteDrained, st.Frees)
	}
	return statsWant(s, n, uint64(n)+3, 3, 0)
}

func checkRemote(ctx context.Context, s subject) error {
	const workers = 4
	chunks := 400
	if race.Enabled || testing.Short() {
		chunks = 120
	}
	n := capacityOf(s)
	type job struct {
		hs  []pool.Handle
		mem [][]byte
	}
	// live[i] is set by the owner when it hands block i out and cleared by
	// the worker just before it frees the block: finding it set at
	// allocation means a live block was handed out twice.
	live := make([]atomic.Bool, n)
	jobs := make([]chan job, workers)
	errc := make(chan error, 1)
	report := func(err error) {
		select {
		case errc <- err:
		default: // keep the first
		}
	}
	var freedJobs atomic.Int64 // jobs whose FreeChunk returned
	var wg sync.WaitGroup
	for w := range workers {
		jobs[w] = make(chan job, chunks)
		snd, err := s.NewSender()
		if err != nil {
			return violationf(ErrContract, "NewSender: %v", err)
		}
		wg.Go(func() {
			for j := range jobs[w] {
				// Read what the owner wrote, then write, so the race
				// detector sees the handoff both ways.
				// A worker that finds a violation reports it and goes on
				// freeing, so the owner is not left waiting for blocks.
				for k, h := range j.hs {
					if j.mem[k][0] != byte(h.Generation()) {
						report(violationf(ErrAliased, "worker read %#x in %v, owner wrote %#x", j.mem[k][0], h, byte(h.Generation())))
					}
					j.mem[k][0] = 0
					live[h.Index()].Store(false)
				}
				if err := snd.FreeChunk(j.hs); err != nil {
					report(violationf(ErrContract, "sender FreeChunk: %v", err))
				}
				freedJobs.Add(1)
			}
		})
	}
	// stop ends the workers. It keeps draining while they finish: a worker
	// blocked on a full bounded transport needs the owner to make room.
	stop := func() {
		for _, c := range jobs {
			close(c)
		}
		idle := make(chan struct{})
		go func() { wg.Wait(); close(idle) }()
		for {
			select {
			case <-idle:
				return
			case <-ctx.Done():
				s.abort() // release blocked workers; the case reports the deadlock
				<-idle
				return
			default:
			}
			if n, _ := s.Drain(); n == 0 {
				runtime.Gosched()
			}
		}
	}
	// A drain error here means a handle freed once was rejected: the
	// transport delivered it twice or corrupted it.
	drain := func() (int, error) {
		n, err := s.Drain()
		if err != nil {
			return n, violationf(ErrDuplicated, "a drain rejected handles that were freed once each: %v", err)
		}
		return n, nil
	}
	rng := rand.New(rand.NewPCG(1, 2))
	total := 0
	for dispatched := 0; dispatched < chunks*workers; {
		if _, err := drain(); err != nil {
			stop()
			return err
		}
		hs := make([]pool.Handle, 1+rng.IntN(16))
		if err := s.AllocChunk(hs); errors.Is(err, pool.ErrExhausted) {
			// Wait until a drain frees something or every dispatched job
			// has been freed; then an empty drain means blocks were lost.
			var derr error
			if !waitFor(ctx, func() bool {
				var n int
				n, derr = drain()
				return derr != nil || n > 0 || freedJobs.Load() == int64(dispatched)
			}) {
				stop()
				return violationf(ErrDeadlock, "pool exhausted and workers stuck")
			}
			if derr != nil {
				stop()
				return derr
			}
			if s.Stats().Free == 0 {
				if n, err := drain(); n == 0 && err == nil {
					stop()
					st := s.Stats()
					return violationf(ErrLost, "every job was freed by its worker, yet %d blocks never came back (submitted %d, drained %d)",
						st.Live, st.RemoteSubmitted, st.RemoteDrained)
				}
			}
			continue
		} else if err != nil {
			stop()
			return violationf(ErrContract, "AllocChunk: %v", err)
		}
		mem := make([][]byte, len(hs))
		for k, h := range hs {
			if live[h.Index()].Swap(true) {
				stop()
				return violationf(ErrDuplicated, "block %d handed out again while a worker still holds it", h.Index())
			}
			b, err := s.Bytes(h)
			if err != nil {
				stop()
				return violationf(ErrContract, "Bytes of a fresh handle: %v", err)
			}
			b[0] = byte(h.Generation())
			mem[k] = b
		}
		jobs[dispatched%workers] <- job{hs, mem}
		dispatched++
		total += len(hs)
	}
	stop()
	select {
	case err := <-errc:
		return err
	default:
	}
	// Every FreeChunk has returned: drain until nothing more comes.
	for {
		n, err := drain()
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
	}
	st := s.Stats()
	switch {
	case st.RemoteDrained > st.RemoteSubmitted:
		return violationf(ErrDuplicated, "drained %d handles, senders submitted %d", st.RemoteDrained, st.RemoteSubmitted)
	case st.Live != 0:
		return violationf(ErrLost, "%d blocks never came back (submitted %d, drained %d)", st.Live, st.RemoteSubmitted, st.RemoteDrained)
	case st.RemoteSubmitted != uint64(total) || st.RemoteDrained != uint64(total):
		return violationf(ErrAccounting, "submitted %d, drained %d, freed %d remotely", st.RemoteSubmitted, st.RemoteDrained, total)
	}
	return statsWant(s, 0, uint64(total), uint64(total), 0)
}

func checkRemoteRejects(ctx context.Context, s subject) error {
	o := s.other()
	var foreign pool.Handle
	if o != nil {
		defer o.Close()
		var err error
		if foreign, err = o.Alloc(); err != nil {
			return violationf(ErrContract, "Alloc on the other pool: %v", err)
		}
	}
	hs := make([]pool.Handle, 4)
	if err := s.AllocChunk(hs); err != nil {
		return violationf(ErrContract, "AllocChunk: %v", err)
	}
	stale := hs[1]
	if err := s.Free(stale); err != nil {
		return violationf(ErrContract, "Free: %v", err)
	}
	chunk := []pool.Handle{hs[0], stale, {}, hs[2], hs[3]}
	bad := 2
	if o != nil {
		chunk = append(chunk, foreign)
		bad++
	}
	snd, err := s.NewSender()
	if err != nil {
		return violationf(ErrContract, "NewSender: %v", err)
	}
	drained, reports, err := sendDraining(ctx, s, snd, chunk)
	if err != nil {
		return err
	}
	waitFor(ctx, func() bool {
		n, err := s.Drain()
		drained += n
		if err != nil {
			reports = append(reports, err)
		}
		return s.Stats().RemoteDrained >= uint64(len(chunk))
	})
	// A bounded transport may deliver the chunk over several drains, each
	// reporting its own rejections.
	rejected := 0
	var first *pool.RejectedError
	for _, r := range reports {
		var rej *pool.RejectedError
		if !errors.As(r, &rej) {
			return violationf(ErrContract, "Drain reported %v, want a *pool.RejectedError", r)
		}
		if first == nil {
			first = rej
		}
		rejected += rej.Rejected
	}
	switch {
	case drained != 3:
		return violationf(ErrLost, "drains freed %d blocks, want the 3 good ones", drained)
	case first == nil || rejected != bad:
		return violationf(ErrContract, "drains reported %v, want *pool.RejectedErrors of %d handles in all", reports, bad)
	case !errors.Is(first, pool.ErrStaleHandle) || first.First != stale:
		return violationf(ErrContract, "the first rejection reported is %v, want the stale %v", first, stale)
	}
	if err := statsWant(s, 0, 4, 4, uint64(bad)); err != nil {
		return err
	}
	// The free list must be intact: every block can be handed out once.
	n := capacityOf(s)
	all := make([]pool.Handle, n)
	if err := s.AllocChunk(all); err != nil {
		return violationf(ErrLost, "AllocChunk of the whole pool after rejects: %v", err)
	}
	seen := make(map[int]bool, n)
	for _, h := range all {
		if seen[h.Index()] {
			return violationf(ErrDuplicated, "block %d handed out twice after a drain with bad handles", h.Index())
		}
		seen[h.Index()] = true
	}
	return nil
}

func checkAccounting(ctx context.Context, s subject) error {
	n := capacityOf(s)
	rng := rand.New(rand.NewPCG(3, 4))
	var live, stale []pool.Handle
	// inflight holds remotely freed handles not yet drained, oldest first
	// (one sender, so a transport delivers them in this order). They are
	// still live to the pool until drained.
	var inflight []pool.Handle
	var allocs, frees, rejected uint64
	hwm := 0
	snd, err := s.NewSender()
	if err != nil {
		return violationf(ErrContract, "NewSender: %v", err)
	}
	// landed moves the k oldest in-flight handles to stale: a drain freed them.
	landed := func(k int) {
		stale = append(stale, inflight[:k]...)
		inflight = inflight[k:]
		frees += uint64(k)
	}
	for step := range 3000 {
		switch op := rng.IntN(10); {
		case op < 4: // alloc
			before := s.Stats().RemoteDrained
			h, err := s.Alloc()
			if len(live)+len(inflight) == n {
				// Only a drain on exhaustion can make room.
				got := int(s.Stats().RemoteDrained - before)
				if got > len(inflight) {
					return violationf(ErrDuplicated, "step %d: a drain inside Alloc took %d handles, %d were in flight", step, got, len(inflight))
				}
				landed(got)
				if got == 0 && !errors.Is(err, pool.ErrExhausted) {
					return violationf(ErrDuplicated, "step %d: Alloc with every block live = %v, want pool.ErrExhausted", step, err)
				}
				if err != nil {
					break
				}
			} else if err != nil {
				return violationf(ErrContract, "step %d: Alloc with %d of %d live: %v", step, len(live)+len(inflight), n, err)
			}
			allocs++
			live = append(live, h)
		case op < 6 && len(live) > 0: // local free
			i := rng.IntN(len(live))
			if err := s.Free(live[i]); err != nil {
				return violationf(ErrContract, "step %d: Free: %v", step, err)
			}
			frees++
			stale = append(stale, live[i])
			live = append(live[:i], live[i+1:]...)
		case op < 7 && len(stale) > 0: // stale free
			if err := s.Free(stale[rng.IntN(len(stale))]); !errors.Is(err, pool.ErrStaleHandle) {
				return violationf(ErrAliased, "step %d: Free of a stale handle = %v", step, err)
			}
			rejected++
		case op < 8 && len(live) > 0: // remote free of a chunk
			k := 1 + rng.IntN(min(len(live), 8))
			chunk := live[len(live)-k:]
			inflight = append(inflight, chunk...)
			live = live[:len(live)-k]
			got, reports, err := sendDraining(ctx, s, snd, chunk)
			if got > len(inflight) || len(reports) > 0 {
				return violationf(ErrDuplicated, "step %d: drains freed %d with %d in flight and reported %v", step, got, len(inflight), reports)
			}
			landed(got)
			if err != nil {
				return fmt.Errorf("step %d: %w", step, err)
			}
		case op < 9: // drain everything in flight
			got := 0
			var drainErr error
			waitFor(ctx, func() bool {
				m, err := s.Drain()
				got += m
				drainErr = err
				return err != nil || got >= len(inflight)
			})
			if drainErr != nil || got != len(inflight) {
				return violationf(ErrLost, "step %d: drains freed %d of %d in flight (%v)", step, got, len(inflight), drainErr)
			}
			landed(got)
		default: // bytes of a live block
			if len(live) > 0 {
				if _, err := s.Bytes(live[rng.IntN(len(live))]); err != nil {
					return violationf(ErrContract, "step %d: Bytes of a live handle: %v", step, err)
				}
			}
		}
		hwm = max(hwm, len(live)+len(inflight))
		if err := statsWant(s, len(live)+len(inflight), allocs, frees, rejected); err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
		if hw := s.Stats().HighWater; hw != hwm {
			return violationf(ErrAccounting, "step %d: HighWater = %d, model says %d", step, hw, hwm)
		}
	}
	return nil
}

func checkNoAliasing(ctx context.Context, s subject) error {
	n := capacityOf(s)
	rng := rand.New(rand.NewPCG(5, 6))
	type blk struct {
		h   pool.Handle
		tag byte
	}
	var live []blk
	tag := byte(0)
	for round := range 50 {
		for len(live) < n && rng.IntN(4) != 0 {
			h, err := s.Alloc()
			if err != nil {
				return violationf(ErrContract, "Alloc: %v", err)
			}
			b, err := s.Bytes(h)
			if err != nil {
				return violationf(ErrContract, "Bytes: %v", err)
			}
			tag++
			fill(b, tag)
			live = append(live, blk{h, tag})
		}
		for _, l := range live {
			b, err := s.Bytes(l.h)
			if err != nil {
				return violationf(ErrContract, "Bytes of a live handle: %v", err)
			}
			if j, ok := check(b, l.tag); !ok {
				return violationf(ErrAliased, "round %d: byte %d of live %v changed: another live handle shares its memory", round, j, l.h)
			}
		}
		for k := rng.IntN(len(live) + 1); k > 0; k-- {
			i := rng.IntN(len(live))
			if err := s.Free(live[i].h); err != nil {
				return violationf(ErrContract, "Free: %v", err)
			}
			live = append(live[:i], live[i+1:]...)
		}
	}
	return nil
}

func checkClose(ctx context.Context, s subject) error {
	h, err := s.Alloc()
	if err != nil {
		return violationf(ErrContract, "Alloc: %v", err)
	}
	snd, err := s.NewSender()
	if err != nil {
		return violationf(ErrContract, "NewSender: %v", err)
	}
	if err := s.Close(); err != nil {
		return violationf(ErrContract, "Close: %v", err)
	}
	_, errAlloc := s.Alloc()
	_, errBytes := s.Bytes(h)
	_, errDrain := s.Drain()
	_, errSender := s.NewSender()
	for _, c := range []struct {
		what string
		err  error
	}{
		{"Alloc", errAlloc},
		{"AllocChunk", s.AllocChunk(make([]pool.Handle, 1))},
		{"Free", s.Free(h)},
		{"FreeChunk", s.FreeChunk([]pool.Handle{h})},
		{"Bytes", errBytes},
		{"Drain", errDrain},
		{"NewSender", errSender},
		{"sender FreeChunk", snd.FreeChunk([]pool.Handle{h})},
		{"second Close", s.Close()},
	} {
		if err := wantIs(c.what+" after Close", c.err, pool.ErrClosed); err != nil {
			return err
		}
	}
	_ = s.Stats() // must not panic
	return nil
}

func checkPoolAllocs(ctx context.Context, s subject) error {
	if race.Enabled {
		return nil // the race runtime allocates; see the package doc
	}
	snd, err := s.NewSender()
	if err != nil {
		return violationf(ErrContract, "NewSender: %v", err)
	}
	chunk := make([]pool.Handle, 16)
	if b, ok := s.bounds(); ok && !b.Chunked {
		// One goroutine sends and drains: the chunk must fit.
		chunk = chunk[:min(16, b.Capacity)]
	}
	var opErr error
	note := func(err error) {
		if err != nil && opErr == nil {
			opErr = err
		}
	}
	for _, c := range []struct {
		name string
		op   func()
	}{
		{"Alloc+Free", func() {
			h, err := s.Alloc()
			note(err)
			note(s.Free(h))
		}},
		{"Alloc+Bytes+Free", func() {
			h, err := s.Alloc()
			note(err)
			_, err = s.Bytes(h)
			note(err)
			note(s.Free(h))
		}},
		{"AllocChunk+sender FreeChunk+Drain", func() {
			note(s.AllocChunk(chunk))
			note(snd.FreeChunk(chunk))
			for got := 0; got < len(chunk) && opErr == nil; {
				n, err := s.Drain()
				note(err)
				got += n
			}
		}},
	} {
		for range 10 {
			c.op()
		}
		if a := testing.AllocsPerRun(200, c.op); a != 0 {
			return violationf(ErrAllocs, "%s: %v allocs per run, want 0", c.name, a)
		}
		if opErr != nil {
			return violationf(ErrContract, "%s: %v", c.name, opErr)
		}
	}
	return nil
}
