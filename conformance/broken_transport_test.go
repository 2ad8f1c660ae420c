package conformance

import (
	"errors"
	"runtime"
	"slices"
	"sync"

	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
)

// Deliberately broken transports. Most are refTransport, a small correct
// transport written for these tests (one mutex, a queue per producer or one
// for all, optionally bounded), with one defect switched on; a few wrap the
// mailbox.

// defect is one deliberate bug of refTransport.
type defect int

const (
	correct               defect = iota
	defectGhost                  // once a queue empties, the next Drain delivers its last item again
	defectLag                    // a Drain delivers only what was published before the previous Drain
	defectHoldBack               // a producer holds sends back until 8 handles are pending
	defectTruncate               // a chunk longer than 100 handles loses its last handle
	defectMergeRepeats           // a handle equal to the one delivered just before it is dropped
	defectHighGen                // the top 32 bits of every generation are lost
	defectEmptyZero              // an empty chunk is delivered as one zero handle
	defectNewestFirst            // a queue is delivered newest item first
	defectGlobal                 // instances that are open at once share their queues
	defectAllocs                 // every 64th Send allocates
	defectBoundsDrift            // Bounds().Batch reports the size of the last drain
	defectNotTry                 // producers of a bounded transport have no TrySend
	defectSharedQueue            // claims a queue per producer but has one for all
	defectExtraSlot              // a queue holds Capacity+1 items
	defectAllOrNothing           // a per-handle TrySend publishes all of a chunk or nothing
	defectSendOverflows          // Send never waits: a full queue just grows
	defectFullBatch              // a full queue gives one Drain Batch+1 items
	defectOnePerDrain            // a Drain takes one item from each queue
	defectSplitChunks            // a Drain delivers at most Batch handles of chunk items, splitting chunks
	defectLongAfterClose         // after Close, a Send of more than 32 handles succeeds
	defectTryAfterClose          // after Close, TrySend succeeds
	defectNilAfterClose          // NewProducer after Close returns (nil, nil)
	defectCloseFirstThree        // Close fails the sends of the first three producers only
	defectCloseNoWake            // Close does not wake producers waiting for room
	defectRetireOpen             // Producer.Close does not fail later sends
	defectRetireDrops            // Producer.Close drops what the producer had pending
	defectRetireTwice            // a second Producer.Close returns an error
	defectRetireKeeps            // retired queues are never forgotten
	defectRetireGoroutine        // every 64th producer starts a goroutine that never exits
	defectPhantom                // a Drain before any producer was made delivers a zero handle
	defectTwoQueues              // a Drain takes from at most two queues
	defect2048                   // a chunk of a multiple of 2048 handles loses its last handle
	defectDropZero               // the zero handle marks an empty slot: it is never delivered
	defectCloseMidChunk          // a Send that Close wakes partway through a chunk waits on
	defectPutOnSend              // Send hands its chunk to the sink of the last Drain, at once
	defectWrap16                 // the handle sent when the instance's 16-bit handle counter wraps is dropped
	defectCrowdDup               // with 9 or more live producers, a one-handle chunk is published twice
	defectLongLate               // chunks of more than 64 handles are delivered one Drain late
	defectFifthLate              // producers after an instance's 4th are delivered one Drain late
	defectFourTables             // instance k shares its queues with instance k-4 of the same constructor
	defectIdleLeak               // retiring a producer that never sent leaks a goroutine
	defectReblock                // a Send that blocks a second time is not released by Close
	defectCapDrift               // a queue holds Capacity+1 items once 4*Capacity items went through the instance
	defectBatchSplit             // with 4 or more queues holding items a Drain takes Batch-1 from each
	defectPrivateAfter3          // a shared queue's producers after the 3rd get private queues
	defectSpin                   // a Send into a full queue spins, yielding, instead of blocking
	defectAllocMulti             // a Drain allocates when 2 or more queues hold items
	defectBacklog                // with 100 or more items pending, a producer's next item overtakes them
	defectSwapSkip               // a Drain removes a retired queue by swapping the last into its place, and skips that one
)

