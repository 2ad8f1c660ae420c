package events

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/null"

	"github.com/locus-go/locus/pool"
)

// errFanoutClosed is what Send returns after Close.
var errFanoutClosed = errors.New("events: socket closed")

// handshakeTimeout bounds a new connection's ZMTP greeting and handshake: a
// peer that connects and says nothing is dropped after it.
const handshakeTimeout = 5 * time.Second

// fanout is the publisher's transport: the PUB side of ZMTP 3.0, written
// over zmq4's connection-level API (zmq4.Open does the greeting and the
// NULL handshake) so that every subscriber has a queue and a writer of its
// own. zmq4's PUB socket has one queue for all connections and writes to
// them in turn, so one stalled subscriber stalls all of them; libzmq has a
// pipe per subscriber, and so does this.
//
// Send never waits: it appends the message to the queue of every
// subscriber whose subscriptions cover its topic, or drops it for a
// subscriber whose queue holds depth messages (counted for that subscriber
// only). Each subscriber's writer goroutine writes its queue through a
// buffer, every message under the write timeout; a subscriber that stays
// stalled past it is disconnected (it reconnects and sees the gap). Close
// gives the writers the linger to write what is queued, then closes every
// connection and counts what was left.
//
// Lock order: fanout.mu, then peer.mu.
type fanout struct {
	depth        int // per-subscriber queue depth; 0: unbounded
	writeTimeout time.Duration
	linger       time.Duration
	topic        []byte // the publisher's topic, for counting subscribers
	sendBuf      int    // tests: SO_SNDBUF of the connections

	ln      net.Listener // nil when dialing
	network string       // for dialing
	address string

	mu      sync.Mutex
	peers   map[*peer]struct{}
	pending map[net.Conn]struct{} // accepted, handshake in progress
	closing bool
	changed chan struct{} // closed and replaced when subscriptions change

	stop chan struct{} // closed by Close
	wg   sync.WaitGroup

	delivered, undelivered, unheard, joined, left, timeouts atomic.Uint64
}

func newFanout(cfg *config) *fanout {
	return &fanout{
		depth:        cfg.hwm,
		writeTimeout: cfg.writeTimeout,
		linger:       cfg.linger,
		topic:        []byte(cfg.topic),
		sendBuf:      cfg.sendBuf,
		peers:        make(map[*peer]struct{}),
		pending:      make(map[net.Conn]struct{}),
		changed:      make(chan struct{}),
		stop:         make(chan struct{}),
	}
}

// listen accepts subscribers on the endpoint.
func (f *fanout) listen(network, address string) error {
	ln, err := net.Listen(network, address)
	if err != nil {
		return err
	}
	f.ln = ln
	f.wg.Go(f.accept)
	return nil
}

