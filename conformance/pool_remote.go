package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"

	"github.com/locus-go/locus/pool"
)

// sendDraining frees chunk through snd on another goroutine while the owner
// keeps draining, as a bounded transport needs. It returns how many blocks
// the drains freed and what they reported; a failed send is a violation.
func sendDraining(ctx context.Context, s subject, snd sender, chunk []pool.Handle) (int, []error, error) {
	return drainSending(ctx, s.Drain, false, func() error {
		return contractErr(fmt.Sprintf("sender FreeChunk of %d handles", len(chunk)), snd.FreeChunk(chunk))
	})
}

// retire closes a sender and checks that a FreeChunk of chunk through it
// then fails with pool.ErrClosed.
func retire[H any](snd interface {
	Close() error
	FreeChunk([]H) error
}, chunk []H) error {
	closeErr := snd.Close()
	err := snd.FreeChunk(chunk)
	if closeErr != nil {
		return violationf(ErrContract, "Sender.Close = %v, want nil", closeErr)
	}
	return wantIs("FreeChunk of a retired sender", err, pool.ErrClosed)
}

// room returns how many handles, up to want, one sender can free with one
// FreeChunk into an empty transport without waiting for a drain.
func room(s subject, want int) int {
	bd, bounded := s.bounds()
	if !bounded || bd.Chunked {
		return want
	}
	return min(want, bd.Capacity)
}

// drainTaken drains until RemoteDrained reaches want: a drain may reject
// copies of a handle, but one that takes nothing and rejects nothing loses
// the rest of the handles, what.
func drainTaken(s subject, want uint64, what string) {
	for s.Stats().RemoteDrained < want {
		m, err := s.Drain()
		var rej *pool.RejectedError
		if m == 0 && (err == nil || !errors.As(err, &rej)) {
			must(violationf(ErrLost, "drains left RemoteDrained at %d, short of %d, with %s sent (%v)", s.Stats().RemoteDrained, want, what, err))
		}
	}
}

// drainAll drains until want blocks came back: a Drain that fails or
// brings nothing before then loses the rest of the blocks, what.
func drainAll(s subject, want int, what string) error {
	for got := 0; got < want; {
		m, err := s.Drain()
		if err != nil || m == 0 {
			return violationf(ErrLost, "drains freed %d of %d %s (%v)", got, want, what, err)
		}
		got += m
	}
	return nil
}

func checkExhaustion(r *plRun) error {
	s := r.x
	n := capacityOf(s)
	hs := make([]pool.Handle, n)
	mustOK(fmt.Sprintf("AllocChunk(%d)", n), s.AllocChunk(hs))
	_, errAlloc := s.Alloc()
	_, _, errAllocBytes := s.AllocBytes()
	must(allFail(pool.ErrExhausted, "on an empty pool", []call{{"Alloc", errAlloc}, {"AllocBytes", errAllocBytes}}))
	for _, h := range hs[:2] {
		mustOK("Free", s.Free(h))
	}
	three := make([]pool.Handle, 3)
	err := s.AllocChunk(three)
	require(errors.Is(err, pool.ErrExhausted), ErrContract, "AllocChunk(3) with 2 free = %v, want pool.ErrExhausted", err)
	mustIn(statsWant(s, n-2, uint64(n), 2, 0), "after a failed AllocChunk, nothing may be allocated")
	mustOK("AllocChunk(2) with 2 free", s.AllocChunk(three[:2]))
	hw := s.Stats().HighWater
	require(hw == n, ErrAccounting, "HighWater = %d, want %d", hw, n)
	return statsWant(s, n, uint64(n)+2, 2, 0)
}

