package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/locus-go/locus/pool"
)

func checkFresh(r *plRun) error {
	s := r.x
	n := capacityOf(s)
	fifo := s.order() == pool.FIFO
	for i := range n {
		h, err := s.Alloc()
		mustOK(fmt.Sprintf("Alloc %d of %d", i+1, n), err)
		want := i
		if fifo {
			want = n - 1 - i
		}
		if h.Index() != want {
			return violationf(ErrOrder, "%v pool's allocation %d is block %d, want %d", s.order(), i, h.Index(), want)
		}
	}
	_, err := s.Alloc()
	require(errors.Is(err, pool.ErrExhausted), ErrDuplicated, "Alloc on a pool with every block live = %v, want pool.ErrExhausted", err)
	must(statsWant(s, n, uint64(n), 0, 0))
	freshZeroed(r)
	return nil
}

// freshZeroed checks that a fresh pool's blocks read as zero, also pools
// made after others were written all over and closed, while from none to
// several others are live.
func freshZeroed(r *plRun) {
	// dirty allocates every block of pool number k, checks that they read
	// as zero and then writes k all over them. marks are the numbers of
	// the live pools: a byte of one of them is their memory showing
	// through.
	dirty := func(s subject, k int, marks []byte) {
		var blocks [][]byte
		for range capacityOf(s) {
			_, b, err := s.AllocBytes()
			if errors.Is(err, pool.ErrExhausted) {
				break
			}
			mustOK("AllocBytes", err)
			blocks = append(blocks, b)
		}
		for i, b := range blocks {
			if j, ok := check(b, 0); !ok {
				require(!slices.Contains(marks, b[j]), ErrAliased, "byte %d of block %d of pool %d is %#x, written into a block of another live pool", j, i, k, b[j])
				must(violationf(ErrContract, "byte %d of block %d of pool %d, made while %d others were live and after others were written all over and closed, is %#x, want 0",
					j, i, k, len(marks), b[j]))
			}
		}
		for _, b := range blocks {
			fill(b, byte(k))
		}
	}
	live := []subject{r.x}
	marks := []byte{1} // r.x's blocks were never written
	made := 1
	for _, wave := range []struct{ keep, add int }{{0, 3}, {2, 2}, {0, 2}, {3, 3}, {1, 2}} {
		for len(live) > wave.keep {
			_ = live[len(live)-1].Close()
			live, marks = live[:len(live)-1], marks[:len(marks)-1]
		}
		for range wave.add {
			p, err := r.another()
			must(err)
			made++
			dirty(p, made, marks)
			live, marks = append(live, p), append(marks, byte(made))
		}
	}
}

func checkOrder(r *plRun) error {
	reuseOrder(r.ctx, r.x)
	return nil
}

