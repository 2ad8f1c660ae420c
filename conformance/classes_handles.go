package conformance

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/locus-go/locus/classes"
	"github.com/locus-go/locus/pool"
)

func checkClassesStale(r *clCase, m *clModel) error {
	snd, err := m.c.NewSender()
	mustOK("NewSender", err)
	var olds []classes.Handle
	for round := range scaled(300) {
		k := round % len(m.cls)
		b, err := m.take(k)
		mustIn(err, "round %d", round)
		old := b.Key
		must(m.free(b))
		mustIn(m.refused("a freed handle", staleOf(old)), "round %d", round)
		// The block again, with a new handle: the old one is still
		// refused, the new owner's memory untouched.
		nb, err := m.take(k)
		mustIn(err, "round %d", round)
		require(nb.Key != old, ErrAliased, "round %d: reuse gave %v, equal to the freed handle: the old handle would reach the new owner's block", round, nb.Key)
		mustIn(m.refused("a freed handle whose block was reused", staleOf(old)), "round %d", round)
		mustIn(m.intact(nb), "round %d", round)
		if round%25 == 0 {
			// Remotely: the drain refuses it, counts it, says why.
			mustOK("sender Free", snd.Free(old))
			n, err := m.c.Drain()
			var rej *pool.RejectedError
			ok := n == 0 && errors.As(err, &rej) && errors.Is(err, pool.ErrStaleHandle)
			require(ok, ErrAliased, "round %d: a drain of a remotely freed stale handle = (%d, %v), want (0, a *pool.RejectedError of a stale handle)", round, n, err)
			w := &m.Counts[k]
			w.RemoteSubmitted++
			w.RemoteDrained++
			w.Rejected++
		}
		must(m.free(nb))
		if len(olds) < 32 {
			olds = append(olds, old)
		}
		must(m.check(fmt.Sprintf("round %d", round)))
	}
	for _, h := range olds {
		must(m.refused("a handle freed hundreds of allocations ago", staleOf(h)))
	}
	must(m.check("after the stale calls"))
	checkClassesWrap(r, m)
	return nil
}

// checkClassesWrap allocates and frees one block of class 0 wrapCycles
// times, every other block of the class live so that every allocation
// takes that block whatever the reuse order, and checks that handles from
// the first cycles, and from 2^15 cycles before the last, are still stale:
// a generation kept in 16 bits would make them the block's current
// handle.
func checkClassesWrap(r *clCase, m *clModel) {
	m.freeAll()
	size := m.cls[0].Size
	for range m.cls[0].Blocks - 1 {
		_, err := m.take(0)
		must(err)
	}
	olds := wrapCycle(r.ctx, fmt.Sprintf("Alloc(%d) with one block of class 0 free", size), "Free of the block just allocated",
		func() (classes.Handle, error) { return m.c.Alloc(size) }, m.c.Free)
	w := &m.Counts[0]
	w.Allocs += wrapCycles
	w.Frees += wrapCycles
	w.Requested += uint64(wrapCycles) * uint64(size)
	w.HighWater = m.cls[0].Blocks
	cur, err := m.take(0)
	must(err)
	for _, old := range olds {
		require(old != cur.Key, ErrAliased, "after %d allocations and frees of one block, its handle is %v, equal to a handle freed thousands of allocations ago: the generation wrapped, and the old handle frees the block's current owner", wrapCycles, old)
		must(m.refused(fmt.Sprintf("a handle freed up to %d allocations of its block ago", wrapCycles), staleOf(old)))
	}
	must(m.intact(cur))
	must(m.check(fmt.Sprintf("after %d allocations and frees of one block", wrapCycles)))
	m.freeAll()
}

