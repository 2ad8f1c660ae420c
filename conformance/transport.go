package conformance

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"

	"github.com/locus-go/locus/internal/race"
	"github.com/locus-go/locus/pool"
)

// TestTransport runs the transport suite: every handle a producer sends is
// delivered by the owner's drains exactly once, in the order that producer
// sent it, also with many producers racing the owner; a chunk is copied, so a
// producer may reuse it at once; Close releases blocked producers and fails
// later sends; Send and Drain allocate nothing in steady state. A transport
// that implements pool.BoundedTransport is also checked against its bounds.
// newT is called once per case.
func TestTransport(t *testing.T, newT func(t *testing.T) pool.Transport) {
	t.Helper()
	transportSuite().runT(t, newT)
}

// CheckTransport runs the transport suite outside go test and returns every
// violation found.
func CheckTransport(newT func() (pool.Transport, error)) error {
	return transportSuite().runCheck(newT)
}

func transportSuite() suite[pool.Transport] {
	return suite[pool.Transport]{
		cases:   transportCases,
		abort:   func(tr pool.Transport) { _ = tr.Close() },
		release: func(tr pool.Transport) { _ = tr.Close() },
	}
}

var transportCases = []testCase[pool.Transport]{
	{
		name:        "DrainEmpty",
		explanation: "a drain with nothing sent delivers nothing",
		run: func(ctx context.Context, tr pool.Transport) error {
			r := newRecorder()
			tr.Drain(r.sink)
			if _, err := tr.NewProducer(); err != nil {
				return violationf(ErrContract, "NewProducer: %v", err)
			}
			tr.Drain(r.sink)
			if r.total() != 0 {
				return violationf(ErrDuplicated, "delivered %d handles, none were sent", r.total())
			}
			return nil
		},
	},
	{
		name:        "DeliverInOrder",
		explanation: "one producer's handles are delivered exactly once, in the order sent",
		run: func(ctx context.Context, tr pool.Transport) error {
			return exchange(ctx, tr, 1, 40)
		},
	},
	{
		name:        "ChunkCopied",
		explanation: "Send copies the chunk: the producer may overwrite it as soon as Send returns",
		run:         checkCopied,
	},
	{
		name:        "EmptyChunk",
		explanation: "sending an empty chunk succeeds and delivers nothing",
		run: func(ctx context.Context, tr pool.Transport) error {
			prod, err := tr.NewProducer()
			if err != nil {
				return violationf(ErrContract, "NewProducer: %v", err)
			}
			if err := prod.Send(nil); err != nil {
				return violationf(ErrContract, "Send(nil) = %v, want nil", err)
			}
			if err := prod.Send([]pool.Handle{}); err != nil {
				return violationf(ErrContract, "Send(empty) = %v, want nil", err)
			}
			r := newRecorder()
			tr.Drain(r.sink)
			if r.total() != 0 {
				return violationf(ErrDuplicated, "delivered %d handles for empty chunks", r.total())
			}
			return nil
		},
	},
	{
		name:        "ExactlyOnceConcurrent",
		explanation: "with producers racing each other and the owner's drains, every handle is delivered exactly once and each producer's in order",
		run: func(ctx context.Context, tr pool.Transport) error {
			return exchange(ctx, tr, 4, 300)
		},
	},
	{
		name:        "ManyProducers",
		explanation: "more producers than a bounded queue holds still deliver everything exactly once, with no deadlock",
		run: func(ctx context.Context, tr pool.Transport) error {
			n := 16
			if b, ok := tr.(pool.BoundedTransport); ok {
				n = min(b.Bounds().Capacity+3, 64)
			}
			return exchange(ctx, tr, n, 30)
		},
	},
	{
		name:        "Close",
		explanation: "after Close, Send fails with pool.ErrClosed, a producer blocked on a full transport returns, and Close may be called again",
		run:         checkTransportClose,
	},
	{
		name:        "ZeroAllocs",
		explanation: "in steady state, Send of a chunk and the Drain that delivers it allocate nothing",
		run: func(ctx context.Context, tr pool.Transport) error {
			if race.Enabled {
				return nil // the race runtime allocates; see the package doc
			}
			prod, err := tr.NewProducer()
			if err != nil {
				return violationf(ErrContract, "NewProducer: %v", err)
			}
			chunk := make([]pool.Handle, 16)
			if b, ok := tr.(pool.BoundedTransport); ok && !b.Bounds().Chunked {
				chunk = chunk[:min(16, b.Bounds().Capacity, b.Bounds().Batch)]
			}
			for i := range chunk {
				chunk[i] = mkHandle(1, uint32(i), 1)
			}
			sink := pool.NewSink(func([]pool.Handle) {})
			var sendErr error
			round := func() {
				if err := prod.Send(chunk); err != nil {
					sendErr = err
				}
				tr.Drain(sink)
			}
			for range 10 {
				round()
			}
			allocs := testing.AllocsPerRun(200, round)
			if sendErr != nil {
				return violationf(ErrContract, "Send: %v", sendErr)
			}
			if allocs != 0 {
				return violationf(ErrAllocs, "Send+Drain of a %d-handle chunk: %v allocs, want 0", len(chunk), allocs)
			}
			return nil
		},
	},
	{
		name:        "Bounds",
		explanation: "a bounded transport reports positive bounds and its producers can refuse to wait (pool.TryProducer)",
		run: func(ctx context.Context, tr pool.Transport) error {
			b, ok := tr.(pool.BoundedTransport)
			if !ok {
				return nil
			}
			bd := b.Bounds()
			if bd.Capacity <= 0 || bd.Batch <= 0 {
				return violationf(ErrContract, "Bounds() = %+v, want positive capacity and batch", bd)
			}
			prod, err := tr.NewProducer()
			if err != nil {
				return violationf(ErrContract, "NewProducer: %v", err)
			}
			if _, ok := prod.(pool.TryProducer); !ok {
				return violationf(ErrContract, "producer %T of a bounded transport is not a pool.TryProducer", prod)
			}
			return nil
		},
	},
	{
		name:        "FullQueue",
		explanation: "TrySend into a full bounded transport publishes exactly what fits, reports pool.ErrFull, and everything it published is delivered",
		run:         checkFull,
	},
	{
		name:        "BatchLimit",
		explanation: "one Drain takes at most the batch limit of items from each queue",
		run:         checkBatch,
	},
}