// reuseOrder runs thousands of random allocations and local and remote
// frees and checks every allocation against a model of the free list:
// freed blocks go to its back in the order they are freed (a drain frees in
// delivery order, which is one sender's order); LIFO takes from the back,
// FIFO from the front. A fresh pool's list is n-1, ..., 1, 0.
func reuseOrder(ctx context.Context, s subject) {
	n := capacityOf(s)
	order := s.order()
	st := s.Stats()
	require(st.Order == order, ErrOrder, "Stats().Order = %v, the policy says %v", st.Order, order)
	bd, bounded := s.bounds()
	model := make([]int, 0, n)
	for i := n - 1; i >= 0; i-- {
		model = append(model, i)
	}
	take := func() int {
		var i int
		if order == pool.FIFO {
			i, model = model[0], model[1:]
		} else {
			i, model = model[len(model)-1], model[:len(model)-1]
		}
		return i
	}
	snd, err := s.NewSender()
	mustOK("NewSender", err)
	rng := rand.New(rand.NewPCG(1, 2))
	var live []pool.Handle
	pick := func(k int) []pool.Handle {
		chunk := make([]pool.Handle, k)
		for i := range chunk {
			j := rng.IntN(len(live))
			chunk[i] = live[j]
			live = append(live[:j], live[j+1:]...)
		}
		return chunk
	}
	for step := range 4000 {
		require(ctx.Err() == nil, ErrDeadlock, "step %d: stopped by the watchdog", step)
		switch op := rng.IntN(20); {
		case op < 8: // one allocation
			h, err := s.Alloc()
			if len(model) == 0 {
				require(errors.Is(err, pool.ErrExhausted), ErrDuplicated, "step %d: Alloc with no block free = (%v, %v), want pool.ErrExhausted", step, h, err)
				continue
			}
			require(err == nil, ErrContract, "step %d: Alloc with %d blocks free: %v", step, len(model), err)
			want := take()
			require(h.Index() == want, ErrOrder, "step %d: %v reuse gave block %d, the free list's %s is block %d", step, order, h.Index(), end(order), want)
			live = append(live, h)
		case op < 10 && len(model) > 0: // a chunk
			dst := make([]pool.Handle, 1+rng.IntN(min(len(model), 8)))
			mustOK(fmt.Sprintf("step %d: AllocChunk(%d) with %d free", step, len(dst), len(model)), s.AllocChunk(dst))
			for k, h := range dst {
				want := take()
				require(h.Index() == want, ErrOrder, "step %d: %v reuse gave block %d as item %d of a chunk, the free list's %s is block %d", step, order, h.Index(), k, end(order), want)
			}
			live = append(live, dst...)
		case op < 15 && len(live) > 0: // local frees
			for _, h := range pick(1 + rng.IntN(min(len(live), 3))) {
				mustOK(fmt.Sprintf("step %d: Free", step), s.Free(h))
				model = append(model, h.Index())
			}
		case op < 17 && len(live) > 0: // a local chunk
			chunk := pick(1 + rng.IntN(min(len(live), 8)))
			mustOK(fmt.Sprintf("step %d: FreeChunk", step), s.FreeChunk(chunk))
			for _, h := range chunk {
				model = append(model, h.Index())
			}
		case len(live) > 0: // a remote chunk, drained at once
			k := 1 + rng.IntN(min(len(live), 8))
			if bounded && !bd.Chunked {
				k = min(k, bd.Capacity)
			}
			chunk := pick(k)
			mustOK(fmt.Sprintf("step %d: sender FreeChunk", step), snd.FreeChunk(chunk))
			mustIn(drainAll(s, k, "remotely freed blocks"), "step %d", step)
			for _, h := range chunk {
				model = append(model, h.Index())
			}
		}
	}
	// A backlog: one sender frees hundreds of blocks one by one, more
	// chunks pending at once than any node holds, then the drains free
	// them in its order.
	if len(model) > 0 {
		dst := make([]pool.Handle, len(model))
		mustOK("AllocChunk of every free block", s.AllocChunk(dst))
		for k, h := range dst {
			want := take()
			require(h.Index() == want, ErrOrder, "%v reuse gave block %d as item %d of a chunk, the free list's %s is block %d", order, h.Index(), k, end(order), want)
		}
		live = append(live, dst...)
	}
	k := min(len(live), 300)
	if bounded {
		k = min(k, bd.Capacity)
	}
	backlog := pick(k)
	for _, h := range backlog {
		mustOK(fmt.Sprintf("sender Free %d of a backlog of %d", len(model), k), snd.Free(h))
		model = append(model, h.Index())
	}
	must(drainAll(s, k, "remotely freed blocks of a backlog"))
	for i := range k {
		h, err := s.Alloc()
		mustOK(fmt.Sprintf("Alloc %d after a backlog of %d", i, k), err)
		want := take()
		require(h.Index() == want, ErrOrder, "after a sender freed a backlog of %d blocks one by one, %v reuse gave block %d, the free list's %s is block %d: the drains did not free them in the sender's order", k, order, h.Index(), end(order), want)
	}
}

// end names the end of the free list an order takes from.
func end(o pool.Order) string {
	if o == pool.FIFO {
		return "front"
	}
	return "back"
}

