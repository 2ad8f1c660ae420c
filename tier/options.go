package tier

import (
	"fmt"
	"runtime"
)

// Option configures a Manager.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	eviction func(slots int) Eviction
	adm      Admission
	workers  int
	maxJobs  int
}

// Defaults of a Manager.
const (
	// DefaultMaxJobs is the default limit on jobs in flight.
	DefaultMaxJobs = 4096
	// DefaultTrackerSize is how many missed keys a Manager counts lookups
	// of, for Admission.MinLookups, by default: vLLM's max_tracker_size.
	DefaultTrackerSize = 64000
)

// Admission decides which blocks a PrepareStore stores. The zero
// Admission stores every block that is not already present.
type Admission struct {
	// MinLookups stores a block only once Lookup has reported it missing
	// at least this many times (vLLM's store_threshold; disk tiers in the
	// field admit at 2). 0 and 1 store on first sight.
	MinLookups int
	// MaxPerRequest stores at most this many blocks per PrepareStore or
	// Store call (vLLM's per-request max_offload_tokens, in blocks); the
	// rest are not admitted. 0 is no limit.
	MaxPerRequest int
	// TrackerSize bounds the missed keys whose lookups are counted, oldest
	// forgotten first; 0 means DefaultTrackerSize.
	TrackerSize int
}

// WithEviction sets the eviction policy: newPolicy is called once, with
// the tier's number of slots. The default is NewLRU.
func WithEviction(newPolicy func(slots int) Eviction) Option {
	return optionFunc(func(c *config) { c.eviction = newPolicy })
}

// WithAdmission sets the admission rules (default: store everything).
func WithAdmission(a Admission) Option { return optionFunc(func(c *config) { c.adm = a }) }

// WithWorkers sets the number of copy workers that run Store and Load
// copies (default: GOMAXPROCS, at most 4). A disk tier gains from a few
// more (I/O waits); a host tier from no more than the memory channels.
func WithWorkers(n int) Option { return optionFunc(func(c *config) { c.workers = n }) }

// WithMaxJobs bounds the jobs in flight, prepared and not completed
// (default DefaultMaxJobs); past it Prepare*, Store and Load fail with
// ErrBusy.
func WithMaxJobs(n int) Option { return optionFunc(func(c *config) { c.maxJobs = n }) }

func newConfig(opts []Option) (config, error) {
	c := config{eviction: NewLRU, workers: min(runtime.GOMAXPROCS(0), 4), maxJobs: DefaultMaxJobs}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	switch {
	case c.eviction == nil:
		return c, fmt.Errorf("%w: tier: nil eviction constructor", errConfig)
	case c.workers < 1 || c.workers > 1024:
		return c, fmt.Errorf("%w: tier: %d workers, want 1 to 1024", errConfig, c.workers)
	case c.maxJobs < 1 || c.maxJobs > 1<<20:
		return c, fmt.Errorf("%w: tier: max jobs %d, want 1 to %d", errConfig, c.maxJobs, 1<<20)
	case c.adm.MinLookups < 0 || c.adm.MaxPerRequest < 0 || c.adm.TrackerSize < 0:
		return c, fmt.Errorf("%w: tier: negative admission setting %+v", errConfig, c.adm)
	}
	if c.adm.TrackerSize == 0 {
		c.adm.TrackerSize = DefaultTrackerSize
	}
	return c, nil
}
