package events

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/locus-go/locus/internal/typednil"
	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/pool"
)

// ErrDropped is matched (errors.Is) by the error Close returns when the
// publisher did not publish every event it received: batches dropped
// because the queue was full, batches the socket refused, events received
// after Close.
var ErrDropped = errors.New("events: events dropped")

// DroppedError is the error Close returns when events were lost; it
// matches ErrDropped.
type DroppedError struct {
	Batches uint64 // batches dropped or refused by the socket
	Events  uint64 // events not published, in those batches or after Close
	Err     error  // the first error of the socket, if it refused a batch
}

func (e *DroppedError) Error() string {
	s := fmt.Sprintf("events: %d events dropped (%d batches)", e.Events, e.Batches)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is reports whether target is ErrDropped.
func (e *DroppedError) Is(target error) bool { return target == ErrDropped }

// Unwrap returns the socket's error, if any.
func (e *DroppedError) Unwrap() error { return e.Err }

var errZeroPublisher = fmt.Errorf("%w: zero events.Publisher; make it with events.New", pool.ErrClosed)

// Publisher publishes a kv.Manager's cache events in vLLM's wire format on
// a ZMQ PUB socket (see the package doc). Make one with New and pass its
// Subscriber to kv.WithSubscriber.
//
// # Ownership
//
// Subscriber's function, Flush and Close belong to the manager's owner
// goroutine: the manager calls the subscriber there, and Flush and Close
// must be called there too (or with external synchronization). Snapshot
// and Addr may be called from any goroutine. The publisher's own goroutine
// does all the encoding and socket writes; the owner's part never waits
// (see the package doc).
//
// The zero Publisher is not usable (its Close fails with pool.ErrClosed, and
// its subscriber counts every event as dropped). A Publisher must not be
// copied.
type Publisher struct {
	_    noCopy
	cfg  config
	sock zmq4.Socket
	enc  encoder // the publisher's goroutine's

	// The owner's state.
	cur     *batch // the batch being filled; nil before the next event
	curGen  uint64 // cur's generation
	nextSeq uint64
	closed  bool

	// shared is cur, for the flush timer; it may lag behind cur (see batch).
	shared atomic.Pointer[batch]

	queue chan *batch   // sealed batches, owner to publisher
	free  chan *batch   // empty batches, publisher to owner; room for all
	kick  chan struct{} // a batch was started: arm the flush timer
	stop  chan struct{} // closed by Close
	done  chan struct{} // closed when the publisher's goroutine returns

	st       counters
	lastSend atomic.Int64 // UnixNano of the last socket write, for the linger
	errOnce  sync.Once
	sendErr  error // the socket's first error; read after done
}

type counters struct {
	events, batches                atomic.Uint64
	published, publishedEvents     atomic.Uint64
	dropped, droppedEvents, failed atomic.Uint64
	invalid                        atomic.Uint64
}

// New returns a publisher on a ZMQ PUB socket that listens on endpoint (or
// connects to it, WithDial), such as "tcp://*:5557" (vLLM's default) or
// "tcp://127.0.0.1:0" (a free loopback port; see Addr). Connecting waits
// for the endpoint as zmq4 dials: a few seconds at most. New fails with
// an error wrapping pool.ErrInvalidConfig for an invalid option, and with
// the socket's error if it cannot listen or connect.
func New(endpoint string, opts ...Option) (*Publisher, error) {
	cfg := defaults()
	for _, o := range opts {
		if typednil.Is(o) {
			return nil, fmt.Errorf("events: %w: nil option", pool.ErrInvalidConfig)
		}
		o.apply(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	sock := zmq4.NewPub(context.Background(), zmq4.WithLogger(log.New(io.Discard, "", 0)))
	if cfg.hwm > 0 {
		if err := sock.SetOption(zmq4.OptionHWM, cfg.hwm); err != nil {
			sock.Close()
			return nil, fmt.Errorf("events: high-water mark: %w", err)
		}
	}
	connect := sock.Listen
	if cfg.dial {
		connect = sock.Dial
	}
	if err := connect(endpoint); err != nil {
		sock.Close()
		return nil, fmt.Errorf("events: %w", err)
	}
	n := cfg.buffer + 3 // the queue, the owner's batch, and two in the publisher's hands
	p := &Publisher{
		cfg:   cfg,
		sock:  sock,
		enc:   newEncoder(&cfg),
		queue: make(chan *batch, cfg.buffer),
		free:  make(chan *batch, n),
		kick:  make(chan struct{}, 1),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	for range n {
		b := new(batch)
		b.state.Store(state(0, sealed))
		p.free <- b
	}
	go p.run()
	return p, nil
}

// Addr returns the address the socket listens on (the port chosen for
// ":0"), or nil when it connects (WithDial). Any goroutine may call it.
func (p *Publisher) Addr() net.Addr {
	if p.sock == nil {
		return nil
	}
	return p.sock.Addr()
}

// Subscriber returns the function to pass to kv.WithSubscriber. It copies
// each event into the current batch and hands full batches to the
// publisher's goroutine without waiting; nil events and events of an
// unknown kind are ignored (and counted in Stats.Invalid).
func (p *Publisher) Subscriber() func(*kv.Event) { return p.record }

func (p *Publisher) record(ev *kv.Event) {
	if ev == nil || ev.Kind < kv.BlockStored || ev.Kind > kv.AllBlocksCleared {
		p.st.invalid.Add(1)
		return
	}
	if p.closed || p.queue == nil {
		p.st.events.Add(1)
		p.st.droppedEvents.Add(1)
		return
	}
	b := p.cur
	if b == nil || !b.state.CompareAndSwap(state(p.curGen, open), state(p.curGen, writing)) {
		// No batch yet, or the flush timer took it.
		if b = p.install(); b == nil {
			p.st.events.Add(1)
			p.st.droppedEvents.Add(1)
			return
		}
	}
	b.add(ev)
	n := len(b.recs)
	b.state.Store(state(p.curGen, open))
	if n >= p.cfg.batchSize {
		p.seal()
	}
}

// install makes a free batch the owner's current one, in the writing
// status, and numbers it. The free list always has one: of the buffer+3
// batches, at most buffer are queued and two are in the publisher's hands
// while the owner holds none. install still never waits: it reports none.
func (p *Publisher) install() *batch {
	var b *batch
	select {
	case b = <-p.free:
	default:
		return nil
	}
	p.curGen = b.state.Load() >> 2
	b.state.Store(state(p.curGen, writing))
	b.seq = p.nextSeq
	p.nextSeq++
	p.cur = b
	p.shared.Store(b)
	select {
	case p.kick <- struct{}{}:
	default: // a kick is pending already
	}
	return b
}

// seal hands the owner's current batch to the publisher's goroutine, or
// drops it whole when the queue is full.
func (p *Publisher) seal() {
	b := p.cur
	p.cur = nil
	if b == nil || !b.state.CompareAndSwap(state(p.curGen, open), state(p.curGen, sealed)) {
		return // the flush timer took it
	}
	p.sealed(b)
	select {
	case p.queue <- b:
	default:
		p.st.dropped.Add(1)
		p.st.droppedEvents.Add(uint64(len(b.recs)))
		b.reset()
		p.free <- b // never waits: the free list has room for every batch
	}
}

// sealed stamps and counts a batch its holder has just sealed.
func (p *Publisher) sealed(b *batch) {
	b.ts = time.Now()
	p.st.batches.Add(1)
	p.st.events.Add(uint64(len(b.recs)))
}

// Flush seals the current batch now, if it has events, and hands it to the
// publisher's goroutine: call it once per scheduling step to publish each
// step's events as one batch, as vLLM does. It never waits. Only the owner
// may call it.
func (p *Publisher) Flush() {
	if !p.closed && p.queue != nil {
		p.seal()
	}
}

// run is the publisher's goroutine: it publishes sealed batches in order,
// and flushes the owner's batch when it has waited the flush interval.
func (p *Publisher) run() {
	defer close(p.done)
	if p.cfg.hold != nil {
		<-p.cfg.hold
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	armed := false
	for {
		select {
		case b := <-p.queue:
			p.publish(b)
		case <-p.kick:
			if !armed {
				timer.Reset(p.cfg.interval)
				armed = true
			}
		case <-timer.C:
			armed = p.steal()
			if armed { // the owner was writing: try again soon
				timer.Reset(max(p.cfg.interval/4, time.Microsecond))
			}
		case <-p.stop:
			for {
				select {
				case b := <-p.queue:
					p.publish(b)
				default:
					return
				}
			}
		}
	}
}

// steal seals the owner's current batch, if it is open, and publishes it
// after the batches queued before it. It reports whether it must try
// again because the owner was writing.
func (p *Publisher) steal() (retry bool) {
	b := p.shared.Load()
	if b == nil {
		return false
	}
	s := b.state.Load()
	switch s & 3 {
	case writing:
		return true
	case sealed:
		return false // handed off or free already
	}
	if !b.state.CompareAndSwap(s, s&^3|sealed) {
		return true // the owner started writing
	}
	p.sealed(b)
	// Every batch numbered before b was queued (or dropped) before the
	// owner started b, so it is in the queue now; later ones may follow.
	for {
		select {
		case q := <-p.queue:
			if q.seq < b.seq {
				p.publish(q)
				continue
			}
			p.publish(b)
			p.publish(q)
		default:
			p.publish(b)
		}
		return false
	}
}

// publish writes a sealed batch to the socket and recycles it.
func (p *Publisher) publish(b *batch) {
	n := uint64(len(b.recs))
	if err := p.sock.Send(p.enc.message(b)); err != nil {
		p.st.failed.Add(1)
		p.st.droppedEvents.Add(n)
		p.errOnce.Do(func() { p.sendErr = err })
	} else {
		p.st.published.Add(1)
		p.st.publishedEvents.Add(n)
		p.lastSend.Store(time.Now().UnixNano())
	}
	b.reset()
	p.free <- b
}

// Close publishes the current batch and every queued one, gives the socket
// up to the linger (WithLinger) to send them to connected subscribers,
// closes the socket and stops the publisher's goroutine. It returns a
// *DroppedError (matching ErrDropped) if the publisher lost events over its
// life, and the socket's error if closing failed. Events the manager emits
// after Close are counted as dropped. Only the owner may call it; later
// calls return an error matching pool.ErrClosed.
//
// The ZMQ module's PUB socket keeps one idle goroutine of its own after it is
// closed (its writer is never told to stop), so a program should make a
// publisher for its life, not one per short task.
func (p *Publisher) Close() error {
	switch {
	case p.queue == nil:
		return errZeroPublisher
	case p.closed:
		return pool.ErrClosed
	}
	p.closed = true
	if b := p.cur; b != nil && b.state.CompareAndSwap(state(p.curGen, open), state(p.curGen, sealed)) {
		p.sealed(b)
		p.queue <- b // may wait for the publisher's goroutine, which never waits long
	}
	p.cur = nil
	close(p.stop)
	<-p.done
	if last := p.lastSend.Load(); last != 0 && p.subscribed() {
		time.Sleep(p.cfg.linger - time.Since(time.Unix(0, last)))
	}
	closeErr := p.sock.Close()
	st := p.Snapshot()
	var err error
	if lost := st.Dropped + st.Failed; lost > 0 || st.DroppedEvents > 0 {
		err = &DroppedError{Batches: lost, Events: st.DroppedEvents, Err: p.sendErr}
	}
	return errors.Join(err, closeErr)
}

// subscribed reports whether a connected subscriber's subscription covers
// the topic.
func (p *Publisher) subscribed() bool {
	t, ok := p.sock.(zmq4.Topics)
	if !ok {
		return true
	}
	for _, prefix := range t.Topics() {
		if strings.HasPrefix(p.cfg.topic, prefix) {
			return true
		}
	}
	return false
}

// Stats counts what a publisher did with the events it received. Once it
// is closed:
//
//	Batches == Published + Dropped + Failed
//	Events == PublishedEvents + DroppedEvents
//
// While it runs, the counts are read one by one and the identities hold
// only for batches no longer in flight.
type Stats struct {
	// Events counts the events received, in sealed batches or dropped.
	Events uint64
	// Batches counts the batches sealed: the sequence numbers used.
	Batches uint64
	// Published counts the batches written to the socket, and
	// PublishedEvents the events in them.
	Published, PublishedEvents uint64
	// Dropped counts the batches dropped because the queue was full.
	Dropped uint64
	// Failed counts the batches the socket refused.
	Failed uint64
	// DroppedEvents counts the events not published: in dropped or refused
	// batches, or received after Close.
	DroppedEvents uint64
	// Invalid counts the nil events and events of unknown kinds ignored.
	Invalid uint64
	// Queued is the number of sealed batches waiting for the publisher's
	// goroutine now.
	Queued int
}

// Snapshot returns the publisher's counts. Any goroutine may call it (a
// metrics scraper); it costs the owner nothing.
func (p *Publisher) Snapshot() Stats {
	return Stats{
		Events:          p.st.events.Load(),
		Batches:         p.st.batches.Load(),
		Published:       p.st.published.Load(),
		PublishedEvents: p.st.publishedEvents.Load(),
		Dropped:         p.st.dropped.Load(),
		Failed:          p.st.failed.Load(),
		DroppedEvents:   p.st.droppedEvents.Load(),
		Invalid:         p.st.invalid.Load(),
		Queued:          len(p.queue),
	}
}

// noCopy lets go vet's copylocks check flag copies of a Publisher.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}
