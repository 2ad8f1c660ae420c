package sharded_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/locus-go/locus/internal/race"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/internal/transporttest"
	"github.com/locus-go/locus/transport/sharded"
)

// subject describes a configuration to the shared checks.
func subject(opts ...sharded.Option) transporttest.Subject {
	return transporttest.Subject{
		New:    func() (pool.Transport, error) { return sharded.New(opts...) },
		Counts: transporttest.CountsOf(func(tr pool.Transport) sharded.Stats { return tr.(*sharded.Transport).Stats() }),
		Queues: func(tr pool.Transport) int { return sharded.Queues(tr.(*sharded.Transport)) },
	}
}

// mode is a configuration the shared checks run over.
type mode struct {
	name string
	opts []sharded.Option
}

// tiny are queues small enough that producers wait all the time, in both
// modes.
var tiny = []mode{
	{"mode=handles/capacity=4/batch=3", []sharded.Option{sharded.WithCapacity(4), sharded.WithBatch(3)}},
	{"mode=chunks/capacity=2/batch=1", []sharded.Option{sharded.WithChunks(), sharded.WithCapacity(2), sharded.WithBatch(1)}},
}

// modeSubject names m's subtest and the subject it describes.
func modeSubject(m mode) (string, transporttest.Subject) { return m.name, subject(m.opts...) }

// retireModes are the tiny queues and both modes' defaults.
var retireModes = append(slices.Clip(tiny),
	mode{"mode=handles/defaults", nil},
	mode{"mode=chunks/defaults", []sharded.Option{sharded.WithChunks()}},
)

// TestExercises runs the shared checks over both modes.
func TestExercises(t *testing.T) {
	transporttest.Exercises(t, transporttest.Modes[mode]{
		Tiny: tiny,
		Waits: []mode{
			{"mode=handles", []sharded.Option{sharded.WithCapacity(4), sharded.WithBatch(3)}},
			{"mode=chunks", []sharded.Option{sharded.WithChunks(), sharded.WithCapacity(1), sharded.WithBatch(1)}},
		},
		Many: []transporttest.Many[mode]{
			{Config: mode{"mode=handles/capacity=1/batch=1", []sharded.Option{sharded.WithCapacity(1), sharded.WithBatch(1)}}, Producers: 8, Chunks: 60},
			{Config: mode{"mode=handles/capacity=4/batch=2", []sharded.Option{sharded.WithCapacity(4), sharded.WithBatch(2)}}, Producers: 16, Chunks: 60},
			{Config: mode{"mode=handles/defaults", nil}, Producers: 4, Chunks: 300},
			{Config: mode{"mode=chunks/capacity=1/batch=1", []sharded.Option{sharded.WithChunks(), sharded.WithCapacity(1), sharded.WithBatch(1)}}, Producers: 16, Chunks: 60},
			{Config: mode{"mode=chunks/defaults", []sharded.Option{sharded.WithChunks()}}, Producers: 4, Chunks: 300},
		},
		Retire: retireModes,
		Pool: []mode{
			{"mode=handles", []sharded.Option{sharded.WithCapacity(4), sharded.WithBatch(2)}},
			{"mode=chunks", []sharded.Option{sharded.WithChunks(), sharded.WithCapacity(2), sharded.WithBatch(1)}},
		},
	}, modeSubject)
}

// TestUnusable: every method of nil and zero values returns an error or does
// nothing; none panics.
func TestUnusable(t *testing.T) {
	transporttest.UnusableValues[*testing.T, sharded.Transport, sharded.Producer, sharded.Stats](t)
}