func checkDrainOnExhaustion(r *plRun) error {
	s, ctx := r.x, r.ctx
	n := capacityOf(s)
	hs := make([]pool.Handle, n)
	mustOK("AllocChunk", s.AllocChunk(hs))
	snd, err := s.NewSender()
	mustOK("NewSender", err)
	k := room(s, 3)
	var c crew
	c.Go(func() error { return snd.FreeChunk(hs[:k]) }) // a worker frees k blocks
	must(c.wait(ctx, "senders' FreeChunk calls into a transport with room were"))
	// No explicit Drain: the allocation must find them itself.
	before := s.Stats()
	for i := range k {
		_, err := s.Alloc()
		require(err == nil, ErrLost, "Alloc %d with %d blocks remotely freed and no Drain: %v", i+1, k, err)
	}
	st := s.Stats()
	require(st.RemoteSubmitted == uint64(k) && st.RemoteDrained == uint64(k) && st.Frees == uint64(k), ErrAccounting,
		"after drain-on-exhaustion: submitted %d drained %d frees %d, want %d %d %d (a drain inside Alloc must be counted)",
		st.RemoteSubmitted, st.RemoteDrained, st.Frees, k, k, k)
	require(st.Drains != before.Drains, ErrAccounting, "allocations that drained the transport left Drains at %d", st.Drains)
	return statsWant(s, n, uint64(n+k), uint64(k), 0)
}

func checkDrainUntilSatisfied(r *plRun) error {
	s, ctx := r.x, r.ctx
	n := capacityOf(s)
	bd, bounded := s.bounds()
	// perSender is how many blocks one sender can leave waiting.
	perSender, senders := n, 1
	if bounded {
		perSender = bd.Capacity // items; a chunk item here is one handle
		if !bd.PerProducer {
			senders = 1
		} else {
			senders = min((n+perSender-1)/perSender, 16)
		}
	}
	most := min(n, perSender*senders)
	ks := []int{1, 2, 31, 32, 33, n / 2, n}
	if bounded {
		ks = append(ks, bd.Batch-1, bd.Batch, bd.Batch+1, 2*bd.Batch+1, 3*bd.Batch+2, perSender, perSender+1)
	}
	snds, err := several(senders, "NewSender", s.NewSender)
	must(err)
	all := make([]pool.Handle, n)
	mustOK("AllocChunk of the whole pool", s.AllocChunk(all))
	// park frees the first k live blocks through the senders, one handle
	// per FreeChunk, at most perSender each, and waits for the sends.
	park := func(k int) {
		var c crew
		for i, snd := range snds {
			lo, hi := i*perSender, min((i+1)*perSender, k)
			if lo >= hi {
				break
			}
			c.Go(func() error {
				for _, h := range all[lo:hi] {
					mustOK("sender FreeChunk", snd.FreeChunk([]pool.Handle{h}))
				}
				return nil
			})
		}
		must(c.wait(ctx, "senders' FreeChunk calls into a transport with room were"))
	}
	for _, k := range ks {
		if k < 1 || k > most {
			continue
		}
		free := s.Stats().Free
		require(free == 0, ErrAccounting, "%d blocks free, want 0", free)
		// AllocChunk(k+1) fails, having drained all k and allocated none.
		if k < n {
			park(k)
			err := s.AllocChunk(make([]pool.Handle, k+1))
			require(errors.Is(err, pool.ErrExhausted), ErrContract, "AllocChunk(%d) with %d blocks freed remotely = %v, want pool.ErrExhausted", k+1, k, err)
			st := s.Stats()
			require(st.Free == k && st.Live == n-k, ErrLost, "AllocChunk(%d) with %d blocks freed remotely failed and left %d blocks free, want all %d drained and none allocated", k+1, k, st.Free, k)
			mustOK(fmt.Sprintf("AllocChunk(%d) with %d free", k, k), s.AllocChunk(all[:k]))
		}
		// AllocChunk(k) succeeds, draining as often as it takes.
		park(k)
		before := s.Stats()
		if err := s.AllocChunk(all[:k]); err != nil {
			must(violationf(ErrLost, "AllocChunk(%d) with no block free and %d freed through %d senders: %v (drained %d)",
				k, k, senders, err, s.Stats().RemoteDrained-before.RemoteDrained))
		}
		// And so do k Allocs.
		park(k)
		for i := range k {
			h, err := s.Alloc()
			require(err == nil, ErrLost, "Alloc %d of %d with no block free and %d freed through senders: %v", i+1, k, k, err)
			all[i] = h
		}
		must(identities(s.Stats()))
	}
	return nil
}

