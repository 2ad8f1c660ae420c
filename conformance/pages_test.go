package conformance

import (
	"testing"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/backing/mmap"
	"github.com/locus-go/locus/pages"
	"github.com/locus-go/locus/pool"
)

// The page runs of package pages pass every case of the page-run suite,
// with either fit, over the Go heap and over mapped memory;
// broken_pages_test.go checks that broken allocators fail.

// suitePages is the region of the in-tree runs: a power of two, so that
// the runs cross every power-of-two boundary below it.
const suitePages = 256

func TestInTreePages(t *testing.T) {
	heapRegion := func() (pool.Backing, error) { return heap.New(16*suitePages, 1) }
	mmapRegion := func() (pool.Backing, error) { return mmap.New(16*suitePages, 1) }
	for _, c := range []struct {
		name    string
		fit     pages.Fit
		backing func() (pool.Backing, error)
	}{
		{"heap/best fit", pages.BestFit, heapRegion},
		{"heap/first fit", pages.FirstFit, heapRegion},
		{"mmap/best fit", pages.BestFit, mmapRegion},
		{"mmap/first fit", pages.FirstFit, mmapRegion},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.name[:4] == "mmap" {
				mmapOrSkip(t)
			}
			wantOutcomes(t, pagesOutcomes(func(cfg PagesConfig) (Pages, error) {
				b, err := c.backing()
				if err != nil {
					return nil, err
				}
				return pages.New(b, 16, append(cfg.Options(), pages.WithFit(c.fit))...)
			}, "pages_test.go"))
		})
	}
}

// The public drivers run every case as a subtest.
func TestPagesDrivers(t *testing.T) {
	newP := func(cfg PagesConfig) (*pages.Pool, error) {
		b, err := heap.New(16*pagesMin, 1)
		if err != nil {
			return nil, err
		}
		return pages.New(b, 16, cfg.Options()...)
	}
	TestPages(t, func(t *testing.T, cfg PagesConfig) *pages.Pool {
		p, err := newP(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return p
	})
	if err := CheckPages(newP); err != nil {
		t.Error(err)
	}
}
