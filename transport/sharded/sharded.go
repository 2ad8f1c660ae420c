// Package sharded is a bounded remote-free transport: every producer gets a
// queue of its own, of fixed capacity, and the owner drains every queue in
// one pass, taking at most a batch of items from each. An item is either one
// handle (the default; design thread 0352) or a whole chunk (WithChunks;
// 0353, and the sharded_chunk path of the 0354 trace that the chunk mailbox
// later replaced).
//
// Mind the name: sharded and transport/shared differ by one letter. shared is
// one queue for all producers; sharded gives every producer its own.
//
// # When to choose it
//
// Choose it to bound the memory in flight per producer (at most capacity items
// each, however far the owner falls behind), to push back on workers that free
// faster than the owner drains, or to replay the record's sharded arms. Use
// chunk items unless you replay the per-handle runs: in the record one enqueue
// per chunk took the 4-producer commanded cycle from 12.9–13.4 to 10.8 µs
// (0353), and the sharded chunk queue ran the mixed-lifetime trace in 80–81 µs
// against 282–283 µs for the shared per-handle queue (0354, 3.5×). It is still
// slower than transport/mailbox, the default: the mailbox beat it by 6–8 % on
// the same trace (0357: 69–72 against 74–78 µs) with no capacity or batch to
// tune and no producer ever waiting. bench's BenchmarkSend (16-handle chunks, a 2-vCPU
// VM, Go 1.26) measures per handle about 4.1 ns for per-handle items, 1.4 ns
// for chunk items and 1.8 ns for the mailbox when one goroutine sends and
// drains, and 12–14, 4.3–6.9 and 1.9–3.8 ns when one to four producers race an
// owner that drains in a loop: a full queue makes its producer park until the
// owner wakes it, which the unbounded mailbox never does.
//
// # Contract
//
//   - A Producer (NewProducer) owns one queue. Send enqueues its chunk: one
//     item per handle, or one item for the whole chunk, which is copied into
//     a slot buffer of the queue. While the queue is full Send waits for the
//     owner to drain, parked on a channel: it does not spin. A per-handle
//     chunk longer than the capacity goes through piecewise as the owner
//     drains; a chunk item may have any length. Send fails with
//     pool.ErrClosed once the transport is closed, also while waiting.
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
//   - Close releases producers waiting on a full queue (their Send returns
//     pool.ErrClosed) and fails later sends and NewProducer. Items still
//     queued are dropped, and so may be those of sends racing with Close;
//     Drain delivers nothing after Close. Close is idempotent.
//
// In steady state Send and Drain allocate nothing. A per-handle queue
// allocates its ring once, in NewProducer. A chunk queue's slot buffers grow
// to the largest chunk they have carried and are then reused, so a chunk
// queue holds up to capacity times the largest chunk of memory.
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
// publishes each handle with its own store of tail (one enqueue per handle,
// as in the record); a chunk Send copies the chunk into the slot's buffer
// (growing it if the chunk is longer than any it carried before) and then
// publishes it with one store.
//
// A producer that finds its queue full announces itself in waiting, re-loads
// head, and parks on the queue's one-token wake channel only if the queue is
// still full. The owner, after storing a new head, loads waiting and, if set,
// puts a token into wake without blocking. Of the producer's (store waiting,
// load head) and the owner's (store head, load waiting) at least one sees the
// other's store, because sync/atomic operations are sequentially consistent:
// either the producer sees the room or the owner sees the producer and leaves
// it a token, which a later receive finds. No wake-up is lost; a stale token
// only makes a later wait re-check once. Close closes a channel that every
// parked producer also waits on.
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
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/locus-go/locus/pool"
)

// Transport is a set of bounded per-producer queues. Build it with New; the
// zero value is not usable. NewProducer and the producers' calls are safe from
// any goroutine; Drain and Close are the owner's. A Transport must not be
// copied.
type Transport struct {
	chunked  bool
	capacity int
	batch    uint64
	closed   atomic.Bool
	done     chan struct{}            // closed by Close: releases parked producers
	queues   atomic.Pointer[[]*queue] // copy-on-write list; Drain reads it without locking
	mu       sync.Mutex               // serialises changes to queues, Close and Stats
	retired  Stats                    // counters of forgotten queues; guarded by mu
}

var _ pool.BoundedTransport = (*Transport)(nil)

var errZero = fmt.Errorf("%w: sharded: zero Transport; make it with New", pool.ErrInvalidConfig)

// New returns a transport with no producers yet. By default every handle is
// an item and each queue holds DefaultCapacity of them, drained DefaultBatch
// at a time; WithChunks makes every chunk an item, with DefaultChunkCapacity
// and DefaultChunkBatch. Invalid values fail with an error wrapping
// pool.ErrInvalidConfig.
func New(opts ...Option) (*Transport, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	return &Transport{
		chunked:  cfg.chunks,
		capacity: cfg.capacity,
		batch:    uint64(cfg.batch),
		done:     make(chan struct{}),
	}, nil
}

