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
		x := m.alloc(n, c)
		require(x != nil, ErrContract, "Alloc(%d) on an empty region of %d pages failed", n, m.Pages)
		must(m.check(fmt.Sprintf("after Alloc(%d) on an empty region", n)))
		if n < m.Pages {
			rest := m.alloc(m.Pages-n, c)
			require(rest != nil, ErrContract, "Alloc(%d) beside a run of %d pages in a region of %d failed", m.Pages-n, n, m.Pages)
			m.alloc(1, c)
			must(m.check(fmt.Sprintf("with the region full (%d + %d pages)", n, m.Pages-n)))
			m.free(rest)
		}
		m.free(x)
		must(m.check(fmt.Sprintf("after freeing a run of %d pages", n)))
	}
	return nil
}

// holeLengths are the free-run lengths Placement cuts: small ones, and the
// neighbours of 64 and of powers of two, where indexes change words or
// levels.
var holeLengths = []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 13, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257}

func checkPagesPlacement(r *pgCase, m *pgModel) error {
	checkPagesManyFreeRuns(m)
	rng := rand.New(rand.NewPCG(11, 12))
	for layout := range scaled(12) {
		// Cut the region into live separators of 1 to 2 pages and runs
		// of hole lengths (some repeated: best fit has a choice), then
		// free the latter.
		var holes []*pgRun
		for m.Used < m.Pages {
			// The separators stay live until the layout is freed below.
			sep := m.alloc(min(1+rng.IntN(2), m.Pages-m.Used), weights)
			require(sep != nil, ErrContract, "layout %d: a separator did not fit", layout)
			left := m.Pages - m.Used
			if left == 0 {
				break
			}
			fitting := slices.DeleteFunc(slices.Clone(holeLengths), func(k int) bool { return k > left })
			n := fitting[rng.IntN(len(fitting))]
			if layout%3 == 2 && len(holes) > 0 && holes[len(holes)-1].N <= left {
				n = holes[len(holes)-1].N
			}
			h := m.alloc(n, weights)
			require(h != nil, ErrContract, "layout %d: a run of %d pages did not fit in %d free", layout, n, left)
			holes = append(holes, h)
		}
		for _, h := range holes {
			m.free(h)
		}
		must(m.check(fmt.Sprintf("layout %d, fragmented", layout)))
		longest := 0
		for _, g := range m.Gaps() {
			longest = max(longest, g[1])
		}
		for n := 1; n <= longest+1; n++ {
			var x *pgRun
			during(func() { x = m.alloc(n, weights) }, "layout %d", layout)
			if x != nil {
				m.free(x)
			}
		}
		must(m.check(fmt.Sprintf("layout %d, after every length", layout)))
		m.freeAll()
	}
	return m.check("after every layout")
}

// checkPagesManyFreeRuns cuts the region into as many free runs as it
// holds: runs of two pages, then, at the highest addresses, single pages;
// and checks that every length lands where the fit says. A best fit that
// looks at the first few free runs only (16, say: a region of 50 pages or
// more has more runs of two before its first single page), or degrades to
// first fit past a number of them, shows here.
func checkPagesManyFreeRuns(m *pgModel) {
	var holes []*pgRun
	for m.Used < m.Pages {
		left := m.Pages - m.Used
		n := 1
		if left > 4 {
			n = 2
		}
		h := m.alloc(min(n, left), weights)
		require(h != nil, ErrContract, "a run of %d pages did not fit in %d free", n, left)
		holes = append(holes, h)
		if m.Used < m.Pages {
			m.alloc(1, weights)
		}
	}
	for _, h := range holes {
		m.free(h)
	}
	must(m.check(fmt.Sprintf("with %d free runs", len(holes))))
	for n := 1; n <= 4; n++ {
		var x *pgRun
		during(func() { x = m.alloc(n, weights) }, "with %d free runs", len(holes))
		if x != nil {
			m.free(x)
		}
	}
	m.freeAll()
}

func checkPagesNoOverlap(r *pgCase, m *pgModel) error {
	rng := rand.New(rand.NewPCG(1, 2))
	for step := range scaled(3000) {
		during(func() {
			if rng.IntN(5) < 2 && len(m.Live) > 0 {
				m.free(m.Pick(rng))
			} else {
				m.alloc(m.Length(rng), pages.Content(rng.IntN(len(m.types))))
			}
			must(m.check(""))
			if step%256 == 255 {
				for _, x := range m.Live {
					must(m.intact(x))
				}
			}
		}, "step %d", step)
	}
	m.freeAll()
	return m.check("after freeing everything")
}

// permutations calls f with every order of 0..n-1.
func permutations(n int, f func([]int)) {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	var perm func(k int)
	perm = func(k int) {
		if k == n {
			f(order)
			return
		}
		for i := k; i < n; i++ {
			order[k], order[i] = order[i], order[k]
			perm(k + 1)
			order[k], order[i] = order[i], order[k]
		}
	}
	perm(0)
}

