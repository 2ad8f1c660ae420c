package conformance

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/locus-go/locus/pool"
)

// maxFilled is the largest queue capacity the bounds cases fill item by
// item; a larger per-handle queue is filled with one TrySend.
const maxFilled = 1 << 12

// tryProducers makes n producers and checks that each is a TryProducer.
func tryProducers(tr pool.Transport, n int) ([]pool.TryProducer, error) {
	tps := make([]pool.TryProducer, n)
	for i := range tps {
		prod, err := tr.NewProducer()
		if err != nil {
			return nil, violationf(ErrContract, "NewProducer: %v", err)
		}
		tp, ok := prod.(pool.TryProducer)
		if !ok {
			return nil, violationf(ErrContract, "producer %T of a bounded transport is not a pool.TryProducer", prod)
		}
		tps[i] = tp
	}
	return tps, nil
}

// notBounded is the reason the bounds cases skip a transport.
func notBounded(tr pool.Transport) error {
	return skip("%T is not a pool.BoundedTransport", tr)
}

// fillable returns the bounds of a transport whose queues a case fills
// item by item, or why the case does not apply.
func fillable(tr pool.Transport) (pool.Bounds, error) {
	bd, bounded := boundsOf(tr)
	switch {
	case !bounded:
		return bd, notBounded(tr)
	case bd.Capacity <= 0 || bd.Batch <= 0:
		return bd, skip("Bounds() = %+v is not valid (see the Bounds case)", bd)
	case bd.Chunked && bd.Capacity > maxFilled:
		return bd, skip("a chunk queue of %d items is too large to fill item by item", bd.Capacity)
	}
	return bd, nil
}

func checkBounds(r *trRun) error {
	b, ok := r.x.(pool.BoundedTransport)
	if !ok {
		return notBounded(r.x)
	}
	bd := b.Bounds()
	require(bd.Capacity > 0 && bd.Batch > 0, ErrContract, "Bounds() = %+v, want a positive capacity and batch", bd)
	for i := range 1000 {
		again := b.Bounds()
		require(again == bd, ErrContract, "Bounds() call %d = %+v, the first %+v: bounds never change", i+2, again, bd)
	}
	l := newLedger(newHandleSource(13), 3)
	tps, err := tryProducers(r.x, 3)
	must(err)
	for p, tp := range tps {
		must(sendFresh(l, tp, p, 1))
		l.drain(r.x)
		again := b.Bounds()
		require(again == bd, ErrContract, "Bounds() after a Send and a Drain = %+v, before %+v: bounds never change", again, bd)
	}
	return l.settle(r.ctx, r.x)
}

// trySendFresh has tp, producer p of l, TrySend n fresh handles, records
// those it took as sent, and returns what TrySend returned.
func trySendFresh(l *ledger, tp pool.TryProducer, p, n int) (int, error) {
	chunk := freshChunk(l.src, p, n)
	got, err := tp.TrySend(chunk)
	if got >= 0 && got <= n {
		l.sent[p] = append(l.sent[p], chunk[:got]...)
	}
	return got, err
}

// fillItems fills producer p's queue through tp, item by item (or with one
// TrySend for a large per-handle queue), and returns how many items it
// took. Every TrySend must publish all or nothing of a one-item send, and
// report pool.ErrFull exactly when it publishes nothing; limit stops a
// queue that never fills.
func fillItems(l *ledger, tp pool.TryProducer, p int, bd pool.Bounds, limit int) (int, error) {
	lengths := []int{1, 3, 40, 200, 2}
	if bd.Capacity <= 256 {
		lengths = append(lengths, 300, 1, 1000) // long chunk items count one too
	}
	if !bd.Chunked && bd.Capacity > maxFilled {
		// One handle, many times over: a large queue needs no more.
		chunk := slices.Repeat(freshChunk(l.src, p, 1), limit)
		n, err := tp.TrySend(chunk)
		if n < 0 || n > len(chunk) || (n < len(chunk)) != errors.Is(err, pool.ErrFull) {
			return 0, violationf(ErrContract, "TrySend of %d handles = (%d, %v)", len(chunk), n, err)
		}
		l.sent[p] = append(l.sent[p], chunk[:n]...)
		return n, nil
	}
	items := 0
	for items < limit {
		n := 1
		if bd.Chunked {
			n = lengths[items%len(lengths)]
		}
		got, err := trySendFresh(l, tp, p, n)
		switch {
		case got == n && err == nil:
			items++
			continue
		case got == 0 && errors.Is(err, pool.ErrFull):
			return items, nil
		case bd.Chunked:
			return items, violationf(ErrContract, "TrySend of a %d-handle chunk item = (%d, %v), want (%d, nil) or (0, pool.ErrFull): a chunk item goes all or nothing", n, got, err, n)
		default:
			return items, violationf(ErrContract, "TrySend of one handle = (%d, %v), want (1, nil) or (0, pool.ErrFull)", got, err)
		}
	}
	return items, nil
}