// TestNew covers every option, alone and combined, and hostile values: each
// invalid configuration fails with an error wrapping pool.ErrInvalidConfig
// that names the problem.
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
		{name: "largest", opts: []sharded.Option{sharded.WithCapacity(sharded.MaxCapacity), sharded.WithBatch(sharded.MaxBatch)},
			want: pool.Bounds{Capacity: sharded.MaxCapacity, Batch: sharded.MaxBatch, PerProducer: true}},
		{name: "zero capacity", opts: []sharded.Option{sharded.WithCapacity(0)}, wantErr: "sharded: capacity 0, want 1 to 1048576"},
		{name: "zero capacity, chunks", opts: []sharded.Option{sharded.WithChunks(), sharded.WithCapacity(0)}, wantErr: "capacity 0"},
		{name: "negative capacity", opts: []sharded.Option{sharded.WithCapacity(-8)}, wantErr: "capacity -8"},
		{name: "smallest int capacity", opts: []sharded.Option{sharded.WithCapacity(math.MinInt)}, wantErr: "capacity"},
		{name: "capacity too large", opts: []sharded.Option{sharded.WithCapacity(sharded.MaxCapacity + 1)}, wantErr: "capacity 1048577"},
		{name: "largest int capacity", opts: []sharded.Option{sharded.WithCapacity(math.MaxInt)}, wantErr: "capacity"},
		{name: "zero batch", opts: []sharded.Option{sharded.WithBatch(0)}, wantErr: "sharded: batch 0, want 1 to 1048576"},
		{name: "negative batch, chunks", opts: []sharded.Option{sharded.WithChunks(), sharded.WithBatch(-1)}, wantErr: "batch -1"},
		{name: "batch too large", opts: []sharded.Option{sharded.WithBatch(sharded.MaxBatch + 1)}, wantErr: "batch 1048577"},
		{name: "largest int batch", opts: []sharded.Option{sharded.WithBatch(math.MaxInt)}, wantErr: "batch"},
		{name: "nil option", opts: []sharded.Option{sharded.WithChunks(), nil}, wantErr: "sharded: nil option at opts[1]"},
		{name: "nil option first", opts: []sharded.Option{nil, sharded.WithCapacity(0)}, wantErr: "nil option at opts[0]"},
		{name: "later capacity wins", opts: []sharded.Option{sharded.WithCapacity(0), sharded.WithCapacity(8)},
			want: pool.Bounds{Capacity: 8, Batch: sharded.DefaultBatch, PerProducer: true}},
		{name: "later bad batch wins", opts: []sharded.Option{sharded.WithBatch(4), sharded.WithBatch(0)}, wantErr: "batch 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, err := sharded.New(c.opts...)
			if tr != nil { // before CheckNew uses it
				want := sharded.Stats{Capacity: c.want.Capacity, Batch: c.want.Batch, Chunked: c.want.Chunked}
				if got := tr.Stats(); got != want {
					t.Errorf("Stats() = %+v, want %+v", got, want)
				}
			}
			must(t, transporttest.CheckNew(tr, err, "sharded", c.want, c.wantErr))
		})
	}
}

// FuzzNew builds options from fuzzed values: New fails exactly when the
// configuration is invalid, with an error wrapping pool.ErrInvalidConfig,
// and a transport it returns has the asked bounds and carries a handle.
func FuzzNew(f *testing.F) {
	f.Add(4, 3, uint8(0b0110))
	f.Add(0, 0, uint8(0b0111))
	f.Add(-1, math.MaxInt, uint8(0b0110))
	f.Add(sharded.MaxCapacity+1, 1, uint8(0b0010))
	f.Add(2, 2, uint8(0b1110))
	f.Add(2, 2, uint8(0b10110))
	f.Fuzz(func(t *testing.T, capacity, batch int, flags uint8) {
		chunks, setCap, setBatch, withNil, twice := flags&1 != 0, flags&2 != 0, flags&4 != 0, flags&8 != 0, flags&16 != 0
		var opts []sharded.Option
		wantCap, wantBatch := sharded.DefaultCapacity, sharded.DefaultBatch
		if chunks {
			opts = append(opts, sharded.WithChunks())
			wantCap, wantBatch = sharded.DefaultChunkCapacity, sharded.DefaultChunkBatch
		}
		if setCap {
			opts = append(opts, sharded.WithCapacity(capacity))
			wantCap = capacity
		}
		if setBatch {
			opts = append(opts, sharded.WithBatch(batch))
			wantBatch = batch
		}
		if withNil {
			opts = append(opts, nil)
		}
		if twice && setCap {
			opts = append(opts, sharded.WithCapacity(batch)) // overrides the capacity above
			wantCap = batch
		}
		var want pool.Bounds
		if !withNil &&
			wantCap >= 1 && wantCap <= sharded.MaxCapacity && wantBatch >= 1 && wantBatch <= sharded.MaxBatch {
			want = pool.Bounds{Capacity: wantCap, Batch: wantBatch, Chunked: chunks, PerProducer: true}
		}
		tr, err := sharded.New(opts...)
		must(t, transporttest.CheckNew(tr, err, "sharded", want, ""))
	})
}