// refCore is the state of a refTransport.
type refCore struct {
	mu       sync.Mutex
	room     sync.Cond // producers wait here for room
	closed   bool
	queues   []*refQueue // in creation order; retired and empty ones are dropped
	shared   *refQueue   // the one queue of a shared transport
	made     int
	buf      []pool.Handle // a per-handle Drain's chunk
	opens    int           // open instances sharing the core (defectGlobal)
	lastPut  int
	phantom  bool          // defectPhantom delivered its handle
	lastSink *pool.Sink    // defectPutOnSend
	carried  uint16        // handles carried (defectWrap16)
	kept     []pool.Handle // defectWrap16: what is kept of an item
	live     int           // producers not retired (defectCrowdDup)
	pushed   int           // items pushed (defectCapDrift)
	garbage  []*refQueue   // defectAllocMulti
	visit    []*refQueue   // defectSwapSkip: the queues a Drain visits
}

type refQueue struct {
	items   [][]pool.Handle // one handle, or one chunk, per item; oldest first
	spare   [][]pool.Handle // delivered items' buffers, for reuse
	retired bool
	mark    int // defectLag: items published before the last Drain
	ghost   []pool.Handle
	ghosted bool
	late    []int // items that are one Drain late, by index (defectLongLate, defectFifthLate)
	sent    bool  // defectIdleLeak
}

// refTransport is the transport; refBounded adds Bounds.
type refTransport struct {
	c      *refCore
	bounds pool.Bounds // Capacity 0: unbounded
	defect defect
	// release frees goroutines a defect leaves blocked forever, so that a
	// test can end.
	release chan struct{}
	closed  bool // this instance was closed (defectGlobal)
}

type refBounded struct{ *refTransport }

type refProducer struct {
	t       *refTransport
	q       *refQueue
	id      int
	retired bool
	sends   int
	held    []pool.Handle   // defectHoldBack
	items   [][]pool.Handle // a Send's items
	garbage []byte          // defectAllocs
}

// plainProducer hides TrySend (defectNotTry).
type plainProducer struct{ p *refProducer }

func (p plainProducer) Send(c []pool.Handle) error { return p.p.Send(c) }
func (p plainProducer) Close() error               { return p.p.Close() }

// The configurations the defects are switched on in.
var (
	unbounded     = pool.Bounds{}
	boundedHandle = pool.Bounds{Capacity: 4, Batch: 2, PerProducer: true}
	boundedShared = pool.Bounds{Capacity: 6, Batch: 4}
	boundedChunk  = pool.Bounds{Capacity: 2, Batch: 1, Chunked: true, PerProducer: true}
)

var globalCore struct {
	sync.Mutex
	c *refCore
}

// newRef returns a constructor of refTransports with bounds bd and defect
// d, and a function that lets go whatever the defect left blocked forever.
func newRef(bd pool.Bounds, d defect) (func() (pool.Transport, error), func()) {
	release := make(chan struct{})
	var mu sync.Mutex
	var cores []*refCore
	ctor := func() (pool.Transport, error) {
		t := &refTransport{bounds: bd, defect: d, release: release}
		mu.Lock()
		made := len(cores)
		mu.Unlock()
		var shared *refCore
		if d == defectFourTables && made >= 4 {
			mu.Lock()
			shared = cores[made-4]
			mu.Unlock()
			shared.mu.Lock()
			closed := shared.closed
			shared.mu.Unlock()
			if closed {
				shared = nil
			}
		}
		if shared != nil {
			t.c = shared
		} else if d == defectGlobal {
			globalCore.Lock()
			if globalCore.c == nil || globalCore.c.opens == 0 {
				globalCore.c = newRefCore(bd)
			}
			t.c = globalCore.c
			t.c.opens++
			globalCore.Unlock()
		} else {
			t.c = newRefCore(bd)
		}
		mu.Lock()
		cores = append(cores, t.c)
		mu.Unlock()
		if bd.Capacity == 0 {
			return t, nil
		}
		return refBounded{t}, nil
	}
	free := func() {
		close(release)
		mu.Lock()
		defer mu.Unlock()
		for _, c := range cores {
			c.mu.Lock()
			c.room.Broadcast()
			c.mu.Unlock()
		}
	}
	return ctor, free
}

func newRefCore(bd pool.Bounds) *refCore {
	c := &refCore{buf: make([]pool.Handle, 0, max(bd.Batch, 1))}
	c.room.L = &c.mu
	if bd.Capacity > 0 && !bd.PerProducer {
		c.shared = &refQueue{}
	}
	return c
}

func (t refBounded) Bounds() pool.Bounds {
	bd := t.bounds
	if t.defect == defectBoundsDrift {
		t.c.mu.Lock()
		if t.c.lastPut > 0 {
			bd.Batch = t.c.lastPut
		}
		t.c.mu.Unlock()
	}
	return bd
}