func checkCapacity(r *trRun) error {
	tr, ctx := r.x, r.ctx
	bd, err := fillable(tr)
	must(err) // a skip where the case does not apply
	l := newLedger(newHandleSource(14), capacityProducers)
	tps, err := tryProducers(tr, capacityProducers)
	must(err)
	items := "handles"
	if bd.Chunked {
		items = "chunks"
	}
	// An empty queue holds exactly Capacity items.
	n, err := fillItems(l, tps[0], 0, bd, bd.Capacity+64)
	must(err)
	require(n == bd.Capacity, ErrContract, "an empty queue took %d %s before pool.ErrFull, Bounds says capacity %d", n, items, bd.Capacity)
	// The full queue refuses more, at any length.
	for _, k := range []int{1, 5, 200} {
		got, err := trySendFresh(l, tps[0], 0, k)
		require(got == 0 && errors.Is(err, pool.ErrFull), ErrContract, "TrySend of %d handles into a full queue = (%d, %v), want (0, pool.ErrFull)", k, got, err)
	}
	// Another producer has a queue of its own, or shares the full one.
	n, err = fillItems(l, tps[1], 1, bd, bd.Capacity+64)
	must(err)
	require(!bd.PerProducer || n == bd.Capacity, ErrContract, "a second producer's empty queue took %d %s while the first producer's was full; Bounds says a queue of %d per producer", n, items, bd.Capacity)
	require(bd.PerProducer || n == 0, ErrContract, "a second producer published %d %s into the shared queue that was full; Bounds says one queue of %d for all producers", n, items, bd.Capacity)
	// A Send into a full queue waits for a Drain, then goes through.
	var c crew
	w := startWorker(&c, tps[0])
	chunk := freshChunk(l.src, 0, 1)
	if err := handOut(ctx, w, job{chunk: chunk}); err != nil {
		return errors.Join(err, stopWorkers(ctx, &c, w))
	}
	if err, returned := sendReturnsEarly(w); returned {
		if err == nil {
			l.sent[0] = append(l.sent[0], chunk...)
		}
		return errors.Join(violationf(ErrContract, "a Send into a full queue returned (%v) without waiting for a Drain", err), stopWorkers(ctx, &c, w))
	}
	if spinning, states := spins(w.gid.Load()); spinning {
		return errors.Join(violationf(ErrContract, "a Send into a full queue waits by spinning: its goroutine was %v at every look, never blocked", states[:3]),
			awaitSend(ctx, tr, l, w, len(chunk), true), stopWorkers(ctx, &c, w))
	}
	if err := awaitSend(ctx, tr, l, w, len(chunk), true); err != nil {
		return errors.Join(fmt.Errorf("a Send that waited for room: %w", err), stopWorkers(ctx, &c, w))
	}
	l.sent[0] = append(l.sent[0], chunk...)
	must(stopWorkers(ctx, &c, w))
	must(l.settle(ctx, tr))
	// Every time: the queue is drained and filled again, many times over,
	// and holds exactly Capacity items each time; a shared queue is filled
	// by many producers by turns.
	refill(ctx, r, l, tps, bd)
	// TrySend publishes from the front what fits, and the room is back
	// after the drains.
	if !bd.Chunked {
		k := max(bd.Capacity/2, 1)
		got, err := trySendFresh(l, tps[0], 0, k)
		require(got == k && err == nil, ErrContract, "TrySend of %d handles into an empty queue of %d = (%d, %v), want (%d, nil)", k, bd.Capacity, got, err, k)
		rest := bd.Capacity - k + 2
		got, err = trySendFresh(l, tps[0], 0, rest)
		require(got == bd.Capacity-k && errors.Is(err, pool.ErrFull), ErrContract, "TrySend of %d handles into a queue with room for %d = (%d, %v), want (%d, pool.ErrFull)", rest, bd.Capacity-k, got, err, bd.Capacity-k)
		must(l.drainDry(ctx, tr))
	}
	return l.verdict()
}

// capacityProducers is how many producers Capacity fills queues from.
const capacityProducers = 6

// refillCycles is how many times refill fills a queue.
const refillCycles = 12

