// Package shared is a bounded remote-free transport: one queue of handles,
// of fixed capacity, shared by every producer. Each handle is one enqueue,
// and one Drain takes at most a batch of handles. It is the simplest bounded
// transport, and a baseline for comparing the others.
//
// Mind the name: shared and transport/sharded differ by one letter. shared is
// one queue for all producers; sharded gives every producer a queue of its
// own.
//
// # When to choose it
//
// Choose it to bound the memory in flight between the workers and the owner
// (at most the capacity of handles, however far the owner falls behind), to
// apply backpressure to workers, or as the shared-queue baseline in a
// comparison of transports. Do not choose it for speed. It is the slowest way
// back: every handle costs compare-and-swaps on cache lines that all
// producers (the queue's head) and the owner (the slots) share, where the
// chunk mailbox costs one per chunk on a line no other producer writes.
// transport/mailbox (the default) is unbounded and never makes a producer
// wait; transport/sharded bounds memory per producer and, with chunk items,
// costs one enqueue per chunk. bench's BenchmarkSend compares the transports
// on your machine.
//
// # Contract
//
//   - Send enqueues the handles of a chunk one by one. While the queue is
//     full it waits for the owner to drain, parked on a condition variable:
//     it does not spin.
//   - TrySend enqueues as many handles, from the front of the chunk, as fit
//     now and returns how many, with pool.ErrFull if that was not all.
//   - Drain takes at most the batch limit of handles, oldest first, and
//     passes them to the sink in chunks of at most min(batch, capacity).
//     It takes every handle published before it started, up to the batch
//     limit.
//   - Handles of one producer are delivered exactly once, in the order it
//     sent them; handles of different producers interleave in queue order.
//   - Producer.Close retires the producer: its later sends fail with
//     pool.ErrClosed and what it sent stays queued for the owner. The
//     queue keeps no state per producer, so nothing else is left to forget.
//   - Transport.Close, which may race any call, releases every producer
//     waiting on the full queue (their Send returns pool.ErrClosed) and
//     fails later sends and NewProducer. Handles still queued are dropped,
//     and so may be those of sends racing with Close; Drain delivers nothing
//     after Close. Close is idempotent.
//   - Nothing panics on a nil or zero Transport or Producer: NewProducer
//     fails with an error wrapping pool.ErrInvalidConfig, sends with one
//     wrapping pool.ErrClosed, and the rest do nothing. Drain with a nil
//     sink takes nothing.
//
// # Protocol and invariants
//
// The queue is an xsync.MPMCQueueOf[pool.Handle], a bounded array of slots
// each carrying a turn number (D. Vyukov's and E. Rigtorp's design). Its
// TryEnqueue fails both when the queue is full and when another producer won
// the race for the same slot, so the transport keeps its own count of room in
// two monotonic sync/atomic counters:
//
//   - reserved counts the handles for which producers have reserved room,
//     ever. Only producers write it: one compare-and-swap reserves room for
//     up to a whole chunk.
//   - released counts the handles the owner has dequeued, ever. Only the
//     owner writes it, after each dequeue has completed.
//
// used = reserved - released never exceeds the capacity: a producer loads
// reserved, then released, and reserves at most capacity - used by a
// compare-and-swap that succeeds only if reserved has not moved since; as
// released only grows, the used it computed is at least the used at the
// moment of the swap. Hence the slots the
// producers write hold at most capacity handles not yet fully dequeued, so
// the slot at the queue's head is always free for a producer holding a
// reservation, and a failed TryEnqueue can only be a lost race, which the
// producer retries at once (another producer made progress). The queue is
// full exactly when no room can be reserved. Both counters only grow, so
// Stats reports them as Submitted and Drained: monotonic, and exact when
// producers and owner are quiet.
//
// A producer can stop between claiming a slot and filling it (it was
// preempted), and the slots behind that one cannot be dequeued before it:
// TryDequeue fails at the unfilled slot. A handle whose Send returned before
// a Drain started holds a slot below reserved as read at that start: every
// claimed slot not yet dequeued holds a reservation. So Drain reads reserved
// when it starts and keeps dequeuing until it gets there (or reaches the
// batch limit), spinning briefly and then yielding while the slot at the
// front is unfilled. Every slot below that mark is filled soon by a producer
// that holds a reservation and waits for nothing but the CPU. Hence every
// handle published before a Drain starts is delivered by it, up to the batch
// limit; the price is that a Drain that finds a producer in the middle of
// enqueuing waits for it to finish, or, if that producer was descheduled,
// yields until it runs again.
//
// A producer that finds no room waits on the transport's Parking (package
// transport/internal/bounded) with released as the state it re-checks; the
// owner, after storing released, wakes one waiter per handle it freed. The
// Parking's protocol loses no wake-up: of the waiter's (count itself
// waiting, load released) and the owner's (store released, load the waiting
// count) at least one sees the other's write. A woken producer that finds
// the room taken by another waits again; one that finds room takes at least
// one slot, so a slot is never left free while a woken waiter sleeps.
// Close sets the closed flag and then wakes every waiter.
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
	"runtime"
	"sync/atomic"

	"github.com/puzpuzpuz/xsync/v3"
	"golang.org/x/sys/cpu"

	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/internal/bounded"
)

