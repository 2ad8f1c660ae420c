package conformance

import (
	"github.com/locus-go/locus/internal/typednil"

	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locus-go/locus/internal/race"
	"github.com/locus-go/locus/pages"
	"github.com/locus-go/locus/pool"
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
	return joinOutcomes(pagesOutcomes(func(cfg PagesConfig) (Pages, error) {
		p, err := newP(cfg)
		if err != nil {
			return nil, err
		}
		return p, nil
	}, callerOutside()))
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

// joinOutcomes joins the errors of outs.
func joinOutcomes(outs []outcome) error {
	var errs []error
	for _, o := range outs {
		if o.err != nil {
			errs = append(errs, o.err)
		}
	}
	return errors.Join(errs...)
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
	{
		name:        "RunLengths",
		explanation: "on an empty region a run of every length from one page to the whole region is placed, exactly as long as asked, its memory n pages with no spare capacity, and the rest of the region is still one free run that holds the rest",
		run:         checkPagesLengths,
	},
	{
		name:        "Placement",
		explanation: "on regions fragmented into free runs of many lengths, around the boundaries of 64 and powers of two, and into as many free runs as the region holds (the smallest at the highest address), every allocation lands in a free run the fit allows (best fit: a smallest one that holds it; first fit: the lowest-addressed one), and fails with pool.ErrExhausted only when no free run is long enough",
		run:         checkPagesPlacement,
	},
	{
		name:        "NoOverlap",
		explanation: "through thousands of random allocations and frees of every length, live runs never share a page or a byte, every run stays in the region, and the accounting is exact after every call",
		run:         checkPagesNoOverlap,
	},
	{
		name:        "Coalescing",
		explanation: "freeing runs merges them with free neighbours at once, in every order of freeing, at the region's edges and between live runs: the free runs are always maximal, and once everything is free one run of the whole region is placed",
		run:         checkPagesCoalescing,
	},
	{
		name:        "Exhaustion",
		explanation: "an allocation that no free run holds fails with pool.ErrExhausted, is counted in Failed and changes nothing else, also when enough pages are free but none contiguous",
		run:         checkPagesExhaustion,
	},
	{
		name:        "Arguments",
		explanation: "runs of 0, negative or more than all pages, unknown content types, a negative Evict and an Unpin of an unpinned run are refused with pool.ErrInvalidArgument (pages.ErrNotPinned for Unpin) and change nothing",
		run:         checkPagesArguments,
	},
	{
		name:        "DefaultContent",
		explanation: "without content types an allocator has one, pages.DefaultContent, which is never evicted: unpinned runs of it stay until freed, Evict evicts nothing, and other content values are refused",
		run:         checkPagesDefault,
	},
	{
		name:        "StaleRun",
		explanation: "a freed run is rejected by Free, Pin, Unpin, Pins, Bytes, Span and Content with pool.ErrStaleHandle, also double-freed and after its pages were reused, hundreds of times, each rejection counted, and never reaches the new run's pages",
		run:         checkPagesStale,
	},
	{
		name:        "Instances",
		explanation: "allocators made by one constructor are independent: a run of one is rejected by another on every path with pool.ErrForeignHandle, counted there and changing nothing, also by allocators made after it was closed that place the very same runs, and their regions are disjoint memory",
		run:         checkPagesInstances,
	},
	{
		name:        "ForgedRun",
		explanation: "the zero run, runs past the region, runs naming a page inside a live run, a free page, or a live run with another generation or another allocator's id are rejected (pool.ErrZeroHandle, pool.ErrOutOfRange, pool.ErrStaleHandle, pool.ErrForeignHandle), thousands of times; only the exact live run is accepted",
		run:         checkPagesForged,
	},
	{
		name:        "Wraparound",
		explanation: "counters do not wrap where a narrower field would: a run freed 2^16 allocations of its pages ago is still stale on every path and never reaches the run now on its pages, and a run pinned 2^16 times keeps every pin and is never evicted",
		run:         checkPagesWrap,
	},
	{
		name:        "ContentRange",
		explanation: "with pages.MaxContentTypes content types of priorities across the whole int range, every content type round-trips through Alloc, Content and Stats.Content, every content value past the types is refused, and eviction follows the priorities as ints: lowest first, an allocation evicting only runs of priority at most its own",
		run:         checkPagesContentRange,
	},
	{
		name:        "Pins",
		explanation: "a new run has one pin; Pin and Unpin count; Unpin of an unpinned run is pages.ErrNotPinned; Free drops every pin; a pinned run is never evicted, by an allocation, by Evict or by the watermarks",
		run:         checkPagesPins,
	},
	{
		name:        "EvictionLRU",
		explanation: "within one priority, unpinned runs are evicted least recently unpinned first, also across content types that share the priority; pinning and unpinning a run again makes it the most recent",
		run:         checkPagesLRU,
	},
	{
		name:        "EvictionPriority",
		explanation: "eviction takes the lowest priority first; an allocation evicts only runs of priority at most its content's; content that is not evictable is never evicted, whatever its priority",
		run:         checkPagesPriority,
	},
	{
		name:        "EvictionMinimal",
		explanation: "an allocation that does not fit evicts, in order, only until a free run holds it; when even evicting every candidate could not free enough pages it evicts nothing and fails with pool.ErrExhausted",
		run:         checkPagesMinimal,
	},
	{
		name:        "Evict",
		explanation: "Evict(n) evicts whole unpinned evictable runs in eviction order until at least n pages are evicted or none is left, and returns the pages it evicted; Evict(0) evicts nothing",
		run:         checkPagesEvict,
	},
	{
		name:        "EvictFunc",
		explanation: "the EvictFunc hears of every eviction, in order, during Alloc or Evict only, before the run's pages are reused: the run is still valid (Bytes shows its data, Span, Content and Pins answer), Stats and Snapshot return (no lock held across the call) and Alloc, Free, Pin, Unpin, Evict and Close fail with pages.ErrInEviction; afterwards the run is stale on every path",
		run:         checkPagesEvictFunc,
	},
	{
		name:        "Watermarks",
		explanation: "with watermarks, an allocation that leaves at least high×Pages pages in use evicts unpinned evictable runs, in eviction order, until at most low×Pages are in use or none is left, never the new run; inside the band nothing is evicted",
		run:         checkPagesWatermarks,
	},
	{
		name:        "Accounting",
		explanation: "after every operation of thousands of random allocations, frees, pins, unpins, evictions and rejected calls, Stats equals a model field by field (pages used and free, maximal free runs, the longest, runs and pins per content, evictable pages, every counter) and every eviction is the one the model expects",
		run:         checkPagesAccounting,
	},
	{
		name:        "Snapshot",
		explanation: "Snapshot may be read by another goroutine while the owner works: every snapshot satisfies the identities of pages.Stats, counters never go back, and after Stats it equals Stats; a Snapshot asked for while the owner only allocates, or only frees, and never calls Stats shows what the owner did before it asked: the owner publishes at its Alloc and Free when a reader asked, not only at Stats or Close",
		run:         checkPagesSnapshot,
	},
	{
		name:        "Close",
		explanation: "after Close every call fails with pool.ErrClosed, Close again too, and Stats and Snapshot keep the accounting as it stood at Close, changes since the last Stats included",
		run:         checkPagesClose,
	},
	{
		name:        "ZeroAllocs",
		explanation: "Alloc, Free, Pin, Unpin, Pins, Bytes, Span, Content, an Alloc that evicts one run or several, Evict of one run or several, a rejected Free, Stats and Snapshot allocate nothing in steady state",
		run:         checkPagesAllocs,
		whole:       true,
	},
}

// mkRun builds an arbitrary run through the public encoding, to forge runs:
// a Run is encoded like a pool.Handle, its first page in the index.
func mkRun(poolID, first uint32, gen uint64) pages.Run {
	b, _ := mkHandle(poolID, first, gen).MarshalBinary()
	var r pages.Run
	_ = r.UnmarshalBinary(b) // cannot fail: b has the right length
	return r
}

// runPool returns the allocator id a run carries.
func runPool(r pages.Run) uint32 {
	var b [pages.RunSize]byte
	enc, _ := r.AppendBinary(b[:0])
	var h pool.Handle
	_ = h.UnmarshalBinary(enc) // cannot fail: enc has the right length
	return poolID(h)
}

// stamp writes tag into three bytes of every page of buf (its first, middle
// and last byte): enough to see two runs share a page or an offset without
// writing whole regions.
func stamp(buf []byte, size int, tag byte) {
	for p := 0; p+size <= len(buf); p += size {
		buf[p], buf[p+size/2], buf[p+size-1] = tag, tag, tag
	}
}

// stamped checks what stamp wrote and returns the first offset that lost it.
func stamped(buf []byte, size int, tag byte) (int, bool) {
	for p := 0; p+size <= len(buf); p += size {
		for _, i := range [3]int{p, p + size/2, p + size - 1} {
			if buf[i] != tag {
				return i, false
			}
		}
	}
	return 0, true
}

// fieldDiff lists the fields in which got differs from want, two values of
// one struct type.
func fieldDiff(got, want any) string {
	var parts []string
	var walk func(name string, g, w reflect.Value)
	walk = func(name string, g, w reflect.Value) {
		switch g.Kind() {
		case reflect.Struct:
			for i := range g.NumField() {
				f := g.Type().Field(i)
				if !f.IsExported() {
					continue
				}
				sub := f.Name
				if f.Anonymous {
					sub = ""
				}
				if name != "" && sub != "" {
					sub = name + "." + sub
				} else if sub == "" {
					sub = name
				}
				walk(sub, g.Field(i), w.Field(i))
			}
		case reflect.Array, reflect.Slice:
			if g.Len() != w.Len() {
				parts = append(parts, fmt.Sprintf("%s has %d entries, want %d", name, g.Len(), w.Len()))
				return
			}
			for i := range g.Len() {
				walk(fmt.Sprintf("%s[%d]", name, i), g.Index(i), w.Index(i))
			}
		default:
			if !g.Equal(w) {
				parts = append(parts, fmt.Sprintf("%s %v, want %v", name, g.Interface(), w.Interface()))
			}
		}
	}
	walk("", reflect.ValueOf(got), reflect.ValueOf(want))
	return strings.Join(parts, "; ")
}

// pgModel is the suite's model of a page-run allocator: the live run on
// each page, every live run's length, content, pins and place in the
// eviction order, and the counters of Stats. Cases drive the allocator
// through it; it checks every result and every eviction as it goes, and
// Stats when asked.
type pgModel struct {
	in        *pagesInst
	pages     int
	psize     int
	fit       pages.Fit
	id        uint32 // the allocator's id, from its first run
	types     []pages.ContentType
	high, low int      // watermarks in pages; high == 0: none
	owner     []*pgRun // page -> the live run holding it
	live      []*pgRun // the live runs, in no order
	byRun     map[pages.Run]*pgRun
	stale     []pages.Run // freed and evicted runs, the latest staleKeep
	used      int
	st        pages.Stats // the counters
	clock     uint64
	tag       byte
	// dropped holds the runs the model evicted for the call in progress:
	// it drops them before the call, and the EvictFunc probe looks them up.
	dropped map[pages.Run]*pgRun
}

type pgRun struct {
	r        pages.Run
	first, n int
	pins     int
	c        pages.Content
	tag      byte
	since    uint64 // when its last pin went: its place in the eviction order
	at       int    // its index in live
}

const staleKeep = 256

func newPgModel(in *pagesInst) (*pgModel, error) {
	st := in.Stats()
	if st.Pages < pagesMin || st.PageSize <= 0 {
		return nil, &ctorError{fmt.Errorf("the page-run suite needs a region of at least %d pages, got %d pages of %d bytes", pagesMin, st.Pages, st.PageSize)}
	}
	if st.Fit != pages.BestFit && st.Fit != pages.FirstFit {
		return nil, violationf(ErrContract, "Stats().Fit = %v, neither best nor first fit", st.Fit)
	}
	m := &pgModel{
		in: in, pages: st.Pages, psize: st.PageSize, fit: st.Fit, types: in.cfg.Types,
		owner: make([]*pgRun, st.Pages), byRun: map[pages.Run]*pgRun{}, dropped: map[pages.Run]*pgRun{},
	}
	if m.types == nil {
		m.types = []pages.ContentType{{Name: "data"}}
	}
	if in.cfg.High > 0 {
		m.high = max(1, int(math.Ceil(in.cfg.High*float64(m.pages))))
		m.low = int(in.cfg.Low * float64(m.pages))
	}
	if want := m.want(); st != want {
		return nil, violationf(ErrAccounting, "a fresh allocator's Stats differs from one free run of the whole region: %s", fieldDiff(st, want))
	}
	return m, nil
}

// want returns the Stats the model expects.
func (m *pgModel) want() pages.Stats {
	w := m.st
	w.PageSize, w.Pages, w.Fit = m.psize, m.pages, m.fit
	w.Used, w.Free, w.Runs = m.used, m.pages-m.used, len(m.live)
	w.FreeRuns, w.LargestFree = 0, 0
	for _, g := range m.gaps() {
		w.FreeRuns++
		w.LargestFree = max(w.LargestFree, g[1])
	}
	w.Evictable, w.Pins, w.PinnedRuns = 0, 0, 0
	for i := range w.Content {
		w.Content[i].Runs, w.Content[i].Pages = 0, 0
	}
	for _, x := range m.live {
		w.Pins += uint64(x.pins)
		if x.pins > 0 {
			w.PinnedRuns++
		} else if m.types[x.c].Evictable {
			w.Evictable += x.n
		}
		w.Content[x.c].Runs++
		w.Content[x.c].Pages += x.n
	}
	return w
}

// check compares Stats with the model.
func (m *pgModel) check(what string) error {
	if got, want := m.in.Stats(), m.want(); got != want {
		return violationf(ErrAccounting, "%s: Stats differs from the model: %s", what, fieldDiff(got, want))
	}
	if n := m.in.log.stray; n > 0 {
		return violationf(ErrContract, "%s: the EvictFunc was called %d times outside Alloc and Evict", what, n)
	}
	return nil
}

// gaps returns the maximal free runs as (first, length).
func (m *pgModel) gaps() [][2]int {
	var g [][2]int
	for p := 0; p < m.pages; {
		if m.owner[p] != nil {
			p += m.owner[p].n - (p - m.owner[p].first)
			continue
		}
		q := p
		for q < m.pages && m.owner[q] == nil {
			q++
		}
		g = append(g, [2]int{p, q - p})
		p = q
	}
	return g
}

func (m *pgModel) fits(n int) bool {
	for _, g := range m.gaps() {
		if g[1] >= n {
			return true
		}
	}
	return false
}

// allowed returns the free runs the fit may place n pages in.
func (m *pgModel) allowed(n int) [][2]int {
	var out [][2]int
	for _, g := range m.gaps() {
		switch {
		case g[1] < n:
		case m.fit == pages.FirstFit:
			return [][2]int{g}
		case len(out) == 0 || g[1] < out[0][1]:
			out = [][2]int{g}
		case g[1] == out[0][1]:
			out = append(out, g)
		}
	}
	return out
}

// candidate reports whether x may be evicted for content of priority prio.
func (m *pgModel) candidate(x *pgRun, prio int) bool {
	t := m.types[x.c]
	return x.pins == 0 && t.Evictable && t.Priority <= prio
}

// victim returns the next run to evict for content of priority prio: the
// lowest priority, then the least recently unpinned.
func (m *pgModel) victim(prio int) *pgRun {
	var v *pgRun
	for _, x := range m.live {
		if !m.candidate(x, prio) {
			continue
		}
		if v == nil || m.types[x.c].Priority < m.types[v.c].Priority ||
			(m.types[x.c].Priority == m.types[v.c].Priority && x.since < v.since) {
			v = x
		}
	}
	return v
}

// candidatePages sums the pages an allocation of priority prio may evict.
func (m *pgModel) candidatePages(prio int) int {
	n := 0
	for _, x := range m.live {
		if m.candidate(x, prio) {
			n += x.n
		}
	}
	return n
}

// drop takes x out of the model, freed or evicted.
func (m *pgModel) drop(x *pgRun, evicted bool) {
	for p := x.first; p < x.first+x.n; p++ {
		m.owner[p] = nil
	}
	last := m.live[len(m.live)-1]
	m.live[x.at], last.at = last, x.at
	m.live = m.live[:len(m.live)-1]
	delete(m.byRun, x.r)
	m.used -= x.n
	if len(m.stale) == staleKeep {
		m.stale = m.stale[1:]
	}
	m.stale = append(m.stale, x.r)
	if evicted {
		m.dropped[x.r] = x
		m.st.Evictions++
		m.st.EvictedPages += uint64(x.n)
		m.st.Content[x.c].Evictions++
	} else {
		m.st.Frees++
	}
}

// alloc allocates n pages of content c from the allocator and the model,
// and checks what happened: the evictions, in order; the error; the run's
// place, length, pins, content and memory. When the model agrees that the
// allocation must fail it returns nil and no error.
func (m *pgModel) alloc(n int, c pages.Content) (*pgRun, error) {
	what := fmt.Sprintf("Alloc(%d pages, content %d)", n, c)
	clear(m.dropped)
	var room []*pgRun
	if !m.fits(n) {
		prio := m.types[c].Priority
		if m.pages-m.used+m.candidatePages(prio) >= n {
			for !m.fits(n) {
				v := m.victim(prio)
				if v == nil {
					break
				}
				m.drop(v, true)
				room = append(room, v)
			}
		}
	}
	placed := m.fits(n)
	mark := len(m.in.log.runs)
	r, err := m.in.alloc(n, c)
	if e := m.evictedAs(what, mark, room, !placed || err != nil || m.high == 0); e != nil {
		return nil, e
	}
	if !placed {
		if err == nil {
			return nil, violationf(ErrAliased, "%s = %v, but no free run holds %d pages (free runs %v): it overlaps live runs", what, r, n, m.gaps())
		}
		if !errors.Is(err, pool.ErrExhausted) {
			return nil, violationf(ErrContract, "%s with no free run that holds it = %v, want pool.ErrExhausted", what, err)
		}
		m.st.Failed++
		return nil, nil
	}
	if err != nil {
		return nil, violationf(ErrContract, "%s = %v, but a free run holds it (free runs %v)", what, err, m.gaps())
	}
	x, err := m.place(what, r, n, c)
	if err != nil {
		return nil, err
	}
	if m.high > 0 {
		var marked []*pgRun
		if m.used >= m.high {
			for m.used > m.low {
				v := m.victim(math.MaxInt)
				if v == nil {
					break
				}
				m.drop(v, true)
				marked = append(marked, v)
			}
		}
		if e := m.evictedAs(fmt.Sprintf("%s, leaving %d of %d pages in use (high watermark %d, low %d)", what, m.used+pagesOf(marked), m.pages, m.high, m.low),
			mark+len(room), marked, true); e != nil {
			return nil, e
		}
	}
	return x, nil
}

func pagesOf(xs []*pgRun) int {
	n := 0
	for _, x := range xs {
		n += x.n
	}
	return n
}

// place checks a run the allocator just placed and adds it to the model.
func (m *pgModel) place(what string, r pages.Run, n int, c pages.Content) (*pgRun, error) {
	first, got, err := m.in.Span(r)
	switch {
	case err != nil:
		return nil, violationf(ErrContract, "Span of the run %s returned: %v", what, err)
	case got != n:
		return nil, violationf(ErrContract, "%s placed a run of %d pages", what, got)
	case first < 0 || first+n > m.pages:
		return nil, violationf(ErrContract, "%s placed pages [%d, %d), outside the region of %d", what, first, first+n, m.pages)
	}
	for p := first; p < first+n; p++ {
		if o := m.owner[p]; o != nil {
			return nil, violationf(ErrAliased, "%s placed pages [%d, %d), but page %d belongs to the live run %v at [%d, %d)", what, first, first+n, p, o.r, o.first, o.first+o.n)
		}
	}
	allowed := m.allowed(n)
	ok := false
	for _, g := range allowed {
		ok = ok || (g[0] <= first && first+n <= g[0]+g[1])
	}
	if !ok {
		return nil, violationf(ErrContract, "%s placed pages [%d, %d); %v allows the free runs %v (as (first, length)) of the free runs %v", what, first, first+n, m.fit, allowed, m.gaps())
	}
	if _, dup := m.byRun[r]; dup {
		return nil, violationf(ErrDuplicated, "%s returned %v, a live run's handle", what, r)
	}
	if id := runPool(r); m.id == 0 {
		m.id = id
	} else if id != m.id {
		return nil, violationf(ErrContract, "%s returned a run of allocator id %d, earlier runs carry %d", what, id, m.id)
	}
	buf, err := m.in.Bytes(r)
	if err != nil || len(buf) != n*m.psize || cap(buf) != len(buf) {
		return nil, violationf(ErrContract, "Bytes of the run %s returned: %d bytes, capacity %d, %v; want %d bytes, no spare capacity", what, len(buf), cap(buf), err, n*m.psize)
	}
	if pins, err := m.in.Pins(r); pins != 1 || err != nil {
		return nil, violationf(ErrContract, "the run %s returned has %d pins (%v), want 1", what, pins, err)
	}
	if got, err := m.in.Content(r); got != c || err != nil {
		return nil, violationf(ErrContract, "Content of the run %s returned = %d, %v", what, got, err)
	}
	m.tag++
	stamp(buf, m.psize, m.tag)
	x := &pgRun{r: r, first: first, n: n, pins: 1, c: c, tag: m.tag, at: len(m.live)}
	for p := first; p < first+n; p++ {
		m.owner[p] = x
	}
	m.live = append(m.live, x)
	m.byRun[r] = x
	m.used += n
	m.st.Allocs++
	return x, nil
}

// evictedAs compares the evictions the EvictFunc heard from mark on with
// want; with exact, nothing more may follow.
func (m *pgModel) evictedAs(what string, mark int, want []*pgRun, exact bool) error {
	l := m.in.log
	if l.err != nil {
		return l.err
	}
	got := l.runs[mark:]
	for i, v := range want {
		if i >= len(got) {
			if _, _, err := m.in.Span(v.r); err != nil {
				return violationf(ErrLost, "%s evicted %v (content %d, %d pages) without telling the EvictFunc", what, v.r, v.c, v.n)
			}
			return violationf(ErrContract, "%s evicted %d runs, want %d: %v (content %d, %d pages, unpinned at %d) was due next", what, len(got), len(want), v.r, v.c, v.n, v.since)
		}
		if got[i] != v.r {
			return m.wrongVictim(what, got[i], v)
		}
		if c := l.conts[mark+i]; c != v.c {
			return violationf(ErrContract, "%s: the EvictFunc was told %v holds content %d; it holds %d", what, v.r, c, v.c)
		}
	}
	if exact && len(got) > len(want) {
		return m.wrongVictim(what, got[len(want)], nil)
	}
	return nil
}

// wrongVictim says why evicting x, instead of due (nil: nothing), breaks
// the contract.
func (m *pgModel) wrongVictim(what string, x pages.Run, due *pgRun) error {
	dueS := "nothing more was due"
	if due != nil {
		dueS = fmt.Sprintf("%v (content %d, priority %d, unpinned at %d) was due", due.r, due.c, m.types[due.c].Priority, due.since)
	}
	if o, ok := m.dropped[x]; ok {
		return violationf(ErrOrder, "%s evicted %v (content %d, priority %d, unpinned at %d) before its turn; %s", what, x, o.c, m.types[o.c].Priority, o.since, dueS)
	}
	o, live := m.byRun[x]
	switch {
	case !live:
		return violationf(ErrContract, "%s: the EvictFunc was told of %v, which is not a live run; %s", what, x, dueS)
	case o.pins > 0:
		return violationf(ErrContract, "%s evicted %v, pinned %d times; %s", what, x, o.pins, dueS)
	case !m.types[o.c].Evictable:
		return violationf(ErrContract, "%s evicted %v of content %d, which is not evictable; %s", what, x, o.c, dueS)
	case due == nil:
		return violationf(ErrContract, "%s evicted %v (content %d, priority %d) as well; %s", what, x, o.c, m.types[o.c].Priority, dueS)
	}
	return violationf(ErrOrder, "%s evicted %v (content %d, priority %d, unpinned at %d); %s", what, x, o.c, m.types[o.c].Priority, o.since, dueS)
}

// intact checks that x's memory kept what the model wrote.
func (m *pgModel) intact(x *pgRun) error {
	buf, err := m.in.Bytes(x.r)
	if err != nil {
		return violationf(ErrContract, "Bytes of the live run %v: %v", x.r, err)
	}
	if at, ok := stamped(buf, m.psize, x.tag); !ok {
		return violationf(ErrAliased, "byte %d of the live run %v at pages [%d, %d) changed: another run shares its memory", at, x.r, x.first, x.first+x.n)
	}
	return nil
}

func (m *pgModel) free(x *pgRun) error {
	if err := m.intact(x); err != nil {
		return err
	}
	if err := m.in.Free(x.r); err != nil {
		return violationf(ErrContract, "Free of the live run %v: %v", x.r, err)
	}
	m.drop(x, false)
	return nil
}

func (m *pgModel) pin(x *pgRun) error {
	if err := m.in.Pin(x.r); err != nil {
		return violationf(ErrContract, "Pin of the live run %v: %v", x.r, err)
	}
	x.pins++
	return nil
}

// unpin unpins x, or checks that Unpin refuses an unpinned x.
func (m *pgModel) unpin(x *pgRun) error {
	err := m.in.Unpin(x.r)
	if x.pins == 0 {
		if !errors.Is(err, pages.ErrNotPinned) || !errors.Is(err, pool.ErrInvalidArgument) {
			return violationf(ErrContract, "Unpin of the unpinned run %v = %v, want pages.ErrNotPinned", x.r, err)
		}
		return nil
	}
	if err != nil {
		return violationf(ErrContract, "Unpin of %v, pinned %d times: %v", x.r, x.pins, err)
	}
	x.pins--
	if x.pins == 0 {
		m.clock++
		x.since = m.clock
	}
	return nil
}

// evict calls Evict(n) and checks what it evicted and returned.
func (m *pgModel) evict(n int) error {
	clear(m.dropped)
	var want []*pgRun
	got := 0
	for got < n {
		v := m.victim(math.MaxInt)
		if v == nil {
			break
		}
		m.drop(v, true)
		want = append(want, v)
		got += v.n
	}
	mark := len(m.in.log.runs)
	k, err := m.in.evict(n)
	what := fmt.Sprintf("Evict(%d)", n)
	if err != nil {
		return violationf(ErrContract, "%s: %v", what, err)
	}
	if e := m.evictedAs(what, mark, want, true); e != nil {
		return e
	}
	if k != got {
		return violationf(ErrContract, "%s = %d, it evicted %d pages", what, k, got)
	}
	return nil
}

// refused checks that every call with r is refused with want, as a handle
// error, and counts the refusals.
func (m *pgModel) refused(what string, r pages.Run, want error) error {
	in := m.in
	_, pinsErr := in.Pins(r)
	buf, bytesErr := in.Bytes(r)
	_, _, spanErr := in.Span(r)
	_, contErr := in.Content(r)
	calls := [...]struct {
		name string
		err  error
	}{
		{"Pins", pinsErr}, {"Bytes", bytesErr}, {"Span", spanErr}, {"Content", contErr},
		{"Pin", in.Pin(r)}, {"Unpin", in.Unpin(r)}, {"Free", in.Free(r)},
	}
	for _, c := range calls {
		switch {
		case c.err == nil:
			return violationf(ErrAliased, "%s of %s (%v) was accepted", c.name, what, r)
		case !errors.Is(c.err, want) || !errors.Is(c.err, pool.ErrInvalidHandle):
			return violationf(ErrContract, "%s of %s (%v) = %v, want %v", c.name, what, r, c.err, want)
		}
	}
	if buf != nil {
		return violationf(ErrAliased, "Bytes of %s (%v) returned %d bytes with its error", what, r, len(buf))
	}
	m.st.Rejected += uint64(len(calls))
	return nil
}

// pick returns a random live run, or nil.
func (m *pgModel) pick(rng *rand.Rand) *pgRun {
	if len(m.live) == 0 {
		return nil
	}
	return m.live[rng.IntN(len(m.live))]
}

// length returns a random run length: mostly short, now and then up to
// the whole region.
func (m *pgModel) length(rng *rand.Rand) int {
	if rng.IntN(16) == 0 {
		return 1 + rng.IntN(m.pages)
	}
	return 1 + rng.IntN(max(m.pages/8, 1))
}

// churn drives steps random operations through the model: allocations of
// every content type, frees, pins, unpins, evictions and stale calls. after
// runs after every step.
func (m *pgModel) churn(r *pgCase, rng *rand.Rand, steps int, after func(step int) error) error {
	for step := range steps {
		if r.ctx.Err() != nil {
			return violationf(ErrDeadlock, "step %d: stopped by the watchdog", step)
		}
		var err error
		switch op := rng.IntN(100); {
		case op < 36:
			_, err = m.alloc(m.length(rng), pages.Content(rng.IntN(len(m.types))))
		case op < 52:
			if x := m.pick(rng); x != nil {
				err = m.free(x)
			}
		case op < 60:
			if x := m.pick(rng); x != nil {
				err = m.pin(x)
			}
		case op < 82:
			if x := m.pick(rng); x != nil {
				err = m.unpin(x)
			}
		case op < 86:
			err = m.evict(rng.IntN(max(m.pages/4, 1)))
		case op < 90:
			if len(m.stale) > 0 {
				err = m.refusedOnce(rng, m.stale[rng.IntN(len(m.stale))])
			}
		default:
			if x := m.pick(rng); x != nil {
				err = m.intact(x)
			}
		}
		if err == nil && after != nil {
			err = after(step)
		}
		if err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
	}
	return nil
}

// refusedOnce makes one call, on a random path, with the stale run r.
func (m *pgModel) refusedOnce(rng *rand.Rand, r pages.Run) error {
	in := m.in
	var err error
	name := ""
	switch rng.IntN(4) {
	case 0:
		name, err = "Free", in.Free(r)
	case 1:
		name, err = "Pin", in.Pin(r)
	case 2:
		name, err = "Unpin", in.Unpin(r)
	default:
		name = "Span"
		_, _, err = in.Span(r)
	}
	if !errors.Is(err, pool.ErrStaleHandle) {
		return violationf(ErrAliased, "%s of the stale run %v = %v, want pool.ErrStaleHandle", name, r, err)
	}
	m.st.Rejected++
	return nil
}

// freeAll frees every live run.
func (m *pgModel) freeAll() error {
	for len(m.live) > 0 {
		if err := m.free(m.live[len(m.live)-1]); err != nil {
			return err
		}
	}
	return nil
}

// newModel builds the model of the case's allocator.
func newModel(r *pgCase) (*pgModel, error) { return newPgModel(r.x) }

// runLengths returns the run lengths to try on a region of n pages: all of
// them, or on a large region those up to 256, the powers of two and their
// neighbours, and the largest.
func runLengths(n int) []int {
	var ls []int
	for k := 1; k <= min(n, 256); k++ {
		ls = append(ls, k)
	}
	for p := 512; p/2 < n; p *= 2 {
		ls = append(ls, p-1, p, p+1)
	}
	ls = append(ls, n/2, n-2, n-1, n)
	slices.Sort(ls)
	ls = slices.Compact(ls)
	return slices.DeleteFunc(ls, func(k int) bool { return k < 1 || k > n })
}

func checkPagesLengths(r *pgCase) error {
	m, err := newModel(r)
	if err != nil {
		return err
	}
	for i, n := range runLengths(m.pages) {
		c := pages.Content(i % len(m.types))
		x, err := m.alloc(n, c)
		if err != nil {
			return err
		}
		if x == nil {
			return violationf(ErrContract, "Alloc(%d) on an empty region of %d pages failed", n, m.pages)
		}
		if err := m.check(fmt.Sprintf("after Alloc(%d) on an empty region", n)); err != nil {
			return err
		}
		if n < m.pages {
			rest, err := m.alloc(m.pages-n, c)
			if err != nil {
				return err
			}
			if rest == nil {
				return violationf(ErrContract, "Alloc(%d) beside a run of %d pages in a region of %d failed", m.pages-n, n, m.pages)
			}
			if _, err := m.alloc(1, c); err != nil {
				return err
			}
			if err := m.check(fmt.Sprintf("with the region full (%d + %d pages)", n, m.pages-n)); err != nil {
				return err
			}
			if err := m.free(rest); err != nil {
				return err
			}
		}
		if err := m.free(x); err != nil {
			return err
		}
		if err := m.check(fmt.Sprintf("after freeing a run of %d pages", n)); err != nil {
			return err
		}
	}
	return nil
}

// holeLengths are the free-run lengths Placement cuts: small ones, and the
// neighbours of 64 and of powers of two, where indexes change words or
// levels.
var holeLengths = []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 13, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257}

