package conformance

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/locus-go/locus/pool"
)

// closeLengths are the chunk lengths sent after a Close: empty, and every
// length of chunkLengths.
func closeLengths(bd pool.Bounds, bounded bool, longest int) []int {
	return append([]int{0}, chunkLengths(bd, bounded, longest)...)
}

// racingLengths are the chunk lengths sent while Close comes: short,
// around node and batch sizes, and longer than a bounded queue.
func racingLengths(bd pool.Bounds, bounded bool) []int {
	ls := []int{1, 2, 3, 7, 8, 31, 32, 33, 63, 64, 65, 100, 255, 256, 257, 1000, 2049, 4097}
	if bounded {
		ls = append(ls, bd.Capacity-1, bd.Capacity, bd.Capacity+1, 2*bd.Capacity+1, bd.Batch+1)
	}
	slices.Sort(ls)
	return slices.DeleteFunc(slices.Compact(ls), func(n int) bool { return n < 1 })
}

// sendsFail checks that every send path of prod fails with pool.ErrClosed
// at every length of lengths.
func sendsFail(who string, prod pool.Producer, lengths []int) {
	tp, _ := prod.(pool.TryProducer)
	for _, n := range lengths {
		chunk := handles(n)
		err := prod.Send(chunk)
		require(errors.Is(err, pool.ErrClosed), ErrContract, "%s: Send of %d handles = %v, want pool.ErrClosed", who, n, err)
		if tp != nil {
			k, err := tp.TrySend(chunk)
			require(k == 0 && errors.Is(err, pool.ErrClosed), ErrContract, "%s: TrySend of %d handles = (%d, %v), want (0, pool.ErrClosed)", who, n, k, err)
		}
	}
}

func checkTransportClose(r *trRun) error {
	tr := r.x
	bd, bounded := boundsOf(tr)
	prods, err := several(2, "NewProducer", tr.NewProducer)
	must(err)
	used, idle := prods[0], prods[1]
	mustOK("Send", used.Send(handles(1)))
	// What Close returns is the transport's to report (it may count what
	// it dropped); what counts is how sends behave after it.
	_ = tr.Close()
	lengths := closeLengths(bd, bounded, r.longest())
	sendsFail("after Close, a producer that had sent", used, lengths)
	sendsFail("after Close, an idle producer", idle, lengths)
	late, err := tr.NewProducer()
	require(err != nil || late != nil, ErrContract, "NewProducer after Close = (nil, nil): want an error, or a producer whose sends fail")
	if err == nil {
		sendsFail("a producer made after Close", late, lengths)
	}
	_ = tr.Close() // a second Close must not panic
	sendsFail("after a second Close", used, lengths[:4])
	return nil
}

func checkCloseWhileSending(r *trRun) error {
	tr, ctx := r.x, r.ctx
	bd, bounded := boundsOf(tr)
	lengths := racingLengths(bd, bounded)
	const producers = 4
	var closed atomic.Bool      // set once Close has returned
	shut := make(chan struct{}) // closed with it
	var c crew
	var sends atomic.Int64
	for p := range producers {
		prod, err := tr.NewProducer()
		mustOK("NewProducer", err)
		c.Go(func() error {
			for i := 0; ; i++ {
				if ctx.Err() != nil {
					return nil
				}
				if i == 500 {
					// Enough: wait for the Close (blocked, not spinning).
					select {
					case <-shut:
					case <-ctx.Done():
						return nil
					}
				}
				n := lengths[(i*7+p)%len(lengths)]
				if bounded && !bd.Chunked {
					// One handle at a time: a Send blocked partway through a
					// chunk is CloseReleasesBlocked's business.
					n = 1
				}
				after := closed.Load()
				err := send(prod, handles(n), i%2 == 0)
				sends.Add(1)
				require(err != nil || !after, ErrContract, "a send of %d handles that started after Close returned succeeded", n)
				if err == nil {
					continue
				}
				require(errors.Is(err, pool.ErrClosed), ErrContract, "a send of %d handles racing Close = %v, want nil or pool.ErrClosed", n, err)
				sendsFail("after a send failed with pool.ErrClosed", prod, closeLengths(bd, bounded, r.longest()))
				return nil
			}
		})
	}
	// Drain while they send, then close.
	var b backoff
	t := newTally(nil)
	for sends.Load() < int64(r.scaled(400)) && !c.finished() {
		if t.drain(tr) > 0 {
			b.reset()
		} else if !b.wait(ctx) {
			close(shut)
			return c.stopped("producers sending before Close were")
		}
	}
	_ = tr.Close() // see checkTransportClose
	closed.Store(true)
	close(shut)
	must(c.wait(ctx, "producers sending when the transport was closed"))
	return t.check()
}

