package conformance

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/locus-go/locus/pages"
	"github.com/locus-go/locus/pool"
)

func checkPagesPins(r *pgCase, m *pgModel) error {
	// Every run of an evictable type, some pinned many times: the pinned
	// ones survive Evict and allocation pressure; Free drops every pin.
	rng := rand.New(rand.NewPCG(7, 8))
	for m.Used < m.Pages {
		x := m.alloc(min(1+rng.IntN(4), m.Pages-m.Used), kvCache)
		require(x != nil, ErrContract, "Alloc with %d pages free failed", m.Pages-m.Used)
		for range rng.IntN(3) {
			m.pin(x)
		}
		if rng.IntN(2) == 0 {
			for x.Pins > 0 {
				m.unpin(x)
			}
		}
	}
	must(m.check("with pinned and unpinned runs"))
	m.evict(m.Pages)
	must(m.check("after Evict of the whole region"))
	// Allocation pressure: the pinned runs must stay.
	for _, n := range []int{m.Pages, m.Pages / 2, 1} {
		if x := m.alloc(n, weights); x != nil {
			m.free(x)
		}
	}
	for _, x := range slices.Clone(m.Live) {
		if x.Pins > 1 {
			m.free(x) // Free, whatever the pins
		}
	}
	must(m.check("after freeing runs pinned several times"))
	// Then thousands of random pins, unpins and evictions.
	m.churn(r, rng, scaled(2000), func(int) { must(m.check("")) })
	return nil
}

func checkPagesLRU(r *pgCase, m *pgModel) error {
	rng := rand.New(rand.NewPCG(9, 10))
	m.rounds(scaled(20), func(round int) {
		// Runs of the two types that share a priority, unpinned in a
		// random order, some pinned and unpinned again.
		m.fill(func(left int) (int, pages.Content) {
			c := kvCache
			if rng.IntN(2) == 0 {
				c = adapter
			}
			return min(1+rng.IntN(3), left), c
		}, nil)
		for _, i := range rng.Perm(len(m.Live)) {
			m.unpin(m.Live[i])
		}
		for range len(m.Live) / 3 {
			x := m.Pick(rng)
			m.pin(x)
			m.unpin(x)
		}
		// One run at a time through Evict, then allocations that must
		// evict.
		during(func() {
			for range 3 {
				m.evict(1)
			}
			for range 4 {
				m.alloc(1+rng.IntN(6), kvCache)
			}
		}, "round %d", round)
	})
	return nil
}

func checkPagesPriority(r *pgCase, m *pgModel) error {
	rng := rand.New(rand.NewPCG(13, 14))
	m.rounds(scaled(20), func(round int) {
		// Unpinned runs of every type, interleaved.
		m.fill(func(left int) (int, pages.Content) {
			c := pages.Content(rng.IntN(len(m.types)))
			return min(1+rng.IntN(3), left), c
		}, m.unpin)
		// Allocations of each priority: prefix may evict only prefix,
		// kv and adapter up to their priority, weights everything
		// evictable, scratch (priority 0) nothing.
		during(func() {
			for _, c := range []pages.Content{scratch, prefix, kvCache, adapter, weights} {
				for _, n := range []int{1 + rng.IntN(4), 1 + rng.IntN(m.Pages/4)} {
					m.alloc(n, c)
				}
			}
		}, "round %d", round)
		m.evict(m.Pages / 8)
	})
	return nil
}

func checkPagesMinimal(r *pgCase, m *pgModel) error {
	rng := rand.New(rand.NewPCG(15, 16))
	m.rounds(scaled(20), func(round int) {
		// Unpinned kv runs between pinned weights: evicting k runs frees
		// runs of known lengths.
		m.fill(func(left int) (int, pages.Content) { return min(1+rng.IntN(4), left), kvCache },
			m.unpinIf(func() bool { return rng.IntN(4) != 0 }))
		// Requests that fit after some evictions, and requests larger
		// than all the free and evictable pages: those evict nothing.
		hopeless := m.Pages - m.Used + m.CandidatePages(math.MaxInt) + 1
		during(func() {
			for _, n := range []int{1, 2, 1 + rng.IntN(8), hopeless, m.Pages} {
				if n <= m.Pages {
					m.alloc(n, kvCache)
				}
			}
		}, "round %d", round)
	})
	return nil
}

func checkPagesEvict(r *pgCase, m *pgModel) error {
	rng := rand.New(rand.NewPCG(17, 18))
	m.rounds(scaled(20), func(round int) {
		m.fill(func(left int) (int, pages.Content) {
			n := min(1+rng.IntN(5), left)
			return n, pages.Content(rng.IntN(len(m.types)))
		}, m.unpinIf(func() bool { return rng.IntN(3) != 0 }))
		during(func() {
			for _, n := range []int{0, 1, 2, 3, 1 + rng.IntN(8), m.Pages / 4, m.Pages, math.MaxInt} {
				m.evict(n)
			}
		}, "round %d", round)
	})
	return nil
}

