package events

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/null"

	"github.com/locus-go/locus/internal/typednil"
	"github.com/locus-go/locus/pool"
)

// Defaults of Subscribe.
const (
	// DefaultRedial is the longest wait between two tries to connect
	// again to a publisher that is gone (the first try is at once, then
	// the wait doubles from 10 ms).
	DefaultRedial = time.Second
	// DefaultReplayTimeout bounds one replay request: connecting, asking,
	// and reading every batch of the answer.
	DefaultReplayTimeout = 5 * time.Second
)

var errZeroSubscription = fmt.Errorf("%w: zero events.Subscription; make it with events.Subscribe", pool.ErrClosed)

// SubscribeOption configures a Subscription.
type SubscribeOption interface{ applySub(*subConfig) }

type subOptionFunc func(*subConfig)

func (f subOptionFunc) applySub(c *subConfig) { f(c) }

type subConfig struct {
	prefix        string
	replay        string
	dialWait      time.Duration
	redial        time.Duration
	replayTimeout time.Duration

	hold chan struct{} // tests: wait for it before connecting again
}

// WithPrefix subscribes to the topics that start with prefix (default
// "": every topic), as ZMQ's SUBSCRIBE option; give Topic(pod, model) for
// one engine's stream.
func WithPrefix(prefix string) SubscribeOption {
	return subOptionFunc(func(c *subConfig) { c.prefix = prefix })
}

// WithReplayFrom names the publisher's replay socket (its WithReplay
// endpoint, such as "tcp://10.0.0.5:5558"): a gap in the sequence numbers
// is then filled from it, and so are the first batches of a subscription
// that joined late. Without it (the default) a gap is counted in
// Batch.Missed and SubscriptionStats.Missed.
func WithReplayFrom(endpoint string) SubscribeOption {
	return subOptionFunc(func(c *subConfig) { c.replay = endpoint })
}

// WithDialWait sets how long Subscribe tries to connect before it fails
// (default DialWait): a router that starts before its engines waits for
// them that long.
func WithDialWait(d time.Duration) SubscribeOption {
	return subOptionFunc(func(c *subConfig) { c.dialWait = d })
}

// WithRedial sets the longest wait between two tries to connect again
// after the connection is lost (default DefaultRedial).
func WithRedial(d time.Duration) SubscribeOption {
	return subOptionFunc(func(c *subConfig) { c.redial = d })
}

// WithReplayTimeout bounds one replay request (default
// DefaultReplayTimeout); what did not come by then is missed.
func WithReplayTimeout(d time.Duration) SubscribeOption {
	return subOptionFunc(func(c *subConfig) { c.replayTimeout = d })
}

// Subscription reads a publisher's batches (this package's Publisher, or
// a vLLM engine's ZmqEventPublisher) over a ZMQ SUB connection, decodes
// them (Decode) and hands each to the function given to Subscribe, in
// sequence order, on one goroutine of its own. Make one with Subscribe.
//
// It follows the stream's sequence numbers:
//
//   - A gap (batches lost: the subscriber's queue at the publisher was
//     full, the connection was lost and made again) is filled from the
//     replay socket (WithReplayFrom) before the batch after it is handed
//     on; the replayed batches carry Batch.Replayed. What the replay
//     cannot give back is counted in the next batch's Missed.
//   - A subscription that joins late (its first batch is not number 0)
//     asks the replay socket for the batches from 0 that it still keeps.
//   - A sequence number that goes back starts a new stream: the publisher
//     restarted (over an empty cache, for a locus engine). The first
//     batch of the new stream carries Batch.Restarted; batches the new
//     stream sent before the subscription reconnected are replayed as
//     for a late join.
//
// A lost connection is made again in the background (WithRedial), for
// as long as the subscription is open. A restart that the connection
// loss hides (the new stream's numbers already past the old one's when
// the subscription reconnects) looks like a gap; vLLM's subscribers have
// the same blind spot.
//
// When to use it: a router or monitor in Go that follows engines' KV
// events (fleet.Follow applies them to a fleet.Index). When not: inside
// the engine's process, where kv.WithSubscriber gives the events without
// a socket.
//
// Close stops it; Stats may be called from any goroutine. The zero
// Subscription is not usable (Close fails with pool.ErrClosed).
type Subscription struct {
	_        noCopy
	cfg      subConfig
	network  string
	address  string
	rnetwork string
	raddress string
	fn       func(*Batch)

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	conn   net.Conn // the current connection, closed by Close
	closed bool

	// The subscription goroutine's state.
	have bool
	next uint64
	b    Batch
	rb   Batch

	st subCounters
}

