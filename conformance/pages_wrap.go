package conformance

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/locus-go/locus/pages"
	"github.com/locus-go/locus/pool"
)

// wrapCycles is how many times Wraparound allocates and frees one page: past
// the wrap of a 16-bit generation (2^15 cycles, two bumps each) and of a
// 17-bit one. Wider fields cannot be reached by cycling in a test; the
// forgeries of ForgedRun flip every bit of a generation instead.
const wrapCycles = 1<<16 + 1

// pinWrap is how many pins Wraparound holds on one run: the wrap of a 16-bit
// count.
const pinWrap = 1 << 16

// wrapCycle allocates and frees one block (or page) wrapCycles times, the
// caller having made every allocation take that one, and returns the
// handles a generation that wraps would give again: those of the first
// cycles, one in 4096, and those 2^15 cycles before the last. allocWhat
// and freeWhat say, in a violation, what the failed call was.
func wrapCycle[H any](ctx context.Context, allocWhat, freeWhat string, alloc func() (H, error), free func(H) error) ([]H, error) {
	var olds []H
	for i := range wrapCycles {
		if i%4096 == 0 && ctx.Err() != nil {
			return nil, violationf(ErrDeadlock, "cycle %d: stopped by the watchdog", i)
		}
		h, err := alloc()
		if err != nil {
			return nil, violationf(ErrContract, "cycle %d: %s: %v", i, allocWhat, err)
		}
		if i < 2 || i%4096 == 0 || i >= wrapCycles-(1<<15)-2 && i <= wrapCycles-(1<<15)+1 {
			olds = append(olds, h)
		}
		if err := free(h); err != nil {
			return nil, violationf(ErrContract, "cycle %d: %s: %v", i, freeWhat, err)
		}
	}
	return olds, nil
}

