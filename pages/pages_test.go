package pages_test

import (
	"errors"
	"math"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/pages"
	"github.com/locus-go/locus/pool"
)

// newPool builds a Pool of n pages of pageSize bytes on the heap.
func newPool(t testing.TB, n, pageSize int, opts ...pages.Option) *pages.Pool {
	t.Helper()
	b, err := heap.New(n*pageSize, 1)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pages.New(b, pageSize, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func must[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func TestNewRejects(t *testing.T) {
	heapOf := func(size, blocks int) pool.Backing {
		b, err := heap.New(size, blocks)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	evictable := pages.WithContentTypes(pages.ContentType{Name: "kv", Evictable: true})
	onEvict := pages.WithEvictFunc(func(pages.Run, pages.Content) {})
	for _, c := range []struct {
		name     string
		b        pool.Backing
		pageSize int
		opts     []pages.Option
	}{
		{"nil backing", nil, 64, nil},
		{"typed nil backing", (*heap.Backing)(nil), 64, nil},
		{"zero page size", heapOf(64, 1), 0, nil},
		{"negative page size", heapOf(64, 1), -64, nil},
		{"several blocks", heapOf(64, 4), 64, nil},
		{"region not whole pages", heapOf(100, 1), 64, nil},
		{"nil option", heapOf(64, 1), 64, []pages.Option{nil}},
		{"bad fit", heapOf(64, 1), 64, []pages.Option{pages.WithFit(7)}},
		{"no content types", heapOf(64, 1), 64, []pages.Option{pages.WithContentTypes()}},
		{"too many content types", heapOf(64, 1), 64, []pages.Option{pages.WithContentTypes(make([]pages.ContentType, pages.MaxContentTypes+1)...)}},
		{"evictable without EvictFunc", heapOf(64, 1), 64, []pages.Option{evictable}},
		{"nil EvictFunc", heapOf(64, 1), 64, []pages.Option{evictable, pages.WithEvictFunc(nil)}},
		{"watermarks with nothing evictable", heapOf(64, 1), 64, []pages.Option{pages.WithWatermarks(0.9, 0.8)}},
		{"low above high", heapOf(64, 1), 64, []pages.Option{evictable, onEvict, pages.WithWatermarks(0.8, 0.9)}},
		{"low equals high", heapOf(64, 1), 64, []pages.Option{evictable, onEvict, pages.WithWatermarks(0.8, 0.8)}},
		{"high above 1", heapOf(64, 1), 64, []pages.Option{evictable, onEvict, pages.WithWatermarks(1.5, 0.8)}},
		{"low 0", heapOf(64, 1), 64, []pages.Option{evictable, onEvict, pages.WithWatermarks(0.9, 0)}},
		{"NaN", heapOf(64, 1), 64, []pages.Option{evictable, onEvict, pages.WithWatermarks(math.NaN(), 0.5)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := pages.New(c.b, c.pageSize, c.opts...)
			if !errors.Is(err, pool.ErrInvalidConfig) || p != nil {
				t.Fatalf("New = %v, %v; want pool.ErrInvalidConfig", p, err)
			}
		})
	}
}

func TestZeroPool(t *testing.T) {
	var p pages.Pool
	if _, err := p.Alloc(1, 0); !errors.Is(err, pool.ErrClosed) {
		t.Errorf("Alloc = %v", err)
	}
	if err := p.Free(pages.Run{}); !errors.Is(err, pool.ErrClosed) {
		t.Errorf("Free = %v", err)
	}
	if err := p.Pin(pages.Run{}); !errors.Is(err, pool.ErrClosed) {
		t.Errorf("Pin = %v", err)
	}
	if _, err := p.Evict(1); !errors.Is(err, pool.ErrClosed) {
		t.Errorf("Evict = %v", err)
	}
	if err := p.Close(); !errors.Is(err, pool.ErrClosed) {
		t.Errorf("Close = %v", err)
	}
	if st := p.Stats(); st != (pages.Stats{}) {
		t.Errorf("Stats = %+v", st)
	}
}

func TestFit(t *testing.T) {
	// Holes of 5, 3 and 8 pages between live runs:
	// [A:2][hole 5][B:1][hole 3][C:1][hole 8][D:rest]
	layout := func(p *pages.Pool) {
		t.Helper()
		var holes []pages.Run
		for _, n := range []int{2, 5, 1, 3, 1, 8, 12} {
			r := must[pages.Run](t)(p.Alloc(n, 0))
			if n == 5 || n == 3 || n == 8 {
				holes = append(holes, r)
			}
		}
		for _, r := range holes {
			if err := p.Free(r); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range []struct {
		fit   pages.Fit
		n     int
		first int
	}{
		{pages.BestFit, 3, 8}, {pages.BestFit, 4, 2}, {pages.BestFit, 6, 12}, {pages.BestFit, 1, 8},
		{pages.FirstFit, 3, 2}, {pages.FirstFit, 4, 2}, {pages.FirstFit, 6, 12}, {pages.FirstFit, 1, 2},
	} {
		p := newPool(t, 32, 8, pages.WithFit(c.fit))
		layout(p)
		r := must[pages.Run](t)(p.Alloc(c.n, 0))
		if r.First() != c.first {
			t.Errorf("%v: Alloc(%d) at page %d, want %d", c.fit, c.n, r.First(), c.first)
		}
		if _, err := p.Alloc(9, 0); !errors.Is(err, pool.ErrExhausted) {
			t.Errorf("%v: Alloc(9) with no 9-page hole = %v", c.fit, err)
		}
		if st := p.Stats(); st.Failed != 1 || st.Fragmentation() <= 0 {
			t.Errorf("%v: stats %+v", c.fit, st)
		}
	}
}

// evictPool is a Pool of 16 pages with three content types; the runs it
// evicts are appended to *evicted.
func evictPool(t *testing.T, evicted *[]pages.Run, opts ...pages.Option) *pages.Pool {
	types := pages.WithContentTypes(
		pages.ContentType{Name: "weights", Priority: 9},
		pages.ContentType{Name: "kv", Priority: 5, Evictable: true},
		pages.ContentType{Name: "prefix", Priority: 1, Evictable: true},
	)
	onEvict := pages.WithEvictFunc(func(r pages.Run, _ pages.Content) { *evicted = append(*evicted, r) })
	return newPool(t, 16, 8, append([]pages.Option{types, onEvict}, opts...)...)
}

const (
	weights pages.Content = 0
	kv      pages.Content = 1
	prefix  pages.Content = 2
)

func TestEvictionOrder(t *testing.T) {
	var evicted []pages.Run
	p := evictPool(t, &evicted)
	w := must[pages.Run](t)(p.Alloc(4, weights))
	k1 := must[pages.Run](t)(p.Alloc(2, kv))
	p1 := must[pages.Run](t)(p.Alloc(2, prefix))
	k2 := must[pages.Run](t)(p.Alloc(2, kv))
	p2 := must[pages.Run](t)(p.Alloc(2, prefix))
	k3 := must[pages.Run](t)(p.Alloc(4, kv))           // full
	for _, r := range []pages.Run{w, k2, k1, p2, p1} { // unpin order sets LRU order
		if err := p.Unpin(r); err != nil {
			t.Fatal(err)
		}
	}
	if st := p.Stats(); st.Evictable != 8 || st.PinnedRuns != 1 || st.Pins != 1 {
		t.Fatalf("stats %+v", st)
	}
	// A prefix allocation may evict only prefix runs: LRU first.
	r := must[pages.Run](t)(p.Alloc(2, prefix))
	if !slices.Equal(evicted, []pages.Run{p2}) {
		t.Fatalf("evicted %v, want [p2 %v]", evicted, p2)
	}
	// A kv allocation of 4 pages: the prefix run left goes first (lower
	// priority), then kv runs least recently unpinned first until 4
	// contiguous pages are free: p1 (6-7), r (10-11), then k2 (8-9)
	// merges them into 6 free pages.
	evicted = nil
	if err := p.Unpin(r); err != nil {
		t.Fatal(err)
	}
	must[pages.Run](t)(p.Alloc(4, kv))
	if !slices.Equal(evicted, []pages.Run{p1, r, k2}) {
		t.Fatalf("evicted %v, want p1 %v, r %v, k2 %v", evicted, p1, r, k2)
	}
	// Weights are never evicted, pinned runs neither.
	evicted = nil
	if _, err := p.Alloc(8, weights); !errors.Is(err, pool.ErrExhausted) {
		t.Fatalf("Alloc(8) = %v", err)
	}
	if len(evicted) != 0 {
		t.Fatalf("a hopeless allocation evicted %v", evicted)
	}
	// Evicted runs are stale.
	for _, r := range []pages.Run{p1, p2, k2} {
		if err := p.Free(r); !errors.Is(err, pool.ErrStaleHandle) {
			t.Errorf("Free of evicted %v = %v", r, err)
		}
	}
	if err := p.Pin(k3); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Evictions != 4 || st.EvictedPages != 8 || st.Content[prefix].Evictions != 3 || st.Content[kv].Evictions != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestWatermarks(t *testing.T) {
	var evicted []pages.Run
	p := evictPool(t, &evicted, pages.WithWatermarks(0.75, 0.5)) // 12 and 8 of 16 pages
	var runs []pages.Run
	for range 5 {
		r := must[pages.Run](t)(p.Alloc(2, kv))
		if err := p.Unpin(r); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	if len(evicted) != 0 || p.Stats().Used != 10 {
		t.Fatalf("evicted %v below the high watermark", evicted)
	}
	must[pages.Run](t)(p.Alloc(2, weights)) // 12 pages: evict down to 8
	if !slices.Equal(evicted, runs[:2]) || p.Stats().Used != 8 {
		t.Fatalf("evicted %v, used %d; want the two oldest of %v and 8 used", evicted, p.Stats().Used, runs)
	}
	evicted = nil
	must[pages.Run](t)(p.Alloc(2, weights)) // 10: inside the band, nothing happens
	if len(evicted) != 0 {
		t.Fatalf("evicted %v inside the band", evicted)
	}
}

func TestPins(t *testing.T) {
	var evicted []pages.Run
	p := evictPool(t, &evicted)
	r := must[pages.Run](t)(p.Alloc(16, kv))
	if n := must[int](t)(p.Pins(r)); n != 1 {
		t.Fatalf("a new run has %d pins, want 1", n)
	}
	for range 3 {
		if err := p.Pin(r); err != nil {
			t.Fatal(err)
		}
	}
	if st := p.Stats(); st.Pins != 4 || st.PinnedRuns != 1 || st.Evictable != 0 {
		t.Fatalf("stats %+v", st)
	}
	for range 4 {
		if err := p.Unpin(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Unpin(r); !errors.Is(err, pages.ErrNotPinned) || !errors.Is(err, pool.ErrInvalidArgument) {
		t.Fatalf("Unpin of an unpinned run = %v", err)
	}
	if st := p.Stats(); st.Pins != 0 || st.PinnedRuns != 0 || st.Evictable != 16 {
		t.Fatalf("stats %+v", st)
	}
	if err := p.Pin(r); err != nil {
		t.Fatal(err)
	}
	if err := p.Free(r); err != nil { // pins do not stop the owner's Free
		t.Fatal(err)
	}
	if st := p.Stats(); st.Pins != 0 || st.PinnedRuns != 0 || st.Evictable != 0 || st.Used != 0 {
		t.Fatalf("stats after Free %+v", st)
	}
}

func TestEvictFuncPanics(t *testing.T) {
	types := pages.WithContentTypes(pages.ContentType{Name: "kv", Evictable: true})
	p := newPool(t, 4, 8, types, pages.WithEvictFunc(func(pages.Run, pages.Content) { panic("owner bug") }))
	r := must[pages.Run](t)(p.Alloc(4, 0))
	if err := p.Unpin(r); err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() { _ = recover() }()
		_, _ = p.Alloc(1, 0)
	}()
	// The run survived and the Pool is usable.
	if _, n, err := p.Span(r); err != nil || n != 4 {
		t.Fatalf("Span after a panicking EvictFunc = %d, %v", n, err)
	}
	if err := p.Free(r); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Used != 0 || st.Evictions != 0 || st.FreeRuns != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestRunBinary(t *testing.T) {
	p := newPool(t, 8, 8)
	r := must[pages.Run](t)(p.Alloc(3, 0))
	data := must[[]byte](t)(r.MarshalBinary())
	var back pages.Run
	if err := back.UnmarshalBinary(data); err != nil || back != r || len(data) != pages.RunSize {
		t.Fatalf("round trip of %v = %v, %v", r, back, err)
	}
	if err := back.UnmarshalBinary(data[:15]); !errors.Is(err, pool.ErrInvalidArgument) || back != r {
		t.Fatalf("short data: %v, %v", back, err)
	}
	if s := r.String(); s == "" || (pages.Run{}).String() != "pages.Run{}" {
		t.Fatalf("String = %q", s)
	}
}

func FuzzRunUnmarshal(f *testing.F) {
	f.Add(make([]byte, pages.RunSize))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0})
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		p := newPool(t, 4, 8)
		live := must[pages.Run](t)(p.Alloc(2, 0))
		var r pages.Run
		if err := r.UnmarshalBinary(data); err != nil {
			if len(data) == pages.RunSize || !errors.Is(err, pool.ErrInvalidArgument) {
				t.Fatalf("UnmarshalBinary(%x) = %v", data, err)
			}
			return
		}
		enc := must[[]byte](t)(r.MarshalBinary())
		if string(enc) != string(data) {
			t.Fatalf("re-encoding %x gave %x", data, enc)
		}
		// A decoded run is either the live one or rejected; it never
		// reaches memory it does not own.
		err := p.Free(r)
		if r == live {
			if err != nil {
				t.Fatalf("Free of the live run decoded: %v", err)
			}
		} else if !errors.Is(err, pool.ErrInvalidHandle) {
			t.Fatalf("Free of forged %v = %v", r, err)
		}
	})
}

func TestClosed(t *testing.T) {
	p := newPool(t, 8, 8)
	r := must[pages.Run](t)(p.Alloc(2, 0))
	before := p.Stats()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st != before {
		t.Fatalf("Stats after Close = %+v, want %+v", st, before)
	}
	if err := p.Pin(r); !errors.Is(err, pool.ErrClosed) {
		t.Fatal(err)
	}
	if _, err := p.Evict(1); !errors.Is(err, pool.ErrClosed) {
		t.Fatal(err)
	}
	if p.Pages() != 0 {
		t.Fatal(p.Pages())
	}
}

// TestSnapshotRace reads Snapshot from another goroutine while the owner
// works; run it with -race.
func TestSnapshotRace(t *testing.T) {
	p := newPool(t, 64, 8)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			s := p.Snapshot()
			if s.Used+s.Free != s.Pages || s.LargestFree > s.Free {
				t.Errorf("inconsistent snapshot %+v", s)
				return
			}
		}
	})
	var live []pages.Run
	for i := range 2000 {
		if r, err := p.Alloc(1+i%7, 0); err == nil {
			live = append(live, r)
		}
		if i%3 == 0 && len(live) > 0 {
			_ = p.Free(live[0])
			live = live[1:]
		}
		p.Stats()
	}
	close(stop)
	wg.Wait()
}

// TestSnapshotFreshWithoutStats: an owner that never calls Stats keeps its
// scrapers fresh. A Snapshot asked for from another goroutine is served by
// the owner's next Alloc, Free, Pin, Unpin or Evict, and shows what the
// owner did before it asked. Run it with -race too.
func TestSnapshotFreshWithoutStats(t *testing.T) {
	const spares, k = 128, 3
	for _, op := range []string{"Alloc", "Free", "Pin", "Unpin", "Evict"} {
		t.Run(op, func(t *testing.T) {
			p := newPool(t, 256, 8, pages.WithContentTypes(pages.ContentType{Name: "kv", Evictable: true}),
				pages.WithEvictFunc(func(pages.Run, pages.Content) {}))
			spare := make([]pages.Run, spares)
			for i := range spare {
				r, err := p.Alloc(1, 0)
				if err != nil {
					t.Fatal(err)
				}
				spare[i] = r
				for range 2 { // three pins: enough Unpins to serve the scraper
					if err := p.Pin(r); err != nil {
						t.Fatal(err)
					}
				}
			}
			// What the scraper must see: k more runs, never published by
			// Stats (nothing published since New, so no value is fresh).
			for range k {
				if _, err := p.Alloc(2, 0); err != nil {
					t.Fatal(err)
				}
			}
			serve := map[string]func(i int){
				"Alloc": func(int) { _, _ = p.Alloc(1, 0) },
				"Free":  func(i int) { _ = p.Free(spare[i%spares]) },
				"Pin":   func(i int) { _ = p.Pin(spare[i%spares]) },
				"Unpin": func(i int) { _ = p.Unpin(spare[i%spares]) },
				"Evict": func(int) { _, _ = p.Evict(1) },
			}[op]
			got := make(chan pages.Stats, 1)
			go func() { got <- p.Snapshot() }()
			deadline := time.Now().Add(10 * time.Second)
			for i := 0; ; i++ {
				select {
				case st := <-got:
					if st.Allocs < spares+k || st.Used < spares+2*k-min(i, spares) {
						t.Fatalf("a Snapshot asked for while the owner only called %s says %d allocations, %d pages used; want at least %d and %d",
							op, st.Allocs, st.Used, spares+k, spares+2*k-min(i, spares))
					}
					if st.Used+st.Free != st.Pages {
						t.Fatalf("inconsistent snapshot %+v", st)
					}
					return
				default:
				}
				if time.Now().After(deadline) {
					t.Fatal("Snapshot did not return")
				}
				serve(i)
				runtime.Gosched()
			}
		})
	}
}

// TestNoAllocations pins the hot paths at zero allocations.
func TestNoAllocations(t *testing.T) {
	var evicted int
	types := pages.WithContentTypes(pages.ContentType{Name: "kv", Evictable: true})
	onEvict := pages.WithEvictFunc(func(pages.Run, pages.Content) { evicted++ })
	for _, fit := range []pages.Fit{pages.BestFit, pages.FirstFit} {
		p := newPool(t, 256, 8, types, onEvict, pages.WithFit(fit))
		keep := must[pages.Run](t)(p.Alloc(3, 0))
		for name, f := range map[string]func(){
			"alloc+free": func() {
				r, _ := p.Alloc(5, 0)
				_ = p.Free(r)
			},
			"pin+unpin": func() {
				_ = p.Pin(keep)
				_ = p.Unpin(keep)
			},
			"alloc that evicts": func() {
				r, _ := p.Alloc(253, 0)
				_ = p.Unpin(r)
			},
			"rejected free": func() { _ = p.Free(pages.Run{}) },
			"stats":         func() { p.Stats() },
		} {
			if n := testing.AllocsPerRun(100, f); n != 0 {
				t.Errorf("%v: %s allocates %v times per run", fit, name, n)
			}
		}
	}
	if evicted == 0 {
		t.Fatal("the eviction path never ran")
	}
}

// An EvictFunc that panics in the reclaim after an allocation leaks
// nothing: the run just placed is freed, the others survive.
func TestEvictFuncPanicsInReclaim(t *testing.T) {
	types := pages.WithContentTypes(pages.ContentType{Name: "kv", Evictable: true})
	p := newPool(t, 8, 8, types, pages.WithWatermarks(0.75, 0.25), pages.WithEvictFunc(func(pages.Run, pages.Content) { panic("owner bug") }))
	old := must[pages.Run](t)(p.Alloc(4, 0))
	if err := p.Unpin(old); err != nil {
		t.Fatal(err)
	}
	panicked := func() (v any) {
		defer func() { v = recover() }()
		_, _ = p.Alloc(2, 0) // reaches the high watermark: the reclaim panics
		return nil
	}()
	if panicked == nil {
		t.Fatal("the EvictFunc's panic did not reach the caller")
	}
	if st := p.Stats(); st.Used != 4 || st.Runs != 1 {
		t.Fatalf("after the panic: %d pages in %d runs used, want the 4 of the old run", st.Used, st.Runs)
	}
	if _, n, err := p.Span(old); err != nil || n != 4 {
		t.Fatalf("the old run: %d, %v", n, err)
	}
}
