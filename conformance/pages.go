package conformance

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/locus-go/locus/internal/typednil"
	"github.com/locus-go/locus/pages"
)

// Pages is the surface of an allocator of contiguous page runs that
// TestPages and CheckPages exercise: *pages.Pool has it. The suite takes this
// interface rather than *pages.Pool so that any allocator that keeps the
// contract of package pages (its Run, Content, Stats and errors) can be
// checked, a wrapper around a *pages.Pool (one that adds metrics or
// locking, say) or another implementation; it holds the methods the suite
// checks and nothing more.
type Pages interface {
	Alloc(n int, c pages.Content) (pages.Run, error)
	Free(r pages.Run) error
	Pin(r pages.Run) error
	Unpin(r pages.Run) error
	Pins(r pages.Run) (int, error)
	Evict(n int) (int, error)
	Bytes(r pages.Run) ([]byte, error)
	Span(r pages.Run) (first, n int, err error)
	Content(r pages.Run) (pages.Content, error)
	Stats() pages.Stats
	Snapshot() pages.Stats
	Close() error
}

// PagesConfig is what a case asks of the allocator it is given: the content
// types, the function told of evictions and the watermarks. The constructor
// passed to TestPages or CheckPages builds a fresh allocator with them, and
// with whatever else it chooses (the backing, the fit, the region's size):
//
//	p, err := pages.New(b, pageSize, append(cfg.Options(), pages.WithFit(pages.FirstFit))...)
type PagesConfig struct {
	// Types are the content types (pages.WithContentTypes); nil means the
	// default, one type (pages.DefaultContent) that is never evicted.
	Types []pages.ContentType
	// OnEvict must be told of every eviction (pages.WithEvictFunc); it is
	// never nil.
	OnEvict pages.EvictFunc
	// High and Low are the watermarks (pages.WithWatermarks); both are 0
	// when the allocator must evict only to place an allocation.
	High, Low float64
}

// Options returns the configuration as options of pages.New.
func (c PagesConfig) Options() []pages.Option {
	var opts []pages.Option
	if c.Types != nil {
		opts = append(opts, pages.WithContentTypes(c.Types...))
	}
	if c.OnEvict != nil {
		opts = append(opts, pages.WithEvictFunc(c.OnEvict))
	}
	if c.High > 0 {
		opts = append(opts, pages.WithWatermarks(c.High, c.Low))
	}
	return opts
}

// TestPages runs the page-run suite over an allocator of contiguous page
// runs. It checks, each case on fresh allocators that newP builds with the
// case's PagesConfig:
//
//   - placement: runs of every length from one page to the whole region,
//     on empty and fragmented regions, are contiguous, in range, on free
//     pages only, exactly as long as asked, placed as the fit in Stats
//     says (best fit: a smallest free run that holds them; first fit: the
//     lowest-addressed one), and never share a page or a byte; an
//     allocation fails with pool.ErrExhausted only when no free run is long
//     enough; freed runs merge with free neighbours in every order;
//   - placement at scale: as many free runs as the region holds (a region
//     of more than 32 pages has more than 16), the smallest at the highest
//     address, and best fit still finds it;
//   - handles: freed, double-freed, evicted, reused, foreign, zero and
//     forged runs are rejected on every path with the pool error that says
//     why, counted, and never reach a live run, also after 2^16+1 reuses of
//     their page (a generation kept in 16 or 17 bits wraps there); allocators
//     made by one constructor are independent, also of allocators closed
//     before they were made;
//   - narrow fields: a run pinned 2^16 times keeps its pins; with
//     pages.MaxContentTypes content types of priorities across the int
//     range, content round-trips, content values past the types are
//     refused, and eviction orders priorities as ints;
//   - pins and eviction: a new run has one pin; pinned runs and content
//     that is not evictable are never evicted; an allocation that does not
//     fit evicts unpinned runs of priority at most its own, lowest priority
//     first and least recently unpinned first, only as many as it needs,
//     and none when that could not make room; Evict and the watermarks
//     evict in the same order, as much as they must; the EvictFunc hears of
//     every eviction, in order, while the run is still valid and its pages
//     untouched, with the allocator's mutators locked out and Stats and
//     Snapshot working (an allocator that deadlocks there is reported after
//     a timeout, not left to hang the suite); evictions of one run or
//     several allocate nothing;
//   - accounting: after every operation of thousands, Stats equals a model
//     of the allocator, field by field; snapshots read by another goroutine
//     satisfy the identities of pages.Stats and never go back, and a
//     scraper of an owner that only allocates or frees, never calling
//     Stats, is fresh after the owner's next call;
//   - close semantics (Close publishes the last changes), argument errors
//     and allocation-free hot paths.
//
// newP should return a fresh allocator of 32 pages or more (64 to a few
// thousand exercise more; the suite's time grows with the region), whose
// pages are small enough that writing three bytes of each is cheap. The
// suite closes the allocators it is given. The backing under the allocator
// is not checked here: run TestBacking on it.
//
// The watchdog cannot interrupt a call that never returns (an allocator has
// no goroutines of its own to release); such a case is reported as
// ErrDeadlock and its allocators are left open.
func TestPages[P Pages](t *testing.T, newP func(t *testing.T, cfg PagesConfig) P) {
	t.Helper()
	if newP == nil {
		t.Fatal(errNilConstructor)
	}
	for _, c := range pagesCases {
		setup := pagesSetups[c.name]
		pagesSuiteOf(c).runT(t, func(t *testing.T) *pagesInst {
			in, _ := newPagesInst(setup, func(cfg PagesConfig) (Pages, error) { return newP(t, cfg), nil })
			return in
		})
	}
}

