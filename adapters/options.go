package adapters

import (
	"fmt"
	"time"

	"github.com/locus-go/locus/internal/typednil"
	"github.com/locus-go/locus/tier"
)

// The defaults of a Manager, from ADR-006 and the field.
const (
	// DefaultPromoteAccesses and DefaultWindow are the ADR's promotion
	// rule: an adapter acquired at least 10 times within 60 s is hot-worthy.
	DefaultPromoteAccesses = 10
	DefaultWindow          = 60 * time.Second
	// DefaultMaxPin bounds Pin's duration.
	DefaultMaxPin = 10 * time.Minute
	// DefaultWarmPageSize is the page size of the warm region.
	DefaultWarmPageSize = 64 << 10
	// DefaultWorkers is the number of Prefetch copy workers.
	DefaultWorkers = 1
	// DefaultMaxInflight bounds the prefetches in flight.
	DefaultMaxInflight = 64
)

// Option configures New. The options are the functions of this package
// that return one.
type Option interface{ apply(*config) error }

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	hotSlots      int
	hotBytes      int64
	warmBytes     int64
	warmSlots     int
	warmPage      int
	quant         Quant
	compressAfter time.Duration
	promote       int
	window        time.Duration
	hotIdle       time.Duration
	maxPin        time.Duration
	clock         func() time.Time
	policy        Policy
	workers       int
	inflight      int
	cold          *tier.Manager
	admitAfter    int
}

func defaults() config {
	return config{
		warmPage: DefaultWarmPageSize, promote: DefaultPromoteAccesses, window: DefaultWindow,
		hotIdle: DefaultWindow, maxPin: DefaultMaxPin, clock: time.Now, policy: Window{},
		workers: DefaultWorkers, inflight: DefaultMaxInflight,
	}
}

// WithHotBudget caps the hot tier at slots adapters (vLLM's max_loras) and
// bytes bytes of pages (LoRAX's memory fraction, as bytes); 0 leaves a cap
// off, and the pages region is then the only bound. Loading past a cap
// demotes the lowest-ranked adapters that are neither held nor pinned.
func WithHotBudget(slots int, bytes int64) Option {
	return optionFunc(func(c *config) error {
		if slots < 0 || bytes < 0 {
			return fmt.Errorf("%w: adapters: hot budget %d slots, %d bytes", errConfig, slots, bytes)
		}
		c.hotSlots, c.hotBytes = slots, bytes
		return nil
	})
}

// WithWarm turns on the warm tier: a host-memory region of bytes bytes (a
// Go-heap region cut into pages of pageSize bytes, 0 for
// DefaultWarmPageSize) holding copies of demoted adapters, at most slots
// of them (vLLM's max_cpu_loras; 0: no slot cap). Without it a demoted
// adapter goes straight back to cold and its next load reads its Loader.
func WithWarm(bytes int64, slots, pageSize int) Option {
	return optionFunc(func(c *config) error {
		if pageSize == 0 {
			pageSize = DefaultWarmPageSize
		}
		if bytes <= 0 || slots < 0 || pageSize < 0 || bytes/int64(pageSize) < 1 || bytes > maxRegion {
			return fmt.Errorf("%w: adapters: warm tier of %d bytes, %d slots, pages of %d", errConfig, bytes, slots, pageSize)
		}
		c.warmBytes, c.warmSlots, c.warmPage = bytes, slots, pageSize
		return nil
	})
}

// maxRegion bounds the warm region so its size fits an int on 32-bit
// platforms too.
const maxRegion = 1<<31 - 1

// WithQuantization stores warm copies as int8 with absmax scales (see
// Quant for the layout and the error bound), dequantized on promotion:
// half the warm bytes and half the bytes moved per promotion, at the cost
// of the stated error. Copies are first kept exact and compressed once the
// adapter has been idle for after (0: compressed at demotion). Off by
// default: warm copies are exact. Adapters whose weights hold an infinity
// or NaN stay exact (Stats.QuantRefused).
func WithQuantization(q Quant, after time.Duration) Option {
	return optionFunc(func(c *config) error {
		if !q.valid() || after < 0 {
			return fmt.Errorf("%w: adapters: quantization %+v after %v", errConfig, q, after)
		}
		c.quant, c.compressAfter = q, after
		return nil
	})
}

// WithPromotion sets the access-window rule: an adapter acquired at least
// accesses times within window is hot-worthy, ranks above every adapter
// that is not, and is promoted back to hot by Tick if it was demoted
// (defaults DefaultPromoteAccesses, DefaultWindow). idle is how long a
// loaded adapter that is not hot-worthy stays hot unused before Tick
// demotes it (default: the window).
func WithPromotion(accesses int, window, idle time.Duration) Option {
	return optionFunc(func(c *config) error {
		if accesses < 1 || accesses > 1<<16 || window <= 0 || idle <= 0 {
			return fmt.Errorf("%w: adapters: promotion %d accesses in %v, idle %v", errConfig, accesses, window, idle)
		}
		c.promote, c.window, c.hotIdle = accesses, window, idle
		return nil
	})
}

// WithMaxPin sets the longest duration Pin accepts (default DefaultMaxPin).
func WithMaxPin(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: adapters: max pin %v", errConfig, d)
		}
		c.maxPin = d
		return nil
	})
}

// WithClock sets the clock (default time.Now): tests inject a fake one to
// drive windows, idle thresholds and pin expiry deterministically.
func WithClock(now func() time.Time) Option {
	return optionFunc(func(c *config) error {
		if now == nil {
			return fmt.Errorf("%w: adapters: nil clock", errConfig)
		}
		c.clock = now
		return nil
	})
}

// WithPolicy sets the ranking that picks which adapter to demote (default
// Window): LRU and FIFO are vLLM's and SGLang's, SizeAware prefers to keep
// small, busy adapters.
func WithPolicy(p Policy) Option {
	return optionFunc(func(c *config) error {
		if typednil.Is(p) {
			return fmt.Errorf("%w: adapters: nil policy", errConfig)
		}
		c.policy = p
		return nil
	})
}

// WithWorkers sets the number of copy workers that run Prefetch loads
// (default DefaultWorkers) and the most prefetches in flight (default
// DefaultMaxInflight).
func WithWorkers(workers, inflight int) Option {
	return optionFunc(func(c *config) error {
		if workers < 1 || workers > 256 || inflight < 1 || inflight > 1<<16 {
			return fmt.Errorf("%w: adapters: %d workers, %d in flight", errConfig, workers, inflight)
		}
		c.workers, c.inflight = workers, inflight
		return nil
	})
}
