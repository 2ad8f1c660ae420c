package conformance

import (
	"math"
	"sync"
	"sync/atomic"

	"github.com/locus-go/locus/internal/snapshot"
	"github.com/locus-go/locus/pages"
	"github.com/locus-go/locus/pool"
)

// Deliberately broken page-run allocators: refPages, an obviously correct
// allocator over a page map (every step a scan of the region), with one
// switchable defect each, and real pages.Pools over broken backings.

// pgDefect is the one thing a refPages gets wrong.
type pgDefect int

const (
	pgCorrect           pgDefect = iota
	pgNoMerge                    // freed runs never merge with free neighbours
	pgNoGeneration               // a freed run still resolves to its first page
	pgIgnoresOwner               // runs of other allocators are taken as its own
	pgOverlap                    // a run after a live one starts on that run's last page
	pgWorstFit                   // best fit takes the largest free run
	pgLastFit                    // first fit takes the highest-addressed free run
	pgFailedUncounted            // a refused allocation is not counted in Failed
	pgZeroPages                  // Alloc(0) hands out a page
	pgNoWholeRegion              // a run of the whole region is refused as too long
	pgSpareCap                   // Bytes has capacity past the run
	pgOpenAfterClose             // Close closes nothing
	pgMRU                        // evicts the most recently unpinned first
	pgHighFirst                  // evicts the highest priority first
	pgEvictsPinned               // pinned runs are evicted too
	pgAnyPriority                // an allocation evicts runs of any priority
	pgEvictsAnyContent           // unpinned content that is not evictable is evicted too
	pgGreedy                     // an allocation that must evict evicts every candidate
	pgHopeless                   // an allocation evicts even when that cannot make room
	pgNotifyLate                 // the EvictFunc hears after the pages were poisoned
	pgEvictedValid               // an evicted run still answers, on its freed pages
	pgMutableInEviction          // the EvictFunc may call Alloc, Free and the rest
	pgSilentEviction             // every fifth eviction is not told
	pgNoWatermarks               // the watermarks are ignored
	pgDrainsToZero               // past the high watermark it evicts everything it can
	pgEvictOneMore               // Evict(n) evicts one run after reaching n pages
	pgUnpinKeepsPlace            // pinning and unpinning again keeps the run's old place
	pgUnpinBelowZero             // Unpin of an unpinned run succeeds
	pgTornSnapshot               // Snapshot mixes two publications
	pgAllocates                  // every 64th Alloc allocates
	pgSpanUncounted              // a Span refused is not counted in Rejected
	pgStatsAfterClose            // Stats after Close reports nothing
	pgNewRunUnpinned             // Alloc hands out runs with no pin
	pgStrayEvictFunc             // Free past the high watermark evicts, outside Alloc
	pgGen16                      // generations are kept in 16 bits
	pgPin16                      // pin counts are kept in 16 bits
	pgPrio8                      // priorities are kept in 8 bits: -1 is 255
	pgContent3                   // content types are kept in 3 bits: 9 is 1, and 8 passes for 0
	pgRecycledIDs                // the ids of closed allocators are handed out again
	pgBestFit16                  // best fit looks at the first 16 free runs that hold the run only
	pgEvictAllocs                // an Alloc or Evict that evicts two runs or more allocates
	pgCloseUnpublished           // Close does not publish: Snapshot keeps the last Stats
	pgStatsOnlyPublish           // publishes at New, Stats and Close only, never when a reader asked
)

var refPagesIDs atomic.Uint32

// recycled holds the ids of closed pgRecycledIDs allocators.
var recycled struct {
	sync.Mutex
	ids []uint32
}