func checkPagesWrap(r *pgCase) error {
	m, err := newModel(r)
	if err != nil {
		return err
	}
	in := m.in
	// Everything but one page is taken, so that every run of one page is
	// placed on that page, whatever the fit.
	wall, err := m.alloc(m.pages-1, weights)
	if err != nil || wall == nil {
		return errors.Join(err, violationf(ErrContract, "Alloc(%d) on an empty region of %d pages failed", m.pages-1, m.pages))
	}
	olds, err := wrapCycle(r.ctx, "Alloc(1) with one page free", "Free of the run just placed",
		func() (pages.Run, error) { return in.alloc(1, weights) }, in.Free)
	if err != nil {
		return err
	}
	m.st.Allocs += wrapCycles
	m.st.Frees += wrapCycles
	cur, err := m.alloc(1, weights)
	if err != nil || cur == nil {
		return errors.Join(err, violationf(ErrContract, "Alloc(1) with one page free failed"))
	}
	for _, old := range olds {
		if old == cur.r {
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
		return errors.Join(err, violationf(ErrContract, "Alloc(2) on an empty region failed"))
	}
	for i := 1; i < pinWrap; i++ {
		if err := in.Pin(x.r); err != nil {
			return violationf(ErrContract, "Pin %d of %v: %v", i+1, x.r, err)
		}
	}
	x.pins = pinWrap
	m.st.Pins += pinWrap - 1
	if n, err := in.Pins(x.r); n != pinWrap || err != nil {
		return violationf(ErrContract, "Pins of a run pinned %d times = %d, %v: the pin count wrapped", pinWrap, n, err)
	}
	for m.used < m.pages {
		y, err := m.alloc(min(3, m.pages-m.used), kvCache)
		if err != nil || y == nil {
			return errors.Join(err, violationf(ErrContract, "Alloc with %d pages free failed", m.pages-m.used))
		}
		if err := m.unpin(y); err != nil {
			return err
		}
	}
	if err := m.evict(m.pages); err != nil {
		return fmt.Errorf("with a run pinned %d times: %w", pinWrap, err)
	}
	if _, err := m.alloc(m.pages, weights); err != nil {
		return fmt.Errorf("with a run pinned %d times: %w", pinWrap, err)
	}
	if err := m.check(fmt.Sprintf("with a run pinned %d times", pinWrap)); err != nil {
		return err
	}
	for i := 1; i < pinWrap; i++ {
		if err := in.Unpin(x.r); err != nil {
			return violationf(ErrContract, "Unpin %d of %v, pinned %d times: %v", i, x.r, pinWrap, err)
		}
	}
	x.pins = 1
	if n, err := in.Pins(x.r); n != 1 || err != nil {
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

func checkPagesContentRange(r *pgCase) error {
	m, err := newModel(r)
	if err != nil {
		return err
	}
	in := m.in
	if len(m.types) != pages.MaxContentTypes {
		return violationf(ErrContract, "the model has %d content types, want %d", len(m.types), pages.MaxContentTypes)
	}
	// Every content type round-trips (place checks Content), and Stats
	// counts it under its own index.
	for c := range pages.Content(len(m.types)) {
		if _, err := m.alloc(1+int(c)%2, c); err != nil {
			return err
		}
	}
	if err := m.check(fmt.Sprintf("with a run of each of %d content types", len(m.types))); err != nil {
		return err
	}
	for c := len(m.types); c <= math.MaxUint8; c++ {
		if _, err := in.alloc(1, pages.Content(c)); !errors.Is(err, pool.ErrInvalidArgument) {
			return violationf(ErrContract, "Alloc(1, content %d) with %d content types = %v, want pool.ErrInvalidArgument", c, len(m.types), err)
		}
	}
	if err := m.freeAll(); err != nil {
		return err
	}
	// Eviction by priority: the region full of unpinned runs of every
	// type, in a random order, evicted one by one, then allocations of
	// every priority under pressure.
	rng := rand.New(rand.NewPCG(29, 30))
	for round := range 6 {
		for m.used < m.pages {
			x, err := m.alloc(min(1+rng.IntN(2), m.pages-m.used), pages.Content(rng.IntN(len(m.types))))
			if err != nil {
				return err
			}
			if x == nil {
				break
			}
			if err := m.unpin(x); err != nil {
				return err
			}
		}
		for range 8 {
			if err := m.evict(1); err != nil {
				return fmt.Errorf("round %d: %w", round, err)
			}
		}
		for _, c := range rng.Perm(len(m.types)) {
			if _, err := m.alloc(1+rng.IntN(4), pages.Content(c)); err != nil {
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
	return m.churn(r, rng, scaled(1000), func(int) error { return m.check("") })
}

// checkPagesClosedIdentity: the runs of a closed allocator are foreign to
// allocators made after it, also when those place the very same runs (an
// allocator that recycles the ids of closed ones hands them out again).
func checkPagesClosedIdentity(r *pgCase) error {
	pattern := []int{3, 1, 4}
	var olds []pages.Run
	for k := range 3 {
		in, err := r.another()
		if err != nil {
			return err
		}
		m, err := newPgModel(in)
		if err != nil {
			return err
		}
		var xs []*pgRun
		for _, n := range pattern {
			x, err := m.alloc(n, kvCache)
			if err != nil || x == nil {
				return errors.Join(err, violationf(ErrContract, "allocator %d: Alloc(%d) failed", k, n))
			}
			xs = append(xs, x)
		}
		for _, old := range olds {
			if err := m.refused(fmt.Sprintf("a run of an allocator closed before allocator %d was made,", k), old, pool.ErrForeignHandle); err != nil {
				return err
			}
		}
		for _, x := range xs {
			if err := m.intact(x); err != nil {
				return fmt.Errorf("allocator %d, after the runs of closed allocators were refused: %w", k, err)
			}
			olds = append(olds, x.r)
		}
		if err := m.check(fmt.Sprintf("allocator %d, after the runs of closed allocators were refused", k)); err != nil {
			return err
		}
		if err := in.Close(); err != nil {
			return violationf(ErrContract, "Close: %v", err)
		}
	}
	return nil
}

// checkPagesManyFreeRuns cuts the region into as many free runs as it
// holds: runs of two pages, then, at the highest addresses, single pages;
// and checks that every length lands where the fit says. A best fit that
// looks at the first few free runs only (16, say: a region of 50 pages or
// more has more runs of two before its first single page), or degrades to
// first fit past a number of them, shows here.
func checkPagesManyFreeRuns(m *pgModel) error {
	var holes []*pgRun
	for m.used < m.pages {
		left := m.pages - m.used
		n := 1
		if left > 4 {
			n = 2
		}
		h, err := m.alloc(min(n, left), weights)
		if err != nil || h == nil {
			return errors.Join(err, violationf(ErrContract, "a run of %d pages did not fit in %d free", n, left))
		}
		holes = append(holes, h)
		if m.used < m.pages {
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