func checkStale(r *plRun) error {
	s := r.x
	n := capacityOf(s)
	hs := make([]pool.Handle, n)
	mustOK("AllocChunk", s.AllocChunk(hs))
	old := hs[3]
	mustOK("Free", s.Free(old))
	if err := wantIs("second Free of a handle", s.Free(old), pool.ErrStaleHandle); err != nil {
		return fmt.Errorf("%w (%w)", ErrAliased, err)
	}
	b, err := s.Bytes(old)
	require(err != nil && b == nil, ErrAliased, "Bytes of a freed handle = (%d bytes, %v), want pool.ErrStaleHandle", len(b), err)
	// The only free block is old's: the next allocation reuses it.
	h, err := s.Alloc()
	mustOK("Alloc", err)
	require(h != old, ErrAliased, "reuse gave %v, equal to the freed handle: the old handle would reach the new owner's block", h)
	require(h.Index() == old.Index(), ErrOrder, "the only free block is %d, but Alloc gave %v", old.Index(), h)
	mem, err := s.Bytes(h)
	mustOK("Bytes of the new handle", err)
	fill(mem, 0x5a)
	must(refusedBytesFree(s, "the old handle after reuse", old, pool.ErrStaleHandle))
	_, ok := check(mem, 0x5a)
	require(ok, ErrAliased, "the new owner's block changed")
	_, err = s.Bytes(h)
	require(err == nil, ErrAliased, "the new handle stopped working after stale calls: %v", err)
	must(statsWant(s, n, uint64(n)+1, 1, 4))
	// Every time: hundreds of frees and reuses of many blocks, each
	// handle tried on every path once stale, the old ones again at the end.
	mustOK("FreeChunk", s.FreeChunk(hs[n/2:]))
	snd, err := s.NewSender()
	mustOK("NewSender", err)
	var olds []pool.Handle
	rejected := uint64(4)
	for i := range 600 {
		h, err := s.Alloc()
		mustOK("Alloc", err)
		mustOK("Free", s.Free(h))
		var rej *pool.RejectedError
		err = s.Free(h)
		require(errors.Is(err, pool.ErrStaleHandle), ErrAliased, "round %d: Free of a just-freed handle = %v, want pool.ErrStaleHandle", i, err)
		b, err := s.Bytes(h)
		require(errors.Is(err, pool.ErrStaleHandle) && b == nil, ErrAliased, "round %d: Bytes of a just-freed handle = (%d bytes, %v), want pool.ErrStaleHandle", i, len(b), err)
		err = s.FreeChunk([]pool.Handle{h})
		require(errors.As(err, &rej) && rej.Rejected == 1 && errors.Is(err, pool.ErrStaleHandle), ErrAliased, "round %d: FreeChunk of a just-freed handle = %v, want a *pool.RejectedError of one stale handle", i, err)
		rejected += 3
		if i%50 == 0 {
			mustOK("sender Free", snd.Free(h))
			before := s.Stats().RemoteDrained
			m, err := s.Drain()
			require(s.Stats().RemoteDrained != before, ErrLost, "round %d: a Drain after a sender's Free returned took nothing", i)
			require(errors.As(err, &rej) && errors.Is(err, pool.ErrStaleHandle) && m == 0, ErrAliased, "round %d: a drain of a remotely freed stale handle = (%d, %v), want (0, a *pool.RejectedError of a stale handle)", i, m, err)
			rejected++
		}
		if len(olds) < 64 {
			olds = append(olds, h)
		}
	}
	for _, h := range olds {
		err := s.Free(h)
		require(errors.Is(err, pool.ErrStaleHandle), ErrAliased, "Free of a handle stale since hundreds of reuses = %v, want pool.ErrStaleHandle", err)
		rejected++
	}
	must(statsWant(s, n/2, uint64(n)+1+600, uint64(n-n/2)+1+600, rejected))
	poolWrap(r)
	return nil
}

// poolWrap allocates and frees one block of a fresh pool wrapCycles
// times, every other block live so that every allocation takes that block
// whatever the reuse order, and checks that handles from the first cycles,
// and from 2^15 cycles before the last, are still stale: a generation kept
// in 16 bits would make them the block's current handle.
func poolWrap(r *plRun) {
	s, err := r.another()
	must(err)
	n := capacityOf(s)
	mustOK(fmt.Sprintf("AllocChunk(%d) on a fresh pool of %d blocks", n-1, n), s.AllocChunk(make([]pool.Handle, n-1)))
	olds := wrapCycle(r.ctx, "Alloc with one block free", "Free of the block just allocated", s.Alloc, s.Free)
	cur, err := s.Alloc()
	mustOK("Alloc with one block free", err)
	mem, err := s.Bytes(cur)
	mustOK("Bytes of a live handle", err)
	fill(mem, 0x3c)
	for _, old := range olds {
		require(old != cur, ErrAliased, "after %d allocations and frees of one block, its handle is %v, equal to a handle freed thousands of allocations ago: the generation wrapped, and the old handle frees the block's current owner", wrapCycles, old)
		must(refusedBytesFree(s, fmt.Sprintf("a handle freed up to %d allocations of its block ago", wrapCycles), old, pool.ErrStaleHandle))
	}
	mem2, err := s.Bytes(cur)
	require(err == nil && len(mem2) == len(mem) && &mem2[0] == &mem[0], ErrAliased, "the live handle %v no longer reaches its block after stale handles of it were refused: %v", cur, err)
	j, ok := check(mem, 0x3c)
	require(ok, ErrAliased, "byte %d of the live block changed while stale handles of it were refused", j)
}