func checkPagesCoalescing(r *pgCase, m *pgModel) error {
	// fill fills the region: runs of 1, 2, 3, 5 and 8 pages, then whatever
	// fills the free runs left, largest first.
	fill := func() []*pgRun {
		var runs []*pgRun
		for _, n := range []int{1, 2, 3, 5, 8} {
			x := m.alloc(n, kvCache)
			require(x != nil, ErrContract, "Alloc(%d) on a region with %d pages free failed", n, m.Pages-m.Used)
			runs = append(runs, x)
		}
		for m.Used < m.Pages {
			longest := 0
			for _, g := range m.Gaps() {
				longest = max(longest, g[1])
			}
			x := m.alloc(longest, kvCache)
			require(x != nil, ErrContract, "Alloc(%d) with a free run of %d pages failed", longest, longest)
			runs = append(runs, x)
		}
		return runs
	}
	round := 0
	freeIn := func(order []int) {
		round++
		require(r.ctx.Err() == nil, ErrDeadlock, "order %d: stopped by the watchdog", round)
		runs := fill()
		for i, k := range order {
			m.free(runs[k])
			must(m.check(fmt.Sprintf("freeing runs in the order %v, after %d frees", order, i+1)))
		}
		whole := m.alloc(m.Pages, kvCache)
		if whole == nil {
			must(violationf(ErrContract, "after freeing every run in the order %v, a run of the whole region (%d pages) did not fit: free runs %v", order, m.Pages, m.Gaps()))
		}
		m.free(whole)
	}
	k := len(fill())
	m.freeAll()
	if k <= 6 {
		// Every order, skipping some under the race detector.
		i := 0
		permutations(k, func(order []int) {
			i++
			if !race.Enabled || i%4 == 0 {
				freeIn(slices.Clone(order))
			}
		})
		return nil
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range scaled(720) {
		freeIn(rng.Perm(k))
	}
	return nil
}

func checkPagesExhaustion(r *pgCase, m *pgModel) error {
	ones := make([]*pgRun, m.Pages)
	for i := range ones {
		ones[i] = m.alloc(1, weights)
		require(ones[i] != nil, ErrContract, "filling the region page by page: Alloc(1) with %d pages free failed", m.Pages-i)
	}
	for _, n := range []int{1, 2, m.Pages} {
		m.alloc(n, weights)
		must(m.check(fmt.Sprintf("after a refused Alloc(%d) on a full region", n)))
	}
	// Every other page free: half the region free, no two pages contiguous.
	for i := 0; i < len(ones); i += 2 {
		m.free(ones[i])
	}
	for _, n := range []int{2, 3, m.Pages / 2} {
		m.alloc(n, weights)
		must(m.check(fmt.Sprintf("after a refused Alloc(%d) with %d single pages free", n, m.Pages/2)))
	}
	// Single pages still fit, until none is left.
	for range m.Pages/2 + 1 {
		m.alloc(1, weights)
	}
	return m.check("after filling the single free pages")
}

func checkPagesArguments(r *pgCase, m *pgModel) error {
	in := m.in
	x := m.alloc(2, kvCache)
	require(x != nil, ErrContract, "Alloc(2) on an empty region failed")
	for _, n := range []int{0, -1, math.MinInt, m.Pages + 1, math.MaxInt} {
		_, err := in.alloc(n, weights)
		require(errors.Is(err, pool.ErrInvalidArgument), ErrContract, "Alloc(%d) = %v, want pool.ErrInvalidArgument", n, err)
	}
	for c := len(m.types); c <= math.MaxUint8; c++ {
		_, err := in.alloc(1, pages.Content(c))
		require(errors.Is(err, pool.ErrInvalidArgument), ErrContract, "Alloc(1, content %d) with %d content types = %v, want pool.ErrInvalidArgument", c, len(m.types), err)
	}
	_, err := in.evict(-1)
	require(errors.Is(err, pool.ErrInvalidArgument), ErrContract, "Evict(-1) = %v, want pool.ErrInvalidArgument", err)
	m.unpin(x)
	for range 3 {
		m.unpin(x) // refused: not pinned
	}
	return m.check("after refused arguments")
}

func checkPagesDefault(r *pgCase, m *pgModel) error {
	in := m.in
	_, err := in.alloc(1, 1)
	require(errors.Is(err, pool.ErrInvalidArgument), ErrContract, "Alloc(1, content 1) with only the default content type = %v, want pool.ErrInvalidArgument", err)
	// Fill the region with unpinned runs: none may be evicted.
	for m.Used < m.Pages {
		x := m.alloc(min(1+m.Used%5, m.Pages-m.Used), pages.DefaultContent)
		require(x != nil, ErrContract, "Alloc with %d pages free failed", m.Pages-m.Used)
		m.unpin(x)
	}
	must(m.check("with the region full of unpinned runs of the default content"))
	for _, n := range []int{1, m.Pages} {
		m.alloc(n, pages.DefaultContent)
	}
	m.evict(m.Pages)
	return m.check("after allocations and an Evict that may evict nothing")
}
