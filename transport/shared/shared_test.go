package shared_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/locus-go/locus/internal/race"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/internal/transporttest"
	"github.com/locus-go/locus/transport/shared"
)

// subject describes a configuration to the shared checks. The queue keeps no
// state per producer, so there are no queues to count.
func subject(opts ...shared.Option) transporttest.Subject {
	return transporttest.Subject{
		New:    func() (pool.Transport, error) { return shared.New(opts...) },
		Counts: counts,
	}
}

var counts = transporttest.CountsOf(func(tr pool.Transport) shared.Stats { return tr.(*shared.Transport).Stats() })

type config struct{ capacity, batch int }

func (c config) String() string { return fmt.Sprintf("capacity=%d/batch=%d", c.capacity, c.batch) }

// subject names c's subtest and the subject it describes.
func (c config) subject() (string, transporttest.Subject) {
	return c.String(), subject(shared.WithCapacity(c.capacity), shared.WithBatch(c.batch))
}

// tiny queues make producers wait all the time.
var tiny = []config{{4, 3}, {4, 100}}

var scale = transporttest.Scale

// retireConfigs are a tiny queue and the defaults.
var retireConfigs = []config{{4, 3}, {DefaultCapacity, DefaultBatch}}

// DefaultCapacity and DefaultBatch name the defaults in tables.
const DefaultCapacity, DefaultBatch = shared.DefaultCapacity, shared.DefaultBatch

// TestExercises runs the shared checks; their handles stay queued until
// drained after their producers close.
func TestExercises(t *testing.T) {
	transporttest.Exercises(t, transporttest.Modes[config]{
		Tiny:  tiny,
		Waits: tiny,
		Many: []transporttest.Many[config]{
			{Config: config{4, 2}, Producers: 16, Chunks: 60},
			{Config: config{1, 1}, Producers: 8, Chunks: 40},
			{Config: config{64, 64}, Producers: 4, Chunks: 400},
			{Config: config{16, 100}, Producers: 8, Chunks: 100},
		},
		Retire: retireConfigs,
		Pool:   []config{{8, 4}},
	}, config.subject)
}

// TestUnusable: every method of nil and zero values returns an error or does
// nothing; none panics.
func TestUnusable(t *testing.T) {
	transporttest.UnusableValues[*testing.T, shared.Transport, shared.Producer, shared.Stats](t)
}

// TestNew covers both options, alone and combined, and hostile values: each
// invalid configuration fails with an error wrapping pool.ErrInvalidConfig
// that names the problem.
func TestNew(t *testing.T) {
	for _, c := range []struct {
		name        string
		opts        []shared.Option
		capa, batch int // zero: New must fail
		wantErr     string
	}{
		{name: "defaults", capa: 1024, batch: 64},
		{name: "record", opts: []shared.Option{shared.WithCapacity(256), shared.WithBatch(8)}, capa: 256, batch: 8},
		{name: "smallest", opts: []shared.Option{shared.WithCapacity(1), shared.WithBatch(1)}, capa: 1, batch: 1},
		{name: "batch over capacity", opts: []shared.Option{shared.WithCapacity(4), shared.WithBatch(100)}, capa: 4, batch: 100},
		{name: "largest batch", opts: []shared.Option{shared.WithBatch(shared.MaxBatch)}, capa: 1024, batch: shared.MaxBatch},
		{name: "zero capacity", opts: []shared.Option{shared.WithCapacity(0)}, wantErr: "shared: capacity 0, want 1 to 1048576"},
		{name: "negative capacity", opts: []shared.Option{shared.WithCapacity(-1)}, wantErr: "capacity -1"},
		{name: "smallest int capacity", opts: []shared.Option{shared.WithCapacity(math.MinInt)}, wantErr: "capacity"},
		{name: "capacity too large", opts: []shared.Option{shared.WithCapacity(shared.MaxCapacity + 1)}, wantErr: "capacity 1048577"},
		{name: "largest int capacity", opts: []shared.Option{shared.WithCapacity(math.MaxInt)}, wantErr: "capacity"},
		{name: "zero batch", opts: []shared.Option{shared.WithBatch(0)}, wantErr: "shared: batch 0, want 1 to 1048576"},
		{name: "negative batch", opts: []shared.Option{shared.WithBatch(-3)}, wantErr: "batch -3"},
		{name: "batch too large", opts: []shared.Option{shared.WithBatch(shared.MaxBatch + 1)}, wantErr: "batch 1048577"},
		{name: "largest int batch", opts: []shared.Option{shared.WithBatch(math.MaxInt)}, wantErr: "batch"},
		{name: "nil option", opts: []shared.Option{nil}, wantErr: "shared: nil option at opts[0]"},
		{name: "nil option after a valid one", opts: []shared.Option{shared.WithBatch(2), nil}, wantErr: "nil option at opts[1]"},
		{name: "later capacity wins", opts: []shared.Option{shared.WithCapacity(0), shared.WithCapacity(8)}, capa: 8, batch: shared.DefaultBatch},
		{name: "later bad batch wins", opts: []shared.Option{shared.WithBatch(8), shared.WithBatch(-2)}, wantErr: "batch -2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, err := shared.New(c.opts...)
			var want pool.Bounds
			if c.wantErr == "" {
				want = pool.Bounds{Capacity: c.capa, Batch: c.batch}
			}
			if tr != nil { // before CheckNew uses it
				if got, want := tr.Stats(), (shared.Stats{Capacity: c.capa, Batch: c.batch}); got != want {
					t.Errorf("Stats() = %+v, want %+v", got, want)
				}
			}
			must(t, transporttest.CheckNew(tr, err, "shared", want, c.wantErr))
		})
	}
}

