// Package shared is a bounded remote-free transport: one queue of handles,
// of fixed capacity, shared by every producer. Each handle is one enqueue,
// and one Drain takes at most a batch of handles. It is the record's shared
// per-handle queue: the 0351 experiment, the shared_per_handle path of 0354
// and the locus_shared contender of LOCUS-EVAL v1, whose capacity 1024 and
// batch 64 are the defaults here.
//
// Mind the name: shared and transport/sharded differ by one letter. shared is
// one queue for all producers; sharded gives every producer a queue of its
// own.
//
// # When to choose it
//
// Choose it to bound the memory in flight between the workers and the owner
// (at most the capacity of handles, however far the owner falls behind), to
// apply backpressure to workers, or to replay the record's shared-queue arm.
// Do not choose it for speed. It is the slowest way back: in the record's
// LOCUS-EVAL v1 it took 274–291 µs per steady-decode trace against 81–87 µs
// for the chunk mailbox (3.3×), 294–308 against 37.5–39.5 µs on burst-storm
// and 622–646 against 60–66 µs on long-tail, and it never ranked better than
// fourth of five. Every handle costs compare-and-swaps on cache lines that all
// producers (the queue's head) and the owner (the slots) share: bench's BenchmarkSend
// measures about 15 ns per handle against 2 ns for transport/mailbox when one
// goroutine sends and drains, and 47–102 ns against 2–4 ns when one to four
// producers race an owner that drains in a loop (16-handle chunks, a 2-vCPU
// VM, Go 1.26). transport/mailbox (the default) is unbounded and never makes a
// producer wait; transport/sharded bounds memory per producer and, with chunk
// items, costs one enqueue per chunk.
//
// # Contract
//
//   - Send enqueues the handles of a chunk one by one. While the queue is
//     full it waits for the owner to drain, parked on a condition variable:
//     it does not spin. It fails with pool.ErrClosed once the transport is
//     closed, also while waiting.
//   - TrySend enqueues as many handles, from the front of the chunk, as fit
//     now and returns how many, with pool.ErrFull if that was not all.
//   - Drain takes at most the batch limit of handles, oldest first, and
//     passes them to the sink in chunks of at most min(batch, capacity).
//     It takes every handle published before it started, up to the batch
//     limit.
//   - Handles of one producer are delivered exactly once, in the order it
//     sent them; handles of different producers interleave in queue order.
//   - Close releases every producer waiting on the full queue (their Send
//     returns pool.ErrClosed) and fails later sends. Handles still queued
//     are dropped, and so may be those of sends racing with Close; Drain
//     delivers nothing after Close. Close is idempotent.
//
// # Protocol and invariants
//
// The queue is an xsync.MPMCQueueOf[pool.Handle], a bounded array of slots
// each carrying a turn number (D. Vyukov's and E. Rigtorp's design). Its
// TryEnqueue fails both when the queue is full and when another producer won
// the race for the same slot, so the transport keeps its own count of room:
//
//   - used counts the handles for which producers have reserved room and the
//     owner has not finished dequeuing. A producer reserves room for up to a
//     whole chunk with one compare-and-swap and never lets used exceed the
//     capacity; the owner subtracts what it dequeued after each dequeue has
//     completed. Hence the slots the producers write hold at most capacity
//     handles that are not yet fully dequeued, so the slot at the queue's
//     head is always free for a producer holding a reservation, and a failed
//     TryEnqueue can only be a lost race, which the producer retries at once
//     (another producer made progress). The queue is full exactly when no
//     room can be reserved.
//   - A producer can stop between claiming a slot and filling it (it was
//     preempted), and the slots behind that one cannot be dequeued before
//     it: TryDequeue fails at the unfilled slot. A handle whose Send returned
//     before a Drain started holds a slot below taken+used as read at that
//     start (taken counts the handles the owner has dequeued, ever): every
//     claimed slot not yet dequeued holds a reservation. So Drain reads
//     taken+used when it starts and keeps dequeuing until it gets there (or
//     reaches the batch limit), spinning briefly and then yielding while the
//     slot at the front is unfilled. Every slot below that mark is filled
//     soon by a producer that holds a reservation and waits for nothing but
//     the CPU. Hence every handle published before a Drain starts is
//     delivered by it, up to the batch limit; the price is that a Drain that
//     finds a producer in the middle of enqueuing waits for it to finish,
//     or, if that producer was descheduled, yields until it runs again.
//   - A producer that finds no room waits on a sync.Cond. Holding its mutex,
//     it adds itself to waiters, re-checks used, and only then calls Wait,
//     which releases the mutex. The owner, after subtracting from used,
//     reads waiters and, if any, takes the mutex and signals one waiter per
//     handle it freed. used and waiters are sync/atomic values, which are
//     sequentially consistent, so of the waiter's (add to waiters, read
//     used) and the owner's (subtract from used, read waiters) at least one
//     sees the other's write: either the waiter sees the room and does not
//     wait, or the owner sees the waiter and, since it can take the mutex
//     only once the waiter is inside Wait, signals it. No wake-up is lost.
//     A woken producer that finds the room taken by another waits again;
//     one that finds room takes at least one slot, so a slot is never left
//     free while a signalled waiter sleeps. Close sets closed and
//     broadcasts under the same mutex.
//
// Happens-before: a producer writes a handle into its slot before it stores
// the slot's turn, and the owner's TryDequeue loads that turn before it
// reads the handle, so a Send that returns nil happens before the Drain that
// delivers its handles (sync/atomic operations are sequentially consistent;
// see https://go.dev/ref/mem). Writes a worker made to a block before freeing
// it are therefore visible to the owner once the block is drained.
//
// Send and Drain allocate nothing.
package shared

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/puzpuzpuz/xsync/v3"
	"golang.org/x/sys/cpu"

	"github.com/locus-go/locus/pool"
)

