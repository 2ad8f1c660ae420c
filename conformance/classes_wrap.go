package conformance

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/locus-go/locus/classes"
	"github.com/locus-go/locus/pool"
)

// checkClassesWrap allocates and frees one block of class 0 wrapCycles
// times, every other block of the class live so that every allocation
// takes that block whatever the reuse order, and checks that handles from
// the first cycles, and from 2^15 cycles before the last, are still stale:
// a generation kept in 16 bits would make them the block's current
// handle.
func checkClassesWrap(r *clCase, m *clModel) error {
	if err := m.freeAll(); err != nil {
		return err
	}
	size := m.cls[0].Size
	for range m.cls[0].Blocks - 1 {
		if b, err := m.alloc(size, viaAlloc, 0); err != nil || b == nil {
			return errors.Join(err, violationf(ErrContract, "class 0 refused an allocation with %d blocks free", m.want[0].Free))
		}
	}
	olds, err := wrapCycle(r.ctx, fmt.Sprintf("Alloc(%d) with one block of class 0 free", size), "Free of the block just allocated",
		func() (classes.Handle, error) { return m.c.Alloc(size) }, m.c.Free)
	if err != nil {
		return err
	}
	w := &m.want[0]
	w.Allocs += wrapCycles
	w.Frees += wrapCycles
	w.Requested += uint64(wrapCycles) * uint64(size)
	w.HighWater = m.cls[0].Blocks
	cur, err := m.alloc(size, viaAlloc, 0)
	if err != nil || cur == nil {
		return errors.Join(err, violationf(ErrContract, "class 0 refused an allocation with one block free"))
	}
	for _, old := range olds {
		if old == cur.h {
			return violationf(ErrAliased, "after %d allocations and frees of one block, its handle is %v, equal to a handle freed thousands of allocations ago: the generation wrapped, and the old handle frees the block's current owner", wrapCycles, old)
		}
		if err := m.refused(fmt.Sprintf("a handle freed up to %d allocations of its block ago", wrapCycles), staleOf(old)); err != nil {
			return err
		}
	}
	if err := m.intact(cur); err != nil {
		return err
	}
	if err := m.check(fmt.Sprintf("after %d allocations and frees of one block", wrapCycles)); err != nil {
		return err
	}
	return m.freeAll()
}

// checkClassesClosedIdentity: the handles of a closed allocator are
// foreign to allocators made after it, also when those hand out the very
// same blocks (an allocator that recycles the ids of closed ones would
// hand out equal handles).
func checkClassesClosedIdentity(r *clCase) error {
	var olds []*clBlock
	for k := range 3 {
		c, err := r.another()
		if err != nil {
			return err
		}
		m, err := newClModel(c)
		if err != nil {
			return err
		}
		for j := range m.cls {
			if b, err := m.alloc(m.cls[j].Size, viaAlloc, 0); err != nil || b == nil {
				return errors.Join(err, violationf(ErrContract, "allocator %d: class %d refused", k, j))
			}
		}
		for _, o := range olds {
			if o.k >= len(m.cls) {
				continue
			}
			if err := m.refused(fmt.Sprintf("a handle of an allocator closed before allocator %d was made,", k), badHandle{o.h, pool.ErrForeignHandle, o.k}); err != nil {
				return err
			}
		}
		for _, b := range m.blocks {
			if err := m.intact(b); err != nil {
				return fmt.Errorf("allocator %d, after the handles of closed allocators were refused: %w", k, err)
			}
		}
		if err := m.check(fmt.Sprintf("allocator %d, after the handles of closed allocators were refused", k)); err != nil {
			return err
		}
		olds = append(olds, m.blocks...)
		if err := c.Close(); err != nil {
			return violationf(ErrContract, "Close: %v", err)
		}
	}
	return nil
}