func (t *refTransport) bounded() bool { return t.bounds.Capacity > 0 }

// capacity is how many items a queue holds.
func (t *refTransport) capacity() int {
	if t.defect == defectExtraSlot || t.defect == defectCapDrift && t.c.pushed >= 4*t.bounds.Capacity {
		return t.bounds.Capacity + 1
	}
	return t.bounds.Capacity
}

func (t *refTransport) NewProducer() (pool.Producer, error) {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		if t.defect == defectNilAfterClose {
			return nil, nil
		}
		return nil, pool.ErrClosed
	}
	p := &refProducer{t: t, id: c.made}
	c.made++
	c.live++
	switch {
	case c.shared != nil && t.defect == defectPrivateAfter3 && p.id >= 3:
		p.q = &refQueue{}
		c.queues = append(c.queues, p.q)
	case c.shared != nil:
		p.q = c.shared
	case t.defect == defectSharedQueue:
		if len(c.queues) == 0 {
			c.queues = append(c.queues, &refQueue{})
		}
		p.q = c.queues[0]
	default:
		p.q = &refQueue{}
		c.queues = append(c.queues, p.q)
	}
	if c.shared != nil && len(c.queues) == 0 {
		c.queues = append(c.queues, c.shared)
	}
	if t.defect == defectRetireGoroutine && p.id%64 == 0 {
		go func() { <-t.release }()
	}
	if t.defect == defectNotTry && t.bounded() {
		return plainProducer{p}, nil
	}
	return p, nil
}

// open reports whether p may send n handles (with TrySend if try).
func (p *refProducer) open(n int, try bool) bool {
	t := p.t
	switch {
	case p.retired:
		return t.defect == defectRetireOpen
	case !t.c.closed:
		return true
	case t.defect == defectLongAfterClose:
		return n > 32
	case t.defect == defectTryAfterClose:
		return try
	case t.defect == defectCloseFirstThree:
		return p.id >= 3
	}
	return false
}

// push appends one item, a copy of hs, to q.
func (q *refQueue) push(hs []pool.Handle) {
	var buf []pool.Handle
	if k := len(q.spare); k > 0 {
		buf, q.spare = q.spare[k-1][:0], q.spare[:k-1]
	}
	q.items = append(q.items, append(buf, hs...))
	q.late = append(q.late, 0)
}

// publish pushes one item of p's, with the defects that act on publishing.
func (p *refProducer) publish(item []pool.Handle) {
	t, c, q := p.t, p.t.c, p.q
	c.pushed++
	q.sent = true
	switch t.defect {
	case defectWrap16:
		c.kept = c.kept[:0]
		for _, h := range item {
			if c.carried++; c.carried != 0 {
				c.kept = append(c.kept, h)
			}
		}
		if item = c.kept; len(item) == 0 {
			return
		}
	case defectCrowdDup:
		if len(item) == 1 && c.live >= 9 {
			q.push(item)
		}
	case defectBacklog:
		if len(q.items) >= 100 {
			q.push(item)
			last := q.items[len(q.items)-1]
			copy(q.items[1:], q.items[:len(q.items)-1])
			q.items[0] = last
			return
		}
	}
	q.push(item)
	if t.defect == defectLongLate && len(item) > 64 || t.defect == defectFifthLate && p.id >= 4 {
		q.late[len(q.late)-1] = 1
	}
}

func (p *refProducer) Send(chunk []pool.Handle) error {
	t, c := p.t, p.t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	p.sends++
	if t.defect == defectAllocs && p.sends%64 == 0 {
		p.garbage = make([]byte, 64+p.sends%7)
	}
	if !p.open(len(chunk), false) {
		return pool.ErrClosed
	}
	if len(chunk) == 0 {
		if t.defect == defectEmptyZero {
			p.q.push([]pool.Handle{{}})
		}
		return nil
	}
	if t.defect == defectTruncate && len(chunk) > 100 || t.defect == defect2048 && len(chunk)%2048 == 0 {
		chunk = chunk[:len(chunk)-1]
	}
	if t.defect == defectHoldBack {
		p.held = append(p.held, chunk...)
		if len(p.held) < 8 {
			return nil
		}
		chunk, p.held = p.held, nil
	}
	if !t.bounded() {
		if t.defect == defectPutOnSend && c.lastSink != nil {
			c.lastSink.Put(chunk)
			return nil
		}
		p.publish(chunk)
		return nil
	}
	p.items = append(p.items[:0], chunk) // reused: Send allocates nothing
	if !t.bounds.Chunked {
		p.items = p.items[:0]
		for i := range chunk {
			p.items = append(p.items, chunk[i:i+1])
		}
	}
	items := p.items
	defer clear(p.items)
	waits := 0
	for i, item := range items {
		for len(p.q.items) >= t.capacity() && t.defect != defectSendOverflows {
			deaf := t.defect == defectCloseMidChunk && i > 0 || t.defect == defectReblock && waits > 0
			if !p.open(len(chunk), false) && !(deaf && !released(t.release)) {
				return pool.ErrClosed
			}
			waits++
			if t.defect == defectSpin {
				c.mu.Unlock()
				runtime.Gosched()
				c.mu.Lock()
				continue
			}
			c.room.Wait()
		}
		if !p.open(len(chunk), false) {
			return pool.ErrClosed
		}
		p.publish(item)
	}
	return nil
}