func checkPagesPlacement(r *pgCase) error {
	m, err := newModel(r)
	if err != nil {
		return err
	}
	if err := checkPagesManyFreeRuns(m); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(11, 12))
	for layout := range scaled(12) {
		// Cut the region into live separators of 1 to 2 pages and runs
		// of hole lengths (some repeated: best fit has a choice), then
		// free the latter.
		var holes []*pgRun
		for m.used < m.pages {
			// The separators stay live until the layout is freed below.
			sep, err := m.alloc(min(1+rng.IntN(2), m.pages-m.used), weights)
			if err != nil || sep == nil {
				return errors.Join(err, violationf(ErrContract, "layout %d: a separator did not fit", layout))
			}
			left := m.pages - m.used
			if left == 0 {
				break
			}
			fitting := slices.DeleteFunc(slices.Clone(holeLengths), func(k int) bool { return k > left })
			n := fitting[rng.IntN(len(fitting))]
			if layout%3 == 2 && len(holes) > 0 && holes[len(holes)-1].n <= left {
				n = holes[len(holes)-1].n
			}
			h, err := m.alloc(n, weights)
			if err != nil || h == nil {
				return errors.Join(err, violationf(ErrContract, "layout %d: a run of %d pages did not fit in %d free", layout, n, left))
			}
			holes = append(holes, h)
		}
		for _, h := range holes {
			if err := m.free(h); err != nil {
				return err
			}
		}
		if err := m.check(fmt.Sprintf("layout %d, fragmented", layout)); err != nil {
			return err
		}
		longest := 0
		for _, g := range m.gaps() {
			longest = max(longest, g[1])
		}
		for n := 1; n <= longest+1; n++ {
			x, err := m.alloc(n, weights)
			if err != nil {
				return fmt.Errorf("layout %d: %w", layout, err)
			}
			if x != nil {
				if err := m.free(x); err != nil {
					return err
				}
			}
		}
		if err := m.check(fmt.Sprintf("layout %d, after every length", layout)); err != nil {
			return err
		}
		if err := m.freeAll(); err != nil {
			return err
		}
	}
	return m.check("after every layout")
}

