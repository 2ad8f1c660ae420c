package bounded

import (
	"fmt"

	"github.com/locus-go/locus/pool"
)

// The limits every bounded transport's options accept.
const (
	// MaxCapacity is the largest capacity of one queue, in items.
	MaxCapacity = 1 << 20
	// MaxBatch is the largest batch: the most items one Drain takes from
	// one queue. It keeps a Drain finite even when producers refill a
	// shared queue as fast as the owner empties it.
	MaxBatch = 1 << 20
)

// Config is what a bounded transport's options set. The options call the
// Set methods; Build applies them, fills in defaults and validates.
type Config struct {
	Capacity int  // items one queue holds
	Batch    int  // most items one Drain takes from one queue
	Chunks   bool // an item is a whole chunk

	given setting // the settings applied so far
}

type setting uint8

const (
	capacitySetting setting = 1 << iota
	batchSetting
	chunksSetting
)

// SetCapacity is what WithCapacity(n) does.
func (c *Config) SetCapacity(n int) {
	c.given |= capacitySetting
	c.Capacity = n
}

// SetBatch is what WithBatch(n) does.
func (c *Config) SetBatch(n int) {
	c.given |= batchSetting
	c.Batch = n
}

// SetChunks is what WithChunks() does.
func (c *Config) SetChunks() {
	c.given |= chunksSetting
	c.Chunks = true
}

// Defaults returns the capacity and batch a transport uses where no option
// sets them, given whether items are whole chunks.
type Defaults func(chunks bool) (capacity, batch int)

// Build applies opts in order (a later option overrides an earlier one of
// the same kind, so defaults can be followed by overrides), fills in what
// they left unset from defaults and validates the result. Every error wraps
// pool.ErrInvalidConfig and reads "pool: invalid configuration: <pkg>:
// <what>": a nil option, a capacity outside 1 to MaxCapacity, a batch
// outside 1 to MaxBatch.
//
// O is the transport's Option interface and apply calls its unexported
// method. A nil option is caught before it is called, and an option that
// panics (a nil func or interface wrapped in a non-nil Option) is reported as
// nil too.
func Build[O any](pkg string, opts []O, apply func(O, *Config), defaults Defaults) (Config, error) {
	var c Config
	for i, o := range opts {
		if any(o) == nil || !applied(o, &c, apply) {
			return Config{}, Invalid(pkg, "nil option at opts[%d]", i)
		}
	}
	capacity, batch := defaults(c.Chunks)
	if c.given&capacitySetting == 0 {
		c.Capacity = capacity
	}
	if c.given&batchSetting == 0 {
		c.Batch = batch
	}
	if c.Capacity < 1 || c.Capacity > MaxCapacity {
		return Config{}, Invalid(pkg, "capacity %d, want 1 to %d", c.Capacity, MaxCapacity)
	}
	if c.Batch < 1 || c.Batch > MaxBatch {
		return Config{}, Invalid(pkg, "batch %d, want 1 to %d", c.Batch, MaxBatch)
	}
	return c, nil
}

// applied applies o and reports whether it returned instead of panicking.
func applied[O any](o O, c *Config, apply func(O, *Config)) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	apply(o, c)
	return true
}

// Invalid returns an error wrapping pool.ErrInvalidConfig that reads
// "pool: invalid configuration: <pkg>: <what>".
func Invalid(pkg, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", pool.ErrInvalidConfig, pkg, fmt.Sprintf(format, args...))
}

// NoTransport is the error of a zero or nil Transport's NewProducer: it
// wraps pool.ErrInvalidConfig.
func NoTransport(pkg string) error {
	return Invalid(pkg, "zero or nil Transport; make one with New")
}

// NoProducer is the error of a zero or nil Producer's sends: it wraps
// pool.ErrClosed, as a producer that cannot send is a closed one.
func NoProducer(pkg string) error {
	return fmt.Errorf("%w: %s: zero or nil Producer; make one with Transport.NewProducer", pool.ErrClosed, pkg)
}