// checkClassesSnapshotFresh: an owner that only drains keeps a scraper
// fresh. The owner allocates without calling Stats; a Snapshot asked for
// later (past the freshness window of the last publication) gets the
// allocations once the owner drains.
func checkClassesSnapshotFresh(r *clCase, m *clModel) error {
	if err := m.freeAll(); err != nil {
		return err
	}
	if err := m.check("before a drain-only stretch"); err != nil { // publishes
		return err
	}
	const k = 3
	for range k {
		if b, err := m.alloc(1, viaAlloc, 0); err != nil || b == nil {
			return errors.Join(err, violationf(ErrContract, "Alloc(1) on a fresh allocator failed"))
		}
	}
	st, err := snapshotWhileDraining(r.ctx, m.c.Snapshot, m.c.Drain)
	if err != nil {
		return err
	}
	if len(st.Classes) == 0 || st.Classes[0].Live != k {
		live := -1
		if len(st.Classes) > 0 {
			live = st.Classes[0].Live
		}
		return violationf(ErrAccounting, "a Snapshot asked for while the owner only drained says %d blocks of class 0 live, want %d: the owner does not publish at Drain when asked (a scraper of a drain-only owner is stale forever)", live, k)
	}
	return m.freeAll()
}

// checkClassesOwnSlices: every slice the allocator returns is the
// caller's. Stats and Snapshot taken earlier do not change as the
// allocator goes on, edits to them do not show in later ones, and an edit
// to what Classes returned changes neither what it returns next nor where
// allocations go.
func checkClassesOwnSlices(m *clModel) error {
	c := m.c
	b, err := m.alloc(1, viaAlloc, 0)
	if err != nil || b == nil {
		return errors.Join(err, violationf(ErrContract, "Alloc(1) on a fresh allocator failed"))
	}
	for _, read := range []struct {
		name string
		get  func() classes.Stats
	}{{"Stats", c.Stats}, {"Snapshot", func() classes.Stats { c.Stats(); return c.Snapshot() }}} {
		st := read.get()
		kept := slices.Clone(st.Classes)
		// The allocator goes on: the earlier value must not follow.
		x, err := m.alloc(m.cls[len(m.cls)-1].Size, viaAlloc, 0)
		if err != nil || x == nil {
			return errors.Join(err, violationf(ErrContract, "Alloc of the largest class failed"))
		}
		later := read.get()
		if !slices.Equal(st.Classes, kept) {
			return violationf(ErrAliased, "a %s taken earlier changed when the allocator went on: %s; the slice it returned is one the allocator keeps writing", read.name, fieldDiff(st.Classes, kept))
		}
		// The caller's edits must not reach the allocator.
		want := slices.Clone(later.Classes)
		for i := range later.Classes {
			later.Classes[i].Allocs += 1000
			later.Classes[i].Live = -1
		}
		again := c.Stats()
		if read.name == "Snapshot" {
			again = c.Snapshot() // no publication between the edit and the read
		}
		if !slices.Equal(again.Classes, want) {
			return violationf(ErrAliased, "an edit to what %s returned showed in the next %s: %s", read.name, read.name, fieldDiff(again.Classes, want))
		}
		if err := m.free(x); err != nil {
			return err
		}
	}
	cls := c.Classes()
	for i := range cls {
		cls[i].Size, cls[i].Blocks = 1, 1
	}
	if got := c.Classes(); !slices.Equal(got, m.cls) {
		return violationf(ErrAliased, "an edit to what Classes returned showed in the next Classes: %v, want %v", got, m.cls)
	}
	for _, n := range m.sizes() {
		x, err := m.alloc(n, viaAlloc, 0)
		if err != nil {
			return fmt.Errorf("after an edit to what Classes returned: %w", err)
		}
		if x != nil {
			if err := m.free(x); err != nil {
				return err
			}
		}
	}
	return m.check("after edits to every slice the allocator returned")
}

// bigChunk fills chunk with up to per handles of every class, in a random
// order, for FreeChunk to free: more handles per class than a few.
func bigChunk(m *clModel, rng *rand.Rand, per int, chunk []classes.Handle) ([]classes.Handle, error) {
	chunk = chunk[:0]
	for k, cl := range m.cls {
		for range min(per, cl.Blocks-2) {
			h, err := m.c.Alloc(cl.Size)
			if err != nil {
				return chunk, contractErr(fmt.Sprintf("Alloc(%d) of class %d", cl.Size, k), err)
			}
			chunk = append(chunk, h)
		}
	}
	rng.Shuffle(len(chunk), func(i, j int) { chunk[i], chunk[j] = chunk[j], chunk[i] })
	return chunk, nil
}
