package pages

import (
	"fmt"
	"math"
	"slices"

	"github.com/locus-go/locus/internal/ids"
	"github.com/locus-go/locus/internal/invariants"
	"github.com/locus-go/locus/internal/nocopy"
	"github.com/locus-go/locus/internal/snapshot"
	"github.com/locus-go/locus/internal/sysmem"
	"github.com/locus-go/locus/internal/typednil"
	"github.com/locus-go/locus/pool"
)

// MaxPages is the largest region a Pool accepts, in pages (2^30), which
// keeps page indices and their links within 32 bits.
const MaxPages = 1 << 30

// page is the metadata of one page. Only two kinds of page carry meaning:
// the first page of a run (free or allocated) holds gen, n, the links, pins
// and content; the last page of a run holds start. A run's own pages are
// found from its first page, its neighbours through the boundary pages
// beside it, so merging free neighbours is O(1).
type page struct {
	gen     uint64 // of the allocated run that starts here: odd while it lives
	n       uint32 // length of the run that starts here
	start   uint32 // on a run's last page: the run's first page
	prev    int32  // free list (best fit) or LRU list of the run that starts here
	next    int32
	pins    uint32
	content Content
}

// metaBytesPerPage bounds what a Pool keeps per page: the page record, a
// best-fit list head and bitset bit, or two first-fit tree slots.
const metaBytesPerPage = 32 + 8 + 1

// kind is a content type as the Pool uses it.
type kind struct {
	ContentType
	level int // index into Pool.levels, or none if not evictable
}

// level is the eviction order of one priority: unpinned runs of evictable
// content, least recently unpinned at head.
type level struct {
	priority   int
	head, tail int32
	pages      int
}

// Pool hands out contiguous runs of pages from one region of fixed-size
// pages: best fit by default, first fit as an option (WithFit). Freeing a
// run merges it with free neighbours at once, so the free space is always a
// set of maximal free runs. Runs carry a content type and a pin count;
// unpinned runs of evictable content are evicted, lowest priority and least
// recently unpinned first, when an allocation cannot be placed (and, with
// WithWatermarks, whenever utilization crosses the high watermark), and the
// owner is told of each through its EvictFunc.
//
// A Pool has one owner goroutine: every method but Snapshot must be called
// by one goroutine at a time (or with external synchronization). Snapshot
// is safe from any goroutine: it returns the stats as the owner publishes
// them, at Stats and Close, and at its next Alloc, Free, Pin, Unpin or
// Evict when a Snapshot has asked (see Snapshot). Runs cannot be freed from
// other goroutines; hand them to the owner (see the package doc).
//
// Every Run passed in is validated against the generation of its first
// page: a stale, double-freed, evicted, foreign, zero or forged Run is
// rejected with an error matching pool.ErrInvalidHandle, counted in
// Stats.Rejected, and changes nothing else.
//
// The zero Pool is not usable (its calls fail with pool.ErrClosed); build
// one with New. A Pool must not be copied.
type Pool struct {
	_        nocopy.NoCopy
	id       uint32 // 0 in a zero Pool, which is never usable
	closed   bool
	evicting bool // an EvictFunc is running
	fit      Fit
	pageSize int
	region   []byte
	b        pool.Backing
	meta     []page

	bySize bySize // the free-space index when fit == BestFit
	byAddr byAddr // the free-space index when fit == FirstFit

	kinds     []kind
	levels    []level // evictable priorities, lowest first
	onEvict   EvictFunc
	high, low int // watermarks in pages; high == 0: off

	st    Stats // the live accounting, LargestFree excepted
	final Stats // Stats as they stood at Close

	// pub is the accounting as the owner last published it, for Snapshot.
	pub snapshot.Cell[Stats]
}

// poolIDs numbers the pools, so that a run names its pool.
var poolIDs ids.Source