// Transport is one bounded queue of handles shared by all producers. Build it
// with New; the zero value is not usable. NewProducer and the producers' calls
// are safe from any goroutine; Drain and Close are the owner's. A Transport
// must not be copied.
type Transport struct {
	// Read-mostly.
	q        *xsync.MPMCQueueOf[pool.Handle]
	capacity int64
	batch    int
	closed   atomic.Bool

	// The owner's.
	_       cpu.CacheLinePad
	buf     []pool.Handle // min(batch, capacity) handles: one Put's worth
	taken   uint64        // handles dequeued, ever; mirrored in drained for Stats
	drained atomic.Uint64 // for Stats

	_    cpu.CacheLinePad
	used atomic.Int64 // room reserved by producers, not yet released by the owner
	_    cpu.CacheLinePad

	// The slow path: producers waiting for room, and counters.
	waiters   atomic.Int64
	mu        sync.Mutex
	cond      sync.Cond
	full      atomic.Uint64
	blocked   atomic.Uint64
	producers atomic.Int64
}

var _ pool.BoundedTransport = (*Transport)(nil)

var errZero = fmt.Errorf("%w: shared: zero Transport; make it with New", pool.ErrInvalidConfig)

// New returns an empty shared queue. Options set its capacity (default
// DefaultCapacity) and drain batch (default DefaultBatch); invalid values fail
// with an error wrapping pool.ErrInvalidConfig.
func New(opts ...Option) (*Transport, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	t := &Transport{
		q:        xsync.NewMPMCQueueOf[pool.Handle](cfg.capacity),
		capacity: int64(cfg.capacity),
		batch:    cfg.batch,
		buf:      make([]pool.Handle, min(cfg.batch, cfg.capacity)),
	}
	t.cond.L = &t.mu
	return t, nil
}

// Bounds returns the capacity and batch limit; items are single handles and
// all producers share the queue.
func (t *Transport) Bounds() pool.Bounds {
	return pool.Bounds{Capacity: int(t.capacity), Batch: t.batch}
}

// Producer is one producer's endpoint of the shared queue. It is used by one
// goroutine at a time.
type Producer struct {
	t      *Transport
	closed bool
}

var _ pool.TryProducer = (*Producer)(nil)

// NewProducer returns an endpoint for one producer goroutine. Safe to call
// from any goroutine, also while the owner drains. It fails with
// pool.ErrClosed after Close, and with an error wrapping
// pool.ErrInvalidConfig on a Transport not made by New.
func (t *Transport) NewProducer() (pool.Producer, error) {
	if t.closed.Load() {
		return nil, pool.ErrClosed
	}
	if t.q == nil {
		return nil, errZero
	}
	t.producers.Add(1)
	return &Producer{t: t}, nil
}

// Send enqueues every handle of chunk, in order. While the queue is full it
// waits, parked, for the owner to drain. It fails with pool.ErrClosed after
// Close, also while waiting; handles it enqueued before that are dropped with
// the transport. The caller may reuse chunk as soon as Send returns.
func (p *Producer) Send(chunk []pool.Handle) error {
	t := p.t
	for {
		if p.closed || t.closed.Load() {
			return pool.ErrClosed
		}
		if len(chunk) == 0 {
			return nil
		}
		n := t.reserve(len(chunk))
		if n == 0 {
			if err := t.wait(); err != nil {
				return err
			}
			continue
		}
		t.enqueue(chunk[:n])
		chunk = chunk[n:]
	}
}

// TrySend enqueues as many handles of chunk, from the front, as fit without
// waiting and returns how many. It returns pool.ErrFull if that was not all of
// them, and pool.ErrClosed (having enqueued none) after Close.
func (p *Producer) TrySend(chunk []pool.Handle) (int, error) {
	t := p.t
	if p.closed || t.closed.Load() {
		return 0, pool.ErrClosed
	}
	if len(chunk) == 0 {
		return 0, nil
	}
	n := t.reserve(len(chunk))
	t.enqueue(chunk[:n])
	if n < len(chunk) {
		t.full.Add(1)
		return n, pool.ErrFull
	}
	return n, nil
}