// Transport is one bounded queue of handles shared by all producers. Build it
// with New; the zero value and a nil *Transport are not usable (NewProducer
// fails). The producers' calls and NewProducer, Stats and Close are safe from
// any goroutine; Drain is the owner's. A Transport must not be copied.
type Transport struct {
	// Set by New, then only read.
	q        *xsync.MPMCQueueOf[pool.Handle]
	capacity uint64
	batch    int
	buf      []pool.Handle // the owner's: min(batch, capacity) handles, one Put's worth

	gate bounded.Gate // closed flag, read by every send; counters

	released atomic.Uint64 // handles dequeued, ever; written by the owner only
	_        cpu.CacheLinePad
	reserved atomic.Uint64 // handles producers reserved room for, ever
	_        cpu.CacheLinePad

	park bounded.Parking // where producers wait while the queue is full

	draining bool // the owner's: a Drain is under way, so a sink's nested Drain does nothing
}

var _ pool.BoundedTransport = (*Transport)(nil)

var (
	errNoTransport = bounded.NoTransport("shared")
	errNoProducer  = bounded.NoProducer("shared")
)

// New returns an empty shared queue. Options set its capacity (default
// DefaultCapacity) and drain batch (default DefaultBatch); a later option
// overrides an earlier one. A nil option and values out of range fail with
// an error wrapping pool.ErrInvalidConfig.
func New(opts ...Option) (*Transport, error) {
	cfg, err := bounded.Build("shared", opts, Option.apply, defaults)
	if err != nil {
		return nil, err
	}
	return &Transport{
		q:        xsync.NewMPMCQueueOf[pool.Handle](cfg.Capacity),
		capacity: uint64(cfg.Capacity),
		batch:    cfg.Batch,
		buf:      make([]pool.Handle, min(cfg.Batch, cfg.Capacity)),
	}, nil
}

// Bounds returns the capacity and batch limit; items are single handles and
// all producers share the queue. A zero or nil Transport has zero Bounds.
func (t *Transport) Bounds() pool.Bounds {
	if t == nil || t.q == nil {
		return pool.Bounds{}
	}
	return pool.Bounds{Capacity: int(t.capacity), Batch: t.batch}
}

// Producer is one producer's endpoint of the shared queue. It is used by one
// goroutine at a time. Make it with Transport.NewProducer; the calls of a
// zero or nil Producer fail with an error wrapping pool.ErrClosed.
type Producer struct {
	end bounded.Endpoint
	t   *Transport
}

var _ pool.TryProducer = (*Producer)(nil)

// NewProducer returns an endpoint for one producer goroutine. Safe to call
// from any goroutine, also while the owner drains. It fails with
// pool.ErrClosed after Close, and with an error wrapping
// pool.ErrInvalidConfig on a zero or nil Transport.
func (t *Transport) NewProducer() (pool.Producer, error) {
	if t == nil {
		return nil, errNoTransport
	}
	if t.gate.Closed() {
		return nil, pool.ErrClosed
	}
	if t.q == nil {
		return nil, errNoTransport
	}
	return &Producer{end: t.gate.Open(), t: t}, nil
}

// check returns why the producer may not send, or nil.
func (p *Producer) check() error {
	if p == nil {
		return errNoProducer
	}
	return p.end.Check(errNoProducer)
}

// Send enqueues every handle of chunk, in order. While the queue is full it
// waits, parked, for the owner to drain. It fails with pool.ErrClosed after
// the producer's or the transport's Close, also while waiting; handles it
// enqueued before that are delivered (after Producer.Close) or dropped with
// the transport (after Transport.Close). The caller may reuse chunk as soon
// as Send returns.
func (p *Producer) Send(chunk []pool.Handle) error {
	if err := p.check(); err != nil {
		return err
	}
	t := p.t
	for len(chunk) > 0 {
		n := t.reserve(len(chunk))
		if n == 0 {
			if err := t.gate.Wait(&t.park, t.room); err != nil {
				return err
			}
			continue
		}
		t.enqueue(chunk[:n])
		chunk = chunk[n:]
	}
	return nil
}