// CheckPages runs the page-run suite outside go test (it calls no testing
// function) and returns every violation found, joined with errors.Join.
// Cases that do not apply are left out, not reported.
func CheckPages[P Pages](newP func(cfg PagesConfig) (P, error)) error {
	if newP == nil {
		return errNilConstructor
	}
	var errs []error
	for _, o := range pagesOutcomes(func(cfg PagesConfig) (Pages, error) {
		p, err := newP(cfg)
		if err != nil {
			return nil, err
		}
		return p, nil
	}, callerOutside()) {
		if o.err != nil {
			errs = append(errs, o.err)
		}
	}
	return errors.Join(errs...)
}

// pagesOutcomes runs every case of the page-run suite.
func pagesOutcomes(newP func(PagesConfig) (Pages, error), where string) []outcome {
	var outs []outcome
	for _, c := range pagesCases {
		setup := pagesSetups[c.name]
		outs = append(outs, pagesSuiteOf(c).run(func() (*pagesInst, error) { return newPagesInst(setup, newP) }, where)...)
		if errors.Is(outs[len(outs)-1].err, errNilComponent) {
			break // every case would say the same
		}
	}
	return outs
}

// pagesSuiteOf is the suite of one case: each case builds its allocators
// with a configuration of its own. Nothing can release a call blocked in
// an allocator: abort does nothing.
func pagesSuiteOf(c testCase[*pagesInst]) suite[*pagesInst] {
	return suite[*pagesInst]{
		cases:   []testCase[*pagesInst]{c},
		abort:   func(*pagesInst) {},
		release: func(in *pagesInst) { _ = in.Close() },
	}
}

// pagesSetup is the configuration a case asks for.
type pagesSetup int

const (
	typedPages  pagesSetup = iota // suiteTypes, no watermarks
	plainPages                    // the default content type
	markedPages                   // suiteTypes and watermarks
	widePages                     // wideTypes, no watermarks
)

// suiteTypes are the content types of most cases: content that is never
// evicted at the highest and at the lowest priority, and evictable content
// at two priorities, two types sharing one.
var suiteTypes = []pages.ContentType{
	{Name: "weights", Priority: 9},
	{Name: "kv", Priority: 5, Evictable: true},
	{Name: "prefix", Priority: 1, Evictable: true},
	{Name: "adapter", Priority: 5, Evictable: true},
	{Name: "scratch", Priority: 0},
}

const (
	weights pages.Content = iota
	kvCache
	prefix
	adapter
	scratch
)

// wideTypes are the content types of ContentRange: as many as a pages.Pool
// takes, with priorities across the whole int range, around the edges of
// 8, 16 and 32 bits, so that a priority or a content type kept in fewer
// bits than the contract gives it shows.
var wideTypes = []pages.ContentType{
	{Name: "weights", Priority: 300},
	{Name: "kv", Priority: -1, Evictable: true},
	{Name: "prefix", Priority: 255, Evictable: true},
	{Name: "min", Priority: math.MinInt, Evictable: true},
	{Name: "max", Priority: math.MaxInt, Evictable: true},
	{Name: "p256", Priority: 256, Evictable: true},
	{Name: "n129", Priority: -129, Evictable: true},
	{Name: "p127", Priority: 127, Evictable: true},
	{Name: "p128", Priority: 128, Evictable: true},
	{Name: "n256", Priority: -256, Evictable: true},
	{Name: "p65536", Priority: 65536, Evictable: true},
	{Name: "n65537", Priority: -65537, Evictable: true},
	{Name: "max32", Priority: math.MaxInt32, Evictable: true},
	{Name: "min32", Priority: math.MinInt32, Evictable: true},
	{Name: "scratch", Priority: -1},
	{Name: "kv2", Priority: 255, Evictable: true},
}