type refPages struct {
	d        pgDefect
	id       uint32
	psize    int
	fit      pages.Fit
	mem      []byte
	types    []pages.ContentType
	onEvict  pages.EvictFunc
	high     int
	low      int
	gen      []uint64 // per page: odd while a live run starts there
	owner    []int32  // per page: the first page of its live run, -1 if free
	n        []int32  // at a run's first page: its length
	pins     []uint32
	cont     []pages.Content
	since    []uint64 // at an unpinned run's first page: when its last pin went
	split    []bool   // pgNoMerge: a free run starts here
	clock    uint64
	st       pages.Stats // the counters
	closed   bool
	evicting bool
	final    pages.Stats
	evicted  int // evictions so far, for pgSilentEviction
	allocs   int
	sink     [][]byte

	// pub holds the latest publication and the one before it (for
	// pgTornSnapshot); last is the latest, the owner's copy. Like a
	// pages.Pool, the owner publishes at Stats and Close, and at its next
	// Alloc, Free, Pin, Unpin or Evict when a Snapshot asked.
	pub  snapshot.Cell[[2]pages.Stats]
	last pages.Stats
}

func newRefPages(d pgDefect, fit pages.Fit, npages int) func(PagesConfig) (Pages, error) {
	return func(cfg PagesConfig) (Pages, error) {
		id := refPagesIDs.Add(1)
		if d == pgRecycledIDs {
			recycled.Lock()
			if n := len(recycled.ids); n > 0 {
				id, recycled.ids = recycled.ids[n-1], recycled.ids[:n-1]
			}
			recycled.Unlock()
		}
		p := &refPages{
			d: d, id: id, psize: 16, fit: fit, mem: make([]byte, 16*npages),
			types: cfg.Types, onEvict: cfg.OnEvict,
			gen: make([]uint64, npages), owner: make([]int32, npages), n: make([]int32, npages),
			pins: make([]uint32, npages), cont: make([]pages.Content, npages), since: make([]uint64, npages),
			split: make([]bool, npages),
		}
		if p.types == nil {
			p.types = []pages.ContentType{{Name: "data"}}
		}
		for i := range p.owner {
			p.owner[i] = -1
		}
		if cfg.High > 0 {
			p.high = max(1, int(math.Ceil(cfg.High*float64(npages))))
			p.low = int(cfg.Low * float64(npages))
		}
		p.publish()
		return p, nil
	}
}

func (p *refPages) pages() int { return len(p.owner) }

func (p *refPages) unusable() error {
	switch {
	case p.evicting && p.d != pgMutableInEviction:
		return pages.ErrInEviction
	case p.closed && p.d != pgOpenAfterClose:
		return pool.ErrClosed
	}
	return nil
}

// gap returns the free run that starts at s: its length, or 0.
func (p *refPages) gap(s int) int {
	q := s
	for q < p.pages() && p.owner[q] < 0 && (q == s || !p.split[q]) {
		q++
	}
	return q - s
}

// find returns the first page of the free run the fit takes for n pages,
// or -1.
func (p *refPages) find(n int) int {
	fit := p.fit
	best, bestLen := -1, 0
	seen := 0 // pgBestFit16: free runs that hold n, looked at so far
	for s := 0; s < p.pages(); {
		if p.owner[s] >= 0 {
			s += max(1, int(p.n[p.owner[s]])-(s-int(p.owner[s])))
			continue
		}
		l := p.gap(s)
		if l >= n && p.d == pgBestFit16 && fit == pages.BestFit {
			if seen++; seen > 16 {
				return best // gives up: the best of the first 16 that hold it
			}
		}
		if l >= n {
			switch {
			case fit == pages.FirstFit && p.d == pgLastFit:
				best = s
			case fit == pages.FirstFit:
				return s
			case p.d == pgWorstFit && l > bestLen, p.d != pgWorstFit && (best < 0 || l < bestLen):
				best, bestLen = s, l
			}
		}
		s += l
	}
	return best
}

func (p *refPages) run(s int) pages.Run { return mkRun(p.id, uint32(s), p.gen[s]) }

