package conformance

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/locus-go/locus/classes"
	"github.com/locus-go/locus/internal/model"
	"github.com/locus-go/locus/pool"
)

func checkClassesAccounting(r *clCase, m *clModel) error {
	snd, err := m.c.NewSender()
	mustOK("NewSender", err)
	rng := rand.New(rand.NewPCG(10, 11))
	for step := range scaled(3000) {
		require(r.ctx.Err() == nil, ErrDeadlock, "step %d: stopped by the watchdog", step)
		var err error
		switch op := m.Next(rng); op.Kind {
		case model.SizesAlloc:
			_, err = m.alloc(op.N, op.How, op.Class)
		case model.SizesFree:
			err = m.free(op.Blocks[0])
		case model.SizesFreeChunk:
			if err = m.c.FreeChunk(keys(op.Blocks)); err != nil {
				err = violationf(ErrContract, "FreeChunk of %d live handles: %v", len(op.Blocks), err)
			} else {
				m.forget(op.Blocks, false)
			}
		case model.SizesRemote:
			err = m.remoteFree(r, snd, op.Blocks, op.Single)
		case model.SizesStale:
			if got := m.c.Free(op.Key); !errors.Is(got, pool.ErrStaleHandle) {
				err = violationf(ErrAliased, "Free of the stale %v = %v, want pool.ErrStaleHandle", op.Key, got)
			} else {
				m.Refused(op.Key.Class(), 1)
			}
		case model.SizesUnknown:
			h := mkClassHandle(op.Blocks[0].Key.Block(), uint32(op.Unknown))
			if got := m.c.Free(h); !errors.Is(got, classes.ErrUnknownClass) {
				err = violationf(ErrContract, "Free of a handle naming no class = %v, want classes.ErrUnknownClass", got)
			} else {
				m.Refused(-1, 1)
			}
		default:
			_, err = drainDry(r.ctx, m.c.Drain)
		}
		if err == nil {
			err = m.check("")
		}
		mustIn(err, "step %d", step)
	}
	return nil
}

// classesNotBehind checks that st, read after prev, went back on no
// counter and changed no constant, class by class.
func classesNotBehind(prev, st classes.Stats) error {
	if len(st.Classes) != len(prev.Classes) {
		return violationf(ErrAccounting, "the number of classes changed from %d to %d", len(prev.Classes), len(st.Classes))
	}
	if st.Rejected < prev.Rejected {
		return violationf(ErrAccounting, "Rejected went back from %d to %d", prev.Rejected, st.Rejected)
	}
	for k := range st.Classes {
		if err := notBehind(prev.Classes[k].Stats, st.Classes[k].Stats); err != nil {
			return fmt.Errorf("class %d: %w", k, err)
		}
		if st.Classes[k].Requested < prev.Classes[k].Requested {
			return violationf(ErrAccounting, "class %d: Requested went back from %d to %d", k, prev.Classes[k].Requested, st.Classes[k].Requested)
		}
	}
	return nil
}

// classIdentities checks a snapshot: every class, each one's identities.
func classIdentities(st classes.Stats, n int) error {
	if len(st.Classes) != n {
		return violationf(ErrAccounting, "a snapshot has %d classes, the allocator %d", len(st.Classes), n)
	}
	for k, cs := range st.Classes {
		if err := identities(cs.Stats); err != nil {
			return fmt.Errorf("class %d: %w", k, err)
		}
		if cs.Requested > cs.HandedOut() {
			return violationf(ErrAccounting, "class %d: Requested %d > Allocs × BlockSize %d", k, cs.Requested, cs.HandedOut())
		}
	}
	return nil
}

