package tier

import (
	"errors"

	"github.com/locus-go/locus/pool"
)

// Errors of a Manager and of the Storages in this module, besides
// pool.ErrInvalidArgument, pool.ErrInvalidConfig and pool.ErrClosed, which
// they share with the pool. Match them with errors.Is.
var (
	// ErrInvalidJob: the job is zero, forged, of another manager, or
	// already completed.
	ErrInvalidJob = errors.New("tier: invalid job")
	// ErrStaleJob: the job was issued before a Reset. Its slots are
	// reclaimed; nothing else is applied.
	ErrStaleJob = errors.New("tier: stale job (issued before reset)")
	// ErrNoSpace: PrepareStore refused: more blocks would have to be
	// evicted than are evictable. Nothing was evicted.
	ErrNoSpace = errors.New("tier: not enough evictable blocks")
	// ErrNotLoadable: PrepareLoad or Load was given a key that is not a
	// HIT (missing, or its store still pending). Nothing was pinned.
	ErrNotLoadable = errors.New("tier: block not loadable")
	// ErrBusy: the jobs in flight reached the manager's limit
	// (WithMaxJobs). Drain and retry.
	ErrBusy = errors.New("tier: too many jobs in flight")
	// ErrCorrupt: a storage found a slot torn, stale or corrupt (its
	// header, key, generation or checksum does not match). The block is
	// never served; the manager drops it.
	ErrCorrupt = errors.New("tier: corrupt block")
)

// Short names for the pool errors this package returns.
var (
	errArg    = pool.ErrInvalidArgument
	errConfig = pool.ErrInvalidConfig
	errClosed = pool.ErrClosed
)
