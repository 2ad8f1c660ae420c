package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/locus-go/locus/internal/model"
	"github.com/locus-go/locus/pool"
)

// identities checks the identities that every pool.Stats satisfies, from
// Stats or from Snapshot.
func identities(st pool.Stats) error {
	var drains, lo, hi uint64
	open := false // the last bucket has no upper bound
	for k, c := range st.DrainSizes {
		drains += c
		if k > 0 {
			lo += c << (k - 1)
		}
		if b := pool.DrainBucketBound(k); b < 0 {
			open = open || c > 0
		} else {
			hi += c * uint64(b)
		}
	}
	switch {
	case st.Live+st.Free != st.Capacity:
		return violationf(ErrAccounting, "Live %d + Free %d != Capacity %d", st.Live, st.Free, st.Capacity)
	case int(st.Allocs-st.Frees) != st.Live:
		return violationf(ErrAccounting, "Allocs %d - Frees %d != Live %d", st.Allocs, st.Frees, st.Live)
	case st.RemoteSubmitted < st.RemoteDrained:
		return violationf(ErrAccounting, "RemoteSubmitted %d < RemoteDrained %d", st.RemoteSubmitted, st.RemoteDrained)
	case st.HighWater < st.Live || st.HighWater > st.Capacity:
		return violationf(ErrAccounting, "HighWater %d outside [Live %d, Capacity %d]", st.HighWater, st.Live, st.Capacity)
	case drains != st.Drains:
		return violationf(ErrAccounting, "the drain histogram sums to %d, Drains is %d", drains, st.Drains)
	case st.RemoteDrained < lo || (!open && st.RemoteDrained > hi):
		return violationf(ErrAccounting, "RemoteDrained %d is not what the drain histogram allows (%d to %d)", st.RemoteDrained, lo, hi)
	}
	return nil
}

// drainBucket is the bucket of pool.Stats.DrainSizes that counts a drain
// of n handles, as pool.Stats documents it.
func drainBucket(n uint64) int { return min(bits.Len64(n), pool.DrainBuckets-1) }

// statsWant compares the counts that a case expects, and the identities.
func statsWant(s subject, live int, allocs, frees, rejected uint64) error {
	st := s.Stats()
	if st.Live != live || st.Allocs != allocs || st.Frees != frees || st.Rejected != rejected {
		return violationf(ErrAccounting, "stats live=%d allocs=%d frees=%d rejected=%d, want %d %d %d %d",
			st.Live, st.Allocs, st.Frees, st.Rejected, live, allocs, frees, rejected)
	}
	return identities(st)
}

// notBehind checks that st, read after prev, went back on no counter and
// changed no constant.
func notBehind(prev, st pool.Stats) error {
	switch {
	case st.BlockSize != prev.BlockSize || st.Capacity != prev.Capacity || st.Order != prev.Order:
		return violationf(ErrAccounting, "BlockSize, Capacity or Order changed: %d %d %v, then %d %d %v",
			prev.BlockSize, prev.Capacity, prev.Order, st.BlockSize, st.Capacity, st.Order)
	case st.Allocs < prev.Allocs || st.Frees < prev.Frees || st.RemoteSubmitted < prev.RemoteSubmitted ||
		st.RemoteDrained < prev.RemoteDrained || st.Rejected < prev.Rejected || st.Drains < prev.Drains ||
		st.HighWater < prev.HighWater:
		return violationf(ErrAccounting, "a counter went back: %+v, then %+v", prev, st)
	}
	for k := range st.DrainSizes {
		if st.DrainSizes[k] < prev.DrainSizes[k] {
			return violationf(ErrAccounting, "drain histogram bucket %d went back from %d to %d", k, prev.DrainSizes[k], st.DrainSizes[k])
		}
	}
	return nil
}

