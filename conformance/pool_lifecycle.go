package conformance

import (
	"errors"
	"runtime"
	"slices"
	"time"

	"github.com/locus-go/locus/pool"
)

// senderFails checks that every send path of snd fails with pool.ErrClosed
// at every length of lengths, and that its Submitted count does not move.
func senderFails(who string, snd sender, h pool.Handle, lengths []int) {
	before := snd.Submitted()
	for _, n := range lengths {
		chunk := slices.Repeat([]pool.Handle{h}, n)
		err := snd.FreeChunk(chunk)
		require(errors.Is(err, pool.ErrClosed), ErrContract, "%s: FreeChunk of %d handles = %v, want pool.ErrClosed", who, n, err)
		m, err := snd.TryFreeChunk(chunk)
		require(m == 0 && errors.Is(err, pool.ErrClosed), ErrContract, "%s: TryFreeChunk of %d handles = (%d, %v), want (0, pool.ErrClosed)", who, n, m, err)
	}
	err := snd.Free(h)
	require(errors.Is(err, pool.ErrClosed), ErrContract, "%s: Free = %v, want pool.ErrClosed", who, err)
	after := snd.Submitted()
	require(after == before, ErrAccounting, "%s: Submitted went from %d to %d with every send failing", who, before, after)
}

func checkClose(r *plRun) error {
	s, ctx := r.x, r.ctx
	n := capacityOf(s)
	bd, bounded := s.bounds()
	// Every byte of every block is the user's: writing it all is no
	// reason for Close to fail.
	all := make([]pool.Handle, n)
	mustOK("AllocChunk of every block", s.AllocChunk(all))
	for _, h := range all {
		b, err := s.Bytes(h)
		mustOK("Bytes", err)
		fill(b, 0xff)
	}
	mustOK("FreeChunk of every block", s.FreeChunk(all))
	hs := make([]pool.Handle, 4)
	mustOK("AllocChunk", s.AllocChunk(hs))
	h := hs[0]
	used, err := s.NewSender()
	mustOK("NewSender", err)
	k := room(s, 2)
	mustOK("sender FreeChunk", used.FreeChunk(hs[2:2+k])) // left pending
	idle, err := s.NewSender()
	mustOK("NewSender", err)
	mustOK("Close", s.Close())
	_, errAlloc := s.Alloc()
	_, _, errAllocBytes := s.AllocBytes()
	_, errBytes := s.Bytes(h)
	_, errDrain := s.Drain()
	_, errSender := s.NewSender()
	must(allFail(pool.ErrClosed, "after Close", []call{
		{"Alloc", errAlloc}, {"AllocBytes", errAllocBytes},
		{"AllocChunk of 0", s.AllocChunk(nil)}, {"AllocChunk of 1", s.AllocChunk(make([]pool.Handle, 1))},
		{"AllocChunk of 16", s.AllocChunk(make([]pool.Handle, 16))}, {"AllocChunk of the capacity", s.AllocChunk(make([]pool.Handle, n))},
		{"Free", s.Free(h)}, {"Free of a zero handle", s.Free(pool.Handle{})},
		{"FreeChunk of 0", s.FreeChunk(nil)}, {"FreeChunk of 1", s.FreeChunk(hs[:1])}, {"FreeChunk of 4", s.FreeChunk(hs)},
		{"Bytes", errBytes}, {"Drain", errDrain}, {"NewSender", errSender}, {"second Close", s.Close()},
	}))
	lengths := closeLengths(bd, bounded, r.longest())
	senderFails("after Close, a sender with frees pending", used, h, lengths)
	senderFails("after Close, an idle sender", idle, h, lengths)
	mustIn(identities(s.Stats()), "after Close, Stats")
	mustIn(identities(s.Snapshot()), "after Close, Snapshot")
	if !bounded {
		return nil
	}
	// A sender blocked on a full transport is released by the pool's
	// Close.
	o, err := r.another()
	must(err)
	snd, err := o.NewSender()
	mustOK("NewSender", err)
	filler, err := o.Alloc()
	mustOK("Alloc", err)
	fillTransport(snd, filler, bd, 0)
	one := []pool.Handle{filler}
	m, err := snd.TryFreeChunk(one)
	require(m == 0 && errors.Is(err, pool.ErrFull), ErrContract, "TryFreeChunk into a full transport = (%d, %v), want (0, pool.ErrFull)", m, err)
	// A per-handle queue gets a chunk longer than it holds: a Drain wakes
	// the sender, which blocks again, and Close must release it then too.
	long := one
	if !bd.Chunked {
		long = slices.Repeat(one, 2*bd.Capacity+1)
	}
	var c crew
	c.Go(func() error {
		err := snd.FreeChunk(long)
		require(err == nil || errors.Is(err, pool.ErrClosed), ErrContract, "a FreeChunk blocked on a full transport returned %v after the pool's Close, want nil or pool.ErrClosed", err)
		return nil
	})
	letBlock := func() {
		time.Sleep(2 * time.Millisecond)
		for range 100 {
			runtime.Gosched()
		}
	}
	letBlock()
	_, _ = o.Drain() // frees the filler once and rejects its copies
	letBlock()
	if err := o.Close(); err != nil {
		return errors.Join(violationf(ErrContract, "Close: %v", err), c.wait(ctx, "senders"))
	}
	for deadline := time.Now().Add(closeGrace); !c.finished(); {
		require(!time.Now().After(deadline), ErrDeadlock, "a sender blocked on a full transport was not released by the pool's Close within %v", closeGrace)
		time.Sleep(time.Millisecond)
	}
	return c.wait(ctx, "senders blocked on a full transport when the pool was closed were")
}