func checkClassesForeign(r *clCase) error {
	models, err := instances(r, 3, newClModel)
	must(err)
	for _, m := range models[1:] {
		require(slices.Equal(models[0].cls, m.cls), ErrContract, "one constructor made allocators of classes %v and %v", models[0].cls, m.cls)
	}
	must(foreignAcross(models, "handle", func(k int, m *clModel) error {
		for i, id := range m.ids {
			for j, o := range models[:k] {
				require(!slices.Contains(o.ids, id), ErrAliased, "class %d of allocator %d has the pool id %d of a class of allocator %d", i, k, id, j)
			}
		}
		return nil
	}))
	// Every block of every allocator: writes to one never show in another.
	for k, m := range models {
		for j := range m.cls {
			_, err := m.fillClass(j)
			mustIn(err, "allocator %d", k)
		}
	}
	var owners []int
	var keys []classes.Handle
	for k, m := range models {
		for _, b := range m.Blocks {
			owners, keys = append(owners, k), append(keys, b.Key)
		}
	}
	// Bytes is asked again for every pass, so that an allocator whose
	// Bytes hands out other memory at each call is caught too.
	mems := func(bool) ([][]byte, error) {
		out := make([][]byte, len(keys))
		for j, h := range keys {
			out[j], _ = models[owners[j]].c.Bytes(h)
		}
		return out, nil
	}
	must(disjoint(0, 5, mems, func(j, i int) error {
		return violationf(ErrAliased, "byte %d of allocator %d's %v was overwritten by a write to another allocator's block", i, owners[j], keys[j])
	}))
	return closedIdentity(r, "handle", newClModel)
}

// placeSame takes one block of every class.
func (m *clModel) placeSame(k int) ([]*clBlock, error) {
	bs, err := m.perClass(1)
	if err != nil {
		return nil, fmt.Errorf("allocator %d: %w", k, err)
	}
	return bs, nil
}

// refusedForeign checks that b, of another allocator of the same classes,
// is refused as foreign.
func (m *clModel) refusedForeign(what string, b *clBlock) error {
	if b.Class >= len(m.cls) {
		return nil
	}
	return m.refused(what, badHandle{b.Key, pool.ErrForeignHandle, b.Class})
}

func checkClassesForged(r *clCase, m *clModel) error {
	// Half of every class live, every other block freed again.
	for k := range m.cls {
		for range m.cls[k].Blocks / 2 {
			_, err := m.alloc(m.cls[k].Size, viaAlloc, 0)
			must(err)
		}
	}
	for i, b := range slices.Clone(m.Blocks) {
		if i%2 == 0 {
			must(m.free(b))
		}
	}
	first := m.Blocks[0]
	nk := uint32(len(m.cls))
	fixed := []badHandle{
		{classes.Handle{}, pool.ErrZeroHandle, 0},
		{mkClassHandle(first.Key.Block(), nk), classes.ErrUnknownClass, -1},
		{mkClassHandle(first.Key.Block(), nk+1), classes.ErrUnknownClass, -1},
		{mkClassHandle(first.Key.Block(), classesUnknownK), classes.ErrUnknownClass, -1},
		{mkClassHandle(pool.Handle{}, nk), classes.ErrUnknownClass, -1},
	}
	for _, b := range m.Blocks {
		k2 := (b.Class + 1) % len(m.cls)
		fixed = append(fixed, badHandle{mkClassHandle(b.Key.Block(), uint32(k2)), pool.ErrForeignHandle, k2})
	}
	for _, x := range fixed {
		must(m.refused(fmt.Sprintf("a forged handle (class %d)", x.h.Class()), x))
	}
	must(m.check("after the forgeries"))
	rng := rand.New(rand.NewPCG(6, 7))
	for i := range scaled(3000) {
		base := m.Blocks[rng.IntN(len(m.Blocks))]
		k, blk := base.Class, base.Key.Block()
		pid, idx, gen, want := forge(rng, rng.IntN(8), m.ids[k], uint32(blk.Index()), blk.Generation(), m.cls[k].Blocks)
		f := mkClassHandle(mkHandle(pid, idx, gen), uint32(k))
		if b, live := m.Live[f]; live {
			mustIn(m.intact(b), "forgery %d", i)
			continue
		}
		var got error
		name := "Bytes"
		if i%2 == 0 {
			_, got = m.c.Bytes(f)
		} else {
			name, got = "Free", m.c.Free(f)
		}
		require(got != nil, ErrAliased, "forgery %d: %s(%v) was accepted; it is no live handle", i, name, f)
		require(errors.Is(got, want), ErrContract, "forgery %d: %s(%v) = %v, want %v", i, name, f, got, want)
		m.Counts[k].Rejected++
	}
	for _, b := range m.Blocks {
		must(m.intact(b))
	}
	return m.check("after thousands of forgeries")
}
