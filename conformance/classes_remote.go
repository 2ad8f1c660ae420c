package conformance

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"

	"github.com/locus-go/locus/classes"
	"github.com/locus-go/locus/pool"
)

func checkClassesDrainOnExhaustion(r *clCase, m *clModel) error {
	for k := range m.cls {
		bs, err := m.fillClass(k)
		must(err)
		snd, err := m.c.NewSender()
		mustOK("NewSender", err)
		// A worker frees the class's blocks one by one; the owner
		// reallocates as many as the worker has freed, with no Drain: the
		// allocations must drain. (A bounded transport may make the worker
		// wait for them.)
		var sent atomic.Int64
		var c crew
		c.Go(func() error {
			for _, b := range bs {
				mustOK("sender Free", snd.Free(b.Key))
				sent.Add(1)
			}
			return nil
		})
		var back backoff
		for got := 0; got < len(bs); {
			if int64(got) == sent.Load() {
				if c.finished() {
					return errors.Join(c.wait(r.ctx, "workers"), violationf(ErrLost, "class %d: the worker freed %d blocks, %d came back", k, len(bs), got))
				}
				if !back.wait(r.ctx) {
					return c.stopped("workers were")
				}
				continue
			}
			back.reset()
			h, err := m.c.Alloc(m.cls[k].Size)
			if err != nil {
				return errors.Join(violationf(ErrLost, "class %d: Alloc with %d of its blocks freed through a sender and no Drain: %v", k, sent.Load()-int64(got), err), c.wait(r.ctx, "workers"))
			}
			if h.Class() != k {
				return errors.Join(violationf(ErrContract, "Alloc(%d) took class %d, want %d", m.cls[k].Size, h.Class(), k), c.wait(r.ctx, "workers"))
			}
			m.Forget(bs[got], true)
			mem, err := m.c.Bytes(h)
			if err != nil {
				return errors.Join(violationf(ErrContract, "Bytes of a new block: %v", err), c.wait(r.ctx, "workers"))
			}
			m.tag++
			stamp(mem, len(mem), m.tag)
			m.Add(h, k, h.Block().Index(), m.cls[k].Size, m.tag)
			got++
		}
		must(c.wait(r.ctx, "workers"))
		mustOK("Sender.Close", snd.Close())
		must(m.check(fmt.Sprintf("class %d, after allocations that drained", k)))
		m.freeAll()
	}
	return nil
}

func checkClassesRemote(r *clCase) error {
	must(classesExchange(r, r.x, false))
	c, err := r.another()
	must(err)
	mustIn(classesExchange(r, c, true), "with a sender per request")
	return nil
}