// closeGrace is how long a Send blocked when Close comes may take to
// return: it should return at once.
const closeGrace = 2 * time.Second

func checkCloseReleases(r *trRun) error {
	tr, ctx := r.x, r.ctx
	bd, err := fillable(tr)
	must(err)
	const producers = 4
	l := newLedger(newHandleSource(18), producers)
	tps, err := tryProducers(tr, producers)
	must(err)
	// Fill the queues (the last producer's per-producer queue is left
	// empty when a long per-handle chunk can fill it and then wait).
	queues := 1
	if bd.PerProducer {
		queues = producers
		if !bd.Chunked {
			queues--
		}
	}
	for p := range queues {
		_, err := fillItems(l, tps[p], p, bd, bd.Capacity)
		must(err)
	}
	// Block a Send on every path: one handle, a short chunk, and a chunk
	// longer than the queue.
	var c crew
	ws := make([]*worker, producers)
	lens := []int{1, 5, 2*bd.Capacity + 1, 2*bd.Capacity + 1}
	for p, tp := range tps {
		ws[p] = startWorker(&c, tp)
		mustStopping(ctx, &c, handOut(ctx, ws[p], job{chunk: handles(lens[p])}), ws...)
	}
	letBlock := func() {
		time.Sleep(2 * time.Millisecond)
		for range 100 {
			runtime.Gosched()
		}
	}
	// A few drains make some room: a Send woken by one takes it and blocks
	// again (a long chunk, or producers sharing a queue), and Close must
	// release a Send blocked the second time as well as the first.
	letBlock()
	for range 3 {
		l.drain(tr)
		letBlock()
	}
	_ = tr.Close() // see checkTransportClose
	released := time.NewTimer(closeGrace)
	defer released.Stop()
	for p, w := range ws {
		select {
		case err := <-w.done:
			if err != nil && !errors.Is(err, pool.ErrClosed) {
				return errors.Join(violationf(ErrContract, "a Send of %d handles blocked on a full transport returned %v after Close, want nil or pool.ErrClosed", lens[p], err), stopWorkers(ctx, &c, ws...))
			}
		case <-released.C:
			// End the workers' jobs without waiting for those still blocked
			// in the component: the case reports them and returns at once,
			// instead of holding on until the watchdog fires.
			for _, w := range ws {
				close(w.jobs)
			}
			return violationf(ErrDeadlock, "a Send of %d handles blocked on a full transport was not released by Close within %v", lens[p], closeGrace)
		case <-ctx.Done():
			return errors.Join(violationf(ErrDeadlock, "a Send of %d handles blocked on a full transport was not released by Close", lens[p]), stopWorkers(ctx, &c, ws...))
		}
	}
	return stopWorkers(ctx, &c, ws...)
}