// poolClosedIdentity: the handles of a closed pool are foreign to pools
// made after it, also when those hand out the very same blocks (a pool
// that recycles the ids of closed ones would hand out equal handles).
func poolClosedIdentity(r *plRun) {
	var olds []pool.Handle
	for k := range 3 {
		s, err := r.another()
		must(err)
		hs := make([]pool.Handle, 3)
		mustOK(fmt.Sprintf("pool %d: AllocChunk(3) on a fresh pool", k), s.AllocChunk(hs))
		for _, h := range hs {
			mem, err := s.Bytes(h)
			mustOK(fmt.Sprintf("pool %d: Bytes of a live handle", k), err)
			fill(mem, byte(k+1))
		}
		for _, old := range olds {
			mustIn(refusedBytesFree(s, "a handle of a pool closed before it was made", old, pool.ErrForeignHandle), "pool %d", k)
		}
		for _, h := range hs {
			mem, err := s.Bytes(h)
			require(err == nil, ErrAliased, "pool %d: a live handle was refused after handles of closed pools were: %v", k, err)
			j, ok := check(mem, byte(k+1))
			require(ok, ErrAliased, "pool %d: byte %d of a live block changed while handles of closed pools were refused", k, j)
		}
		olds = append(olds, hs...)
		mustOK(fmt.Sprintf("pool %d: Close", k), s.Close())
	}
}

// refusedBytesFree checks that Bytes, then Free, refuse h, what, with want,
// Bytes returning no memory: else h reaches a block it does not own.
func refusedBytesFree(s subject, what string, h pool.Handle, want error) error {
	if b, err := s.Bytes(h); !errors.Is(err, want) || b != nil {
		return violationf(ErrAliased, "Bytes of %s (%v) = (%d bytes, %v), want %v", what, h, len(b), err, want)
	}
	if err := s.Free(h); !errors.Is(err, want) {
		return violationf(ErrAliased, "Free of %s (%v) = %v, want %v", what, h, err, want)
	}
	return nil
}

func checkForeign(r *plRun) error {
	s := r.x
	pools := []subject{s}
	for range 2 {
		o, err := r.another()
		must(err)
		pools = append(pools, o)
	}
	o := pools[1]
	foreign, err := o.Alloc()
	mustOK("Alloc on the other pool", err)
	mine, err := s.Alloc()
	mustOK("Alloc", err)
	require(foreign.Index() == mine.Index(), ErrContract, "two fresh pools of one kind started at blocks %d and %d", foreign.Index(), mine.Index())
	if err := wantIs("Free of another pool's handle", s.Free(foreign), pool.ErrForeignHandle); err != nil {
		return fmt.Errorf("%w (%w)", ErrAliased, err)
	}
	_, err = s.Bytes(foreign)
	require(errors.Is(err, pool.ErrForeignHandle), ErrAliased, "Bytes of another pool's handle = %v, want pool.ErrForeignHandle", err)
	err = s.FreeChunk([]pool.Handle{foreign})
	require(errors.Is(err, pool.ErrForeignHandle), ErrAliased, "FreeChunk of another pool's handle = %v, want pool.ErrForeignHandle", err)
	_, err = s.Bytes(mine)
	mustOK("own handle after a foreign free", err)
	_, err = o.Bytes(foreign)
	mustOK("the other pool's handle after this pool rejected it", err)
	must(statsWant(s, 1, 1, 0, 3))
	// Every pool's handles carry its own id, and every pool's blocks are
	// its own memory.
	ids := map[uint32]int{}
	var all [][]pool.Handle
	for k, p := range pools {
		hs := make([]pool.Handle, p.Stats().Free)
		mustOK(fmt.Sprintf("pool %d: AllocChunk", k), p.AllocChunk(hs))
		all = append(all, hs)
		id := poolID(hs[0])
		j, dup := ids[id]
		require(!dup || j == k, ErrAliased, "pools %d and %d, made by one constructor, have the same id %d", j, k, id)
		ids[id] = k
	}
	for k := range pools {
		for j, q := range pools {
			if j != k {
				err := q.Free(all[k][0])
				require(errors.Is(err, pool.ErrForeignHandle), ErrAliased, "pool %d freed a handle of pool %d: %v", j, k, err)
			}
		}
	}
	var owners []int
	var keys []pool.Handle
	for k := range pools {
		for _, h := range all[k] {
			owners, keys = append(owners, k), append(keys, h)
		}
	}
	blocks := func(write bool) ([][]byte, error) {
		bs := make([][]byte, len(keys))
		for n, h := range keys {
			var err error
			if bs[n], err = pools[owners[n]].Bytes(h); err != nil && write {
				return nil, violationf(ErrContract, "Bytes: %v", err)
			}
		}
		return bs, nil
	}
	must(disjoint(0, 5, blocks, func(n, i int) error {
		return violationf(ErrAliased, "byte %d of pool %d's %v was overwritten by a write to another pool's block", i, owners[n], keys[n])
	}))
	poolClosedIdentity(r)
	return nil
}