func checkPagesNoOverlap(r *pgCase) error {
	m, err := newModel(r)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for step := range scaled(3000) {
		if rng.IntN(5) < 2 && len(m.live) > 0 {
			err = m.free(m.pick(rng))
		} else {
			_, err = m.alloc(m.length(rng), pages.Content(rng.IntN(len(m.types))))
		}
		if err == nil {
			err = m.check("")
		}
		if err == nil && step%256 == 255 {
			for _, x := range m.live {
				if err = m.intact(x); err != nil {
					break
				}
			}
		}
		if err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
	}
	if err := m.freeAll(); err != nil {
		return err
	}
	return m.check("after freeing everything")
}

// permutations calls f with every order of 0..n-1, stopping at the first
// error.
func permutations(n int, f func([]int) error) error {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	var perm func(k int) error
	perm = func(k int) error {
		if k == n {
			return f(order)
		}
		for i := k; i < n; i++ {
			order[k], order[i] = order[i], order[k]
			if err := perm(k + 1); err != nil {
				return err
			}
			order[k], order[i] = order[i], order[k]
		}
		return nil
	}
	return perm(0)
}

func checkPagesCoalescing(r *pgCase) error {
	m, err := newModel(r)
	if err != nil {
		return err
	}
	// fill fills the region: runs of 1, 2, 3, 5 and 8 pages, then whatever
	// fills the free runs left, largest first.
	fill := func() ([]*pgRun, error) {
		var runs []*pgRun
		for _, n := range []int{1, 2, 3, 5, 8} {
			x, err := m.alloc(n, kvCache)
			if err != nil || x == nil {
				return nil, errors.Join(err, violationf(ErrContract, "Alloc(%d) on a region with %d pages free failed", n, m.pages-m.used))
			}
			runs = append(runs, x)
		}
		for m.used < m.pages {
			longest := 0
			for _, g := range m.gaps() {
				longest = max(longest, g[1])
			}
			x, err := m.alloc(longest, kvCache)
			if err != nil || x == nil {
				return nil, errors.Join(err, violationf(ErrContract, "Alloc(%d) with a free run of %d pages failed", longest, longest))
			}
			runs = append(runs, x)
		}
		return runs, nil
	}
	round := 0
	freeIn := func(order []int) error {
		round++
		if r.ctx.Err() != nil {
			return violationf(ErrDeadlock, "order %d: stopped by the watchdog", round)
		}
		runs, err := fill()
		if err != nil {
			return err
		}
		for i, k := range order {
			if err := m.free(runs[k]); err != nil {
				return err
			}
			if err := m.check(fmt.Sprintf("freeing runs in the order %v, after %d frees", order, i+1)); err != nil {
				return err
			}
		}
		whole, err := m.alloc(m.pages, kvCache)
		if err != nil {
			return err
		}
		if whole == nil {
			return violationf(ErrContract, "after freeing every run in the order %v, a run of the whole region (%d pages) did not fit: free runs %v", order, m.pages, m.gaps())
		}
		return m.free(whole)
	}
	runs, err := fill()
	if err != nil {
		return err
	}
	k := len(runs)
	if err := m.freeAll(); err != nil {
		return err
	}
	if k <= 6 {
		// Every order, skipping some under the race detector.
		i := 0
		return permutations(k, func(order []int) error {
			i++
			if race.Enabled && i%4 != 0 {
				return nil
			}
			return freeIn(slices.Clone(order))
		})
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range scaled(720) {
		if err := freeIn(rng.Perm(k)); err != nil {
			return err
		}
	}
	return nil
}

func checkPagesExhaustion(r *pgCase) error {
	m, err := newModel(r)
	if err != nil {
		return err
	}
	ones := make([]*pgRun, m.pages)
	for i := range ones {
		if ones[i], err = m.alloc(1, weights); err != nil || ones[i] == nil {
			return errors.Join(err, violationf(ErrContract, "filling the region page by page: Alloc(1) with %d pages free failed", m.pages-i))
		}
	}
	for _, n := range []int{1, 2, m.pages} {
		if _, err := m.alloc(n, weights); err != nil {
			return err
		}
		if err := m.check(fmt.Sprintf("after a refused Alloc(%d) on a full region", n)); err != nil {
			return err
		}
	}
	// Every other page free: half the region free, no two pages contiguous.
	for i := 0; i < len(ones); i += 2 {
		if err := m.free(ones[i]); err != nil {
			return err
		}
	}
	for _, n := range []int{2, 3, m.pages / 2} {
		if _, err := m.alloc(n, weights); err != nil {
			return err
		}
		if err := m.check(fmt.Sprintf("after a refused Alloc(%d) with %d single pages free", n, m.pages/2)); err != nil {
			return err
		}
	}
	// Single pages still fit, until none is left.
	for range m.pages/2 + 1 {
		if _, err := m.alloc(1, weights); err != nil {
			return err
		}
	}
	return m.check("after filling the single free pages")
}

func checkPagesArguments(r *pgCase) error {
	m, err := newModel(r)
	if err != nil {
		return err
	}
	in := m.in
	x, err := m.alloc(2, kvCache)
	if err != nil || x == nil {
		return errors.Join(err, violationf(ErrContract, "Alloc(2) on an empty region failed"))
	}
	for _, n := range []int{0, -1, math.MinInt, m.pages + 1, math.MaxInt} {
		if _, err := in.alloc(n, weights); !errors.Is(err, pool.ErrInvalidArgument) {
			return violationf(ErrContract, "Alloc(%d) = %v, want pool.ErrInvalidArgument", n, err)
		}
	}
	for c := len(m.types); c <= math.MaxUint8; c++ {
		if _, err := in.alloc(1, pages.Content(c)); !errors.Is(err, pool.ErrInvalidArgument) {
			return violationf(ErrContract, "Alloc(1, content %d) with %d content types = %v, want pool.ErrInvalidArgument", c, len(m.types), err)
		}
	}
	if _, err := in.evict(-1); !errors.Is(err, pool.ErrInvalidArgument) {
		return violationf(ErrContract, "Evict(-1) = %v, want pool.ErrInvalidArgument", err)
	}
	if err := m.unpin(x); err != nil {
		return err
	}
	for range 3 {
		if err := m.unpin(x); err != nil { // refused: not pinned
			return err
		}
	}
	return m.check("after refused arguments")
}

func checkPagesDefault(r *pgCase) error {
	m, err := newModel(r)
	if err != nil {
		return err
	}
	in := m.in
	if _, err := in.alloc(1, 1); !errors.Is(err, pool.ErrInvalidArgument) {
		return violationf(ErrContract, "Alloc(1, content 1) with only the default content type = %v, want pool.ErrInvalidArgument", err)
	}
	// Fill the region with unpinned runs: none may be evicted.
	for m.used < m.pages {
		x, err := m.alloc(min(1+m.used%5, m.pages-m.used), pages.DefaultContent)
		if err != nil || x == nil {
			return errors.Join(err, violationf(ErrContract, "Alloc with %d pages free failed", m.pages-m.used))
		}
		if err := m.unpin(x); err != nil {
			return err
		}
	}
	if err := m.check("with the region full of unpinned runs of the default content"); err != nil {
		return err
	}
	for _, n := range []int{1, m.pages} {
		if _, err := m.alloc(n, pages.DefaultContent); err != nil {
			return err
		}
	}
	if err := m.evict(m.pages); err != nil {
		return err
	}
	return m.check("after allocations and an Evict that may evict nothing")
}

func checkPagesStale(r *pgCase) error {
	m, err := newModel(r)
	if err != nil {
		return err
	}
	keep, err := m.alloc(3, kvCache)
	if err != nil || keep == nil {
		return errors.Join(err, violationf(ErrContract, "Alloc(3) on an empty region failed"))
	}
	rng := rand.New(rand.NewPCG(5, 6))
	var olds []pages.Run
	for round := range scaled(400) {
		n := 1 + rng.IntN(4)
		x, err := m.alloc(n, pages.Content(rng.IntN(len(m.types))))
		if err != nil || x == nil {
			return errors.Join(err, violationf(ErrContract, "round %d: Alloc(%d) failed", round, n))
		}
		old := x.r
		if err := m.free(x); err != nil {
			return err
		}
		if err := m.refused("a freed run", old, pool.ErrStaleHandle); err != nil {
			return fmt.Errorf("round %d: %w", round, err)
		}
		// The same pages, a new run: the old one still refused, the new
		// one untouched.
		y, err := m.alloc(n, kvCache)
		if err != nil || y == nil {
			return errors.Join(err, violationf(ErrContract, "round %d: Alloc(%d) after freeing %d pages failed", round, n, n))
		}
		if y.r == old {
			return violationf(ErrAliased, "round %d: the run placed after freeing %v is equal to it: the old run reaches the new one's pages", round, old)
		}
		if err := m.refused("a freed run whose pages were reused", old, pool.ErrStaleHandle); err != nil {
			return fmt.Errorf("round %d: %w", round, err)
		}
		if err := m.intact(y); err != nil {
			return fmt.Errorf("round %d: %w", round, err)
		}
		if err := m.free(y); err != nil {
			return err
		}
		if len(olds) < 32 {
			olds = append(olds, old)
		}
		if err := m.check(fmt.Sprintf("round %d", round)); err != nil {
			return err
		}
	}
	for _, old := range olds {
		if err := m.refused("a run freed hundreds of allocations ago", old, pool.ErrStaleHandle); err != nil {
			return err
		}
	}
	if err := m.intact(keep); err != nil {
		return err
	}
	return m.check("after every stale call")
}

func checkPagesInstances(r *pgCase) error {
	models, err := instances(r, 3, newPgModel)
	if err != nil {
		return err
	}
	// The same allocations on each: runs alike but for their allocator.
	var runs [][]*pgRun
	for k, m := range models {
		var rs []*pgRun
		for _, n := range []int{3, 1, 4} {
			x, err := m.alloc(n, kvCache)
			if err != nil || x == nil {
				return errors.Join(err, violationf(ErrContract, "allocator %d: Alloc(%d) failed", k, n))
			}
			rs = append(rs, x)
		}
		runs = append(runs, rs)
	}
	for k, m := range models {
		for j, rs := range runs {
			if j == k {
				continue
			}
			for _, x := range rs {
				if err := m.refused(fmt.Sprintf("a run of allocator %d, given to allocator %d,", j, k), x.r, pool.ErrForeignHandle); err != nil {
					return err
				}
			}
		}
	}
	for k, m := range models {
		for _, x := range runs[k] {
			if err := m.intact(x); err != nil {
				return fmt.Errorf("allocator %d: %w", k, err)
			}
		}
		if err := m.check(fmt.Sprintf("allocator %d, after the others' runs were refused", k)); err != nil {
			return err
		}
		if err := m.freeAll(); err != nil {
			return err
		}
	}
	// One run of the whole region each: writes to one never show in
	// another.
	wholes := make([][]byte, len(models))
	for k, m := range models {
		x, err := m.alloc(m.pages, weights)
		if err != nil || x == nil {
			return errors.Join(err, violationf(ErrContract, "allocator %d: a run of the whole region did not fit", k))
		}
		if wholes[k], err = m.in.Bytes(x.r); err != nil {
			return violationf(ErrContract, "Bytes: %v", err)
		}
	}
	for pass := range 2 {
		rng := rand.New(rand.NewPCG(uint64(pass), 9))
		for _, b := range wholes {
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
		}
		rng = rand.New(rand.NewPCG(uint64(pass), 9))
		for k, b := range wholes {
			for i, v := range b {
				if v != byte(rng.Uint32()) {
					return violationf(ErrAliased, "byte %d of allocator %d's region was overwritten by a write to another allocator's region", i, k)
				}
			}
		}
	}
	return checkPagesClosedIdentity(r)
}

func checkPagesForged(r *pgCase) error {
	m, err := newModel(r)
	if err != nil {
		return err
	}
	for m.used < m.pages*3/4 {
		if _, err := m.alloc(1+m.used%7, kvCache); err != nil {
			return err
		}
	}
	// Free every third run: free runs between live ones.
	for i, x := range slices.Clone(m.live) {
		if i%3 == 0 {
			if err := m.free(x); err != nil {
				return err
			}
		}
	}
	id := m.id
	if err := m.refused("the zero run", pages.Run{}, pool.ErrZeroHandle); err != nil {
		return err
	}
	base := m.live[0]
	if err := m.refused("a run past the region", mkRun(id, uint32(m.pages), base.r.Generation()), pool.ErrOutOfRange); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(6, 7))
	for i := range scaled(3000) {
		base := m.pick(rng)
		first, gen, pid := uint32(base.first), base.r.Generation(), id
		switch rng.IntN(9) {
		case 0:
			gen += uint64(1 + rng.IntN(4))
		case 1:
			gen -= uint64(1 + rng.IntN(4))
		case 2:
			gen ^= 1 << rng.IntN(64)
		case 3:
			first = uint32(rng.IntN(m.pages + 8))
		case 4:
			first = uint32(m.pages) + rng.Uint32N(1<<20)
		case 5:
			pid ^= 1 << rng.IntN(32)
		case 6:
			gen = rng.Uint64()
		case 7:
			if base.n > 1 { // a page inside the run, with its generation
				first += uint32(1 + rng.IntN(base.n-1))
			}
		default:
			first, gen = uint32(rng.IntN(m.pages)), uint64(rng.IntN(8))
		}
		f := mkRun(pid, first, gen)
		if x, live := m.byRun[f]; live {
			if err := m.intact(x); err != nil {
				return fmt.Errorf("forgery %d: %w", i, err)
			}
			continue
		}
		var want error
		switch {
		case f.IsZero():
			want = pool.ErrZeroHandle
		case pid != id:
			want = pool.ErrForeignHandle
		case int(first) >= m.pages:
			want = pool.ErrOutOfRange
		default:
			want = pool.ErrStaleHandle
		}
		var got error
		name := ""
		switch i % 4 {
		case 0:
			name = "Span"
			_, _, got = m.in.Span(f)
		case 1:
			name = "Bytes"
			_, got = m.in.Bytes(f)
		case 2:
			name, got = "Pin", m.in.Pin(f)
		default:
			name, got = "Free", m.in.Free(f)
		}
		switch {
		case got == nil:
			return violationf(ErrAliased, "forgery %d: %s(%v) was accepted; it is no live run (the live run on page %d is not it)", i, name, f, first)
		case !errors.Is(got, want):
			return violationf(ErrContract, "forgery %d: %s(%v) = %v, want %v", i, name, f, got, want)
		}
		m.st.Rejected++
	}
	for _, x := range m.live {
		if err := m.intact(x); err != nil {
			return err
		}
	}
	return m.check("after the forgeries")
}