// FuzzNew builds options from fuzzed values: New fails exactly when the
// configuration is invalid, with an error wrapping pool.ErrInvalidConfig,
// and a transport it returns has the asked bounds and carries a handle.
func FuzzNew(f *testing.F) {
	f.Add(4, 3, uint8(0b011))
	f.Add(0, 0, uint8(0b011))
	f.Add(-1, math.MaxInt, uint8(0b011))
	f.Add(shared.MaxCapacity+1, 1, uint8(0b001))
	f.Add(2, 2, uint8(0b111))
	f.Add(2, 2, uint8(0b1011))
	f.Fuzz(func(t *testing.T, capacity, batch int, flags uint8) {
		setCap, setBatch, withNil, twice := flags&1 != 0, flags&2 != 0, flags&4 != 0, flags&8 != 0
		var opts []shared.Option
		wantCap, wantBatch := shared.DefaultCapacity, shared.DefaultBatch
		if setCap {
			opts = append(opts, shared.WithCapacity(capacity))
			wantCap = capacity
		}
		if setBatch {
			opts = append(opts, shared.WithBatch(batch))
			wantBatch = batch
		}
		if withNil {
			opts = append(opts, nil)
		}
		if twice && setCap {
			opts = append(opts, shared.WithCapacity(batch)) // overrides the capacity above
			wantCap = batch
		}
		var want pool.Bounds
		if !withNil && wantCap >= 1 && wantCap <= shared.MaxCapacity && wantBatch >= 1 && wantBatch <= shared.MaxBatch {
			want = pool.Bounds{Capacity: wantCap, Batch: wantBatch}
		}
		if want.Capacity > 1<<12 {
			return // the queue would take a while to allocate
		}
		tr, err := shared.New(opts...)
		must(t, transporttest.CheckNew(tr, err, "shared", want, ""))
	})
}