// New builds a Pool over the region of b, cut into pages of pageSize bytes.
// The backing must hold the whole region as one block, whose length is a
// multiple of pageSize: heap.New(pageSize*pages, 1) or mmap.New(pageSize*
// pages, 1, ...). Every page starts free, in one run.
//
// The Pool takes ownership of b and closes it in Close. New fails with an
// error wrapping pool.ErrInvalidConfig if b is nil (or a typed nil), does
// not hold exactly one non-empty block, or that block is not a whole number
// of pages (at most MaxPages); if pageSize is not positive; or if an option
// is nil or invalid. Then b is still the caller's.
func New(b pool.Backing, pageSize int, opts ...Option) (*Pool, error) {
	if typednil.Is(b) {
		return nil, fmt.Errorf("%w: nil backing", pool.ErrInvalidConfig)
	}
	if pageSize <= 0 {
		return nil, fmt.Errorf("%w: page size %d", pool.ErrInvalidConfig, pageSize)
	}
	if l := b.Len(); l != 1 {
		return nil, fmt.Errorf("%w: backing has %d blocks; pages needs the whole region in one block, e.g. heap.New(pageSize*pages, 1)",
			pool.ErrInvalidConfig, l)
	}
	region := b.Block(0)
	if len(region) == 0 || cap(region) != len(region) || len(region)%pageSize != 0 || len(region)/pageSize > MaxPages {
		return nil, fmt.Errorf("%w: region of %d bytes (cap %d) is not 1 to %d pages of %d bytes",
			pool.ErrInvalidConfig, len(region), cap(region), MaxPages, pageSize)
	}
	n := len(region) / pageSize
	if err := sysmem.Fits(uint64(n) * metaBytesPerPage); err != nil {
		return nil, fmt.Errorf("%w: metadata of %d pages: %v", pool.ErrInvalidConfig, n, err)
	}
	cfg := config{types: []ContentType{{Name: "data"}}}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil option", pool.ErrInvalidConfig)
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}

	p := &Pool{id: poolIDs.Next(), fit: cfg.fit, pageSize: pageSize, region: region, b: b, onEvict: cfg.onEvict}
	if err := p.setKinds(cfg); err != nil {
		return nil, err
	}
	p.meta = make([]page, n)
	if p.fit == FirstFit {
		p.byAddr = newByAddr(n)
	} else {
		p.bySize = newBySize(n)
	}
	p.meta[0].n = uint32(n)
	p.meta[n-1].start = 0
	p.index(0, n)
	p.st = Stats{PageSize: pageSize, Pages: n, Fit: p.fit, Free: n, FreeRuns: 1}
	p.pub.Init(p.stats())
	return p, nil
}

// setKinds checks the content types and watermarks and builds the eviction
// levels: one per distinct priority of the evictable types.
func (p *Pool) setKinds(cfg config) error {
	var prios []int
	for _, t := range cfg.types {
		if t.Evictable {
			prios = append(prios, t.Priority)
		}
	}
	slices.Sort(prios)
	prios = slices.Compact(prios)
	if len(prios) > 0 && cfg.onEvict == nil {
		return fmt.Errorf("%w: an evictable content type needs WithEvictFunc: an owner must hear of every eviction", pool.ErrInvalidConfig)
	}
	if cfg.setMarks && len(prios) == 0 {
		return fmt.Errorf("%w: watermarks without an evictable content type", pool.ErrInvalidConfig)
	}
	for _, prio := range prios {
		p.levels = append(p.levels, level{priority: prio, head: none, tail: none})
	}
	for _, t := range cfg.types {
		k := kind{ContentType: t, level: none}
		if t.Evictable {
			k.level = slices.Index(prios, t.Priority)
		}
		p.kinds = append(p.kinds, k)
	}
	if cfg.setMarks {
		n := float64(len(p.region) / p.pageSize)
		p.high = max(1, int(math.Ceil(cfg.high*n)))
		p.low = int(cfg.low * n)
	}
	return nil
}

