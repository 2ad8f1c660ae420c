package events

import (
	"context"
	"errors"
	"fmt"
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
// publisher did not publish every event it received (batches dropped
// because the queue was full, batches the socket refused, events received
// after Close) or did not deliver every published batch to every
// subscriber of its topic (a subscriber's queue was full, its connection
// failed, or Close's linger ran out).
var ErrDropped = errors.New("events: events dropped")

// DroppedError is the error Close returns when events were lost; it
// matches ErrDropped.
type DroppedError struct {
	Batches uint64 // batches dropped or refused by the socket
	Events  uint64 // events not published, in those batches or after Close
	// Undelivered counts the copies of published batches that a subscriber
	// did not get: dropped at its full queue, lost with its connection, or
	// still queued when Close's linger ran out (Stats.Undelivered).
	Undelivered uint64
	Err         error // the first error of the socket, if it refused a batch
}

func (e *DroppedError) Error() string {
	s := fmt.Sprintf("events: %d events dropped (%d batches), %d batch copies undelivered", e.Events, e.Batches, e.Undelivered)
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
// a ZMQ PUB socket (see the package doc), with a queue per subscriber and,
// optionally (WithReplay), vLLM's replay socket. Make one with New and pass
// its Subscriber to kv.WithSubscriber; make one per manager for the
// process's life, not one per request.
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
	_      noCopy
	cfg    config
	sock   socket
	fan    *fanout // sock, unless a test replaced it
	replay *replay // nil without WithReplay
	enc    encoder // the publisher's goroutine's

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

	st      counters
	errOnce sync.Once
	sendErr error // the socket's first error; read after done
}

// socket is where the publisher's goroutine writes messages: the fanout
// (or, in tests, a fake).
type socket interface {
	Send(zmq4.Msg) error
	Close() error
	Addr() net.Addr
}

type counters struct {
	events, batches                atomic.Uint64
	published, publishedEvents     atomic.Uint64
	dropped, droppedEvents, failed atomic.Uint64
	invalid                        atomic.Uint64
}

// New returns a publisher on a ZMQ PUB socket that listens on endpoint (or
// connects to it, WithDial), such as "tcp://*:5557" (vLLM's default),
// "tcp://127.0.0.1:0" (a free loopback port; see Addr) or "ipc:///path".
// Connecting retries for up to DialWait, then fails; once connected, a lost
// connection is made again in the background. New fails with an error
// wrapping pool.ErrInvalidConfig for an invalid option or endpoint, and
// with the socket's error if it cannot listen or connect.
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
	network, address, err := parseEndpoint(endpoint)
	if err != nil {
		return nil, err
	}
	var rnet, raddr string
	if cfg.replay != "" {
		if rnet, raddr, err = parseEndpoint(cfg.replay); err != nil {
			return nil, err
		}
	}
	fan := newFanout(&cfg)
	if cfg.dial {
		err = fan.dial(network, address, DialWait)
	} else {
		err = fan.listen(network, address)
	}
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	var rp *replay
	if cfg.replay != "" {
		rp = newReplay(cfg.replayBuffer, cfg.writeTimeout)
		if err := rp.listen(rnet, raddr); err != nil {
			fan.Close()
			return nil, fmt.Errorf("events: replay: %w", err)
		}
	}
	n := cfg.buffer + 3 // the queue, the owner's batch, and two in the publisher's hands
	p := &Publisher{
		cfg:    cfg,
		sock:   fan,
		fan:    fan,
		replay: rp,
		enc:    newEncoder(&cfg),
		queue:  make(chan *batch, cfg.buffer),
		free:   make(chan *batch, n),
		kick:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
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
	if p == nil || p.sock == nil {
		return nil
	}
	return p.sock.Addr()
}

// ReplayAddr returns the address the replay socket listens on, or nil
// without WithReplay. Any goroutine may call it.
func (p *Publisher) ReplayAddr() net.Addr {
	if p == nil || p.replay == nil {
		return nil
	}
	return p.replay.ln.Addr()
}

// WaitSubscribers waits until n subscribers whose subscriptions cover the
// publisher's topic are connected, or ctx is done (its error), or the
// publisher is closed (pool.ErrClosed). Batches published before a
// subscriber has connected and subscribed never reach it (ZMQ's slow
// joiner): call it before the first step when the first batches matter, or
// let late subscribers catch up through the replay socket (WithReplay).
// Any goroutine may call it.
func (p *Publisher) WaitSubscribers(ctx context.Context, n int) error {
	if p == nil || p.fan == nil {
		return errZeroPublisher
	}
	return p.fan.wait(ctx, n)
}

// Subscribers returns the counts of each connected subscriber, the oldest
// connection first: what it was sent and what it lost. Any goroutine may
// call it; the counts of a subscriber that disconnected stay in Stats.
func (p *Publisher) Subscribers() []SubscriberStats {
	if p == nil || p.fan == nil {
		return nil
	}
	return p.fan.stats()
}

// SubscriberStats counts what one connected subscriber was sent.
type SubscriberStats struct {
	// Remote is the subscriber's address.
	Remote string
	// Since is when it connected.
	Since time.Time
	// Topics are its subscriptions.
	Topics []string
	// Sent counts the batches written to its connection.
	Sent uint64
	// Dropped counts the batches it lost: its queue was full
	// (WithHighWaterMark) when they were published.
	Dropped uint64
	// Queued is the number of batches waiting for its writer now.
	Queued int
}

// Subscriber returns the function to pass to kv.WithSubscriber. It copies
// each event into the current batch and hands full batches to the
// publisher's goroutine without waiting; nil events and events of an
// unknown kind are ignored (and counted in Stats.Invalid).
func (p *Publisher) Subscriber() func(*kv.Event) {
	if p == nil {
		return func(*kv.Event) {}
	}
	return p.record
}

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
	if p != nil && !p.closed && p.queue != nil {
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

// publish writes a sealed batch to the socket, keeps it for replay, and
// recycles it.
func (p *Publisher) publish(b *batch) {
	n := uint64(len(b.recs))
	msg := p.enc.message(b)
	if p.replay != nil {
		p.replay.add(b.seq, msg.Frames[2])
	}
	if err := p.sock.Send(msg); err != nil {
		p.st.failed.Add(1)
		p.st.droppedEvents.Add(n)
		p.errOnce.Do(func() { p.sendErr = err })
	} else {
		p.st.published.Add(1)
		p.st.publishedEvents.Add(n)
	}
	b.reset()
	p.free <- b
}

// Close publishes the current batch and every queued one, gives every
// subscriber's writer up to the linger (WithLinger) to write what is queued
// for it, then closes every connection, the replay socket and the
// publisher's goroutines. It returns within the linger plus a quarter of a
// second however the subscribers behave (stalled, gone, half-connected).
// It returns a *DroppedError (matching ErrDropped) if the publisher lost
// events over its life or a subscriber did not get a published batch (what
// was still queued at the deadline is counted in Stats.Undelivered, never
// dropped silently), and the socket's error if closing failed. Events the
// manager emits after Close are counted as dropped. Only the owner may call
// it; later calls return an error matching pool.ErrClosed.
func (p *Publisher) Close() error {
	switch {
	case p == nil || p.queue == nil:
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
	closeErr := p.sock.Close()
	if p.replay != nil {
		closeErr = errors.Join(closeErr, p.replay.Close())
	}
	st := p.Snapshot()
	var err error
	if lost := st.Dropped + st.Failed; lost > 0 || st.DroppedEvents > 0 || st.Undelivered > 0 {
		err = &DroppedError{Batches: lost, Events: st.DroppedEvents, Undelivered: st.Undelivered, Err: p.sendErr}
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

// Stats counts what a publisher did with the events it received, and what
// its subscribers got. Once it is closed:
//
//	Batches == Published + Dropped + Failed
//	Events == PublishedEvents + DroppedEvents
//	Delivered + Undelivered == the batch copies queued for subscribers
//	                           (one per published batch and subscriber of its topic)
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

	// Delivered counts the batch copies written to subscribers' connections
	// (handed to the kernel), over all subscribers.
	Delivered uint64
	// Undelivered counts the batch copies a subscriber did not get: dropped
	// because its queue was full (a slow or stalled subscriber loses its
	// own batches only), lost with its connection, or still queued when
	// Close's linger ran out. Per connected subscriber: Subscribers.
	Undelivered uint64
	// Unheard counts the published batches no subscriber's subscription
	// covered (before the first subscriber connected: the slow joiner).
	Unheard uint64
	// Subscribers is the number of subscribers connected now; Joined and
	// Left count the connections made and lost (a stalled subscriber
	// disconnected after WithWriteTimeout counts in Left and in TimedOut).
	Subscribers  int
	Joined, Left uint64
	TimedOut     uint64
	// ReplayRequests counts the replay requests served; ReplayInvalid the
	// malformed ones ignored.
	ReplayRequests, ReplayInvalid uint64
}

// Snapshot returns the publisher's counts. Any goroutine may call it (a
// metrics scraper); it costs the owner nothing.
func (p *Publisher) Snapshot() Stats {
	if p == nil {
		return Stats{}
	}
	st := Stats{
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
	if f := p.fan; f != nil {
		st.Delivered = f.delivered.Load()
		st.Undelivered = f.undelivered.Load()
		st.Unheard = f.unheard.Load()
		st.Subscribers = f.connected()
		st.Joined = f.joined.Load()
		st.Left = f.left.Load()
		st.TimedOut = f.timeouts.Load()
	}
	if r := p.replay; r != nil {
		st.ReplayRequests = r.requests.Load()
		st.ReplayInvalid = r.invalid.Load()
	}
	return st
}

// noCopy lets go vet's copylocks check flag copies of a Publisher.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}
