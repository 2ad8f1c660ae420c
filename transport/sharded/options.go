package sharded

import "github.com/locus-go/locus/transport/internal/bounded"

// Defaults of New. Capacity is per producer queue, because producers register
// one by one: to replay the record's per-handle runs at p producers (a total
// capacity of 256 split evenly), pass WithCapacity(256/p).
const (
	// DefaultCapacity is how many handles a per-handle queue holds: the
	// record's 256/p at p = 4 (design thread 0352).
	DefaultCapacity = 64
	// DefaultBatch is the most handles one Drain takes from a per-handle
	// queue (0352, 0353).
	DefaultBatch = 64
	// DefaultChunkCapacity is how many chunks a chunk queue holds: the
	// record's trace configuration (0354, 0357).
	DefaultChunkCapacity = 8
	// DefaultChunkBatch is the most chunks one Drain takes from a chunk
	// queue; in the record it always equals the capacity.
	DefaultChunkBatch = 8
)

// MaxCapacity is the largest per-queue capacity New accepts. A per-handle
// queue takes 16 bytes per item; a chunk queue takes a slice header per item
// plus the largest chunk it has carried in each slot.
const MaxCapacity = bounded.MaxCapacity

// MaxBatch is the largest batch New accepts. Any batch of at least the
// capacity makes a Drain empty every queue.
const MaxBatch = bounded.MaxBatch

// Option configures New. Build options with WithChunks, WithCapacity and
// WithBatch; a later option overrides an earlier one of the same kind. A nil
// Option makes New fail with an error wrapping pool.ErrInvalidConfig.
type Option interface{ apply(*bounded.Config) }

type option func(*bounded.Config)

func (f option) apply(c *bounded.Config) { f(c) }

// WithChunks makes every item a whole chunk, copied into a slot of the
// producer's queue by one enqueue (design thread 0353, the sharded_chunk path
// of 0354). Without it every handle is an item of its own (0352). It changes
// the default capacity and batch to DefaultChunkCapacity and
// DefaultChunkBatch.
func WithChunks() Option { return option((*bounded.Config).SetChunks) }

// WithCapacity sets how many items each producer's queue holds, 1 to
// MaxCapacity (default DefaultCapacity, or DefaultChunkCapacity with
// WithChunks). A Send waits while its queue is full.
func WithCapacity(n int) Option {
	return option(func(c *bounded.Config) { c.SetCapacity(n) })
}

// WithBatch sets the most items one Drain takes from each queue, 1 to
// MaxBatch (default DefaultBatch, or DefaultChunkBatch with WithChunks). A
// batch of at least the capacity means a Drain empties every queue.
func WithBatch(n int) Option {
	return option(func(c *bounded.Config) { c.SetBatch(n) })
}

func defaults(chunks bool) (capacity, batch int) {
	if chunks {
		return DefaultChunkCapacity, DefaultChunkBatch
	}
	return DefaultCapacity, DefaultBatch
}
