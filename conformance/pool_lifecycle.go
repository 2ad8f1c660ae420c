package conformance

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/locus-go/locus/pool"
)

// senderFails checks that every send path of snd fails with pool.ErrClosed
// at every length of lengths, and that its Submitted count does not move.
func senderFails(who string, snd sender, h pool.Handle, lengths []int) error {
	before := snd.Submitted()
	for _, n := range lengths {
		chunk := slices.Repeat([]pool.Handle{h}, n)
		if err := snd.FreeChunk(chunk); !errors.Is(err, pool.ErrClosed) {
			return violationf(ErrContract, "%s: FreeChunk of %d handles = %v, want pool.ErrClosed", who, n, err)
		}
		if m, err := snd.TryFreeChunk(chunk); m != 0 || !errors.Is(err, pool.ErrClosed) {
			return violationf(ErrContract, "%s: TryFreeChunk of %d handles = (%d, %v), want (0, pool.ErrClosed)", who, n, m, err)
		}
	}
	if err := snd.Free(h); !errors.Is(err, pool.ErrClosed) {
		return violationf(ErrContract, "%s: Free = %v, want pool.ErrClosed", who, err)
	}
	if after := snd.Submitted(); after != before {
		return violationf(ErrAccounting, "%s: Submitted went from %d to %d with every send failing", who, before, after)
	}
	return nil
}