type subCounters struct {
	batches, events, replayed, missed, restarts  atomic.Uint64
	malformed, connects, gaps, replays, failures atomic.Uint64
	next                                         atomic.Uint64
	connected                                    atomic.Bool
}

// SubscriptionStats counts what a Subscription received.
type SubscriptionStats struct {
	// Batches counts the batches handed on, Events the events in them.
	Batches, Events uint64
	// Replayed counts the batches of Batches that came from the replay
	// socket.
	Replayed uint64
	// Gaps counts the gaps found in the sequence numbers, Missed the
	// batches in them the replay did not give back.
	Gaps, Missed uint64
	// Replays counts the replay requests made, ReplayFailures those that
	// failed (no answer, a broken connection, a timeout).
	Replays, ReplayFailures uint64
	// Restarts counts the new streams (a sequence number that went back).
	Restarts uint64
	// Malformed counts the messages that were not batches (Decode's
	// errors); each is a batch missed.
	Malformed uint64
	// Connects counts the connections made; Connected is whether one is
	// up now.
	Connects  uint64
	Connected bool
	// Next is the sequence number the subscription expects next: every
	// batch numbered below it was handed on or counted missed.
	Next uint64
}

// Subscribe connects to a publisher's endpoint ("tcp://host:port" or
// "ipc://path"), subscribes (WithPrefix) and hands every batch to fn, on
// the subscription's goroutine, until Close or until ctx is done. fn
// must not keep the *Batch or its slices after it returns (they are
// reused), and must not call Close. It tries to connect for WithDialWait,
// then fails; it fails with an error wrapping pool.ErrInvalidConfig for
// an invalid endpoint or option, or a nil fn.
func Subscribe(ctx context.Context, endpoint string, fn func(*Batch), opts ...SubscribeOption) (*Subscription, error) {
	cfg := subConfig{dialWait: DialWait, redial: DefaultRedial, replayTimeout: DefaultReplayTimeout}
	for _, o := range opts {
		if typednil.Is(o) {
			return nil, fmt.Errorf("events: %w: nil option", pool.ErrInvalidConfig)
		}
		o.applySub(&cfg)
	}
	switch {
	case ctx == nil || fn == nil:
		return nil, fmt.Errorf("events: %w: nil context or function", pool.ErrInvalidConfig)
	case len(cfg.prefix) > maxTopic:
		return nil, fmt.Errorf("events: %w: prefix of %d bytes; want at most %d", pool.ErrInvalidConfig, len(cfg.prefix), maxTopic)
	case cfg.dialWait < 0 || cfg.redial <= 0 || cfg.replayTimeout <= 0:
		return nil, fmt.Errorf("events: %w: dial wait %v, redial %v, replay timeout %v", pool.ErrInvalidConfig, cfg.dialWait, cfg.redial, cfg.replayTimeout)
	}
	network, address, err := parseEndpoint(endpoint)
	if err != nil {
		return nil, err
	}
	s := &Subscription{cfg: cfg, network: network, address: address, fn: fn, done: make(chan struct{})}
	if cfg.replay != "" {
		if s.rnetwork, s.raddress, err = parseEndpoint(cfg.replay); err != nil {
			return nil, err
		}
	}
	s.ctx, s.cancel = context.WithCancel(ctx)
	context.AfterFunc(s.ctx, s.closeConn) // ctx done: the reader returns
	zc, err := s.dialFor(cfg.dialWait)
	if err != nil {
		s.cancel()
		return nil, fmt.Errorf("events: subscribe %s: %w", endpoint, err)
	}
	go s.run(zc)
	return s, nil
}