func checkClassesSnapshot(r *clCase, m *clModel) error {
	ctx, c := r.ctx, m.c
	n := len(m.cls)
	mustIn(classIdentities(c.Snapshot(), n), "the first snapshot")
	checkClassesSnapshotFresh(r, m)
	checkClassesOwnSlices(m)
	quit := make(chan struct{})
	var scrape crew
	scraper(&scrape, ctx, quit, c.Snapshot, func(prev, st classes.Stats) error {
		return cmp.Or(classIdentities(st, n), classesNotBehind(prev, st))
	})
	snd, err := c.NewSender()
	if err != nil {
		close(quit)
		return errors.Join(violationf(ErrContract, "NewSender: %v", err), scrape.wait(ctx, "scrapers"))
	}
	rng := rand.New(rand.NewPCG(12, 13))
	for step := range scaled(1500) {
		switch op := rng.IntN(10); {
		case op < 5 || len(m.Blocks) == 0:
			_, err = m.alloc(1+rng.IntN(m.Largest()), viaAlloc, 0)
		case op < 7:
			err = m.free(m.Blocks[rng.IntN(len(m.Blocks))])
		case op < 8:
			err = m.remoteFree(r, snd, m.Blocks[len(m.Blocks)-1:], false)
		case op < 9:
			if len(m.Stale) > 0 {
				_ = c.Free(m.Stale[rng.IntN(len(m.Stale))]) // refused and counted
			}
			_, err = c.Drain()
		default:
			_, err = c.Drain()
		}
		if err != nil {
			close(quit)
			return errors.Join(fmt.Errorf("step %d: %w", step, err), scrape.wait(ctx, "scrapers"))
		}
	}
	close(quit)
	must(scrape.wait(ctx, "scrapers"))
	st := c.Stats()
	snap := c.Snapshot()
	if !slices.Equal(st.Classes, snap.Classes) || st.Rejected != snap.Rejected {
		return violationf(ErrAccounting, "Snapshot right after Stats differs from it: %s", fieldDiff(snap, st))
	}
	return nil
}

// checkClassesSnapshotFresh: an owner that only drains keeps a scraper
// fresh. The owner allocates without calling Stats; a Snapshot asked for
// later (past the freshness window of the last publication) gets the
// allocations once the owner drains.
func checkClassesSnapshotFresh(r *clCase, m *clModel) {
	m.freeAll()
	must(m.check("before a drain-only stretch")) // publishes
	const k = 3
	for range k {
		if b, err := m.alloc(1, viaAlloc, 0); err != nil || b == nil {
			must(refusedOr(err, "Alloc(1) on a fresh allocator failed"))
		}
	}
	st, err := snapshotWhileDraining(r.ctx, m.c.Snapshot, m.c.Drain)
	must(err)
	live := -1
	if len(st.Classes) > 0 {
		live = st.Classes[0].Live
	}
	require(live == k, ErrAccounting, "a Snapshot asked for while the owner only drained says %d blocks of class 0 live, want %d: the owner does not publish at Drain when asked (a scraper of a drain-only owner is stale forever)", live, k)
	m.freeAll()
}

// checkClassesOwnSlices: every slice the allocator returns is the
// caller's. Stats and Snapshot taken earlier do not change as the
// allocator goes on, edits to them do not show in later ones, and an edit
// to what Classes returned changes neither what it returns next nor where
// allocations go.
func checkClassesOwnSlices(m *clModel) {
	c := m.c
	if b, err := m.alloc(1, viaAlloc, 0); err != nil || b == nil {
		must(refusedOr(err, "Alloc(1) on a fresh allocator failed"))
	}
	for _, read := range []struct {
		name string
		get  func() classes.Stats
	}{{"Stats", c.Stats}, {"Snapshot", func() classes.Stats { c.Stats(); return c.Snapshot() }}} {
		st := read.get()
		kept := slices.Clone(st.Classes)
		// The allocator goes on: the earlier value must not follow.
		x, err := m.take(len(m.cls) - 1)
		must(err)
		later := read.get()
		if !slices.Equal(st.Classes, kept) {
			must(violationf(ErrAliased, "a %s taken earlier changed when the allocator went on: %s; the slice it returned is one the allocator keeps writing", read.name, fieldDiff(st.Classes, kept)))
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
			must(violationf(ErrAliased, "an edit to what %s returned showed in the next %s: %s", read.name, read.name, fieldDiff(again.Classes, want)))
		}
		must(m.free(x))
	}
	cls := c.Classes()
	for i := range cls {
		cls[i].Size, cls[i].Blocks = 1, 1
	}
	got := c.Classes()
	require(slices.Equal(got, m.cls), ErrAliased, "an edit to what Classes returned showed in the next Classes: %v, want %v", got, m.cls)
	for _, n := range m.sizes() {
		x, err := m.alloc(n, viaAlloc, 0)
		mustIn(err, "after an edit to what Classes returned")
		if x != nil {
			must(m.free(x))
		}
	}
	must(m.check("after edits to every slice the allocator returned"))
}

