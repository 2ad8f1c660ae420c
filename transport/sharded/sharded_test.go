package sharded_test

import (
	"encoding/binary"
	"errors"
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
	"github.com/locus-go/locus/transport/sharded"
)

func TestNew(t *testing.T) {
	for _, c := range []struct {
		name    string
		opts    []sharded.Option
		want    pool.Bounds // zero: New must fail
		wantErr string
	}{
		{name: "defaults", want: pool.Bounds{Capacity: 64, Batch: 64, PerProducer: true}},
		{name: "chunk defaults", opts: []sharded.Option{sharded.WithChunks()},
			want: pool.Bounds{Capacity: 8, Batch: 8, Chunked: true, PerProducer: true}},
		{name: "record 0352 p2", opts: []sharded.Option{sharded.WithCapacity(128), sharded.WithBatch(64)},
			want: pool.Bounds{Capacity: 128, Batch: 64, PerProducer: true}},
		{name: "record 0353 chunks", opts: []sharded.Option{sharded.WithCapacity(2), sharded.WithBatch(2), sharded.WithChunks()},
			want: pool.Bounds{Capacity: 2, Batch: 2, Chunked: true, PerProducer: true}},
		{name: "chunk capacity only", opts: []sharded.Option{sharded.WithChunks(), sharded.WithCapacity(3)},
			want: pool.Bounds{Capacity: 3, Batch: 8, Chunked: true, PerProducer: true}},
		{name: "batch over capacity", opts: []sharded.Option{sharded.WithCapacity(1), sharded.WithBatch(1000)},
			want: pool.Bounds{Capacity: 1, Batch: 1000, PerProducer: true}},
		{name: "zero capacity", opts: []sharded.Option{sharded.WithCapacity(0)}, wantErr: "capacity 0"},
		{name: "zero capacity, chunks", opts: []sharded.Option{sharded.WithChunks(), sharded.WithCapacity(0)}, wantErr: "capacity 0"},
		{name: "negative capacity", opts: []sharded.Option{sharded.WithCapacity(-8)}, wantErr: "capacity -8"},
		{name: "capacity too large", opts: []sharded.Option{sharded.WithCapacity(sharded.MaxCapacity + 1)}, wantErr: "capacity"},
		{name: "zero batch", opts: []sharded.Option{sharded.WithBatch(0)}, wantErr: "batch 0"},
		{name: "negative batch, chunks", opts: []sharded.Option{sharded.WithChunks(), sharded.WithBatch(-1)}, wantErr: "batch -1"},
		{name: "nil option", opts: []sharded.Option{sharded.WithChunks(), nil}, wantErr: "nil option"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, err := sharded.New(c.opts...)
			if c.wantErr != "" {
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
			if got := tr.Bounds(); got != c.want {
				t.Errorf("Bounds() = %+v, want %+v", got, c.want)
			}
			wantStats(t, tr, sharded.Stats{Capacity: c.want.Capacity, Batch: c.want.Batch, Chunked: c.want.Chunked})
		})
	}
}

func TestTrySendFull(t *testing.T) {
	t.Run("mode=handles", func(t *testing.T) {
		tr := mustNew(t, sharded.WithCapacity(4))
		prod := mustProducer(t, tr)
		hs := seq(0, 0, 6)
		if n, err := prod.TrySend(hs); n != 4 || !errors.Is(err, pool.ErrFull) {
			t.Fatalf("TrySend of 6 into 4 = (%d, %v), want (4, pool.ErrFull)", n, err)
		}
		if n, err := prod.TrySend(hs[4:]); n != 0 || !errors.Is(err, pool.ErrFull) {
			t.Fatalf("TrySend into a full queue = (%d, %v), want (0, pool.ErrFull)", n, err)
		}
		if n, err := prod.TrySend(nil); n != 0 || err != nil {
			t.Fatalf("TrySend(nil) = (%d, %v), want (0, nil)", n, err)
		}
		wantStats(t, tr, sharded.Stats{Capacity: 4, Batch: 64, Producers: 1, Submitted: 4, Pending: 4, Full: 2})
		r := newRecorder()
		tr.Drain(r.sink)
		r.want(t, hs[:4])
		if n, err := prod.TrySend(hs[4:]); n != 2 || err != nil {
			t.Fatalf("TrySend after a drain = (%d, %v), want (2, nil)", n, err)
		}
		tr.Drain(r.sink)
		r.want(t, hs)
		wantStats(t, tr, sharded.Stats{Capacity: 4, Batch: 64, Producers: 1, Submitted: 6, Drained: 6, Full: 2})
	})
	t.Run("mode=chunks", func(t *testing.T) {
		tr := mustNew(t, sharded.WithChunks(), sharded.WithCapacity(2))
		prod := mustProducer(t, tr)
		hs := seq(0, 0, 9)
		for _, c := range [][]pool.Handle{hs[:3], hs[3:8]} {
			if n, err := prod.TrySend(c); n != len(c) || err != nil {
				t.Fatalf("TrySend of a %d-handle chunk = (%d, %v), want (%d, nil)", len(c), n, err, len(c))
			}
		}
		if n, err := prod.TrySend(hs[8:]); n != 0 || !errors.Is(err, pool.ErrFull) {
			t.Fatalf("TrySend into a full chunk queue = (%d, %v), want (0, pool.ErrFull)", n, err)
		}
		wantStats(t, tr, sharded.Stats{Capacity: 2, Batch: 8, Chunked: true, Producers: 1, Submitted: 2, Pending: 2, Full: 1})
		r := newRecorder()
		tr.Drain(r.sink)
		r.want(t, hs[:8])
		if !slices.Equal(r.sizes, []int{3, 5}) {
			t.Fatalf("Put sizes %v, want one per chunk: [3 5]", r.sizes)
		}
	})
}