func checkPagesPins(r *pgCase) error {
	m, err := newModel(r)
	if err != nil {
		return err
	}
	// Every run of an evictable type, some pinned many times: the pinned
	// ones survive Evict and allocation pressure; Free drops every pin.
	rng := rand.New(rand.NewPCG(7, 8))
	for m.used < m.pages {
		x, err := m.alloc(min(1+rng.IntN(4), m.pages-m.used), kvCache)
		if err != nil || x == nil {
			return errors.Join(err, violationf(ErrContract, "Alloc with %d pages free failed", m.pages-m.used))
		}
		for range rng.IntN(3) {
			if err := m.pin(x); err != nil {
				return err
			}
		}
		if rng.IntN(2) == 0 {
			for x.pins > 0 {
				if err := m.unpin(x); err != nil {
					return err
				}
			}
		}
	}
	if err := m.check("with pinned and unpinned runs"); err != nil {
		return err
	}
	if err := m.evict(m.pages); err != nil {
		return err
	}
	if err := m.check("after Evict of the whole region"); err != nil {
		return err
	}
	// Allocation pressure: the pinned runs must stay.
	for _, n := range []int{m.pages, m.pages / 2, 1} {
		x, err := m.alloc(n, weights)
		if err != nil {
			return err
		}
		if x != nil {
			if err := m.free(x); err != nil {
				return err
			}
		}
	}
	for _, x := range slices.Clone(m.live) {
		if x.pins > 1 {
			if err := m.free(x); err != nil { // Free, whatever the pins
				return err
			}
		}
	}
	if err := m.check("after freeing runs pinned several times"); err != nil {
		return err
	}
	// Then thousands of random pins, unpins and evictions.
	return m.churn(r, rng, scaled(2000), func(int) error { return m.check("") })
}

