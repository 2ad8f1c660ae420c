package bounded_test

import (
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locus-go/locus/internal/race"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/internal/bounded"
)

// opt is an option as the transports build them: an interface with an
// unexported method, implemented by a func over the Config.
type opt interface{ set(*bounded.Config) }

type optFunc func(*bounded.Config)

func (f optFunc) set(c *bounded.Config) { f(c) }

func apply(o opt, c *bounded.Config) { o.set(c) }

func capacity(n int) opt { return optFunc(func(c *bounded.Config) { c.SetCapacity(n) }) }
func batch(n int) opt    { return optFunc(func(c *bounded.Config) { c.SetBatch(n) }) }
func chunks() opt        { return optFunc((*bounded.Config).SetChunks) }

// wrapped is an option a caller built around a nil one.
type wrapped struct{ opt }

// defaults are those of a transport whose chunk mode has other defaults.
func defaults(chunked bool) (int, int) {
	if chunked {
		return 8, 4
	}
	return 64, 32
}

func TestBuild(t *testing.T) {
	for _, c := range []struct {
		name    string
		opts    []opt
		want    bounded.Config // compared on Capacity, Batch, Chunks
		wantErr string
	}{
		{name: "defaults", want: bounded.Config{Capacity: 64, Batch: 32}},
		{name: "chunk defaults", opts: []opt{chunks()}, want: bounded.Config{Capacity: 8, Batch: 4, Chunks: true}},
		{name: "chunk defaults whatever the order", opts: []opt{capacity(3), chunks()}, want: bounded.Config{Capacity: 3, Batch: 4, Chunks: true}},
		{name: "both", opts: []opt{batch(1), capacity(1)}, want: bounded.Config{Capacity: 1, Batch: 1}},
		{name: "limits", opts: []opt{capacity(bounded.MaxCapacity), batch(bounded.MaxBatch)},
			want: bounded.Config{Capacity: bounded.MaxCapacity, Batch: bounded.MaxBatch}},
		{name: "nil", opts: []opt{capacity(4), nil}, wantErr: "pool: invalid configuration: test: nil option at opts[1]"},
		{name: "nil before a bad value", opts: []opt{nil, capacity(0)}, wantErr: "nil option at opts[0]"},
		{name: "nil func", opts: []opt{batch(2), optFunc(nil)}, wantErr: "test: nil option at opts[1]"},
		{name: "nil wrapped", opts: []opt{wrapped{}}, wantErr: "test: nil option at opts[0]"},
		{name: "later overrides", opts: []opt{capacity(4), batch(2), capacity(9)}, want: bounded.Config{Capacity: 9, Batch: 2}},
		{name: "repeated chunks", opts: []opt{batch(1), chunks(), chunks(), batch(3)}, want: bounded.Config{Capacity: 8, Batch: 3, Chunks: true}},
		{name: "a bad value overridden", opts: []opt{batch(0), batch(1)}, want: bounded.Config{Capacity: 64, Batch: 1}},
		{name: "a good value overridden by a bad one", opts: []opt{batch(1), batch(0)}, wantErr: "test: batch 0"},
		{name: "capacity 0", opts: []opt{capacity(0)}, wantErr: "pool: invalid configuration: test: capacity 0, want 1 to 1048576"},
		{name: "capacity -1", opts: []opt{capacity(-1)}, wantErr: "capacity -1, want"},
		{name: "capacity MinInt", opts: []opt{capacity(math.MinInt)}, wantErr: "capacity -"},
		{name: "capacity over", opts: []opt{capacity(bounded.MaxCapacity + 1)}, wantErr: "capacity 1048577, want"},
		{name: "capacity MaxInt", opts: []opt{capacity(math.MaxInt)}, wantErr: "capacity "},
		{name: "batch 0", opts: []opt{batch(0)}, wantErr: "pool: invalid configuration: test: batch 0, want 1 to 1048576"},
		{name: "batch MinInt", opts: []opt{batch(math.MinInt)}, wantErr: "batch -"},
		{name: "batch over", opts: []opt{batch(bounded.MaxBatch + 1)}, wantErr: "batch 1048577, want"},
		{name: "batch MaxInt", opts: []opt{batch(math.MaxInt)}, wantErr: "batch "},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := bounded.Build("test", c.opts, apply, defaults)
			if c.wantErr != "" {
				if !errors.Is(err, pool.ErrInvalidConfig) || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("Build = %v; want an error wrapping pool.ErrInvalidConfig with %q", err, c.wantErr)
				}
				if got != (bounded.Config{}) {
					t.Fatalf("Build returned %+v with its error, want the zero Config", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Capacity != c.want.Capacity || got.Batch != c.want.Batch || got.Chunks != c.want.Chunks {
				t.Fatalf("Build = %+v, want %+v", got, c.want)
			}
		})
	}
}