// checkAccounting drives a pool with the pool model's decoder
// (model.Pool.Next) and compares the counts after every step. The model
// stands in its own blocks for the pool's: the case checks counts, not the
// reuse order.
func checkAccounting(r *plRun) error {
	s, ctx := r.x, r.ctx
	n := capacityOf(s)
	bd, bounded := s.bounds()
	rng := rand.New(rand.NewPCG(3, 4))
	// One sender, so a transport delivers what the model has in flight in
	// the order it was sent (model.Pool.Landed).
	m := model.NewPool[pool.Handle](n, false)
	snd, err := s.NewSender()
	mustOK("NewSender", err)
	for step := range 3000 {
		before := s.Stats()
		switch op := m.Next(rng); op.Kind {
		case model.PoolAlloc:
			h, err := s.Alloc()
			if m.Count() == n {
				// Only a drain on exhaustion can make room.
				got := int(s.Stats().RemoteDrained - before.RemoteDrained)
				require(got <= len(m.InFlight), ErrDuplicated, "step %d: a drain inside Alloc took %d handles, %d were in flight", step, got, len(m.InFlight))
				m.Landed(got)
				require(got != 0 || errors.Is(err, pool.ErrExhausted), ErrDuplicated, "step %d: Alloc with every block live = %v, want pool.ErrExhausted", step, err)
				if err != nil {
					break
				}
			} else {
				require(err == nil, ErrContract, "step %d: Alloc with %d of %d live: %v", step, m.Count(), n, err)
			}
			m.Alloc(h, 0)
		case model.PoolFree:
			mustOK(fmt.Sprintf("step %d: Free", step), s.Free(op.Slot.Key))
			m.Free(op.Slot)
		case model.PoolStale:
			err := s.Free(op.Slot.Key)
			require(errors.Is(err, pool.ErrStaleHandle), ErrAliased, "step %d: Free of a stale handle = %v", step, err)
			m.Refused(1)
		case model.PoolSend:
			k := op.N
			if bounded && !bd.Chunked {
				k = min(k, bd.Capacity)
			}
			sent := m.Newest(k)
			chunk := make([]pool.Handle, k)
			for i, x := range sent {
				chunk[i] = x.Key
			}
			m.Send(sent)
			got, reports, err := sendDraining(ctx, s, snd, chunk)
			require(got <= len(m.InFlight) && len(reports) == 0, ErrDuplicated, "step %d: drains freed %d with %d in flight and reported %v", step, got, len(m.InFlight), reports)
			m.Landed(got)
			mustIn(err, "step %d", step)
			sub := snd.Submitted()
			require(sub == m.Submitted, ErrAccounting, "step %d: Sender.Submitted = %d, it accepted %d", step, sub, m.Submitted)
		case model.PoolDrain: // everything in flight, one Drain at a time
			for len(m.InFlight) > 0 {
				d0 := s.Stats()
				got, err := s.Drain()
				d1 := s.Stats()
				took := d1.RemoteDrained - d0.RemoteDrained
				require(err == nil && got <= len(m.InFlight) && uint64(got) == took, ErrDuplicated, "step %d: Drain freed %d (took %d) with %d in flight (%v)", step, got, took, len(m.InFlight), err)
				require(d1.Drains == d0.Drains+1, ErrAccounting, "step %d: one Drain call moved Drains from %d to %d", step, d0.Drains, d1.Drains)
				require(d1.DrainSizes[drainBucket(took)] == d0.DrainSizes[drainBucket(took)]+1, ErrAccounting, "step %d: a Drain of %d handles was not counted in drain histogram bucket %d", step, took, drainBucket(took))
				// Every Send has returned: nothing is pending.
				require(got != 0, ErrLost, "step %d: %d remotely freed handles never came back: a Drain after every Send had returned found nothing", step, len(m.InFlight))
				m.Landed(got)
			}
		case model.PoolBytes:
			if op.Slot != nil {
				_, err := s.Bytes(op.Slot.Key)
				mustOK(fmt.Sprintf("step %d: Bytes of a live handle", step), err)
			}
		}
		mustIn(statsWant(s, m.Count(), m.Allocs, m.Frees, m.Rejected), "step %d", step)
		st := s.Stats()
		require(st.HighWater == m.HighWater, ErrAccounting, "step %d: HighWater = %d, model says %d", step, st.HighWater, m.HighWater)
		require(st.RemoteSubmitted == m.Submitted, ErrAccounting, "step %d: RemoteSubmitted = %d, the sender accepted %d", step, st.RemoteSubmitted, m.Submitted)
		mustIn(notBehind(before, st), "step %d", step)
	}
	return nil
}