func checkPagesLRU(r *pgCase) error {
	m, err := newModel(r)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(9, 10))
	for round := range scaled(20) {
		// Runs of the two types that share a priority, unpinned in a
		// random order, some pinned and unpinned again.
		for m.used < m.pages {
			c := kvCache
			if rng.IntN(2) == 0 {
				c = adapter
			}
			if _, err := m.alloc(min(1+rng.IntN(3), m.pages-m.used), c); err != nil {
				return err
			}
		}
		for _, i := range rng.Perm(len(m.live)) {
			if err := m.unpin(m.live[i]); err != nil {
				return err
			}
		}
		for range len(m.live) / 3 {
			x := m.pick(rng)
			if err := m.pin(x); err != nil {
				return err
			}
			if err := m.unpin(x); err != nil {
				return err
			}
		}
		// One run at a time through Evict, then allocations that must
		// evict.
		for range 3 {
			if err := m.evict(1); err != nil {
				return fmt.Errorf("round %d: %w", round, err)
			}
		}
		for range 4 {
			if _, err := m.alloc(1+rng.IntN(6), kvCache); err != nil {
				return fmt.Errorf("round %d: %w", round, err)
			}
		}
		if err := m.check(fmt.Sprintf("round %d", round)); err != nil {
			return err
		}
		if err := m.freeAll(); err != nil {
			return err
		}
	}
	return nil
}

