package shared_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/internal/race"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/shared"
)

func TestNew(t *testing.T) {
	for _, c := range []struct {
		name    string
		opts    []shared.Option
		ok      bool
		capa    int
		batch   int
		wantErr string
	}{
		{name: "defaults", ok: true, capa: 1024, batch: 64},
		{name: "record", opts: []shared.Option{shared.WithCapacity(256), shared.WithBatch(8)}, ok: true, capa: 256, batch: 8},
		{name: "smallest", opts: []shared.Option{shared.WithCapacity(1), shared.WithBatch(1)}, ok: true, capa: 1, batch: 1},
		{name: "batch over capacity", opts: []shared.Option{shared.WithCapacity(4), shared.WithBatch(100)}, ok: true, capa: 4, batch: 100},
		{name: "last option wins", opts: []shared.Option{shared.WithCapacity(0), shared.WithCapacity(8)}, ok: true, capa: 8, batch: 64},
		{name: "zero capacity", opts: []shared.Option{shared.WithCapacity(0)}, wantErr: "capacity 0"},
		{name: "negative capacity", opts: []shared.Option{shared.WithCapacity(-1)}, wantErr: "capacity -1"},
		{name: "capacity too large", opts: []shared.Option{shared.WithCapacity(shared.MaxCapacity + 1)}, wantErr: "capacity"},
		{name: "zero batch", opts: []shared.Option{shared.WithBatch(0)}, wantErr: "batch 0"},
		{name: "negative batch", opts: []shared.Option{shared.WithBatch(-3)}, wantErr: "batch -3"},
		{name: "nil option", opts: []shared.Option{nil}, wantErr: "nil option"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, err := shared.New(c.opts...)
			if !c.ok {
				if !errors.Is(err, pool.ErrInvalidConfig) || tr != nil {
					t.Fatalf("New = %v, %v; want nil and an error wrapping pool.ErrInvalidConfig", tr, err)
				}
				if !strings.Contains(err.Error(), c.wantErr) {
					t.Errorf("error %q does not mention %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			want := pool.Bounds{Capacity: c.capa, Batch: c.batch}
			if got := tr.Bounds(); got != want {
				t.Errorf("Bounds() = %+v, want %+v", got, want)
			}
			if st := tr.Stats(); st.Capacity != c.capa || st.Batch != c.batch {
				t.Errorf("Stats() = %+v, want capacity %d batch %d", st, c.capa, c.batch)
			}
		})
	}
}

func TestTrySendFull(t *testing.T) {
	tr := mustNew(t, shared.WithCapacity(4), shared.WithBatch(4))
	prod := mustProducer(t, tr)
	hs := seq(0, 6)
	if n, err := prod.TrySend(hs); n != 4 || !errors.Is(err, pool.ErrFull) {
		t.Fatalf("TrySend of 6 into 4 = (%d, %v), want (4, pool.ErrFull)", n, err)
	}
	if n, err := prod.TrySend(hs[4:]); n != 0 || !errors.Is(err, pool.ErrFull) {
		t.Fatalf("TrySend into a full queue = (%d, %v), want (0, pool.ErrFull)", n, err)
	}
	if n, err := prod.TrySend(nil); n != 0 || err != nil {
		t.Fatalf("TrySend(nil) = (%d, %v), want (0, nil)", n, err)
	}
	wantStats(t, tr, shared.Stats{Capacity: 4, Batch: 4, Producers: 1, Submitted: 4, Pending: 4, Full: 2})

	r := newRecorder()
	tr.Drain(r.sink)
	r.want(t, hs[:4])
	if n, err := prod.TrySend(hs[4:]); n != 2 || err != nil {
		t.Fatalf("TrySend after a drain = (%d, %v), want (2, nil)", n, err)
	}
	tr.Drain(r.sink)
	r.want(t, hs)
	wantStats(t, tr, shared.Stats{Capacity: 4, Batch: 4, Producers: 1, Submitted: 6, Drained: 6, Full: 2})
}

func TestBatchLimit(t *testing.T) {
	tr := mustNew(t, shared.WithCapacity(10), shared.WithBatch(3))
	prod := mustProducer(t, tr)
	hs := seq(0, 10)
	if err := prod.Send(hs); err != nil {
		t.Fatal(err)
	}
	r := newRecorder()
	for i, want := range []int{3, 6, 9, 10, 10} {
		tr.Drain(r.sink)
		r.want(t, hs[:want])
		wantStats(t, tr, shared.Stats{Capacity: 10, Batch: 3, Producers: 1, Submitted: 10, Drained: uint64(want), Pending: uint64(10 - want)})
		if puts := min(i+1, 4); r.puts != puts {
			t.Fatalf("after %d drains: %d Put calls, want %d (one per non-empty drain)", i+1, r.puts, puts)
		}
	}
}

// TestBatchOverCapacity: with a batch larger than the capacity, one Drain
// keeps taking what producers add while it runs, one Put per queueful, up to
// the batch.
func TestBatchOverCapacity(t *testing.T) {
	tr := mustNew(t, shared.WithCapacity(2), shared.WithBatch(5))
	prod := mustProducer(t, tr)
	next := 0
	refill := func() {
		n, _ := prod.TrySend(seq(next, next+2))
		next += n
	}
	refill()
	r := newRecorder()
	r.onPut = refill // the owner refills the queue from inside the sink
	tr.Drain(r.sink)
	r.want(t, seq(0, 5))
	if !slices.Equal(r.sizes, []int{2, 2, 1}) {
		t.Fatalf("Put sizes %v, want [2 2 1]", r.sizes)
	}
}

func TestSendWaitsForOwner(t *testing.T) {
	// A chunk larger than the whole queue goes through as the owner drains.
	tr := mustNew(t, shared.WithCapacity(4), shared.WithBatch(3))
	prod := mustProducer(t, tr)
	hs := seq(0, 100)
	done := make(chan error, 1)
	go func() { done <- prod.Send(hs) }()
	r := newRecorder()
	deadline := time.Now().Add(10 * time.Second)
	for r.total() < len(hs) && time.Now().Before(deadline) {
		tr.Drain(r.sink)
		runtime.Gosched()
	}
	if err := <-done; err != nil {
		t.Fatalf("Send: %v", err)
	}
	r.want(t, hs)
	st := tr.Stats()
	if st.Blocked == 0 || st.Submitted != 100 || st.Drained != 100 || st.Pending != 0 || st.Full != 0 {
		t.Fatalf("Stats() = %+v, want Blocked > 0, 100 submitted and drained, none pending or full", st)
	}
}

func TestCloseReleasesBlockedSend(t *testing.T) {
	tr := mustNew(t, shared.WithCapacity(2))
	prods := []pool.TryProducer{mustProducer(t, tr), mustProducer(t, tr), mustProducer(t, tr)}
	if err := prods[0].Send(seq(0, 2)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2)
	for _, p := range prods[1:] {
		go func() { done <- p.Send(seq(10, 13)) }()
	}
	waitUntil(t, func() bool { return tr.Stats().Blocked == 2 })
	if err := tr.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for range 2 {
		select {
		case err := <-done:
			if !errors.Is(err, pool.ErrClosed) {
				t.Fatalf("blocked Send returned %v, want pool.ErrClosed", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Close did not release a blocked Send")
		}
	}
	if err := prods[0].Send(seq(0, 1)); !errors.Is(err, pool.ErrClosed) {
		t.Errorf("Send after Close = %v, want pool.ErrClosed", err)
	}
	if err := prods[0].Send(nil); !errors.Is(err, pool.ErrClosed) {
		t.Errorf("Send(nil) after Close = %v, want pool.ErrClosed", err)
	}
	if n, err := prods[0].TrySend(seq(0, 1)); n != 0 || !errors.Is(err, pool.ErrClosed) {
		t.Errorf("TrySend after Close = (%d, %v), want (0, pool.ErrClosed)", n, err)
	}
	if _, err := tr.NewProducer(); !errors.Is(err, pool.ErrClosed) {
		t.Errorf("NewProducer after Close = %v, want pool.ErrClosed", err)
	}
	r := newRecorder()
	tr.Drain(r.sink)
	if r.total() != 0 {
		t.Errorf("Drain after Close delivered %d handles", r.total())
	}
	if err := tr.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestManyProducers: more producers than the queue holds, sending and
// try-sending chunks of every size, racing the owner: every handle arrives
// exactly once, each producer's in order, and the counters balance.
func TestManyProducers(t *testing.T) {
	for _, c := range []struct{ capacity, batch, producers, handles int }{
		{4, 2, 16, 300},
		{1, 1, 8, 200},
		{64, 64, 4, 2000},
		{16, 100, 8, 500},
	} {
		t.Run(fmt.Sprintf("capacity=%d/batch=%d/producers=%d", c.capacity, c.batch, c.producers), func(t *testing.T) {
			tr := mustNew(t, shared.WithCapacity(c.capacity), shared.WithBatch(c.batch))
			r := newRecorder()
			var wg sync.WaitGroup
			errc := make(chan error, c.producers)
			for p := range c.producers {
				prod := mustProducer(t, tr)
				wg.Go(func() { errc <- produce(prod, p, c.handles) })
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			for running := true; running; {
				select {
				case <-done:
					running = false
				default:
				}
				if r.drain(tr) == 0 {
					runtime.Gosched()
				}
			}
			close(errc)
			for err := range errc {
				if err != nil {
					t.Fatal(err)
				}
			}
			for r.drain(tr) > 0 {
			}
			checkDelivery(t, r.got, c.producers, c.handles)
			st := tr.Stats()
			total := uint64(c.producers * c.handles)
			if st.Submitted != total || st.Drained != total || st.Pending != 0 || st.Producers != c.producers {
				t.Fatalf("Stats() = %+v, want %d submitted and drained, none pending, %d producers", st, total, c.producers)
			}
		})
	}
}

// produce sends handles (producer p, sequence 0..n-1) in chunks of 1 to 9,
// every third chunk with TrySend, retrying what did not fit.
func produce(prod pool.TryProducer, p, n int) error {
	buf := make([]pool.Handle, 0, 9)
	for s, c := 0, 0; s < n; c++ {
		buf = buf[:0]
		for k := 0; k < 1+(c*5+p)%9 && s+k < n; k++ {
			buf = append(buf, mkHandle(p, s+k))
		}
		if c%3 == 0 {
			for rest := buf; len(rest) > 0; {
				m, err := prod.TrySend(rest)
				if err != nil && !errors.Is(err, pool.ErrFull) {
					return err
				}
				rest = rest[m:]
				if len(rest) > 0 {
					runtime.Gosched()
				}
			}
		} else if err := prod.Send(buf); err != nil {
			return err
		}
		s += len(buf)
		clear(buf) // the transport must have copied the handles
	}
	return nil
}

// TestPublishedBeforeDrain: a handle whose Send returned before a Drain
// started is delivered by that Drain (its batch covers the whole queue),
// even while other producers race for the slots around it.
func TestPublishedBeforeDrain(t *testing.T) {
	const capacity = 32
	tr := mustNew(t, shared.WithCapacity(capacity), shared.WithBatch(capacity))
	rounds := 3000
	if race.Enabled {
		rounds = 500
	}
	var wg sync.WaitGroup
	for p := 1; p <= 2; p++ {
		prod := mustProducer(t, tr)
		wg.Go(func() {
			buf := []pool.Handle{mkHandle(p, 0), mkHandle(p, 1), mkHandle(p, 2)}
			for prod.Send(buf) == nil {
			}
		})
	}
	probe := mustProducer(t, tr)
	start, sent := make(chan int), make(chan error)
	go func() {
		for i := range start {
			sent <- probe.Send([]pool.Handle{mkHandle(0, i)})
		}
	}()
	var want pool.Handle
	seen := false
	sink := pool.NewSink(func(chunk []pool.Handle) {
		for _, h := range chunk {
			if h == want {
				seen = true
			}
		}
	})
	for i := range rounds {
		want, seen = mkHandle(0, i), false
		start <- i
		for waiting := true; waiting; {
			select {
			case err := <-sent:
				if err != nil {
					t.Fatal(err)
				}
				waiting = false
			default:
				tr.Drain(sink) // make room for the probe
			}
		}
		if !seen {
			tr.Drain(sink)
			if !seen {
				t.Fatalf("round %d: the probe's Send returned, yet the next Drain did not deliver it", i)
			}
		}
	}
	close(start)
	_ = tr.Close() // releases the racing producers
	wg.Wait()
}

// TestPool frees blocks of a real pool from worker goroutines through a small
// queue while the owner allocates and drains.
func TestPool(t *testing.T) {
	const blocks, workers = 64, 4
	b, err := heap.New(64, blocks)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.New(b, mustNew(t, shared.WithCapacity(8), shared.WithBatch(4)), lifo.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	rounds := 400
	if race.Enabled {
		rounds = 100
	}
	jobs := make(chan []pool.Handle, blocks)
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := range workers {
		s, err := p.NewSender()
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for hs := range jobs {
				var err error
				if w%2 == 0 {
					err = s.FreeChunk(hs)
				} else {
					for rest := hs; len(rest) > 0 && err == nil; {
						var n int
						n, err = s.TryFreeChunk(rest)
						rest = rest[n:]
						if errors.Is(err, pool.ErrFull) {
							err = nil
							runtime.Gosched()
						}
					}
				}
				if err != nil {
					errc <- err
					return
				}
			}
		})
	}
	allocated := 0
	for i := 0; i < rounds; {
		if _, err := p.Drain(); err != nil {
			t.Fatal(err)
		}
		hs := make([]pool.Handle, 1+i%7)
		if err := p.AllocChunk(hs); errors.Is(err, pool.ErrExhausted) {
			runtime.Gosched()
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		for _, h := range hs {
			buf, err := p.Bytes(h)
			if err != nil {
				t.Fatal(err)
			}
			buf[0] = byte(i) // the worker's free hands the block back
		}
		jobs <- hs
		allocated += len(hs)
		i++
	}
	close(jobs)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for running := true; running || p.Stats().Live > 0; {
		select {
		case <-done:
			running = false
		case err := <-errc:
			t.Fatal(err)
		default:
		}
		if n, err := p.Drain(); err != nil {
			t.Fatal(err)
		} else if n == 0 {
			runtime.Gosched()
		}
	}
	st := p.Stats()
	if st.Live != 0 || st.Allocs != uint64(allocated) || st.RemoteSubmitted != uint64(allocated) ||
		st.RemoteDrained != st.RemoteSubmitted || st.Rejected != 0 {
		t.Fatalf("pool Stats() = %+v, want all %d blocks back, submitted = drained, none rejected", st, allocated)
	}
	if ts := p.Transport().Stats(); ts.Submitted != uint64(allocated) || ts.Drained != ts.Submitted || ts.Pending != 0 {
		t.Fatalf("transport Stats() = %+v, want %d submitted and drained", ts, allocated)
	}
}

func TestZeroAllocs(t *testing.T) {
	if race.Enabled {
		t.Skip("the race runtime allocates")
	}
	tr := mustNew(t)
	prod := mustProducer(t, tr)
	chunk := seq(0, 16)
	sink := pool.NewSink(func([]pool.Handle) {})
	var sendErr error
	round := func() {
		if err := prod.Send(chunk); err != nil {
			sendErr = err
		}
		if _, err := prod.TrySend(chunk); err != nil {
			sendErr = err
		}
		tr.Drain(sink)
	}
	if a := testing.AllocsPerRun(100, round); a != 0 || sendErr != nil {
		t.Fatalf("Send+TrySend+Drain: %v allocs per run, error %v; want 0, nil", a, sendErr)
	}
	full := mustNew(t, shared.WithCapacity(1))
	fp := mustProducer(t, full)
	if _, err := fp.TrySend(chunk[:1]); err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(100, func() { _, _ = fp.TrySend(chunk) }); a != 0 {
		t.Fatalf("TrySend into a full queue: %v allocs per run, want 0", a)
	}
}

// TestZeroTransport: a Transport not made by New refuses producers instead of
// panicking, and its other methods do nothing.
func TestZeroTransport(t *testing.T) {
	var tr shared.Transport
	if _, err := tr.NewProducer(); !errors.Is(err, pool.ErrInvalidConfig) {
		t.Fatalf("NewProducer on a zero Transport = %v, want pool.ErrInvalidConfig", err)
	}
	tr.Drain(pool.NewSink(func([]pool.Handle) { t.Error("delivered from a zero Transport") }))
	_ = tr.Stats()
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.NewProducer(); !errors.Is(err, pool.ErrClosed) {
		t.Fatalf("NewProducer after Close = %v, want pool.ErrClosed", err)
	}
}

// Helpers.

func mustProducer(t testing.TB, tr *shared.Transport) pool.TryProducer {
	t.Helper()
	p, err := tr.NewProducer()
	if err != nil {
		t.Fatal(err)
	}
	return p.(pool.TryProducer)
}

// mkHandle tags a handle with (producer, sequence) as its index and
// generation, through the public encoding; transports do not validate.
func mkHandle(p, s int) pool.Handle {
	var b [pool.HandleSize]byte
	binary.LittleEndian.PutUint64(b[:], uint64(s))
	binary.LittleEndian.PutUint32(b[8:], uint32(p))
	binary.LittleEndian.PutUint32(b[12:], 1)
	var h pool.Handle
	if err := h.UnmarshalBinary(b[:]); err != nil {
		panic(err)
	}
	return h
}

// seq returns handles (0, from) .. (0, to-1).
func seq(from, to int) []pool.Handle {
	hs := make([]pool.Handle, 0, to-from)
	for s := from; s < to; s++ {
		hs = append(hs, mkHandle(0, s))
	}
	return hs
}

type recorder struct {
	got   []pool.Handle
	sizes []int
	puts  int
	onPut func()
	sink  *pool.Sink
}

func newRecorder() *recorder {
	r := &recorder{}
	r.sink = pool.NewSink(func(chunk []pool.Handle) {
		r.got = append(r.got, chunk...)
		r.sizes = append(r.sizes, len(chunk))
		r.puts++
		if r.onPut != nil {
			r.onPut()
		}
	})
	return r
}

func (r *recorder) total() int { return len(r.got) }

// drain drains once and returns how many handles it delivered.
func (r *recorder) drain(tr *shared.Transport) int {
	before := len(r.got)
	tr.Drain(r.sink)
	return len(r.got) - before
}

func (r *recorder) want(t *testing.T, hs []pool.Handle) {
	t.Helper()
	if !slices.Equal(r.got, hs) {
		t.Fatalf("delivered %v, want %v", r.got, hs)
	}
}

// checkDelivery checks that got holds, for every producer, its handles
// 0..n-1 exactly once and in order.
func checkDelivery(t *testing.T, got []pool.Handle, producers, n int) {
	t.Helper()
	next := make([]int, producers)
	for _, h := range got {
		p, s := h.Index(), int(h.Generation())
		if p >= producers || s != next[p] {
			t.Fatalf("delivered %v; producer %d's next handle should be %d (lost, duplicated or reordered)", h, p, next[p])
		}
		next[p]++
	}
	for p, s := range next {
		if s != n {
			t.Fatalf("producer %d: %d of %d handles delivered", p, s, n)
		}
	}
}

func wantStats(t *testing.T, tr *shared.Transport, want shared.Stats) {
	t.Helper()
	if got := tr.Stats(); got != want {
		t.Fatalf("Stats() = %+v, want %+v", got, want)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(100 * time.Microsecond)
	}
}
