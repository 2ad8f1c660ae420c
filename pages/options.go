package pages

import (
	"fmt"
	"math"

	"github.com/locus-go/locus/pool"
)

// Content tags a run with what it holds: an index into the content types
// given to New with WithContentTypes (0 is the first). Without that option a
// Pool has one content type, DefaultContent, which is never evicted.
type Content uint8

// DefaultContent is content type 0.
const DefaultContent Content = 0

// MaxContentTypes is the most content types a Pool takes.
const MaxContentTypes = 16

// ContentType describes one kind of content: model weights, KV cache,
// activations, adapters. A Pool evicts only content that is Evictable, and
// among it the lowest Priority first.
type ContentType struct {
	// Name labels the type in stats and metrics.
	Name string
	// Priority orders eviction: runs of lower priority are evicted before
	// runs of higher priority, least recently unpinned first within one
	// priority. An allocation that cannot be placed may evict runs whose
	// priority is at most its own content's.
	Priority int
	// Evictable allows the Pool to evict unpinned runs of this type. Runs
	// of a type that is not evictable stay until they are freed.
	Evictable bool
}

// Fit is the placement strategy.
type Fit uint8

// The placement strategies.
const (
	// BestFit places a run in the smallest free run that holds it, which
	// keeps large free runs whole. It is the default.
	BestFit Fit = iota
	// FirstFit places a run in the lowest-addressed free run that holds
	// it: placement follows address order, which packs live runs toward
	// the start of the region. Both strategies run in bounded time (see
	// the package doc), but best fit is the faster one too: first fit
	// nearly always splits the free run it takes (two index updates and a
	// new boundary tag), where best fit often finds a run of exactly the
	// length asked for. Choose first fit for its placement, not for speed.
	FirstFit
)

// String returns "best-fit" or "first-fit".
func (f Fit) String() string {
	switch f {
	case BestFit:
		return "best-fit"
	case FirstFit:
		return "first-fit"
	}
	return fmt.Sprintf("Fit(%d)", uint8(f))
}

// EvictFunc is told of every run the Pool evicts, on the owner goroutine,
// before the run's pages are reused: the run is still valid during the call,
// so Bytes and Span work on it (to copy its contents elsewhere, say), and it
// is stale once the call returns. EvictFunc must not change the Pool: Alloc,
// Free, Pin, Unpin, Evict and Close fail with ErrInEviction during the call;
// the methods that only read (Bytes, Span, Content, Pins, Stats, Snapshot,
// ContentTypes, PageSize, Pages) work. (Snapshot on the owner's goroutine
// waits up to 100 ms unless the owner published in the last millisecond:
// read Stats there.)
type EvictFunc func(r Run, c Content)

// Option configures New. The options are the functions of this package that
// return one.
type Option interface{ apply(*config) error }

type config struct {
	fit      Fit
	types    []ContentType
	onEvict  EvictFunc
	high     float64
	low      float64
	setMarks bool
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// WithFit sets the placement strategy (default BestFit).
func WithFit(f Fit) Option {
	return optionFunc(func(c *config) error {
		if f != BestFit && f != FirstFit {
			return fmt.Errorf("%w: %v", pool.ErrInvalidConfig, f)
		}
		c.fit = f
		return nil
	})
}

// WithContentTypes sets the content types; a run's Content indexes this
// list. At most MaxContentTypes; a Pool with an evictable type needs
// WithEvictFunc, so that no run is evicted without its owner hearing of it.
func WithContentTypes(types ...ContentType) Option {
	return optionFunc(func(c *config) error {
		if len(types) == 0 || len(types) > MaxContentTypes {
			return fmt.Errorf("%w: %d content types, want 1 to %d", pool.ErrInvalidConfig, len(types), MaxContentTypes)
		}
		c.types = append([]ContentType(nil), types...)
		return nil
	})
}

// WithEvictFunc sets the function told of every eviction. It is required
// when a content type is evictable.
func WithEvictFunc(fn EvictFunc) Option {
	return optionFunc(func(c *config) error {
		if fn == nil {
			return fmt.Errorf("%w: nil EvictFunc", pool.ErrInvalidConfig)
		}
		c.onEvict = fn
		return nil
	})
}

// WithWatermarks turns on proactive eviction with hysteresis: when an
// allocation leaves at least high×Pages pages in use, the Pool evicts
// unpinned runs of evictable content, lowest priority and least recently
// unpinned first, until at most low×Pages pages are in use or nothing more
// can be evicted. The band between the two stops the Pool from evicting on
// every allocation. Both are fractions of capacity with 0 < low < high <= 1;
// without this option a Pool evicts only to place an allocation that does
// not fit.
func WithWatermarks(high, low float64) Option {
	return optionFunc(func(c *config) error {
		if math.IsNaN(high) || math.IsNaN(low) || !(0 < low && low < high && high <= 1) {
			return fmt.Errorf("%w: watermarks high %v low %v, want 0 < low < high <= 1", pool.ErrInvalidConfig, high, low)
		}
		c.high, c.low, c.setMarks = high, low, true
		return nil
	})
}