// scraper reads snapshots on a goroutine of c until quit closes or ctx
// ends, checks each with check, against the one before, and returns the
// first violation, going on to the end so that what a case reports does
// not depend on who saw what first. Every 64 reads it sleeps a little: the
// owner needs the core.
func scraper[S any](c *crew, ctx context.Context, quit <-chan struct{}, snapshot func() S, check func(prev, st S) error) {
	c.Go(func() error {
		prev := snapshot()
		var first error
		for i := 1; ; i++ {
			select {
			case <-quit:
				return first
			case <-ctx.Done():
				return first
			default:
			}
			st := snapshot()
			if err := check(prev, st); err != nil && first == nil {
				first = fmt.Errorf("snapshot %d: %w", i, err)
			}
			prev = st
			if i%64 == 0 {
				b := backoff{n: spinYields}
				b.wait(ctx)
			}
		}
	})
}

// checkSnapshotFresh: an owner that only drains keeps a scraper fresh. The
// owner allocates without calling Stats; a Snapshot asked for later (past
// the freshness window of the last publication) gets the allocations once
// the owner drains: the owner publishes at Drain when a reader asked, not
// only at Stats or Close.
func checkSnapshotFresh(r *plRun) {
	s, ctx := r.x, r.ctx
	live := s.Stats().Live // publishes
	const k = 3
	hs := make([]pool.Handle, 0, k)
	for range k {
		h, err := s.Alloc()
		mustOK("Alloc on a fresh pool", err)
		hs = append(hs, h)
	}
	st, err := snapshotWhileDraining(ctx, s.Snapshot, s.Drain)
	must(err)
	for _, h := range hs {
		mustOK("Free", s.Free(h))
	}
	require(st.Live == live+k, ErrAccounting, "a Snapshot asked for while the owner only drained says %d blocks live, want %d: the owner does not publish at Drain when asked (a scraper of a drain-only owner is stale forever)", st.Live, live+k)
}

// snapshotWhileDraining asks for a Snapshot on another goroutine once the
// last publication is no longer fresh, and calls drain on the owner's
// goroutine, and nothing else, until the Snapshot returns.
func snapshotWhileDraining[S any](ctx context.Context, snapshot func() S, drain func() (int, error)) (S, error) {
	time.Sleep(5 * time.Millisecond) // the last publication is no longer fresh
	got := make(chan S, 1)
	go func() { got <- snapshot() }()
	for {
		select {
		case st := <-got:
			return st, nil
		case <-ctx.Done():
			var zero S
			return zero, violationf(ErrDeadlock, "Snapshot did not return while the owner drained")
		default:
			if _, err := drain(); err != nil {
				var zero S
				return zero, violationf(ErrContract, "Drain: %v", err)
			}
			runtime.Gosched()
		}
	}
}

