package pages

import (
	"fmt"

	"github.com/locus-go/locus/pool"
)

// Errors of this package. Handle rejections use pool's errors (all match
// pool.ErrInvalidHandle), exhaustion is pool.ErrExhausted and a closed or
// zero Pool returns pool.ErrClosed, so code written against pool reads the
// same here. Match them with errors.Is.
var (
	// ErrInEviction: a method that changes the Pool was called from an
	// EvictFunc.
	ErrInEviction = fmt.Errorf("pages: call from an EvictFunc: %w", pool.ErrInvalidArgument)
	// ErrNotPinned: Unpin of a run whose pin count is 0.
	ErrNotPinned = fmt.Errorf("pages: run is not pinned: %w", pool.ErrInvalidArgument)
	// ErrPinLimit: Pin of a run already pinned 2^32-1 times.
	ErrPinLimit = fmt.Errorf("pages: pin count at its limit: %w", pool.ErrInvalidArgument)
)

var (
	errZeroPool = fmt.Errorf("%w: zero pages.Pool; make it with pages.New", pool.ErrClosed)
	errNilPool  = fmt.Errorf("%w: nil *pages.Pool", pool.ErrClosed)
)

// Stats is a snapshot of a Pool's accounting. Every count is exact:
//
//	Used + Free == Pages
//	Allocs - Frees - Evictions == Runs
//	sum of Content[c].Pages == Used, sum of Content[c].Runs == Runs
//	Evictable <= Used; LargestFree <= Free
//
// Pool.Stats returns the counts as they are now, to the owner; Pool.Snapshot
// returns them as the owner last published them, to any goroutine.
type Stats struct {
	PageSize int // bytes per page
	Pages    int // pages in the region
	Fit      Fit // the placement strategy

	Used        int // pages in allocated runs, pinned or not
	Free        int // pages in free runs
	LargestFree int // pages in the longest free run
	FreeRuns    int // free runs (maximal: free neighbours are always merged)
	Runs        int // allocated runs
	Evictable   int // pages in unpinned runs of evictable content

	Pins       uint64 // pins held, summed over all runs
	PinnedRuns int    // runs with at least one pin

	Allocs       uint64 // runs handed out
	Frees        uint64 // runs freed by Free
	Evictions    uint64 // runs evicted
	EvictedPages uint64 // pages of the evicted runs
	Failed       uint64 // allocations refused with ErrExhausted
	Rejected     uint64 // runs refused: stale, double-freed, foreign, zero or out of range

	// Content holds per-content-type counts, indexed by Content.
	Content [MaxContentTypes]ContentStats
}

// ContentStats counts the runs of one content type.
type ContentStats struct {
	Runs      int    // allocated runs
	Pages     int    // pages in them
	Evictions uint64 // runs of this type evicted so far
}

// Utilization returns Used / Pages, 0 for an empty Stats.
func (s Stats) Utilization() float64 {
	if s.Pages == 0 {
		return 0
	}
	return float64(s.Used) / float64(s.Pages)
}

// Fragmentation returns the external fragmentation of the free space,
// 1 - LargestFree/Free: 0 when the free pages form one run (or none is
// free), approaching 1 when they are scattered in many small runs. The
// ratio LargestFree/Free itself is 1 - Fragmentation.
func (s Stats) Fragmentation() float64 {
	if s.Free == 0 {
		return 0
	}
	return 1 - float64(s.LargestFree)/float64(s.Free)
}