// TestDrainBatchPerQueue: one Drain takes at most a batch from every queue,
// queues in the order their producers were made.
func TestDrainBatchPerQueue(t *testing.T) {
	tr := mustNew(t, sharded.WithCapacity(10), sharded.WithBatch(3))
	var all [][]pool.Handle
	for p := range 3 {
		prod := mustProducer(t, tr)
		hs := transporttest.Seq(p, 0, 10)
		if err := prod.Send(hs); err != nil {
			t.Fatal(err)
		}
		all = append(all, hs)
	}
	r := transporttest.NewRecorder()
	tr.Drain(r.Sink)
	must(t, r.Want(slices.Concat(all[0][:3], all[1][:3], all[2][:3])))
	if !slices.Equal(r.Sizes, []int{3, 3, 3}) {
		t.Fatalf("Put sizes %v, want [3 3 3]", r.Sizes)
	}
	wantStats(t, tr, sharded.Stats{Capacity: 10, Batch: 3, Producers: 3, Submitted: 30, Drained: 9, Pending: 21})
	for range 4 {
		tr.Drain(r.Sink)
	}
	must(t, transporttest.CheckDelivery(r.Got, []int{10, 10, 10}))
	wantStats(t, tr, sharded.Stats{Capacity: 10, Batch: 3, Producers: 3, Submitted: 30, Drained: 30})
}

// TestForgetKeepsOrderAndCounts: closing producers in the middle of the list
// forgets exactly their queues once drained; the others keep their order,
// a closed producer's items left by the batch limit are delivered first,
// and the counters stay whole.
func TestForgetKeepsOrderAndCounts(t *testing.T) {
	tr := mustNew(t, sharded.WithCapacity(8), sharded.WithBatch(2))
	var prods []pool.TryProducer
	for p := range 5 {
		prod := mustProducer(t, tr)
		must(t, prod.Send(transporttest.Seq(p, 0, 3)))
		prods = append(prods, prod)
	}
	must(t, prods[1].Close())
	must(t, prods[3].Close())
	r := transporttest.NewRecorder()
	tr.Drain(r.Sink) // two of three from each: 1 and 3 are not empty yet
	if n := sharded.Queues(tr); n != 5 {
		t.Fatalf("%d queues after a partial drain, want 5", n)
	}
	wantStats(t, tr, sharded.Stats{Capacity: 8, Batch: 2, Producers: 3, Submitted: 15, Drained: 10, Pending: 5})
	tr.Drain(r.Sink)
	if n := sharded.Queues(tr); n != 3 {
		t.Fatalf("%d queues after draining the closed producers, want 3", n)
	}
	wantStats(t, tr, sharded.Stats{Capacity: 8, Batch: 2, Producers: 3, Submitted: 15, Drained: 15})
	for _, p := range []int{0, 2, 4} {
		must(t, prods[p].Send(transporttest.Seq(p, 3, 4)))
	}
	tr.Drain(r.Sink)
	must(t, transporttest.CheckDelivery(r.Got, []int{4, 3, 4, 3, 4}))
	got := r.Got[len(r.Got)-3:]
	if want := []pool.Handle{transporttest.Handle(0, 3), transporttest.Handle(2, 3), transporttest.Handle(4, 3)}; !slices.Equal(got, want) {
		t.Fatalf("last drain delivered %v, want %v: the live queues in the order their producers were made", got, want)
	}
	wantStats(t, tr, sharded.Stats{Capacity: 8, Batch: 2, Producers: 3, Submitted: 18, Drained: 18})
}