// classesExchange has workers free mixed-class chunks the owner allocates,
// through their own senders, while the owner allocates and drains, and
// checks that every block comes back exactly once. With perRequest each
// worker makes a sender per chunk and retires it once the chunk is freed.
func classesExchange(r *clCase, c clsSubject, perRequest bool) error {
	m, err := newClModel(c)
	if err != nil {
		return err
	}
	ctx := r.ctx
	const workers = 4
	chunks := scaled(150)
	type job struct {
		hs  []classes.Handle
		mem [][]byte
	}
	// live[k][i] is set by the owner when it hands block i of class k out
	// and cleared by the worker just before it frees the block.
	live := make([][]atomic.Bool, len(m.cls))
	for k, cl := range m.cls {
		live[k] = make([]atomic.Bool, cl.Blocks)
	}
	jobs := make([]chan job, workers)
	var freedJobs atomic.Int64
	var submitted [workers]atomic.Uint64
	var crw crew
	for w := range workers {
		jobs[w] = make(chan job, chunks)
		var snd ClassesSender
		if !perRequest {
			if snd, err = m.c.NewSender(); err != nil {
				return violationf(ErrContract, "NewSender: %v", err)
			}
		}
		crw.Go(func() error {
			var bad error
			for j := range jobs[w] {
				if perRequest {
					var err error
					snd, err = m.c.NewSender()
					mustOK("NewSender on a worker", err)
				}
				before := snd.Submitted()
				for i, h := range j.hs {
					if v := j.mem[i][0]; v != byte(h.Block().Generation()) && bad == nil {
						bad = violationf(ErrAliased, "worker read %#x in %v, the owner wrote %#x", v, h, byte(h.Block().Generation()))
					}
					j.mem[i][0] = 0
					live[h.Class()][h.Block().Index()].Store(false)
				}
				var err error
				if len(j.hs)%2 == 0 || len(j.hs) > 8 {
					err = snd.FreeChunk(j.hs)
				} else {
					for _, h := range j.hs {
						if err = snd.Free(h); err != nil {
							break
						}
					}
				}
				if err != nil && bad == nil {
					bad = violationf(ErrContract, "sender freeing %d handles: %v", len(j.hs), err)
				}
				if n := snd.Submitted() - before; n != uint64(len(j.hs)) && bad == nil {
					bad = violationf(ErrAccounting, "Sender.Submitted grew by %d for %d handles freed", n, len(j.hs))
				}
				submitted[w].Add(uint64(len(j.hs)))
				if perRequest {
					if err := retire(snd, j.hs[:1]); bad == nil {
						bad = err
					}
				}
				freedJobs.Add(1)
				if ctx.Err() != nil {
					return bad
				}
			}
			return bad
		})
	}
	stop := func(err error) error {
		for _, j := range jobs {
			close(j)
		}
		return errors.Join(err, crw.drainOut(ctx, m.c.Drain))
	}
	drain := func() (int, error) {
		n, err := m.c.Drain()
		if err != nil {
			return n, violationf(ErrDuplicated, "a drain rejected handles that were freed once each: %v", err)
		}
		return n, nil
	}
	rng := rand.New(rand.NewPCG(1, 2))
	sent := make([]uint64, len(m.cls))
	var b backoff
	for dispatched := 0; dispatched < chunks*workers; {
		if _, err := drain(); err != nil {
			return stop(err)
		}
		want := 1 + rng.IntN(12)
		if rng.IntN(16) == 0 {
			want = 1 + rng.IntN(40)
		}
		var hs []classes.Handle
		var mem [][]byte
		for range want {
			n := 1 + rng.IntN(m.Largest())
			h, buf, err := m.c.AllocBytes(n)
			if errors.Is(err, pool.ErrExhausted) {
				continue // workers hold that class: another size, or a smaller job
			} else if err != nil {
				return stop(violationf(ErrContract, "AllocBytes(%d): %v", n, err))
			}
			k, idx := h.Class(), h.Block().Index()
			if k < 0 || k >= len(m.cls) || idx < 0 || idx >= m.cls[k].Blocks {
				return stop(violationf(ErrContract, "AllocBytes(%d) gave block %d of class %d", n, idx, k))
			}
			if live[k][idx].Swap(true) {
				return stop(violationf(ErrDuplicated, "block %d of class %d handed out again while a worker still holds it", idx, k))
			}
			buf[0] = byte(h.Block().Generation())
			hs, mem = append(hs, h), append(mem, buf)
			sent[k]++
		}
		if len(hs) == 0 {
			// Workers hold the blocks: once every dispatched job has been
			// freed, a drain that brings nothing means blocks are lost.
			idle := freedJobs.Load() == int64(dispatched)
			n, err := drain()
			if err != nil {
				return stop(err)
			}
			if n == 0 && idle {
				return stop(violationf(ErrLost, "every job was freed by its worker, yet the allocator stays exhausted: %d blocks never came back", m.c.Stats().Live()))
			}
			if n > 0 {
				b.reset()
			} else if !b.wait(ctx) {
				return stop(violationf(ErrDeadlock, "allocator exhausted and workers stuck"))
			}
			continue
		}
		b.reset()
		jobs[dispatched%workers] <- job{hs, mem}
		dispatched++
	}
	if err := stop(nil); err != nil {
		return err
	}
	if _, err := drainDry(ctx, m.c.Drain); err != nil {
		return err
	}
	st := m.c.Stats()
	var total uint64
	for k, cs := range st.Classes {
		total += sent[k]
		switch {
		case cs.RemoteDrained > cs.RemoteSubmitted:
			return violationf(ErrDuplicated, "class %d: drained %d handles, senders submitted %d", k, cs.RemoteDrained, cs.RemoteSubmitted)
		case cs.Live != 0:
			return violationf(ErrLost, "class %d: %d blocks never came back (submitted %d, drained %d)", k, cs.Live, cs.RemoteSubmitted, cs.RemoteDrained)
		case cs.RemoteSubmitted != sent[k] || cs.RemoteDrained != sent[k] || cs.Frees != sent[k] || cs.Allocs != sent[k]:
			return violationf(ErrAccounting, "class %d: %d blocks freed remotely; stats say submitted %d, drained %d, frees %d, allocs %d",
				k, sent[k], cs.RemoteSubmitted, cs.RemoteDrained, cs.Frees, cs.Allocs)
		}
	}
	var subs uint64
	for w := range submitted {
		subs += submitted[w].Load()
	}
	if subs != total {
		return violationf(ErrAccounting, "the senders' Submitted sums to %d, they freed %d", subs, total)
	}
	return nil
}