func checkSenderRetire(r *plRun) error {
	s, ctx := r.x, r.ctx
	bd, bounded := s.bounds()
	snds, err := several(2, "NewSender", s.NewSender)
	must(err)
	snd, other := snds[0], snds[1]
	// Leave more than a batch pending, then retire the sender.
	k := room(s, 40)
	hs := make([]pool.Handle, k)
	mustOK("AllocChunk", s.AllocChunk(hs))
	mustOK("sender FreeChunk", snd.FreeChunk(hs))
	sub := snd.Submitted()
	require(sub == uint64(k), ErrAccounting, "Submitted = %d after a FreeChunk of %d", sub, k)
	err = snd.Close()
	require(err == nil, ErrContract, "Sender.Close = %v, want nil", err)
	for range 3 {
		err := snd.Close()
		require(err == nil, ErrContract, "Sender.Close again = %v, want nil", err)
	}
	senderFails("after Sender.Close", snd, hs[0], closeLengths(bd, bounded, r.longest()))
	// The other sender still works, and what the retired one freed is
	// drained, once, and counted.
	h, err := s.Alloc()
	mustOK("Alloc", err)
	drained, reports, err := sendDraining(ctx, s, other, []pool.Handle{h})
	must(err)
	require(len(reports) == 0, ErrDuplicated, "drains of a retired sender's frees rejected handles: %v", reports)
	more, err := drainDry(ctx, s.Drain)
	must(err)
	drained += more
	require(drained == k+1, ErrLost, "drains freed %d blocks, a retired sender and another freed %d", drained, k+1)
	st := s.Stats()
	require(st.RemoteSubmitted == uint64(k+1) && st.RemoteDrained == uint64(k+1), ErrAccounting, "RemoteSubmitted %d, RemoteDrained %d, want %d each: a retired sender's frees still count", st.RemoteSubmitted, st.RemoteDrained, k+1)
	must(statsWant(s, 0, uint64(k+1), uint64(k+1), 0))
	// Per-request senders retire while the owner drains.
	mustIn(remoteExchange(ctx, s, true, 2), "senders retiring while the owner drains")
	return nil
}

func checkRetiredSenders(r *plRun) error {
	s, ctx := r.x, r.ctx
	bd, bounded := s.bounds()
	freed := 0 // blocks freed through the senders
	snds := make([]sender, retiredPerWave)
	wave := func(w int) error {
		for i := range snds {
			snd, err := s.NewSender()
			if err != nil {
				return violationf(ErrContract, "sender %d: NewSender: %v", w*retiredPerWave+i, err)
			}
			snds[i] = snd
			if i%4 == 3 { // an idle sender retires too
				if err := snd.Close(); err != nil {
					return violationf(ErrContract, "Sender.Close: %v", err)
				}
				continue
			}
			freed++
			h, err := s.Alloc()
			if errors.Is(err, pool.ErrExhausted) {
				return violationf(ErrLost, "wave %d: the pool is exhausted: blocks freed by retired senders never came back", w)
			} else if err != nil {
				return violationf(ErrContract, "Alloc: %v", err)
			}
			if err := snd.Free(h); err != nil {
				return violationf(ErrContract, "sender Free: %v", err)
			}
			if err := snd.Close(); err != nil {
				return violationf(ErrContract, "Sender.Close: %v", err)
			}
			if bounded && !bd.PerProducer {
				if _, err := drainDry(ctx, s.Drain); err != nil { // room in the shared queue
					return err
				}
			}
		}
		clear(snds)
		_, err := drainDry(ctx, s.Drain)
		return err
	}
	must(retention(ctx, "sender", wave))
	must(statsWant(s, 0, uint64(freed), uint64(freed), 0))
	st := s.Stats()
	require(st.RemoteSubmitted == uint64(freed) && st.RemoteDrained == uint64(freed), ErrAccounting, "%d retired senders freed one block each: RemoteSubmitted %d, RemoteDrained %d", freed, st.RemoteSubmitted, st.RemoteDrained)
	return nil
}

// fillTransport fills snd's queue of a bounded transport, leaving room for
// left items, with copies of filler: the pool's size does not limit how
// many handles a sender can send, and the drains free the first copy and
// reject the others.
func fillTransport(snd sender, filler pool.Handle, bd pool.Bounds, left int) {
	items := bd.Capacity - left
	if bd.Chunked {
		one := []pool.Handle{filler}
		for i := range items {
			m, err := snd.TryFreeChunk(one)
			require(m == 1 && err == nil, ErrContract, "TryFreeChunk of chunk item %d into a queue of %d = (%d, %v), want (1, nil)", i+1, bd.Capacity, m, err)
		}
		return
	}
	copies := make([]pool.Handle, items)
	for i := range copies {
		copies[i] = filler
	}
	m, err := snd.TryFreeChunk(copies)
	require(m == items && err == nil, ErrContract, "TryFreeChunk of %d handles into an empty queue of %d = (%d, %v), want (%d, nil)", items, bd.Capacity, m, err, items)
}