// refill drains and fills the queues of tps refillCycles times, checking
// each time that a queue holds exactly Capacity items: producer 0's
// queue, or the shared queue, filled by every producer by turns.
func refill(ctx context.Context, r *trRun, l *ledger, tps []pool.TryProducer, bd pool.Bounds) {
	if bd.Capacity > maxFilled {
		return // filled with one TrySend, not item by item
	}
	for cycle := range refillCycles {
		must(l.drainDry(ctx, r.x))
		if bd.PerProducer {
			n, err := fillItems(l, tps[0], 0, bd, bd.Capacity+64)
			must(err)
			require(n == bd.Capacity, ErrContract, "fill %d of a queue (%d items through it so far): it took %d items before pool.ErrFull, Bounds says capacity %d", cycle+2, (cycle+1)*bd.Capacity, n, bd.Capacity)
			continue
		}
		// The shared queue, by turns: each producer sends one item until
		// one is refused; then every producer is refused.
		items := 0
		for p := 0; items <= bd.Capacity+64; p = (p + 1) % len(tps) {
			n, err := fillItems(l, tps[p], p, bd, 1)
			must(err)
			if n == 0 {
				break
			}
			items++
		}
		require(items == bd.Capacity, ErrContract, "fill %d of the shared queue by %d producers by turns: it took %d items before pool.ErrFull, Bounds says one queue of %d for all producers", cycle+2, len(tps), items, bd.Capacity)
		for p, tp := range tps {
			if n, err := fillItems(l, tp, p, bd, 1); n != 0 || err != nil {
				must(errors.Join(err, violationf(ErrContract, "the shared queue, full after producers filled it by turns, took an item from producer %d: Bounds says one queue of %d for all producers", p, bd.Capacity)))
			}
		}
	}
	must(l.drainDry(ctx, r.x))
}

func checkBatch(r *trRun) error {
	tr, ctx := r.x, r.ctx
	bd, err := fillable(tr)
	must(err) // a skip where the case does not apply
	if bd.Capacity > maxFilled {
		return skip("a queue of %d items is too large to fill item by item", bd.Capacity)
	}
	const producers = 6 // more queues than any fixed split of the batch
	queues := 1
	if bd.PerProducer {
		queues = producers
	}
	src := newHandleSource(15)
	l := newLedger(src, producers)
	tps, err := tryProducers(tr, producers)
	must(err)
	// queueOf is the queue a producer's items go to.
	queueOf := func(p int) int { return p % queues }
	chunkOf := map[pool.Handle]int{} // chunk items: handle -> item number
	var itemLens []int
	levels := []int{bd.Capacity, bd.Batch + 1, bd.Batch, bd.Batch - 1, 2*bd.Batch + 1, 1}
	slices.Sort(levels)
	levels = slices.DeleteFunc(slices.Compact(levels), func(n int) bool { return n < 1 || n > bd.Capacity })
	for _, level := range levels {
		// Fill every queue to level items: per-producer queues from their
		// own producer, a shared queue from all producers by turns.
		pending := make([]int, queues)
		for i := range level * queues {
			p := i % producers
			if bd.PerProducer {
				p = i / level
			}
			n := 1
			if bd.Chunked {
				n = 1 + (i%3)*2
				if i%7 == 6 && bd.Capacity <= 256 {
					n = 300 // a long chunk item counts one too
				}
			}
			chunk := freshChunk(src, p, n)
			got, err := tps[p].TrySend(chunk)
			require(got == n && err == nil, ErrContract, "TrySend of a %d-handle item into a queue holding %d of %d items = (%d, %v), want (%d, nil)", n, pending[queueOf(p)], bd.Capacity, got, err, n)
			l.sent[p] = append(l.sent[p], chunk...)
			for _, h := range chunk {
				chunkOf[h] = len(itemLens)
			}
			itemLens = append(itemLens, n)
			pending[queueOf(p)]++
		}
		for d := 0; ; d++ {
			mark := make([]int, producers)
			for p := range mark {
				mark[p] = len(l.got[p])
			}
			l.drain(tr)
			taken := make([]int, queues)
			for p := range producers {
				got := l.got[p][mark[p]:]
				if !bd.Chunked {
					taken[queueOf(p)] += len(got)
					continue
				}
				count := map[int]int{}
				for _, h := range got {
					count[chunkOf[h]]++
				}
				for item, k := range count {
					require(k == itemLens[item], ErrContract, "a Drain delivered %d of the %d handles of a chunk item: chunk items are never split", k, itemLens[item])
				}
				taken[queueOf(p)] += len(count)
			}
			left := 0
			for q := range queues {
				want := min(bd.Batch, pending[q])
				if taken[q] != want && len(l.strays) > 0 {
					return l.verdict()
				}
				require(taken[q] == want, ErrContract, "queues filled to %d items: drain %d took %d items from a queue holding %d, want min(batch %d, %d) = %d",
					level, d, taken[q], pending[q], bd.Batch, pending[q], want)
				pending[q] -= taken[q]
				left += pending[q]
			}
			if left == 0 {
				break
			}
			require(ctx.Err() == nil, ErrDeadlock, "queues filled to %d items were not drained before the watchdog fired", level)
		}
		mustIn(l.verdict(), "queues filled to %d items", level)
	}
	return nil
}

// sendReturnsEarly gives a Send that must wait (its queue is full and
// nobody drains) time to return wrongly, and reports whether it did.
func sendReturnsEarly(w *worker) (error, bool) {
	for range 100 {
		select {
		case err := <-w.done:
			return err, true
		default:
			runtime.Gosched()
		}
	}
	time.Sleep(2 * time.Millisecond)
	select {
	case err := <-w.done:
		return err, true
	default:
		return nil, false
	}
}