func checkSnapshot(r *plRun) error {
	s, ctx := r.x, r.ctx
	n := capacityOf(s)
	first := s.Snapshot()
	require(first.Capacity == n, ErrAccounting, "Snapshot of a fresh pool says capacity %d, Stats %d", first.Capacity, n)
	checkSnapshotFresh(r)
	// The scraper reads snapshots whenever the owner ticks, concurrently
	// with the owner's next steps.
	tick := make(chan struct{}, 1)
	quit := make(chan struct{})
	var snaps atomic.Int64
	var scrape crew
	scrape.Go(func() error {
		// The scraper keeps the first violation and goes on to the end,
		// so that what the case reports does not depend on who saw what
		// first.
		prev := s.Snapshot()
		var first error
		check := func() {
			for range 8 {
				st := s.Snapshot()
				snaps.Add(1)
				err := identities(st)
				if err == nil {
					err = notBehind(prev, st)
				}
				if err != nil && first == nil {
					first = fmt.Errorf("snapshot %d: %w", snaps.Load(), err)
				}
				prev = st
			}
		}
		for {
			select {
			case <-tick:
				check()
			case <-quit:
				check() // at least one round
				return first
			case <-ctx.Done():
				return first
			}
		}
	})
	// Workers free what the owner hands them through their own senders.
	const workers = 2
	var work crew
	var freed atomic.Int64 // chunks the workers have freed
	dispatched := 0        // chunks the owner handed them
	jobs := make([]chan []pool.Handle, workers)
	for w := range jobs {
		jobs[w] = make(chan []pool.Handle, scaled(4000)) // never full: the owner must not block
		snd, err := s.NewSender()
		if err != nil {
			close(quit)
			return errors.Join(violationf(ErrContract, "NewSender: %v", err), scrape.wait(ctx, "scrapers"))
		}
		work.Go(func() error {
			for chunk := range jobs[w] {
				mustOK("sender FreeChunk", snd.FreeChunk(chunk))
				freed.Add(1)
				if ctx.Err() != nil {
					return nil
				}
			}
			return nil
		})
	}
	stop := func(err error) error {
		for _, j := range jobs {
			close(j)
		}
		err = errors.Join(err, work.drainOut(ctx, s.Drain))
		close(quit)
		return errors.Join(err, scrape.wait(ctx, "scrapers"))
	}
	rng := rand.New(rand.NewPCG(8, 9))
	bd, bounded := s.bounds()
	var live, stale []pool.Handle
	var drainErr error // the first, kept like the scraper's
	var b backoff
	for step := range scaled(4000) {
		switch op := rng.IntN(10); {
		case op < 4:
			k := 1 + rng.IntN(8)
			if bounded && !bd.Chunked {
				k = min(k, bd.Capacity)
			}
			chunk := make([]pool.Handle, k)
			for b.reset(); ; {
				err := s.AllocChunk(chunk)
				if err == nil {
					break
				}
				if !errors.Is(err, pool.ErrExhausted) {
					return stop(violationf(ErrContract, "step %d: AllocChunk: %v", step, err))
				}
				// Workers hold the blocks: wait for them, and once they
				// have freed every chunk a drain must bring them back.
				if err := work.first(); err != nil {
					return stop(nil) // reports the worker's error
				}
				idle := freed.Load() == int64(dispatched)
				if m, _ := s.Drain(); m == 0 && idle && s.Stats().Free < k {
					return stop(violationf(ErrLost, "step %d: every chunk handed to the workers was freed, yet %d blocks never came back", step, s.Stats().Live-len(live)))
				}
				if !b.wait(ctx) {
					return stop(violationf(ErrDeadlock, "step %d: the pool stayed exhausted", step))
				}
			}
			jobs[step%workers] <- chunk
			dispatched++
		case op < 6 && len(live) < max(n/4, 1):
			h, err := s.Alloc()
			if err == nil {
				live = append(live, h)
			}
		case len(live) > 0 && (op < 7 || len(live) >= max(n/4, 1)):
			if err := s.Free(live[0]); err != nil {
				return stop(violationf(ErrContract, "step %d: Free: %v", step, err))
			}
			stale = append(stale, live[0])
			live = live[1:]
		case op < 8 && len(stale) > 0:
			_ = s.Free(stale[rng.IntN(len(stale))]) // a rejection, counted
		case op < 9:
			if _, err := s.Drain(); err != nil && drainErr == nil {
				drainErr = violationf(ErrDuplicated, "step %d: a drain rejected remotely freed handles, each freed once: %v", step, err)
			}
		default:
			s.Stats()
		}
		select {
		case tick <- struct{}{}:
		default:
		}
	}
	must(stop(drainErr))
	_, err := drainDry(ctx, s.Drain)
	must(err)
	st, snap := s.Stats(), s.Snapshot()
	require(st.Live == len(live), ErrLost, "%d blocks freed through senders never came back", st.Live-len(live))
	require(snap == st, ErrAccounting, "after the last Drain, with no sender busy, Snapshot = %+v, Stats = %+v", snap, st)
	return nil
}