func (p *refProducer) TrySend(chunk []pool.Handle) (int, error) {
	t, c := p.t, p.t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if !p.open(len(chunk), true) {
		return 0, pool.ErrClosed
	}
	if len(chunk) == 0 {
		return 0, nil
	}
	if !t.bounded() {
		p.publish(chunk)
		return len(chunk), nil
	}
	room := t.capacity() - len(p.q.items)
	if t.bounds.Chunked {
		if room <= 0 {
			return 0, pool.ErrFull
		}
		p.publish(chunk)
		return len(chunk), nil
	}
	n := min(max(room, 0), len(chunk))
	if t.defect == defectAllOrNothing && n < len(chunk) {
		n = 0
	}
	for i := range n {
		p.publish(chunk[i : i+1])
	}
	if n < len(chunk) {
		return n, pool.ErrFull
	}
	return n, nil
}

func (p *refProducer) Close() error {
	c := p.t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.retired {
		if p.t.defect == defectRetireTwice {
			return errors.New("producer already closed")
		}
		return nil
	}
	p.retired = true
	c.live--
	if p.t.defect == defectIdleLeak && !p.q.sent {
		go func() { <-p.t.release }()
	}
	if p.q != c.shared && p.t.defect != defectSharedQueue {
		p.q.retired = true
	}
	if p.t.defect == defectRetireDrops {
		p.q.items = nil
	}
	return nil
}

func (t *refTransport) Drain(sink *pool.Sink) {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.lastPut, c.lastSink = 0, sink
	if t.defect == defectPhantom && c.made == 0 && !c.phantom {
		c.phantom = true
		sink.Put([]pool.Handle{{}})
	}
	busy := 0
	for _, q := range c.queues {
		if len(q.items) > 0 {
			busy++
		}
	}
	if t.defect == defectAllocMulti && busy >= 2 {
		c.garbage = make([]*refQueue, 0, busy) // "the queues with work"
	}
	queues := c.queues
	if t.defect == defectSwapSkip {
		c.visit = c.visit[:0]
		qs := c.queues
		for i := 0; i < len(qs); i++ {
			c.visit = append(c.visit, qs[i])
			if qs[i].retired {
				// Swap the last queue in and move on: the one swapped
				// in is not visited until the next Drain.
				qs[i] = qs[len(qs)-1]
				qs = qs[:len(qs)-1]
			}
		}
		c.queues, queues = qs, c.visit
	}
	visited := 0
	for _, q := range queues {
		if t.defect == defectTwoQueues && len(q.items) > 0 {
			if visited++; visited > 2 {
				break
			}
		}
		n := len(q.items)
		if t.defect == defectLag {
			n, q.mark = q.mark, len(q.items)
		}
		if k := slices.Index(q.late, 1); k >= 0 {
			n = min(n, k) // the late ones come with the next Drain
		}
		clear(q.late)
		if t.bounded() {
			n = min(n, t.bounds.Batch)
			if t.defect == defectBatchSplit && busy >= 4 {
				n = min(n, max(t.bounds.Batch-1, 1))
			}
			switch t.defect {
			case defectFullBatch:
				if len(q.items) >= t.bounds.Capacity {
					n = min(len(q.items), t.bounds.Batch+1)
				}
			case defectOnePerDrain:
				n = min(n, 1)
			}
		}
		if n == 0 {
			if t.defect == defectGhost && q.ghosted {
				sink.Put(q.ghost)
				q.ghosted = false
			}
			continue
		}
		if t.defect == defectSplitChunks && t.bounds.Chunked && len(q.items[0]) >= 2 {
			item := q.items[0]
			half := len(item) / 2
			sink.Put(item[:half])
			q.items[0] = item[:copy(item, item[half:])]
			c.lastPut = 1
			continue
		}
		items := q.items[:n]
		if t.defect == defectNewestFirst {
			slices.Reverse(items)
		}
		t.deliver(sink, items)
		if t.defect == defectGhost && n == len(q.items) {
			q.ghost, q.ghosted = append(q.ghost[:0], items[n-1]...), true
		}
		q.spare = append(q.spare, items...)
		q.items = append(q.items[:0], q.items[n:]...)
		q.late = q.late[:len(q.items)]
		if t.defect == defectLag {
			q.mark -= n
		}
		c.lastPut = n
	}
	if t.defect != defectRetireKeeps {
		c.queues = slices.DeleteFunc(c.queues, func(q *refQueue) bool { return q.retired && len(q.items) == 0 })
	}
	c.room.Broadcast()
}

