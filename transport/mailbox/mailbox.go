// Package mailbox is the chunk mailbox transport: one lock-free stack of
// chunks per producer. A producer frees a whole chunk with one compare-and-swap;
// the owner takes everything a producer published with one swap and delivers
// it oldest first. There is no capacity, no batch size and nothing to tune, and
// producers never wait for the owner.
//
// It is the default transport and the fastest way back for blocks freed on
// worker goroutines when each worker frees whole requests: a chunk costs one
// compare-and-swap however many handles it holds. Choose transport/sharded or
// transport/shared only to bound the memory in flight or to push back on
// workers.
//
// # Protocol and invariants
//
// Each producer has a box with two Treiber stacks of nodes, both in Go-heap
// memory:
//
//   - head: chunks the producer published, newest first. Only the producer
//     pushes (CAS); only the owner takes (Swap with nil).
//   - spare: nodes the owner has finished delivering, returned for reuse.
//     Only the owner pushes (CAS); only the producer takes (Swap with nil).
//
// Each stack has exactly one pusher and one taker, and a taker removes the
// whole stack at once, so a pushed node cannot come back to the top while its
// pusher still holds the old top: the ABA problem of general Treiber stacks
// cannot arise. A chunk is one chain of nodes, its last part on top; the
// owner reverses the stack, so the parts come out in order. A node is owned by exactly one party at a time (the producer's
// private cache, head, the owner during delivery, spare), so the producer
// writes a chunk's handles only into a node nobody else can read, and the
// owner reads them only after taking the node.
//
// Happens-before: the producer writes the handles into the node before the CAS
// that publishes it, and the owner's Swap that takes the node observes that
// CAS, so a Send that returns nil happens before the Drain that delivers its
// chunk (sync/atomic operations are sequentially consistent; see
// https://go.dev/ref/mem). The same holds in reverse for nodes on spare.
//
// Retirement: Producer.Close sets its box's retired flag after the
// producer's last Send. Drain loads that flag before it takes the box's
// chunks; a box seen retired there has delivered everything it will ever
// hold (its last CAS happened before the flag's store, which the load
// observed), so Drain then drops it from the list, and retired producers
// cost later drains nothing.
//
// In steady state a Send and a Drain allocate nothing: nodes, each a fixed
// slice of 32 handles, are recycled through spare. A chunk longer than a node
// is copied into a chain of nodes, pushed with the same one CAS. A producer
// allocates nodes only when more of its handles are in flight than ever
// before, and then doubles its stock, so such allocations are rare.
package mailbox

import (
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/cpu"

	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/internal/roster"
)

// Transport is a set of per-producer chunk mailboxes. The zero value is ready
// to use; New returns one too. A nil *Transport makes no producers, and its
// Drain and Close do nothing. It must not be copied after first use.
type Transport struct {
	mu       sync.Mutex // serialises changes to boxes
	boxes    roster.List[*box]
	closed   atomic.Bool
	draining bool // the owner's: a Drain is under way, so a sink's nested Drain does nothing
}

var _ pool.Transport = (*Transport)(nil)

// New returns an empty mailbox transport.
func New() *Transport { return new(Transport) }

// nodeHandles is the capacity of a node: 512 bytes of handles. A longer
// chunk takes several nodes, still published with one CAS.
const nodeHandles = 32

type node struct {
	next    *node
	handles []pool.Handle // len 1 to nodeHandles; cap nodeHandles
}

type box struct {
	_       cpu.CacheLinePad
	head    atomic.Pointer[node] // published chunks, newest first
	retired atomic.Bool          // set by Producer.Close after the last Send; on head's line, which every Drain reads anyway
	_       cpu.CacheLinePad
	spare   atomic.Pointer[node] // delivered nodes, back to the producer
	gone    bool                 // the owner's: seen retired before its last take
	_       cpu.CacheLinePad
}

// Producer is one producer's mailbox endpoint. It is used by one goroutine at
// a time. Its fields are written on every Send, so they sit on cache lines of
// their own: producers on different cores never share one.
type Producer struct {
	_      cpu.CacheLinePad
	t      *Transport
	b      *box
	cache  *node // spare nodes private to the producer
	owned  int   // nodes allocated so far
	closed bool  // Close was called
	_      cpu.CacheLinePad
}

var _ pool.Producer = (*Producer)(nil)

var errNilTransport = fmt.Errorf("%w: mailbox: nil Transport", pool.ErrInvalidConfig)

// NewProducer adds a mailbox for one producer. Safe to call from any
// goroutine, also while the owner drains. It fails with pool.ErrClosed after
// Close.
func (t *Transport) NewProducer() (pool.Producer, error) {
	if t == nil {
		return nil, errNilTransport
	}
	if t.closed.Load() {
		return nil, pool.ErrClosed
	}
	b := new(box)
	t.mu.Lock()
	t.boxes.Add(b)
	t.mu.Unlock()
	return &Producer{t: t, b: b}, nil
}

