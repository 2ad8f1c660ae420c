package conformance

import (
	"cmp"
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/locus-go/locus/pages"
	"github.com/locus-go/locus/pool"
)

func checkPagesAccounting(r *pgCase, m *pgModel) error {
	m.churn(r, rand.New(rand.NewPCG(23, 24)), scaled(4000), func(int) { must(m.check("")) })
	return nil
}

// pageIdentities checks the identities of pages.Stats.
func pageIdentities(st pages.Stats) error {
	var runs, used int
	var evictions uint64
	for _, c := range st.Content {
		runs += c.Runs
		used += c.Pages
		evictions += c.Evictions
	}
	switch {
	case st.Used+st.Free != st.Pages:
		return violationf(ErrAccounting, "Used %d + Free %d != Pages %d", st.Used, st.Free, st.Pages)
	case st.Allocs-st.Frees-st.Evictions != uint64(st.Runs):
		return violationf(ErrAccounting, "Allocs %d - Frees %d - Evictions %d != Runs %d", st.Allocs, st.Frees, st.Evictions, st.Runs)
	case used != st.Used || runs != st.Runs:
		return violationf(ErrAccounting, "the content types hold %d pages in %d runs; Used %d, Runs %d", used, runs, st.Used, st.Runs)
	case evictions != st.Evictions || st.EvictedPages < st.Evictions:
		return violationf(ErrAccounting, "the content types count %d evictions, Evictions %d, EvictedPages %d", evictions, st.Evictions, st.EvictedPages)
	case st.Evictable > st.Used || st.LargestFree > st.Free || st.FreeRuns > st.Free || (st.Free > 0) != (st.LargestFree > 0) || (st.Free > 0) != (st.FreeRuns > 0):
		return violationf(ErrAccounting, "Evictable %d, Used %d, Free %d, LargestFree %d, FreeRuns %d do not fit together", st.Evictable, st.Used, st.Free, st.LargestFree, st.FreeRuns)
	case st.PinnedRuns > st.Runs || st.Pins < uint64(st.PinnedRuns):
		return violationf(ErrAccounting, "Pins %d, PinnedRuns %d, Runs %d do not fit together", st.Pins, st.PinnedRuns, st.Runs)
	}
	return nil
}

// pagesNotBehind checks that st, read after prev, went back on no counter
// and changed no constant.
func pagesNotBehind(prev, st pages.Stats) error {
	if st.PageSize != prev.PageSize || st.Pages != prev.Pages || st.Fit != prev.Fit {
		return violationf(ErrAccounting, "PageSize, Pages or Fit changed: %d %d %v, then %d %d %v", prev.PageSize, prev.Pages, prev.Fit, st.PageSize, st.Pages, st.Fit)
	}
	if st.Allocs < prev.Allocs || st.Frees < prev.Frees || st.Evictions < prev.Evictions || st.EvictedPages < prev.EvictedPages ||
		st.Failed < prev.Failed || st.Rejected < prev.Rejected {
		return violationf(ErrAccounting, "a counter went back: %+v, then %+v", prev, st)
	}
	for c := range st.Content {
		if st.Content[c].Evictions < prev.Content[c].Evictions {
			return violationf(ErrAccounting, "content %d's evictions went back from %d to %d", c, prev.Content[c].Evictions, st.Content[c].Evictions)
		}
	}
	return nil
}