func checkPoolAllocs(r *plRun) error {
	s := r.x
	snd, err := s.NewSender()
	mustOK("NewSender", err)
	k := 16
	if bd, ok := s.bounds(); ok && !bd.Chunked {
		k = min(k, bd.Capacity) // one goroutine sends and drains: the chunk must fit
	}
	chunk := make([]pool.Handle, k)
	one := chunk[:1]
	stale, err := s.Alloc()
	mustOK("Alloc", err)
	mustOK("Free", s.Free(stale))
	// sendBack allocates chunk, frees it through snd and drains it back.
	sendBack := func(chunk []pool.Handle) func() error {
		return func() error {
			if err := s.AllocChunk(chunk); err != nil {
				return contractErr("AllocChunk", err)
			}
			if err := snd.FreeChunk(chunk); err != nil {
				return contractErr("sender FreeChunk", err)
			}
			return drainBlocks(s.Drain, len(chunk))
		}
	}
	must(allocFree(r.allocRuns(), []namedOp{
		{"Alloc+Free", func() error {
			h, err := s.Alloc()
			if err != nil {
				return contractErr("Alloc", err)
			}
			return contractErr("Free", s.Free(h))
		}},
		{"AllocBytes+Bytes+Free", func() error {
			h, _, err := s.AllocBytes()
			if err != nil {
				return contractErr("AllocBytes", err)
			}
			if _, err := s.Bytes(h); err != nil {
				return contractErr("Bytes", err)
			}
			return contractErr("Free", s.Free(h))
		}},
		{"AllocChunk+FreeChunk", func() error {
			if err := s.AllocChunk(chunk); err != nil {
				return contractErr("AllocChunk", err)
			}
			return contractErr("FreeChunk", s.FreeChunk(chunk))
		}},
		{"a rejected Free", func() error { return wantIs("Free of a stale handle", s.Free(stale), pool.ErrStaleHandle) }},
		{"AllocChunk+sender FreeChunk+Drain", sendBack(chunk)},
		{"Alloc+sender Free+Drain", func() error {
			if err := s.AllocChunk(one); err != nil {
				return contractErr("AllocChunk", err)
			}
			if err := snd.Free(one[0]); err != nil {
				return contractErr("sender Free", err)
			}
			return drainBlocks(s.Drain, 1)
		}},
		{"AllocChunk+sender TryFreeChunk+Drain", func() error {
			if err := s.AllocChunk(chunk); err != nil {
				return contractErr("AllocChunk", err)
			}
			if m, err := snd.TryFreeChunk(chunk); m != len(chunk) || err != nil {
				return violationf(ErrContract, "TryFreeChunk into an empty transport = (%d, %v)", m, err)
			}
			return drainBlocks(s.Drain, len(chunk))
		}},
		{"an idle Drain", func() error { _, err := s.Drain(); return contractErr("Drain", err) }},
		{"Stats and Snapshot", func() error { s.Stats(); s.Snapshot(); return nil }},
	}))
	// Long chunks, and several senders' queues holding blocks at once.
	room := func() int { st := s.Stats(); return st.Capacity - st.Live }
	for _, n := range []int{300, 1000} {
		big := make([]pool.Handle, n)
		if bd, ok := s.bounds(); (ok && !bd.Chunked && bd.Capacity < n) || room() < n {
			continue
		}
		must(noAllocs(100, fmt.Sprintf("AllocChunk of %d+sender FreeChunk+Drain", n), sendBack(big)))
	}
	senders := []sender{snd}
	if bd, ok := s.bounds(); !ok || bd.PerProducer || bd.Capacity >= 4 {
		for range 3 {
			o, err := s.NewSender()
			mustOK("NewSender", err)
			defer o.Close()
			senders = append(senders, o)
		}
	}
	if len(senders) > 1 && room() >= len(senders) {
		hs := make([]pool.Handle, len(senders))
		must(noAllocs(r.allocRuns(), fmt.Sprintf("AllocChunk+a Free by each of %d senders+Drain", len(senders)), func() error {
			if err := s.AllocChunk(hs); err != nil {
				return contractErr("AllocChunk", err)
			}
			for i, o := range senders {
				if err := o.Free(hs[i]); err != nil {
					return contractErr("sender Free", err)
				}
			}
			return drainBlocks(s.Drain, len(hs))
		}))
	}
	return nil
}
