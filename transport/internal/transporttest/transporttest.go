// Package transporttest holds the checks that the tests of the transports
// share: tagged handles, a recording sink, delivery checks, and exercises of
// blocking and non-blocking senders, parking, closing, retirement and
// counters. Only tests import it.
//
// It imports no testing (the repository fences that import): every check
// returns an error describing the first violation, and the caller reports it,
// as in
//
//	if err := transporttest.ManyProducers(subject, 8, 60); err != nil {
//		t.Fatal(err)
//	}
//
// Checks never hang: every wait has a deadline (Timeout), after which the
// check closes the transport to release its producers and reports the stall.
package transporttest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/locus-go/locus/pool"
)

// Timeout bounds every wait of a check: a transport that loses a wake-up or a
// handle fails the check instead of hanging the test.
const Timeout = 20 * time.Second

// Counts are the counters every bounded transport's Stats reports.
type Counts struct {
	Producers int
	Submitted uint64
	Drained   uint64
	Pending   uint64
	Full      uint64
	Blocked   uint64
}

// Subject is a transport configuration under test.
type Subject struct {
	// New makes a fresh transport; every check makes its own.
	New func() (pool.Transport, error)
	// Counts returns the transport's counters; nil if it keeps none.
	Counts func(pool.Transport) Counts
	// Queues returns how many producer queues the transport still keeps;
	// nil if the test cannot see it.
	Queues func(pool.Transport) int
}

// bounds returns tr's bounds, or unbounded ones: capacity and batch so large
// that they never limit a check.
func bounds(tr pool.Transport) pool.Bounds {
	if b, ok := tr.(pool.BoundedTransport); ok {
		return b.Bounds()
	}
	return pool.Bounds{Capacity: 1 << 30, Batch: 1 << 30, PerProducer: true, Chunked: true}
}

func (s Subject) make() (pool.Transport, error) {
	tr, err := s.New()
	if err != nil {
		return nil, fmt.Errorf("making the transport: %w", err)
	}
	return tr, nil
}

// with runs check on a fresh transport of s and closes the transport after.
func (s Subject) with(check func(tr pool.Transport) error) error {
	tr, err := s.make()
	if err != nil {
		return err
	}
	defer tr.Close()
	return check(tr)
}

// withProducer is with for a check that sends through one producer of the
// fresh transport.
func (s Subject) withProducer(check func(tr pool.Transport, prod pool.Producer) error) error {
	return s.with(func(tr pool.Transport) error {
		prod, err := tr.NewProducer()
		if err != nil {
			return err
		}
		return check(tr, prod)
	})
}

func (s Subject) counts(tr pool.Transport) (Counts, bool) {
	if s.Counts == nil {
		return Counts{}, false
	}
	return s.Counts(tr), true
}

// wantCounts compares tr's counters with want, if the subject has counters.
func (s Subject) wantCounts(tr pool.Transport, want Counts) error {
	if got, ok := s.counts(tr); ok && got != want {
		return fmt.Errorf("counters %+v, want %+v", got, want)
	}
	return nil
}

// wantNoQueues checks that tr keeps no producer queue, if the subject can
// see its queues: once every producer closed and was drained.
func (s Subject) wantNoQueues(tr pool.Transport) error {
	if s.Queues != nil {
		if n := s.Queues(tr); n != 0 {
			return fmt.Errorf("%d queues kept after every producer closed and was drained, want 0", n)
		}
	}
	return nil
}

// Handle returns a handle that names producer p's s-th handle: index p,
// generation s. Transports do not validate handles, so it needs no pool.
func Handle(p, s int) pool.Handle {
	var b [pool.HandleSize]byte
	binary.LittleEndian.PutUint64(b[:], uint64(s))
	binary.LittleEndian.PutUint32(b[8:], uint32(p))
	binary.LittleEndian.PutUint32(b[12:], 1)
	var h pool.Handle
	if err := h.UnmarshalBinary(b[:]); err != nil {
		panic(err) // b has the right length
	}
	return h
}