// TestDrainBatchPerQueue: one Drain takes at most a batch from every queue,
// queues in the order their producers were made.
func TestDrainBatchPerQueue(t *testing.T) {
	tr := mustNew(t, sharded.WithCapacity(10), sharded.WithBatch(3))
	var all [][]pool.Handle
	for p := range 3 {
		prod := mustProducer(t, tr)
		hs := seq(p, 0, 10)
		if err := prod.Send(hs); err != nil {
			t.Fatal(err)
		}
		all = append(all, hs)
	}
	r := newRecorder()
	tr.Drain(r.sink)
	r.want(t, slices.Concat(all[0][:3], all[1][:3], all[2][:3]))
	if !slices.Equal(r.sizes, []int{3, 3, 3}) {
		t.Fatalf("Put sizes %v, want [3 3 3]", r.sizes)
	}
	wantStats(t, tr, sharded.Stats{Capacity: 10, Batch: 3, Producers: 3, Submitted: 30, Drained: 9, Pending: 21})
	for range 4 {
		tr.Drain(r.sink)
	}
	checkDelivery(t, r.got, []int{10, 10, 10})
	wantStats(t, tr, sharded.Stats{Capacity: 10, Batch: 3, Producers: 3, Submitted: 30, Drained: 30})
}

// TestRingWraps: per-handle items that wrap around the end of the ring reach
// the sink in two Puts, in order.
func TestRingWraps(t *testing.T) {
	tr := mustNew(t, sharded.WithCapacity(4))
	prod := mustProducer(t, tr)
	hs := seq(0, 0, 7)
	r := newRecorder()
	if err := prod.Send(hs[:3]); err != nil {
		t.Fatal(err)
	}
	tr.Drain(r.sink)
	if err := prod.Send(hs[3:]); err != nil {
		t.Fatal(err)
	}
	tr.Drain(r.sink)
	r.want(t, hs)
	if !slices.Equal(r.sizes, []int{3, 1, 3}) {
		t.Fatalf("Put sizes %v, want [3 1 3]", r.sizes)
	}
}

// TestChunkAnyLength: in chunk mode one item carries a chunk of any length,
// copied, so the producer may scribble over its chunk at once.
func TestChunkAnyLength(t *testing.T) {
	tr := mustNew(t, sharded.WithChunks(), sharded.WithCapacity(1))
	prod := mustProducer(t, tr)
	r := newRecorder()
	var want []pool.Handle
	for i, n := range []int{1, 1000, 3, 5000, 0, 2} {
		chunk := seq(0, len(want), len(want)+n)
		want = append(want, chunk...)
		if err := prod.Send(chunk); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
		clear(chunk)
		tr.Drain(r.sink)
	}
	r.want(t, want)
	if !slices.Equal(r.sizes, []int{1, 1000, 3, 5000, 2}) {
		t.Fatalf("Put sizes %v, want one per non-empty chunk", r.sizes)
	}
}

