package pool

import (
	"errors"
	"fmt"
)

// Errors returned by pools and components. Match them with errors.Is. The
// handle errors are pre-allocated, so that a Free or Bytes that rejects its
// handle allocates nothing; a chunk with rejected handles (FreeChunk, Drain)
// is reported in one *RejectedError, one allocation.
var (
	// ErrInvalidHandle matches every handle rejection below.
	ErrInvalidHandle = errors.New("pool: invalid handle")
	// ErrZeroHandle: the zero Handle was passed.
	ErrZeroHandle error = &handleError{"pool: zero handle"}
	// ErrForeignHandle: the handle was issued by another pool.
	ErrForeignHandle error = &handleError{"pool: handle of another pool"}
	// ErrOutOfRange: the handle's index is not a block of this pool.
	ErrOutOfRange error = &handleError{"pool: handle index out of range"}
	// ErrStaleHandle: the handle's block was freed since it was issued
	// (a double free, or a use after free or after reuse).
	ErrStaleHandle error = &handleError{"pool: stale handle"}

	// ErrExhausted: no block is free, even after draining pending remote frees.
	ErrExhausted = errors.New("pool: exhausted")
	// ErrClosed: the pool or transport is closed.
	ErrClosed = errors.New("pool: closed")
	// ErrFull: a bounded transport has no room and the caller asked not to wait.
	ErrFull = errors.New("pool: transport full")
	// ErrInvalidConfig: a constructor was given a configuration it cannot build.
	ErrInvalidConfig = errors.New("pool: invalid configuration")
	// ErrInvalidArgument: a method was given an argument outside its domain.
	ErrInvalidArgument = errors.New("pool: invalid argument")
)

type handleError struct{ msg string }

func (e *handleError) Error() string        { return e.msg }
func (e *handleError) Is(target error) bool { return target == ErrInvalidHandle }

// RejectedError reports the handles of a chunk that a pool refused: in a local
// FreeChunk, or in the remote frees of a Drain. The good handles beside them
// were freed. errors.Is(err, ErrStaleHandle) and the like match the first
// rejection's reason.
type RejectedError struct {
	// Rejected is how many handles were refused.
	Rejected int
	// First is the first handle refused.
	First Handle
	// Err is why First was refused: one of the handle errors.
	Err error
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("%v: %s (%d handle(s) rejected)", e.Err, e.First, e.Rejected)
}

// Unwrap returns the first rejection's reason.
func (e *RejectedError) Unwrap() error { return e.Err }