// FuzzBuild: Build accepts exactly the configurations in range with no nil
// option, the last of repeated options winning, and returns what they set.
func FuzzBuild(f *testing.F) {
	f.Add(1, 1, uint8(0b0011))
	f.Add(0, -1, uint8(0b0011))
	f.Add(math.MaxInt, math.MinInt, uint8(0b0111))
	f.Add(bounded.MaxCapacity, bounded.MaxBatch, uint8(0b11011))
	f.Fuzz(func(t *testing.T, capa, bat int, flags uint8) {
		var opts []opt
		wantCap, wantBatch := defaults(flags&4 != 0)
		if flags&4 != 0 {
			opts = append(opts, chunks())
		}
		if flags&1 != 0 {
			opts = append(opts, capacity(capa))
			wantCap = capa
		}
		if flags&2 != 0 {
			opts = append(opts, batch(bat))
			wantBatch = bat
		}
		if flags&8 != 0 && flags&1 != 0 {
			opts = append(opts, capacity(bat)) // overrides the capacity above
			wantCap = bat
		}
		withNil := flags&16 != 0
		if withNil {
			opts = append(opts, nil)
		}
		got, err := bounded.Build("fuzz", opts, apply, defaults)
		valid := !withNil && wantCap >= 1 && wantCap <= bounded.MaxCapacity && wantBatch >= 1 && wantBatch <= bounded.MaxBatch
		if !valid {
			if !errors.Is(err, pool.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "pool: invalid configuration: fuzz: ") {
				t.Fatalf("Build = %+v, %v; want an error wrapping pool.ErrInvalidConfig", got, err)
			}
			return
		}
		if err != nil || got.Capacity != wantCap || got.Batch != wantBatch || got.Chunks != (flags&4 != 0) {
			t.Fatalf("Build = %+v, %v; want capacity %d, batch %d", got, err, wantCap, wantBatch)
		}
	})
}

func TestErrors(t *testing.T) {
	if err := bounded.NoTransport("x"); !errors.Is(err, pool.ErrInvalidConfig) || err.Error() != "pool: invalid configuration: x: zero or nil Transport; make one with New" {
		t.Errorf("NoTransport = %q", err)
	}
	if err := bounded.NoProducer("x"); !errors.Is(err, pool.ErrClosed) || err.Error() != "pool: closed: x: zero or nil Producer; make one with Transport.NewProducer" {
		t.Errorf("NoProducer = %q", err)
	}
}

// TestGateCounts: the zero Gate is open and counts from zero.
func TestGateCounts(t *testing.T) {
	var g bounded.Gate
	if g.Closed() || g.Counts() != (bounded.Counts{}) {
		t.Fatalf("zero Gate: closed %v, counts %+v", g.Closed(), g.Counts())
	}
	a, b := g.Open(), g.Open()
	if !a.Close() || a.Close() {
		t.Fatal("Endpoint.Close: want true, then false")
	}
	errNone := errors.New("none")
	if err := b.Check(errNone); err != nil {
		t.Fatalf("Check of an open endpoint = %v", err)
	}
	if err := a.Check(errNone); !errors.Is(err, pool.ErrClosed) {
		t.Fatalf("Check of a closed endpoint = %v, want pool.ErrClosed", err)
	}
	var zero bounded.Endpoint
	if err := zero.Check(errNone); err != errNone || zero.Close() {
		t.Fatalf("zero Endpoint: Check = %v, want errNone; Close must report false", err)
	}
	g.Full()
	var p bounded.Parking
	if err := g.Wait(&p, func() bool { return true }); err != nil {
		t.Fatalf("Wait with room = %v", err)
	}
	if want := (bounded.Counts{Producers: 1, Full: 1, Blocked: 1}); g.Counts() != want {
		t.Fatalf("Counts() = %+v, want %+v", g.Counts(), want)
	}
	g.Close()
	g.Close()
	if !g.Closed() {
		t.Fatal("Close did not close")
	}
	if err := g.Wait(&p, func() bool { return true }); !errors.Is(err, pool.ErrClosed) {
		t.Fatalf("Wait on a closed gate = %v, want pool.ErrClosed", err)
	}
	if err := b.Check(errNone); !errors.Is(err, pool.ErrClosed) {
		t.Fatalf("Check of an endpoint of a closed gate = %v, want pool.ErrClosed", err)
	}
}

