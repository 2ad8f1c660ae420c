package conformance

import (
	"testing"

	"github.com/locus-go/locus/pages"
	"github.com/locus-go/locus/pool"
)

// sharedRegions returns a constructor of backings that all hand out one
// region of size bytes: pools over them share their pages.
func sharedRegions(size int) func() pool.Backing {
	region := mustHeapBacking(size, 1)
	return func() pool.Backing { return sharedBacking{region} }
}

// realPages builds a pages.Pool of npages pages of 16 bytes over what
// backing returns.
func realPages(fit pages.Fit, backing func() pool.Backing) func(PagesConfig) (Pages, error) {
	return func(cfg PagesConfig) (Pages, error) {
		return pages.New(backing(), 16, append(cfg.Options(), pages.WithFit(fit))...)
	}
}

func pagesOf0(ctor func(PagesConfig) (Pages, error)) func() ([]outcome, func()) {
	return func() ([]outcome, func()) { return pagesOutcomes(ctor, "broken_test.go"), nil }
}

func refPagesOf(d pgDefect) func() ([]outcome, func()) {
	return pagesOf0(newRefPages(d, pages.BestFit, 64))
}

// brokenPages are the page-run allocators the suite must reject.
func brokenPages() []brokenComponent {
	return []brokenComponent{
		{name: "pages: reference, best fit", run: refPagesOf(pgCorrect)},
		{name: "pages: reference, first fit", run: pagesOf0(newRefPages(pgCorrect, pages.FirstFit, 64))},
		{name: "pages: reference, the smallest region", run: pagesOf0(newRefPages(pgCorrect, pages.BestFit, pagesMin))},
		{
			name: "pages: freed runs never merge",
			run:  refPagesOf(pgNoMerge),
			want: catches(ErrContract, "Close", "ContentRange", "EvictionLRU", "EvictionMinimal", "EvictionPriority", "Instances", "Placement", "Watermarks", "Wraparound", "ZeroAllocs").and(ErrAccounting, "Accounting", "Coalescing", "Evict", "EvictFunc", "NoOverlap", "Pins", "RunLengths", "Snapshot", "StaleRun"),
		},
		{
			name: "pages: a freed run still resolves",
			run:  refPagesOf(pgNoGeneration),
			want: catches(ErrAliased, "Accounting", "Close", "ContentRange", "EvictFunc", "ForgedRun", "Pins", "Snapshot", "StaleRun", "Watermarks", "Wraparound").and(ErrContract, "ZeroAllocs"),
		},
		{
			name: "pages: another allocator's runs are taken as its own",
			run:  refPagesOf(pgIgnoresOwner),
			want: catches(ErrAliased, "ForgedRun", "Instances"),
		},
		{
			name: "pages: a run after a live one starts on its last page",
			run:  refPagesOf(pgOverlap),
			want: catches(ErrAliased, "Close", "EvictFunc", "EvictionLRU", "EvictionMinimal", "EvictionPriority", "Instances", "NoOverlap", "Placement", "StaleRun", "Wraparound", "ZeroAllocs").and(ErrContract, "Accounting", "Coalescing", "ContentRange", "DefaultContent", "Evict", "Exhaustion", "ForgedRun", "Pins", "Snapshot", "Watermarks"),
		},
		{
			name: "pages: best fit takes the largest free run",
			run:  refPagesOf(pgWorstFit),
			want: catches(ErrContract, "Accounting", "Close", "ContentRange", "EvictFunc", "EvictionLRU", "EvictionPriority", "NoOverlap", "Pins", "Placement", "Snapshot", "Watermarks"),
		},
		{
			name: "pages: refused allocations are not counted",
			run:  refPagesOf(pgFailedUncounted),
			want: catches(ErrAccounting, "Accounting", "Close", "ContentRange", "DefaultContent", "EvictFunc", "EvictionMinimal", "EvictionPriority", "Exhaustion", "NoOverlap", "Pins", "Placement", "RunLengths", "Snapshot", "Watermarks", "Wraparound"),
		},
		{
			name: "pages: Alloc(0) hands out a page",
			run:  refPagesOf(pgZeroPages),
			want: catches(ErrContract, "Arguments"),
		},
		{
			name: "pages: a run of the whole region is refused",
			run:  refPagesOf(pgNoWholeRegion),
			want: catches(ErrContract, "Accounting", "Coalescing", "ContentRange", "DefaultContent", "EvictionMinimal", "Exhaustion", "Instances", "NoOverlap", "Pins", "RunLengths", "Watermarks", "Wraparound"),
		},
		{
			name: "pages: Bytes has spare capacity",
			run:  refPagesOf(pgSpareCap),
			want: catches(ErrContract, "Accounting", "Arguments", "Close", "Coalescing", "ContentRange", "DefaultContent", "Evict", "EvictFunc", "EvictionLRU", "EvictionMinimal", "EvictionPriority", "Exhaustion", "ForgedRun", "Instances", "NoOverlap", "Pins", "Placement", "RunLengths", "Snapshot", "StaleRun", "Watermarks", "Wraparound", "ZeroAllocs"),
		},
		{
			name: "pages: Close closes nothing",
			run:  refPagesOf(pgOpenAfterClose),
			want: catches(ErrContract, "Close"),
		},
		{
			name: "pages: evicts the most recently unpinned first",
			run:  refPagesOf(pgMRU),
			want: catches(ErrOrder, "Accounting", "Close", "ContentRange", "Evict", "EvictFunc", "EvictionLRU", "EvictionMinimal", "EvictionPriority", "Pins", "Snapshot", "Watermarks", "Wraparound"),
		},
		{
			name: "pages: evicts the highest priority first",
			run:  refPagesOf(pgHighFirst),
			want: catches(ErrOrder, "Accounting", "ContentRange", "Evict", "EvictFunc", "EvictionPriority", "Pins", "Snapshot", "Watermarks"),
		},
		{
			name: "pages: evicts pinned runs",
			run:  refPagesOf(pgEvictsPinned),
			want: catches(ErrContract, "Accounting", "Close", "ContentRange", "Evict", "EvictFunc", "EvictionLRU", "EvictionMinimal", "EvictionPriority", "NoOverlap", "Pins", "RunLengths", "Snapshot", "Watermarks", "Wraparound", "ZeroAllocs"),
		},
		{
			name: "pages: an allocation evicts runs of any priority",
			run:  refPagesOf(pgAnyPriority),
			want: catches(ErrContract, "Accounting", "Close", "ContentRange", "EvictFunc", "EvictionPriority", "Pins", "Snapshot", "Watermarks"),
		},
		{
			name: "pages: evicts content that is not evictable",
			run:  refPagesOf(pgEvictsAnyContent),
			want: catches(ErrContract, "Accounting", "Close", "ContentRange", "DefaultContent", "Evict", "EvictFunc", "EvictionPriority", "Pins", "Snapshot", "Watermarks"),
		},
		{
			name: "pages: an allocation that must evict evicts every candidate",
			run:  refPagesOf(pgGreedy),
			want: catches(ErrContract, "Accounting", "Close", "ContentRange", "EvictFunc", "EvictionLRU", "EvictionMinimal", "EvictionPriority", "Pins", "Snapshot"),
		},
		{
			name: "pages: an allocation evicts even when that cannot make room",
			run:  refPagesOf(pgHopeless),
			want: catches(ErrContract, "Accounting", "Close", "ContentRange", "EvictFunc", "EvictionMinimal", "EvictionPriority", "Pins", "Snapshot", "Watermarks"),
		},
		{
			name: "pages: the EvictFunc hears after the pages were cleared",
			run:  refPagesOf(pgNotifyLate),
			want: catches(ErrAliased, "EvictFunc"),
		},
		{
			name: "pages: an evicted run still answers",
			run:  refPagesOf(pgEvictedValid),
			want: catches(ErrContract, "Accounting", "Close", "ContentRange", "Evict", "EvictFunc", "EvictionLRU", "EvictionMinimal", "EvictionPriority", "Pins", "Snapshot", "Watermarks", "ZeroAllocs"),
		},
		{
			name: "pages: the EvictFunc may change the allocator",
			run:  refPagesOf(pgMutableInEviction),
			want: catches(ErrContract, "EvictFunc"),
		},
		{
			name: "pages: every fifth eviction is not told",
			run:  refPagesOf(pgSilentEviction),
			want: catches(ErrLost, "Accounting", "Close", "ContentRange", "Evict", "EvictFunc", "EvictionMinimal", "Snapshot").and(ErrOrder, "EvictionLRU", "EvictionPriority", "Pins", "Watermarks", "Wraparound").and(ErrContract, "ZeroAllocs"),
		},
		{
			name: "pages: the watermarks are ignored",
			run:  refPagesOf(pgNoWatermarks),
			want: catches(ErrContract, "Watermarks"),
		},
		{
			name: "pages: past the high watermark everything evictable goes",
			run:  refPagesOf(pgDrainsToZero),
			want: catches(ErrContract, "Watermarks"),
		},
		{
			name: "pages: Evict(n) evicts one run too many",
			run:  refPagesOf(pgEvictOneMore),
			want: catches(ErrContract, "Accounting", "ContentRange", "Evict", "EvictFunc", "EvictionLRU", "Pins", "Watermarks"),
		},
		{
			name: "pages: unpinning again keeps the old place in the eviction order",
			run:  refPagesOf(pgUnpinKeepsPlace),
			want: catches(ErrOrder, "Accounting", "Close", "ContentRange", "Evict", "EvictFunc", "EvictionLRU", "EvictionMinimal", "EvictionPriority", "Pins", "Snapshot", "Watermarks"),
		},
		{
			name: "pages: Unpin of an unpinned run succeeds",
			run:  refPagesOf(pgUnpinBelowZero),
			want: catches(ErrContract, "Accounting", "Arguments", "Close", "ContentRange", "EvictFunc", "Pins", "Snapshot", "Watermarks"),
		},
		{
			name: "pages: snapshots are torn",
			run:  refPagesOf(pgTornSnapshot),
			want: catches(ErrAccounting, "Close", "EvictFunc", "Snapshot"),
		},
		{
			name: "pages: every 64th Alloc allocates",
			run:  refPagesOf(pgAllocates),
			want: catches(ErrAllocs, "ZeroAllocs"),
		},
		{
			name: "pages: refused Spans are not counted",
			run:  refPagesOf(pgSpanUncounted),
			want: catches(ErrAccounting, "Accounting", "Close", "ContentRange", "EvictFunc", "ForgedRun", "Instances", "Pins", "Snapshot", "StaleRun", "Watermarks", "Wraparound"),
		},
		{
			name: "pages: Stats after Close reports nothing",
			run:  refPagesOf(pgStatsAfterClose),
			want: catches(ErrAccounting, "Close"),
		},
		{
			name: "pages: new runs have no pin",
			run:  refPagesOf(pgNewRunUnpinned),
			want: catches(ErrContract, "Accounting", "Arguments", "Close", "Coalescing", "ContentRange", "DefaultContent", "Evict", "EvictFunc", "EvictionLRU", "EvictionMinimal", "EvictionPriority", "Exhaustion", "ForgedRun", "Instances", "NoOverlap", "Pins", "Placement", "RunLengths", "Snapshot", "StaleRun", "Watermarks", "Wraparound", "ZeroAllocs"),
		},
		{
			name: "pages: Free evicts, outside Alloc",
			run:  refPagesOf(pgStrayEvictFunc),
			want: catches(ErrContract, "Watermarks"),
		},
		{
			name: "pages: first fit takes the highest-addressed free run",
			run:  pagesOf0(newRefPages(pgLastFit, pages.FirstFit, 64)),
			want: catches(ErrContract, "Accounting", "Close", "ContentRange", "EvictFunc", "EvictionLRU", "EvictionPriority", "Exhaustion", "NoOverlap", "Pins", "Placement", "Snapshot", "Watermarks"),
		},
		{
			name: "pages: pools over one region",
			run: func() ([]outcome, func()) {
				return pagesOutcomes(realPages(pages.BestFit, sharedRegions(16*64)), "broken_test.go"), nil
			},
			want: catches(ErrAliased, "Instances"),
		},

		// Narrow fields, identity, placement and allocations at scale,
		// freshness at Close, re-entrance (issue #23).
		{
			name: "pages: generations are kept in 16 bits",
			want: catches(ErrAliased, "Wraparound"),
			run:  refPagesOf(pgGen16),
		},
		{
			name: "pages: pin counts are kept in 16 bits",
			want: catches(ErrContract, "Wraparound"),
			run:  refPagesOf(pgPin16),
		},
		{
			name: "pages: priorities are kept in 8 bits",
			want: catches(ErrOrder, "ContentRange"),
			run:  refPagesOf(pgPrio8),
		},
		{
			name: "pages: content types are kept in 3 bits",
			want: catches(ErrContract, "Arguments", "ContentRange"),
			run:  refPagesOf(pgContent3),
		},
		{
			name: "pages: the ids of closed allocators are reused",
			want: catches(ErrAliased, "Instances"),
			run:  refPagesOf(pgRecycledIDs),
		},
		{
			name: "pages: best fit looks at the first 16 free runs that fit only",
			want: catches(ErrContract, "Placement"),
			run:  refPagesOf(pgBestFit16),
		},
		{
			name: "pages: evicting two runs or more allocates",
			want: catches(ErrAllocs, "ZeroAllocs"),
			run:  refPagesOf(pgEvictAllocs),
		},
		{
			name: "pages: Close does not publish",
			want: catches(ErrAccounting, "Close"),
			run:  refPagesOf(pgCloseUnpublished),
		},
		{
			name: "pages: Snapshot is published at Stats only, never when a reader asked",
			want: catches(ErrAccounting, "Snapshot"),
			run:  refPagesOf(pgStatsOnlyPublish),
		},
		{
			name: "pages: Stats from the EvictFunc deadlocks",
			want: catches(ErrDeadlock, "EvictFunc"),
			run: pagesOf0(func(cfg PagesConfig) (Pages, error) {
				p, err := newRefPages(pgCorrect, pages.BestFit, 64)(cfg)
				return &lockedPages{Pages: p, lock: make(chan struct{}, 1)}, err
			}),
		},
	}
}