// Seq returns producer p's handles from .. to-1.
func Seq(p, from, to int) []pool.Handle {
	hs := make([]pool.Handle, 0, max(to-from, 0))
	for s := from; s < to; s++ {
		hs = append(hs, Handle(p, s))
	}
	return hs
}

// Recorder is a sink that keeps what it receives.
type Recorder struct {
	Got   []pool.Handle // every handle put, in order
	Sizes []int         // the length of every Put
	OnPut func()        // called after every Put when set
	Sink  *pool.Sink
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	r := &Recorder{}
	r.Sink = pool.NewSink(func(chunk []pool.Handle) {
		r.Got = append(r.Got, chunk...)
		r.Sizes = append(r.Sizes, len(chunk))
		if r.OnPut != nil {
			r.OnPut()
		}
	})
	return r
}

// Drain drains tr once and returns how many handles it delivered.
func (r *Recorder) Drain(tr pool.Transport) int {
	before := len(r.Got)
	tr.Drain(r.Sink)
	return len(r.Got) - before
}

// Want reports whether the recorder got exactly hs.
func (r *Recorder) Want(hs []pool.Handle) error {
	if !slices.Equal(r.Got, hs) {
		return fmt.Errorf("delivered %v, want %v", r.Got, hs)
	}
	return nil
}

// CheckDelivery checks that got holds, for every producer p, its handles
// 0 .. sent[p]-1 (Handle(p, s)) exactly once and in order.
func CheckDelivery(got []pool.Handle, sent []int) error {
	next := make([]int, len(sent))
	for _, h := range got {
		p, s := h.Index(), int(h.Generation())
		if p >= len(sent) {
			return fmt.Errorf("delivered %v, from no producer", h)
		}
		if s != next[p] {
			return fmt.Errorf("delivered %v; producer %d's next handle is %d (lost, duplicated or reordered)", h, p, next[p])
		}
		next[p]++
	}
	for p, s := range next {
		if s != sent[p] {
			return fmt.Errorf("producer %d: %d of %d handles delivered", p, s, sent[p])
		}
	}
	return nil
}

// WaitUntil polls cond until it holds, for at most Timeout.
func WaitUntil(cond func() bool) error {
	deadline := time.Now().Add(Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		time.Sleep(100 * time.Microsecond)
	}
	return nil
}

// tryProducer returns a new producer of tr that can refuse to wait.
func tryProducer(tr pool.Transport) (pool.TryProducer, error) {
	p, err := tr.NewProducer()
	if err != nil {
		return nil, fmt.Errorf("NewProducer: %w", err)
	}
	tp, ok := p.(pool.TryProducer)
	if !ok {
		return nil, fmt.Errorf("NewProducer returned a %T, not a pool.TryProducer", p)
	}
	return tp, nil
}

// trySend is TrySend for a producer that can refuse to wait, and Send for
// one that cannot (of an unbounded transport, which never waits).
func trySend(prod pool.Producer, chunk []pool.Handle) (int, error) {
	if tp, ok := prod.(pool.TryProducer); ok {
		return tp.TrySend(chunk)
	}
	if err := prod.Send(chunk); err != nil {
		return 0, err
	}
	return len(chunk), nil
}

// fill try-sends one-handle chunks of producer tag p until the queue is
// full, and returns how many it sent.
func fill(prod pool.TryProducer, p int) (int, error) {
	for n := 0; ; n++ {
		if n > 1<<22 {
			return n, errors.New("TrySend never reported the queue full")
		}
		k, err := prod.TrySend(Seq(p, n, n+1))
		if errors.Is(err, pool.ErrFull) && k == 0 {
			return n, nil
		}
		if err != nil || k != 1 {
			return n, fmt.Errorf("TrySend into a queue with room = (%d, %v), want (1, nil)", k, err)
		}
	}
}
