package pool

import (
	"sync"
	"sync/atomic"

	"golang.org/x/sys/cpu"
)

// Sender frees blocks of one pool from a goroutine other than the owner: a
// worker that finished a request frees all its blocks with one FreeChunk. The
// owner gets them back at its next Drain (or when an allocation finds the
// free list short).
//
// A Sender belongs to one goroutine at a time; give each worker its own, or
// make one per request and Close it when the request is done. Its calls are
// safe to make concurrently with the owner's calls and with other Senders. A
// FreeChunk that returns nil happens before the Drain that returns the blocks
// to the free list, so the owner sees every write the worker made to the
// blocks before freeing them (see https://go.dev/ref/mem).
//
// A Sender does not validate handles: it cannot read the owner's generations
// without synchronizing with it. The owner validates each handle when it
// drains and rejects bad ones without losing the good ones beside them
// (Drain reports them).
//
// The zero Sender and a nil *Sender are not usable (their calls return
// ErrClosed); make one with Pool.NewSender.
type Sender struct {
	_         cpu.CacheLinePad
	submitted atomic.Uint64 // written by this sender only, read by Stats
	prod      Producer
	try       TryProducer // prod, when it can refuse to wait
	set       *senders
	at        int       // index in set.live while registered; guarded by set.mu
	retired   bool      // Close was called; owned by the sender's goroutine
	one       [1]Handle // Free's chunk, so that it does not allocate
	_         cpu.CacheLinePad
}

// FreeChunk frees the blocks of chunk. The caller may reuse chunk as soon as
// FreeChunk returns. On a bounded transport it waits while the transport is
// full. It fails with ErrClosed once the pool or the sender is closed.
func (s *Sender) FreeChunk(chunk []Handle) error {
	if s.unusable() {
		return ErrClosed
	}
	if len(chunk) == 0 {
		return nil
	}
	n := uint64(len(chunk))
	// Count before publishing, so RemoteSubmitted >= RemoteDrained at every
	// instant the owner can observe.
	s.submitted.Add(n)
	if err := s.prod.Send(chunk); err != nil {
		s.submitted.Add(-n)
		return err
	}
	return nil
}

// Free frees one block; it is FreeChunk of a one-handle chunk.
func (s *Sender) Free(h Handle) error {
	if s == nil {
		return ErrClosed
	}
	s.one[0] = h
	return s.FreeChunk(s.one[:])
}

// TryFreeChunk frees as many handles of chunk, from the front, as the
// transport takes without waiting and returns how many; the rest are still
// the caller's. It returns ErrFull when it could not free them all. On an
// unbounded transport it is FreeChunk.
func (s *Sender) TryFreeChunk(chunk []Handle) (int, error) {
	if s == nil {
		return 0, ErrClosed
	}
	if s.try == nil {
		if err := s.FreeChunk(chunk); err != nil {
			return 0, err
		}
		return len(chunk), nil
	}
	if s.unusable() {
		return 0, ErrClosed
	}
	n := uint64(len(chunk))
	s.submitted.Add(n)
	sent, err := s.try.TrySend(chunk)
	sent = min(max(sent, 0), len(chunk)) // a transport's count, trusted only within the chunk
	s.submitted.Add(-(n - uint64(sent)))
	return sent, err
}

// Close retires the sender: its later calls fail with ErrClosed, what it
// freed before still reaches the owner's next drains, and the pool and its
// transport stop tracking it once that is delivered. Close a sender made for
// one request when the request is done; a sender kept per worker needs no
// Close (the pool's Close ends it). Close may be called more than once; later
// calls do nothing and return nil.
func (s *Sender) Close() error {
	if s == nil || s.set == nil || s.retired {
		return nil
	}
	s.retired = true
	err := s.prod.Close()
	s.set.retire(s)
	return err
}

// Submitted returns how many handles this sender has handed to the transport.
func (s *Sender) Submitted() uint64 {
	if s == nil {
		return 0
	}
	return s.submitted.Load()
}

// unusable reports whether the sender may not send: it is the zero Sender,
// or it or its pool is closed.
func (s *Sender) unusable() bool {
	return s == nil || s.set == nil || s.retired || s.set.closed.Load()
}

// senders is a pool's registry of its live senders, kept outside the generic
// Pool so that Sender needs no type parameters.
type senders struct {
	closed  atomic.Bool // the pool is closed; read by every send
	mu      sync.Mutex
	live    []*Sender
	retired uint64 // handles submitted by senders that have been closed
}

func (ss *senders) add(s *Sender) {
	ss.mu.Lock()
	s.at = len(ss.live)
	ss.live = append(ss.live, s)
	ss.mu.Unlock()
}

// retire forgets s, keeping its count, in constant time: the last sender
// takes its slot.
func (ss *senders) retire(s *Sender) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	last := len(ss.live) - 1
	moved := ss.live[last]
	ss.live[s.at], moved.at = moved, s.at
	ss.live[last] = nil
	ss.live = ss.live[:last]
	ss.retired += s.submitted.Load()
}

// submitted returns the handles submitted by every sender, live or retired.
func (ss *senders) submitted() uint64 {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	n := ss.retired
	for _, s := range ss.live {
		n += s.submitted.Load()
	}
	return n
}
