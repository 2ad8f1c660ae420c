package shared

import (
	"fmt"

	"github.com/locus-go/locus/pool"
)

// Defaults of New: the record's shared per-handle queue (the locus_shared
// contender of LOCUS-EVAL v1 and the shared_per_handle path of 0354).
const (
	// DefaultCapacity is how many handles the queue holds.
	DefaultCapacity = 1024
	// DefaultBatch is the most handles one Drain takes.
	DefaultBatch = 64
)

// MaxCapacity is the largest capacity New accepts. A queue slot takes 80
// bytes (a handle, a sequence number and padding against false sharing), so
// a queue of MaxCapacity handles takes 80 MiB.
const MaxCapacity = 1 << 20

// Option configures New. Build options with WithCapacity and WithBatch.
type Option interface{ apply(*config) }

type config struct {
	capacity int
	batch    int
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithCapacity sets how many handles the queue holds, 1 to MaxCapacity
// (default DefaultCapacity). A Send waits while the queue is full.
func WithCapacity(n int) Option { return optionFunc(func(c *config) { c.capacity = n }) }

// WithBatch sets the most handles one Drain takes, at least 1 (default
// DefaultBatch). A batch larger than the capacity is allowed: a Drain then
// keeps taking handles that producers add while it runs, up to the batch.
func WithBatch(n int) Option { return optionFunc(func(c *config) { c.batch = n }) }

// newConfig applies opts over the defaults and validates the result.
func newConfig(opts []Option) (config, error) {
	cfg := config{capacity: DefaultCapacity, batch: DefaultBatch}
	for _, o := range opts {
		if o == nil {
			return cfg, fmt.Errorf("%w: shared: nil option", pool.ErrInvalidConfig)
		}
		o.apply(&cfg)
	}
	if cfg.capacity < 1 || cfg.capacity > MaxCapacity {
		return cfg, fmt.Errorf("%w: shared: capacity %d, want 1 to %d", pool.ErrInvalidConfig, cfg.capacity, MaxCapacity)
	}
	if cfg.batch < 1 {
		return cfg, fmt.Errorf("%w: shared: batch %d, want at least 1", pool.ErrInvalidConfig, cfg.batch)
	}
	return cfg, nil
}
