package pages_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/backing/mmap"
	"github.com/locus-go/locus/conformance"
	"github.com/locus-go/locus/pages"
	"github.com/locus-go/locus/pool"
)

// TestConformance runs the public page-run suite over pages.Pool on each
// backing with each fit.
func TestConformance(t *testing.T) {
	const pageSize, n = 64, 128
	backings := map[string]func() (pool.Backing, error){
		"heap": func() (pool.Backing, error) { return heap.New(pageSize*n, 1) },
		"mmap": func() (pool.Backing, error) { return mmap.New(pageSize*n, 1) },
	}
	for name, newB := range backings {
		for _, fit := range []pages.Fit{pages.BestFit, pages.FirstFit} {
			t.Run(fmt.Sprintf("backing=%s/fit=%v", name, fit), func(t *testing.T) {
				if _, err := newB(); errors.Is(err, errors.ErrUnsupported) {
					t.Skip(err)
				}
				conformance.TestPages(t, func(t *testing.T, cfg conformance.PagesConfig) *pages.Pool {
					b, err := newB()
					if err != nil {
						t.Fatal(err)
					}
					p, err := pages.New(b, pageSize, append(cfg.Options(), pages.WithFit(fit))...)
					if err != nil {
						t.Fatal(err)
					}
					return p
				})
			})
		}
	}
}