// TestSendWaitsForOwner: a blocking Send into a full queue parks until the
// owner drains; a per-handle chunk longer than the queue goes through.
func TestSendWaitsForOwner(t *testing.T) {
	for _, c := range []struct {
		name   string
		opts   []sharded.Option
		chunks int // chunks of 25 handles
	}{
		{"mode=handles", []sharded.Option{sharded.WithCapacity(4), sharded.WithBatch(3)}, 4},
		{"mode=chunks", []sharded.Option{sharded.WithChunks(), sharded.WithCapacity(1), sharded.WithBatch(1)}, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := mustNew(t, c.opts...)
			prod := mustProducer(t, tr)
			hs := seq(0, 0, 25*c.chunks)
			done := make(chan error, 1)
			go func() {
				for k := range c.chunks {
					if err := prod.Send(hs[25*k : 25*(k+1)]); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			r := newRecorder()
			deadline := time.Now().Add(10 * time.Second)
			for len(r.got) < len(hs) && time.Now().Before(deadline) {
				tr.Drain(r.sink)
				runtime.Gosched()
			}
			if err := <-done; err != nil {
				t.Fatalf("Send: %v", err)
			}
			r.want(t, hs)
			if st := tr.Stats(); st.Blocked == 0 || st.Pending != 0 || st.Submitted != st.Drained || st.Full != 0 {
				t.Fatalf("Stats() = %+v, want Blocked > 0, nothing pending, submitted = drained, none full", st)
			}
		})
	}
}

func TestCloseReleasesBlockedSend(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []sharded.Option
	}{
		{"mode=handles", []sharded.Option{sharded.WithCapacity(2)}},
		{"mode=chunks", []sharded.Option{sharded.WithChunks(), sharded.WithCapacity(2)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := mustNew(t, c.opts...)
			prods := []pool.TryProducer{mustProducer(t, tr), mustProducer(t, tr)}
			for _, p := range prods {
				for {
					if n, _ := p.TrySend(seq(0, 0, 1)); n == 0 {
						break // full
					}
				}
			}
			done := make(chan error, 2)
			for _, p := range prods {
				go func() { done <- p.Send(seq(0, 0, 3)) }()
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
			if err := prods[0].Send(seq(0, 0, 1)); !errors.Is(err, pool.ErrClosed) {
				t.Errorf("Send after Close = %v, want pool.ErrClosed", err)
			}
			if err := prods[0].Send(nil); !errors.Is(err, pool.ErrClosed) {
				t.Errorf("Send(nil) after Close = %v, want pool.ErrClosed", err)
			}
			if n, err := prods[1].TrySend(seq(0, 0, 1)); n != 0 || !errors.Is(err, pool.ErrClosed) {
				t.Errorf("TrySend after Close = (%d, %v), want (0, pool.ErrClosed)", n, err)
			}
			if _, err := tr.NewProducer(); !errors.Is(err, pool.ErrClosed) {
				t.Errorf("NewProducer after Close = %v, want pool.ErrClosed", err)
			}
			r := newRecorder()
			tr.Drain(r.sink)
			if len(r.got) != 0 {
				t.Errorf("Drain after Close delivered %d handles", len(r.got))
			}
			if err := tr.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
		})
	}
}

// TestManyProducers: producers register while the owner drains, then send
// and try-send chunks of every size, racing the owner: every handle arrives
// exactly once, each producer's in order, and the counters balance.
func TestManyProducers(t *testing.T) {
	for _, c := range []struct {
		name              string
		opts              []sharded.Option
		producers, chunks int
	}{
		{"mode=handles/capacity=1/batch=1", []sharded.Option{sharded.WithCapacity(1), sharded.WithBatch(1)}, 8, 60},
		{"mode=handles/capacity=4/batch=2", []sharded.Option{sharded.WithCapacity(4), sharded.WithBatch(2)}, 16, 60},
		{"mode=handles/defaults", nil, 4, 300},
		{"mode=chunks/capacity=1/batch=1", []sharded.Option{sharded.WithChunks(), sharded.WithCapacity(1), sharded.WithBatch(1)}, 16, 60},
		{"mode=chunks/defaults", []sharded.Option{sharded.WithChunks()}, 4, 300},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := mustNew(t, c.opts...)
			chunked := tr.Bounds().Chunked
			r := newRecorder()
			sent := make([]int, c.producers)
			items := make([]int, c.producers)
			errc := make(chan error, c.producers)
			var wg sync.WaitGroup
			for p := range c.producers {
				wg.Go(func() {
					prod, err := tr.NewProducer()
					if err != nil {
						errc <- err
						return
					}
					sent[p], items[p], err = produce(prod.(pool.TryProducer), p, c.chunks, chunked)
					errc <- err
				})
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
			checkDelivery(t, r.got, sent)
			total := uint64(0)
			for _, n := range items {
				total += uint64(n)
			}
			st := tr.Stats()
			if st.Submitted != total || st.Drained != total || st.Pending != 0 || st.Producers != c.producers {
				t.Fatalf("Stats() = %+v, want %d items submitted and drained, none pending, %d producers", st, total, c.producers)
			}
		})
	}
}

