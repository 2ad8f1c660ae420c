package conformance

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/locus-go/locus/pages"
	"github.com/locus-go/locus/pool"
)

func checkPagesStale(r *pgCase, m *pgModel) error {
	keep := m.alloc(3, kvCache)
	require(keep != nil, ErrContract, "Alloc(3) on an empty region failed")
	rng := rand.New(rand.NewPCG(5, 6))
	var olds []pages.Run
	for round := range scaled(400) {
		n := 1 + rng.IntN(4)
		x := m.alloc(n, pages.Content(rng.IntN(len(m.types))))
		require(x != nil, ErrContract, "round %d: Alloc(%d) failed", round, n)
		old := x.Key
		m.free(x)
		during(func() { m.refused("a freed run", old, pool.ErrStaleHandle) }, "round %d", round)
		// The same pages, a new run: the old one still refused, the new
		// one untouched.
		y := m.alloc(n, kvCache)
		require(y != nil, ErrContract, "round %d: Alloc(%d) after freeing %d pages failed", round, n, n)
		require(y.Key != old, ErrAliased, "round %d: the run placed after freeing %v is equal to it: the old run reaches the new one's pages", round, old)
		during(func() {
			m.refused("a freed run whose pages were reused", old, pool.ErrStaleHandle)
			must(m.intact(y))
		}, "round %d", round)
		m.free(y)
		if len(olds) < 32 {
			olds = append(olds, old)
		}
		must(m.check(fmt.Sprintf("round %d", round)))
	}
	for _, old := range olds {
		m.refused("a run freed hundreds of allocations ago", old, pool.ErrStaleHandle)
	}
	must(m.intact(keep))
	return m.check("after every stale call")
}

func checkPagesInstances(r *pgCase) error {
	models, err := instances(r, 3, newPgModel)
	must(err)
	must(foreignAcross(models, "run", func(_ int, m *pgModel) error {
		m.freeAll()
		return nil
	}))
	// One run of the whole region each: writes to one never show in
	// another.
	wholes := make([][]byte, len(models))
	for k, m := range models {
		x := m.alloc(m.Pages, weights)
		require(x != nil, ErrContract, "allocator %d: a run of the whole region did not fit", k)
		wholes[k], err = m.in.Bytes(x.Key)
		mustOK("Bytes", err)
	}
	must(disjoint(0, 9, fixed(wholes), func(k, i int) error {
		return violationf(ErrAliased, "byte %d of allocator %d's region was overwritten by a write to another allocator's region", i, k)
	}))
	return closedIdentity(r, "run", newPgModel)
}

// placeSame places runs of 3, 1 and 4 pages. A failed check ends the case:
// the error, which idModel asks for, is nil.
func (m *pgModel) placeSame(k int) ([]*pgRun, error) {
	var xs []*pgRun
	for _, n := range []int{3, 1, 4} {
		x := m.alloc(n, kvCache)
		require(x != nil, ErrContract, "allocator %d: Alloc(%d) failed", k, n)
		xs = append(xs, x)
	}
	return xs, nil
}

// refusedForeign checks that x, of another allocator, is refused as
// foreign. A failed check ends the case: the error, which idModel asks
// for, is nil.
func (m *pgModel) refusedForeign(what string, x *pgRun) error {
	m.refused(what, x.Key, pool.ErrForeignHandle)
	return nil
}

