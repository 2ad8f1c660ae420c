package conformance

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/locus-go/locus/classes"
	"github.com/locus-go/locus/pool"
)

func checkClassesSmallest(r *clCase, m *clModel) error {
	c := m.c
	// Classes hands out a copy: a caller that edits what it got changes
	// neither a later Classes nor the routing (checked by the rest).
	mine := c.Classes()
	for i := range mine {
		mine[i] = classes.Class{Size: 1 << 30, Blocks: 1}
	}
	again := c.Classes()
	require(slices.Equal(again, m.cls), ErrAliased, "Classes() returned a slice the allocator keeps: after the caller wrote to it, Classes() = %v, want %v", again, m.cls)
	for round := range scaled(8) {
		for _, n := range m.sizes() {
			for _, how := range []int{viaAlloc, viaAllocBytes} {
				b, err := m.alloc(n, how, 0)
				if err != nil || b == nil {
					return fmt.Errorf("round %d: %w", round, refusedOr(err, "%s(%d) refused on an empty allocator", viaNames[how], n))
				}
				k, err := c.ClassOf(n)
				require(k == b.Class && err == nil, ErrContract, "ClassOf(%d) = %d, %v; the allocation took class %d", n, k, err, b.Class)
				must(m.check(fmt.Sprintf("after %s(%d)", viaNames[how], n)))
				if round%2 == 0 {
					must(m.free(b))
				}
			}
		}
		m.freeAll()
	}
	for _, n := range []int{0, -1, math.MinInt, m.Largest() + 1, math.MaxInt} {
		_, aErr := c.Alloc(n)
		_, buf, bErr := c.AllocBytes(n)
		_, cErr := c.ClassOf(n)
		for _, c := range [...]call{{"Alloc", aErr}, {"AllocBytes", bErr}, {"ClassOf", cErr}} {
			ok := errors.Is(c.err, pool.ErrInvalidArgument) && (n <= m.Largest() || errors.Is(c.err, classes.ErrTooLarge))
			require(ok, ErrContract, "%s(%d) with classes up to %d bytes = %v, want pool.ErrInvalidArgument (classes.ErrTooLarge above)", c.name, n, m.Largest(), c.err)
		}
		require(buf == nil, ErrContract, "AllocBytes(%d) returned memory with its error", n)
	}
	return m.check("after refused sizes")
}

func checkClassesAllocClass(r *clCase, m *clModel) error {
	for k, cl := range m.cls {
		for _, n := range []int{1, cl.Size / 2, cl.Size - 1, cl.Size} {
			if n < 1 {
				continue
			}
			if b, err := m.alloc(n, viaAllocClass, k); err != nil || b == nil {
				return refusedOr(err, "AllocClass(%d, %d) refused on an empty allocator", k, n)
			}
			must(m.check(fmt.Sprintf("after AllocClass(%d, %d)", k, n)))
		}
	}
	m.freeAll()
	for _, bad := range [][2]int{{-1, 1}, {len(m.cls), 1}, {math.MaxInt, 1}, {math.MinInt, 1}, {0, 0}, {0, -1}, {0, m.cls[0].Size + 1}, {len(m.cls) - 1, m.Largest() + 1}, {1, math.MaxInt}} {
		_, err := m.c.AllocClass(bad[0], bad[1])
		require(errors.Is(err, pool.ErrInvalidArgument), ErrContract, "AllocClass(%d, %d) = %v, want pool.ErrInvalidArgument", bad[0], bad[1], err)
	}
	must(m.check("after refused AllocClass calls"))
	// The caller's own fallback: the smallest class full, the next one
	// takes its sizes.
	_, err := m.fillClass(0)
	must(err)
	for range 2 {
		if b, err := m.alloc(1, viaAllocClass, 1); err != nil || b == nil {
			return refusedOr(err, "AllocClass(1, 1) with class 0 exhausted failed")
		}
	}
	return m.check("after falling back")
}