// Alloc hands out a run of n contiguous pages holding content c, pinned
// once. If no free run is long enough it evicts unpinned runs of evictable
// content whose priority is at most c's, lowest priority and least recently
// unpinned first, until the run fits; it evicts nothing if even that could
// not free n pages, and returns pool.ErrExhausted if the run still does
// not fit (the free pages may be enough but not contiguous). With
// WithWatermarks, an allocation that leaves utilization at or above the
// high watermark then evicts down to the low one (if the EvictFunc panics
// there, the run just placed is freed and the panic goes on). It never
// waits.
//
// n must be 1 to Pages() and c one of the Pool's content types, else the
// error wraps pool.ErrInvalidArgument.
func (p *Pool) Alloc(n int, c Content) (Run, error) {
	if p == nil {
		return Run{}, errNilPool
	}
	if p.evicting || p.closed || p.id == 0 {
		return Run{}, p.unusable()
	}
	if n <= 0 || n > len(p.meta) || int(c) >= len(p.kinds) {
		return Run{}, fmt.Errorf("%w: run of %d pages of content %d; the pool has %d pages and %d content types",
			pool.ErrInvalidArgument, n, c, len(p.meta), len(p.kinds))
	}
	s := p.find(n)
	if s == none {
		if s = p.evictFor(n, p.kinds[c].Priority); s == none {
			p.st.Failed++
			p.step()
			return Run{}, pool.ErrExhausted
		}
	}
	r := p.carve(s, n, c)
	if p.high > 0 && p.st.Used >= p.high {
		// An EvictFunc that panics in the reclaim must not leak the run
		// just placed: nobody would hold its handle. Free it, then let the
		// panic go on.
		reclaimed := false
		defer func() {
			if !reclaimed {
				_ = p.Free(r)
			}
		}()
		p.reclaim()
		reclaimed = true
	}
	p.step()
	return r, nil
}

// Free returns a run's pages to the free space, merged with free
// neighbours, whatever its pin count (pins guard against eviction, not
// against the owner). A bad run gets one of the handle errors and changes
// nothing else.
func (p *Pool) Free(r Run) error {
	if p == nil {
		return errNilPool
	}
	if p.evicting {
		return ErrInEviction
	}
	m, err := p.lookup(r)
	if err != nil {
		return err
	}
	s := int32(r.first)
	if m.pins == 0 {
		p.unlist(s)
	} else {
		p.st.Pins -= uint64(m.pins)
		p.st.PinnedRuns--
		m.pins = 0
	}
	p.release(s)
	p.st.Frees++
	p.step()
	return nil
}

// Pin adds a pin to a run: a pinned run is never evicted. Pin a run while
// it is in use and Unpin it when it may go.
func (p *Pool) Pin(r Run) error {
	if p == nil {
		return errNilPool
	}
	if p.evicting {
		return ErrInEviction
	}
	m, err := p.lookup(r)
	if err != nil {
		return err
	}
	switch m.pins {
	case 0:
		p.unlist(int32(r.first))
		p.st.PinnedRuns++
	case math.MaxUint32:
		return ErrPinLimit
	}
	m.pins++
	p.st.Pins++
	p.step()
	return nil
}

// Unpin removes a pin. When the last pin goes, a run of evictable content
// becomes the most recently unpinned run of its priority: the last of its
// priority to be evicted. Unpin of a run without pins returns ErrNotPinned.
func (p *Pool) Unpin(r Run) error {
	if p == nil {
		return errNilPool
	}
	if p.evicting {
		return ErrInEviction
	}
	m, err := p.lookup(r)
	if err != nil {
		return err
	}
	if m.pins == 0 {
		return ErrNotPinned
	}
	m.pins--
	p.st.Pins--
	if m.pins == 0 {
		p.st.PinnedRuns--
		p.list(int32(r.first))
	}
	p.step()
	return nil
}

// Pins returns a run's pin count.
func (p *Pool) Pins(r Run) (int, error) {
	if p == nil {
		return 0, errNilPool
	}
	m, err := p.lookup(r)
	if err != nil {
		return 0, err
	}
	return int(m.pins), nil
}

// Evict evicts unpinned runs of evictable content, lowest priority and least
// recently unpinned first, until at least pages pages are evicted or none is
// left, and returns how many pages it evicted. Use it to make room ahead of
// a burst, off the allocation path.
func (p *Pool) Evict(pages int) (int, error) {
	if p == nil {
		return 0, errNilPool
	}
	if p.evicting || p.closed || p.id == 0 {
		return 0, p.unusable()
	}
	if pages < 0 {
		return 0, fmt.Errorf("%w: evict %d pages", pool.ErrInvalidArgument, pages)
	}
	got := 0
	for i := range p.levels {
		for lv := &p.levels[i]; lv.head != none && got < pages; {
			got += int(p.meta[lv.head].n)
			p.evict(lv.head)
		}
	}
	p.step()
	return got, nil
}