func checkRetire(r *trRun) error {
	tr, ctx := r.x, r.ctx
	bd, bounded := boundsOf(tr)
	src := newHandleSource(19)
	l := newLedger(src, 2)
	prods, err := several(2, "NewProducer", tr.NewProducer)
	must(err)
	p, q := prods[0], prods[1]
	// p leaves more than a batch pending: a bounded queue full, an
	// unbounded one with chunks of every size, thousands of handles.
	if bounded {
		tp, ok := p.(pool.TryProducer)
		require(ok, ErrContract, "producer %T of a bounded transport is not a pool.TryProducer", p)
		if bd.Capacity <= 0 || (bd.Chunked && bd.Capacity > maxFilled) {
			return skip("Bounds() = %+v cannot be filled here", bd)
		}
		_, err = fillItems(l, tp, 0, bd, bd.Capacity)
		must(err)
	} else {
		for _, n := range []int{1, 40, 3, 100, 33, 2049, 1, 4097, 3000, 1} {
			must(sendFresh(l, p, 0, n))
		}
	}
	for i := range 4 {
		err := p.Close()
		require(err == nil, ErrContract, "Producer.Close call %d = %v, want nil", i+1, err)
	}
	sendsFail("after Producer.Close", p, closeLengths(bd, bounded, r.longest()))
	// The other producer is unaffected; everything the retired one sent
	// is still delivered, once.
	l.drain(tr)
	mustIn(sendFresh(l, q, 1, 1), "another producer, after one retired")
	mustIn(l.settle(ctx, tr), "a retired producer's pending handles")
	for i := range 50 {
		n := l.drain(tr)
		require(n == 0, ErrDuplicated, "drain %d after a retired producer's handles were delivered delivered %d more", i, n)
	}
	retireInPlace(r, bd, bounded)
	// Producers retire while the owner drains.
	src = newHandleSource(20)
	const producers = 12
	plans := planExchange(src, producers, []int{1, 2, 31, 32, 33, 100}, r.scaled(8000), 21)
	e := exchange{tr: tr, l: newLedger(src, producers), plans: plans, staggered: producers / 2, try: true, retire: true}
	return within(e.run(ctx), "producers retiring while the owner drains")
}

// Retention limits: over each of retiredWindows windows of retiredWaves
// waves of retiredPerWave producers that each sent (or not), retired and
// were drained, the live heap may grow by at most retainedBytes per retired
// producer and the goroutine count by at most extraGoroutines. A transport
// that keeps anything per retired producer (its queue, its box, even a
// pointer or a counter in a list) grows by more in most windows, also one
// that lets go of them only now and then; an allocation by some other
// goroutine does not grow most windows.
const (
	retiredWindows  = 3
	retiredWaves    = 24
	retiredPerWave  = 64
	retainedBytes   = 2
	extraGoroutines = 4
)

// allWaves is the number of waves of a retention case: one to warm up
// (one-time growth happens there), then the windows.
const allWaves = 1 + retiredWindows*retiredWaves

// retention runs wave(0) to warm up, then retiredWindows windows of
// retiredWaves waves, measuring the live heap and the goroutines before and
// after each window, and reports what most windows kept. what names one
// retiree.
func retention(ctx context.Context, what string, wave func(w int) error) error {
	must(wave(0))
	type sample struct {
		heap       uint64
		goroutines int
	}
	measure := func() sample { return sample{liveHeap(), runtime.NumGoroutine()} }
	samples := []sample{measure()}
	for window := range retiredWindows {
		for i := range retiredWaves {
			if err := wave(1 + window*retiredWaves + i); err != nil {
				return err
			}
			if ctx.Err() != nil {
				return violationf(ErrDeadlock, "retired %d waves of %ss before the watchdog fired", window*retiredWaves+i, what)
			}
		}
		samples = append(samples, measure())
	}
	retired := retiredWaves * retiredPerWave
	var heaps []int64
	var gors []int
	heapWindows, gorWindows := 0, 0
	for k := 1; k < len(samples); k++ {
		h, g := int64(samples[k].heap)-int64(samples[k-1].heap), samples[k].goroutines-samples[k-1].goroutines
		heaps, gors = append(heaps, h), append(gors, g)
		if h > int64(retainedBytes*retired) {
			heapWindows++
		}
		if g > extraGoroutines {
			gorWindows++
		}
	}
	most := retiredWindows/2 + 1
	require(gorWindows < most, ErrRetained, "goroutines grew by %v while %d sets of %d %ss retired", gors, retiredWindows, retired, what)
	require(heapWindows < most, ErrRetained, "the live heap grew by %v bytes while %d sets of %d %ss retired and were drained, more than %d bytes per %s in %d of them",
		heaps, retiredWindows, retired, what, retainedBytes, what, heapWindows)
	return nil
}