func checkClassesNoFallback(r *clCase, m *clModel) error {
	for k := range m.cls {
		_, err := m.fillClass(k)
		must(err)
		lo := 1
		if k > 0 {
			lo = m.cls[k-1].Size + 1
		}
		for _, n := range []int{lo, m.cls[k].Size} {
			for _, how := range []int{viaAlloc, viaAllocBytes} {
				if b, err := m.alloc(n, how, 0); err != nil || b != nil {
					return errors.Join(err, violationf(ErrContract, "%s(%d) with class %d exhausted took a block", viaNames[how], n, k))
				}
			}
		}
		must(m.check(fmt.Sprintf("after refused allocations from the exhausted class %d", k)))
		for j := range m.cls {
			if j != k && m.Counts[j].Free > 0 {
				_, err := m.take(j)
				mustIn(err, "with class %d exhausted", k)
			}
		}
		m.freeAll()
	}
	return m.check("after every class was exhausted once")
}

func checkClassesNoAliasing(r *clCase, m *clModel) error {
	rng := rand.New(rand.NewPCG(3, 4))
	for step := range scaled(3000) {
		require(r.ctx.Err() == nil, ErrDeadlock, "step %d: stopped by the watchdog", step)
		var err error
		if len(m.Blocks) > 0 && rng.IntN(5) < 2 {
			err = m.free(m.Blocks[rng.IntN(len(m.Blocks))])
		} else {
			_, err = m.alloc(1+rng.IntN(m.Largest()), rng.IntN(2), 0)
		}
		mustIn(err, "step %d", step)
		if step%128 == 127 {
			for _, b := range m.Blocks {
				mustIn(m.intact(b), "step %d", step)
			}
		}
	}
	m.freeAll()
	return m.check("after freeing everything")
}

func checkClassesFreeChunk(r *clCase, m *clModel) error {
	total := 0
	for _, cl := range m.cls {
		total += cl.Blocks
	}
	rng := rand.New(rand.NewPCG(8, 9))
	for _, empty := range [][]classes.Handle{nil, {}} {
		mustOK("FreeChunk of an empty chunk", m.c.FreeChunk(empty))
	}
	for length := 1; length <= min(total, 70); length++ {
		// Allocate blocks of random classes until length of them are live.
		for len(m.Blocks) < length {
			k := rng.IntN(len(m.cls))
			if m.Counts[k].Free == 0 {
				continue
			}
			_, err := m.alloc(1+rng.IntN(m.cls[k].Size), viaAllocClass, k)
			must(err)
		}
		chunk := slices.Clone(m.Blocks[:length])
		rng.Shuffle(len(chunk), func(i, j int) { chunk[i], chunk[j] = chunk[j], chunk[i] })
		hs := make([]classes.Handle, 0, length+4)
		for _, b := range chunk {
			must(m.intact(b))
			hs = append(hs, b.Key)
		}
		var bad []badHandle
		if length%3 == 0 && len(m.Stale) > 0 {
			bad = append(bad, staleOf(m.Stale[rng.IntN(len(m.Stale))]))
		}
		if length%4 == 0 {
			bad = append(bad, badHandle{mkClassHandle(chunk[0].Key.Block(), uint32(len(m.cls))), classes.ErrUnknownClass, -1})
		}
		if length%5 == 0 {
			bad = append(bad, badHandle{classes.Handle{}, pool.ErrZeroHandle, 0})
		}
		for _, x := range bad {
			at := rng.IntN(len(hs) + 1)
			hs = slices.Insert(hs, at, x.h)
		}
		err := m.c.FreeChunk(hs)
		if len(bad) == 0 {
			mustOK(fmt.Sprintf("FreeChunk of %d live handles", length), err)
		} else {
			var rej *pool.RejectedError
			require(errors.As(err, &rej) && errors.Is(err, pool.ErrInvalidHandle), ErrContract, "FreeChunk of %d live and %d bad handles = %v, want a *pool.RejectedError", length, len(bad), err)
			require(rej.Rejected == len(bad), ErrAccounting, "FreeChunk of %d live and %d bad handles reported %d rejected", length, len(bad), rej.Rejected)
			named := slices.ContainsFunc(bad, func(x badHandle) bool { return x.h.Block() == rej.First })
			require(named, ErrContract, "FreeChunk's rejection names %v as the first refused, which is none of the bad handles", rej.First)
			for _, x := range bad {
				m.Refused(x.count, 1)
			}
		}
		m.forget(chunk, false)
		must(m.check(fmt.Sprintf("after FreeChunk of %d live and %d bad handles", length, len(bad))))
	}
	return nil
}