// The watermarks of markedPages.
const (
	suiteHigh = 0.75
	suiteLow  = 0.5
)

// pagesMin is the smallest region the suite takes.
const pagesMin = 32

// pagesInst is one allocator under test, with the log of what its
// EvictFunc heard.
type pagesInst struct {
	Pages
	cfg PagesConfig
	log *evictLog
}

func newPagesInst(setup pagesSetup, build func(PagesConfig) (Pages, error)) (*pagesInst, error) {
	in := &pagesInst{log: &evictLog{}}
	in.cfg.OnEvict = in.log.record
	switch setup {
	case plainPages:
	case widePages:
		in.cfg.Types = slices.Clone(wideTypes)
	default:
		in.cfg.Types = slices.Clone(suiteTypes)
	}
	if setup == markedPages {
		in.cfg.High, in.cfg.Low = suiteHigh, suiteLow
	}
	p, err := build(in.cfg)
	if err != nil {
		return nil, err
	}
	if typednil.Is(p) {
		return nil, errNilComponent
	}
	in.Pages = p
	return in, nil
}

// alloc and evict are Alloc and Evict with the log armed: an EvictFunc call
// outside them is a violation.
func (in *pagesInst) alloc(n int, c pages.Content) (pages.Run, error) {
	in.log.armed = true
	r, err := in.Alloc(n, c)
	in.log.armed = false
	in.settle()
	return r, err
}

func (in *pagesInst) evict(n int) (int, error) {
	in.log.armed = true
	got, err := in.Evict(n)
	in.log.armed = false
	in.settle()
	return got, err
}

// evictLog records what an allocator's EvictFunc is told. It runs on the
// owner goroutine, inside Alloc and Evict.
type evictLog struct {
	armed bool // the owner is in a call that may evict
	runs  []pages.Run
	conts []pages.Content
	stray int // calls outside Alloc and Evict
	// probe, if set, checks the allocator during each call; the first
	// error it returns is kept in err.
	probe func(r pages.Run, c pages.Content) error
	err   error
	// pending is a read readInEviction gave up waiting for.
	pending chan [2]pages.Stats
}

func (l *evictLog) record(r pages.Run, c pages.Content) {
	if !l.armed {
		l.stray++
		return
	}
	l.runs = append(l.runs, r)
	l.conts = append(l.conts, c)
	if l.probe != nil && l.err == nil {
		l.err = l.probe(r, c)
	}
}

// pagesSetups are the cases that do not run on suiteTypes alone.
var pagesSetups = map[string]pagesSetup{
	"DefaultContent": plainPages,
	"Watermarks":     markedPages,
	"ContentRange":   widePages,
}

type pgCase = run[*pagesInst]