func checkRetiredForgotten(r *trRun) error {
	tr, ctx := r.x, r.ctx
	bd, bounded := boundsOf(tr)
	total := allWaves * retiredPerWave
	sent := make([]int32, total)
	got := make([]int32, total)
	strays := 0
	t := newTally(func(h pool.Handle) {
		if i := h.Index(); i < total && h.Generation() == uint64(i) {
			got[i]++
		} else {
			strays++
		}
	})
	drainDry := func() error { // until two drains in a row bring nothing, as ledger.drainDry
		for empty := 0; empty < 2; {
			if t.drain(tr) == 0 {
				empty++
			} else {
				empty = 0
			}
			if ctx.Err() != nil {
				return violationf(ErrDeadlock, "drains kept delivering")
			}
		}
		return nil
	}
	prods := make([]pool.Producer, retiredPerWave)
	chunk := make([]pool.Handle, 3)
	wave := func(w int) error {
		for i := range prods {
			id := w*retiredPerWave + i
			prod, err := tr.NewProducer()
			if err != nil {
				return violationf(ErrContract, "producer %d: NewProducer: %v", id, err)
			}
			prods[i] = prod
			n := 1 + id%3
			if id%4 == 3 {
				n = 0 // an idle producer retires too
			}
			if bounded && !bd.Chunked {
				n = min(n, max(bd.Capacity, 1))
			}
			for k := range n {
				chunk[k] = mkHandle(7, uint32(id), uint64(id))
			}
			if n > 0 {
				if err := prod.Send(chunk[:n]); err != nil {
					return violationf(ErrContract, "producer %d: Send: %v", id, err)
				}
			}
			sent[id] += int32(n)
			if err := prod.Close(); err != nil {
				return violationf(ErrContract, "producer %d: Close: %v", id, err)
			}
			if bounded && !bd.PerProducer {
				if err := drainDry(); err != nil { // room in the shared queue
					return err
				}
			}
		}
		clear(prods)
		return drainDry()
	}
	must(retention(ctx, "producer", wave))
	must(t.check())
	require(strays == 0, ErrCorrupted, "%d delivered handles were never sent", strays)
	for id := range total {
		require(got[id] <= sent[id], ErrDuplicated, "retired producer %d's handle delivered %d times, sent %d", id, got[id], sent[id])
		require(got[id] >= sent[id], ErrLost, "retired producer %d's handle delivered %d times, sent %d: its pending handles were dropped at Close", id, got[id], sent[id])
	}
	return nil
}

// liveHeap collects garbage and returns the bytes of live heap objects.
func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// retireInPlace checks that a Drain right after a producer retired
// delivers everything published before it, from every producer, wherever
// the retired one sits among them: a transport that removes a retired
// producer by swapping the last one into its place must still visit that
// one. A shared queue has no place per producer, and its Drain takes a
// batch of the queue, not of each producer: it is left out.
func retireInPlace(r *trRun, bd pool.Bounds, bounded bool) {
	if bounded && !bd.PerProducer {
		return
	}
	tr, ctx := r.x, r.ctx
	const live = 6
	src := newHandleSource(22)
	l := newLedger(src, live)
	for j := range live {
		prods, err := several(live, "NewProducer", tr.NewProducer)
		must(err)
		for p, prod := range prods {
			chunk := freshChunk(src, p, 1)
			if tp, ok := prod.(pool.TryProducer); ok && bounded {
				// A queue of its own is empty: TrySend takes the
				// handle, and never waits, if the queue is shared.
				n, err := tp.TrySend(chunk)
				require(n == 1 && err == nil, ErrContract, "TrySend of one handle by a new producer, with a queue of its own, = (%d, %v), want (1, nil)", n, err)
			} else {
				mustOK("Send", prod.Send(chunk))
			}
			l.sent[p] = append(l.sent[p], chunk...)
		}
		err = prods[j].Close()
		require(err == nil, ErrContract, "Producer.Close = %v, want nil", err)
		if n := l.drain(tr); n != live {
			must(lateOrLost(ctx, tr, l, violationf(ErrLost, "the Drain right after producer %d of %d retired, each with one handle sent, delivered %d handles: a Drain must visit every producer, also one that takes a retired producer's place", j+1, live, n)))
		}
		for p, prod := range prods {
			if p != j {
				err := prod.Close()
				require(err == nil, ErrContract, "Producer.Close = %v, want nil", err)
			}
		}
		n := l.drain(tr)
		require(n == 0, ErrDuplicated, "a Drain after every handle was delivered delivered %d more", n)
	}
	must(l.verdict())
}