func checkRemote(r *plRun) error {
	drainTakesAll(r.x)
	return remoteExchange(r.ctx, r.x, false, 1)
}

// drainTakesAll has a dozen senders, more than any small table of them,
// free a block each, then checks that one Drain frees every block freed
// before it started (up to a bounded transport's batch).
func drainTakesAll(s subject) {
	k := min(12, capacityOf(s))
	want := k
	if bd, bounded := s.bounds(); bounded && !bd.PerProducer {
		k = min(k, bd.Capacity)
		want = min(k, bd.Batch)
	}
	hs := make([]pool.Handle, k)
	mustOK("AllocChunk", s.AllocChunk(hs))
	for i, h := range hs {
		snd, err := s.NewSender()
		mustOK("NewSender", err)
		mustOK(fmt.Sprintf("sender %d: Free", i), snd.Free(h))
		mustOK(fmt.Sprintf("sender %d: Close", i), snd.Close())
	}
	m, err := s.Drain()
	require(err == nil, ErrDuplicated, "a drain rejected handles freed once each: %v", err)
	require(m == want, ErrLost, "%d senders freed a block each, then one Drain freed %d, want %d: a Drain frees everything freed before it started", k, m, want)
	must(drainAll(s, k-m, "blocks freed through senders that the first Drain left"))
}