// bump moves the generation of page s on.
func (p *refPages) bump(s int) {
	p.gen[s]++
	if p.d == pgGen16 {
		p.gen[s] &= 1<<16 - 1
	}
}

// prio returns the priority of content c as the allocator keeps it.
func (p *refPages) prio(c pages.Content) int {
	if p.d == pgPrio8 {
		return int(uint8(p.types[c].Priority))
	}
	return p.types[c].Priority
}

func (p *refPages) evictable(s int, prio int) bool {
	t := p.types[p.cont[s]]
	pinned := p.pins[s] > 0 && p.d != pgEvictsPinned
	ok := t.Evictable || (p.d == pgEvictsAnyContent && !pinned)
	return !pinned && ok && (p.prio(p.cont[s]) <= prio || p.d == pgAnyPriority)
}

// victim returns the first page of the next run to evict for priority
// prio, or -1.
func (p *refPages) victim(prio int) int {
	v := -1
	for s := range p.owner {
		if int(p.owner[s]) != s || !p.evictable(s, prio) {
			continue
		}
		if v < 0 {
			v = s
			continue
		}
		pv, ps := p.prio(p.cont[v]), p.prio(p.cont[s])
		lower, older := ps < pv, p.since[s] < p.since[v]
		if p.d == pgHighFirst {
			lower = ps > pv
		}
		if p.d == pgMRU {
			older = p.since[s] > p.since[v]
		}
		if lower || (ps == pv && older) {
			v = s
		}
	}
	return v
}

func (p *refPages) used() int {
	u := 0
	for _, o := range p.owner {
		if o >= 0 {
			u++
		}
	}
	return u
}

func (p *refPages) release(s int) {
	n := int(p.n[s])
	p.bump(s)
	for q := s; q < s+n; q++ {
		p.owner[q] = -1
		p.split[q] = false
	}
	if p.d == pgNoMerge {
		p.split[s] = true
		if s+n < p.pages() {
			p.split[s+n] = true
		}
	}
}

func (p *refPages) evict(s int) {
	r, c, n := p.run(s), p.cont[s], int(p.n[s])
	if p.d == pgNotifyLate {
		clear(p.mem[s*p.psize : (s+n)*p.psize])
	}
	p.evicted++
	if p.d != pgSilentEviction || p.evicted%5 != 0 {
		p.evicting = true
		p.onEvict(r, c)
		p.evicting = false
	}
	p.release(s)
	if p.d == pgEvictedValid {
		p.gen[s]--
	}
	p.st.Evictions++
	p.st.EvictedPages += uint64(n)
	p.st.Content[c].Evictions++
}

func (p *refPages) candidatePages(prio int) int {
	n := 0
	for s := range p.owner {
		if int(p.owner[s]) == s && p.evictable(s, prio) {
			n += int(p.n[s])
		}
	}
	return n
}

