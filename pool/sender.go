package pool

import (
	"sync/atomic"

	"golang.org/x/sys/cpu"
)

// Sender frees blocks of one pool from a goroutine other than the owner: a
// worker that finished a request frees all its blocks with one FreeChunk. The
// owner gets them back at its next Drain (or when an Alloc finds the free list
// empty).
//
// A Sender belongs to one goroutine at a time; give each worker its own. Its
// calls are safe to make concurrently with the owner's calls and with other
// Senders. A FreeChunk that returns nil happens before the Drain that returns
// the blocks to the free list, so the owner sees every write the worker made
// to the blocks before freeing them (see https://go.dev/ref/mem).
//
// A Sender does not validate handles: it cannot read the owner's generations
// without synchronizing with it. The owner validates each handle when it
// drains and rejects bad ones without losing the good ones beside them
// (Drain reports them).
type Sender struct {
	_         cpu.CacheLinePad
	submitted atomic.Uint64 // written by this sender only, read by Stats
	prod      Producer
	try       TryProducer // prod, when it can refuse to wait
	closed    *atomic.Bool
	one       [1]Handle // Free's chunk, so that it does not allocate
	_         cpu.CacheLinePad
}

// FreeChunk frees the blocks of chunk. The caller may reuse chunk as soon as
// FreeChunk returns. On a bounded transport it waits while the transport is
// full. It fails with ErrClosed once the pool is closed.
func (s *Sender) FreeChunk(chunk []Handle) error {
	if s.closed.Load() {
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
	s.one[0] = h
	return s.FreeChunk(s.one[:])
}

// TryFreeChunk frees as many handles of chunk, from the front, as the
// transport takes without waiting and returns how many; the rest are still
// the caller's. It returns ErrFull when it could not free them all. On an
// unbounded transport it is FreeChunk.
func (s *Sender) TryFreeChunk(chunk []Handle) (int, error) {
	if s.try == nil {
		if err := s.FreeChunk(chunk); err != nil {
			return 0, err
		}
		return len(chunk), nil
	}
	if s.closed.Load() {
		return 0, ErrClosed
	}
	n := uint64(len(chunk))
	s.submitted.Add(n)
	sent, err := s.try.TrySend(chunk)
	s.submitted.Add(-(n - uint64(sent)))
	return sent, err
}

// Submitted returns how many handles this sender has handed to the transport.
func (s *Sender) Submitted() uint64 { return s.submitted.Load() }
