package events

import (
	"bufio"
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/null"
)

// EndOfReplay is the sequence frame of the message that ends a replay:
// -1 as a signed 8-byte big-endian integer, vLLM's END_SEQ. Its payload
// frame is empty.
var EndOfReplay = [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// replay keeps the most recent batches, encoded, and serves them on a
// ROUTER socket as vLLM's ZmqEventPublisher does: a client (a DEALER, or a
// REQ) sends [empty, start] with start the 8-byte big-endian sequence
// number of the first batch it wants; the answer is one message
// [empty, seq, payload] per kept batch numbered start or later, in order,
// then [empty, EndOfReplay, empty]. The answer goes back on the
// connection the request came on, so the ROUTER's routing identity is
// never needed.
//
// The ring is filled by the publisher's goroutine and read by the
// connections' goroutines under mu; payloads are never written after they
// are added, so a reader holds them without the lock.
type replay struct {
	mu   sync.Mutex
	ring []replayEntry
	head int // the oldest entry
	n    int

	ln      net.Listener
	timeout time.Duration

	cmu     sync.Mutex
	conns   map[net.Conn]struct{}
	closing bool
	wg      sync.WaitGroup

	requests, invalid atomic.Uint64
}

type replayEntry struct {
	seq     uint64
	payload []byte
}

func newReplay(size int, timeout time.Duration) *replay {
	return &replay{ring: make([]replayEntry, size), timeout: timeout, conns: map[net.Conn]struct{}{}}
}

// add keeps a published batch, forgetting the oldest when the ring is full.
func (r *replay) add(seq uint64, payload []byte) {
	r.mu.Lock()
	i := (r.head + r.n) % len(r.ring)
	if r.n == len(r.ring) {
		r.head = (r.head + 1) % len(r.ring)
	} else {
		r.n++
	}
	r.ring[i] = replayEntry{seq, payload}
	r.mu.Unlock()
}

// from appends to dst the kept batches numbered start or later, in order.
func (r *replay) from(dst []replayEntry, start uint64) []replayEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.n {
		e := r.ring[(r.head+k)%len(r.ring)]
		if e.seq >= start {
			dst = append(dst, e)
		}
	}
	return dst
}

// parseReplayRequest returns the first sequence number a replay request
// asks for: the request is [empty, 8-byte big-endian start] (a ROUTER's
// view of vLLM's request, the routing identity aside).
func parseReplayRequest(frames [][]byte) (start uint64, ok bool) {
	if len(frames) != 2 || len(frames[0]) != 0 || len(frames[1]) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(frames[1]), true
}

func (r *replay) listen(network, address string) error {
	ln, err := net.Listen(network, address)
	if err != nil {
		return err
	}
	r.ln = ln
	r.wg.Go(r.accept)
	return nil
}

func (r *replay) accept() {
	for {
		nc, err := r.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			r.cmu.Lock()
			closing := r.closing
			r.cmu.Unlock()
			if closing {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		r.cmu.Lock()
		if r.closing {
			r.cmu.Unlock()
			nc.Close()
			return
		}
		r.conns[nc] = struct{}{}
		r.cmu.Unlock()
		r.wg.Go(func() { r.serve(nc) })
	}
}

// serve answers one client's requests until it disconnects.
func (r *replay) serve(nc net.Conn) {
	defer func() {
		nc.Close()
		r.cmu.Lock()
		delete(r.conns, nc)
		r.cmu.Unlock()
	}()
	bc := &bufConn{Conn: nc}
	_ = nc.SetDeadline(time.Now().Add(handshakeTimeout))
	zc, err := zmq4.Open(bc, null.Security(), zmq4.Router, nil, true, nil)
	if err != nil {
		return
	}
	_ = nc.SetDeadline(time.Time{})
	bc.mu.Lock()
	bc.w = bufio.NewWriterSize(nc, 64<<10)
	bc.mu.Unlock()
	var kept []replayEntry
	var seq [8]byte
	for {
		msg, err := zc.RecvMsg()
		if err != nil {
			return
		}
		if msg.Type == zmq4.CmdMsg {
			_ = bc.Flush()
			continue
		}
		start, ok := parseReplayRequest(msg.Frames)
		if !ok {
			r.invalid.Add(1) // vLLM logs and ignores it
			continue
		}
		r.requests.Add(1)
		kept = r.from(kept[:0], start)
		for _, e := range kept {
			binary.BigEndian.PutUint64(seq[:], e.seq)
			_ = nc.SetWriteDeadline(time.Now().Add(r.timeout))
			if zc.SendMsg(zmq4.NewMsgFrom(nil, seq[:], e.payload)) != nil {
				return
			}
		}
		clear(kept)
		_ = nc.SetWriteDeadline(time.Now().Add(r.timeout))
		if zc.SendMsg(zmq4.NewMsgFrom(nil, EndOfReplay[:], nil)) != nil || bc.Flush() != nil {
			return
		}
	}
}

// Close stops serving and waits for the connections' goroutines.
func (r *replay) Close() error {
	r.cmu.Lock()
	r.closing = true
	for nc := range r.conns {
		nc.Close()
	}
	r.cmu.Unlock()
	err := r.ln.Close()
	r.wg.Wait()
	return err
}
