package pages_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/locus-go/locus/pages"
	"github.com/locus-go/locus/pool"
)

// edgeModel is an obviously correct run allocator with pins and eviction: a page
// map, a list of live runs and one slice per priority in eviction order.
// FuzzEdges runs the same operations on it and on a real Pool. Where the
// contract leaves a choice (which of several equally good free runs best
// fit takes), the edgeModel checks that the Pool's choice is one it allows and
// follows it.
type edgeModel struct {
	fit     pages.Fit
	owner   []int // page -> 1 + index in order of the live run holding it, 0 if free
	live    map[pages.Run]*edgeRun
	order   []pages.Run         // live runs, for picking one by index
	lru     map[int][]pages.Run // priority -> unpinned evictable runs, least recent first
	prios   []int               // evictable priorities, ascending
	high    int                 // watermarks in pages; 0: off
	low     int
	want    pages.Stats            // counters the edgeModel keeps
	evicted []pages.Run            // what it expects the EvictFunc to hear, in order
	gone    map[pages.Run]*edgeRun // the runs it evicted, for the EvictFunc to look up
}

type edgeRun struct {
	first, n, pins int
	c              pages.Content
	tag            byte
}

func newEdgeModel(n int, fit pages.Fit, high, low float64) *edgeModel {
	m := &edgeModel{fit: fit, owner: make([]int, n), live: map[pages.Run]*edgeRun{}, lru: map[int][]pages.Run{}, gone: map[pages.Run]*edgeRun{}}
	for _, t := range fuzzTypes {
		if t.Evictable && !slices.Contains(m.prios, t.Priority) {
			m.prios = append(m.prios, t.Priority)
		}
	}
	slices.Sort(m.prios)
	if high > 0 {
		m.high = max(1, int(math.Ceil(high*float64(n))))
		m.low = int(low * float64(n))
	}
	return m
}

func (m *edgeModel) used() int {
	u := 0
	for _, r := range m.live {
		u += r.n
	}
	return u
}

// gaps returns the maximal free runs as (first, n).
func (m *edgeModel) gaps() [][2]int {
	var g [][2]int
	for p := 0; p < len(m.owner); {
		if m.owner[p] != 0 {
			p++
			continue
		}
		q := p
		for q < len(m.owner) && m.owner[q] == 0 {
			q++
		}
		g = append(g, [2]int{p, q - p})
		p = q
	}
	return g
}

// allowed returns the first pages where the fit may place n pages.
func (m *edgeModel) allowed(n int) []int {
	var firsts []int
	best := math.MaxInt
	for _, g := range m.gaps() {
		switch {
		case g[1] < n:
		case m.fit == pages.FirstFit:
			return []int{g[0]}
		case g[1] < best:
			best, firsts = g[1], []int{g[0]}
		case g[1] == best:
			firsts = append(firsts, g[0])
		}
	}
	return firsts
}

func (m *edgeModel) mark(first, n, v int) {
	for p := first; p < first+n; p++ {
		m.owner[p] = v
	}
}

func (m *edgeModel) add(r pages.Run, mr *edgeRun) {
	m.live[r] = mr
	m.order = append(m.order, r)
	m.mark(mr.first, mr.n, 1)
}

func (m *edgeModel) drop(r pages.Run) {
	m.unlist(r)
	mr := m.live[r]
	m.mark(mr.first, mr.n, 0)
	delete(m.live, r)
	i := slices.Index(m.order, r)
	m.order = append(m.order[:i], m.order[i+1:]...)
}

func (m *edgeModel) unlist(r pages.Run) {
	prio := fuzzTypes[m.live[r].c].Priority
	if i := slices.Index(m.lru[prio], r); i >= 0 {
		m.lru[prio] = append(m.lru[prio][:i], m.lru[prio][i+1:]...)
	}
}

func (m *edgeModel) evictOne(prio int) {
	r := m.lru[prio][0]
	mr := m.live[r]
	m.evicted = append(m.evicted, r)
	m.gone[r] = mr
	m.want.Evictions++
	m.want.EvictedPages += uint64(mr.n)
	m.want.Content[mr.c].Evictions++
	m.mark(mr.first, mr.n, 0)
	m.lru[prio] = m.lru[prio][1:]
	delete(m.live, r)
	i := slices.Index(m.order, r)
	m.order = append(m.order[:i], m.order[i+1:]...)
}

// makeRoom evicts as Alloc(n, c) must when nothing fits.
func (m *edgeModel) makeRoom(n int, c pages.Content) {
	prio := fuzzTypes[c].Priority
	avail := len(m.owner) - m.used()
	for _, p := range m.prios {
		if p <= prio {
			for _, r := range m.lru[p] {
				avail += m.live[r].n
			}
		}
	}
	if avail < n {
		return
	}
	for _, p := range m.prios {
		if p > prio {
			return
		}
		for len(m.lru[p]) > 0 {
			m.evictOne(p)
			if len(m.allowed(n)) > 0 {
				return
			}
		}
	}
}