// Bytes returns the memory of a live run: its pages, contiguous, with no
// spare capacity. The slice stays valid until the Pool is closed, but the
// pages belong to the caller only until the run is freed or evicted.
func (p *Pool) Bytes(r Run) ([]byte, error) {
	if p == nil {
		return nil, errNilPool
	}
	m, err := p.lookup(r)
	if err != nil {
		return nil, err
	}
	lo := int(r.first) * p.pageSize
	hi := lo + int(m.n)*p.pageSize
	return p.region[lo:hi:hi], nil
}

// Span returns a live run's first page and length in pages.
func (p *Pool) Span(r Run) (first, n int, err error) {
	if p == nil {
		return 0, 0, errNilPool
	}
	m, err := p.lookup(r)
	if err != nil {
		return 0, 0, err
	}
	return int(r.first), int(m.n), nil
}

// Content returns a live run's content type.
func (p *Pool) Content(r Run) (Content, error) {
	if p == nil {
		return 0, errNilPool
	}
	m, err := p.lookup(r)
	if err != nil {
		return 0, err
	}
	return m.content, nil
}

// ContentTypes returns the Pool's content types, indexed by Content.
func (p *Pool) ContentTypes() []ContentType {
	if p == nil {
		return nil
	}
	out := make([]ContentType, len(p.kinds))
	for i, k := range p.kinds {
		out[i] = k.ContentType
	}
	return out
}

// PageSize returns the size of a page in bytes.
func (p *Pool) PageSize() int {
	if p == nil {
		return 0
	}
	return p.pageSize
}

// Pages returns the number of pages in the region; 0 after Close.
func (p *Pool) Pages() int {
	if p == nil {
		return 0
	}
	return len(p.meta)
}

// Stats returns the Pool's accounting as it is now; after Close, as it
// stood at Close. Only the owner may call it; it also publishes what it
// returns for Snapshot.
func (p *Pool) Stats() Stats {
	if p == nil {
		return Stats{}
	}
	st := p.stats()
	if p.id != 0 && !p.closed {
		p.pub.Publish(st)
	}
	return st
}

// stats computes Stats without publishing.
func (p *Pool) stats() Stats {
	if p.closed {
		return p.final
	}
	st := p.st
	if p.id != 0 {
		st.LargestFree = p.largest()
	}
	return st
}

// Snapshot returns the Pool's accounting as the owner publishes it, for any
// goroutine (a metrics scraper, say), concurrently with the owner.
//
// The owner publishes at Stats and Close, and at an Alloc, Free, Pin, Unpin
// or Evict when a Snapshot has asked since the last publication (a call
// that rejects a run counts it, and the next of those calls publishes it);
// a call that nobody asked costs one atomic load more. So Snapshot returns a value published in the last
// millisecond at once; otherwise it asks and waits for the owner's next
// such call, up to 100 ms, and then returns the latest value, which from an
// idle owner is what it last published (at New, the empty region). After
// Close it returns the final counts at once. The identities of Stats hold
// within one snapshot. The owner itself reads its accounting with Stats: a
// Snapshot on the owner's goroutine cannot be served by the owner's calls,
// so unless the owner published in the last millisecond it waits the full
// 100 ms.
func (p *Pool) Snapshot() Stats {
	if p == nil || p.id == 0 {
		return Stats{}
	}
	return p.pub.Get()
}

// Close releases the backing. Later calls of every method, Close included,
// return pool.ErrClosed; slices returned by Bytes must not be used after it.
func (p *Pool) Close() error {
	if p == nil {
		return errNilPool
	}
	if p.evicting || p.closed || p.id == 0 {
		return p.unusable()
	}
	p.final = p.stats()
	p.pub.Seal(p.final)
	p.closed = true
	// Dropping the metadata makes every run fail validation (first page
	// out of range), which reject turns into ErrClosed.
	p.meta, p.region, p.bySize, p.byAddr = nil, nil, bySize{}, byAddr{}
	return p.b.Close()
}