// checkPagesSnapshotFresh: an owner that never calls Stats keeps a scraper
// fresh. The owner changes the accounting (k allocations, or k frees)
// without calling Stats; a Snapshot asked for later, past the freshness
// window of the last publication, gets the change once the owner calls
// serve ("Alloc": allocations only, "Free": frees only, each while it can;
// else the other). The owner publishes at those calls when a reader asked,
// not only at Stats or Close.
func checkPagesSnapshotFresh(ctx context.Context, m *pgModel, serve string) {
	in := m.in
	const k = 3
	var runs []*pgRun
	alloc := func() {
		x := m.alloc(1, weights)
		require(x != nil, ErrContract, "Alloc of one page failed with %d of %d pages in use", m.Used, m.Pages)
		runs = append(runs, x)
	}
	before := in.Stats() // publishes
	for range k {
		alloc()
	}
	counter := func(st pages.Stats) uint64 { return st.Allocs }
	if serve == "Free" {
		// Allocate the runs the owner frees while the scraper waits, then
		// change the accounting by frees only.
		for len(runs) < m.Pages/2 {
			alloc()
		}
		before = in.Stats() // publishes
		for _, x := range runs[:k] {
			m.free(x)
		}
		runs = runs[k:]
		counter = func(st pages.Stats) uint64 { return st.Frees }
	}
	time.Sleep(5 * time.Millisecond) // the Stats publication is no longer fresh
	got := make(chan pages.Stats, 1)
	go func() { got <- in.Snapshot() }()
	var st pages.Stats
wait:
	for calls := 0; ; calls++ {
		select {
		case st = <-got:
			break wait
		case <-ctx.Done():
			must(violationf(ErrDeadlock, "Snapshot did not return while the owner called %s", serve))
		default:
		}
		if len(runs) > 0 && (serve == "Free" || !m.Fits(1)) {
			m.free(runs[len(runs)-1])
			runs = runs[:len(runs)-1]
		} else {
			alloc()
		}
		// Sleep, not spin, between calls: under testing/synctest the
		// clock, and with it a Snapshot's deadline, moves only while
		// every goroutine waits.
		time.Sleep(50 * time.Microsecond)
	}
	mustIn(pageIdentities(st), "a Snapshot served by %s", serve)
	require(counter(st) >= counter(before)+k, ErrAccounting, "a Snapshot asked for while the owner only called %s, after %d calls of %s that no Stats followed, says %d of them, want %d or more: the owner does not publish at %s when asked (a scraper of an owner that never calls Stats is stale forever)",
		serve, k, serve, counter(st), counter(before)+k, serve)
	for _, x := range runs {
		m.free(x)
	}
	must(m.check("after the freshness check"))
}

func checkPagesSnapshot(r *pgCase, m *pgModel) error {
	in, ctx := m.in, r.ctx
	mustIn(pageIdentities(in.Snapshot()), "the first snapshot")
	for _, serve := range []string{"Alloc", "Free"} {
		checkPagesSnapshotFresh(ctx, m, serve)
	}
	quit := make(chan struct{})
	var scrape crew
	scraper(&scrape, ctx, quit, in.Snapshot, func(prev, st pages.Stats) error {
		return cmp.Or(pageIdentities(st), pagesNotBehind(prev, st))
	})
	// The churn's failure waits for the scrapers, and is reported with
	// theirs.
	err := attempt(func() {
		m.churn(r, rand.New(rand.NewPCG(25, 26)), scaled(3000), func(step int) {
			if step%4 != 0 {
				return
			}
			// The owner's own read, right after Stats published: the same.
			if st, snap := in.Stats(), in.Snapshot(); st != snap {
				must(violationf(ErrAccounting, "Snapshot right after Stats differs from it: %s", fieldDiff(snap, st)))
			}
			must(m.check(""))
		})
	})
	close(quit)
	must(errors.Join(err, scrape.wait(ctx, "scrapers")))
	st, snap := in.Stats(), in.Snapshot()
	require(st == snap, ErrAccounting, "Snapshot right after Stats differs from it: %s", fieldDiff(snap, st))
	return nil
}

func checkPagesClose(r *pgCase, m *pgModel) error {
	in := m.in
	rng := rand.New(rand.NewPCG(27, 28))
	m.churn(r, rng, 200, nil)
	x := m.alloc(1, kvCache)
	var live pages.Run
	if x != nil {
		live = x.Key
	} else {
		live = m.Live[0].Key
	}
	in.Stats() // publishes; the change below must be published by Close
	if len(m.Live) > 1 {
		other := m.Live[0]
		if other.Key == live {
			other = m.Live[1]
		}
		m.free(other)
	} else {
		m.alloc(1, weights)
	}
	final := m.want()
	mustOK("Close", in.Close())
	_, allocErr := in.alloc(1, weights)
	_, evictErr := in.evict(1)
	_, pinsErr := in.Pins(live)
	_, bytesErr := in.Bytes(live)
	_, _, spanErr := in.Span(live)
	_, contErr := in.Content(live)
	must(allFail(pool.ErrClosed, "after Close", []call{
		{"Alloc", allocErr}, {"Evict", evictErr}, {"Pins", pinsErr}, {"Bytes", bytesErr}, {"Span", spanErr},
		{"Content", contErr}, {"Free", in.Free(live)}, {"Pin", in.Pin(live)}, {"Unpin", in.Unpin(live)},
		{"Free of the zero run", in.Free(pages.Run{})}, {"Close", in.Close()},
	}))
	st := in.Stats()
	require(st == final, ErrAccounting, "Stats after Close differs from Stats at Close: %s", fieldDiff(st, final))
	snap := in.Snapshot()
	require(snap == final, ErrAccounting, "Snapshot after Close differs from Stats at Close: %s", fieldDiff(snap, final))
	return nil
}

