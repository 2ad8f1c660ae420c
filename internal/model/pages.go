package model

import (
	"cmp"
	"math"
	"slices"
)

// Type is what the region model needs of a content type.
type Type struct {
	Priority  int
	Evictable bool
}

// Run is a live run of the region model; Key is the allocator's handle
// of it.
type Run[K comparable] struct {
	Key      K
	First, N int
	Pins     int
	C        int // content type
	Tag      byte
	Since    uint64 // when its last pin went: its place in the eviction order
	at       int    // its index in Live
	seq      uint64 // when it was added: its place in InOrder
}

// Region is the model of an allocator of contiguous page runs (package
// pages): the live run on each page, every live run's length, content, pins
// and place in the eviction order, and the counters of its Stats. It
// places nothing itself: where the allocator may place a run is Allowed,
// and the caller adds the run the allocator placed.
type Region[K comparable] struct {
	Pages     int
	FirstFit  bool
	Types     []Type
	High, Low int           // watermarks in pages; High == 0: none
	Owner     []*Run[K]     // page -> the live run holding it
	Live      []*Run[K]     // the live runs, in no order
	ByKey     map[K]*Run[K] // the live runs by handle
	Stale     []K           // freed and evicted runs, the latest StaleKeep
	Used      int
	Clock     uint64
	// Dropped holds the runs evicted for the call in progress (see
	// Evicting, Reclaim and Evict).
	Dropped map[K]*Run[K]
	added   uint64 // runs added so far: the next run's seq

	Allocs, Frees, Evictions, EvictedPages, Failed, Rejected uint64
	ContentEvictions                                         []uint64
}

// NewRegion returns the model of an empty region of n pages with the
// watermarks high and low (fractions of n; 0: none).
func NewRegion[K comparable](n int, firstFit bool, types []Type, high, low float64) *Region[K] {
	m := &Region[K]{
		Pages: n, FirstFit: firstFit, Types: types, Owner: make([]*Run[K], n),
		ByKey: map[K]*Run[K]{}, Dropped: map[K]*Run[K]{}, ContentEvictions: make([]uint64, len(types)),
	}
	if high > 0 {
		m.High = max(1, int(math.Ceil(high*float64(n))))
		m.Low = int(low * float64(n))
	}
	return m
}

// Gaps returns the maximal free runs as (first, length).
func (m *Region[K]) Gaps() [][2]int {
	var g [][2]int
	for p := 0; p < m.Pages; {
		if m.Owner[p] != nil {
			p += m.Owner[p].N - (p - m.Owner[p].First)
			continue
		}
		q := p
		for q < m.Pages && m.Owner[q] == nil {
			q++
		}
		g = append(g, [2]int{p, q - p})
		p = q
	}
	return g
}

// Fits reports whether a free run holds n pages.
func (m *Region[K]) Fits(n int) bool {
	for _, g := range m.Gaps() {
		if g[1] >= n {
			return true
		}
	}
	return false
}

// Allowed returns the free runs the fit may place n pages in: the
// lowest-addressed one that holds them (first fit), or every smallest one
// (best fit).
func (m *Region[K]) Allowed(n int) [][2]int {
	var out [][2]int
	for _, g := range m.Gaps() {
		switch {
		case g[1] < n:
		case m.FirstFit:
			return [][2]int{g}
		case len(out) == 0 || g[1] < out[0][1]:
			out = [][2]int{g}
		case g[1] == out[0][1]:
			out = append(out, g)
		}
	}
	return out
}

// Candidate reports whether x may be evicted for content of priority prio.
func (m *Region[K]) Candidate(x *Run[K], prio int) bool {
	t := m.Types[x.C]
	return x.Pins == 0 && t.Evictable && t.Priority <= prio
}

// Victim returns the next run to evict for content of priority prio: the
// lowest priority, then the least recently unpinned.
func (m *Region[K]) Victim(prio int) *Run[K] {
	var v *Run[K]
	for _, x := range m.Live {
		if !m.Candidate(x, prio) {
			continue
		}
		if v == nil || m.Types[x.C].Priority < m.Types[v.C].Priority ||
			(m.Types[x.C].Priority == m.Types[v.C].Priority && x.Since < v.Since) {
			v = x
		}
	}
	return v
}

// CandidatePages sums the pages an allocation of priority prio may evict.
func (m *Region[K]) CandidatePages(prio int) int {
	n := 0
	for _, x := range m.Live {
		if m.Candidate(x, prio) {
			n += x.N
		}
	}
	return n
}

// Drop takes x out of the model, freed or evicted.
func (m *Region[K]) Drop(x *Run[K], evicted bool) {
	for p := x.First; p < x.First+x.N; p++ {
		m.Owner[p] = nil
	}
	last := m.Live[len(m.Live)-1]
	m.Live[x.at], last.at = last, x.at
	m.Live = m.Live[:len(m.Live)-1]
	delete(m.ByKey, x.Key)
	m.Used -= x.N
	m.Stale = keep(m.Stale, x.Key)
	if evicted {
		m.Dropped[x.Key] = x
		m.Evictions++
		m.EvictedPages += uint64(x.N)
		m.ContentEvictions[x.C]++
	} else {
		m.Frees++
	}
}

// Evicting drops, in order, the runs an allocation of n pages of content c
// evicts before it is placed, and returns them and whether it is placed:
// when no free run holds n pages it evicts candidates, lowest priority and
// least recently unpinned first, until one does, and none when even every
// candidate could not free enough pages. It starts a call: Dropped is
// cleared first.
func (m *Region[K]) Evicting(n, c int) (room []*Run[K], placed bool) {
	clear(m.Dropped)
	if !m.Fits(n) {
		prio := m.Types[c].Priority
		if m.Pages-m.Used+m.CandidatePages(prio) >= n {
			for !m.Fits(n) {
				v := m.Victim(prio)
				if v == nil {
					break
				}
				m.Drop(v, true)
				room = append(room, v)
			}
		}
	}
	return room, m.Fits(n)
}