// Bounds returns the per-queue capacity and batch limit, whether an item is a
// whole chunk, and PerProducer: true.
func (t *Transport) Bounds() pool.Bounds {
	return pool.Bounds{Capacity: t.capacity, Batch: int(t.batch), Chunked: t.chunked, PerProducer: true}
}

// NewProducer adds a queue for one producer goroutine and returns its
// endpoint, a *Producer. Safe to call from any goroutine, also while the owner
// drains. It fails with pool.ErrClosed after Close, and with an error wrapping
// pool.ErrInvalidConfig on a Transport not made by New.
func (t *Transport) NewProducer() (pool.Producer, error) {
	if t.closed.Load() {
		return nil, pool.ErrClosed
	}
	if t.done == nil {
		return nil, errZero
	}
	q := &queue{wake: make(chan struct{}, 1)}
	if t.chunked {
		q.chunks = make([][]pool.Handle, t.capacity)
	} else {
		q.handles = make([]pool.Handle, t.capacity)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed.Load() {
		return nil, pool.ErrClosed
	}
	var next []*queue
	if old := t.queues.Load(); old != nil {
		next = append(next, *old...)
	}
	next = append(next, q)
	t.queues.Store(&next)
	return &Producer{t: t, q: q}, nil
}

// Drain takes from every queue, in the order their producers were made, at
// most the batch limit of items, oldest first, and passes their handles to
// sink. Every item published before the call is taken, up to the limit. After
// Close it delivers nothing. Only the owner calls Drain.
func (t *Transport) Drain(sink *pool.Sink) {
	if t.closed.Load() {
		return
	}
	qs := t.queues.Load()
	if qs == nil {
		return
	}
	gone := false
	for _, q := range *qs {
		// Load retired before draining: if it is set, everything the
		// producer will ever send is in the queue already.
		retired := q.retired.Load()
		t.drain(q, sink)
		if retired && q.taken == q.tail.Load() {
			q.gone, gone = true, true
		}
	}
	if gone {
		t.forget()
	}
}

// forget drops the queues Drain found retired and empty, keeping their
// counts. Stats reads the list from any goroutine, so it is copied.
func (t *Transport) forget() {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := *t.queues.Load()
	live := make([]*queue, 0, len(old))
	for _, q := range old {
		if !q.gone {
			live = append(live, q)
			continue
		}
		t.retired.Submitted += q.tail.Load()
		t.retired.Drained += q.head.Load()
		t.retired.Full += q.full.Load()
		t.retired.Blocked += q.blocked.Load()
	}
	t.queues.Store(&live)
}

// drain takes up to a batch of items from one queue.
func (t *Transport) drain(q *queue, sink *pool.Sink) {
	n := min(q.tail.Load()-q.taken, t.batch)
	if n == 0 {
		return
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
	if q.waiting.Load() {
		select {
		case q.wake <- struct{}{}:
		default: // a token is already there
		}
	}
}

// Close makes later sends and NewProducer fail with pool.ErrClosed and
// releases producers waiting on a full queue, whose Send returns
// pool.ErrClosed. Items still queued are dropped with the transport; so may
// be items of sends racing with Close. Close is idempotent and returns nil.
func (t *Transport) Close() error {
	t.mu.Lock()
	if !t.closed.Load() {
		t.closed.Store(true)
		if t.done != nil { // nil in a zero Transport
			close(t.done)
		}
	}
	t.mu.Unlock()
	return nil
}

// Stats is a snapshot of the counters of all of a transport's queues, summed.
// Items are handles, or chunks with WithChunks. The counts are exact once
// producers are quiet and the owner is not draining; while they run, a
// snapshot reads the queues one after another, though Submitted >= Drained
// always holds.
type Stats struct {
	Capacity  int  // items each queue holds
	Batch     int  // most items one Drain takes from each queue
	Chunked   bool // whether an item is a whole chunk
	Producers int  // live queues: producers made by NewProducer and not yet retired and drained

	Submitted uint64 // items published by sends
	Drained   uint64 // items passed to a sink by Drain
	Pending   uint64 // items published and not yet drained: Submitted - Drained
	Full      uint64 // TrySend calls that returned pool.ErrFull (the record's full counter)
	Blocked   uint64 // times a Send found its queue full and waited for the owner
}

// Stats returns the counters of all queues, retired ones included. It is
// safe to call from any goroutine.
func (t *Transport) Stats() Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.retired
	st.Capacity, st.Batch, st.Chunked = t.capacity, int(t.batch), t.chunked
	qs := t.queues.Load()
	if qs == nil {
		return st
	}
	st.Producers = len(*qs)
	for _, q := range *qs {
		head := q.head.Load() // before tail, so that tail >= head
		st.Submitted += q.tail.Load()
		st.Drained += head
		st.Full += q.full.Load()
		st.Blocked += q.blocked.Load()
	}
	st.Pending = st.Submitted - st.Drained
	return st
}
