package pages_test

import (
	"errors"
	"fmt"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/pages"
	"github.com/locus-go/locus/pool"
)

// Allocate contiguous runs of pages from one region; a freed run merges
// with its free neighbours.
func Example() {
	b, err := heap.New(4096*64, 1) // one region of 64 pages of 4 KiB
	if err != nil {
		panic(err)
	}
	p, err := pages.New(b, 4096)
	if err != nil {
		panic(err)
	}
	defer p.Close()

	a, _ := p.Alloc(16, pages.DefaultContent)
	c, _ := p.Alloc(8, pages.DefaultContent)
	buf, _ := p.Bytes(c)
	fmt.Println(a.First(), c.First(), len(buf))

	_ = p.Free(a)
	st := p.Stats()
	fmt.Printf("free %d in %d runs, fragmentation %.2f\n", st.Free, st.FreeRuns, st.Fragmentation())
	_ = p.Free(c) // merges with both neighbours
	st = p.Stats()
	fmt.Printf("free %d in %d runs, fragmentation %.2f\n", st.Free, st.FreeRuns, st.Fragmentation())
	// Output:
	// 0 16 32768
	// free 56 in 2 runs, fragmentation 0.29
	// free 64 in 1 runs, fragmentation 0.00
}

// A unified pool: weights stay, KV cache runs are evicted least recently
// unpinned first when room is needed, and the owner hears of every
// eviction.
func ExampleWithEvictFunc() {
	const (
		weights pages.Content = iota
		kvCache
	)
	owners := map[pages.Run]string{}
	b, _ := heap.New(4096*8, 1)
	p, _ := pages.New(b, 4096,
		pages.WithContentTypes(
			pages.ContentType{Name: "weights", Priority: 10},
			pages.ContentType{Name: "kv", Priority: 1, Evictable: true},
		),
		pages.WithEvictFunc(func(r pages.Run, c pages.Content) {
			fmt.Println("evicted", owners[r]) // copy it out with p.Bytes(r) here if needed
			delete(owners, r)
		}),
	)
	defer p.Close()

	w, _ := p.Alloc(4, weights)
	owners[w] = "weights"
	for _, req := range []string{"req-1", "req-2"} {
		r, _ := p.Alloc(2, kvCache) // pinned while the request runs
		owners[r] = req
		_ = p.Unpin(r) // finished: its cache may be evicted
	}
	r, _ := p.Alloc(2, kvCache) // the region is full: req-1 goes
	owners[r] = "req-3"
	_, err := p.Alloc(8, kvCache)
	fmt.Println(errors.Is(err, pool.ErrExhausted), p.Stats().Evictions)
	// Output:
	// evicted req-1
	// true 1
}

// Watermarks evict ahead of need: at 75 % utilization down to 50 %.
func ExampleWithWatermarks() {
	b, _ := heap.New(64*8, 1)
	p, _ := pages.New(b, 64,
		pages.WithContentTypes(pages.ContentType{Name: "kv", Evictable: true}),
		pages.WithEvictFunc(func(r pages.Run, _ pages.Content) { fmt.Println("evicted run at page", r.First()) }),
		pages.WithWatermarks(0.75, 0.5),
	)
	defer p.Close()
	for range 3 {
		r, _ := p.Alloc(2, 0)
		_ = p.Unpin(r)
	}
	fmt.Printf("%.2f\n", p.Stats().Utilization())
	// Output:
	// evicted run at page 0
	// 0.50
}

// First fit places runs in address order; best fit (the default) in the
// smallest hole that holds them.
func ExampleWithFit() {
	for _, fit := range []pages.Fit{pages.BestFit, pages.FirstFit} {
		b, _ := heap.New(16, 1)
		p, _ := pages.New(b, 1, pages.WithFit(fit))
		var holes []pages.Run
		for _, n := range []int{4, 1, 2, 1} { // [hole 4][live][hole 2][live][free 8]
			r, _ := p.Alloc(n, 0)
			if n > 1 {
				holes = append(holes, r)
			}
		}
		for _, h := range holes {
			_ = p.Free(h)
		}
		r, _ := p.Alloc(2, 0)
		fmt.Println(fit, r.First())
		p.Close()
	}
	// Output:
	// best-fit 5
	// first-fit 0
}
