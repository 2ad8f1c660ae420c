package conformance

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/locus-go/locus/internal/race"
	"github.com/locus-go/locus/pages"
	"github.com/locus-go/locus/pool"
)

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

func checkPagesLengths(r *pgCase, m *pgModel) error {
	for i, n := range runLengths(m.Pages) {
		c := pages.Content(i % len(m.types))
		x, err := m.alloc(n, c)
		if err != nil || x == nil {
			return refusedOr(err, "Alloc(%d) on an empty region of %d pages failed", n, m.Pages)
		}
		if err := m.check(fmt.Sprintf("after Alloc(%d) on an empty region", n)); err != nil {
			return err
		}
		if n < m.Pages {
			rest, err := m.alloc(m.Pages-n, c)
			if err != nil || rest == nil {
				return refusedOr(err, "Alloc(%d) beside a run of %d pages in a region of %d failed", m.Pages-n, n, m.Pages)
			}
			if _, err := m.alloc(1, c); err != nil {
				return err
			}
			if err := m.check(fmt.Sprintf("with the region full (%d + %d pages)", n, m.Pages-n)); err != nil {
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

func checkPagesPlacement(r *pgCase, m *pgModel) error {
	if err := checkPagesManyFreeRuns(m); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(11, 12))
	for layout := range scaled(12) {
		// Cut the region into live separators of 1 to 2 pages and runs
		// of hole lengths (some repeated: best fit has a choice), then
		// free the latter.
		var holes []*pgRun
		for m.Used < m.Pages {
			// The separators stay live until the layout is freed below.
			sep, err := m.alloc(min(1+rng.IntN(2), m.Pages-m.Used), weights)
			if err != nil || sep == nil {
				return refusedOr(err, "layout %d: a separator did not fit", layout)
			}
			left := m.Pages - m.Used
			if left == 0 {
				break
			}
			fitting := slices.DeleteFunc(slices.Clone(holeLengths), func(k int) bool { return k > left })
			n := fitting[rng.IntN(len(fitting))]
			if layout%3 == 2 && len(holes) > 0 && holes[len(holes)-1].N <= left {
				n = holes[len(holes)-1].N
			}
			h, err := m.alloc(n, weights)
			if err != nil || h == nil {
				return refusedOr(err, "layout %d: a run of %d pages did not fit in %d free", layout, n, left)
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
		for _, g := range m.Gaps() {
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

// checkPagesManyFreeRuns cuts the region into as many free runs as it
// holds: runs of two pages, then, at the highest addresses, single pages;
// and checks that every length lands where the fit says. A best fit that
// looks at the first few free runs only (16, say: a region of 50 pages or
// more has more runs of two before its first single page), or degrades to
// first fit past a number of them, shows here.
func checkPagesManyFreeRuns(m *pgModel) error {
	var holes []*pgRun
	for m.Used < m.Pages {
		left := m.Pages - m.Used
		n := 1
		if left > 4 {
			n = 2
		}
		h, err := m.alloc(min(n, left), weights)
		if err != nil || h == nil {
			return refusedOr(err, "a run of %d pages did not fit in %d free", n, left)
		}
		holes = append(holes, h)
		if m.Used < m.Pages {
			if _, err := m.alloc(1, weights); err != nil {
				return err
			}
		}
	}
	for _, h := range holes {
		if err := m.free(h); err != nil {
			return err
		}
	}
	if err := m.check(fmt.Sprintf("with %d free runs", len(holes))); err != nil {
		return err
	}
	for n := 1; n <= 4; n++ {
		x, err := m.alloc(n, weights)
		if err != nil {
			return fmt.Errorf("with %d free runs: %w", len(holes), err)
		}
		if x != nil {
			if err := m.free(x); err != nil {
				return err
			}
		}
	}
	return m.freeAll()
}

func checkPagesNoOverlap(r *pgCase, m *pgModel) error {
	rng := rand.New(rand.NewPCG(1, 2))
	var err error
	for step := range scaled(3000) {
		if rng.IntN(5) < 2 && len(m.Live) > 0 {
			err = m.free(m.Pick(rng))
		} else {
			_, err = m.alloc(m.Length(rng), pages.Content(rng.IntN(len(m.types))))
		}
		if err == nil {
			err = m.check("")
		}
		if err == nil && step%256 == 255 {
			for _, x := range m.Live {
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

func checkPagesCoalescing(r *pgCase, m *pgModel) error {
	// fill fills the region: runs of 1, 2, 3, 5 and 8 pages, then whatever
	// fills the free runs left, largest first.
	fill := func() ([]*pgRun, error) {
		var runs []*pgRun
		for _, n := range []int{1, 2, 3, 5, 8} {
			x, err := m.alloc(n, kvCache)
			if err != nil || x == nil {
				return nil, refusedOr(err, "Alloc(%d) on a region with %d pages free failed", n, m.Pages-m.Used)
			}
			runs = append(runs, x)
		}
		for m.Used < m.Pages {
			longest := 0
			for _, g := range m.Gaps() {
				longest = max(longest, g[1])
			}
			x, err := m.alloc(longest, kvCache)
			if err != nil || x == nil {
				return nil, refusedOr(err, "Alloc(%d) with a free run of %d pages failed", longest, longest)
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
		whole, err := m.alloc(m.Pages, kvCache)
		if err != nil || whole == nil {
			return refusedOr(err, "after freeing every run in the order %v, a run of the whole region (%d pages) did not fit: free runs %v", order, m.Pages, m.Gaps())
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

func checkPagesExhaustion(r *pgCase, m *pgModel) error {
	var err error
	ones := make([]*pgRun, m.Pages)
	for i := range ones {
		if ones[i], err = m.alloc(1, weights); err != nil || ones[i] == nil {
			return refusedOr(err, "filling the region page by page: Alloc(1) with %d pages free failed", m.Pages-i)
		}
	}
	for _, n := range []int{1, 2, m.Pages} {
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
	for _, n := range []int{2, 3, m.Pages / 2} {
		if _, err := m.alloc(n, weights); err != nil {
			return err
		}
		if err := m.check(fmt.Sprintf("after a refused Alloc(%d) with %d single pages free", n, m.Pages/2)); err != nil {
			return err
		}
	}
	// Single pages still fit, until none is left.
	for range m.Pages/2 + 1 {
		if _, err := m.alloc(1, weights); err != nil {
			return err
		}
	}
	return m.check("after filling the single free pages")
}

func checkPagesArguments(r *pgCase, m *pgModel) error {
	in := m.in
	x, err := m.alloc(2, kvCache)
	if err != nil || x == nil {
		return refusedOr(err, "Alloc(2) on an empty region failed")
	}
	for _, n := range []int{0, -1, math.MinInt, m.Pages + 1, math.MaxInt} {
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

func checkPagesDefault(r *pgCase, m *pgModel) error {
	in := m.in
	if _, err := in.alloc(1, 1); !errors.Is(err, pool.ErrInvalidArgument) {
		return violationf(ErrContract, "Alloc(1, content 1) with only the default content type = %v, want pool.ErrInvalidArgument", err)
	}
	// Fill the region with unpinned runs: none may be evicted.
	for m.Used < m.Pages {
		x, err := m.alloc(min(1+m.Used%5, m.Pages-m.Used), pages.DefaultContent)
		if err != nil || x == nil {
			return refusedOr(err, "Alloc with %d pages free failed", m.Pages-m.Used)
		}
		if err := m.unpin(x); err != nil {
			return err
		}
	}
	if err := m.check("with the region full of unpinned runs of the default content"); err != nil {
		return err
	}
	for _, n := range []int{1, m.Pages} {
		if _, err := m.alloc(n, pages.DefaultContent); err != nil {
			return err
		}
	}
	if err := m.evict(m.Pages); err != nil {
		return err
	}
	return m.check("after allocations and an Evict that may evict nothing")
}