// Add adds the run the allocator placed at first, with one pin.
func (m *Region[K]) Add(key K, first, n, c int, tag byte) *Run[K] {
	x := &Run[K]{Key: key, First: first, N: n, Pins: 1, C: c, Tag: tag, at: len(m.Live), seq: m.added}
	m.added++
	for p := first; p < first+n; p++ {
		m.Owner[p] = x
	}
	m.Live = append(m.Live, x)
	m.ByKey[key] = x
	m.Used += n
	m.Allocs++
	return x
}

// InOrder returns the live runs in the order they were added, the oldest
// first. Unlike Live's order, which a Drop shuffles, it is the order of a
// list that only appends and removes: for a decoder that picks a run by
// its index in allocation order (pages' FuzzEdges).
func (m *Region[K]) InOrder() []*Run[K] {
	out := slices.Clone(m.Live)
	slices.SortFunc(out, func(a, b *Run[K]) int { return cmp.Compare(a.seq, b.seq) })
	return out
}

// Reclaim drops, in order, the runs the watermarks evict after an
// allocation: with at least High pages in use, evictable unpinned runs
// until at most Low are.
func (m *Region[K]) Reclaim() []*Run[K] {
	var marked []*Run[K]
	if m.High > 0 && m.Used >= m.High {
		for m.Used > m.Low {
			v := m.Victim(math.MaxInt)
			if v == nil {
				break
			}
			m.Drop(v, true)
			marked = append(marked, v)
		}
	}
	return marked
}

// Evict drops, in order, the runs Evict(n) evicts, and returns them and
// the pages they hold. It starts a call: Dropped is cleared first.
func (m *Region[K]) Evict(n int) ([]*Run[K], int) {
	clear(m.Dropped)
	var want []*Run[K]
	got := 0
	for got < n {
		v := m.Victim(math.MaxInt)
		if v == nil {
			break
		}
		m.Drop(v, true)
		want = append(want, v)
		got += v.N
	}
	return want, got
}

// Unpin takes one pin of x; the last one makes it the most recently
// unpinned.
func (m *Region[K]) Unpin(x *Run[K]) {
	x.Pins--
	if x.Pins == 0 {
		m.Clock++
		x.Since = m.Clock
	}
}

// Counts are the counts of the region's Stats that follow from its runs.
type Counts struct {
	Used, Free, Runs, FreeRuns, LargestFree, Evictable int
	Pins                                               uint64
	PinnedRuns                                         int
	ContentRuns, ContentPages                          []int
}

// Count returns the counts the allocator's Stats must show.
func (m *Region[K]) Count() Counts {
	c := Counts{Used: m.Used, Free: m.Pages - m.Used, Runs: len(m.Live),
		ContentRuns: make([]int, len(m.Types)), ContentPages: make([]int, len(m.Types))}
	for _, g := range m.Gaps() {
		c.FreeRuns++
		c.LargestFree = max(c.LargestFree, g[1])
	}
	for _, x := range m.Live {
		c.Pins += uint64(x.Pins)
		if x.Pins > 0 {
			c.PinnedRuns++
		} else if m.Types[x.C].Evictable {
			c.Evictable += x.N
		}
		c.ContentRuns[x.C]++
		c.ContentPages[x.C] += x.N
	}
	return c
}

// Pick returns a live run chosen by src, or nil.
func (m *Region[K]) Pick(src Source) *Run[K] {
	if len(m.Live) == 0 {
		return nil
	}
	return m.Live[src.IntN(len(m.Live))]
}

// Length returns a run length chosen by src: mostly short, now and then up
// to the whole region.
func (m *Region[K]) Length(src Source) int {
	if src.IntN(16) == 0 {
		return 1 + src.IntN(m.Pages)
	}
	return 1 + src.IntN(max(m.Pages/8, 1))
}

// The kinds of RegionOp.
const (
	RegionNone  = iota // nothing: no live run, or no stale one, to call with
	RegionAlloc        // Alloc(N, C)
	RegionFree         // Free(Run)
	RegionPin          // Pin(Run)
	RegionUnpin        // Unpin(Run)
	RegionEvict        // Evict(N)
	RegionStale        // a call with the stale Key, on path Path of 4 (Free, Pin, Unpin, Span)
	RegionRead         // read Run back
)

// RegionOp is one decoded operation on a region.
type RegionOp[K comparable] struct {
	Kind int
	N, C int
	Run  *Run[K]
	Key  K
	Path int
}

// Next decodes the next operation from src: allocations of every content
// type, frees, pins, unpins, evictions, calls with stale runs and reads.
func (m *Region[K]) Next(src Source) RegionOp[K] {
	var o RegionOp[K]
	switch op := src.IntN(100); {
	case op < 36:
		o.Kind, o.N = RegionAlloc, m.Length(src)
		o.C = src.IntN(len(m.Types))
		return o
	case op < 52:
		o.Kind = RegionFree
	case op < 60:
		o.Kind = RegionPin
	case op < 82:
		o.Kind = RegionUnpin
	case op < 86:
		return RegionOp[K]{Kind: RegionEvict, N: src.IntN(max(m.Pages/4, 1))}
	case op < 90:
		if len(m.Stale) > 0 {
			o.Kind, o.Key = RegionStale, m.Stale[src.IntN(len(m.Stale))]
			o.Path = src.IntN(4)
		}
		return o
	default:
		o.Kind = RegionRead
	}
	if o.Run = m.Pick(src); o.Run == nil {
		o.Kind = RegionNone
	}
	return o
}