// lockedPages holds a lock across Alloc and Evict, EvictFunc included, and
// takes it again in Stats and Snapshot: an EvictFunc that reads the stats,
// as the contract allows, deadlocks. (An Alloc or Evict from the EvictFunc
// itself gets pages.ErrInEviction, as it should.) The lock is a channel,
// on which a goroutine is durably blocked in a testing/synctest bubble.
type lockedPages struct {
	Pages
	lock chan struct{}
	held bool // the owner is in Alloc or Evict
}

func (p *lockedPages) Alloc(n int, c pages.Content) (pages.Run, error) {
	if p.held {
		return p.Pages.Alloc(n, c)
	}
	p.lock <- struct{}{}
	p.held = true
	defer func() { p.held = false; <-p.lock }()
	return p.Pages.Alloc(n, c)
}

func (p *lockedPages) Evict(n int) (int, error) {
	if p.held {
		return p.Pages.Evict(n)
	}
	p.lock <- struct{}{}
	p.held = true
	defer func() { p.held = false; <-p.lock }()
	return p.Pages.Evict(n)
}

func (p *lockedPages) Stats() pages.Stats {
	p.lock <- struct{}{}
	defer func() { <-p.lock }()
	return p.Pages.Stats()
}

// Snapshot takes the lock and lets it go before it reads: a Snapshot waits
// for the owner's next call, which must not wait for Snapshot's lock.
func (p *lockedPages) Snapshot() pages.Stats {
	p.lock <- struct{}{}
	<-p.lock
	return p.Pages.Snapshot()
}

func TestSuiteRejectsBrokenPages(t *testing.T) { rejectsBroken(t, brokenPages(), false) }
