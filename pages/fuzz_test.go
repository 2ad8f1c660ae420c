package pages_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/internal/model"
	"github.com/locus-go/locus/pages"
	"github.com/locus-go/locus/pool"
)

// fuzzTypes are the content types of FuzzOps: one that is never evicted,
// two evictable types sharing a priority, and a lower one.
var fuzzTypes = []pages.ContentType{
	{Name: "weights", Priority: 2},
	{Name: "kv", Priority: 1, Evictable: true},
	{Name: "cache", Priority: 0, Evictable: true},
	{Name: "adapter", Priority: 1, Evictable: true},
}

// The region both fuzz targets drive: fuzzPages pages of fuzzPageSize bytes.
const fuzzPages, fuzzPageSize = 32, 4

// fuzzPool returns a pool over the fuzz region with opts, and a live run of
// another pool; both closed when t ends.
func fuzzPool(t *testing.T, opts []pages.Option) (*pages.Pool, pages.Run) {
	b, _ := heap.New(fuzzPages*fuzzPageSize, 1)
	p, err := pages.New(b, fuzzPageSize, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	fb, _ := heap.New(fuzzPageSize, 1)
	other, _ := pages.New(fb, fuzzPageSize)
	t.Cleanup(func() { _ = other.Close() })
	foreign, _ := other.Alloc(1, pages.DefaultContent)
	return p, foreign
}

// checkEvicting checks what an EvictFunc may do with the run r it is told
// of, whose first byte is tag: read its bytes, but not free it. It returns
// the last violation, or nil.
func checkEvicting(p *pages.Pool, r pages.Run, tag byte) error {
	var violation error
	if buf, err := p.Bytes(r); err != nil || buf[0] != tag {
		violation = fmt.Errorf("Bytes of %v during its eviction: %v", r, err)
	}
	if err := p.Free(r); !errors.Is(err, pages.ErrInEviction) {
		violation = fmt.Errorf("Free from the EvictFunc = %v, want ErrInEviction", err)
	}
	return violation
}

// fuzzRun is one fuzz run's Pool p and model m. Its hear is the Pool's
// EvictFunc: it records the runs it is told of, in order, and checks each
// against the model and with checkEvicting. Its other methods are the ops
// both fuzz targets apply alike, to the Pool and to the model, failing t
// where the two differ. The model drops the runs an allocation evicts to make
// room, and those of Evict, before the call (Dropped); those of the
// watermarks after it, so they are still live there (ByKey).
type fuzzRun struct {
	m     *model.Region[pages.Run]
	p     *pages.Pool
	fit   pages.Fit
	heard []pages.Run
	err   error // the last violation
}

// newFuzzRun returns a fuzz run with the options the input's first byte
// picks: the fit (bit 0) and watermarks of 0.75 and 0.5 (bit 1), over a
// Pool of fuzzPages pages with the content types fuzzTypes, and a live run
// of another pool; both closed when t ends.
func newFuzzRun(t *testing.T, flags byte) (*fuzzRun, pages.Run) {
	w := &fuzzRun{fit: pages.Fit(flags & 1)}
	opts := []pages.Option{pages.WithFit(w.fit), pages.WithContentTypes(fuzzTypes...), pages.WithEvictFunc(w.hear)}
	var high, low float64
	if flags&2 != 0 {
		high, low = 0.75, 0.5
		opts = append(opts, pages.WithWatermarks(high, low))
	}
	types := make([]model.Type, len(fuzzTypes))
	for i, ct := range fuzzTypes {
		types[i] = model.Type{Priority: ct.Priority, Evictable: ct.Evictable}
	}
	w.m = model.NewRegion[pages.Run](fuzzPages, w.fit == pages.FirstFit, types, high, low)
	var foreign pages.Run
	w.p, foreign = fuzzPool(t, opts)
	return w, foreign
}

func (w *fuzzRun) hear(r pages.Run, c pages.Content) {
	w.heard = append(w.heard, r)
	x := w.m.Dropped[r]
	if x == nil {
		x = w.m.ByKey[r]
	}
	if x == nil || pages.Content(x.C) != c {
		w.err = fmt.Errorf("evicted %v of content %d, which the model does not hold", r, c)
		return
	}
	if err := checkEvicting(w.p, r, x.Tag); err != nil {
		w.err = err
	}
}

// free frees the live run x after checking its contents.
func (w *fuzzRun) free(t *testing.T, step int, x *model.Run[pages.Run]) {
	t.Helper()
	if buf, _ := w.p.Bytes(x.Key); buf[0] != x.Tag || buf[len(buf)-1] != x.Tag {
		t.Fatalf("step %d: run %v lost its contents", step, x.Key)
	}
	if err := w.p.Free(x.Key); err != nil {
		t.Fatalf("step %d: Free(%v) = %v", step, x.Key, err)
	}
	w.m.Drop(x, false)
}

// pin pins the live run x once more.
func (w *fuzzRun) pin(t *testing.T, step int, x *model.Run[pages.Run]) {
	t.Helper()
	if err := w.p.Pin(x.Key); err != nil {
		t.Fatalf("step %d: Pin(%v) = %v", step, x.Key, err)
	}
	x.Pins++
}

// unpin unpins the live run x, which fails with ErrNotPinned if it has no
// pin.
func (w *fuzzRun) unpin(t *testing.T, step int, x *model.Run[pages.Run]) {
	t.Helper()
	err := w.p.Unpin(x.Key)
	if x.Pins == 0 {
		if !errors.Is(err, pages.ErrNotPinned) {
			t.Fatalf("step %d: Unpin of an unpinned run = %v", step, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("step %d: Unpin(%v) = %v", step, x.Key, err)
	}
	w.m.Unpin(x)
}

// evict evicts n pages and returns the runs the model evicted, which the
// EvictFunc must have been told of, in order.
func (w *fuzzRun) evict(t *testing.T, step, n int) []*model.Run[pages.Run] {
	t.Helper()
	evicted, got := w.m.Evict(n)
	k, err := w.p.Evict(n)
	if err != nil || k != got || !slices.Equal(w.heard, keys(evicted)) || w.err != nil {
		t.Fatalf("step %d: Evict(%d) = %d, %v, evicting %v (%v); the model evicts %d pages: %v",
			step, n, k, err, w.heard, w.err, got, keys(evicted))
	}
	return evicted
}

// freeAll frees every live run and checks that the accounting matches the
// model and the region is one free run again.
func (w *fuzzRun) freeAll(t *testing.T) {
	t.Helper()
	for len(w.m.Live) > 0 {
		x := w.m.Live[0]
		if err := w.p.Free(x.Key); err != nil {
			t.Fatalf("freeing the rest: %v", err)
		}
		w.m.Drop(x, false)
	}
	if err := w.checkStats(); err != nil {
		t.Fatalf("after freeing everything: %v", err)
	}
	if st := w.p.Stats(); st.FreeRuns != 1 || st.LargestFree != fuzzPages {
		t.Fatalf("after freeing everything the free space is %d runs, the longest %d pages", st.FreeRuns, st.LargestFree)
	}
}

// checkStats compares the Pool's Stats with the model's (want), and its
// Snapshot with its Stats.
func (w *fuzzRun) checkStats() error {
	if got, want := w.p.Stats(), want(w.m, fuzzPageSize, w.fit); got != want {
		return fmt.Errorf("stats\n got %+v\nwant %+v", got, want)
	}
	if snap, st := w.p.Snapshot(), w.p.Stats(); snap != st {
		return fmt.Errorf("snapshot after Stats\n got %+v\nwant %+v", snap, st)
	}
	return nil
}

// want returns the Stats the model expects of a Pool of pageSize-byte pages.
func want(m *model.Region[pages.Run], pageSize int, fit pages.Fit) pages.Stats {
	c := m.Count()
	w := pages.Stats{
		PageSize: pageSize, Pages: m.Pages, Fit: fit,
		Used: c.Used, Free: c.Free, LargestFree: c.LargestFree, FreeRuns: c.FreeRuns, Runs: c.Runs, Evictable: c.Evictable,
		Pins: c.Pins, PinnedRuns: c.PinnedRuns,
		Allocs: m.Allocs, Frees: m.Frees, Evictions: m.Evictions, EvictedPages: m.EvictedPages, Failed: m.Failed, Rejected: m.Rejected,
	}
	for i := range m.Types {
		w.Content[i] = pages.ContentStats{Runs: c.ContentRuns[i], Pages: c.ContentPages[i], Evictions: m.ContentEvictions[i]}
	}
	return w
}

func keys(xs ...[]*model.Run[pages.Run]) []pages.Run {
	var out []pages.Run
	for _, l := range xs {
		for _, x := range l {
			out = append(out, x.Key)
		}
	}
	return out
}

// FuzzOps decodes bytes, with the decoder the conformance suite drives its
// allocators with (model.Region.Next), into allocations of every content
// type, frees, pins, unpins, evictions, calls with stale runs (and with the
// zero run and a foreign one beside each) and reads, on a Pool of 32 pages
// and on the model, and compares every result, every eviction and the
// stats after every step. The first byte picks the fit and the watermarks.
func FuzzOps(f *testing.F) {
	f.Add([]byte{0, 0, 3, 0, 5, 0, 7, 2, 0, 5, 1, 4, 9})
	f.Add([]byte{1, 8, 31, 16, 31, 5, 13, 5, 21, 0, 31, 6, 7})
	f.Add([]byte{2, 8, 20, 8, 20, 5, 13, 5, 21, 8, 20, 23, 3, 11, 70, 1, 85, 2, 95, 0})
	f.Add([]byte{3, 16, 7, 24, 9, 16, 12, 5, 13, 5, 21, 5, 29, 0, 15, 6, 14, 30, 84, 5, 60, 0, 87, 1, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		w, foreign := newFuzzRun(t, data[0])
		p, m := w.p, w.m
		tag := byte(0)

		src := model.NewBytes(data[1:])
		for step := 0; !src.Done(); step++ {
			op := m.Next(src)
			w.heard = w.heard[:0]
			switch x := op.Run; op.Kind {
			case model.RegionAlloc:
				room, placed := m.Evicting(op.N, op.C)
				allowed := m.Allowed(op.N)
				r, err := p.Alloc(op.N, pages.Content(op.C))
				var marked []*model.Run[pages.Run]
				if !placed {
					if !errors.Is(err, pool.ErrExhausted) {
						t.Fatalf("step %d: Alloc(%d, %d) = %v, %v; the model has no room", step, op.N, op.C, r, err)
					}
					m.Failed++
				} else {
					first, got, serr := p.Span(r)
					// pages places a run at the first page of the free run
					// its fit picks (the model's allowed runs): stricter than
					// the conformance rule, which takes any place inside one.
					in := slices.ContainsFunc(allowed, func(g [2]int) bool { return g[0] == first && op.N <= g[1] })
					if err != nil || serr != nil || got != op.N || !in {
						t.Fatalf("step %d: Alloc(%d, %d) = %v, %v (span %d+%d, %v); the model allows the free runs %v",
							step, op.N, op.C, r, err, first, got, serr, allowed)
					}
					tag++
					buf, _ := p.Bytes(r)
					for i := range buf {
						buf[i] = tag
					}
					m.Add(r, first, op.N, op.C, tag)
					marked = m.Reclaim()
				}
				if w.err != nil {
					t.Fatalf("step %d: %v", step, w.err)
				}
				if want := keys(room, marked); !slices.Equal(w.heard, want) {
					t.Fatalf("step %d: Alloc(%d, %d) evicted %v, the model %v", step, op.N, op.C, w.heard, want)
				}
			case model.RegionFree:
				w.free(t, step, x)
			case model.RegionPin:
				w.pin(t, step, x)
			case model.RegionUnpin:
				w.unpin(t, step, x)
			case model.RegionEvict:
				w.evict(t, step, op.N)
			case model.RegionStale:
				for _, c := range []struct {
					r    pages.Run
					want error
				}{{op.Key, pool.ErrStaleHandle}, {pages.Run{}, pool.ErrZeroHandle}, {foreign, pool.ErrForeignHandle}} {
					var err error
					switch op.Path {
					case 0:
						err = p.Free(c.r)
					case 1:
						err = p.Pin(c.r)
					case 2:
						err = p.Unpin(c.r)
					default:
						_, _, err = p.Span(c.r)
					}
					if !errors.Is(err, c.want) {
						t.Fatalf("step %d: call %d with %v = %v, want %v", step, op.Path, c.r, err, c.want)
					}
					m.Rejected++
				}
			case model.RegionRead:
				first, got, err := p.Span(x.Key)
				c, cerr := p.Content(x.Key)
				pins, perr := p.Pins(x.Key)
				if err != nil || cerr != nil || perr != nil || first != x.First || got != x.N || int(c) != x.C || pins != x.Pins {
					t.Fatalf("step %d: run %v reads %d+%d content %d pins %d (%v %v %v); the model has %+v",
						step, x.Key, first, got, c, pins, err, cerr, perr, *x)
				}
			}
			if err := w.checkStats(); err != nil {
				t.Fatalf("step %d (op %+v): %v", step, op, err)
			}
		}
		w.freeAll(t)
	})
}