// deliver passes items to sink: per-handle items as one chunk, chunk items
// one by one.
func (t *refTransport) deliver(sink *pool.Sink, items [][]pool.Handle) {
	c := t.c
	put := func(chunk []pool.Handle) {
		switch t.defect {
		case defectHighGen:
			for i, h := range chunk {
				chunk[i] = mkHandle(poolID(h), uint32(h.Index()), h.Generation()&0xffffffff)
			}
		case defectMergeRepeats:
			chunk = slices.Compact(chunk)
		case defectDropZero:
			chunk = slices.DeleteFunc(chunk, pool.Handle.IsZero)
		}
		sink.Put(chunk)
	}
	if !t.bounded() || t.bounds.Chunked {
		for _, item := range items {
			put(item)
		}
		return
	}
	c.buf = c.buf[:0]
	for _, item := range items {
		c.buf = append(c.buf, item...)
	}
	put(c.buf)
}

func (t *refTransport) Close() error {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.defect == defectGlobal && !t.closed {
		t.closed = true
		globalCore.Lock()
		c.opens--
		globalCore.Unlock()
	}
	c.closed = true
	if t.defect != defectCloseNoWake {
		c.room.Broadcast()
	}
	return nil
}

// released reports whether the test has let blocked goroutines go.
func released(release chan struct{}) bool {
	select {
	case <-release:
		return true
	default:
		return false
	}
}

// lossyTransport drops every fifth chunk it drains.
type lossyTransport struct {
	*mailbox.Transport
	n int
}

func (t *lossyTransport) Drain(sink *pool.Sink) {
	t.Transport.Drain(pool.NewSink(func(c []pool.Handle) {
		if t.n++; t.n%5 != 0 {
			sink.Put(c)
		}
	}))
}

// dupTransport delivers the first handle of every chunk twice.
type dupTransport struct{ *mailbox.Transport }

func (t dupTransport) Drain(sink *pool.Sink) {
	t.Transport.Drain(pool.NewSink(func(c []pool.Handle) {
		sink.Put(c)
		sink.Put(c[:1])
	}))
}

// aliasingTransport publishes the caller's slice instead of a copy.
type aliasingTransport struct {
	mu      sync.Mutex
	pending [][]pool.Handle
}

type aliasingProducer struct{ t *aliasingTransport }

func (t *aliasingTransport) NewProducer() (pool.Producer, error) { return aliasingProducer{t}, nil }
func (t *aliasingTransport) Close() error                        { return nil }
func (t *aliasingTransport) Drain(sink *pool.Sink) {
	t.mu.Lock()
	p := t.pending
	t.pending = nil
	t.mu.Unlock()
	for _, c := range p {
		sink.Put(c)
	}
}
func (p aliasingProducer) Close() error { return nil }
func (p aliasingProducer) Send(c []pool.Handle) error {
	p.t.mu.Lock()
	p.t.pending = append(p.t.pending, c) // the bug: no copy
	p.t.mu.Unlock()
	return nil
}

// stuckTransport's producers wait forever, even after Close (until the test
// releases them).
type stuckTransport struct {
	*mailbox.Transport
	release chan struct{}
}

type stuckProducer struct{ release chan struct{} }

func (t stuckTransport) NewProducer() (pool.Producer, error) { return stuckProducer{t.release}, nil }
func (p stuckProducer) Send([]pool.Handle) error {
	<-p.release
	return pool.ErrClosed
}
func (p stuckProducer) Close() error { return nil }