// recorder is a test sink that records every delivered handle, in order.
type recorder struct {
	mu   sync.Mutex
	got  []pool.Handle
	sink *pool.Sink
	puts int
}

func newRecorder() *recorder {
	r := &recorder{}
	r.sink = pool.NewSink(func(chunk []pool.Handle) {
		r.mu.Lock()
		r.got = append(r.got, chunk...)
		r.puts++
		r.mu.Unlock()
	})
	return r
}

func (r *recorder) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// exchange runs producers goroutines, each sending chunks chunks of 1 to 33
// handles, while the owner drains, then checks exactly-once, in-order
// delivery. Handle (producer p, sequence s) is encoded as index p,
// generation s.
func exchange(ctx context.Context, tr pool.Transport, producers, chunks int) error {
	r := newRecorder()
	sent := make([]int, producers)
	errs := make(chan error, producers)
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			prod, err := tr.NewProducer()
			if err != nil {
				errs <- violationf(ErrContract, "NewProducer: %v", err)
				return
			}
			seq := uint64(0)
			buf := make([]pool.Handle, 0, 33)
			for c := range chunks {
				buf = buf[:0]
				for range 1 + (c*7+p*3)%33 {
					buf = append(buf, mkHandle(1, uint32(p), seq))
					seq++
				}
				if err := prod.Send(buf); err != nil {
					errs <- violationf(ErrContract, "producer %d Send: %v", p, err)
					return
				}
				if ctx.Err() != nil {
					return
				}
			}
			sent[p] = int(seq)
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	// The owner drains until the producers are done, then once more.
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		case <-ctx.Done():
			return violationf(ErrDeadlock, "producers still sending; %d handles delivered so far", r.total())
		default:
			runtime.Gosched() // let producers run on small machines
		}
		tr.Drain(r.sink)
	}
	close(errs)
	for err := range errs {
		return err
	}
	// Every Send has returned, so everything is published: drain until a
	// drain finds nothing (bounded transports take a batch at a time).
	drainDry(tr, r)
	return checkDelivery(r.got, sent)
}

