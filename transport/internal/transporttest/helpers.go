package transporttest

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"

	"github.com/locus-go/locus/internal/race"
	"github.com/locus-go/locus/pool"
)

// TB is the part of testing.TB that the helpers below use.
type TB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// Runner is a TB that runs subtests of its own type, as *testing.T does.
type Runner[Self any] interface {
	TB
	Run(name string, f func(Self)) bool
}

// Run runs check over every configuration as subtests of t: name gives a
// configuration's subtest name and the subject it describes.
func Run[T Runner[T], C any](t T, configs []C, name func(C) (string, Subject), check func(Subject) error) {
	t.Helper()
	for _, c := range configs {
		n, s := name(c)
		t.Run(n, func(t T) {
			t.Helper()
			Must(t, check(s))
		})
	}
}

// Scale returns n, or n/4 (at least 1) under the race detector.
func Scale(n int) int {
	if race.Enabled {
		return max(n/4, 1)
	}
	return n
}

// CountsOf returns a Subject.Counts that reads the counters from the fields
// of the same names in what stats returns (a transport's Stats struct).
func CountsOf[S any](stats func(pool.Transport) S) func(pool.Transport) Counts {
	return func(tr pool.Transport) Counts {
		st := reflect.ValueOf(stats(tr))
		u := func(name string) uint64 { return st.FieldByName(name).Uint() }
		return Counts{
			Producers: int(st.FieldByName("Producers").Int()),
			Submitted: u("Submitted"), Drained: u("Drained"), Pending: u("Pending"),
			Full: u("Full"), Blocked: u("Blocked"),
		}
	}
}