// remoteExchange has workers free chunks the owner allocates, through their
// own senders, while the owner allocates and drains, and checks that every
// block comes back exactly once. With perRequest each worker makes a sender
// per chunk and retires it once the chunk is freed, as a server that makes
// one per request would. The workers free about 16000 handles, or 2000
// through a bounded transport (divided by part).
func remoteExchange(ctx context.Context, s subject, perRequest bool, part int) error {
	workers := 4
	if perRequest {
		workers = 16 // many senders live at once, made and retired while the owner drains
	}
	chunks := scaled(800) / workers / part
	budget := scaled(16000) / part
	if _, bounded := s.bounds(); bounded {
		budget /= 8
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
	var freedJobs atomic.Int64 // jobs whose blocks the worker has freed
	var c crew
	for w := range workers {
		jobs[w] = make(chan job, chunks)
		var snd sender
		if !perRequest {
			var err error
			if snd, err = s.NewSender(); err != nil {
				return violationf(ErrContract, "NewSender: %v", err)
			}
		}
		c.Go(func() error {
			var bad error
			served := 0
			defer func() {
				if perRequest && snd != nil {
					_ = snd.Close()
				}
			}()
			for j := range jobs[w] {
				if perRequest && snd == nil {
					var err error
					snd, err = s.NewSender()
					mustOK("NewSender on a worker", err)
				}
				// Read what the owner wrote, then write, so the race
				// detector sees the handoff both ways. A worker that
				// finds a violation goes on freeing, so the owner is not
				// left waiting for blocks.
				for k, h := range j.hs {
					if v := j.mem[k][0]; v != byte(h.Generation()) && bad == nil {
						bad = violationf(ErrAliased, "worker read %#x in %v, owner wrote %#x", v, h, byte(h.Generation()))
					}
					j.mem[k][0] = 0
					live[h.Index()].Store(false)
				}
				// Every send path: FreeChunk, Free one by one, and
				// TryFreeChunk with FreeChunk for what it leaves.
				var err error
				switch len(j.hs) % 3 {
				case 0:
					err = snd.FreeChunk(j.hs)
				case 1:
					if len(j.hs) > 8 { // one send per handle: short jobs only
						err = snd.FreeChunk(j.hs)
						break
					}
					for _, h := range j.hs {
						if err = snd.Free(h); err != nil {
							break
						}
					}
				default:
					var m int
					m, err = snd.TryFreeChunk(j.hs)
					require(m >= 0 && m <= len(j.hs) && (m < len(j.hs)) == (err != nil), ErrContract, "TryFreeChunk of %d handles = (%d, %v)", len(j.hs), m, err)
					if errors.Is(err, pool.ErrFull) {
						err = snd.FreeChunk(j.hs[m:])
					}
				}
				if err != nil && bad == nil {
					bad = violationf(ErrContract, "sender freeing %d handles: %v", len(j.hs), err)
				}
				// A request's sender serves up to three jobs, so that
				// every worker's is live most of the time.
				if served++; perRequest && served%3 == 0 {
					if err := retire(snd, j.hs[:1]); bad == nil {
						bad = err
					}
					snd = nil
				}
				freedJobs.Add(1)
				if ctx.Err() != nil {
					return bad
				}
			}
			return bad
		})
	}
	// stop ends the workers, draining while they finish: a worker blocked
	// on a full bounded transport needs the owner to make room.
	stop := func(err error) error {
		for _, j := range jobs {
			close(j)
		}
		return errors.Join(err, c.drainOut(ctx, s.Drain))
	}
	// A drain error here means a handle freed once was rejected: the
	// transport delivered it twice or corrupted it.
	drain := func() (int, error) {
		m, err := s.Drain()
		if err != nil {
			return m, violationf(ErrDuplicated, "a drain rejected handles that were freed once each: %v", err)
		}
		return m, nil
	}
	rng := rand.New(rand.NewPCG(1, 2))
	total := 0
	start := s.Stats()
	var b backoff
	for dispatched := 0; dispatched < chunks*workers && total < budget; {
		if _, err := drain(); err != nil {
			return stop(err)
		}
		k := 1 + rng.IntN(16)
		switch rng.IntN(16) {
		case 0:
			k = 1 + rng.IntN(max(n/2, 1))
		case 1:
			k = 31 + rng.IntN(4)
		}
		hs := make([]pool.Handle, min(k, n))
		if err := s.AllocChunk(hs); errors.Is(err, pool.ErrExhausted) {
			// Workers hold the blocks. Once every dispatched job has
			// been freed, a drain that brings nothing means blocks are
			// lost.
			idle := freedJobs.Load() == int64(dispatched)
			m, err := drain()
			if err != nil {
				return stop(err)
			}
			if m == 0 && idle && s.Stats().Free < len(hs) {
				st := s.Stats()
				return stop(violationf(ErrLost, "every job was freed by its worker, yet %d blocks never came back (submitted %d, drained %d)",
					st.Live, st.RemoteSubmitted, st.RemoteDrained))
			}
			if m > 0 {
				b.reset()
			} else if !b.wait(ctx) {
				return stop(violationf(ErrDeadlock, "pool exhausted and workers stuck"))
			}
			continue
		} else if err != nil {
			return stop(violationf(ErrContract, "AllocChunk: %v", err))
		}
		mem := make([][]byte, len(hs))
		for k, h := range hs {
			if live[h.Index()].Swap(true) {
				return stop(violationf(ErrDuplicated, "block %d handed out again while a worker still holds it", h.Index()))
			}
			b, err := s.Bytes(h)
			if err != nil {
				return stop(violationf(ErrContract, "Bytes of a fresh handle: %v", err))
			}
			b[0] = byte(h.Generation())
			mem[k] = b
		}
		jobs[dispatched%workers] <- job{hs, mem}
		dispatched++
		total += len(hs)
	}
	if err := stop(nil); err != nil {
		return err
	}
	// Every send has returned: drain until nothing more comes.
	if _, err := drainDry(ctx, s.Drain); err != nil {
		return err
	}
	st := s.Stats()
	submitted, drained := st.RemoteSubmitted-start.RemoteSubmitted, st.RemoteDrained-start.RemoteDrained
	switch {
	case drained > submitted:
		return violationf(ErrDuplicated, "drained %d handles, senders submitted %d", drained, submitted)
	case st.Live != start.Live:
		return violationf(ErrLost, "%d blocks never came back (submitted %d, drained %d)", st.Live-start.Live, submitted, drained)
	case submitted != uint64(total) || drained != uint64(total):
		return violationf(ErrAccounting, "submitted %d, drained %d, freed %d remotely", submitted, drained, total)
	}
	return statsWant(s, start.Live, start.Allocs+uint64(total), start.Frees+uint64(total), start.Rejected)
}

func checkRemoteRejects(r *plRun) error {
	s, ctx := r.x, r.ctx
	o, err := r.another()
	must(err)
	foreign, err := o.Alloc()
	mustOK("Alloc on the other pool", err)
	hs := make([]pool.Handle, 4)
	mustOK("AllocChunk", s.AllocChunk(hs))
	stale := hs[1]
	mustOK("Free", s.Free(stale))
	chunk := []pool.Handle{hs[0], stale, {}, hs[2], hs[3], foreign}
	const bad = 3
	snd, err := s.NewSender()
	mustOK("NewSender", err)
	drained, reports, err := sendDraining(ctx, s, snd, chunk)
	must(err)
	for range 64 {
		if s.Stats().RemoteDrained >= uint64(len(chunk)) {
			break
		}
		n, err := s.Drain()
		drained += n
		if err != nil {
			reports = append(reports, err)
		}
	}
	// A bounded transport may deliver the chunk over several drains, each
	// reporting its own rejections.
	rejected := 0
	var first *pool.RejectedError
	for _, r := range reports {
		var rej *pool.RejectedError
		require(errors.As(r, &rej), ErrContract, "Drain reported %v, want a *pool.RejectedError", r)
		if first == nil {
			first = rej
		}
		rejected += rej.Rejected
	}
	require(drained == 3, ErrLost, "drains freed %d blocks, want the 3 good ones", drained)
	require(first != nil && rejected == bad, ErrContract, "drains reported %v, want *pool.RejectedErrors of %d handles in all", reports, bad)
	require(errors.Is(first, pool.ErrStaleHandle) && first.First == stale, ErrContract, "the first rejection reported is %v, want the stale %v", first, stale)
	must(statsWant(s, 0, 4, 4, uint64(bad)))
	// The free list must be intact: every block can be handed out once.
	n := capacityOf(s)
	all := make([]pool.Handle, n)
	err = s.AllocChunk(all)
	require(err == nil, ErrLost, "AllocChunk of the whole pool after rejects: %v", err)
	seen := make(map[int]bool, n)
	for _, h := range all {
		require(!seen[h.Index()], ErrDuplicated, "block %d handed out twice after a drain with bad handles", h.Index())
		seen[h.Index()] = true
	}
	return nil
}

func checkTryFree(r *plRun) error {
	s := r.x
	n := capacityOf(s)
	bd, bounded := s.bounds()
	snd, err := s.NewSender()
	mustOK("NewSender", err)
	if !bounded {
		for _, k := range []int{1, 5, 33, n} {
			hs := make([]pool.Handle, k)
			mustOK("AllocChunk", s.AllocChunk(hs))
			before := snd.Submitted()
			m, err := snd.TryFreeChunk(hs)
			require(m == k && err == nil, ErrContract, "TryFreeChunk of %d handles on an unbounded transport = (%d, %v), want (%d, nil)", k, m, err, k)
			sub := snd.Submitted() - before
			require(sub == uint64(k), ErrAccounting, "Submitted grew by %d for %d handles", sub, k)
			must(drainAll(s, k, "blocks that TryFreeChunk reported sent"))
		}
		return statsWant(s, 0, uint64(1+5+33+n), uint64(1+5+33+n), 0)
	}
	// Fill the queue up to three items with copies of a filler handle,
	// then try a chunk of distinct handles that does not fit.
	filler, err := s.Alloc()
	mustOK("Alloc", err)
	left := min(3, bd.Capacity)
	copies := bd.Capacity - left
	fillTransport(snd, filler, bd, left)
	hs := make([]pool.Handle, left+5)
	mustOK("AllocChunk", s.AllocChunk(hs))
	if bd.Chunked {
		for i := range left {
			m, err := snd.TryFreeChunk(hs[i : i+1])
			require(m == 1 && err == nil, ErrContract, "TryFreeChunk of a chunk item into a queue with room = (%d, %v), want (1, nil)", m, err)
		}
		m, err := snd.TryFreeChunk(hs[left:])
		require(m == 0 && errors.Is(err, pool.ErrFull), ErrContract, "TryFreeChunk of a %d-handle chunk item into a full queue = (%d, %v), want (0, pool.ErrFull)", len(hs)-left, m, err)
	} else {
		m, err := snd.TryFreeChunk(hs)
		require(m == left && errors.Is(err, pool.ErrFull), ErrContract, "TryFreeChunk of %d handles into a queue with room for %d = (%d, %v), want (%d, pool.ErrFull)", len(hs), left, m, err, left)
	}
	sent, kept := hs[:left], hs[left:]
	submitted := uint64(bd.Capacity)
	sub := snd.Submitted()
	require(sub == submitted, ErrAccounting, "Submitted = %d, TryFreeChunk sent %d", sub, submitted)
	// What was not sent is still the caller's, live.
	for _, h := range kept {
		_, err := s.Bytes(h)
		require(err == nil, ErrLost, "a handle TryFreeChunk did not send is no longer live: %v", err)
	}
	drainTaken(s, submitted, "the handles TryFreeChunk reported sent")
	gone := slices.Clone(sent)
	if copies > 0 {
		gone = append(gone, filler)
	}
	for _, h := range gone {
		_, err := s.Bytes(h)
		require(errors.Is(err, pool.ErrStaleHandle), ErrLost, "a handle TryFreeChunk sent is still live after the drains: %v", err)
	}
	mustOK("FreeChunk of the handles TryFreeChunk left", s.FreeChunk(kept))
	if copies == 0 {
		mustOK("Free", s.Free(filler))
	}
	st := s.Stats()
	// Every copy of the filler but the first was rejected, and so was
	// every Bytes of a stale handle above.
	rejected := uint64(max(copies-1, 0) + len(gone))
	require(st.Live == 0 && st.RemoteSubmitted == submitted && st.RemoteDrained == submitted && st.Rejected == rejected, ErrAccounting,
		"after TryFreeChunk and drains: live %d, submitted %d, drained %d, rejected %d, want 0 %d %d %d",
		st.Live, st.RemoteSubmitted, st.RemoteDrained, st.Rejected, submitted, submitted, rejected)
	must(identities(st))
	if !bd.PerProducer {
		sharedQueueTurns(s, bd)
	}
	return nil
}

// sharedQueueTurns checks that a queue shared by every sender holds
// Capacity items in all, however many senders take turns filling it: each
// of several senders then finds it full.
func sharedQueueTurns(s subject, bd pool.Bounds) {
	const senders = 6
	snds, err := several(senders, "NewSender", s.NewSender)
	must(err)
	filler, err := s.Alloc()
	mustOK("Alloc", err)
	before := s.Stats().RemoteDrained
	one := []pool.Handle{filler}
	for i := range bd.Capacity {
		m, err := snds[i%senders].TryFreeChunk(one)
		require(m == 1 && err == nil, ErrContract, "TryFreeChunk of item %d of %d into the shared queue, by sender %d of %d taking turns, = (%d, %v), want (1, nil)",
			i+1, bd.Capacity, i%senders+1, senders, m, err)
	}
	for i, snd := range snds {
		m, err := snd.TryFreeChunk(one)
		require(m == 0 && errors.Is(err, pool.ErrFull), ErrContract, "the shared queue holds its capacity of %d items, sent by %d senders in turn, yet sender %d's TryFreeChunk = (%d, %v), want (0, pool.ErrFull)",
			bd.Capacity, senders, i+1, m, err)
	}
	want := before + uint64(bd.Capacity)
	drainTaken(s, want, fmt.Sprintf("%d handles the senders sent into the shared queue", bd.Capacity))
	for _, snd := range snds {
		mustOK("Sender.Close", snd.Close())
	}
	_, err = s.Bytes(filler)
	require(errors.Is(err, pool.ErrStaleHandle), ErrLost, "the handle sent into the shared queue is still live after the drains: %v", err)
	st := s.Stats()
	require(st.Live == 0 && st.RemoteDrained == want, ErrAccounting, "after the senders' turns and drains: live %d, drained %d, want 0 and %d", st.Live, st.RemoteDrained, want)
	must(identities(st))
}