func checkPagesAllocs(r *pgCase, m *pgModel) error {
	in := m.in
	keep := m.alloc(3, kvCache)
	require(keep != nil, ErrContract, "Alloc(3) on an empty region failed")
	stale := m.alloc(2, kvCache)
	require(stale != nil, ErrContract, "Alloc(2) failed")
	m.free(stale)
	// Owner calls on a region with room.
	must(allocFree(r.allocRuns(), []namedOp{
		{"Alloc+Free", func() error {
			r, err := in.alloc(5, kvCache)
			if err != nil {
				return contractErr("Alloc", err)
			}
			return contractErr("Free", in.Free(r))
		}},
		{"Pin+Unpin", func() error {
			if err := in.Pin(keep.Key); err != nil {
				return contractErr("Pin", err)
			}
			return contractErr("Unpin", in.Unpin(keep.Key))
		}},
		{"Pins+Bytes+Span+Content", func() error {
			_, e1 := in.Pins(keep.Key)
			_, e2 := in.Bytes(keep.Key)
			_, _, e3 := in.Span(keep.Key)
			_, e4 := in.Content(keep.Key)
			return contractErr("a read of a live run", errors.Join(e1, e2, e3, e4))
		}},
		{"a rejected Free", func() error { return wantIs("Free of a stale run", in.Free(stale.Key), pool.ErrStaleHandle) }},
		{"Stats and Snapshot", func() error { in.Stats(); in.Snapshot(); return nil }},
	}))
	// Evictions: the rest of the region in one unpinned run, evicted by
	// each Alloc of its length, or by Evict.
	m.alloc(m.Pages-3, kvCache)
	log := in.log
	again := func() error {
		r, err := in.alloc(m.Pages-3, kvCache)
		if err != nil {
			return contractErr("Alloc of the evictable rest of the region", err)
		}
		if len(log.runs) != 1 {
			return violationf(ErrContract, "making room for %d pages evicted %d runs, want the one run there", m.Pages-3, len(log.runs))
		}
		log.runs, log.conts = log.runs[:0], log.conts[:0]
		return contractErr("Unpin", in.Unpin(r))
	}
	mustOK("Unpin", in.Unpin(m.Live[len(m.Live)-1].Key))
	log.runs, log.conts = log.runs[:0], log.conts[:0]
	must(allocFree(r.allocRuns(), []namedOp{
		{"an Alloc that evicts", again},
		{"Evict", func() error {
			if n, err := in.evict(1); n != m.Pages-3 || err != nil {
				return violationf(ErrContract, "Evict(1) with one unpinned run of %d pages = %d, %v", m.Pages-3, n, err)
			}
			log.runs, log.conts = log.runs[:0], log.conts[:0]
			r, err := in.alloc(m.Pages-3, kvCache)
			if err != nil {
				return contractErr("Alloc", err)
			}
			return contractErr("Unpin", in.Unpin(r))
		}},
	}))
	// The same with the rest of the region in three unpinned runs: each
	// Alloc of its length, or Evict, evicts all three.
	rest := m.Pages - 3
	n, err := in.evict(rest)
	require(n == rest && err == nil, ErrContract, "Evict(%d) with one unpinned run of %d pages = %d, %v", rest, rest, n, err)
	thirds := [3]int{rest / 3, rest / 3, rest - 2*(rest/3)}
	refill := func() error {
		log.runs, log.conts = log.runs[:0], log.conts[:0]
		for _, n := range thirds {
			r, err := in.alloc(n, kvCache)
			if err != nil {
				return contractErr("Alloc", err)
			}
			if err := in.Unpin(r); err != nil {
				return contractErr("Unpin", err)
			}
		}
		return nil
	}
	must(refill())
	return allocFree(r.allocRuns(), []namedOp{
		{"an Alloc that evicts three runs", func() error {
			r, err := in.alloc(rest, kvCache)
			if err != nil {
				return contractErr("Alloc of the evictable rest of the region", err)
			}
			if len(log.runs) != 3 {
				return violationf(ErrContract, "making room for %d pages in three unpinned runs of %v pages evicted %d runs", rest, thirds, len(log.runs))
			}
			if err := in.Free(r); err != nil {
				return contractErr("Free", err)
			}
			return refill()
		}},
		{"Evict of three runs", func() error {
			if n, err := in.evict(rest); n != rest || err != nil {
				return violationf(ErrContract, "Evict(%d) with three unpinned runs of %v pages = %d, %v", rest, thirds, n, err)
			}
			return refill()
		}},
	})
}