// dialFor connects and subscribes, trying again until wait has passed.
func (s *Subscription) dialFor(wait time.Duration) (*zmq4.Conn, error) {
	deadline := time.Now().Add(wait)
	backoff := 10 * time.Millisecond
	for {
		zc, err := s.dial()
		if err == nil {
			return zc, nil
		}
		if s.ctx.Err() != nil {
			return nil, s.ctx.Err()
		}
		if time.Now().After(deadline) {
			return nil, err
		}
		select {
		case <-s.ctx.Done():
			return nil, s.ctx.Err()
		case <-time.After(min(backoff, time.Until(deadline)+time.Millisecond)):
		}
		backoff = min(2*backoff, s.cfg.redial)
	}
}

// dial connects once, does the handshake as a SUB, and sends the
// subscription (ZMTP 3.0: a message of 1 then the prefix).
func (s *Subscription) dial() (*zmq4.Conn, error) {
	var d net.Dialer
	ctx, cancel := context.WithTimeout(s.ctx, handshakeTimeout)
	defer cancel()
	nc, err := d.DialContext(ctx, s.network, s.address)
	if err != nil {
		return nil, err
	}
	if !s.track(nc) {
		nc.Close()
		return nil, pool.ErrClosed
	}
	_ = nc.SetDeadline(time.Now().Add(handshakeTimeout))
	zc, err := zmq4.Open(nc, null.Security(), zmq4.Sub, nil, false, nil)
	if err == nil {
		err = zc.SendMsg(zmq4.NewMsg(append([]byte{1}, s.cfg.prefix...)))
	}
	if err != nil {
		s.untrack(nc)
		nc.Close()
		return nil, err
	}
	_ = nc.SetDeadline(time.Time{})
	s.st.connects.Add(1)
	s.st.connected.Store(true)
	return zc, nil
}

// track makes nc the connection Close closes; false once closed.
func (s *Subscription) track(nc net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.ctx.Err() != nil {
		return false
	}
	s.conn = nc
	return true
}

func (s *Subscription) untrack(nc net.Conn) {
	s.mu.Lock()
	if s.conn == nc {
		s.conn = nil
	}
	s.mu.Unlock()
}

// run is the subscription's goroutine: it reads, follows the sequence
// numbers and hands batches on; it connects again when the connection is
// lost.
func (s *Subscription) run(zc *zmq4.Conn) {
	defer close(s.done)
	for {
		s.read(zc)
		s.st.connected.Store(false)
		if s.ctx.Err() != nil {
			return
		}
		if s.cfg.hold != nil {
			select {
			case <-s.cfg.hold:
			case <-s.ctx.Done():
				return
			}
		}
		var err error
		for zc = nil; zc == nil; {
			if zc, err = s.dialFor(s.cfg.redial); err != nil && s.ctx.Err() != nil {
				return
			}
		}
	}
}

// read reads messages until the connection fails or the subscription is
// closed.
func (s *Subscription) read(zc *zmq4.Conn) {
	defer func() {
		_ = zc.Close()
	}()
	for {
		msg, err := zc.RecvMsg()
		if err != nil {
			return
		}
		if msg.Type == zmq4.CmdMsg {
			continue
		}
		if err := DecodeMessage(msg.Frames, &s.b); err != nil {
			s.st.malformed.Add(1)
			continue
		}
		s.receive(&s.b)
		if s.ctx.Err() != nil {
			return
		}
	}
}

// receive follows the sequence numbers for one live batch.
func (s *Subscription) receive(b *Batch) {
	b.Restarted, b.Missed, b.Replayed = false, 0, false
	switch {
	case !s.have && b.Seq > 0, s.have && b.Seq > s.next: // a late join, or a gap
		s.st.gaps.Add(1)
		s.fill(b.Seq)
	case s.have && b.Seq < s.next: // a new stream
		s.st.restarts.Add(1)
		s.next = 0
		if b.Seq > 0 {
			s.st.gaps.Add(1)
			s.fill(b.Seq)
		}
		if s.next == 0 { // nothing replayed: this batch starts the new stream
			b.Restarted = true
		}
	}
	if s.have && b.Seq > s.next {
		b.Missed = b.Seq - s.next
		s.st.missed.Add(b.Missed)
	}
	s.have = true
	s.deliver(b)
}