func checkPagesPriority(r *pgCase) error {
	m, err := newModel(r)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(13, 14))
	for round := range scaled(20) {
		// Unpinned runs of every type, interleaved.
		for m.used < m.pages {
			c := pages.Content(rng.IntN(len(m.types)))
			x, err := m.alloc(min(1+rng.IntN(3), m.pages-m.used), c)
			if err != nil {
				return err
			}
			if err := m.unpin(x); err != nil {
				return err
			}
		}
		// Allocations of each priority: prefix may evict only prefix,
		// kv and adapter up to their priority, weights everything
		// evictable, scratch (priority 0) nothing.
		for _, c := range []pages.Content{scratch, prefix, kvCache, adapter, weights} {
			for _, n := range []int{1 + rng.IntN(4), 1 + rng.IntN(m.pages/4)} {
				if _, err := m.alloc(n, c); err != nil {
					return fmt.Errorf("round %d: %w", round, err)
				}
			}
		}
		if err := m.evict(m.pages / 8); err != nil {
			return err
		}
		if err := m.check(fmt.Sprintf("round %d", round)); err != nil {
			return err
		}
		if err := m.freeAll(); err != nil {
			return err
		}
	}
	return nil
}

func checkPagesMinimal(r *pgCase) error {
	m, err := newModel(r)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(15, 16))
	for round := range scaled(20) {
		// Unpinned kv runs between pinned weights: evicting k runs frees
		// runs of known lengths.
		for m.used < m.pages {
			x, err := m.alloc(min(1+rng.IntN(4), m.pages-m.used), kvCache)
			if err != nil {
				return err
			}
			if rng.IntN(4) != 0 {
				if err := m.unpin(x); err != nil {
					return err
				}
			}
		}
		// Requests that fit after some evictions, and requests larger
		// than all the free and evictable pages: those evict nothing.
		hopeless := m.pages - m.used + m.candidatePages(math.MaxInt) + 1
		for _, n := range []int{1, 2, 1 + rng.IntN(8), hopeless, m.pages} {
			if n > m.pages {
				continue
			}
			if _, err := m.alloc(n, kvCache); err != nil {
				return fmt.Errorf("round %d: %w", round, err)
			}
		}
		if err := m.check(fmt.Sprintf("round %d", round)); err != nil {
			return err
		}
		if err := m.freeAll(); err != nil {
			return err
		}
	}
	return nil
}