// unusable returns the error of a Pool that may not be changed now.
func (p *Pool) unusable() error {
	switch {
	case p.id == 0:
		return errZeroPool
	case p.closed:
		return pool.ErrClosed
	case p.evicting:
		return ErrInEviction
	}
	return nil
}

// step publishes the accounting when a Snapshot has asked for it since the
// last publication: Alloc, Free, Pin, Unpin and Evict end with it, at the
// cost of one atomic load while nobody asks (it inlines: TestStepInlines
// pins it). Only a live Pool calls it. reject does not: it stays a leaf, so
// that lookup, on every run method's path, needs no frame.
func (p *Pool) step() {
	if p.pub.Wanted() {
		p.publish()
	}
}

// publish is step's slow path, kept out of line so that the callers of step
// do not carry a Stats in their frames (TestStepInlines pins it).
//
//go:noinline
func (p *Pool) publish() { p.pub.Publish(p.stats()) }

// valid reports whether r names a live run of this Pool: its first page's
// generation matches and is odd (an even one is a free run's or a run
// boundary's, never a live run's). The range test is written on uint, as
// pool's handle check is, so that the compiler drops the bounds check of
// meta[r.first] (TestNoBoundsCheckInValid pins it).
func (p *Pool) valid(r Run) bool {
	return r.pool == p.id && uint(r.first) < uint(len(p.meta)) && p.meta[r.first].gen == r.gen && r.gen&1 == 1
}

// lookup returns the record of a live run's first page, or why r is
// refused.
func (p *Pool) lookup(r Run) (*page, error) {
	if !p.valid(r) {
		return nil, p.reject(r)
	}
	return &p.meta[r.first], nil
}

// reject counts a refused run and says why it was refused.
func (p *Pool) reject(r Run) error {
	if p.closed || p.id == 0 {
		return p.unusable()
	}
	p.st.Rejected++
	switch {
	case r.IsZero():
		return pool.ErrZeroHandle
	case r.pool != p.id:
		return pool.ErrForeignHandle
	case r.first >= uint32(len(p.meta)):
		return pool.ErrOutOfRange
	}
	return pool.ErrStaleHandle
}

// find returns the first page of the free run the strategy picks for n
// pages, or none.
func (p *Pool) find(n int) int32 {
	if p.fit == FirstFit {
		return p.byAddr.find(n)
	}
	return p.bySize.find(n)
}

func (p *Pool) largest() int {
	if p.fit == FirstFit {
		return p.byAddr.largest()
	}
	return p.bySize.largest()
}

// index adds the free run of n pages at s to the free-space index.
func (p *Pool) index(s int32, n int) {
	if p.fit == FirstFit {
		p.byAddr.set(s, uint32(n))
	} else {
		p.bySize.insert(p.meta, s, n)
	}
}

func (p *Pool) unindex(s int32, n int) {
	if p.fit == FirstFit {
		p.byAddr.set(s, 0)
	} else {
		p.bySize.remove(p.meta, s, n)
	}
}

// carve allocates the first n pages of the free run at s, returning the rest
// of that run to the free space.
func (p *Pool) carve(s int32, n int, c Content) Run {
	l := int(p.meta[s].n)
	p.unindex(s, l)
	if l > n {
		rest := s + int32(n)
		p.meta[rest].n = uint32(l - n)
		p.meta[int(s)+l-1].start = uint32(rest)
		p.index(rest, l-n)
	} else {
		p.st.FreeRuns--
	}
	p.meta[int(s)+n-1].start = uint32(s)
	m := &p.meta[s]
	m.n = uint32(n)
	m.gen++
	m.pins = 1
	m.content = c
	p.st.Used += n
	p.st.Free -= n
	p.st.Runs++
	p.st.Allocs++
	p.st.Pins++
	p.st.PinnedRuns++
	cs := &p.st.Content[c]
	cs.Runs++
	cs.Pages += n
	return Run{gen: m.gen, first: uint32(s), pool: p.id}
}