func checkPagesEvictFunc(r *pgCase, m *pgModel) error {
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
		if at, ok := stamped(buf, m.psize, x.Tag); !ok || len(buf) != x.N*m.psize {
			return violationf(ErrAliased, "inside the EvictFunc, byte %d of %v (of %d bytes) lost its data: its pages were reused before the owner heard", at, run, len(buf))
		}
		if first, n, err := in.Span(run); first != x.First || n != x.N || err != nil {
			return violationf(ErrContract, "Span of %v inside the EvictFunc = (%d, %d, %v), want (%d, %d)", run, first, n, err, x.First, x.N)
		}
		if got, err := in.Content(run); got != pages.Content(x.C) || err != nil {
			return violationf(ErrContract, "Content of %v inside the EvictFunc = (%d, %v), want %d", run, got, err, x.C)
		}
		if pins, err := in.Pins(run); pins != 0 || err != nil {
			return violationf(ErrContract, "Pins of %v inside the EvictFunc = (%d, %v), want 0", run, pins, err)
		}
		if err := in.readInEviction(); err != nil {
			return err
		}
		_, allocErr := in.Alloc(1, weights)
		_, evictErr := in.Evict(1)
		return allFail(pages.ErrInEviction, "inside the EvictFunc", []call{
			{"Alloc", allocErr}, {"Free", in.Free(run)}, {"Pin", in.Pin(run)}, {"Unpin", in.Unpin(run)},
			{"Evict", evictErr}, {"Close", in.Close()},
		})
	}
	rng := rand.New(rand.NewPCG(19, 20))
	m.churn(r, rng, scaled(2000), func(step int) {
		if step%16 == 0 {
			must(m.check(""))
		}
	})
	require(heard >= 20, ErrContract, "the EvictFunc was called %d times in thousands of operations that evict", heard)
	// Every run evicted is stale on every path.
	in.log.probe = nil
	for i, run := range in.log.runs {
		if _, live := m.ByKey[run]; live || i%7 != 0 {
			continue
		}
		m.refused("an evicted run", run, pool.ErrStaleHandle)
	}
	return m.check("after calls with evicted runs")
}

// reentryWait is how long the EvictFunc waits for Stats and Snapshot,
// called for it on another goroutine, before it reports the allocator
// deadlocked.
const reentryWait = 2 * time.Second

// readInEviction calls Stats and Snapshot on behalf of an EvictFunc: on a
// goroutine of their own, while the owner waits in the EvictFunc, so that an
// allocator that holds a lock across the EvictFunc which its read methods
// take is reported instead of hanging the suite. Nothing else runs in the
// allocator meanwhile: the owner is blocked in the call.
func (in *pagesInst) readInEviction() error {
	done := make(chan [2]pages.Stats, 1)
	go func() { done <- [2]pages.Stats{in.Stats(), in.Snapshot()} }()
	select {
	case got := <-done:
		for i, name := range [2]string{"Stats", "Snapshot"} {
			if err := pageIdentities(got[i]); err != nil {
				return fmt.Errorf("%s called from the EvictFunc: %w", name, err)
			}
		}
		return nil
	case <-time.After(reentryWait):
		in.log.pending = done
		return violationf(ErrDeadlock, "Stats and Snapshot called from the EvictFunc had not returned after %v: the allocator holds a lock across the EvictFunc that they wait for, yet the EvictFunc may call them", reentryWait)
	}
}

// settle waits, after the call that evicted, for reads that
// readInEviction gave up on: they return once the call has released the
// allocator, and must not run beside the owner's next calls.
func (in *pagesInst) settle() {
	if in.log.pending == nil {
		return
	}
	select {
	case <-in.log.pending:
	case <-time.After(reentryWait):
	}
	in.log.pending = nil
}

func checkPagesWatermarks(r *pgCase, m *pgModel) error {
	require(m.High != 0, ErrContract, "the model has no watermarks")
	rng := rand.New(rand.NewPCG(21, 22))
	for round := range scaled(10) {
		// Climb to the high watermark with unpinned runs: nothing is
		// evicted below it, then down to the low one.
		for m.Used < m.High-1 {
			x := m.alloc(1, pages.Content(1+rng.IntN(3)))
			require(x != nil, ErrContract, "round %d: Alloc(1) with %d pages in use failed", round, m.Used)
			m.unpin(x)
		}
		must(m.check(fmt.Sprintf("round %d, just under the high watermark", round)))
		during(func() {
			for range 6 {
				m.alloc(1+rng.IntN(3), weights)
			}
		}, "round %d", round)
		must(m.check(fmt.Sprintf("round %d, past the high watermark", round)))
		m.freeAll()
	}
	m.churn(r, rng, scaled(2000), func(int) { must(m.check("")) })
	return nil
}

func checkPagesContentRange(r *pgCase, m *pgModel) error {
	in := m.in
	require(len(m.types) == pages.MaxContentTypes, ErrContract, "the model has %d content types, want %d", len(m.types), pages.MaxContentTypes)
	// Every content type round-trips (place checks Content), and Stats
	// counts it under its own index.
	for c := range pages.Content(len(m.types)) {
		m.alloc(1+int(c)%2, c)
	}
	must(m.check(fmt.Sprintf("with a run of each of %d content types", len(m.types))))
	for c := len(m.types); c <= math.MaxUint8; c++ {
		_, err := in.alloc(1, pages.Content(c))
		require(errors.Is(err, pool.ErrInvalidArgument), ErrContract, "Alloc(1, content %d) with %d content types = %v, want pool.ErrInvalidArgument", c, len(m.types), err)
	}
	m.freeAll()
	// Eviction by priority: the region full of unpinned runs of every
	// type, in a random order, evicted one by one, then allocations of
	// every priority under pressure.
	rng := rand.New(rand.NewPCG(29, 30))
	m.rounds(6, func(round int) {
		for m.Used < m.Pages {
			x := m.alloc(min(1+rng.IntN(2), m.Pages-m.Used), pages.Content(rng.IntN(len(m.types))))
			if x == nil {
				break
			}
			m.unpin(x)
		}
		during(func() {
			for range 8 {
				m.evict(1)
			}
			for _, c := range rng.Perm(len(m.types)) {
				m.alloc(1+rng.IntN(4), pages.Content(c))
			}
		}, "round %d", round)
	})
	m.churn(r, rng, scaled(1000), func(int) { must(m.check("")) })
	return nil
}