func checkPagesEvict(r *pgCase) error {
	m, err := newModel(r)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(17, 18))
	for round := range scaled(20) {
		for m.used < m.pages {
			x, err := m.alloc(min(1+rng.IntN(5), m.pages-m.used), pages.Content(rng.IntN(len(m.types))))
			if err != nil {
				return err
			}
			if rng.IntN(3) != 0 {
				if err := m.unpin(x); err != nil {
					return err
				}
			}
		}
		for _, n := range []int{0, 1, 2, 3, 1 + rng.IntN(8), m.pages / 4, m.pages, math.MaxInt} {
			if err := m.evict(n); err != nil {
				return fmt.Errorf("round %d: %w", round, err)
			}
		}
		if err := m.check(fmt.Sprintf("round %d", round)); err != nil {
			return err
		}
		if err := m.freeAll(); err != nil {
			return err
		}
	}
	return nil
}

func checkPagesEvictFunc(r *pgCase) error {
	m, err := newModel(r)
	if err != nil {
		return err
	}
	in := m.in
	heard, probing := 0, false
	in.log.probe = func(run pages.Run, c pages.Content) error {
		if probing {
			return violationf(ErrContract, "a call inside the EvictFunc evicted %v: the allocator's mutators must fail with pages.ErrInEviction there", run)
		}
		probing = true
		defer func() { probing = false }()
		heard++
		x, live := m.gone(run)
		if !live {
			return violationf(ErrContract, "the EvictFunc was told of %v, which the model does not expect evicted", run)
		}
		buf, err := in.Bytes(run)
		if err != nil {
			return violationf(ErrContract, "Bytes of %v inside the EvictFunc: %v; the run is valid until the call returns", run, err)
		}
		if at, ok := stamped(buf, m.psize, x.tag); !ok || len(buf) != x.n*m.psize {
			return violationf(ErrAliased, "inside the EvictFunc, byte %d of %v (of %d bytes) lost its data: its pages were reused before the owner heard", at, run, len(buf))
		}
		if first, n, err := in.Span(run); first != x.first || n != x.n || err != nil {
			return violationf(ErrContract, "Span of %v inside the EvictFunc = (%d, %d, %v), want (%d, %d)", run, first, n, err, x.first, x.n)
		}
		if got, err := in.Content(run); got != x.c || err != nil {
			return violationf(ErrContract, "Content of %v inside the EvictFunc = (%d, %v), want %d", run, got, err, x.c)
		}
		if pins, err := in.Pins(run); pins != 0 || err != nil {
			return violationf(ErrContract, "Pins of %v inside the EvictFunc = (%d, %v), want 0", run, pins, err)
		}
		if err := in.readInEviction(); err != nil {
			return err
		}
		_, allocErr := in.Alloc(1, weights)
		_, evictErr := in.Evict(1)
		for _, call := range [...]struct {
			name string
			err  error
		}{
			{"Alloc", allocErr}, {"Free", in.Free(run)}, {"Pin", in.Pin(run)}, {"Unpin", in.Unpin(run)},
			{"Evict", evictErr}, {"Close", in.Close()},
		} {
			if !errors.Is(call.err, pages.ErrInEviction) {
				return violationf(ErrContract, "%s inside the EvictFunc = %v, want pages.ErrInEviction", call.name, call.err)
			}
		}
		return nil
	}
	rng := rand.New(rand.NewPCG(19, 20))
	if err := m.churn(r, rng, scaled(2000), func(step int) error {
		if step%16 == 0 {
			return m.check("")
		}
		return nil
	}); err != nil {
		return err
	}
	if heard < 20 {
		return violationf(ErrContract, "the EvictFunc was called %d times in thousands of operations that evict", heard)
	}
	// Every run evicted is stale on every path.
	in.log.probe = nil
	for i, run := range in.log.runs {
		if _, live := m.byRun[run]; live || i%7 != 0 {
			continue
		}
		if err := m.refused("an evicted run", run, pool.ErrStaleHandle); err != nil {
			return err
		}
	}
	return m.check("after calls with evicted runs")
}

// gone returns the model's record of a run the allocator is evicting: the
// model drops the victims of an allocation that does not fit before the
// call, those of the watermarks after it.
func (m *pgModel) gone(run pages.Run) (*pgRun, bool) {
	if x, ok := m.dropped[run]; ok {
		return x, true
	}
	x, ok := m.byRun[run]
	return x, ok
}

func checkPagesWatermarks(r *pgCase) error {
	m, err := newModel(r)
	if err != nil {
		return err
	}
	if m.high == 0 {
		return violationf(ErrContract, "the model has no watermarks")
	}
	rng := rand.New(rand.NewPCG(21, 22))
	for round := range scaled(10) {
		// Climb to the high watermark with unpinned runs: nothing is
		// evicted below it, then down to the low one.
		for m.used < m.high-1 {
			x, err := m.alloc(1, pages.Content(1+rng.IntN(3)))
			if err != nil || x == nil {
				return errors.Join(err, violationf(ErrContract, "round %d: Alloc(1) with %d pages in use failed", round, m.used))
			}
			if err := m.unpin(x); err != nil {
				return err
			}
		}
		if err := m.check(fmt.Sprintf("round %d, just under the high watermark", round)); err != nil {
			return err
		}
		for range 6 {
			if _, err := m.alloc(1+rng.IntN(3), weights); err != nil {
				return fmt.Errorf("round %d: %w", round, err)
			}
		}
		if err := m.check(fmt.Sprintf("round %d, past the high watermark", round)); err != nil {
			return err
		}
		if err := m.freeAll(); err != nil {
			return err
		}
	}
	return m.churn(r, rng, scaled(2000), func(int) error { return m.check("") })
}

