package transporttest

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locus-go/locus/pool"
)

// TrySendFull fills one queue with TrySend, checks that it reports
// pool.ErrFull with the count of what it took (as many handles as fit with
// per-handle items, all or nothing with chunk items), that TrySend(nil) is
// (0, nil), that drains make room again, and the counters.
func TrySendFull(s Subject) error {
	return s.with(func(tr pool.Transport) error {
		prod, err := tryProducer(tr)
		if err != nil {
			return err
		}
		b := bounds(tr)
		c := b.Capacity
		var want []pool.Handle // everything accepted, in order
		if b.Chunked {
			for i := range c {
				chunk := Seq(0, len(want), len(want)+1+i%3)
				if n, err := prod.TrySend(chunk); n != len(chunk) || err != nil {
					return fmt.Errorf("TrySend of chunk %d into a queue of %d chunks = (%d, %v), want (%d, nil)", i, c, n, err, len(chunk))
				}
				want = append(want, chunk...)
			}
			if n, err := prod.TrySend(Seq(0, len(want), len(want)+2)); n != 0 || !errors.Is(err, pool.ErrFull) {
				return fmt.Errorf("TrySend into a full chunk queue = (%d, %v), want (0, pool.ErrFull)", n, err)
			}
		} else {
			hs := Seq(0, 0, c+2)
			if n, err := prod.TrySend(hs); n != c || !errors.Is(err, pool.ErrFull) {
				return fmt.Errorf("TrySend of %d into %d = (%d, %v), want (%d, pool.ErrFull)", c+2, c, n, err, c)
			}
			want = hs[:c]
			if n, err := prod.TrySend(hs[c:]); n != 0 || !errors.Is(err, pool.ErrFull) {
				return fmt.Errorf("TrySend into a full queue = (%d, %v), want (0, pool.ErrFull)", n, err)
			}
		}
		if n, err := prod.TrySend(nil); n != 0 || err != nil {
			return fmt.Errorf("TrySend(nil) = (%d, %v), want (0, nil)", n, err)
		}
		full := uint64(1)
		if !b.Chunked {
			full = 2
		}
		if err := s.wantCounts(tr, Counts{Producers: 1, Submitted: uint64(c), Pending: uint64(c), Full: full}); err != nil {
			return fmt.Errorf("full queue: %w", err)
		}
		r := NewRecorder()
		for range (c + b.Batch - 1) / b.Batch {
			r.Drain(tr)
		}
		if err := r.Want(want); err != nil {
			return fmt.Errorf("drains of a full queue: %w", err)
		}
		more := Seq(0, len(want), len(want)+2)
		if n, err := prod.TrySend(more); n != 2 || err != nil {
			return fmt.Errorf("TrySend after the drains = (%d, %v), want (2, nil)", n, err)
		}
		want = append(want, more...)
		r.Drain(tr)
		if err := r.Want(want); err != nil {
			return fmt.Errorf("last drain: %w", err)
		}
		items := uint64(c + 2)
		if b.Chunked {
			items = uint64(c + 1)
		}
		if err := s.wantCounts(tr, Counts{Producers: 1, Submitted: items, Drained: items, Full: full}); err != nil {
			return fmt.Errorf("after the drains: %w", err)
		}
		return nil
	})
}