func checkClassesClose(r *clCase, m *clModel) error {
	c := m.c
	live, err := m.perClass(1)
	must(err)
	snd, err := c.NewSender()
	mustOK("NewSender", err)
	must(m.remoteFree(r, snd, live[:1], false))
	h := live[1].Key
	final := c.Stats()
	mustOK("Close", c.Close())
	_, aErr := c.Alloc(1)
	_, _, bErr := c.AllocBytes(1)
	_, cErr := c.AllocClass(0, 1)
	_, yErr := c.Bytes(h)
	_, dErr := c.Drain()
	_, sErr := c.NewSender()
	must(allFail(pool.ErrClosed, "after Close", []call{
		{"Alloc", aErr}, {"AllocBytes", bErr}, {"AllocClass", cErr}, {"Bytes", yErr}, {"Drain", dErr},
		{"NewSender", sErr}, {"Free", c.Free(h)}, {"FreeChunk", c.FreeChunk([]classes.Handle{h})},
		{"Free of the zero handle", c.Free(classes.Handle{})}, {"Close", c.Close()},
	}))
	classSendsFail("a sender of a closed allocator", snd, h)
	if st := c.Stats(); !slices.Equal(st.Classes, final.Classes) || st.Rejected != final.Rejected {
		return violationf(ErrAccounting, "Stats after Close differs from Stats at Close: %s", fieldDiff(st, final))
	}
	if snap := c.Snapshot(); !slices.Equal(snap.Classes, final.Classes) || snap.Rejected != final.Rejected {
		return violationf(ErrAccounting, "Snapshot after Close differs from Stats at Close: %s", fieldDiff(snap, final))
	}
	return nil
}

func checkClassesAllocs(r *clCase, m *clModel) error {
	c := m.c
	snd, err := c.NewSender()
	mustOK("NewSender", err)
	stale, err := c.Alloc(1)
	mustOK("Alloc", err)
	mustOK("Free", c.Free(stale))
	// One handle of every class per chunk: it fits any transport.
	chunk := make([]classes.Handle, len(m.cls))
	rng := rand.New(rand.NewPCG(31, 32))
	big := make([]classes.Handle, 0, 16*len(m.cls))
	fill := func() error {
		for k := range chunk {
			h, err := c.Alloc(m.cls[k].Size)
			if err != nil {
				return violationf(ErrContract, "Alloc(%d): %v", m.cls[k].Size, err)
			}
			chunk[k] = h
		}
		return nil
	}
	return allocFree(r.allocRuns(), []namedOp{
		{"Alloc+Free", func() error {
			h, err := c.Alloc(m.cls[1].Size)
			if err != nil {
				return contractErr("Alloc", err)
			}
			return contractErr("Free", c.Free(h))
		}},
		{"AllocBytes+Bytes+Free", func() error {
			h, _, err := c.AllocBytes(m.cls[0].Size)
			if err != nil {
				return contractErr("AllocBytes", err)
			}
			if _, err := c.Bytes(h); err != nil {
				return contractErr("Bytes", err)
			}
			return contractErr("Free", c.Free(h))
		}},
		{"AllocClass+Free", func() error {
			h, err := c.AllocClass(len(m.cls)-1, 1)
			if err != nil {
				return contractErr("AllocClass", err)
			}
			return contractErr("Free", c.Free(h))
		}},
		{"FreeChunk of a mixed chunk", func() error {
			if err := fill(); err != nil {
				return err
			}
			return contractErr("FreeChunk", c.FreeChunk(chunk))
		}},
		{"FreeChunk of 16 handles per class", func() error {
			var err error
			if big, err = bigChunk(m, rng, 16, big); err != nil {
				return err
			}
			return contractErr("FreeChunk", c.FreeChunk(big))
		}},
		{"a rejected Free", func() error { return wantIs("Free of a stale handle", c.Free(stale), pool.ErrStaleHandle) }},
		{"sender FreeChunk+Drain", func() error {
			if err := fill(); err != nil {
				return err
			}
			if err := snd.FreeChunk(chunk); err != nil {
				return contractErr("sender FreeChunk", err)
			}
			return drainBlocks(c.Drain, len(chunk))
		}},
		{"sender Free+Drain", func() error {
			h, err := c.Alloc(1)
			if err != nil {
				return contractErr("Alloc", err)
			}
			if err := snd.Free(h); err != nil {
				return contractErr("sender Free", err)
			}
			return drainBlocks(c.Drain, 1)
		}},
		{"an idle Drain", func() error { _, err := c.Drain(); return contractErr("Drain", err) }},
	})
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