// reclaim evicts as the watermarks require once a run of extra pages
// is allocated; which runs go does not depend on where that run lands.
func (m *edgeModel) reclaim(extra int) {
	if m.high == 0 || m.used()+extra < m.high {
		return
	}
	for _, p := range m.prios {
		for len(m.lru[p]) > 0 && m.used()+extra > m.low {
			m.evictOne(p)
		}
	}
}

// check compares the Pool's stats with the edgeModel's.
func (m *edgeModel) check(p *pages.Pool) error {
	got := p.Stats()
	want := m.want
	want.PageSize, want.Pages, want.Fit = got.PageSize, len(m.owner), m.fit
	want.Used = m.used()
	want.Free = len(m.owner) - want.Used
	want.Runs = len(m.live)
	want.LargestFree, want.FreeRuns = 0, len(m.gaps())
	for _, g := range m.gaps() {
		want.LargestFree = max(want.LargestFree, g[1])
	}
	want.Pins, want.PinnedRuns, want.Evictable = 0, 0, 0
	for i := range want.Content {
		want.Content[i].Runs, want.Content[i].Pages = 0, 0
	}
	for _, r := range m.live {
		want.Pins += uint64(r.pins)
		if r.pins > 0 {
			want.PinnedRuns++
		}
		want.Content[r.c].Runs++
		want.Content[r.c].Pages += r.n
	}
	for _, rs := range m.lru {
		for _, r := range rs {
			want.Evictable += m.live[r].n
		}
	}
	if got != want {
		return fmt.Errorf("stats\n got %+v\nwant %+v", got, want)
	}
	if snap := p.Snapshot(); snap != got {
		return fmt.Errorf("snapshot after Stats\n got %+v\nwant %+v", snap, got)
	}
	return nil
}