func checkPagesForged(r *pgCase, m *pgModel) error {
	for m.Used < m.Pages*3/4 {
		m.alloc(1+m.Used%7, kvCache)
	}
	// Free every third run: free runs between live ones.
	for i, x := range slices.Clone(m.Live) {
		if i%3 == 0 {
			m.free(x)
		}
	}
	id := m.id
	m.refused("the zero run", pages.Run{}, pool.ErrZeroHandle)
	base := m.Live[0]
	m.refused("a run past the region", mkRun(id, uint32(m.Pages), base.Key.Generation()), pool.ErrOutOfRange)
	rng := rand.New(rand.NewPCG(6, 7))
	for i := range scaled(3000) {
		base := m.Pick(rng)
		first, gen, pid := uint32(base.First), base.Key.Generation(), id
		var want error
		if k := rng.IntN(9); k != 7 {
			pid, first, gen, want = forge(rng, k, id, first, gen, m.Pages)
		} else {
			if base.N > 1 { // a page inside the run, with its generation
				first += uint32(1 + rng.IntN(base.N-1))
			}
			want = refusal(id, pid, first, gen, m.Pages)
		}
		f := mkRun(pid, first, gen)
		if x, live := m.ByKey[f]; live {
			mustIn(m.intact(x), "forgery %d", i)
			continue
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
		require(got != nil, ErrAliased, "forgery %d: %s(%v) was accepted; it is no live run (the live run on page %d is not it)", i, name, f, first)
		require(errors.Is(got, want), ErrContract, "forgery %d: %s(%v) = %v, want %v", i, name, f, got, want)
		m.Rejected++
	}
	for _, x := range m.Live {
		must(m.intact(x))
	}
	return m.check("after the forgeries")
}

// pinWrap is how many pins Wraparound holds on one run: the wrap of a 16-bit
// count.
const pinWrap = 1 << 16

func checkPagesWrap(r *pgCase, m *pgModel) error {
	in := m.in
	// Everything but one page is taken, so that every run of one page is
	// placed on that page, whatever the fit.
	wall := m.alloc(m.Pages-1, weights)
	require(wall != nil, ErrContract, "Alloc(%d) on an empty region of %d pages failed", m.Pages-1, m.Pages)
	olds := wrapCycle(r.ctx, "Alloc(1) with one page free", "Free of the run just placed",
		func() (pages.Run, error) { return in.alloc(1, weights) }, in.Free)
	m.Allocs += wrapCycles
	m.Frees += wrapCycles
	cur := m.alloc(1, weights)
	require(cur != nil, ErrContract, "Alloc(1) with one page free failed")
	for _, old := range olds {
		require(old != cur.Key, ErrAliased, "after %d allocations and frees of one page, the run placed there is %v, equal to a run freed thousands of allocations ago: the generation wrapped, and the old run frees the page's current owner", wrapCycles, old)
		m.refused(fmt.Sprintf("a run freed up to %d allocations of its page ago", wrapCycles), old, pool.ErrStaleHandle)
	}
	must(m.intact(cur))
	must(m.check(fmt.Sprintf("after %d allocations and frees of one page", wrapCycles)))
	m.freeAll()

	// A run pinned 2^16 times, among unpinned ones.
	x := m.alloc(2, kvCache)
	require(x != nil, ErrContract, "Alloc(2) on an empty region failed")
	for i := 1; i < pinWrap; i++ {
		if err := in.Pin(x.Key); err != nil { // not require: 2^16 passes
			must(violationf(ErrContract, "Pin %d of %v: %v", i+1, x.Key, err))
		}
	}
	x.Pins = pinWrap
	n, err := in.Pins(x.Key)
	require(n == pinWrap && err == nil, ErrContract, "Pins of a run pinned %d times = %d, %v: the pin count wrapped", pinWrap, n, err)
	for m.Used < m.Pages {
		y := m.alloc(min(3, m.Pages-m.Used), kvCache)
		require(y != nil, ErrContract, "Alloc with %d pages free failed", m.Pages-m.Used)
		m.unpin(y)
	}
	during(func() {
		m.evict(m.Pages)
		m.alloc(m.Pages, weights)
	}, "with a run pinned %d times", pinWrap)
	must(m.check(fmt.Sprintf("with a run pinned %d times", pinWrap)))
	for i := 1; i < pinWrap; i++ {
		if err := in.Unpin(x.Key); err != nil { // not require: 2^16 passes
			must(violationf(ErrContract, "Unpin %d of %v, pinned %d times: %v", i, x.Key, pinWrap, err))
		}
	}
	x.Pins = 1
	n, err = in.Pins(x.Key)
	require(n == 1 && err == nil, ErrContract, "Pins of a run pinned %d times and unpinned %d times = %d, %v, want 1", pinWrap, pinWrap-1, n, err)
	m.unpin(x)
	m.evict(1)
	return m.check("after the last pin went")
}
