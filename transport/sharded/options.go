package sharded

import (
	"fmt"

	"github.com/locus-go/locus/pool"
)

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
const MaxCapacity = 1 << 20

// Option configures New. Build options with WithChunks, WithCapacity and
// WithBatch.
type Option interface{ apply(*config) }

type config struct {
	chunks   bool
	capacity int
	batch    int
	capSet   bool
	batchSet bool
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithChunks makes every item a whole chunk, copied into a slot of the
// producer's queue by one enqueue (design thread 0353, the sharded_chunk path
// of 0354). Without it every handle is an item of its own (0352). It changes
// the default capacity and batch to DefaultChunkCapacity and
// DefaultChunkBatch.
func WithChunks() Option { return optionFunc(func(c *config) { c.chunks = true }) }

// WithCapacity sets how many items each producer's queue holds, 1 to
// MaxCapacity (default DefaultCapacity, or DefaultChunkCapacity with
// WithChunks). A Send waits while its queue is full.
func WithCapacity(n int) Option {
	return optionFunc(func(c *config) { c.capacity, c.capSet = n, true })
}

// WithBatch sets the most items one Drain takes from each queue, at least 1
// (default DefaultBatch, or DefaultChunkBatch with WithChunks). A batch
// larger than the capacity means a Drain empties every queue.
func WithBatch(n int) Option {
	return optionFunc(func(c *config) { c.batch, c.batchSet = n, true })
}

// newConfig applies opts over the mode's defaults and validates the result.
func newConfig(opts []Option) (config, error) {
	var cfg config
	for _, o := range opts {
		if o == nil {
			return cfg, fmt.Errorf("%w: sharded: nil option", pool.ErrInvalidConfig)
		}
		o.apply(&cfg)
	}
	if !cfg.capSet {
		cfg.capacity = DefaultCapacity
		if cfg.chunks {
			cfg.capacity = DefaultChunkCapacity
		}
	}
	if !cfg.batchSet {
		cfg.batch = DefaultBatch
		if cfg.chunks {
			cfg.batch = DefaultChunkBatch
		}
	}
	if cfg.capacity < 1 || cfg.capacity > MaxCapacity {
		return cfg, fmt.Errorf("%w: sharded: capacity %d, want 1 to %d", pool.ErrInvalidConfig, cfg.capacity, MaxCapacity)
	}
	if cfg.batch < 1 {
		return cfg, fmt.Errorf("%w: sharded: batch %d, want at least 1", pool.ErrInvalidConfig, cfg.batch)
	}
	return cfg, nil
}