// fill hands on the batches from s.next up to (not including) upto that
// the replay socket still keeps. The first batch it hands on after a
// restart (s.next == 0 with s.have) carries Restarted.
func (s *Subscription) fill(upto uint64) {
	if s.rnetwork == "" {
		return
	}
	restarted := s.have && s.next == 0
	s.st.replays.Add(1)
	err := s.replay(s.next, func(seq uint64, payload []byte) bool {
		if seq < s.next || seq >= upto {
			return seq < upto
		}
		if err := Decode(payload, &s.rb); err != nil {
			s.st.malformed.Add(1)
			return true
		}
		rb := &s.rb
		rb.Topic, rb.Seq, rb.Replayed, rb.Restarted, rb.Missed = s.b.Topic, seq, true, restarted, 0
		restarted = false
		if s.have && seq > s.next {
			rb.Missed = seq - s.next
			s.st.missed.Add(rb.Missed)
		}
		s.st.replayed.Add(1)
		s.have = true
		s.deliver(rb)
		return true
	})
	if err != nil {
		s.st.failures.Add(1)
	}
}

// deliver hands b on and advances the expected sequence number.
func (s *Subscription) deliver(b *Batch) {
	s.next = b.Seq + 1
	s.st.next.Store(s.next)
	s.st.batches.Add(1)
	s.st.events.Add(uint64(len(b.Events)))
	s.fn(b)
}

// replay asks the replay socket for the batches from start and passes
// each to got, in order, until the end of the replay or got returns
// false.
func (s *Subscription) replay(start uint64, got func(seq uint64, payload []byte) bool) error {
	var d net.Dialer
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.replayTimeout)
	defer cancel()
	nc, err := d.DialContext(ctx, s.rnetwork, s.raddress)
	if err != nil {
		return err
	}
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Now()) })
	defer stop()
	deadline, _ := ctx.Deadline()
	_ = nc.SetDeadline(deadline)
	zc, err := zmq4.Open(nc, null.Security(), zmq4.Dealer, nil, false, nil)
	if err != nil {
		return err
	}
	defer zc.Close()
	if err := zc.SendMsg(zmq4.NewMsgFrom([]byte{}, binary.BigEndian.AppendUint64(nil, start))); err != nil {
		return err
	}
	for {
		msg, err := zc.RecvMsg()
		if err != nil {
			return err
		}
		if msg.Type == zmq4.CmdMsg {
			continue
		}
		if len(msg.Frames) != 3 || len(msg.Frames[0]) != 0 || len(msg.Frames[1]) != 8 {
			return fmt.Errorf("%w: replay answer of %d frames", ErrMalformed, len(msg.Frames))
		}
		if [8]byte(msg.Frames[1]) == EndOfReplay {
			return nil
		}
		if !got(binary.BigEndian.Uint64(msg.Frames[1]), msg.Frames[2]) {
			return nil
		}
	}
}

// Stats returns the subscription's counts. Any goroutine may call it.
func (s *Subscription) Stats() SubscriptionStats {
	if s == nil {
		return SubscriptionStats{}
	}
	return SubscriptionStats{
		Batches: s.st.batches.Load(), Events: s.st.events.Load(), Replayed: s.st.replayed.Load(),
		Gaps: s.st.gaps.Load(), Missed: s.st.missed.Load(), Replays: s.st.replays.Load(), ReplayFailures: s.st.failures.Load(),
		Restarts: s.st.restarts.Load(), Malformed: s.st.malformed.Load(), Connects: s.st.connects.Load(),
		Connected: s.st.connected.Load(), Next: s.st.next.Load(),
	}
}

// Close stops the subscription: it closes the connection and waits for
// the subscription's goroutine (a call of fn in progress finishes
// first). Any goroutine but fn's may call it; later calls return an
// error matching pool.ErrClosed.
func (s *Subscription) Close() error {
	if s == nil || s.done == nil || s.cancel == nil {
		return errZeroSubscription
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return pool.ErrClosed
	}
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.closeConn()
	<-s.done
	return nil
}

// closeConn closes the current connection, so that its reader returns.
func (s *Subscription) closeConn() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		_ = s.conn.SetDeadline(time.Now())
		s.conn.Close()
	}
}

// Done returns a channel closed when the subscription has stopped (Close,
// or its context done). It is nil for the zero Subscription.
func (s *Subscription) Done() <-chan struct{} {
	if s == nil {
		return nil
	}
	return s.done
}