func checkClose(r *plRun) error {
	s, ctx := r.x, r.ctx
	n := capacityOf(s)
	bd, bounded := s.bounds()
	// Every byte of every block is the user's: writing it all is no
	// reason for Close to fail.
	all := make([]pool.Handle, n)
	if err := s.AllocChunk(all); err != nil {
		return violationf(ErrContract, "AllocChunk of every block: %v", err)
	}
	for _, h := range all {
		b, err := s.Bytes(h)
		if err != nil {
			return violationf(ErrContract, "Bytes: %v", err)
		}
		fill(b, 0xff)
	}
	if err := s.FreeChunk(all); err != nil {
		return violationf(ErrContract, "FreeChunk of every block: %v", err)
	}
	hs := make([]pool.Handle, 4)
	if err := s.AllocChunk(hs); err != nil {
		return violationf(ErrContract, "AllocChunk: %v", err)
	}
	h := hs[0]
	used, err := s.NewSender()
	if err != nil {
		return violationf(ErrContract, "NewSender: %v", err)
	}
	k := room(s, 2)
	if err := used.FreeChunk(hs[2 : 2+k]); err != nil { // left pending
		return violationf(ErrContract, "sender FreeChunk: %v", err)
	}
	idle, err := s.NewSender()
	if err != nil {
		return violationf(ErrContract, "NewSender: %v", err)
	}
	if err := s.Close(); err != nil {
		return violationf(ErrContract, "Close: %v", err)
	}
	_, errAlloc := s.Alloc()
	_, _, errAllocBytes := s.AllocBytes()
	_, errBytes := s.Bytes(h)
	_, errDrain := s.Drain()
	_, errSender := s.NewSender()
	if err := allFail(pool.ErrClosed, "after Close", []call{
		{"Alloc", errAlloc}, {"AllocBytes", errAllocBytes},
		{"AllocChunk of 0", s.AllocChunk(nil)}, {"AllocChunk of 1", s.AllocChunk(make([]pool.Handle, 1))},
		{"AllocChunk of 16", s.AllocChunk(make([]pool.Handle, 16))}, {"AllocChunk of the capacity", s.AllocChunk(make([]pool.Handle, n))},
		{"Free", s.Free(h)}, {"Free of a zero handle", s.Free(pool.Handle{})},
		{"FreeChunk of 0", s.FreeChunk(nil)}, {"FreeChunk of 1", s.FreeChunk(hs[:1])}, {"FreeChunk of 4", s.FreeChunk(hs)},
		{"Bytes", errBytes}, {"Drain", errDrain}, {"NewSender", errSender}, {"second Close", s.Close()},
	}); err != nil {
		return err
	}
	lengths := closeLengths(bd, bounded, r.longest())
	if err := senderFails("after Close, a sender with frees pending", used, h, lengths); err != nil {
		return err
	}
	if err := senderFails("after Close, an idle sender", idle, h, lengths); err != nil {
		return err
	}
	if err := identities(s.Stats()); err != nil {
		return fmt.Errorf("after Close, Stats: %w", err)
	}
	if err := identities(s.Snapshot()); err != nil {
		return fmt.Errorf("after Close, Snapshot: %w", err)
	}
	if !bounded {
		return nil
	}
	// A sender blocked on a full transport is released by the pool's
	// Close.
	o, err := r.another()
	if err != nil {
		return err
	}
	snd, err := o.NewSender()
	if err != nil {
		return violationf(ErrContract, "NewSender: %v", err)
	}
	filler, err := o.Alloc()
	if err != nil {
		return violationf(ErrContract, "Alloc: %v", err)
	}
	if err := fillTransport(snd, filler, bd, 0); err != nil {
		return err
	}
	one := []pool.Handle{filler}
	if m, err := snd.TryFreeChunk(one); m != 0 || !errors.Is(err, pool.ErrFull) {
		return violationf(ErrContract, "TryFreeChunk into a full transport = (%d, %v), want (0, pool.ErrFull)", m, err)
	}
	// A per-handle queue gets a chunk longer than it holds: a Drain wakes
	// the sender, which blocks again, and Close must release it then too.
	long := one
	if !bd.Chunked {
		long = slices.Repeat(one, 2*bd.Capacity+1)
	}
	var c crew
	c.Go(func() error {
		if err := snd.FreeChunk(long); err != nil && !errors.Is(err, pool.ErrClosed) {
			return violationf(ErrContract, "a FreeChunk blocked on a full transport returned %v after the pool's Close, want nil or pool.ErrClosed", err)
		}
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
		if time.Now().After(deadline) {
			return violationf(ErrDeadlock, "a sender blocked on a full transport was not released by the pool's Close within %v", closeGrace)
		}
		time.Sleep(time.Millisecond)
	}
	return c.wait(ctx, "senders blocked on a full transport when the pool was closed were")
}

func checkSenderRetire(r *plRun) error {
	s, ctx := r.x, r.ctx
	bd, bounded := s.bounds()
	snds, err := several(2, "NewSender", s.NewSender)
	if err != nil {
		return err
	}
	snd, other := snds[0], snds[1]
	// Leave more than a batch pending, then retire the sender.
	k := room(s, 40)
	hs := make([]pool.Handle, k)
	if err := s.AllocChunk(hs); err != nil {
		return violationf(ErrContract, "AllocChunk: %v", err)
	}
	if err := snd.FreeChunk(hs); err != nil {
		return violationf(ErrContract, "sender FreeChunk: %v", err)
	}
	if sub := snd.Submitted(); sub != uint64(k) {
		return violationf(ErrAccounting, "Submitted = %d after a FreeChunk of %d", sub, k)
	}
	if err := snd.Close(); err != nil {
		return violationf(ErrContract, "Sender.Close = %v, want nil", err)
	}
	for range 3 {
		if err := snd.Close(); err != nil {
			return violationf(ErrContract, "Sender.Close again = %v, want nil", err)
		}
	}
	if err := senderFails("after Sender.Close", snd, hs[0], closeLengths(bd, bounded, r.longest())); err != nil {
		return err
	}
	// The other sender still works, and what the retired one freed is
	// drained, once, and counted.
	h, err := s.Alloc()
	if err != nil {
		return violationf(ErrContract, "Alloc: %v", err)
	}
	drained, reports, err := sendDraining(ctx, s, other, []pool.Handle{h})
	if err != nil {
		return err
	}
	if len(reports) > 0 {
		return violationf(ErrDuplicated, "drains of a retired sender's frees rejected handles: %v", reports)
	}
	more, err := drainDry(ctx, s.Drain)
	if err != nil {
		return err
	}
	drained += more
	if drained != k+1 {
		return violationf(ErrLost, "drains freed %d blocks, a retired sender and another freed %d", drained, k+1)
	}
	if st := s.Stats(); st.RemoteSubmitted != uint64(k+1) || st.RemoteDrained != uint64(k+1) {
		return violationf(ErrAccounting, "RemoteSubmitted %d, RemoteDrained %d, want %d each: a retired sender's frees still count", st.RemoteSubmitted, st.RemoteDrained, k+1)
	}
	if err := statsWant(s, 0, uint64(k+1), uint64(k+1), 0); err != nil {
		return err
	}
	// Per-request senders retire while the owner drains.
	if err := remoteExchange(ctx, s, true, 2); err != nil {
		return fmt.Errorf("senders retiring while the owner drains: %w", err)
	}
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
	if err := retention(ctx, "sender", wave); err != nil {
		return err
	}
	if err := statsWant(s, 0, uint64(freed), uint64(freed), 0); err != nil {
		return err
	}
	if st := s.Stats(); st.RemoteSubmitted != uint64(freed) || st.RemoteDrained != uint64(freed) {
		return violationf(ErrAccounting, "%d retired senders freed one block each: RemoteSubmitted %d, RemoteDrained %d", freed, st.RemoteSubmitted, st.RemoteDrained)
	}
	return nil
}

// fillTransport fills snd's queue of a bounded transport, leaving room for
// left items, with copies of filler: the pool's size does not limit how
// many handles a sender can send, and the drains free the first copy and
// reject the others.
func fillTransport(snd sender, filler pool.Handle, bd pool.Bounds, left int) error {
	items := bd.Capacity - left
	if bd.Chunked {
		one := []pool.Handle{filler}
		for i := range items {
			if m, err := snd.TryFreeChunk(one); m != 1 || err != nil {
				return violationf(ErrContract, "TryFreeChunk of chunk item %d into a queue of %d = (%d, %v), want (1, nil)", i+1, bd.Capacity, m, err)
			}
		}
		return nil
	}
	copies := make([]pool.Handle, items)
	for i := range copies {
		copies[i] = filler
	}
	if m, err := snd.TryFreeChunk(copies); m != items || err != nil {
		return violationf(ErrContract, "TryFreeChunk of %d handles into an empty queue of %d = (%d, %v), want (%d, nil)", items, bd.Capacity, m, err, items)
	}
	return nil
}
