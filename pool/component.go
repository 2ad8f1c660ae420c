package pool

import "strconv"

// The three component kinds a Pool is composed of. Each interface is small and
// batch-granular on purpose: Go calls a method of a type parameter indirectly,
// through the instantiation's dictionary, and never inlines it. The pool
// therefore calls a component only per chunk or per pool, never per block; the
// per-block work (pop a free index, check a generation, push it back) is
// concrete code in this package.

// Backing provides the memory of a pool's blocks.
//
// The pool calls Len and Block once per block, in New, and keeps the slices;
// it calls Close once, from Pool.Close. Every block must have the same
// non-zero length, cap(Block(i)) must equal len(Block(i)) (so an append cannot
// spill into a neighbour), the blocks must not overlap, and Block(i) must
// return the same memory every time until Close. Fresh blocks read as zero.
// conformance.TestBacking checks all of this.
type Backing interface {
	// Len returns the number of blocks.
	Len() int
	// Block returns the memory of block i, 0 <= i < Len().
	Block(i int) []byte
	// Close releases the memory. The pool no longer hands out any slice of
	// it; a slice that a caller kept from Pool.Bytes must not be used after
	// Close (for a mapped backing it is unmapped).
	Close() error
}

// Transport carries remotely freed handles from producer goroutines back to
// the pool's owner.
//
// NewProducer may be called from any goroutine, also while Drain runs. Drain
// and Close are called by the owner only. A transport delivers every handle
// that a Producer's Send accepted exactly once, in the order that producer
// sent them, through later Drains; a Send that returns nil happens before the
// Drain that delivers its handles. conformance.TestTransport checks this.
type Transport interface {
	// NewProducer returns a new endpoint for one producer goroutine.
	NewProducer() (Producer, error)
	// Drain passes every chunk published before the call to sink.Put, and
	// may pass chunks published during the call. A bounded transport
	// (BoundedTransport) takes at most Bounds().Batch items from each queue
	// per call and leaves the rest for the next Drain; an unbounded one
	// takes everything.
	Drain(sink *Sink)
	// Close stops the transport: later sends fail with ErrClosed and
	// producers blocked on a full transport return. Chunks still pending
	// are dropped. Close may be called more than once.
	Close() error
}

// Producer is one producer goroutine's endpoint of a Transport. A Producer is
// used by one goroutine at a time.
type Producer interface {
	// Send publishes a chunk of freed handles. The transport copies what it
	// needs: the caller may reuse chunk as soon as Send returns. A bounded
	// transport blocks while it is full, without burning a core. Send fails
	// only when the producer or the transport is closed.
	Send(chunk []Handle) error
	// Close retires the producer: later Sends fail with ErrClosed, every
	// handle it sent before is still delivered exactly once by later
	// Drains, and once those are delivered the transport forgets the
	// producer, so that retired producers cost later Drains nothing. Call
	// it from the producer's goroutine after its last Send. Close may be
	// called more than once; later calls do nothing and return nil.
	Close() error
}

// TryProducer is a Producer of a bounded transport that can also refuse to
// wait. Pool senders use it for Sender.TryFreeChunk.
type TryProducer interface {
	Producer
	// TrySend publishes as many handles of chunk, from the front, as fit
	// without waiting and returns how many. It returns ErrFull when it
	// could not publish them all.
	TrySend(chunk []Handle) (int, error)
}

// Order is the order in which a pool reuses free blocks.
type Order uint8

// The reuse orders a pool implements.
const (
	// LIFO hands out the most recently freed block first: its memory is the
	// most likely to still be in cache. A fresh pool hands out blocks 0, 1,
	// 2, ...
	LIFO Order = iota + 1
	// FIFO hands out the block that has been free longest, spreading reuse
	// over every block at the cost of cache warmth. A fresh pool hands out
	// blocks n-1, n-2, ...
	FIFO
)

// String returns "lifo" or "fifo".
func (o Order) String() string {
	switch o {
	case LIFO:
		return "lifo"
	case FIFO:
		return "fifo"
	}
	return "Order(" + strconv.Itoa(int(o)) + ")"
}

// Valid reports whether o is one of the orders a pool implements.
func (o Order) Valid() bool { return o == LIFO || o == FIFO }

// ReusePolicy chooses the order in which a pool reuses free blocks.
//
// The pool asks once, in New. A policy is a declaration rather than a free
// list of its own because a per-block policy call would be an indirect call
// that the compiler cannot inline, costing about as much as the whole
// allocation path. Order must return the same valid value on every call.
type ReusePolicy interface {
	// Order returns the reuse order.
	Order() Order
}

// Bounds describes the limits of a bounded transport.
type Bounds struct {
	// Capacity is how many items one queue holds.
	Capacity int
	// Batch is the most items one Drain takes from one queue.
	Batch int
	// Chunked is true when an item is a whole chunk, false when it is one
	// handle.
	Chunked bool
	// PerProducer is true when every producer has a queue of its own, false
	// when all producers share one queue.
	PerProducer bool
}

// BoundedTransport is a Transport whose queues have a fixed capacity and whose
// Drain takes a limited batch. Its producers are TryProducers. The
// conformance suite checks the bounds when a transport reports them.
type BoundedTransport interface {
	Transport
	// Bounds returns the transport's limits; they never change.
	Bounds() Bounds
}