// SendWaits sends chunks chunks of 25 handles with a blocking Send into a
// queue that holds fewer, while the owner drains: the producer parks (the
// owner drains only once the Blocked counter shows it) and every handle
// arrives once, in order. With per-handle items a chunk longer than the
// capacity goes through piecewise.
func SendWaits(s Subject, chunks int) error {
	return s.withProducer(func(tr pool.Transport, prod pool.Producer) error {
		hs := Seq(0, 0, 25*chunks)
		done := make(chan error, 1)
		go func() {
			for k := range chunks {
				if err := prod.Send(hs[25*k : 25*(k+1)]); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		if s.Counts != nil {
			if err := WaitUntil(func() bool { return s.Counts(tr).Blocked > 0 }); err != nil {
				return fmt.Errorf("the producer never waited on its full queue: %w", err)
			}
		}
		r := NewRecorder()
		deadline := time.Now().Add(Timeout)
		for len(r.Got) < len(hs) && time.Now().Before(deadline) {
			if r.Drain(tr) == 0 {
				runtime.Gosched()
			}
		}
		if len(r.Got) < len(hs) {
			_ = tr.Close()
			return fmt.Errorf("after %v, %d of %d handles delivered: a parked Send was not woken", Timeout, len(r.Got), len(hs))
		}
		if err := <-done; err != nil {
			return fmt.Errorf("the blocking sends: %w", err)
		}
		if err := r.Want(hs); err != nil {
			return err
		}
		if c, ok := s.counts(tr); ok && (c.Blocked == 0 || c.Pending != 0 || c.Submitted != c.Drained || c.Full != 0) {
			return fmt.Errorf("counters %+v, want Blocked > 0, nothing pending, submitted = drained, none full", c)
		}
		return nil
	})
}

// CloseReleasesParked parks producers senders on full queues, closes the
// transport and checks that every parked Send returns pool.ErrClosed, that
// later Send, Send(nil), TrySend and NewProducer fail with pool.ErrClosed,
// that Drain delivers nothing after Close, and that Close and Producer.Close
// may be called again.
func CloseReleasesParked(s Subject, senders int) error {
	return s.with(func(tr pool.Transport) error {
		prods := make([]pool.TryProducer, senders)
		for i := range prods {
			var err error
			if prods[i], err = tryProducer(tr); err != nil {
				return err
			}
			if _, err := fill(prods[i], i); err != nil {
				return err
			}
		}
		done := make(chan error, senders)
		for i, p := range prods {
			go func() { done <- p.Send(Seq(i, 1<<20, 1<<20+3)) }()
		}
		if s.Counts != nil {
			if err := WaitUntil(func() bool { return s.Counts(tr).Blocked == uint64(senders) }); err != nil {
				return fmt.Errorf("%d senders never all waited: %w", senders, err)
			}
		}
		if err := tr.Close(); err != nil {
			return fmt.Errorf("closing: %w", err)
		}
		for range senders {
			select {
			case err := <-done:
				if !errors.Is(err, pool.ErrClosed) {
					return fmt.Errorf("a parked Send returned %v, want pool.ErrClosed", err)
				}
			case <-time.After(Timeout):
				return errors.New("closing did not release a parked Send")
			}
		}
		return afterClose(tr, prods[0])
	})
}

// afterClose checks the calls on a closed transport and one of its producers.
func afterClose(tr pool.Transport, p pool.TryProducer) error {
	if err := p.Send(Seq(0, 0, 1)); !errors.Is(err, pool.ErrClosed) {
		return fmt.Errorf("a Send after Close = %v, want pool.ErrClosed", err)
	}
	if err := p.Send(nil); !errors.Is(err, pool.ErrClosed) {
		return fmt.Errorf("Send(nil) after Close = %v, want pool.ErrClosed", err)
	}
	if n, err := p.TrySend(Seq(0, 0, 1)); n != 0 || !errors.Is(err, pool.ErrClosed) {
		return fmt.Errorf("TrySend after Close = (%d, %v), want (0, pool.ErrClosed)", n, err)
	}
	if _, err := tr.NewProducer(); !errors.Is(err, pool.ErrClosed) {
		return fmt.Errorf("NewProducer after Close = %v, want pool.ErrClosed", err)
	}
	r := NewRecorder()
	if r.Drain(tr) != 0 {
		return fmt.Errorf("Drain after Close delivered %v", r.Got)
	}
	if err := tr.Close(); err != nil {
		return fmt.Errorf("second Close: %w", err)
	}
	for range 2 {
		if err := p.Close(); err != nil {
			return fmt.Errorf("Producer.Close after Close: %w", err)
		}
	}
	return nil
}

// ManyProducers registers producers while the owner drains; each sends and
// try-sends chunks chunks of every size, racing the owner. Every handle
// arrives exactly once, each producer's in order, and the counters balance.
func ManyProducers(s Subject, producers, chunks int) error {
	return s.with(func(tr pool.Transport) error {
		chunked := bounds(tr).Chunked
		sent := make([]int, producers)
		items := make([]int, producers)
		errc := make(chan error, producers)
		var wg sync.WaitGroup
		for p := range producers {
			wg.Go(func() {
				prod, err := tr.NewProducer()
				if err != nil {
					errc <- err
					return
				}
				sent[p], items[p], err = produce(prod, p, chunks, chunked)
				errc <- err
			})
		}
		if err := Collect(tr, &wg, errc, sent); err != nil {
			return err
		}
		total := uint64(0)
		for _, n := range items {
			total += uint64(n)
		}
		if c, ok := s.counts(tr); ok && (c.Submitted != total || c.Drained != total || c.Pending != 0 || c.Producers != producers) {
			return fmt.Errorf("counters %+v, want %d items submitted and drained, none pending, %d producers", c, total, producers)
		}
		return nil
	})
}

// Collect drains tr into a new Recorder while the goroutines of wg run
// (drainWhile), then returns the first error they sent on errc, if any, and
// checks the delivery of every producer's sent[p] handles (CheckDelivery).
// errc must have room for every error the goroutines send.
func Collect(tr pool.Transport, wg *sync.WaitGroup, errc chan error, sent []int) error {
	r := NewRecorder()
	if err := drainWhile(tr, r, wg); err != nil {
		return err
	}
	close(errc)
	for err := range errc {
		if err != nil {
			return err
		}
	}
	return CheckDelivery(r.Got, sent)
}

// drainWhile drains tr into r until the goroutines of wg are done, then
// until a drain brings nothing. If they are not done within Timeout, it
// closes tr to release them and reports the stall.
func drainWhile(tr pool.Transport, r *Recorder, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	deadline := time.Now().Add(Timeout)
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
			if time.Now().After(deadline) {
				_ = tr.Close()
				select {
				case <-done:
				case <-time.After(Timeout):
					return fmt.Errorf("producers still running after %v, %d handles delivered, and Close did not release them", Timeout, len(r.Got))
				}
				return fmt.Errorf("producers still running after %v, %d handles delivered: a lost wake-up?", Timeout, len(r.Got))
			}
		}
		if r.Drain(tr) == 0 {
			runtime.Gosched()
		}
	}
	for r.Drain(tr) > 0 {
	}
	return nil
}

