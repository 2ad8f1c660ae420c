package shared

import "github.com/locus-go/locus/transport/internal/bounded"

// Defaults of New: a queue of 1024 handles, drained at most 64 at a time so
// that one Drain stays short however full the queue is.
const (
	// DefaultCapacity is how many handles the queue holds.
	DefaultCapacity = 1024
	// DefaultBatch is the most handles one Drain takes.
	DefaultBatch = 64
)

// MaxCapacity is the largest capacity New accepts. A queue slot takes 80
// bytes (a handle, a sequence number and padding against false sharing), so
// a queue of MaxCapacity handles takes 80 MiB.
const MaxCapacity = bounded.MaxCapacity

// MaxBatch is the largest batch New accepts.
const MaxBatch = bounded.MaxBatch

// Option configures New. Build options with WithCapacity and WithBatch; a
// later option overrides an earlier one of the same kind. A nil Option makes
// New fail with an error wrapping pool.ErrInvalidConfig.
type Option interface{ apply(*bounded.Config) }

type option func(*bounded.Config)

func (f option) apply(c *bounded.Config) { f(c) }

// WithCapacity sets how many handles the queue holds, 1 to MaxCapacity
// (default DefaultCapacity). A Send waits while the queue is full.
func WithCapacity(n int) Option {
	return option(func(c *bounded.Config) { c.SetCapacity(n) })
}

// WithBatch sets the most handles one Drain takes, 1 to MaxBatch (default
// DefaultBatch). A batch larger than the capacity is allowed: a Drain then
// keeps taking handles that producers add while it runs, up to the batch.
func WithBatch(n int) Option {
	return option(func(c *bounded.Config) { c.SetBatch(n) })
}

func defaults(bool) (capacity, batch int) { return DefaultCapacity, DefaultBatch }