// TrySend enqueues as many handles of chunk, from the front, as fit without
// waiting and returns how many. It returns pool.ErrFull if that was not all of
// them, and pool.ErrClosed (having enqueued none) after the producer's or the
// transport's Close.
func (p *Producer) TrySend(chunk []pool.Handle) (int, error) {
	if err := p.check(); err != nil {
		return 0, err
	}
	if len(chunk) == 0 {
		return 0, nil
	}
	t := p.t
	n := t.reserve(len(chunk))
	t.enqueue(chunk[:n])
	if n < len(chunk) {
		t.gate.Full()
		return n, pool.ErrFull
	}
	return n, nil
}

// Close retires the producer: later sends fail with pool.ErrClosed; what it
// sent before stays queued for the owner. The shared queue keeps no state per
// producer, so nothing else is released. Call it after the producer's last
// Send, from the same goroutine. Close is idempotent and returns nil.
func (p *Producer) Close() error {
	if p != nil {
		p.end.Close()
	}
	return nil
}

// reserve takes room for up to want handles and returns how many it got; 0
// when the queue is full.
func (t *Transport) reserve(want int) int {
	for {
		r := t.reserved.Load()
		d := t.released.Load()
		if d > r {
			continue // reserved moved since we loaded it
		}
		n := min(uint64(want), t.capacity-(r-d))
		if n == 0 {
			return 0
		}
		if t.reserved.CompareAndSwap(r, r+n) {
			return int(n)
		}
	}
}

// room reports whether a reservation may succeed now: the state that a
// producer waiting in Gate.Wait re-checks.
func (t *Transport) room() bool {
	r := t.reserved.Load()
	d := t.released.Load()
	return d > r || r-d < t.capacity
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

// Drain takes up to the batch limit of handles, oldest first, and passes them
// to sink in chunks of at most min(batch, capacity). Every handle published
// before the call is taken, up to the limit; handles published during the
// call may be. After Close, on a zero or nil Transport and with a nil sink
// it takes nothing. Only the owner calls Drain.
func (t *Transport) Drain(sink *pool.Sink) {
	if t == nil || sink == nil || t.q == nil || t.draining || t.gate.Closed() {
		return
	}
	t.draining = true
	defer func() { t.draining = false }()
	taken := t.released.Load() // the owner's own counter
	for left := t.batch; left > 0; {
		// Every handle published by now lies below reserved; see the
		// package doc.
		room := min(left, len(t.buf))
		want := min(room, int(t.reserved.Load()-taken))
		if want == 0 {
			return
		}
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
		taken += uint64(want)
		t.released.Store(taken)
		t.park.Wake(want)
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

// Close makes later sends and NewProducer fail with pool.ErrClosed and
// releases producers waiting on the full queue, whose Send returns
// pool.ErrClosed. Handles still queued are dropped with the transport; so
// may be handles of sends racing with Close. Close may be called from any
// goroutine, more than once; it returns nil, and does nothing on a nil
// Transport.
func (t *Transport) Close() error {
	if t == nil {
		return nil
	}
	t.gate.Close()
	t.park.WakeAll()
	return nil
}

// Stats is a snapshot of a shared queue's counters. Items are handles. The
// counts are exact once producers are quiet and the owner is not draining;
// while they run, every counter but Producers and Pending only grows from
// one snapshot to the next, and Submitted >= Drained always holds.
type Stats struct {
	Capacity  int // handles the queue holds
	Batch     int // most handles one Drain takes
	Producers int // producers made by NewProducer and not yet closed

	Submitted uint64 // handles accepted by sends, the ones being enqueued included
	Drained   uint64 // handles passed to a sink by Drain
	Pending   uint64 // handles accepted and not yet drained: Submitted - Drained
	Full      uint64 // TrySend calls that returned pool.ErrFull
	Blocked   uint64 // times a Send found the queue full and waited for the owner
}

// Stats returns the queue's counters. It is safe to call from any goroutine.
// A nil Transport has zero Stats.
func (t *Transport) Stats() Stats {
	if t == nil {
		return Stats{}
	}
	c := t.gate.Counts()
	drained := t.released.Load() // before reserved, so that submitted >= drained
	submitted := t.reserved.Load()
	return Stats{
		Capacity:  int(t.capacity),
		Batch:     t.batch,
		Producers: c.Producers,
		Submitted: submitted,
		Drained:   drained,
		Pending:   submitted - drained,
		Full:      c.Full,
		Blocked:   c.Blocked,
	}
}