func (p *refPages) Alloc(n int, c pages.Content) (pages.Run, error) {
	if err := p.unusable(); err != nil {
		return pages.Run{}, err
	}
	if n == 0 && p.d == pgZeroPages {
		n = 1
	}
	if n <= 0 || n > p.pages() || (n == p.pages() && p.d == pgNoWholeRegion) || int(c) >= len(p.types) && (p.d != pgContent3 || int(c&7) >= len(p.types)) {
		return pages.Run{}, pool.ErrInvalidArgument
	}
	if p.d == pgAllocates {
		if p.allocs++; p.allocs%64 == 0 {
			p.sink = append(p.sink, make([]byte, 8))
		}
	}
	if p.d == pgContent3 {
		c &= 7
	}
	prio := p.prio(c)
	s := p.find(n)
	if s < 0 && (p.pages()-p.used()+p.candidatePages(prio) >= n || p.d == pgHopeless) {
		evicted := 0
		for v := p.victim(prio); v >= 0; v = p.victim(prio) {
			p.evict(v)
			if evicted++; evicted == 2 && p.d == pgEvictAllocs {
				p.sink = append(p.sink, make([]byte, 8))
			}
			if s = p.find(n); s >= 0 && p.d != pgGreedy {
				break
			}
		}
	}
	if s < 0 {
		if p.d != pgFailedUncounted {
			p.st.Failed++
		}
		p.step()
		return pages.Run{}, pool.ErrExhausted
	}
	if p.d == pgOverlap && s > 0 && p.owner[s-1] >= 0 && p.gap(s) > n {
		s-- // the last page of the live run before
	}
	for q := s; q < s+n; q++ {
		p.owner[q] = int32(s)
		p.split[q] = false
	}
	p.bump(s)
	p.n[s], p.cont[s], p.pins[s] = int32(n), c, 1
	if p.d == pgContent3 {
		p.cont[s] = c & 7
	}
	if p.d == pgNewRunUnpinned {
		p.pins[s] = 0
		p.clock++
		p.since[s] = p.clock
	}
	p.st.Allocs++
	r := p.run(s)
	if p.high > 0 && p.d != pgNoWatermarks && p.used() >= p.high {
		p.reclaim()
	}
	p.step()
	return r, nil
}

func (p *refPages) reclaim() {
	for v := p.victim(math.MaxInt); v >= 0 && (p.used() > p.low || p.d == pgDrainsToZero); v = p.victim(math.MaxInt) {
		p.evict(v)
	}
}

// lookup returns the first page of the live run r names, or why not.
func (p *refPages) lookup(r pages.Run, counted bool) (int, error) {
	if p.closed && p.d != pgOpenAfterClose {
		return 0, pool.ErrClosed
	}
	gen, first, id := r.Generation(), r.First(), runPool(r)
	var err error
	switch {
	case r.IsZero():
		err = pool.ErrZeroHandle
	case id != p.id && p.d != pgIgnoresOwner:
		err = pool.ErrForeignHandle
	case first >= p.pages():
		err = pool.ErrOutOfRange
	case p.d == pgNoGeneration && gen%2 == 1 && p.n[first] > 0:
		return first, nil
	case p.gen[first] != gen || gen%2 == 0:
		err = pool.ErrStaleHandle
	default:
		return first, nil
	}
	if counted {
		p.st.Rejected++
	}
	return 0, err
}

func (p *refPages) Free(r pages.Run) error {
	if p.evicting && p.d != pgMutableInEviction {
		return pages.ErrInEviction
	}
	s, err := p.lookup(r, true)
	if err != nil {
		return err
	}
	p.pins[s] = 0
	p.release(s)
	p.st.Frees++
	if p.d == pgStrayEvictFunc && p.high > 0 && p.used() >= p.low {
		if v := p.victim(math.MaxInt); v >= 0 {
			p.evict(v)
		}
	}
	p.step()
	return nil
}

func (p *refPages) Pin(r pages.Run) error {
	if p.evicting && p.d != pgMutableInEviction {
		return pages.ErrInEviction
	}
	s, err := p.lookup(r, true)
	if err != nil {
		return err
	}
	p.pins[s]++
	if p.d == pgPin16 {
		p.pins[s] &= 1<<16 - 1
	}
	p.step()
	return nil
}

func (p *refPages) Unpin(r pages.Run) error {
	if p.evicting && p.d != pgMutableInEviction {
		return pages.ErrInEviction
	}
	s, err := p.lookup(r, true)
	if err != nil {
		return err
	}
	if p.pins[s] == 0 {
		if p.d == pgUnpinBelowZero {
			return nil
		}
		return pages.ErrNotPinned
	}
	p.pins[s]--
	if p.pins[s] == 0 && (p.d != pgUnpinKeepsPlace || p.since[s] == 0) {
		p.clock++
		p.since[s] = p.clock
	}
	p.step()
	return nil
}