// Send publishes a copy of chunk with one CAS. It never waits for the owner.
// It fails with pool.ErrClosed after Close of the producer or the transport,
// and for a nil or zero Producer.
//
// The copy goes into nodes of nodeHandles handles each, linked so that the
// chunk's last part is on top, and the whole chain is published at once: a
// node never has to grow, so a producer allocates only when more handles
// are in flight than ever before.
func (p *Producer) Send(chunk []pool.Handle) error {
	if p == nil || p.b == nil || p.closed || p.t.closed.Load() {
		return pool.ErrClosed
	}
	if len(chunk) == 0 {
		return nil
	}
	var top, bottom *node
	for len(chunk) > 0 {
		n := p.node()
		k := min(len(chunk), nodeHandles)
		n.handles = append(n.handles[:0], chunk[:k]...)
		chunk = chunk[k:]
		n.next = top // later parts go above earlier ones
		if bottom == nil {
			bottom = n
		}
		top = n
	}
	old := p.b.head.Load()
	for {
		bottom.next = old
		if p.b.head.CompareAndSwap(old, top) {
			return nil
		}
		old = p.b.head.Load()
	}
}

// Close retires the producer: later Sends fail with pool.ErrClosed, what it
// sent before is delivered by the owner's next Drain, which then forgets the
// mailbox. Call it after the producer's last Send. Close is idempotent.
func (p *Producer) Close() error {
	if p == nil || p.b == nil || p.closed {
		return nil
	}
	p.closed = true
	p.cache = nil
	p.b.retired.Store(true)
	return nil
}

// node takes a spare node: from the producer's cache, else everything the
// owner has returned (one Swap), else a new batch.
func (p *Producer) node() *node {
	n := p.cache
	if n == nil {
		if n = p.b.spare.Swap(nil); n == nil {
			n = p.grow()
		}
	}
	p.cache = n.next
	return n
}

// grow allocates as many nodes as the producer already owns (at least one),
// in two allocations, and returns them linked. Doubling keeps allocations
// rare, like a growing slice: their number is logarithmic in the most
// handles ever in flight, for at most twice the memory.
func (p *Producer) grow() *node {
	k := max(p.owned, 1)
	p.owned += k
	nodes := make([]node, k)
	hs := make([]pool.Handle, k*nodeHandles)
	for i := range nodes {
		nodes[i].handles = hs[i*nodeHandles : i*nodeHandles : (i+1)*nodeHandles]
		if i+1 < k {
			nodes[i].next = &nodes[i+1]
		}
	}
	return &nodes[0]
}

// Drain takes every mailbox's chunks, one Swap per non-empty mailbox, and
// passes them to sink oldest first per producer, mailboxes in creation order.
// It then forgets the mailboxes of retired producers. After Close, on a nil
// Transport, with a nil sink and when called from inside the sink of a Drain
// under way it takes nothing.
func (t *Transport) Drain(sink *pool.Sink) {
	if t == nil || sink == nil || t.draining || t.closed.Load() {
		return
	}
	t.draining = true
	defer func() { t.draining = false }()
	gone := false
	for _, b := range t.boxes.Load() {
		// Load retired before taking: if it is set, the producer's last
		// Send happened before, so this take empties the box for good.
		if b.retired.Load() {
			b.gone, gone = true, true
		}
		if b.head.Load() == nil { // a plain load is cheaper than an empty Swap
			continue
		}
		newest := b.head.Swap(nil)
		// Reverse the detached stack so delivery is oldest first.
		var oldest *node
		for n := newest; n != nil; {
			next := n.next
			n.next = oldest
			oldest, n = n, next
		}
		for n := oldest; n != nil; n = n.next {
			sink.Put(n.handles)
		}
		// Give the whole list back for reuse: oldest ... newest, then the
		// nodes already on spare.
		old := b.spare.Load()
		for {
			newest.next = old
			if b.spare.CompareAndSwap(old, oldest) {
				break
			}
			old = b.spare.Load()
		}
	}
	if gone {
		t.forget()
	}
}

// forget drops the mailboxes Drain found retired.
func (t *Transport) forget() {
	t.mu.Lock()
	t.boxes.Compact(func(b *box) bool { return b.gone })
	t.mu.Unlock()
}

// Close makes later sends and NewProducer fail with pool.ErrClosed. Chunks
// still in the mailboxes are dropped with the transport (Drain delivers
// nothing after Close). Sends racing with Close may be accepted and dropped
// too. Close is idempotent and does nothing on a nil Transport.
func (t *Transport) Close() error {
	if t != nil {
		t.closed.Store(true)
	}
	return nil
}