// produce sends chunks chunks of 1 to 9 handles tagged (p, sequence), every
// third with TrySend, retrying what did not fit, and scribbles over each
// chunk once it is sent. It returns the handles and the items it sent.
func produce(prod pool.Producer, p, chunks int, chunked bool) (handles, items int, err error) {
	buf := make([]pool.Handle, 0, 9)
	for c := range chunks {
		buf = buf[:0]
		for k := range 1 + (c*5+p)%9 {
			buf = append(buf, Handle(p, handles+k))
		}
		if c%3 == 0 {
			for rest := buf; len(rest) > 0; {
				n, err := trySend(prod, rest)
				if err != nil && !errors.Is(err, pool.ErrFull) {
					return handles, items, err
				}
				if n > 0 && chunked {
					items++
				}
				rest = rest[n:]
				if len(rest) > 0 {
					runtime.Gosched()
				}
			}
		} else {
			if err := prod.Send(buf); err != nil {
				return handles, items, err
			}
			if chunked {
				items++
			}
		}
		handles += len(buf)
		clear(buf) // the transport must have copied the handles
	}
	if !chunked {
		items = handles
	}
	return handles, items, nil
}

// Retire makes producers one after another; each sends a few chunks
// (try-sending, and draining when the transport is full), closes, and is
// checked to refuse later sends. The owner drains once every few producers,
// so batch limits leave items of closed producers for later drains. Every
// handle is delivered exactly once and in order; the counters never go
// down and end balanced with no producers; the transport keeps no queue of
// a closed producer once it is drained.
func Retire(s Subject, producers int) error {
	return s.with(func(tr pool.Transport) error {
		r := NewRecorder()
		sent := make([]int, producers)
		var last Counts
		monotonic := func() error {
			c, ok := s.counts(tr)
			if !ok {
				return nil
			}
			if c.Submitted < last.Submitted || c.Drained < last.Drained || c.Full < last.Full ||
				c.Blocked < last.Blocked || c.Submitted < c.Drained || c.Pending != c.Submitted-c.Drained {
				return fmt.Errorf("counters went from %+v to %+v", last, c)
			}
			last = c
			return nil
		}
		for p := range producers {
			prod, err := tr.NewProducer()
			if err != nil {
				return err
			}
			for k := range 1 + p%4 {
				chunk := Seq(p, sent[p], sent[p]+1+(p+k)%5)
				for rest := chunk; len(rest) > 0; {
					n, err := trySend(prod, rest)
					if err != nil && !errors.Is(err, pool.ErrFull) {
						return fmt.Errorf("producer %d: TrySend: %w", p, err)
					}
					rest = rest[n:]
					if len(rest) > 0 {
						r.Drain(tr)
					}
				}
				sent[p] += len(chunk)
			}
			if err := prod.Close(); err != nil {
				return fmt.Errorf("producer %d: Close: %w", p, err)
			}
			if err := retired(prod); err != nil {
				return fmt.Errorf("producer %d: %w", p, err)
			}
			if p%3 == 0 {
				r.Drain(tr)
			}
			if err := monotonic(); err != nil {
				return err
			}
		}
		for r.Drain(tr) > 0 {
		}
		if err := CheckDelivery(r.Got, sent); err != nil {
			return err
		}
		if err := monotonic(); err != nil {
			return err
		}
		total := uint64(0)
		for _, n := range sent {
			total += uint64(n)
		}
		if c, ok := s.counts(tr); ok && (c.Producers != 0 || c.Pending != 0 || c.Drained != c.Submitted) {
			return fmt.Errorf("counters %+v after every producer closed and drained: want 0 producers, nothing pending", c)
		}
		return s.wantNoQueues(tr)
	})
}

