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
	keep, err := m.alloc(3, kvCache)
	if err != nil || keep == nil {
		return refusedOr(err, "Alloc(3) on an empty region failed")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	var olds []pages.Run
	for round := range scaled(400) {
		n := 1 + rng.IntN(4)
		x, err := m.alloc(n, pages.Content(rng.IntN(len(m.types))))
		if err != nil || x == nil {
			return refusedOr(err, "round %d: Alloc(%d) failed", round, n)
		}
		old := x.Key
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
			return refusedOr(err, "round %d: Alloc(%d) after freeing %d pages failed", round, n, n)
		}
		if y.Key == old {
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
	if err := foreignAcross(models, "run", func(_ int, m *pgModel) error { return m.freeAll() }); err != nil {
		return err
	}
	// One run of the whole region each: writes to one never show in
	// another.
	wholes := make([][]byte, len(models))
	for k, m := range models {
		x, err := m.alloc(m.Pages, weights)
		if err != nil || x == nil {
			return refusedOr(err, "allocator %d: a run of the whole region did not fit", k)
		}
		if wholes[k], err = m.in.Bytes(x.Key); err != nil {
			return violationf(ErrContract, "Bytes: %v", err)
		}
	}
	err = disjoint(0, 9, fixed(wholes), func(k, i int) error {
		return violationf(ErrAliased, "byte %d of allocator %d's region was overwritten by a write to another allocator's region", i, k)
	})
	if err != nil {
		return err
	}
	return closedIdentity(r, "run", newPgModel)
}

// placeSame places runs of 3, 1 and 4 pages.
func (m *pgModel) placeSame(k int) ([]*pgRun, error) {
	var xs []*pgRun
	for _, n := range []int{3, 1, 4} {
		x, err := m.alloc(n, kvCache)
		if err != nil || x == nil {
			return nil, refusedOr(err, "allocator %d: Alloc(%d) failed", k, n)
		}
		xs = append(xs, x)
	}
	return xs, nil
}

// refusedForeign checks that x, of another allocator, is refused as
// foreign.
func (m *pgModel) refusedForeign(what string, x *pgRun) error {
	return m.refused(what, x.Key, pool.ErrForeignHandle)
}

func checkPagesForged(r *pgCase, m *pgModel) error {
	for m.Used < m.Pages*3/4 {
		if _, err := m.alloc(1+m.Used%7, kvCache); err != nil {
			return err
		}
	}
	// Free every third run: free runs between live ones.
	for i, x := range slices.Clone(m.Live) {
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
	base := m.Live[0]
	if err := m.refused("a run past the region", mkRun(id, uint32(m.Pages), base.Key.Generation()), pool.ErrOutOfRange); err != nil {
		return err
	}
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
			if err := m.intact(x); err != nil {
				return fmt.Errorf("forgery %d: %w", i, err)
			}
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
		switch {
		case got == nil:
			return violationf(ErrAliased, "forgery %d: %s(%v) was accepted; it is no live run (the live run on page %d is not it)", i, name, f, first)
		case !errors.Is(got, want):
			return violationf(ErrContract, "forgery %d: %s(%v) = %v, want %v", i, name, f, got, want)
		}
		m.Rejected++
	}
	for _, x := range m.Live {
		if err := m.intact(x); err != nil {
			return err
		}
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
	wall, err := m.alloc(m.Pages-1, weights)
	if err != nil || wall == nil {
		return refusedOr(err, "Alloc(%d) on an empty region of %d pages failed", m.Pages-1, m.Pages)
	}
	olds, err := wrapCycle(r.ctx, "Alloc(1) with one page free", "Free of the run just placed",
		func() (pages.Run, error) { return in.alloc(1, weights) }, in.Free)
	if err != nil {
		return err
	}
	m.Allocs += wrapCycles
	m.Frees += wrapCycles
	cur, err := m.alloc(1, weights)
	if err != nil || cur == nil {
		return refusedOr(err, "Alloc(1) with one page free failed")
	}
	for _, old := range olds {
		if old == cur.Key {
			return violationf(ErrAliased, "after %d allocations and frees of one page, the run placed there is %v, equal to a run freed thousands of allocations ago: the generation wrapped, and the old run frees the page's current owner", wrapCycles, old)
		}
		if err := m.refused(fmt.Sprintf("a run freed up to %d allocations of its page ago", wrapCycles), old, pool.ErrStaleHandle); err != nil {
			return err
		}
	}
	if err := m.intact(cur); err != nil {
		return err
	}
	if err := m.check(fmt.Sprintf("after %d allocations and frees of one page", wrapCycles)); err != nil {
		return err
	}
	if err := m.freeAll(); err != nil {
		return err
	}

	// A run pinned 2^16 times, among unpinned ones.
	x, err := m.alloc(2, kvCache)
	if err != nil || x == nil {
		return refusedOr(err, "Alloc(2) on an empty region failed")
	}
	for i := 1; i < pinWrap; i++ {
		if err := in.Pin(x.Key); err != nil {
			return violationf(ErrContract, "Pin %d of %v: %v", i+1, x.Key, err)
		}
	}
	x.Pins = pinWrap
	if n, err := in.Pins(x.Key); n != pinWrap || err != nil {
		return violationf(ErrContract, "Pins of a run pinned %d times = %d, %v: the pin count wrapped", pinWrap, n, err)
	}
	for m.Used < m.Pages {
		y, err := m.alloc(min(3, m.Pages-m.Used), kvCache)
		if err != nil || y == nil {
			return refusedOr(err, "Alloc with %d pages free failed", m.Pages-m.Used)
		}
		if err := m.unpin(y); err != nil {
			return err
		}
	}
	if err := m.evict(m.Pages); err != nil {
		return fmt.Errorf("with a run pinned %d times: %w", pinWrap, err)
	}
	if _, err := m.alloc(m.Pages, weights); err != nil {
		return fmt.Errorf("with a run pinned %d times: %w", pinWrap, err)
	}
	if err := m.check(fmt.Sprintf("with a run pinned %d times", pinWrap)); err != nil {
		return err
	}
	for i := 1; i < pinWrap; i++ {
		if err := in.Unpin(x.Key); err != nil {
			return violationf(ErrContract, "Unpin %d of %v, pinned %d times: %v", i, x.Key, pinWrap, err)
		}
	}
	x.Pins = 1
	if n, err := in.Pins(x.Key); n != 1 || err != nil {
		return violationf(ErrContract, "Pins of a run pinned %d times and unpinned %d times = %d, %v, want 1", pinWrap, pinWrap-1, n, err)
	}
	if err := m.unpin(x); err != nil {
		return err
	}
	if err := m.evict(1); err != nil {
		return err
	}
	return m.check("after the last pin went")
}