// Close retires the producer: later sends fail with pool.ErrClosed; what it
// sent before stays queued for the owner. The shared queue keeps no state per
// producer, so nothing else is released. Close is idempotent.
func (p *Producer) Close() error {
	if p.closed {
		return nil
	}
	p.closed = true
	p.t.producers.Add(-1)
	return nil
}

// reserve takes room for up to want handles and returns how many it got; 0
// when the queue is full.
func (t *Transport) reserve(want int) int {
	for {
		used := t.used.Load()
		n := min(int64(want), t.capacity-used)
		if n <= 0 {
			return 0
		}
		if t.used.CompareAndSwap(used, used+n) {
			return int(n)
		}
	}
}

// enqueue puts handles for which room is reserved into the queue.
func (t *Transport) enqueue(hs []pool.Handle) {
	for _, h := range hs {
		for !t.q.TryEnqueue(h) {
			// A lost race: the room is ours, another producer took
			// the slot we aimed at. Retry at the new head.
		}
	}
}

// wait parks the caller until the owner frees room or the transport closes.
func (t *Transport) wait() error {
	t.blocked.Add(1)
	t.mu.Lock()
	t.waiters.Add(1)
	for t.used.Load() >= t.capacity && !t.closed.Load() {
		t.cond.Wait()
	}
	t.waiters.Add(-1)
	t.mu.Unlock()
	if t.closed.Load() {
		return pool.ErrClosed
	}
	return nil
}

// Drain takes up to the batch limit of handles, oldest first, and passes them
// to sink in chunks of at most min(batch, capacity). Every handle published
// before the call is taken, up to the limit; handles published during the
// call may be. After Close it delivers nothing. Only the owner calls Drain.
func (t *Transport) Drain(sink *pool.Sink) {
	if t.closed.Load() {
		return
	}
	for left := t.batch; left > 0; {
		// Every handle published by now lies within the next used
		// slots; see the package doc.
		room := min(left, len(t.buf))
		want := min(room, int(t.used.Load()))
		for n, spins := 0, 0; n < want; {
			h, ok := t.q.TryDequeue()
			if !ok {
				// A producer has claimed the front slot and not
				// yet filled it.
				if spins++; spins > spinsBeforeYield {
					runtime.Gosched()
				}
				continue
			}
			t.buf[n] = h
			n++
		}
		if want == 0 {
			return
		}
		t.taken += uint64(want)
		t.drained.Store(t.taken)
		t.release(want)
		sink.Put(t.buf[:want])
		if want < room {
			return // took everything published; the rest is new
		}
		left -= want
	}
}

// spinsBeforeYield is how many times Drain retries an unfilled slot before it
// starts yielding the processor to the producer that claimed it. The producer
// fills it a few instructions after claiming it unless it was descheduled.
const spinsBeforeYield = 64

// release returns the room of n dequeued handles and wakes up to n waiting
// producers.
func (t *Transport) release(n int) {
	t.used.Add(-int64(n))
	w := t.waiters.Load()
	if w == 0 {
		return
	}
	t.mu.Lock()
	for range min(int64(n), w) {
		t.cond.Signal()
	}
	t.mu.Unlock()
}

// Close makes later sends fail with pool.ErrClosed and releases producers
// waiting on the full queue, whose Send returns pool.ErrClosed. Handles still
// queued are dropped with the transport; so may be handles of sends racing
// with Close. Close is idempotent and returns nil.
func (t *Transport) Close() error {
	t.mu.Lock()
	t.closed.Store(true)
	t.cond.Broadcast()
	t.mu.Unlock()
	return nil
}

// Stats is a snapshot of a shared queue's counters. Items are handles. The
// counts are exact once producers are quiet and the owner is not draining;
// while they run, a snapshot mixes moments and is only approximate.
type Stats struct {
	Capacity  int // handles the queue holds
	Batch     int // most handles one Drain takes
	Producers int // producers made by NewProducer and not yet closed

	Submitted uint64 // handles accepted by sends: Drained + Pending
	Drained   uint64 // handles passed to a sink by Drain
	Pending   uint64 // handles queued, or being enqueued, and not yet drained
	Full      uint64 // TrySend calls that returned pool.ErrFull (the record's full counter)
	Blocked   uint64 // times a Send found the queue full and waited for the owner
}

// Stats returns the queue's counters. It is safe to call from any goroutine.
func (t *Transport) Stats() Stats {
	drained := t.drained.Load()
	pending := uint64(max(t.used.Load(), 0))
	return Stats{
		Capacity:  int(t.capacity),
		Batch:     t.batch,
		Producers: int(t.producers.Load()),
		Submitted: drained + pending,
		Drained:   drained,
		Pending:   pending,
		Full:      t.full.Load(),
		Blocked:   t.blocked.Load(),
	}
}
