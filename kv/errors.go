package kv

import (
	"errors"
	"fmt"

	"github.com/locus-go/locus/pool"
)

// Errors of a Manager. Match them with errors.Is. The pool's errors that a
// Manager returns are re-exported here, so a kv user needs to import only
// kv: each is the pool's own value, and errors.Is matches either name.
var (
	// ErrExhausted: not enough free and evictable blocks for an
	// all-or-nothing request (see ExhaustedError). It is pool.ErrExhausted.
	ErrExhausted = pool.ErrExhausted
	// ErrInvalidArgument: an argument out of range (a token index past the
	// sequence, a negative count). It is pool.ErrInvalidArgument.
	ErrInvalidArgument = pool.ErrInvalidArgument
	// ErrInvalidConfig: an option out of range at New. It is
	// pool.ErrInvalidConfig.
	ErrInvalidConfig = pool.ErrInvalidConfig
	// ErrClosed: the manager (or its pool) is closed. It is pool.ErrClosed.
	ErrClosed = pool.ErrClosed
)

// Errors about sequence ids. Each of ErrUnknownSequence, ErrStaleSequence
// and ErrForeignSequence also matches ErrInvalidSequence, so a caller that
// does not care why matches that one.
var (
	// ErrInvalidSequence: the sequence id is not one of a live sequence of
	// this manager, for one of the reasons below.
	ErrInvalidSequence = errors.New("kv: invalid sequence")
	// ErrUnknownSequence: the id is zero, or this manager never issued it
	// (a forged or corrupted id).
	ErrUnknownSequence = fmt.Errorf("%w: unknown id", ErrInvalidSequence)
	// ErrStaleSequence: the id's sequence has ended: it was released or
	// preempted. A second release, or a release by a second worker, is
	// stale.
	ErrStaleSequence = fmt.Errorf("%w: stale id (released or preempted)", ErrInvalidSequence)
	// ErrForeignSequence: the id belongs to another manager.
	ErrForeignSequence = fmt.Errorf("%w: id of another manager", ErrInvalidSequence)
)

var (
	// ErrPinLimit: pinning would take the pinned blocks past the share of
	// the pool that WithMaxPinned allows.
	ErrPinLimit = errors.New("kv: pinned share of the pool exhausted")
	// ErrTooLarge: the request would make a sequence occupy more blocks
	// than the whole pool has, so it can never succeed, however many
	// sequences finish (vLLM's AllocStatus.NEVER). An error that matches
	// it also matches pool.ErrExhausted. Shorten the request or reject it;
	// do not retry it.
	ErrTooLarge = errors.New("kv: request larger than the pool")
	// ErrOutsideWindow: the token lies in a block that a sliding-window
	// sequence (WithSlidingWindow) has released because every token after
	// it attends past it; the sequence no longer holds its KV.
	ErrOutsideWindow = errors.New("kv: token outside the sliding window")
)

// ExhaustedError is the error of an all-or-nothing request (Admit, Append,
// Reserve, Accept) that the free and evictable blocks cannot cover. It
// changed nothing. It matches pool.ErrExhausted, and ErrTooLarge too when
// Blocks exceeds Capacity; errors.As gives the counts, which say how many
// blocks must come back (Need - Available) before a retry can succeed.
//
// It is built only on failure, so a scheduler that asks CanAdmit first
// allocates nothing; one that uses failed admissions as its admission
// check pays one small allocation per refusal.
type ExhaustedError struct {
	// Blocks is how many blocks the sequence would occupy in all.
	Blocks int
	// Need is how many of them the request must allocate (the rest it
	// holds already or reuses from the prefix cache).
	Need int
	// Available is how many blocks the request could take now: free
	// ones, and cached ones it may evict.
	Available int
	// Capacity is the pool's size in blocks.
	Capacity int
}

// Error describes the shortfall.
func (e *ExhaustedError) Error() string {
	if e.Never() {
		return fmt.Sprintf("kv: request larger than the pool: %d blocks, the pool has %d", e.Blocks, e.Capacity)
	}
	return fmt.Sprintf("%v: need %d blocks, %d available (of %d)", pool.ErrExhausted, e.Need, e.Available, e.Capacity)
}

// Never reports whether the request can never succeed: it needs more
// blocks than the pool has.
func (e *ExhaustedError) Never() bool { return e.Blocks > e.Capacity }

// Is makes the error match pool.ErrExhausted, and ErrTooLarge when Never.
func (e *ExhaustedError) Is(target error) bool {
	return target == pool.ErrExhausted || (target == ErrTooLarge && e.Never())
}

// errBadPool is a BlockPool that broke its contract (a block outside its
// capacity, or one handed out twice); it matches pool.ErrInvalidHandle.
var errBadPool = fmt.Errorf("misbehaving block pool: %w", pool.ErrInvalidHandle)