// checkCopied sends a chunk, overwrites it at once, and checks that the
// drain delivers what was sent, not the overwrite.
func checkCopied(ctx context.Context, tr pool.Transport) error {
	prod, err := tr.NewProducer()
	if err != nil {
		return violationf(ErrContract, "NewProducer: %v", err)
	}
	n := 8
	if b, ok := tr.(pool.BoundedTransport); ok && !b.Bounds().Chunked {
		n = min(n, b.Bounds().Capacity)
	}
	chunk := handles(n)
	if err := prod.Send(chunk); err != nil {
		return violationf(ErrContract, "Send: %v", err)
	}
	for i := range chunk {
		chunk[i] = mkHandle(1, 1<<20, 0) // no producer sent this
	}
	r := newRecorder()
	drainDry(tr, r)
	return checkDelivery(r.got, []int{n})
}

// drainDry drains until a drain delivers nothing.
func drainDry(tr pool.Transport, r *recorder) {
	for {
		before := r.total()
		tr.Drain(r.sink)
		if r.total() == before {
			return
		}
	}
}

// checkDelivery checks that got holds, for every producer p, exactly the
// sequence 0..sent[p]-1 in order.
func checkDelivery(got []pool.Handle, sent []int) error {
	next := make([]uint64, len(sent))
	for _, h := range got {
		p := h.Index()
		if p >= len(sent) {
			return violationf(ErrAliased, "delivered %v, which no producer sent (was the chunk aliased instead of copied?)", h)
		}
		switch s := h.Generation(); {
		case s < next[p]:
			return violationf(ErrDuplicated, "producer %d's handle %d delivered twice (or out of order after a duplicate)", p, s)
		case s >= uint64(sent[p]):
			return violationf(ErrDuplicated, "producer %d's handle %d delivered, but it sent only %d", p, s, sent[p])
		case s > next[p]:
			return violationf(ErrLost, "producer %d: handle %d delivered while %d never was (lost or reordered)", p, s, next[p])
		}
		next[p]++
	}
	for p, n := range next {
		if n != uint64(sent[p]) {
			return violationf(ErrLost, "producer %d: %d of %d handles delivered", p, n, sent[p])
		}
	}
	return nil
}

func checkTransportClose(ctx context.Context, tr pool.Transport) error {
	prod, err := tr.NewProducer()
	if err != nil {
		return violationf(ErrContract, "NewProducer: %v", err)
	}
	// Fill a bounded transport, then block a producer on it.
	blocked := make(chan error, 1)
	if b, ok := tr.(pool.BoundedTransport); ok {
		if tp, ok := prod.(pool.TryProducer); ok {
			fill := handles(b.Bounds().Capacity + 1)
			for i := 0; i < b.Bounds().Capacity+1; i++ {
				if _, err := tp.TrySend(fill[:1]); err != nil {
					break
				}
			}
			go func() { blocked <- prod.Send(fill[:1]) }()
		}
	}
	if err := tr.Close(); err != nil {
		return violationf(ErrContract, "Close: %v", err)
	}
	if err := prod.Send(handles(1)); !errors.Is(err, pool.ErrClosed) {
		return violationf(ErrContract, "Send after Close = %v, want pool.ErrClosed", err)
	}
	_ = tr.Close() // a second Close must not panic
	if _, ok := tr.(pool.BoundedTransport); ok {
		select {
		case err := <-blocked:
			if err != nil && !errors.Is(err, pool.ErrClosed) {
				return violationf(ErrContract, "blocked Send returned %v, want nil or pool.ErrClosed", err)
			}
		case <-ctx.Done():
			return violationf(ErrDeadlock, "a producer blocked on a full transport was not released by Close")
		}
	}
	return nil
}