func checkPagesAccounting(r *pgCase) error {
	m, err := newModel(r)
	if err != nil {
		return err
	}
	return m.churn(r, rand.New(rand.NewPCG(23, 24)), scaled(4000), func(int) error { return m.check("") })
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
func checkPagesSnapshotFresh(ctx context.Context, m *pgModel, serve string) error {
	in := m.in
	const k = 3
	var runs []*pgRun
	alloc := func() error {
		x, err := m.alloc(1, weights)
		if err == nil && x == nil {
			err = violationf(ErrContract, "Alloc of one page failed with %d of %d pages in use", m.used, m.pages)
		}
		if err != nil {
			return err
		}
		runs = append(runs, x)
		return nil
	}
	before := in.Stats() // publishes
	for range k {
		if err := alloc(); err != nil {
			return err
		}
	}
	counter := func(st pages.Stats) uint64 { return st.Allocs }
	if serve == "Free" {
		// Allocate the runs the owner frees while the scraper waits, then
		// change the accounting by frees only.
		for len(runs) < m.pages/2 {
			if err := alloc(); err != nil {
				return err
			}
		}
		before = in.Stats() // publishes
		for _, x := range runs[:k] {
			if err := m.free(x); err != nil {
				return err
			}
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
			return violationf(ErrDeadlock, "Snapshot did not return while the owner called %s", serve)
		default:
		}
		if len(runs) > 0 && (serve == "Free" || !m.fits(1)) {
			if err := m.free(runs[len(runs)-1]); err != nil {
				return err
			}
			runs = runs[:len(runs)-1]
		} else if err := alloc(); err != nil {
			return err
		}
		// Sleep, not spin, between calls: under testing/synctest the
		// clock, and with it a Snapshot's deadline, moves only while
		// every goroutine waits.
		time.Sleep(50 * time.Microsecond)
	}
	if err := pageIdentities(st); err != nil {
		return fmt.Errorf("a Snapshot served by %s: %w", serve, err)
	}
	if counter(st) < counter(before)+k {
		return violationf(ErrAccounting, "a Snapshot asked for while the owner only called %s, after %d calls of %s that no Stats followed, says %d of them, want %d or more: the owner does not publish at %s when asked (a scraper of an owner that never calls Stats is stale forever)",
			serve, k, serve, counter(st), counter(before)+k, serve)
	}
	for _, x := range runs {
		if err := m.free(x); err != nil {
			return err
		}
	}
	return m.check("after the freshness check")
}

func checkPagesSnapshot(r *pgCase) error {
	m, err := newModel(r)
	if err != nil {
		return err
	}
	in, ctx := m.in, r.ctx
	if err := pageIdentities(in.Snapshot()); err != nil {
		return fmt.Errorf("the first snapshot: %w", err)
	}
	for _, serve := range []string{"Alloc", "Free"} {
		if err := checkPagesSnapshotFresh(ctx, m, serve); err != nil {
			return err
		}
	}
	quit := make(chan struct{})
	var snaps atomic.Int64
	var scrape crew
	scrape.Go(func() error {
		prev := in.Snapshot()
		var first error // kept, so that the report does not depend on timing
		for {
			select {
			case <-quit:
				return first
			case <-ctx.Done():
				return first
			default:
			}
			st := in.Snapshot()
			snaps.Add(1)
			err := pageIdentities(st)
			if err == nil {
				err = pagesNotBehind(prev, st)
			}
			if err != nil && first == nil {
				first = fmt.Errorf("snapshot %d: %w", snaps.Load(), err)
			}
			prev = st
			if snaps.Load()%64 == 0 {
				var b backoff
				b.n = spinYields // sleep a little: the owner needs the core
				b.wait(ctx)
			}
		}
	})
	err = m.churn(r, rand.New(rand.NewPCG(25, 26)), scaled(3000), func(step int) error {
		if step%4 != 0 {
			return nil
		}
		// The owner's own read, right after Stats published: the same.
		if st, snap := in.Stats(), in.Snapshot(); st != snap {
			return violationf(ErrAccounting, "Snapshot right after Stats differs from it: %s", fieldDiff(snap, st))
		}
		return m.check("")
	})
	close(quit)
	if err := errors.Join(err, scrape.wait(ctx, "scrapers")); err != nil {
		return err
	}
	if st, snap := in.Stats(), in.Snapshot(); st != snap {
		return violationf(ErrAccounting, "Snapshot right after Stats differs from it: %s", fieldDiff(snap, st))
	}
	return nil
}

func checkPagesClose(r *pgCase) error {
	m, err := newModel(r)
	if err != nil {
		return err
	}
	in := m.in
	rng := rand.New(rand.NewPCG(27, 28))
	if err := m.churn(r, rng, 200, nil); err != nil {
		return err
	}
	x, err := m.alloc(1, kvCache)
	if err != nil {
		return err
	}
	var live pages.Run
	if x != nil {
		live = x.r
	} else {
		live = m.live[0].r
	}
	in.Stats() // publishes; the change below must be published by Close
	if len(m.live) > 1 {
		other := m.live[0]
		if other.r == live {
			other = m.live[1]
		}
		err = m.free(other)
	} else {
		_, err = m.alloc(1, weights)
	}
	if err != nil {
		return err
	}
	final := m.want()
	if err := in.Close(); err != nil {
		return violationf(ErrContract, "Close: %v", err)
	}
	_, allocErr := in.alloc(1, weights)
	_, evictErr := in.evict(1)
	_, pinsErr := in.Pins(live)
	_, bytesErr := in.Bytes(live)
	_, _, spanErr := in.Span(live)
	_, contErr := in.Content(live)
	for _, c := range [...]struct {
		name string
		err  error
	}{
		{"Alloc", allocErr}, {"Evict", evictErr}, {"Pins", pinsErr}, {"Bytes", bytesErr}, {"Span", spanErr},
		{"Content", contErr}, {"Free", in.Free(live)}, {"Pin", in.Pin(live)}, {"Unpin", in.Unpin(live)},
		{"Free of the zero run", in.Free(pages.Run{})}, {"Close", in.Close()},
	} {
		if !errors.Is(c.err, pool.ErrClosed) {
			return violationf(ErrContract, "%s after Close = %v, want pool.ErrClosed", c.name, c.err)
		}
	}
	if st := in.Stats(); st != final {
		return violationf(ErrAccounting, "Stats after Close differs from Stats at Close: %s", fieldDiff(st, final))
	}
	if snap := in.Snapshot(); snap != final {
		return violationf(ErrAccounting, "Snapshot after Close differs from Stats at Close: %s", fieldDiff(snap, final))
	}
	return nil
}

func checkPagesAllocs(r *pgCase) error {
	m, err := newModel(r)
	if err != nil {
		return err
	}
	in := m.in
	keep, err := m.alloc(3, kvCache)
	if err != nil || keep == nil {
		return errors.Join(err, violationf(ErrContract, "Alloc(3) on an empty region failed"))
	}
	stale, err := m.alloc(2, kvCache)
	if err != nil || stale == nil {
		return errors.Join(err, violationf(ErrContract, "Alloc(2) failed"))
	}
	if err := m.free(stale); err != nil {
		return err
	}
	// Owner calls on a region with room.
	for _, c := range []struct {
		name string
		op   func() error
	}{
		{"Alloc+Free", func() error {
			r, err := in.alloc(5, kvCache)
			if err != nil {
				return contractErr("Alloc", err)
			}
			return contractErr("Free", in.Free(r))
		}},
		{"Pin+Unpin", func() error {
			if err := in.Pin(keep.r); err != nil {
				return contractErr("Pin", err)
			}
			return contractErr("Unpin", in.Unpin(keep.r))
		}},
		{"Pins+Bytes+Span+Content", func() error {
			_, e1 := in.Pins(keep.r)
			_, e2 := in.Bytes(keep.r)
			_, _, e3 := in.Span(keep.r)
			_, e4 := in.Content(keep.r)
			return contractErr("a read of a live run", errors.Join(e1, e2, e3, e4))
		}},
		{"a rejected Free", func() error {
			if err := in.Free(stale.r); !errors.Is(err, pool.ErrStaleHandle) {
				return violationf(ErrContract, "Free of a stale run = %v", err)
			}
			return nil
		}},
		{"Stats and Snapshot", func() error {
			in.Stats()
			in.Snapshot()
			return nil
		}},
	} {
		if err := noAllocs(r.allocRuns(), c.name, c.op); err != nil {
			return err
		}
	}
	// Evictions: the rest of the region in one unpinned run, evicted by
	// each Alloc of its length, or by Evict.
	if _, err := m.alloc(m.pages-3, kvCache); err != nil {
		return err
	}
	log := in.log
	again := func() error {
		r, err := in.alloc(m.pages-3, kvCache)
		if err != nil {
			return contractErr("Alloc of the evictable rest of the region", err)
		}
		if len(log.runs) != 1 {
			return violationf(ErrContract, "making room for %d pages evicted %d runs, want the one run there", m.pages-3, len(log.runs))
		}
		log.runs, log.conts = log.runs[:0], log.conts[:0]
		return contractErr("Unpin", in.Unpin(r))
	}
	if err := in.Unpin(m.live[len(m.live)-1].r); err != nil {
		return contractErr("Unpin", err)
	}
	log.runs, log.conts = log.runs[:0], log.conts[:0]
	for _, c := range []struct {
		name string
		op   func() error
	}{
		{"an Alloc that evicts", again},
		{"Evict", func() error {
			if n, err := in.evict(1); n != m.pages-3 || err != nil {
				return violationf(ErrContract, "Evict(1) with one unpinned run of %d pages = %d, %v", m.pages-3, n, err)
			}
			log.runs, log.conts = log.runs[:0], log.conts[:0]
			r, err := in.alloc(m.pages-3, kvCache)
			if err != nil {
				return contractErr("Alloc", err)
			}
			return contractErr("Unpin", in.Unpin(r))
		}},
	} {
		if err := noAllocs(r.allocRuns(), c.name, c.op); err != nil {
			return err
		}
	}
	// The same with the rest of the region in three unpinned runs: each
	// Alloc of its length, or Evict, evicts all three.
	rest := m.pages - 3
	if n, err := in.evict(rest); n != rest || err != nil {
		return violationf(ErrContract, "Evict(%d) with one unpinned run of %d pages = %d, %v", rest, rest, n, err)
	}
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
	if err := refill(); err != nil {
		return err
	}
	for _, c := range []struct {
		name string
		op   func() error
	}{
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
	} {
		if err := noAllocs(r.allocRuns(), c.name, c.op); err != nil {
			return err
		}
	}
	return nil
}