func (f *fanout) accept() {
	for {
		nc, err := f.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			select {
			case <-f.stop:
				return
			default:
			}
			// A transient failure (out of descriptors): back off a little.
			select {
			case <-f.stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		if !f.track(nc) {
			nc.Close()
			return
		}
		f.wg.Go(func() { f.open(nc, true) })
	}
}

// dial connects to a subscriber that listens (WithDial), and connects
// again whenever the connection is lost, until Close. The first attempt
// is made by New, with retries for up to wait.
func (f *fanout) dial(network, address string, wait time.Duration) error {
	f.network, f.address = network, address
	var nc net.Conn
	var err error
	deadline := time.Now().Add(wait)
	for {
		nc, err = net.DialTimeout(network, address, wait)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	p, err := f.handshake(nc, false)
	if err != nil {
		nc.Close()
		return err
	}
	f.wg.Go(func() { f.redial(p) })
	return nil
}

// redial waits for the connection to be lost and makes a new one, backing
// off from 50 ms to 1 s between failed attempts.
func (f *fanout) redial(p *peer) {
	backoff := 50 * time.Millisecond
	for {
		if p != nil {
			select {
			case <-f.stop:
				return
			case <-p.gone:
			}
		}
		select {
		case <-f.stop:
			return
		case <-time.After(backoff):
		}
		p = nil
		nc, err := net.DialTimeout(f.network, f.address, handshakeTimeout)
		if err != nil {
			backoff = min(2*backoff, time.Second)
			continue
		}
		if !f.track(nc) {
			nc.Close()
			return
		}
		if p, err = f.handshake(nc, false); err != nil {
			nc.Close()
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
	}
}

// track records a connection whose handshake is in progress, so that Close
// can abort it; it reports false after Close.
func (f *fanout) track(nc net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closing {
		return false
	}
	f.pending[nc] = struct{}{}
	return true
}

// open does the handshake of an accepted connection and starts its peer.
func (f *fanout) open(nc net.Conn, server bool) {
	if _, err := f.handshake(nc, server); err != nil {
		nc.Close()
	}
}

// handshake greets the peer as a PUB socket and, if it is a SUB or XSUB,
// starts its reader and writer.
func (f *fanout) handshake(nc net.Conn, server bool) (*peer, error) {
	bc := &bufConn{Conn: nc}
	_ = nc.SetDeadline(time.Now().Add(handshakeTimeout))
	zc, err := zmq4.Open(bc, null.Security(), zmq4.Pub, nil, server, nil)
	f.mu.Lock()
	delete(f.pending, nc)
	if err == nil && f.closing {
		err = errFanoutClosed
	}
	if err != nil {
		f.mu.Unlock()
		return nil, err
	}
	_ = nc.SetDeadline(time.Time{})
	bc.mu.Lock()
	bc.w = bufio.NewWriterSize(nc, 64<<10)
	bc.mu.Unlock()
	p := &peer{
		f: f, nc: nc, bc: bc, zc: zc,
		remote: nc.RemoteAddr().String(),
		since:  time.Now(),
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
		gone:   make(chan struct{}),
	}
	if tc, ok := nc.(*net.TCPConn); ok && f.sendBuf > 0 {
		_ = tc.SetWriteBuffer(f.sendBuf)
	}
	f.peers[p] = struct{}{}
	f.joined.Add(1)
	f.notifyLocked()
	f.mu.Unlock()
	f.wg.Go(p.read)
	f.wg.Go(p.write)
	return p, nil
}

// notifyLocked wakes the waiters of WaitSubscribers. f.mu is held.
func (f *fanout) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// Send queues msg for every subscriber whose subscriptions cover its topic
// (its first frame). It never waits.
func (f *fanout) Send(msg zmq4.Msg) error {
	var topic []byte
	if len(msg.Frames) > 0 {
		topic = msg.Frames[0]
	}
	f.mu.Lock()
	if f.closing {
		f.mu.Unlock()
		return errFanoutClosed
	}
	matched := false
	for p := range f.peers {
		if p.enqueue(msg, topic) {
			matched = true
		}
	}
	f.mu.Unlock()
	if !matched {
		f.unheard.Add(1)
	}
	return nil
}

// Addr returns the listener's address, nil when dialing.
func (f *fanout) Addr() net.Addr {
	if f.ln == nil {
		return nil
	}
	return f.ln.Addr()
}

// Topics returns the subscriptions of every connected subscriber, sorted,
// without duplicates (zmq4.Topics).
func (f *fanout) Topics() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	set := map[string]struct{}{}
	for p := range f.peers {
		p.mu.Lock()
		for _, t := range p.topics {
			set[string(t)] = struct{}{}
		}
		p.mu.Unlock()
	}
	out := make([]string, 0, len(set))
	for t := range set {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// subscribers counts the connected subscribers whose subscriptions cover
// the publisher's topic.
func (f *fanout) subscribersLocked() int {
	n := 0
	for p := range f.peers {
		p.mu.Lock()
		if p.coversLocked(f.topic) {
			n++
		}
		p.mu.Unlock()
	}
	return n
}

// wait returns once n subscribers cover the publisher's topic.
func (f *fanout) wait(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		have, closing, changed := f.subscribersLocked(), f.closing, f.changed
		f.mu.Unlock()
		switch {
		case have >= n:
			return nil
		case closing:
			return pool.ErrClosed
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// stats returns the per-subscriber counts, oldest subscriber first.
func (f *fanout) stats() []SubscriberStats {
	f.mu.Lock()
	out := make([]SubscriberStats, 0, len(f.peers))
	for p := range f.peers {
		p.mu.Lock()
		out = append(out, SubscriberStats{
			Remote:  p.remote,
			Since:   p.since,
			Topics:  append([]string(nil), p.topicStrings()...),
			Sent:    p.sent.Load(),
			Dropped: p.dropped.Load(),
			Queued:  len(p.q),
		})
		p.mu.Unlock()
	}
	f.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Since.Before(out[j].Since) })
	return out
}

func (f *fanout) connected() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.peers)
}

// Close stops accepting, gives every subscriber's writer up to the linger
// to write what is queued, then closes every connection, counts what was
// left as undelivered, and waits for its goroutines: at most the linger
// plus closeGrace.
func (f *fanout) Close() error {
	f.mu.Lock()
	if f.closing {
		f.mu.Unlock()
		return errFanoutClosed
	}
	f.closing = true
	f.notifyLocked()
	peers := make([]*peer, 0, len(f.peers))
	for p := range f.peers {
		peers = append(peers, p)
	}
	for nc := range f.pending {
		nc.Close()
	}
	f.mu.Unlock()
	close(f.stop)
	var err error
	if f.ln != nil {
		err = f.ln.Close()
	}
	for _, p := range peers {
		p.drain()
	}
	deadline := time.NewTimer(f.linger)
	defer deadline.Stop()
wait:
	for _, p := range peers {
		select {
		case <-p.done:
		case <-deadline.C:
			break wait
		}
	}
	for _, p := range peers {
		p.teardown(false)
	}
	f.wg.Wait()
	return err
}

// A peer is one connected subscriber: its subscriptions, its queue, and
// the two goroutines that read its subscriptions and write its queue.
type peer struct {
	f      *fanout
	nc     net.Conn
	bc     *bufConn
	zc     *zmq4.Conn
	remote string
	since  time.Time

	mu       sync.Mutex
	topics   [][]byte
	q        []zmq4.Msg
	closed   bool // torn down: nothing more is queued
	draining bool // Close: write what is queued, then stop

	wake chan struct{} // one pending wake-up of the writer
	done chan struct{} // closed when the writer returns
	gone chan struct{} // closed by teardown
	once sync.Once

	sent, dropped atomic.Uint64
}

// coversLocked reports whether a subscription covers topic. p.mu is held.
func (p *peer) coversLocked(topic []byte) bool {
	for _, t := range p.topics {
		if bytes.HasPrefix(topic, t) {
			return true
		}
	}
	return false
}

func (p *peer) topicStrings() []string {
	out := make([]string, len(p.topics))
	for i, t := range p.topics {
		out[i] = string(t)
	}
	return out
}

// enqueue queues msg if p subscribes to its topic, or drops it (counted for
// p) when p's queue is full. It reports whether p subscribes. f.mu is held.
func (p *peer) enqueue(msg zmq4.Msg, topic []byte) bool {
	p.mu.Lock()
	if p.closed || !p.coversLocked(topic) {
		p.mu.Unlock()
		return false
	}
	if p.f.depth > 0 && len(p.q) >= p.f.depth {
		p.mu.Unlock()
		p.dropped.Add(1)
		p.f.undelivered.Add(1)
		return true
	}
	p.q = append(p.q, msg)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return true
}

// drain asks the writer to write what is queued and return.
func (p *peer) drain() {
	p.mu.Lock()
	p.draining = true
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// write is the peer's writer goroutine.
func (p *peer) write() {
	defer close(p.done)
	var out []zmq4.Msg
	for {
		p.mu.Lock()
		for len(p.q) == 0 {
			if p.closed || p.draining {
				p.mu.Unlock()
				return
			}
			p.mu.Unlock()
			<-p.wake
			p.mu.Lock()
		}
		out, p.q = p.q, out[:0]
		p.mu.Unlock()
		for i := range out {
			_ = p.nc.SetWriteDeadline(time.Now().Add(p.f.writeTimeout))
			if err := p.zc.SendMsg(out[i]); err != nil {
				p.fail(out, err)
				return
			}
		}
		_ = p.nc.SetWriteDeadline(time.Now().Add(p.f.writeTimeout))
		if err := p.bc.Flush(); err != nil {
			p.fail(out, err)
			return
		}
		p.sent.Add(uint64(len(out)))
		p.f.delivered.Add(uint64(len(out)))
		clear(out)
	}
}

// fail counts the messages the writer held as undelivered (some may have
// reached the peer; none is known to have) and tears the peer down.
func (p *peer) fail(out []zmq4.Msg, err error) {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		p.f.timeouts.Add(1)
	}
	p.dropped.Add(uint64(len(out)))
	p.f.undelivered.Add(uint64(len(out)))
	p.teardown(true)
}

// read is the peer's reader goroutine: it applies the subscriptions the
// subscriber sends (ZMTP 3.0: a message of one frame, 1 or 0 then the
// topic) and returns when the connection fails.
func (p *peer) read() {
	for {
		msg, err := p.zc.RecvMsg()
		if err != nil {
			p.teardown(true)
			return
		}
		if msg.Type == zmq4.CmdMsg {
			_ = p.bc.Flush() // the PONG of a PING, if any
			continue
		}
		if len(msg.Frames) != 1 || len(msg.Frames[0]) == 0 {
			continue
		}
		f0 := msg.Frames[0]
		p.f.mu.Lock()
		p.mu.Lock()
		switch f0[0] {
		case 1:
			p.topics = addTopic(p.topics, f0[1:])
		case 0:
			p.topics = removeTopic(p.topics, f0[1:])
		}
		p.mu.Unlock()
		p.f.notifyLocked()
		p.f.mu.Unlock()
	}
}

func addTopic(ts [][]byte, t []byte) [][]byte {
	for _, have := range ts {
		if bytes.Equal(have, t) {
			return ts
		}
	}
	return append(ts, bytes.Clone(t))
}

func removeTopic(ts [][]byte, t []byte) [][]byte {
	for i, have := range ts {
		if bytes.Equal(have, t) {
			return append(ts[:i], ts[i+1:]...)
		}
	}
	return ts
}

// teardown closes the peer's connection once, counts what is still queued
// as undelivered, and removes it from the fanout. lost says the connection
// failed (or timed out), rather than being closed by Close.
func (p *peer) teardown(lost bool) {
	p.once.Do(func() {
		p.mu.Lock()
		p.closed = true
		n := uint64(len(p.q))
		clear(p.q)
		p.q = nil
		p.mu.Unlock()
		if n > 0 {
			p.dropped.Add(n)
			p.f.undelivered.Add(n)
		}
		_ = p.nc.SetDeadline(time.Now())
		p.nc.Close()
		select {
		case p.wake <- struct{}{}:
		default:
		}
		p.f.mu.Lock()
		delete(p.f.peers, p)
		if lost {
			p.f.left.Add(1)
		}
		p.f.notifyLocked()
		p.f.mu.Unlock()
		close(p.gone)
	})
}

// bufConn buffers a connection's writes once the handshake is done (w is
// set): the writer flushes after each run of its queue, one system call
// for many frames. Its lock serializes the writer and the reader's PONGs.
type bufConn struct {
	net.Conn
	mu sync.Mutex
	w  *bufio.Writer
}

func (c *bufConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.w == nil {
		return c.Conn.Write(b)
	}
	return c.w.Write(b)
}

// Flush writes what is buffered.
func (c *bufConn) Flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.w == nil {
		return nil
	}
	return c.w.Flush()
}
