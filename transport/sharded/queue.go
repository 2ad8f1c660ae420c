package sharded

import (
	"sync/atomic"

	"golang.org/x/sys/cpu"

	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/internal/bounded"
)

// queue is one producer's ring. See the package doc for the protocol.
type queue struct {
	// Set by NewProducer, then only read; retired is written once.
	handles []pool.Handle   // per-handle mode: one handle per slot
	chunks  [][]pool.Handle // chunk mode: one chunk buffer per slot
	retired atomic.Bool     // set by Producer.Close after the producer's last Send

	// The producer's line.
	_    cpu.CacheLinePad
	tail atomic.Uint64 // items published; written by the producer only
	put  uint64        // the producer's copy of tail
	slot int           // the producer's: slot of item tail
	seen uint64        // head as the producer last loaded it: full while put-seen == capacity

	// The owner's line.
	_     cpu.CacheLinePad
	head  atomic.Uint64 // items drained; written by the owner only
	taken uint64        // the owner's copy of head
	next  int           // the owner's: slot of item head
	gone  bool          // the owner's: retired and drained, to be forgotten
	_     cpu.CacheLinePad

	park bounded.Parking // where the producer waits while the queue is full
}

// Producer is one producer's endpoint: it owns one queue of the transport.
// It is used by one goroutine at a time. Make it with Transport.NewProducer;
// the calls of a zero or nil Producer fail with an error wrapping
// pool.ErrClosed.
type Producer struct {
	end bounded.Endpoint
	t   *Transport
	q   *queue // also holds the producer's own state, away from other producers'
}

var _ pool.TryProducer = (*Producer)(nil)

var errNoProducer = bounded.NoProducer("sharded")

// check returns why the producer may not send, or nil.
func (p *Producer) check() error {
	if p == nil {
		return errNoProducer
	}
	return p.end.Check(errNoProducer)
}

// Send enqueues chunk: each handle as an item of its own, or the whole chunk
// as one item with WithChunks. While the queue is full it waits, parked, for
// the owner to drain, so a per-handle chunk longer than the capacity goes
// through piecewise. It fails with pool.ErrClosed after the producer's or the
// transport's Close, also while waiting; handles it enqueued before that are
// delivered (after Producer.Close) or dropped with the transport (after
// Transport.Close). The caller may reuse chunk as soon as Send returns.
func (p *Producer) Send(chunk []pool.Handle) error {
	if err := p.check(); err != nil {
		return err
	}
	if p.t.chunked {
		if len(chunk) == 0 {
			return nil
		}
		if !p.room() {
			if err := p.t.gate.Wait(&p.q.park, p.room); err != nil {
				return err
			}
		}
		p.putChunk(chunk)
		return nil
	}
	for _, h := range chunk {
		if !p.room() {
			if err := p.t.gate.Wait(&p.q.park, p.room); err != nil {
				return err
			}
		}
		p.putHandle(h)
	}
	return nil
}

// TrySend enqueues what fits without waiting and returns how many handles of
// chunk, from the front, it enqueued: as many as fit with per-handle items,
// all or none with WithChunks. It returns pool.ErrFull if that was not all of
// them, and pool.ErrClosed (having enqueued none) after the producer's or the
// transport's Close.
func (p *Producer) TrySend(chunk []pool.Handle) (int, error) {
	if err := p.check(); err != nil {
		return 0, err
	}
	if len(chunk) == 0 {
		return 0, nil
	}
	if p.t.chunked {
		if !p.room() {
			p.t.gate.Full()
			return 0, pool.ErrFull
		}
		p.putChunk(chunk)
		return len(chunk), nil
	}
	for i, h := range chunk {
		if !p.room() {
			p.t.gate.Full()
			return i, pool.ErrFull
		}
		p.putHandle(h)
	}
	return len(chunk), nil
}

// Close retires the producer: later sends fail with pool.ErrClosed, what it
// sent before is still delivered exactly once by the owner's drains, and the
// Drain that takes its last item forgets its queue, so that retired
// producers cost later drains nothing. Call it after the producer's last
// Send, from the same goroutine. Close is idempotent and returns nil.
func (p *Producer) Close() error {
	if p != nil && p.end.Close() {
		p.q.retired.Store(true) // after the last publish of tail: see Drain
	}
	return nil
}

// room reports whether the queue has a free slot, loading head only when the
// cached copy says it is full.
func (p *Producer) room() bool {
	q := p.q
	if q.put-q.seen < uint64(p.t.capacity) {
		return true
	}
	q.seen = q.head.Load()
	return q.put-q.seen < uint64(p.t.capacity)
}

// putHandle publishes one handle into the free slot at tail.
func (p *Producer) putHandle(h pool.Handle) {
	p.q.handles[p.q.slot] = h
	p.publish()
}

// putChunk copies chunk into the buffer of the free slot at tail, growing it
// if chunk is longer than any it carried before, and publishes it.
func (p *Producer) putChunk(chunk []pool.Handle) {
	q := p.q
	q.chunks[q.slot] = append(q.chunks[q.slot][:0], chunk...)
	p.publish()
}

// publish hands the slot at tail to the owner.
func (p *Producer) publish() {
	q := p.q
	if q.slot++; q.slot == p.t.capacity {
		q.slot = 0
	}
	q.put++
	q.tail.Store(q.put)
}