// retired checks the calls of a closed producer.
func retired(p pool.Producer) error {
	if err := p.Send(Seq(0, 0, 1)); !errors.Is(err, pool.ErrClosed) {
		return fmt.Errorf("a Send after Producer.Close = %v, want pool.ErrClosed", err)
	}
	if err := p.Send(nil); !errors.Is(err, pool.ErrClosed) {
		return fmt.Errorf("Send(nil) after Producer.Close = %v, want pool.ErrClosed", err)
	}
	if n, err := trySend(p, Seq(0, 0, 1)); n != 0 || !errors.Is(err, pool.ErrClosed) {
		return fmt.Errorf("TrySend after Producer.Close = (%d, %v), want (0, pool.ErrClosed)", n, err)
	}
	if err := p.Close(); err != nil {
		return fmt.Errorf("second Producer.Close = %v, want nil", err)
	}
	return nil
}

// RetireRacing runs goroutines workers that each make rounds producers in
// turn, send a few chunks with each (blocking Send) and close it, while the
// owner drains. Every handle is delivered exactly once, each producer's in
// order; at the end no producer is counted and no queue is kept.
func RetireRacing(s Subject, workers, rounds int) error {
	return s.with(func(tr pool.Transport) error {
		sent := make([]int, workers*rounds) // producer w*rounds+i
		errc := make(chan error, workers)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := range rounds {
					id := w*rounds + i
					prod, err := tr.NewProducer()
					if err != nil {
						errc <- err
						return
					}
					for k := range 1 + id%3 {
						chunk := Seq(id, sent[id], sent[id]+1+(id+k)%7)
						if err := prod.Send(chunk); err != nil {
							errc <- fmt.Errorf("producer %d: Send: %w", id, err)
							return
						}
						sent[id] += len(chunk)
					}
					if err := prod.Close(); err != nil {
						errc <- fmt.Errorf("producer %d: Close: %w", id, err)
						return
					}
					if err := prod.Send(Seq(id, 0, 1)); !errors.Is(err, pool.ErrClosed) {
						errc <- fmt.Errorf("producer %d: Send after Close = %v, want pool.ErrClosed", id, err)
						return
					}
				}
			})
		}
		if err := Collect(tr, &wg, errc, sent); err != nil {
			return err
		}
		if c, ok := s.counts(tr); ok && (c.Producers != 0 || c.Pending != 0 || c.Submitted != c.Drained) {
			return fmt.Errorf("counters %+v, want no producers, nothing pending", c)
		}
		return s.wantNoQueues(tr)
	})
}