func checkFull(ctx context.Context, tr pool.Transport) error {
	b, ok := tr.(pool.BoundedTransport)
	if !ok {
		return nil
	}
	bd := b.Bounds()
	prod, err := tr.NewProducer()
	if err != nil {
		return violationf(ErrContract, "NewProducer: %v", err)
	}
	tp, ok := prod.(pool.TryProducer)
	if !ok {
		return violationf(ErrContract, "producer %T is not a pool.TryProducer", prod)
	}
	var want []pool.Handle
	seq := uint64(0)
	if bd.Chunked {
		// Capacity chunks of two handles fit; the next chunk does not.
		for i := 0; i <= bd.Capacity; i++ {
			chunk := []pool.Handle{mkHandle(1, 0, seq), mkHandle(1, 0, seq+1)}
			n, err := tp.TrySend(chunk)
			switch {
			case i < bd.Capacity && (n != 2 || err != nil):
				return violationf(ErrContract, "TrySend of chunk %d of %d = (%d, %v), want (2, nil)", i+1, bd.Capacity, n, err)
			case i == bd.Capacity && (n != 0 || !errors.Is(err, pool.ErrFull)):
				return violationf(ErrContract, "TrySend into a full chunk queue = (%d, %v), want (0, pool.ErrFull)", n, err)
			}
			if err == nil {
				want = append(want, chunk...)
				seq += 2
			}
		}
	} else {
		chunk := make([]pool.Handle, bd.Capacity+5)
		for i := range chunk {
			chunk[i] = mkHandle(1, 0, uint64(i))
		}
		n, err := tp.TrySend(chunk)
		if n != bd.Capacity || !errors.Is(err, pool.ErrFull) {
			return violationf(ErrContract, "TrySend of %d handles into an empty queue of %d = (%d, %v), want (%d, pool.ErrFull)",
				len(chunk), bd.Capacity, n, err, bd.Capacity)
		}
		want = chunk[:n]
	}
	r := newRecorder()
	drainDry(tr, r)
	return checkDelivery(r.got, []int{len(want)})
}

func checkBatch(ctx context.Context, tr pool.Transport) error {
	b, ok := tr.(pool.BoundedTransport)
	if !ok {
		return nil
	}
	bd := b.Bounds()
	prod, err := tr.NewProducer()
	if err != nil {
		return violationf(ErrContract, "NewProducer: %v", err)
	}
	tp, ok := prod.(pool.TryProducer)
	if !ok {
		return violationf(ErrContract, "producer %T is not a pool.TryProducer", prod)
	}
	// Fill the queue, one handle per item.
	items := 0
	for i := 0; i < bd.Capacity; i++ {
		if n, _ := tp.TrySend([]pool.Handle{mkHandle(1, 0, uint64(i))}); n != 1 {
			break
		}
		items++
	}
	r := newRecorder()
	tr.Drain(r.sink)
	got := r.total()
	if got > bd.Batch {
		return violationf(ErrContract, "one Drain delivered %d items from one queue, batch limit %d", got, bd.Batch)
	}
	if items > 0 && got == 0 {
		return violationf(ErrLost, "one Drain delivered nothing from a queue holding %d items", items)
	}
	drainDry(tr, r)
	return checkDelivery(r.got, []int{items})
}

func handles(n int) []pool.Handle {
	hs := make([]pool.Handle, n)
	for i := range hs {
		hs[i] = mkHandle(1, 0, uint64(i))
	}
	return hs
}