// TestRingWraps: per-handle items that wrap around the end of the ring reach
// the sink in two Puts, in order.
func TestRingWraps(t *testing.T) {
	tr := mustNew(t, sharded.WithCapacity(4))
	prod := mustProducer(t, tr)
	hs := transporttest.Seq(0, 0, 7)
	r := transporttest.NewRecorder()
	must(t, prod.Send(hs[:3]))
	tr.Drain(r.Sink)
	must(t, prod.Send(hs[3:]))
	tr.Drain(r.Sink)
	must(t, r.Want(hs))
	if !slices.Equal(r.Sizes, []int{3, 1, 3}) {
		t.Fatalf("Put sizes %v, want [3 1 3]", r.Sizes)
	}
}

// TestChunkAnyLength: in chunk mode one item carries a chunk of any length,
// copied, so the producer may scribble over its chunk at once.
func TestChunkAnyLength(t *testing.T) {
	tr := mustNew(t, sharded.WithChunks(), sharded.WithCapacity(1))
	prod := mustProducer(t, tr)
	r := transporttest.NewRecorder()
	var want []pool.Handle
	for i, n := range []int{1, 1000, 3, 5000, 0, 2} {
		chunk := transporttest.Seq(0, len(want), len(want)+n)
		want = append(want, chunk...)
		if err := prod.Send(chunk); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
		clear(chunk)
		tr.Drain(r.Sink)
	}
	must(t, r.Want(want))
	if !slices.Equal(r.Sizes, []int{1, 1000, 3, 5000, 2}) {
		t.Fatalf("Put sizes %v, want one per non-empty chunk", r.Sizes)
	}
}

// TestZeroAllocs: in steady state Send, TrySend (also into a full queue) and
// Drain allocate nothing, and neither does the Drain that forgets retired
// queues.
func TestZeroAllocs(t *testing.T) {
	if race.Enabled {
		t.Skip("the race runtime allocates")
	}
	discard := pool.NewSink(func([]pool.Handle) {})
	t.Run("mode=handles", func(t *testing.T) {
		tr := mustNew(t)
		must(t, transporttest.SteadyAllocs(tr, mustProducer(t, tr), transporttest.Seq(0, 0, 16)))
	})
	t.Run("mode=chunks", func(t *testing.T) {
		// Chunks of varying length: once every slot buffer has grown to
		// the largest, nothing allocates.
		tr := mustNew(t, sharded.WithChunks())
		prod := mustProducer(t, tr)
		big := transporttest.Seq(0, 0, 48)
		var sendErr error
		i := 0
		round := func() {
			for range 3 {
				i++
				sendErr = errors.Join(sendErr, prod.Send(big[:1+i*7%len(big)]))
			}
			_, err := prod.TrySend(big[:i%len(big)])
			sendErr = errors.Join(sendErr, err)
			tr.Drain(discard)
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
		must(t, transporttest.FullAllocs(mustProducer(t, tr), transporttest.Seq(0, 0, 2)))
	})
	for _, m := range retireModes {
		t.Run("forget/"+m.name, func(t *testing.T) {
			n, err := transporttest.ForgetAllocs(subject(m.opts...), 100)
			if err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Fatalf("the Drain that forgets 100 retired queues made %d allocations, want 0", n)
			}
		})
	}
}

// BenchmarkDrainIdle measures an idle Drain after 5000 producers were made,
// used once and dropped: closed (retired=true), their queues are forgotten;
// left open, every later Drain still visits them.
//
//	go test ./transport/sharded -run '^$' -bench BenchmarkDrainIdle -count 6 | benchstat -col /retired -
func BenchmarkDrainIdle(b *testing.B) {
	for _, retired := range []bool{false, true} {
		b.Run(fmt.Sprintf("retired=%v", retired), func(b *testing.B) {
			transporttest.DrainIdle(b, mustNew(b, sharded.WithChunks()), retired)
		})
	}
}

// Helpers.

func mustProducer(t testing.TB, tr *sharded.Transport) pool.TryProducer {
	t.Helper()
	return transporttest.MustProducer[*sharded.Producer](t, tr)
}

var must = transporttest.Must

func wantStats(t *testing.T, tr *sharded.Transport, want sharded.Stats) {
	t.Helper()
	transporttest.WantStats(t, tr, want)
}
