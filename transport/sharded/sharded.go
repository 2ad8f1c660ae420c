// Package sharded is a bounded remote-free transport: every producer gets a
// queue of its own, of fixed capacity, and the owner drains every queue in
// one pass, taking at most a batch of items from each. An item is either one
// handle (the default) or a whole chunk (WithChunks).
//
// Mind the name: sharded and transport/shared differ by one letter. shared is
// one queue for all producers; sharded gives every producer its own.
//
// # When to choose it
//
// Choose it to bound the memory in flight per producer (at most capacity items
// each, however far the owner falls behind), or to push back on workers that
// free faster than the owner drains. Use chunk items unless you need to count
// handles one by one: a chunk of n handles is one enqueue instead of n, and
// unlike transport/shared no producer writes another's queue. It is still
// slower than transport/mailbox, the default, which has no capacity or batch
// to tune and never makes a producer wait; here a full queue makes its
// producer park until the owner wakes it. bench's BenchmarkSend compares the
// transports on your machine.
//
// # Contract
//
//   - A Producer (NewProducer) owns one queue. Send enqueues its chunk: one
//     item per handle, or one item for the whole chunk, which is copied into
//     a slot buffer of the queue. While the queue is full Send waits for the
//     owner to drain, parked on a condition variable: it does not spin. A
//     per-handle chunk longer than the capacity goes through piecewise as
//     the owner drains; a chunk item may have any length.
//   - TrySend enqueues what fits now and returns how many handles that was,
//     with pool.ErrFull if not all: as many handles as fit in per-handle
//     mode, the whole chunk or nothing in chunk mode.
//   - Drain visits the queues in the order their producers were made and
//     takes from each at most the batch limit of items, oldest first: every
//     item published before the call, up to the limit. Per-handle items
//     reach the sink in at most two Put calls per queue (the ring may wrap),
//     chunk items in one Put per chunk. The sink must not keep the chunk: its
//     memory is the queue's slot, reused by later sends.
//   - A producer's handles are delivered exactly once, in the order it sent
//     them.
//   - Producer.Close retires the producer: its later sends fail with
//     pool.ErrClosed, what it sent is still delivered, and the Drain that
//     takes its last item forgets its queue, so that a producer made per
//     request and closed costs later drains nothing.
//   - Transport.Close, which may race any call, releases producers waiting on
//     a full queue (their Send returns pool.ErrClosed) and fails later sends
//     and NewProducer. Items still queued are dropped, and so may be those of
//     sends racing with Close; Drain delivers nothing after Close. Close is
//     idempotent.
//   - Nothing panics on a nil or zero Transport or Producer: NewProducer
//     fails with an error wrapping pool.ErrInvalidConfig, sends with one
//     wrapping pool.ErrClosed, and the rest do nothing. Drain with a nil
//     sink takes nothing.
//
// In steady state Send and Drain allocate nothing, also when a Drain forgets
// retired queues. A per-handle queue allocates its ring once, in
// NewProducer. A chunk queue's slot buffers grow to the largest chunk they
// have carried and are then reused, so a chunk queue holds up to capacity
// times the largest chunk of memory.
//
// # Protocol and invariants
//
// Each queue is a single-producer, single-consumer ring of capacity slots
// with two monotonic counters, both sync/atomic values:
//
//   - tail counts the items the producer has published. Only the producer
//     writes it (and the slots at tail and after); the owner reads it.
//   - head counts the items the owner has drained. Only the owner writes it;
//     the producer reads it, when its cached copy says the queue is full.
//
// Item i lives in slot i mod capacity. 0 <= tail-head <= capacity always
// holds: the producer writes slot tail mod capacity only after it has seen
// tail-head < capacity, that is, after the owner stored a head past the slot's
// previous item; the owner reads slots head .. tail-1 only after loading
// tail. So at every moment a slot belongs to exactly one of the two, and
// neither ever waits for the other inside an operation. A per-handle Send
// publishes each handle with its own store of tail (one enqueue per handle);
// a chunk Send copies the chunk into the slot's buffer (growing it if the
// chunk is longer than any it carried before) and then publishes it with one
// store.
//
// A producer that finds its queue full waits on the queue's Parking (package
// transport/internal/bounded) with head as the state it re-checks; the owner,
// after storing a new head, wakes it. The Parking's protocol loses no
// wake-up: of the producer's (count itself waiting, load head) and the
// owner's (store head, load the waiting count) at least one sees the other's
// write. Transport.Close sets the closed flag and then wakes every queue's
// Parking, under the mutex that NewProducer holds while it checks the flag
// and adds a queue, so no producer sleeps through Close.
//
// Retirement: Producer.Close stores the queue's retired flag after the
// producer's last store of tail. Drain loads retired before it loads tail, so
// a Drain that sees the flag sees the final tail; if it takes the queue's
// last item it marks the queue and, after its pass, drops it from the list
// and adds its count (tail = head) to the forgotten total that Stats adds
// back, so the counters never go down.
//
// Happens-before: the producer writes an item's slot before it stores tail,
// and the owner loads tail before it reads the slot, so a Send that returns
// nil happens before the Drain that delivers its handles (see
// https://go.dev/ref/mem). Writes a worker made to a block before freeing it
// are therefore visible to the owner once the block is drained. In the other
// direction, the owner's reads of a slot happen before the producer reuses
// it.
package sharded