// CloseRace closes the transport while producers send, try-send, register
// and retire and the owner drains. Every call returns (nil, pool.ErrFull or
// pool.ErrClosed), none hangs, and every send that starts after Close has
// returned fails with pool.ErrClosed.
func CloseRace(s Subject, workers int) error {
	tr, err := s.make()
	if err != nil {
		return err
	}
	var closed atomic.Bool
	errc := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			errc <- closeRaceWorker(tr, w, &closed)
		})
	}
	r := NewRecorder()
	for range 200 {
		r.Drain(tr)
		runtime.Gosched()
	}
	if err := tr.Close(); err != nil {
		return fmt.Errorf("closing: %w", err)
	}
	closed.Store(true)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(Timeout):
		return errors.New("a producer still runs long after Close")
	}
	close(errc)
	for err := range errc {
		if err != nil {
			return err
		}
	}
	return nil
}

// closeRaceWorker registers up to 32 producers in turn, closing every other
// one, and then keeps sending with the last, until its calls fail with
// pool.ErrClosed after closed is set. After 4096 sends it only waits for
// Close and checks that a send then fails: an unbounded transport would
// otherwise take all the memory the owner does not drain.
func closeRaceWorker(tr pool.Transport, w int, closed *atomic.Bool) error {
	ok := func(err error) bool {
		return err == nil || errors.Is(err, pool.ErrFull) || errors.Is(err, pool.ErrClosed)
	}
	chunk := Seq(w, 0, 5)
	var prod pool.Producer
	for i := 0; ; i++ {
		if i < 32 {
			after := closed.Load() // Close had returned before this call
			p, err := tr.NewProducer()
			if err != nil {
				if !errors.Is(err, pool.ErrClosed) {
					return fmt.Errorf("NewProducer racing Close = %v", err)
				}
				return nil
			}
			if after {
				return errors.New("NewProducer succeeded after Close returned")
			}
			if prod != nil && i%2 == 0 {
				if err := prod.Close(); err != nil {
					return fmt.Errorf("Producer.Close racing Close = %v", err)
				}
			}
			prod = p
		}
		tp, _ := prod.(pool.TryProducer)
		for k := range 8 {
			after := closed.Load()
			var err error
			if tp != nil && k%2 == 1 {
				_, err = tp.TrySend(chunk)
			} else {
				err = prod.Send(chunk)
			}
			if !ok(err) {
				return fmt.Errorf("send racing Close = %v", err)
			}
			if after && !errors.Is(err, pool.ErrClosed) {
				return fmt.Errorf("send after Close returned = %v, want pool.ErrClosed", err)
			}
			if errors.Is(err, pool.ErrClosed) {
				return prod.Close()
			}
		}
		if i >= 32 {
			runtime.Gosched() // an unbounded transport never makes us wait
		}
		if i == 512 {
			for !closed.Load() {
				runtime.Gosched()
			}
			if err := prod.Send(chunk); !errors.Is(err, pool.ErrClosed) {
				return fmt.Errorf("send after Close returned = %v, want pool.ErrClosed", err)
			}
			return prod.Close()
		}
	}
}
