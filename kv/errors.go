package kv

import "errors"

// Errors of a Manager, besides pool.ErrExhausted (not enough free and
// evictable blocks for an all-or-nothing request), pool.ErrInvalidArgument,
// pool.ErrInvalidConfig and pool.ErrClosed, which it shares with the pool.
// Match them with errors.Is.
var (
	// ErrInvalidSequence: the sequence id is zero, of another manager, or
	// stale: its sequence was released (a second release, or a release
	// by a second worker, is stale too).
	ErrInvalidSequence = errors.New("kv: invalid sequence")
	// ErrPinLimit: pinning would take the pinned blocks past the share of
	// the pool that WithMaxPinned allows.
	ErrPinLimit = errors.New("kv: pinned share of the pool exhausted")
)