import (
	"sync"

	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/internal/bounded"
	"github.com/locus-go/locus/transport/internal/roster"
)

// Transport is a set of bounded per-producer queues. Build it with New; the
// zero value and a nil *Transport are not usable (NewProducer fails). The
// producers' calls and NewProducer, Stats and Close are safe from any
// goroutine; Drain is the owner's. A Transport must not be copied.
type Transport struct {
	// Set by New, then only read.
	chunked  bool
	capacity int
	batch    uint64

	gate      bounded.Gate // closed flag, read by every send; counters
	mu        sync.Mutex   // serialises NewProducer, forgetting, Close's wake-ups and Stats
	queues    roster.List[*queue]
	forgotten uint64 // items of the queues Drain forgot, all delivered; guarded by mu
	draining  bool   // the owner's: a Drain is under way, so a sink's nested Drain does nothing
}

var _ pool.BoundedTransport = (*Transport)(nil)

var errNoTransport = bounded.NoTransport("sharded")

// New returns a transport with no producers yet. By default every handle is
// an item and each queue holds DefaultCapacity of them, drained DefaultBatch
// at a time; WithChunks makes every chunk an item, with DefaultChunkCapacity
// and DefaultChunkBatch. A later option overrides an earlier one. A nil option
// and values out of range fail with an error wrapping pool.ErrInvalidConfig.
func New(opts ...Option) (*Transport, error) {
	cfg, err := bounded.Build("sharded", opts, Option.apply, defaults)
	if err != nil {
		return nil, err
	}
	return &Transport{chunked: cfg.Chunks, capacity: cfg.Capacity, batch: uint64(cfg.Batch)}, nil
}

// Bounds returns the per-queue capacity and batch limit, whether an item is a
// whole chunk, and PerProducer: true. A zero or nil Transport has zero
// Bounds.
func (t *Transport) Bounds() pool.Bounds {
	if t == nil || t.capacity == 0 {
		return pool.Bounds{}
	}
	return pool.Bounds{Capacity: t.capacity, Batch: int(t.batch), Chunked: t.chunked, PerProducer: true}
}

