package classes

import (
	"golang.org/x/sys/cpu"

	"errors"
	"sync/atomic"

	"github.com/locus-go/locus/pool"
)

// Sender frees blocks of every class from a goroutine other than the owner:
// one pool.Sender per class behind one value. A worker that finished a
// request frees all its blocks, whatever their classes, with one
// FreeChunk; the owner gets them back at its next Drain.
//
// A Sender belongs to one goroutine at a time, like a pool.Sender, and has
// its guarantees: its calls are safe concurrently with the owner's and with
// other Senders, and a FreeChunk that returns nil happens before the Drain
// that returns its blocks to the free lists. Like a pool.Sender it does not
// validate block handles (the owner does when it drains), but it refuses
// handles whose class index names no class, which it cannot route.
//
// The zero Sender and a nil *Sender are not usable (their calls return
// pool.ErrClosed); make one with Pool.NewSender.
type Sender struct {
	// Each worker writes its own Sender on every call (parts, one): the
	// pads keep two workers' senders off one cache line.
	_        cpu.CacheLinePad
	per      []*pool.Sender
	parts    [][]pool.Handle // the chunk being split, one part per class
	rejected *atomic.Uint64  // the allocator's count of handles naming no class
	closed   *atomic.Bool    // the allocator's: closed
	one      [1]Handle
	retired  bool
	_        cpu.CacheLinePad
}

// FreeChunk frees the blocks of chunk: it splits the chunk by class and
// sends each class's part with one pool.Sender.FreeChunk. The caller may
// reuse chunk as soon as it returns. Handles naming no class are skipped,
// counted in the allocator's Stats.Rejected and reported in a
// *pool.RejectedError (matching ErrUnknownClass); the rest are sent. It
// fails with pool.ErrClosed once the allocator or the sender is closed.
// Steady-state calls allocate nothing: the per-class parts are reused.
func (s *Sender) FreeChunk(chunk []Handle) error {
	if s == nil || s.per == nil || s.retired || s.closed.Load() {
		return pool.ErrClosed
	}
	rej := rejection{}
	for _, h := range chunk {
		if h.class < uint32(len(s.parts)) {
			s.parts[h.class] = append(s.parts[h.class], h.block)
		} else {
			rej.add(1, h.block, ErrUnknownClass)
		}
	}
	var other error
	for k, part := range s.parts {
		if len(part) == 0 {
			continue
		}
		if err := s.per[k].FreeChunk(part); err != nil {
			other = errors.Join(other, err)
		}
		s.parts[k] = part[:0]
	}
	if rej.n > 0 {
		s.rejected.Add(uint64(rej.n))
	}
	if other != nil {
		return errors.Join(other, rej.err())
	}
	return rej.err()
}

// Free frees one block; it is FreeChunk of a one-handle chunk.
func (s *Sender) Free(h Handle) error {
	if s == nil {
		return pool.ErrClosed
	}
	s.one[0] = h
	return s.FreeChunk(s.one[:])
}

// Submitted returns how many handles this sender has handed to the
// transports, over all classes.
func (s *Sender) Submitted() uint64 {
	if s == nil {
		return 0
	}
	var n uint64
	for _, p := range s.per {
		n += p.Submitted()
	}
	return n
}

// Close retires the sender and its per-class senders: later calls fail with
// pool.ErrClosed, and what it freed before still reaches the owner's next
// drains. Close a sender made for one request when the request is done.
// Later calls do nothing and return nil.
func (s *Sender) Close() error {
	if s == nil || s.retired {
		return nil
	}
	s.retired = true
	var errs []error
	for _, p := range s.per {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}