func TestBatchLimit(t *testing.T) {
	tr := mustNew(t, shared.WithCapacity(10), shared.WithBatch(3))
	prod := mustProducer(t, tr)
	hs := transporttest.Seq(0, 0, 10)
	must(t, prod.Send(hs))
	r := transporttest.NewRecorder()
	for i, want := range []int{3, 6, 9, 10, 10} {
		tr.Drain(r.Sink)
		must(t, r.Want(hs[:want]))
		wantStats(t, tr, shared.Stats{Capacity: 10, Batch: 3, Producers: 1, Submitted: 10, Drained: uint64(want), Pending: uint64(10 - want)})
		if puts := min(i+1, 4); len(r.Sizes) != puts {
			t.Fatalf("after %d drains: %d Put calls, want %d (one per non-empty drain)", i+1, len(r.Sizes), puts)
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
		n, _ := prod.TrySend(transporttest.Seq(0, next, next+2))
		next += n
	}
	refill()
	r := transporttest.NewRecorder()
	r.OnPut = refill // the owner refills the queue from inside the sink
	tr.Drain(r.Sink)
	must(t, r.Want(transporttest.Seq(0, 0, 5)))
	if !slices.Equal(r.Sizes, []int{2, 2, 1}) {
		t.Fatalf("Put sizes %v, want [2 2 1]", r.Sizes)
	}
}

// TestRetiredHandlesStayQueued: a closed producer's handles are delivered
// by later drains, also when the batch leaves some, in order with the
// handles of the producers still open.
func TestRetiredHandlesStayQueued(t *testing.T) {
	tr := mustNew(t, shared.WithCapacity(8), shared.WithBatch(2))
	a, b := mustProducer(t, tr), mustProducer(t, tr)
	must(t, a.Send(transporttest.Seq(0, 0, 3)))
	must(t, b.Send(transporttest.Seq(1, 0, 2)))
	must(t, a.Close())
	must(t, a.Close())
	wantStats(t, tr, shared.Stats{Capacity: 8, Batch: 2, Producers: 1, Submitted: 5, Pending: 5})
	r := transporttest.NewRecorder()
	for range 3 {
		tr.Drain(r.Sink)
	}
	must(t, r.Want(slices.Concat(transporttest.Seq(0, 0, 3), transporttest.Seq(1, 0, 2))))
	wantStats(t, tr, shared.Stats{Capacity: 8, Batch: 2, Producers: 1, Submitted: 5, Drained: 5})
}

// TestStatsMonotonic reads Stats from another goroutine while producers
// race the owner: Submitted and Drained never go down and Submitted >=
// Drained in every snapshot.
func TestStatsMonotonic(t *testing.T) {
	tr := mustNew(t, shared.WithCapacity(8), shared.WithBatch(4))
	stop := make(chan struct{})
	var readers sync.WaitGroup
	var bad error
	readers.Go(func() {
		var last shared.Stats
		for {
			select {
			case <-stop:
				return
			default:
			}
			st := tr.Stats()
			if st.Submitted < last.Submitted || st.Drained < last.Drained || st.Submitted < st.Drained ||
				st.Pending != st.Submitted-st.Drained {
				bad = fmt.Errorf("Stats went from %+v to %+v", last, st)
				return
			}
			last = st
		}
	})
	err := transporttest.ManyProducers(transporttest.Subject{
		New:    func() (pool.Transport, error) { return tr, nil },
		Counts: counts,
	}, 4, scale(2000))
	close(stop)
	readers.Wait()
	must(t, errors.Join(err, bad))
}

// TestPublishedBeforeDrain: a handle whose Send returned before a Drain
// started is delivered by that Drain (its batch covers the whole queue),
// even while other producers race for the slots around it.
func TestPublishedBeforeDrain(t *testing.T) {
	const capacity = 32
	tr := mustNew(t, shared.WithCapacity(capacity), shared.WithBatch(capacity))
	rounds := scale(3000)
	var wg sync.WaitGroup
	for p := 1; p <= 2; p++ {
		prod := mustProducer(t, tr)
		wg.Go(func() {
			buf := transporttest.Seq(p, 0, 3)
			for prod.Send(buf) == nil {
			}
		})
	}
	probe := mustProducer(t, tr)
	start, sent := make(chan int), make(chan error)
	go func() {
		for i := range start {
			sent <- probe.Send([]pool.Handle{transporttest.Handle(0, i)})
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
		want, seen = transporttest.Handle(0, i), false
		start <- i
		for waiting := true; waiting; {
			select {
			case err := <-sent:
				must(t, err)
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

// TestZeroAllocs: Send, TrySend (also into a full queue) and Drain allocate
// nothing.
func TestZeroAllocs(t *testing.T) {
	if race.Enabled {
		t.Skip("the race runtime allocates")
	}
	tr := mustNew(t)
	chunk := transporttest.Seq(0, 0, 16)
	must(t, transporttest.SteadyAllocs(tr, mustProducer(t, tr), chunk))
	full := mustNew(t, shared.WithCapacity(1))
	fp := mustProducer(t, full)
	must(t, fp.Send(chunk[:1]))
	must(t, transporttest.FullAllocs(fp, chunk))
	n, err := transporttest.ForgetAllocs(subject(shared.WithBatch(128)), 100)
	must(t, err)
	if n != 0 {
		t.Fatalf("the Drain after 100 producers closed made %d allocations, want 0", n)
	}
}

// Helpers.

func mustProducer(t testing.TB, tr *shared.Transport) pool.TryProducer {
	t.Helper()
	return transporttest.MustProducer[*shared.Producer](t, tr)
}

var must = transporttest.Must

func wantStats(t *testing.T, tr *shared.Transport, want shared.Stats) {
	t.Helper()
	transporttest.WantStats(t, tr, want)
}