func (p *refPages) Pins(r pages.Run) (int, error) {
	s, err := p.lookup(r, true)
	if err != nil {
		return 0, err
	}
	return int(p.pins[s]), nil
}

func (p *refPages) Evict(n int) (int, error) {
	if err := p.unusable(); err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, pool.ErrInvalidArgument
	}
	got, evicted := 0, 0
	for v := p.victim(math.MaxInt); v >= 0 && (got < n || (p.d == pgEvictOneMore && got < n+1 && n > 0)); v = p.victim(math.MaxInt) {
		got += int(p.n[v])
		p.evict(v)
		if evicted++; evicted == 2 && p.d == pgEvictAllocs {
			p.sink = append(p.sink, make([]byte, 8))
		}
	}
	p.step()
	return got, nil
}

func (p *refPages) Bytes(r pages.Run) ([]byte, error) {
	s, err := p.lookup(r, true)
	if err != nil {
		return nil, err
	}
	lo, hi := s*p.psize, (s+int(p.n[s]))*p.psize
	if p.d == pgSpareCap && hi < len(p.mem) {
		return p.mem[lo:hi], nil
	}
	return p.mem[lo:hi:hi], nil
}

func (p *refPages) Span(r pages.Run) (int, int, error) {
	s, err := p.lookup(r, p.d != pgSpanUncounted)
	if err != nil {
		return 0, 0, err
	}
	return s, int(p.n[s]), nil
}

func (p *refPages) Content(r pages.Run) (pages.Content, error) {
	s, err := p.lookup(r, true)
	if err != nil {
		return 0, err
	}
	return p.cont[s], nil
}

func (p *refPages) Stats() pages.Stats {
	if p.closed {
		if p.d == pgStatsAfterClose {
			return pages.Stats{}
		}
		return p.final
	}
	st := p.stats()
	p.publish()
	return st
}

func (p *refPages) stats() pages.Stats {
	st := p.st
	st.PageSize, st.Pages, st.Fit = p.psize, p.pages(), p.fit
	for s := 0; s < p.pages(); {
		if o := p.owner[s]; o >= 0 {
			// A defect may leave s inside a run: count its remaining pages.
			n := max(1, int(p.n[o])-(s-int(o)))
			st.Used += n
			if int(o) != s {
				s += n
				continue
			}
			st.Runs++
			st.Pins += uint64(p.pins[s])
			if p.pins[s] > 0 {
				st.PinnedRuns++
			} else if p.types[p.cont[s]].Evictable {
				st.Evictable += n
			}
			st.Content[p.cont[s]].Runs++
			st.Content[p.cont[s]].Pages += n
			s += n
			continue
		}
		l := p.gap(s)
		st.FreeRuns++
		st.LargestFree = max(st.LargestFree, l)
		s += l
	}
	st.Free = p.pages() - st.Used
	return st
}

func (p *refPages) publish() {
	st := p.stats()
	p.pub.Publish([2]pages.Stats{st, p.last})
	p.last = st
}

// step publishes when a Snapshot asked, as a pages.Pool's calls do.
func (p *refPages) step() {
	if p.d != pgStatsOnlyPublish && p.pub.Wanted() {
		p.publish()
	}
}

func (p *refPages) Snapshot() pages.Stats {
	v := p.pub.Get()
	if p.d == pgTornSnapshot {
		st := v[0]
		st.Used = v[1].Used
		return st
	}
	return v[0]
}

func (p *refPages) Close() error {
	if err := p.unusable(); err != nil {
		return err
	}
	if p.d == pgOpenAfterClose {
		return nil
	}
	p.final = p.stats()
	if p.d != pgCloseUnpublished {
		p.pub.Seal([2]pages.Stats{p.final, p.last})
		p.last = p.final
	}
	p.closed = true
	if p.d == pgRecycledIDs {
		recycled.Lock()
		recycled.ids = append(recycled.ids, p.id)
		recycled.Unlock()
	}
	return nil
}