// release frees the allocated run at s (already out of every list and with
// no pins counted), merges it with free neighbours and returns the merged
// free run.
func (p *Pool) release(s int32) (start int32, length int) {
	m := &p.meta[s]
	n := int(m.n)
	m.gen++
	cs := &p.st.Content[m.content]
	cs.Runs--
	cs.Pages -= n
	p.st.Used -= n
	p.st.Free += n
	p.st.Runs--
	if invariants.Enabled {
		invariants.Poison(p.region[int(s)*p.pageSize : (int(s)+n)*p.pageSize])
	}
	start, length = s, n
	if s > 0 {
		if ls := int32(p.meta[s-1].start); p.meta[ls].gen&1 == 0 {
			ln := int(p.meta[ls].n)
			p.unindex(ls, ln)
			start, length = ls, length+ln
			p.st.FreeRuns--
		}
	}
	if e := int(s) + n; e < len(p.meta) && p.meta[e].gen&1 == 0 {
		rn := int(p.meta[e].n)
		p.unindex(int32(e), rn)
		length += rn
		p.st.FreeRuns--
	}
	p.meta[start].n = uint32(length)
	p.meta[int(start)+length-1].start = uint32(start)
	p.index(start, length)
	p.st.FreeRuns++
	return start, length
}

// list makes the unpinned run at s the most recently unpinned of its
// priority, if its content is evictable.
func (p *Pool) list(s int32) {
	m := &p.meta[s]
	k := p.kinds[m.content].level
	if k == none {
		return
	}
	lv := &p.levels[k]
	m.prev, m.next = lv.tail, none
	if lv.tail == none {
		lv.head = s
	} else {
		p.meta[lv.tail].next = s
	}
	lv.tail = s
	lv.pages += int(m.n)
	p.st.Evictable += int(m.n)
}

// unlist takes the run at s out of its eviction list, if it is in one.
func (p *Pool) unlist(s int32) {
	m := &p.meta[s]
	k := p.kinds[m.content].level
	if k == none {
		return
	}
	lv := &p.levels[k]
	if m.prev == none {
		lv.head = m.next
	} else {
		p.meta[m.prev].next = m.next
	}
	if m.next == none {
		lv.tail = m.prev
	} else {
		p.meta[m.next].prev = m.prev
	}
	lv.pages -= int(m.n)
	p.st.Evictable -= int(m.n)
}

// evict tells the owner, then frees the unpinned run at s; it returns the
// merged free run.
func (p *Pool) evict(s int32) (start int32, length int) {
	m := &p.meta[s]
	p.notify(Run{gen: m.gen, first: uint32(s), pool: p.id}, m.content)
	p.unlist(s)
	p.st.Evictions++
	p.st.EvictedPages += uint64(m.n)
	p.st.Content[m.content].Evictions++
	return p.release(s)
}

// notify calls the EvictFunc with the Pool's mutators locked out; a panic
// in it leaves the run allocated and the Pool usable.
func (p *Pool) notify(r Run, c Content) {
	p.evicting = true
	defer func() { p.evicting = false }()
	p.onEvict(r, c)
}

// evictFor evicts runs of priority at most prio until a free run of n pages
// exists, and returns it (none if there is none). It evicts nothing when the
// free pages and the candidates' pages together are fewer than n.
func (p *Pool) evictFor(n, prio int) int32 {
	avail := p.st.Free
	for i := range p.levels {
		if p.levels[i].priority > prio {
			break
		}
		avail += p.levels[i].pages
	}
	if avail < n {
		return none
	}
	for i := range p.levels {
		lv := &p.levels[i]
		if lv.priority > prio {
			break
		}
		for lv.head != none {
			if _, l := p.evict(lv.head); l >= n {
				return p.find(n)
			}
		}
	}
	return none
}

// reclaim evicts, lowest priority first, until the low watermark is reached
// or nothing is left to evict.
func (p *Pool) reclaim() {
	for i := range p.levels {
		for lv := &p.levels[i]; lv.head != none; {
			if p.st.Used <= p.low {
				return
			}
			p.evict(lv.head)
		}
	}
}
