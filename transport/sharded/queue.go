package sharded

import (
	"sync/atomic"

	"golang.org/x/sys/cpu"

	"github.com/locus-go/locus/pool"
)

// queue is one producer's ring. See the package doc for the protocol.
type queue struct {
	// Set by NewProducer, then only read.
	handles []pool.Handle   // per-handle mode: one handle per slot
	chunks  [][]pool.Handle // chunk mode: one chunk buffer per slot
	wake    chan struct{}   // one token: the owner wakes a parked producer

	// The producer's line.
	_       cpu.CacheLinePad
	tail    atomic.Uint64 // items published; written by the producer only
	waiting atomic.Bool   // the producer found the queue full and may park
	full    atomic.Uint64 // written by the producer only
	blocked atomic.Uint64 // written by the producer only
	put     uint64        // the producer's copy of tail
	slot    int           // the producer's: slot of item tail
	seen    uint64        // head as the producer last loaded it: full while put-seen == capacity

	// The owner's line.
	_     cpu.CacheLinePad
	head  atomic.Uint64 // items drained; written by the owner only
	taken uint64        // the owner's copy of head
	next  int           // the owner's: slot of item head
	gone  bool          // the owner's: retired and fully drained
	_     cpu.CacheLinePad

	retired atomic.Bool // set by Producer.Close after the last Send
}

// Producer is one producer's endpoint: it owns one queue of the transport.
// It is used by one goroutine at a time.
type Producer struct {
	t      *Transport
	q      *queue // also holds the producer's own state, away from other producers'
	closed bool
}

var _ pool.TryProducer = (*Producer)(nil)

// Send enqueues chunk: each handle as an item of its own, or the whole chunk
// as one item with WithChunks. While the queue is full it waits, parked, for
// the owner to drain, so a per-handle chunk longer than the capacity goes
// through piecewise. It fails with pool.ErrClosed after Close, also while
// waiting; handles it enqueued before that are dropped with the transport. The
// caller may reuse chunk as soon as Send returns.
func (p *Producer) Send(chunk []pool.Handle) error {
	if p.closed || p.t.closed.Load() {
		return pool.ErrClosed
	}
	if p.t.chunked {
		if len(chunk) == 0 {
			return nil
		}
		if !p.room() {
			if err := p.wait(); err != nil {
				return err
			}
		}
		p.putChunk(chunk)
		return nil
	}
	for _, h := range chunk {
		if !p.room() {
			if err := p.wait(); err != nil {
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
// them, and pool.ErrClosed (having enqueued none) after Close.
func (p *Producer) TrySend(chunk []pool.Handle) (int, error) {
	if p.closed || p.t.closed.Load() {
		return 0, pool.ErrClosed
	}
	if len(chunk) == 0 {
		return 0, nil
	}
	if p.t.chunked {
		if !p.room() {
			p.q.full.Add(1)
			return 0, pool.ErrFull
		}
		p.putChunk(chunk)
		return len(chunk), nil
	}
	for i, h := range chunk {
		if !p.room() {
			p.q.full.Add(1)
			return i, pool.ErrFull
		}
		p.putHandle(h)
	}
	return len(chunk), nil
}

// Close retires the producer: later sends fail with pool.ErrClosed, and
// once the owner's drains have taken everything it sent, the transport
// forgets its queue. Call it after the producer's last Send. Close is
// idempotent.
func (p *Producer) Close() error {
	if p.closed {
		return nil
	}
	p.closed = true
	p.q.retired.Store(true)
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

// wait parks the producer until its queue has room or the transport closes.
func (p *Producer) wait() error {
	q := p.q
	q.blocked.Add(1)
	for {
		q.waiting.Store(true)
		if p.room() {
			q.waiting.Store(false)
			return nil
		}
		if p.t.closed.Load() {
			q.waiting.Store(false)
			return pool.ErrClosed
		}
		select {
		case <-q.wake:
		case <-p.t.done:
		}
	}
}
