package pages_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/locus-go/locus/pages"
)

// benchPages is the region of the benchmarks: 65536 pages (64-byte pages;
// the metadata, not the memory, is what the allocator touches).
const benchPages = 1 << 16

// fragmented returns a Pool whose region was filled to three quarters with
// random runs of 1 to 64 pages, of which a random half was then freed:
// about a thousand free runs of many lengths, as after a long serving
// session, and the free quarter at the end.
func fragmented(b *testing.B, opts ...pages.Option) *pages.Pool {
	p := newPool(b, benchPages, 64, opts...)
	rng := rand.New(rand.NewPCG(7, 7))
	var runs []pages.Run
	for p.Stats().Used < benchPages*3/4 {
		r, err := p.Alloc(1+rng.IntN(64), 0)
		if err != nil {
			b.Fatal(err)
		}
		runs = append(runs, r)
	}
	for _, r := range runs {
		if rng.IntN(2) == 0 {
			if err := p.Free(r); err != nil {
				b.Fatal(err)
			}
		}
	}
	return p
}

// BenchmarkPages measures the unified-pool operations on a fragmented
// region of 65536 pages:
//
//	op=alloc: 64 Allocs of n pages, then their 64 Frees; ns/op is per
//	  batch, ns/alloc the time of the Allocs alone per Alloc (timed around
//	  each batch of 64, so it includes 1/64 of a clock read); op=alloc-free: one Alloc and its Free, the steady state of
//	  a serving loop; op=pin-unpin: one Pin and one Unpin of an evictable
//	  run (it leaves and rejoins the eviction order); op=evict: one Alloc
//	  of a page in a region full of unpinned evictable 1-page runs, which
//	  evicts the least recently unpinned one (and tells the owner), then
//	  the Unpin that makes the new run evictable in turn.
//
// Compare with: go test -run '^$' -bench BenchmarkPages -count 6 ./pages | benchstat -
func BenchmarkPages(b *testing.B) {
	for _, fit := range []pages.Fit{pages.BestFit, pages.FirstFit} {
		for _, n := range []int{1, 100} {
			b.Run(fmt.Sprintf("op=alloc/pages=%d/fit=%v", n, fit), func(b *testing.B) {
				p := fragmented(b, pages.WithFit(fit))
				batch := make([]pages.Run, 64)
				var allocTime time.Duration
				b.ReportAllocs()
				for b.Loop() {
					t0 := time.Now()
					for i := range batch {
						r, err := p.Alloc(n, 0)
						if err != nil {
							b.Fatal(err)
						}
						batch[i] = r
					}
					allocTime += time.Since(t0)
					for _, r := range batch {
						_ = p.Free(r)
					}
				}
				b.ReportMetric(float64(allocTime.Nanoseconds())/float64(b.N*len(batch)), "ns/alloc")
			})
			b.Run(fmt.Sprintf("op=alloc-free/pages=%d/fit=%v", n, fit), func(b *testing.B) {
				p := fragmented(b, pages.WithFit(fit))
				b.ReportAllocs()
				for b.Loop() {
					r, err := p.Alloc(n, 0)
					if err != nil {
						b.Fatal(err)
					}
					if err := p.Free(r); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
	kvTypes := pages.WithContentTypes(pages.ContentType{Name: "kv", Evictable: true})
	b.Run("op=pin-unpin", func(b *testing.B) {
		p := newPool(b, benchPages, 64, kvTypes, pages.WithEvictFunc(func(pages.Run, pages.Content) {}))
		var runs []pages.Run
		for range 1024 {
			r, _ := p.Alloc(4, 0)
			_ = p.Unpin(r)
			runs = append(runs, r)
		}
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			r := runs[i&1023]
			i++
			if err := p.Pin(r); err != nil {
				b.Fatal(err)
			}
			if err := p.Unpin(r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("op=evict/pages=1", func(b *testing.B) {
		evicted := 0
		p := newPool(b, benchPages, 64, kvTypes, pages.WithEvictFunc(func(pages.Run, pages.Content) { evicted++ }))
		for range benchPages {
			r, _ := p.Alloc(1, 0)
			_ = p.Unpin(r)
		}
		b.ReportAllocs()
		for b.Loop() {
			r, err := p.Alloc(1, 0)
			if err != nil {
				b.Fatal(err)
			}
			if err := p.Unpin(r); err != nil {
				b.Fatal(err)
			}
		}
		if evicted == 0 {
			b.Fatal("nothing was evicted")
		}
	})
}