// produce sends chunks of 1 to 9 handles tagged (p, sequence), every third
// with TrySend, retrying what did not fit, and scribbles over each chunk once
// it is sent. It returns the handles and the items it sent.
func produce(prod pool.TryProducer, p, chunks int, chunked bool) (handles, items int, err error) {
	buf := make([]pool.Handle, 0, 9)
	for c := range chunks {
		buf = buf[:0]
		for k := range 1 + (c*5+p)%9 {
			buf = append(buf, mkHandle(p, handles+k))
		}
		if c%3 == 0 {
			for rest := buf; len(rest) > 0; {
				n, err := prod.TrySend(rest)
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

// TestPool frees blocks of a real pool from worker goroutines through small
// queues, in both modes, while the owner allocates and drains.
func TestPool(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []sharded.Option
	}{
		{"mode=handles", []sharded.Option{sharded.WithCapacity(4), sharded.WithBatch(2)}},
		{"mode=chunks", []sharded.Option{sharded.WithChunks(), sharded.WithCapacity(2), sharded.WithBatch(1)}},
	} {
		t.Run(c.name, func(t *testing.T) { testPool(t, mustNew(t, c.opts...)) })
	}
}

func testPool(t *testing.T, tr *sharded.Transport) {
	const blocks, workers = 64, 4
	b, err := heap.New(64, blocks)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.New(b, tr, lifo.Policy{})
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
			buf[0] = byte(i) // the worker's free hands the write back
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
	if ts := tr.Stats(); ts.Submitted != ts.Drained || ts.Pending != 0 || ts.Producers != workers {
		t.Fatalf("transport Stats() = %+v, want submitted = drained, none pending, %d producers", ts, workers)
	}
}

func TestZeroAllocs(t *testing.T) {
	if race.Enabled {
		t.Skip("the race runtime allocates")
	}
	t.Run("mode=handles", func(t *testing.T) {
		tr := mustNew(t)
		prod := mustProducer(t, tr)
		chunk := seq(0, 0, 16)
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
	})
	t.Run("mode=chunks", func(t *testing.T) {
		// Chunks of varying length: once every slot buffer has grown to
		// the largest, nothing allocates.
		tr := mustNew(t, sharded.WithChunks())
		prod := mustProducer(t, tr)
		big := seq(0, 0, 48)
		sink := pool.NewSink(func([]pool.Handle) {})
		var sendErr error
		i := 0
		round := func() {
			for range 3 {
				i++
				if err := prod.Send(big[:1+i*7%len(big)]); err != nil {
					sendErr = err
				}
			}
			if _, err := prod.TrySend(big[:i%len(big)]); err != nil {
				sendErr = err
			}
			tr.Drain(sink)
		}
		for range 10 * tr.Bounds().Capacity {
			round()
		}
		if a := testing.AllocsPerRun(100, round); a != 0 || sendErr != nil {
			t.Fatalf("Send+TrySend+Drain: %v allocs per run, error %v; want 0, nil", a, sendErr)
		}
	})
	t.Run("full", func(t *testing.T) {
		tr := mustNew(t, sharded.WithCapacity(1))
		prod := mustProducer(t, tr)
		chunk := seq(0, 0, 2)
		if a := testing.AllocsPerRun(100, func() { _, _ = prod.TrySend(chunk) }); a != 0 {
			t.Fatalf("TrySend into a full queue: %v allocs per run, want 0", a)
		}
	})
}

// TestZeroTransport: a Transport not made by New refuses producers instead of
// panicking, and its other methods do nothing.
func TestZeroTransport(t *testing.T) {
	var tr sharded.Transport
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

func mustProducer(t testing.TB, tr *sharded.Transport) pool.TryProducer {
	t.Helper()
	p, err := tr.NewProducer()
	if err != nil {
		t.Fatal(err)
	}
	return p.(*sharded.Producer)
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

// seq returns producer p's handles from .. to-1.
func seq(p, from, to int) []pool.Handle {
	hs := make([]pool.Handle, 0, to-from)
	for s := from; s < to; s++ {
		hs = append(hs, mkHandle(p, s))
	}
	return hs
}

type recorder struct {
	got   []pool.Handle
	sizes []int
	sink  *pool.Sink
}

func newRecorder() *recorder {
	r := &recorder{}
	r.sink = pool.NewSink(func(chunk []pool.Handle) {
		r.got = append(r.got, chunk...)
		r.sizes = append(r.sizes, len(chunk))
	})
	return r
}

// drain drains once and returns how many handles it delivered.
func (r *recorder) drain(tr *sharded.Transport) int {
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

// checkDelivery checks that got holds, for every producer p, its handles
// 0..sent[p]-1 exactly once and in order.
func checkDelivery(t *testing.T, got []pool.Handle, sent []int) {
	t.Helper()
	next := make([]int, len(sent))
	for _, h := range got {
		p, s := h.Index(), int(h.Generation())
		if p >= len(sent) || s != next[p] {
			t.Fatalf("delivered %v; producer %d's next handle should be %d (lost, duplicated or reordered)", h, p, next[min(p, len(sent)-1)])
		}
		next[p]++
	}
	for p, s := range next {
		if s != sent[p] {
			t.Fatalf("producer %d: %d of %d handles delivered", p, s, sent[p])
		}
	}
}

func wantStats(t *testing.T, tr *sharded.Transport, want sharded.Stats) {
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