var pagesCases = []testCase[*pagesInst]{
	{name: "RunLengths", run: pgModeled(checkPagesLengths), explanation: "on an empty region a run of every length from one page to the whole region is placed, exactly as long as asked, its memory n pages with no spare capacity, and the rest of the region is still one free run that holds the rest"},
	{name: "Placement", run: pgModeled(checkPagesPlacement), explanation: "on regions fragmented into free runs of many lengths, around the boundaries of 64 and powers of two, and into as many free runs as the region holds (the smallest at the highest address), every allocation lands in a free run the fit allows (best fit: a smallest one that holds it; first fit: the lowest-addressed one), and fails with pool.ErrExhausted only when no free run is long enough"},
	{name: "NoOverlap", run: pgModeled(checkPagesNoOverlap), explanation: "through thousands of random allocations and frees of every length, live runs never share a page or a byte, every run stays in the region, and the accounting is exact after every call"},
	{name: "Coalescing", run: pgModeled(checkPagesCoalescing), explanation: "freeing runs merges them with free neighbours at once, in every order of freeing, at the region's edges and between live runs: the free runs are always maximal, and once everything is free one run of the whole region is placed"},
	{name: "Exhaustion", run: pgModeled(checkPagesExhaustion), explanation: "an allocation that no free run holds fails with pool.ErrExhausted, is counted in Failed and changes nothing else, also when enough pages are free but none contiguous"},
	{name: "Arguments", run: pgModeled(checkPagesArguments), explanation: "runs of 0, negative or more than all pages, unknown content types, a negative Evict and an Unpin of an unpinned run are refused with pool.ErrInvalidArgument (pages.ErrNotPinned for Unpin) and change nothing"},
	{name: "DefaultContent", run: pgModeled(checkPagesDefault), explanation: "without content types an allocator has one, pages.DefaultContent, which is never evicted: unpinned runs of it stay until freed, Evict evicts nothing, and other content values are refused"},
	{name: "StaleRun", run: pgModeled(checkPagesStale), explanation: "a freed run is rejected by Free, Pin, Unpin, Pins, Bytes, Span and Content with pool.ErrStaleHandle, also double-freed and after its pages were reused, hundreds of times, each rejection counted, and never reaches the new run's pages"},
	{name: "Instances", run: checkPagesInstances, explanation: "allocators made by one constructor are independent: a run of one is rejected by another on every path with pool.ErrForeignHandle, counted there and changing nothing, also by allocators made after it was closed that place the very same runs, and their regions are disjoint memory"},
	{name: "ForgedRun", run: pgModeled(checkPagesForged), explanation: "the zero run, runs past the region, runs naming a page inside a live run, a free page, or a live run with another generation or another allocator's id are rejected (pool.ErrZeroHandle, pool.ErrOutOfRange, pool.ErrStaleHandle, pool.ErrForeignHandle), thousands of times; only the exact live run is accepted"},
	{name: "Wraparound", run: pgModeled(checkPagesWrap), explanation: "counters do not wrap where a narrower field would: a run freed 2^16 allocations of its pages ago is still stale on every path and never reaches the run now on its pages, and a run pinned 2^16 times keeps every pin and is never evicted"},
	{name: "ContentRange", run: pgModeled(checkPagesContentRange), explanation: "with pages.MaxContentTypes content types of priorities across the whole int range, every content type round-trips through Alloc, Content and Stats.Content, every content value past the types is refused, and eviction follows the priorities as ints: lowest first, an allocation evicting only runs of priority at most its own"},
	{name: "Pins", run: pgModeled(checkPagesPins), explanation: "a new run has one pin; Pin and Unpin count; Unpin of an unpinned run is pages.ErrNotPinned; Free drops every pin; a pinned run is never evicted, by an allocation, by Evict or by the watermarks"},
	{name: "EvictionLRU", run: pgModeled(checkPagesLRU), explanation: "within one priority, unpinned runs are evicted least recently unpinned first, also across content types that share the priority; pinning and unpinning a run again makes it the most recent"},
	{name: "EvictionPriority", run: pgModeled(checkPagesPriority), explanation: "eviction takes the lowest priority first; an allocation evicts only runs of priority at most its content's; content that is not evictable is never evicted, whatever its priority"},
	{name: "EvictionMinimal", run: pgModeled(checkPagesMinimal), explanation: "an allocation that does not fit evicts, in order, only until a free run holds it; when even evicting every candidate could not free enough pages it evicts nothing and fails with pool.ErrExhausted"},
	{name: "Evict", run: pgModeled(checkPagesEvict), explanation: "Evict(n) evicts whole unpinned evictable runs in eviction order until at least n pages are evicted or none is left, and returns the pages it evicted; Evict(0) evicts nothing"},
	{name: "EvictFunc", run: pgModeled(checkPagesEvictFunc), explanation: "the EvictFunc hears of every eviction, in order, during Alloc or Evict only, before the run's pages are reused: the run is still valid (Bytes shows its data, Span, Content and Pins answer), Stats and Snapshot return (no lock held across the call) and Alloc, Free, Pin, Unpin, Evict and Close fail with pages.ErrInEviction; afterwards the run is stale on every path"},
	{name: "Watermarks", run: pgModeled(checkPagesWatermarks), explanation: "with watermarks, an allocation that leaves at least high×Pages pages in use evicts unpinned evictable runs, in eviction order, until at most low×Pages are in use or none is left, never the new run; inside the band nothing is evicted"},
	{name: "Accounting", run: pgModeled(checkPagesAccounting), explanation: "after every operation of thousands of random allocations, frees, pins, unpins, evictions and rejected calls, Stats equals a model field by field (pages used and free, maximal free runs, the longest, runs and pins per content, evictable pages, every counter) and every eviction is the one the model expects"},
	{name: "Snapshot", run: pgModeled(checkPagesSnapshot), explanation: "Snapshot may be read by another goroutine while the owner works: every snapshot satisfies the identities of pages.Stats, counters never go back, and after Stats it equals Stats; a Snapshot asked for while the owner only allocates, or only frees, and never calls Stats shows what the owner did before it asked: the owner publishes at its Alloc and Free when a reader asked, not only at Stats or Close"},
	{name: "Close", run: pgModeled(checkPagesClose), explanation: "after Close every call fails with pool.ErrClosed, Close again too, and Stats and Snapshot keep the accounting as it stood at Close, changes since the last Stats included"},
	{name: "ZeroAllocs", run: pgModeled(checkPagesAllocs), whole: true, explanation: "Alloc, Free, Pin, Unpin, Pins, Bytes, Span, Content, an Alloc that evicts one run or several, Evict of one run or several, a rejected Free, Stats and Snapshot allocate nothing in steady state"},
}