// TestCloseReleasesWaiters: waiters with no room return pool.ErrClosed once
// the gate closes and the transport wakes the Parking.
func TestCloseReleasesWaiters(t *testing.T) {
	var g bounded.Gate
	var p bounded.Parking
	const waiters = 5
	done := make(chan error, waiters)
	for range waiters {
		go func() { done <- g.Wait(&p, func() bool { return false }) }()
	}
	deadline := time.Now().Add(10 * time.Second)
	for g.Counts().Blocked < waiters {
		if time.Now().After(deadline) {
			t.Fatal("waiters never started")
		}
		time.Sleep(time.Millisecond)
	}
	p.Wake(waiters) // no room: they wake, re-check and sleep again
	g.Close()
	p.WakeAll()
	for range waiters {
		select {
		case err := <-done:
			if !errors.Is(err, pool.ErrClosed) {
				t.Fatalf("Wait = %v, want pool.ErrClosed", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a waiter was not released")
		}
	}
}

// TestNoLostWakeups runs Parking as a semaphore: consumers take tokens,
// waiting when there are none; the owner adds tokens a few at a time and
// wakes as many waiters. Every consumer finishes only if no wake-up is lost.
func TestNoLostWakeups(t *testing.T) {
	for _, c := range []struct {
		name      string
		consumers int
		step      int // tokens the owner adds at a time
	}{
		{"one consumer", 1, 1},
		{"many consumers, one token at a time", 8, 1},
		{"many consumers, a few tokens at a time", 8, 3},
		{"more tokens than consumers", 3, 16},
	} {
		t.Run(c.name, func(t *testing.T) {
			each := 6000 / c.consumers
			if race.Enabled {
				each /= 4
			}
			var (
				g      bounded.Gate
				p      bounded.Parking
				tokens atomic.Int64
			)
			room := func() bool { return tokens.Load() > 0 }
			take := func() bool {
				for {
					n := tokens.Load()
					if n == 0 {
						return false
					}
					if tokens.CompareAndSwap(n, n-1) {
						return true
					}
				}
			}
			var wg sync.WaitGroup
			errc := make(chan error, c.consumers)
			for range c.consumers {
				wg.Go(func() {
					for got := 0; got < each; {
						if take() {
							got++
							continue
						}
						if err := g.Wait(&p, room); err != nil {
							errc <- err
							return
						}
					}
				})
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			total := c.consumers * each
			deadline := time.Now().Add(20 * time.Second)
			for added := 0; added < total; {
				// Add tokens only once the previous ones are taken, so
				// that consumers keep running out and waiting.
				for tokens.Load() > 0 {
					if time.Now().After(deadline) {
						g.Close()
						p.WakeAll()
						t.Fatalf("tokens left untaken with %d of %d added: a lost wake-up", added, total)
					}
				}
				n := min(c.step, total-added)
				tokens.Add(int64(n))
				p.Wake(n)
				added += n
			}
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				g.Close()
				p.WakeAll()
				t.Fatal("consumers still waiting after every token was added: a lost wake-up")
			}
			close(errc)
			for err := range errc {
				t.Fatal(err)
			}
			if tokens.Load() != 0 {
				t.Fatalf("%d tokens left", tokens.Load())
			}
		})
	}
}