func checkForged(r *plRun) error {
	s := r.x
	h, err := s.Alloc()
	mustOK("Alloc", err)
	n := capacityOf(s)
	must(wantIs("Free(Handle{})", s.Free(pool.Handle{}), pool.ErrZeroHandle))
	id := poolID(h)
	must(wantIs("Free of an index past capacity", s.Free(mkHandle(id, uint32(n), h.Generation())), pool.ErrOutOfRange))
	// Block n-1 is free, at generation 0: a forged even generation must not
	// match it, nor must a guessed future generation of the live block.
	_, err = s.Bytes(mkHandle(id, uint32(n-1), 0))
	require(errors.Is(err, pool.ErrStaleHandle), ErrAliased, "Bytes of a free block with a forged generation = %v, want pool.ErrStaleHandle", err)
	_, err = s.Bytes(mkHandle(id, uint32(h.Index()), h.Generation()+2))
	require(errors.Is(err, pool.ErrStaleHandle), ErrAliased, "Bytes with a guessed generation = %v, want pool.ErrStaleHandle", err)
	must(statsWant(s, 1, 1, 0, 4))
	// Thousands of forgeries near live and free handles: only the exact
	// live handle is accepted, and each rejection says why.
	live := make([]pool.Handle, n/2)
	mustOK("AllocChunk", s.AllocChunk(live))
	live = append(live, h)
	for _, x := range live[:len(live)/2] {
		mustOK("Free", s.Free(x))
	}
	live = live[len(live)/2:]
	isLive := map[pool.Handle]bool{}
	for _, x := range live {
		isLive[x] = true
	}
	rng := rand.New(rand.NewPCG(6, 7))
	rejected := uint64(4)
	for i := range 3000 {
		base := live[rng.IntN(len(live))]
		pid, idx, gen, want := forge(rng, rng.IntN(8), id, uint32(base.Index()), base.Generation(), n)
		f := mkHandle(pid, idx, gen)
		_, err := s.Bytes(f)
		if isLive[f] {
			require(err == nil, ErrContract, "forgery %d: Bytes of the live %v: %v", i, f, err)
			continue
		}
		rejected++
		require(errors.Is(err, want), ErrAliased, "forgery %d: Bytes(%v) = %v, want %v (the live handle of that block is not it)", i, f, err, want)
	}
	for _, x := range live {
		_, err := s.Bytes(x)
		mustOK("a live handle after forgeries", err)
	}
	allocs := uint64(1 + n/2)
	return statsWant(s, len(live), allocs, allocs-uint64(len(live)), rejected)
}

func checkNoAliasing(r *plRun) error {
	s := r.x
	n := capacityOf(s)
	rng := rand.New(rand.NewPCG(5, 6))
	type blk struct {
		h   pool.Handle
		tag byte
	}
	var live []blk
	tag := byte(0)
	for round := range 50 {
		for len(live) < n && rng.IntN(4) != 0 {
			var h pool.Handle
			var b []byte
			var err error
			if round%2 == 0 {
				h, b, err = s.AllocBytes()
			} else if h, err = s.Alloc(); err == nil {
				b, err = s.Bytes(h)
			}
			mustOK("Alloc", err)
			if len(b) != s.Stats().BlockSize || cap(b) != len(b) {
				return violationf(ErrAliased, "a block of %d bytes, capacity %d, in a pool of %d-byte blocks", len(b), cap(b), s.Stats().BlockSize)
			}
			tag++
			fill(b, tag)
			live = append(live, blk{h, tag})
		}
		for _, l := range live {
			b, err := s.Bytes(l.h)
			mustOK("Bytes of a live handle", err)
			j, ok := check(b, l.tag)
			require(ok, ErrAliased, "round %d: byte %d of live %v changed: another live handle shares its memory", round, j, l.h)
		}
		for k := rng.IntN(len(live) + 1); k > 0; k-- {
			i := rng.IntN(len(live))
			mustOK("Free", s.Free(live[i].h))
			live = append(live[:i], live[i+1:]...)
		}
	}
	return nil
}
