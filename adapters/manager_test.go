package adapters_test

import (
	"bytes"
	"errors"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locus-go/locus/adapters"
	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/pages"
	"github.com/locus-go/locus/pool"
)

const (
	kvContent      pages.Content = 0
	adapterContent pages.Content = 1
	pageSize                     = 4096
)

// clock is a fake clock for the Manager's windows and pins.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

// fixture is a pages pool shared by KV runs and adapters, and a Manager
// over it whose EvictFunc forwards adapter evictions.
type fixture struct {
	hot   *pages.Pool
	m     *adapters.Manager
	clk   *clock
	kvEvd int
}

func newFixture(t testing.TB, nPages int, opts ...adapters.Option) *fixture {
	t.Helper()
	f := &fixture{clk: &clock{t: time.Unix(1000, 0)}}
	b, err := heap.New(nPages*pageSize, 1)
	if err != nil {
		t.Fatal(err)
	}
	f.hot, err = pages.New(b, pageSize,
		pages.WithContentTypes(
			pages.ContentType{Name: "kv", Priority: 0, Evictable: true},
			pages.ContentType{Name: "adapter", Priority: 1, Evictable: true},
		),
		pages.WithEvictFunc(func(r pages.Run, c pages.Content) {
			if !f.m.Evicted(r, c) {
				f.kvEvd++
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	f.m, err = adapters.New(f.hot, adapterContent, append([]adapters.Option{adapters.WithClock(f.clk.now)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.m.Check(); err != nil && !errors.Is(err, pool.ErrClosed) {
			t.Errorf("Check at cleanup: %v", err)
		}
		_ = f.m.Close()
		_ = f.hot.Close()
	})
	return f
}

// weights returns the deterministic weights of adapter id: size bytes.
func weights(id string, size int) []byte {
	h := fnv.New32a()
	h.Write([]byte(id))
	s := h.Sum32()
	b := make([]byte, size)
	for i := range b {
		s = s*1664525 + 1013904223
		b[i] = byte(s >> 24)
	}
	return b
}

func funcLoader(t testing.TB, id string, size int) adapters.Loader {
	t.Helper()
	w := weights(id, size)
	l, err := adapters.Func(int64(size), func(dst []byte) (int, error) { return copy(dst, w), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func (f *fixture) register(t testing.TB, id string, size int) {
	t.Helper()
	if err := f.m.Register(id, funcLoader(t, id, size)); err != nil {
		t.Fatalf("Register(%q): %v", id, err)
	}
}

func (f *fixture) check(t testing.TB) {
	t.Helper()
	if err := f.m.Check(); err != nil {
		t.Fatal(err)
	}
}

func mustAcquire(t testing.TB, m *adapters.Manager, id string, size int) adapters.Handle {
	t.Helper()
	h, err := m.Acquire(id)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", id, err)
	}
	b, err := m.Bytes(h)
	if err != nil {
		t.Fatalf("Bytes(%q): %v", id, err)
	}
	if !bytes.Equal(b, weights(id, size)) {
		t.Fatalf("Acquire(%q): weights differ", id)
	}
	return h
}

func residency(t testing.TB, m *adapters.Manager, id string) adapters.Residency {
	t.Helper()
	r, err := m.Residency(id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestSharedRegion shows adapters and KV runs in one pages region: an
// adapter's bytes are one contiguous run of the adapter content type, a
// held adapter survives KV pressure, a released one is evicted to warm by
// it and comes back intact.
func TestSharedRegion(t *testing.T) {
	const size = 10 * pageSize
	f := newFixture(t, 32, adapters.WithWarm(1<<20, 0, pageSize))
	f.register(t, "a", size)
	h := mustAcquire(t, f.m, "a", size)
	st := f.hot.Stats()
	if st.Content[adapterContent].Runs != 1 || st.Content[adapterContent].Pages != 10 {
		t.Fatalf("adapter content: %+v", st.Content[adapterContent])
	}
	// KV fills the rest; it cannot evict the held adapter.
	kv, err := f.hot.Alloc(22, kvContent)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.hot.Alloc(1, kvContent); !errors.Is(err, pool.ErrExhausted) {
		t.Fatalf("KV alloc past a held adapter: %v", err)
	}
	if err := f.m.Release(h); err != nil {
		t.Fatal(err)
	}
	_ = f.hot.Free(kv)
	// KV pressure: the pool evicts unpinned runs (here explicitly, as a watermark would).
	if n, err := f.hot.Evict(10); err != nil || n != 10 {
		t.Fatalf("Evict: %d, %v", n, err)
	}
	if r := residency(t, f.m, "a"); r != adapters.Warm {
		t.Fatalf("after eviction: %v, want warm", r)
	}
	f.check(t)
	h = mustAcquire(t, f.m, "a", size)
	if s := f.m.Stats(); s.Evictions != 1 || s.WarmLoads != 1 || s.ColdLoads != 1 {
		t.Fatalf("stats %+v", s)
	}
	_ = f.m.Release(h)
	f.check(t)
}

func TestHandles(t *testing.T) {
	f := newFixture(t, 64)
	f.register(t, "a", 100)
	h1 := mustAcquire(t, f.m, "a", 100)
	h2 := mustAcquire(t, f.m, "a", 100)
	if h1 == h2 {
		t.Fatal("two acquires share a handle")
	}
	if err := f.m.Release(h1); err != nil {
		t.Fatal(err)
	}
	for name, h := range map[string]adapters.Handle{"double": h1, "zero": {}} {
		if err := f.m.Release(h); !errors.Is(err, adapters.ErrInvalidHandle) || !errors.Is(err, pool.ErrInvalidHandle) {
			t.Fatalf("%s release: %v", name, err)
		}
		if _, err := f.m.Bytes(h); !errors.Is(err, adapters.ErrInvalidHandle) {
			t.Fatalf("%s Bytes: %v", name, err)
		}
	}
	// The second holder still holds it: pinned in the pool.
	if err := f.m.Unregister("a"); !errors.Is(err, adapters.ErrBusy) {
		t.Fatalf("Unregister while held: %v", err)
	}
	// A handle of another manager is foreign.
	g := newFixture(t, 64)
	g.register(t, "a", 100)
	if err := g.m.Release(h2); !errors.Is(err, adapters.ErrInvalidHandle) {
		t.Fatalf("foreign release: %v", err)
	}
	if err := f.m.Release(h2); err != nil {
		t.Fatal(err)
	}
	if s := f.m.Stats(); s.Leases != 0 || s.Held != 0 || s.RejectedReleases != 4 {
		t.Fatalf("stats %+v", s)
	}
	if err := f.m.Unregister("a"); err != nil {
		t.Fatal(err)
	}
	if f.hot.Stats().Content[adapterContent].Runs != 0 {
		t.Fatal("unregistered adapter left its run")
	}
	f.check(t)
}

func TestHostileInput(t *testing.T) {
	f := newFixture(t, 16, adapters.WithHotBudget(0, 8*pageSize))
	var nilM *adapters.Manager
	if _, err := nilM.Acquire("a"); !errors.Is(err, pool.ErrClosed) {
		t.Fatalf("nil manager: %v", err)
	}
	if err := (&adapters.Manager{}).Register("a", funcLoader(t, "a", 1)); !errors.Is(err, pool.ErrClosed) {
		t.Fatalf("zero manager: %v", err)
	}
	if err := nilM.Check(); !errors.Is(err, pool.ErrClosed) {
		t.Fatalf("nil Check: %v", err)
	}
	var nilR *adapters.Releaser
	if err := nilR.Release(adapters.Handle{}); !errors.Is(err, pool.ErrClosed) {
		t.Fatalf("nil releaser: %v", err)
	}
	failing, _ := adapters.Func(100, func([]byte) (int, error) { return 0, errors.New("disk on fire") })
	short, _ := adapters.Func(100, func(dst []byte) (int, error) { return len(dst) - 1, nil })
	panicky, _ := adapters.Func(100, func([]byte) (int, error) { panic("boom") })
	var nilLoader adapters.Loader
	tests := []struct {
		name string
		run  func() error
		want error
	}{
		{"empty id", func() error { return f.m.Register("", funcLoader(t, "x", 1)) }, pool.ErrInvalidArgument},
		{"nil loader", func() error { return f.m.Register("x", nilLoader) }, pool.ErrInvalidArgument},
		{"larger than the hot budget", func() error { return f.m.Register("big", funcLoader(t, "big", 9*pageSize)) }, adapters.ErrTooLarge},
		{"unknown acquire", func() error { _, err := f.m.Acquire("nope"); return err }, adapters.ErrUnknown},
		{"unknown pin", func() error { return f.m.Pin("nope", time.Second) }, adapters.ErrUnknown},
		{"unknown prefetch", func() error { return f.m.Prefetch("nope") }, adapters.ErrUnknown},
		{"unknown unregister", func() error { return f.m.Unregister("nope") }, adapters.ErrUnknown},
		{"duplicate", func() error { f.register(t, "dup", 10); return f.m.Register("dup", funcLoader(t, "dup", 10)) }, adapters.ErrExists},
		{"pin zero", func() error { return f.m.Pin("dup", 0) }, adapters.ErrPinDuration},
		{"pin too long", func() error { return f.m.Pin("dup", adapters.DefaultMaxPin+1) }, adapters.ErrPinDuration},
		{"failing loader", func() error { _ = f.m.Register("fail", failing); _, err := f.m.Acquire("fail"); return err }, adapters.ErrLoad},
		{"short loader", func() error { _ = f.m.Register("short", short); _, err := f.m.Acquire("short"); return err }, adapters.ErrLoad},
		{"panicking loader", func() error { _ = f.m.Register("panic", panicky); _, err := f.m.Acquire("panic"); return err }, adapters.ErrLoad},
		{"missing file", func() error { _, err := adapters.File(filepath.Join(t.TempDir(), "none")); return err }, os.ErrNotExist},
		{"bad ReaderAt", func() error { _, err := adapters.ReaderAt(nil, 3); return err }, pool.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.run(); !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			f.check(t)
		})
	}
	if s := f.hot.Stats(); s.Content[adapterContent].Runs != 0 {
		t.Fatalf("failed loads leaked runs: %+v", s.Content[adapterContent])
	}
	for _, id := range []string{"fail", "short", "panic"} {
		if r := residency(t, f.m, id); r != adapters.Cold {
			t.Fatalf("%s: %v after a failed load", id, r)
		}
	}
}

func TestNewRejects(t *testing.T) {
	b, _ := heap.New(4*pageSize, 1)
	hot, err := pages.New(b, pageSize)
	if err != nil {
		t.Fatal(err)
	}
	defer hot.Close()
	var nilOpt adapters.Option
	tests := []struct {
		name string
		hot  *pages.Pool
		c    pages.Content
		opts []adapters.Option
	}{
		{"nil pool", nil, 0, nil},
		{"content out of range", hot, 3, nil},
		{"nil option", hot, 0, []adapters.Option{nilOpt}},
		{"negative hot budget", hot, 0, []adapters.Option{adapters.WithHotBudget(-1, 0)}},
		{"warm smaller than a page", hot, 0, []adapters.Option{adapters.WithWarm(100, 0, 4096)}},
		{"bad quant", hot, 0, []adapters.Option{adapters.WithQuantization(adapters.Quant{Format: 9, Group: 1}, 0)}},
		{"zero window", hot, 0, []adapters.Option{adapters.WithPromotion(10, 0, time.Second)}},
		{"zero max pin", hot, 0, []adapters.Option{adapters.WithMaxPin(0)}},
		{"nil clock", hot, 0, []adapters.Option{adapters.WithClock(nil)}},
		{"nil policy", hot, 0, []adapters.Option{adapters.WithPolicy(nil)}},
		{"no workers", hot, 0, []adapters.Option{adapters.WithWorkers(0, 1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := adapters.New(tt.hot, tt.c, tt.opts...); !errors.Is(err, pool.ErrInvalidConfig) {
				t.Fatalf("got %v, want ErrInvalidConfig", err)
			}
		})
	}
}

func TestLoaders(t *testing.T) {
	w := weights("file", 3*pageSize+5)
	path := filepath.Join(t.TempDir(), "adapter.bin")
	if err := os.WriteFile(path, w, 0o600); err != nil {
		t.Fatal(err)
	}
	fl, err := adapters.File(path)
	if err != nil {
		t.Fatal(err)
	}
	rl, err := adapters.ReaderAt(bytes.NewReader(w), int64(len(w)))
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, 32)
	for id, l := range map[string]adapters.Loader{"file": fl, "reader": rl} {
		if err := f.m.Register(id, l); err != nil {
			t.Fatal(err)
		}
		h, err := f.m.Acquire(id)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := f.m.Bytes(h)
		if !bytes.Equal(b, w) {
			t.Fatalf("%s: weights differ", id)
		}
		_ = f.m.Release(h)
	}
	// The file changes size: the next cold load fails, nothing leaks.
	if err := f.m.Unregister("file"); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Register("file", fl); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, w[:10], 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.Acquire("file"); !errors.Is(err, adapters.ErrLoad) || !strings.Contains(err.Error(), "changed size") {
		t.Fatalf("changed file: %v", err)
	}
	f.check(t)
}

// TestBudgets: the hot slot budget demotes the lowest-ranked adapter that
// is neither held nor pinned, into the warm tier; with everything held or
// pinned a load fails with ErrNoRoom and evicts nothing.
func TestBudgets(t *testing.T) {
	const size = 2 * pageSize
	f := newFixture(t, 64, adapters.WithHotBudget(2, 0), adapters.WithWarm(4*size, 1, pageSize))
	for _, id := range []string{"a", "b", "c"} {
		f.register(t, id, size)
	}
	ha := mustAcquire(t, f.m, "a", size)
	f.clk.advance(time.Second)
	hb := mustAcquire(t, f.m, "b", size)
	if _, err := f.m.Acquire("c"); !errors.Is(err, adapters.ErrNoRoom) || !errors.Is(err, pool.ErrExhausted) {
		t.Fatalf("third adapter with two held: %v", err)
	}
	_ = f.m.Release(ha)
	_ = f.m.Release(hb)
	if err := f.m.Pin("a", time.Minute); err != nil { // a is least recently used but pinned
		t.Fatal(err)
	}
	f.clk.advance(time.Second)
	hc := mustAcquire(t, f.m, "c", size)
	if r := residency(t, f.m, "b"); r != adapters.Warm {
		t.Fatalf("b: %v, want warm (demoted)", r)
	}
	if r := residency(t, f.m, "a"); r != adapters.Hot {
		t.Fatalf("a: %v, want hot (pinned)", r)
	}
	_ = f.m.Release(hc)
	// The pin expires; a is now the least recently used.
	f.clk.advance(2 * time.Minute)
	hb = mustAcquire(t, f.m, "b", size) // from warm
	if r := residency(t, f.m, "a"); r == adapters.Hot {
		t.Fatal("a stayed hot after its pin expired")
	}
	_ = f.m.Release(hb)
	s := f.m.Stats()
	if s.Hot.Adapters != 2 || s.Warm.Adapters != 1 || s.WarmLoads != 1 || s.Pinned != 0 {
		t.Fatalf("stats %+v", s)
	}
	f.check(t)
}

// TestPromotionWindow: ten acquisitions within the window make an adapter
// hot-worthy: Tick keeps it hot while it demotes an idle one, and promotes
// it back after an eviction.
func TestPromotionWindow(t *testing.T) {
	const size = pageSize
	f := newFixture(t, 64, adapters.WithWarm(1<<20, 0, pageSize))
	f.register(t, "busy", size)
	f.register(t, "idle", size)
	for range 10 {
		_ = f.m.Release(mustAcquire(t, f.m, "busy", size))
		f.clk.advance(time.Second)
	}
	_ = f.m.Release(mustAcquire(t, f.m, "idle", size))
	f.clk.advance(adapters.DefaultWindow - 5*time.Second) // busy's oldest access is 55+ s old... still within
	if err := f.m.Tick(); err != nil {
		t.Fatal(err)
	}
	if r := residency(t, f.m, "busy"); r != adapters.Hot {
		t.Fatalf("busy: %v", r)
	}
	f.clk.advance(10 * time.Second)
	if err := f.m.Tick(); err != nil {
		t.Fatal(err)
	}
	if r := residency(t, f.m, "idle"); r != adapters.Warm {
		t.Fatalf("idle after the idle threshold: %v, want warm", r)
	}
	// busy fell out of its window too: idle for 65 s, demoted.
	if r := residency(t, f.m, "busy"); r != adapters.Warm {
		t.Fatalf("busy after its window: %v, want warm", r)
	}
	// Hot-worthy again, then evicted by KV pressure: Tick prefetches it.
	for range 10 {
		_ = f.m.Release(mustAcquire(t, f.m, "busy", size))
	}
	if n, err := f.hot.Evict(64); err != nil || n != 1 {
		t.Fatalf("Evict: %d %v", n, err)
	}
	if err := f.m.Tick(); err != nil {
		t.Fatal(err)
	}
	if r := residency(t, f.m, "busy"); r != adapters.Loading && r != adapters.Hot {
		t.Fatalf("busy after Tick: %v, want loading", r)
	}
	waitDone(t, f.m, 1)
	if r := residency(t, f.m, "busy"); r != adapters.Hot {
		t.Fatalf("busy: %v", r)
	}
	f.check(t)
}

// waitDone drains until n prefetches completed.
func waitDone(t testing.TB, m *adapters.Manager, n int) []adapters.Done {
	t.Helper()
	var done []adapters.Done
	deadline := time.Now().Add(10 * time.Second)
	for len(done) < n {
		var err error
		if done, err = m.Drain(done); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d prefetches completed", len(done), n)
		}
		time.Sleep(time.Millisecond)
	}
	return done
}

func TestPrefetch(t *testing.T) {
	const size = 3 * pageSize
	f := newFixture(t, 64, adapters.WithWarm(1<<20, 0, pageSize), adapters.WithWorkers(2, 8))
	bad, _ := adapters.Func(size, func([]byte) (int, error) { return 0, errors.New("gone") })
	if err := f.m.Register("bad", bad); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		f.register(t, id, size)
	}
	for _, id := range []string{"a", "b", "bad"} {
		if err := f.m.Prefetch(id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.m.Acquire("a"); err != nil && !errors.Is(err, adapters.ErrLoading) {
		t.Fatalf("Acquire while loading: %v", err)
	}
	if err := f.m.Unregister("a"); err != nil && !errors.Is(err, adapters.ErrBusy) {
		t.Fatalf("Unregister while loading: %v", err)
	}
	done := waitDone(t, f.m, 3)
	for _, d := range done {
		if (d.Err != nil) != (d.ID == "bad") || (d.Err != nil && !errors.Is(d.Err, adapters.ErrLoad)) {
			t.Fatalf("done %+v", d)
		}
	}
	_ = f.m.Release(mustAcquire(t, f.m, "a", size))
	if r := residency(t, f.m, "bad"); r != adapters.Cold {
		t.Fatalf("bad: %v", r)
	}
	s := f.m.Stats()
	if s.Prefetches != 3 || s.LoadErrors != 1 || s.Loading != 0 || s.HotHits < 1 {
		t.Fatalf("stats %+v", s)
	}
	f.check(t)
}

// TestConcurrentReleases releases handles on worker goroutines through
// releasers, with prefetches completing meanwhile; run it with -race.
func TestConcurrentReleases(t *testing.T) {
	const size = pageSize
	f := newFixture(t, 256, adapters.WithHotBudget(16, 0), adapters.WithWarm(1<<20, 0, pageSize), adapters.WithWorkers(2, 16))
	ids := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	for _, id := range ids {
		f.register(t, id, size)
	}
	const workers, rounds = 4, 50
	rels := make([]*adapters.Releaser, workers)
	work := make([]chan adapters.Handle, workers)
	var wg sync.WaitGroup
	for w := range workers {
		r, err := f.m.NewReleaser()
		if err != nil {
			t.Fatal(err)
		}
		rels[w] = r
		work[w] = make(chan adapters.Handle, 64)
		wg.Go(func() {
			defer r.Close()
			for h := range work[w] {
				if err := r.Release(h); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for i := range rounds {
		for k, id := range ids {
			if i%3 == 0 {
				_ = f.m.Prefetch(ids[(k+i)%len(ids)])
			}
			h, err := f.m.Acquire(id)
			if errors.Is(err, adapters.ErrLoading) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := f.m.Bytes(h)
			if !bytes.Equal(b, weights(id, size)) {
				t.Fatalf("%s: weights differ", id)
			}
			work[k%workers] <- h
		}
		if _, err := f.m.Drain(nil); err != nil {
			t.Fatal(err)
		}
		f.check(t)
	}
	for _, w := range work {
		close(w)
	}
	wg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := f.m.Drain(nil); err != nil {
			t.Fatal(err)
		}
		if s := f.m.Stats(); s.Leases == 0 && s.Loading == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v", f.m.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	if s := f.m.Stats(); s.RejectedReleases != 0 || s.Releases != s.Acquires {
		t.Fatalf("stats %+v", s)
	}
	f.check(t)
}