// NewProducer adds a queue for one producer goroutine and returns its
// endpoint, a *Producer. Safe to call from any goroutine, also while the owner
// drains. It fails with pool.ErrClosed after Close, and with an error wrapping
// pool.ErrInvalidConfig on a zero or nil Transport.
func (t *Transport) NewProducer() (pool.Producer, error) {
	if t == nil {
		return nil, errNoTransport
	}
	if t.gate.Closed() {
		return nil, pool.ErrClosed
	}
	if t.capacity == 0 {
		return nil, errNoTransport
	}
	q := new(queue)
	if t.chunked {
		q.chunks = make([][]pool.Handle, t.capacity)
	} else {
		q.handles = make([]pool.Handle, t.capacity)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.gate.Closed() { // checked under mu: Close wakes the queues it finds under mu
		return nil, pool.ErrClosed
	}
	t.queues.Add(q)
	return &Producer{end: t.gate.Open(), t: t, q: q}, nil
}

// Drain takes from every queue, in the order their producers were made, at
// most the batch limit of items, oldest first, and passes their handles to
// sink. Every item published before the call is taken, up to the limit. It
// then forgets the queues of closed producers that it emptied. After Close,
// on a zero or nil Transport and with a nil sink it takes nothing. Only the
// owner calls Drain.
func (t *Transport) Drain(sink *pool.Sink) {
	if t == nil || sink == nil || t.draining || t.gate.Closed() {
		return
	}
	t.draining = true
	defer func() { t.draining = false }()
	gone := false
	for _, q := range t.queues.Load() {
		// Load retired before drain loads tail: if it is set, tail is
		// final.
		retired := q.retired.Load()
		if t.drain(q, sink) && retired {
			q.gone, gone = true, true
		}
	}
	if gone {
		t.forget()
	}
}

// drain takes up to a batch of items from one queue and reports whether it
// took all that were published.
func (t *Transport) drain(q *queue, sink *pool.Sink) (empty bool) {
	tail := q.tail.Load()
	n := min(tail-q.taken, t.batch)
	if n == 0 {
		return true
	}
	m, i := int(n), q.next
	if t.chunked {
		for range m {
			sink.Put(q.chunks[i])
			if i++; i == t.capacity {
				i = 0
			}
		}
	} else {
		k := min(m, t.capacity-i)
		sink.Put(q.handles[i : i+k])
		if k < m {
			sink.Put(q.handles[:m-k])
		}
		if i += m; i >= t.capacity {
			i -= t.capacity
		}
	}
	q.next = i
	q.taken += n
	q.head.Store(q.taken) // the slots are the producer's again
	q.park.Wake(1)        // the producer, if it waits for room
	return q.taken == tail
}

// forget drops the queues Drain marked, keeping their counts.
func (t *Transport) forget() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.queues.Compact(func(q *queue) bool {
		if q.gone {
			t.forgotten += q.taken
		}
		return q.gone
	})
}

// Close makes later sends and NewProducer fail with pool.ErrClosed and
// releases producers waiting on a full queue, whose Send returns
// pool.ErrClosed. Items still queued are dropped with the transport; so may
// be items of sends racing with Close. Close may be called from any
// goroutine, more than once; it returns nil, and does nothing on a nil
// Transport.
func (t *Transport) Close() error {
	if t == nil {
		return nil
	}
	t.gate.Close()
	t.mu.Lock()
	for _, q := range t.queues.Load() {
		q.park.WakeAll()
	}
	t.mu.Unlock()
	return nil
}

// Stats is a snapshot of the counters of all of a transport's queues, summed.
// Items are handles, or chunks with WithChunks. The counts are exact once
// producers are quiet and the owner is not draining; while they run, a
// snapshot reads the queues one after another, yet every counter but
// Producers and Pending only grows from one snapshot to the next, and
// Submitted >= Drained always holds. Forgotten queues stay counted.
type Stats struct {
	Capacity  int  // items each queue holds
	Batch     int  // most items one Drain takes from each queue
	Chunked   bool // whether an item is a whole chunk
	Producers int  // producers made by NewProducer and not yet closed

	Submitted uint64 // items published by sends
	Drained   uint64 // items passed to a sink by Drain
	Pending   uint64 // items published and not yet drained: Submitted - Drained
	Full      uint64 // TrySend calls that returned pool.ErrFull
	Blocked   uint64 // times a Send found its queue full and waited for the owner
}

// Stats returns the counters of all queues, forgotten ones included. It is
// safe to call from any goroutine. A nil Transport has zero Stats.
func (t *Transport) Stats() Stats {
	if t == nil {
		return Stats{}
	}
	c := t.gate.Counts()
	st := Stats{
		Capacity: t.capacity, Batch: int(t.batch), Chunked: t.chunked,
		Producers: c.Producers, Full: c.Full, Blocked: c.Blocked,
	}
	t.mu.Lock()
	st.Submitted, st.Drained = t.forgotten, t.forgotten
	for _, q := range t.queues.Load() {
		head := q.head.Load() // before tail, so that tail >= head
		st.Submitted += q.tail.Load()
		st.Drained += head
	}
	t.mu.Unlock()
	st.Pending = st.Submitted - st.Drained
	return st
}