// FuzzEdges keeps the page allocator's fuzz target from before FuzzOps
// moved onto the shared decoder (model.Region.Next, the conformance
// suite's op stream): its own model and op mix (runs of up to 8 pages as
// often as short ones, exact placement by fit), and the regression inputs
// saved for it. FuzzOps covers the suite's ops; this one the mix the
// suite's stream draws rarely.
func FuzzEdges(f *testing.F) {
	f.Add([]byte{0, 0, 3, 0, 5, 0, 7, 2, 0, 5, 1, 4, 9})
	f.Add([]byte{1, 8, 31, 16, 31, 5, 13, 5, 21, 0, 31, 6, 7})
	f.Add([]byte{2, 8, 20, 8, 20, 5, 13, 5, 21, 8, 20, 23, 3, 11})
	f.Add([]byte{3, 16, 7, 24, 9, 16, 12, 5, 13, 5, 21, 5, 29, 0, 15, 6, 14, 30})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		const n, pageSize = fuzzPages, fuzzPageSize
		fit, high, low, opts := fuzzConfig(data[0])
		m := newEdgeModel(n, fit, high, low)
		var p *pages.Pool
		var heard []pages.Run
		var hookErr error
		opts = append(opts, pages.WithEvictFunc(func(r pages.Run, c pages.Content) {
			heard = append(heard, r)
			mr := m.gone[r] // the edgeModel evicts first, then the Pool
			if mr == nil || mr.c != c {
				hookErr = fmt.Errorf("evicted %v of content %d, which the edgeModel does not hold", r, c)
				return
			}
			if buf, err := p.Bytes(r); err != nil || buf[0] != mr.tag {
				hookErr = fmt.Errorf("Bytes of %v during its eviction: %v", r, err)
			}
			if err := p.Free(r); !errors.Is(err, pages.ErrInEviction) {
				hookErr = fmt.Errorf("Free from the EvictFunc = %v, want ErrInEviction", err)
			}
		}))
		p, foreign := fuzzPool(t, opts)
		var stale []pages.Run
		tag := byte(0)

		pos := 1
		next := func() int {
			if pos >= len(data) {
				return 0
			}
			pos++
			return int(data[pos-1])
		}
		pick := func(arg int) (pages.Run, *edgeRun) {
			if len(m.order) == 0 {
				return pages.Run{}, nil
			}
			r := m.order[arg%len(m.order)]
			return r, m.live[r]
		}
		for step := 0; pos < len(data); step++ {
			op := next()
			arg := op >> 3
			switch op & 7 {
			case 0, 1: // alloc
				size := next()
				want := 1 + size%8
				if size >= 224 {
					want = 1 + size%n
				}
				c := pages.Content(arg % len(fuzzTypes))
				m.evicted, heard = nil, nil
				if len(m.allowed(want)) == 0 {
					m.makeRoom(want, c)
				}
				allowed := m.allowed(want)
				if len(allowed) > 0 {
					m.reclaim(want)
				}
				r, err := p.Alloc(want, c)
				if len(allowed) == 0 {
					if !errors.Is(err, pool.ErrExhausted) {
						t.Fatalf("step %d: Alloc(%d, %d) = %v, %v; the edgeModel has no room", step, want, c, r, err)
					}
					m.want.Failed++
				} else {
					first, got, serr := p.Span(r)
					if err != nil || serr != nil || got != want || !slices.Contains(allowed, first) {
						t.Fatalf("step %d: Alloc(%d, %d) = %v, %v (span %d+%d, %v); the edgeModel allows first pages %v",
							step, want, c, r, err, first, got, serr, allowed)
					}
					tag++
					buf, _ := p.Bytes(r)
					for i := range buf {
						buf[i] = tag
					}
					m.add(r, &edgeRun{first: first, n: want, pins: 1, c: c, tag: tag})
					m.want.Allocs++
				}
				if hookErr != nil {
					t.Fatalf("step %d: %v", step, hookErr)
				}
				if !slices.Equal(heard, m.evicted) {
					t.Fatalf("step %d: Alloc(%d, %d) evicted %v, the edgeModel %v", step, want, c, heard, m.evicted)
				}
				stale = append(stale, m.evicted...)
			case 2: // free a live run
				r, mr := pick(arg)
				if mr == nil {
					continue
				}
				if buf, _ := p.Bytes(r); buf[0] != mr.tag || buf[len(buf)-1] != mr.tag {
					t.Fatalf("step %d: run %v lost its contents", step, r)
				}
				if err := p.Free(r); err != nil {
					t.Fatalf("step %d: Free(%v) = %v", step, r, err)
				}
				m.drop(r)
				m.want.Frees++
				stale = append(stale, r)
			case 3: // free a stale, foreign or zero run
				bad := []pages.Run{{}, foreign}
				if len(stale) > 0 {
					bad = append(bad, stale[arg%len(stale)])
				}
				r := bad[arg%len(bad)]
				if arg&1 == 1 {
					r = bad[len(bad)-1]
				}
				var err error
				switch arg % 3 {
				case 0:
					err = p.Free(r)
				case 1:
					err = p.Pin(r)
				default:
					_, _, err = p.Span(r)
				}
				if !errors.Is(err, pool.ErrInvalidHandle) {
					t.Fatalf("step %d: call with bad run %v = %v", step, r, err)
				}
				m.want.Rejected++
			case 4: // pin
				r, mr := pick(arg)
				if mr == nil {
					continue
				}
				if err := p.Pin(r); err != nil {
					t.Fatalf("step %d: Pin(%v) = %v", step, r, err)
				}
				if mr.pins == 0 {
					m.unlist(r)
				}
				mr.pins++
			case 5: // unpin
				r, mr := pick(arg)
				if mr == nil {
					continue
				}
				err := p.Unpin(r)
				if mr.pins == 0 {
					if !errors.Is(err, pages.ErrNotPinned) {
						t.Fatalf("step %d: Unpin of an unpinned run = %v", step, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("step %d: Unpin(%v) = %v", step, r, err)
				}
				mr.pins--
				if t := fuzzTypes[mr.c]; mr.pins == 0 && t.Evictable {
					m.lru[t.Priority] = append(m.lru[t.Priority], r)
				}
			case 6: // evict
				want := arg % 8
				m.evicted, heard = nil, nil
				got := 0
				for _, prio := range m.prios {
					for len(m.lru[prio]) > 0 && got < want {
						got += m.live[m.lru[prio][0]].n
						m.evictOne(prio)
					}
				}
				n, err := p.Evict(want)
				if err != nil || n != got || !slices.Equal(heard, m.evicted) || hookErr != nil {
					t.Fatalf("step %d: Evict(%d) = %d, %v, evicting %v (%v); the edgeModel evicts %d pages: %v",
						step, want, n, err, heard, hookErr, got, m.evicted)
				}
				stale = append(stale, m.evicted...)
			case 7: // read a live run back
				r, mr := pick(arg)
				if mr == nil {
					continue
				}
				first, got, err := p.Span(r)
				c, cerr := p.Content(r)
				pins, perr := p.Pins(r)
				if err != nil || cerr != nil || perr != nil || first != mr.first || got != mr.n || c != mr.c || pins != mr.pins {
					t.Fatalf("step %d: run %v reads %d+%d content %d pins %d (%v %v %v); the edgeModel has %+v",
						step, r, first, got, c, pins, err, cerr, perr, *mr)
				}
			}
			if err := m.check(p); err != nil {
				t.Fatalf("step %d (op %d): %v", step, op&7, err)
			}
		}
		for _, r := range slices.Clone(m.order) {
			if err := p.Free(r); err != nil {
				t.Fatalf("freeing the rest: %v", err)
			}
			m.drop(r)
			m.want.Frees++
		}
		if err := m.check(p); err != nil {
			t.Fatalf("after freeing everything: %v", err)
		}
		if st := p.Stats(); st.FreeRuns != 1 || st.LargestFree != n {
			t.Fatalf("after freeing everything the free space is %d runs, the longest %d pages", st.FreeRuns, st.LargestFree)
		}
	})
}
