package sharded

import "github.com/locus-go/locus/transport/internal/bounded"

// Defaults of New. Capacity is per producer queue, because producers register
// one by one: to split a total capacity of c evenly over p producers, pass
// WithCapacity(c/p).
const (
	// DefaultCapacity is how many handles a per-handle queue holds: a
	// total of 256 split over 4 producers.
	DefaultCapacity = 64
	// DefaultBatch is the most handles one Drain takes from a per-handle
	// queue: the default capacity, so a Drain empties every queue.
	DefaultBatch = 64
	// DefaultChunkCapacity is how many chunks a chunk queue holds: eight
	// requests in flight per producer when each chunk is one request's
	// blocks.
	DefaultChunkCapacity = 8
	// DefaultChunkBatch is the most chunks one Drain takes from a chunk
	// queue: the default chunk capacity, so a Drain empties every queue.
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
// producer's queue by one enqueue, so a chunk costs one enqueue instead of
// one per handle. Without it every handle is an item of its own. It changes
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