// Must fails t if err is not nil.
func Must(t TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// MustNew returns what newT(opts...) makes, failing t if it fails.
func MustNew[T, O any](t TB, newT func(...O) (T, error), opts ...O) T {
	t.Helper()
	tr, err := newT(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// MustProducer returns a new producer of tr, failing t unless it is a P.
func MustProducer[P pool.TryProducer](t TB, tr pool.Transport) P {
	t.Helper()
	p, err := tr.NewProducer()
	if err != nil {
		t.Fatal(err)
	}
	tp, ok := p.(P)
	if !ok {
		t.Fatalf("NewProducer returned a %T, want a %T", p, tp)
	}
	return tp
}

// WantStats fails t unless tr's Stats are want.
func WantStats[S comparable](t TB, tr interface{ Stats() S }, want S) {
	t.Helper()
	if got := tr.Stats(); got != want {
		t.Fatalf("Stats() = %+v, want %+v", got, want)
	}
}

// UnusableValues runs, as subtests of t, Unusable on a nil and a zero
// transport of type *E and UnusableProducer on a nil and a zero producer of
// type *P; both transports must also report zero Stats (of type S).
func UnusableValues[R Runner[R], E, P, S any, T interface {
	*E
	pool.Transport
	Stats() S
}, Q interface {
	*P
	pool.Producer
}](t R) {
	for _, c := range []struct {
		name string
		tr   T
	}{{"nil", nil}, {"zero", new(E)}} {
		t.Run("Transport/"+c.name, func(t R) {
			t.Helper()
			Must(t, Unusable(c.tr, pool.ErrInvalidConfig))
			if st := c.tr.Stats(); !reflect.ValueOf(st).IsZero() {
				t.Fatalf("Stats() = %+v, want zero", st)
			}
		})
	}
	for _, c := range []struct {
		name string
		p    Q
	}{{"nil", nil}, {"zero", new(P)}} {
		t.Run("Producer/"+c.name, func(t R) {
			t.Helper()
			Must(t, UnusableProducer(c.p))
		})
	}
}

// AllocsPerRun returns the average number of heap allocations of a call of
// f over runs calls, after one warm-up call, measured as
// testing.AllocsPerRun measures it (with GOMAXPROCS at 1).
func AllocsPerRun(runs int, f func()) float64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	f()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return float64((after.Mallocs - before.Mallocs) / uint64(runs))
}

// SteadyAllocs checks that a round of Send and TrySend of chunk through
// prod and a Drain of tr allocates nothing and fails no send.
func SteadyAllocs(tr pool.Transport, prod pool.TryProducer, chunk []pool.Handle) error {
	discard := pool.NewSink(func([]pool.Handle) {})
	var sendErr error
	round := func() {
		sendErr = errors.Join(sendErr, prod.Send(chunk))
		_, err := prod.TrySend(chunk)
		sendErr = errors.Join(sendErr, err)
		tr.Drain(discard)
	}
	if a := AllocsPerRun(100, round); a != 0 || sendErr != nil {
		return fmt.Errorf("Send+TrySend+Drain: %v allocs per run, error %v; want 0, nil", a, sendErr)
	}
	return nil
}

// FullAllocs checks that TrySend of chunk into prod's full queue allocates
// nothing.
func FullAllocs(prod pool.TryProducer, chunk []pool.Handle) error {
	if a := AllocsPerRun(100, func() { _, _ = prod.TrySend(chunk) }); a != 0 {
		return fmt.Errorf("TrySend into a full queue: %v allocs per run, want 0", a)
	}
	return nil
}

// Modes name the configurations of a transport that Exercises runs its
// checks over; C is the test's own description of a configuration.
type Modes[C any] struct {
	Tiny   []C       // queues small enough that producers wait all the time
	Waits  []C       // for SendWaits
	Many   []Many[C] // for ManyProducers
	Retire []C       // for Retire, RetireRacing and CloseRace
	Pool   []C       // for Pool
}

// Many is a configuration for ManyProducers, with its arguments.
type Many[C any] struct {
	Config            C
	Producers, Chunks int
}

// Exercises runs the checks of this package over the configurations m
// names, as subtests of t named for the check and then the configuration
// (name gives its subtest name and subject): TrySendFull,
// CloseReleasesParked (3 senders), NilSink and ReentrantDrain over m.Tiny;
// SendWaits (4 chunks) over m.Waits; ManyProducers over m.Many; Retire
// (3000 producers), RetireRacing (4 workers, 400 rounds) and CloseRace (4
// workers) over m.Retire; Pool (400 rounds) over m.Pool. Counts of
// producers and rounds are cut by Scale.
func Exercises[T Runner[T], C any](t T, m Modes[C], name func(C) (string, Subject)) {
	for _, c := range []struct {
		name    string
		configs []C
		check   func(Subject) error
	}{
		{"TrySendFull", m.Tiny, TrySendFull},
		{"SendWaits", m.Waits, func(s Subject) error { return SendWaits(s, 4) }},
		{"CloseReleasesParked", m.Tiny, func(s Subject) error { return CloseReleasesParked(s, 3) }},
		// thousands of producers made, used and closed one after another;
		// batch limits leave items of closed producers for later drains
		{"Retire", m.Retire, func(s Subject) error { return Retire(s, Scale(3000)) }},
		// producers made, used and closed on worker goroutines while the
		// owner drains
		{"RetireRacing", m.Retire, func(s Subject) error { return RetireRacing(s, 4, Scale(400)) }},
		{"CloseRace", m.Retire, func(s Subject) error { return CloseRace(s, 4) }},
		{"Pool", m.Pool, func(s Subject) error { return Pool(s, Scale(400)) }},
		{"NilSink", m.Tiny, NilSink},
		// a Drain called from inside the sink does nothing
		{"ReentrantDrain", m.Tiny, ReentrantDrain},
	} {
		t.Run(c.name, func(t T) { Run(t, c.configs, name, c.check) })
	}
	// more producers than the queues hold race the owner
	t.Run("ManyProducers", func(t T) {
		for _, c := range m.Many {
			Run(t, []C{c.Config}, name, func(s Subject) error { return ManyProducers(s, c.Producers, c.Chunks) })
		}
	})
}