func checkClassesSenderRejects(r *clCase, m *clModel) error {
	snd, err := m.c.NewSender()
	mustOK("NewSender", err)
	for round := range scaled(40) {
		good, err := m.perClass(1 + round%3)
		mustIn(err, "round %d", round)
		hs := keys(good)
		unknown := 1 + round%2
		for i := range unknown {
			hs = slices.Insert(hs, (i*7)%len(hs), mkClassHandle(good[i].Key.Block(), uint32(len(m.cls)+i)))
		}
		before := snd.Submitted()
		var sendErr error
		got, reports, err := drainSending(r.ctx, m.c.Drain, true, func() error { sendErr = snd.FreeChunk(hs); return nil })
		must(err)
		var rej *pool.RejectedError
		ok := errors.As(sendErr, &rej) && errors.Is(sendErr, classes.ErrUnknownClass) && errors.Is(sendErr, pool.ErrInvalidHandle)
		require(ok, ErrContract, "round %d: sender FreeChunk with %d handles naming no class = %v, want a *pool.RejectedError matching classes.ErrUnknownClass", round, unknown, sendErr)
		require(rej.Rejected == unknown, ErrAccounting, "round %d: sender FreeChunk refused %d handles naming no class, reported %d", round, unknown, rej.Rejected)
		sub := snd.Submitted() - before
		require(sub == uint64(len(good)), ErrAccounting, "round %d: Sender.Submitted grew by %d, %d good handles were sent", round, sub, len(good))
		if len(reports) > 0 {
			return violationf(ErrDuplicated, "round %d: a drain rejected handles freed once each: %v", round, reports[0])
		}
		require(got == len(good), ErrLost, "round %d: drains brought %d of the %d good handles sent beside bad ones", round, got, len(good))
		m.Rejected += uint64(unknown)
		m.forget(good, true)
		must(m.check(fmt.Sprintf("round %d, after a sender refused handles naming no class", round)))
		// Stale handles beside good ones: the drain refuses those, frees
		// these, and counts both.
		more, err := m.perClass(1)
		mustIn(err, "round %d", round)
		stale := good[round%len(good)].Key
		hs = append(keys(more), stale)
		got, reports, err = drainSending(r.ctx, m.c.Drain, true, func() error { return contractErr("sender FreeChunk", snd.FreeChunk(hs)) })
		must(err)
		ok = got == len(more) && len(reports) == 1 && errors.As(reports[0], &rej) && errors.Is(reports[0], pool.ErrStaleHandle) && rej.Rejected == 1
		require(ok, ErrContract, "round %d: drains of %d good handles and one stale one freed %d and reported %v, want %d freed and one *pool.RejectedError of a stale handle", round, len(more), got, reports, len(more))
		m.forget(more, true)
		w := &m.Counts[stale.Class()]
		w.RemoteSubmitted++
		w.RemoteDrained++
		w.Rejected++
		must(m.check(fmt.Sprintf("round %d, after a drain refused a stale handle", round)))
	}
	return nil
}

// classSendsFail checks that every send path of snd fails with
// pool.ErrClosed.
func classSendsFail(who string, snd ClassesSender, h classes.Handle) {
	for _, n := range []int{0, 1, 2, 17} {
		chunk := slices.Repeat([]classes.Handle{h}, n)
		err := snd.FreeChunk(chunk)
		require(errors.Is(err, pool.ErrClosed), ErrContract, "FreeChunk of %d handles through %s = %v, want pool.ErrClosed", n, who, err)
	}
	err := snd.Free(h)
	require(errors.Is(err, pool.ErrClosed), ErrContract, "Free through %s = %v, want pool.ErrClosed", who, err)
}

func checkClassesSenderRetire(r *clCase, m *clModel) error {
	for round := range scaled(20) {
		snd, err := m.c.NewSender()
		mustOK("NewSender", err)
		bs, err := m.perClass(1 + round%3)
		must(err)
		hs := keys(bs)
		// Freed, then retired before any drain: what it freed still
		// comes back.
		got, reports, err := drainSending(r.ctx, m.c.Drain, false, func() error {
			mustOK("sender FreeChunk", snd.FreeChunk(hs[:len(hs)/2]))
			for _, h := range hs[len(hs)/2:] {
				mustOK("sender Free", snd.Free(h))
			}
			return contractErr("Sender.Close", snd.Close())
		})
		if len(reports) > 0 {
			return errors.Join(violationf(ErrDuplicated, "a drain rejected handles freed once each: %v", reports[0]), err)
		}
		must(err)
		more, err := drainDry(r.ctx, m.c.Drain)
		must(err)
		got += more
		require(got == len(bs), ErrLost, "round %d: drains brought %d of the %d blocks a sender freed before it retired", round, got, len(bs))
		sub := snd.Submitted()
		require(sub == uint64(len(bs)), ErrAccounting, "round %d: a retired sender's Submitted = %d, it freed %d", round, sub, len(bs))
		m.forget(bs, true)
		classSendsFail("a retired sender", snd, hs[0])
		mustOK("a second Sender.Close", snd.Close())
		must(m.check(fmt.Sprintf("round %d, after a sender retired", round)))
	}
	return nil
}
