package conformance

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/backing/mmap"
	"github.com/locus-go/locus/internal/race"
	"github.com/locus-go/locus/policy/fifo"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
	"github.com/locus-go/locus/transport/sharded"
	"github.com/locus-go/locus/transport/shared"
)

// The in-tree components pass every case, and skip exactly the cases that
// do not apply to them; broken_test.go checks that broken ones fail.

// unboundedSkips are the cases an unbounded transport skips.
var unboundedSkips = []string{"Bounds", "Capacity", "BatchLimit", "CloseReleasesBlocked"}

// wantOutcomes checks that outs holds no violation and that the cases
// skipped are skips, plus ZeroAllocs under the race detector.
func wantOutcomes(t *testing.T, outs []outcome, skips ...string) {
	t.Helper()
	var skipped []string
	for _, o := range outs {
		if race.Enabled && o.name == "ZeroAllocs" {
			skips = append(skips, o.name)
		}
		if o.err != nil {
			t.Error(o.err)
		}
		if o.skip != "" {
			skipped = append(skipped, o.name)
		}
	}
	slices.Sort(skipped)
	slices.Sort(skips)
	if !slices.Equal(skipped, skips) {
		t.Errorf("skipped %v, want %v", skipped, skips)
	}
}

func TestInTreeTransports(t *testing.T) {
	for name, c := range map[string]struct {
		newT  func() (pool.Transport, error)
		skips []string
	}{
		"mailbox":            {func() (pool.Transport, error) { return mailbox.New(), nil }, unboundedSkips},
		"mailbox zero value": {func() (pool.Transport, error) { return new(mailbox.Transport), nil }, unboundedSkips},
		"sharded":            {func() (pool.Transport, error) { return sharded.New() }, nil},
		"sharded tiny": {func() (pool.Transport, error) {
			return sharded.New(sharded.WithCapacity(4), sharded.WithBatch(2))
		}, nil},
		"sharded chunks": {func() (pool.Transport, error) { return sharded.New(sharded.WithChunks()) }, nil},
		"sharded chunks tiny": {func() (pool.Transport, error) {
			return sharded.New(sharded.WithChunks(), sharded.WithCapacity(1), sharded.WithBatch(1))
		}, nil},
		"shared": {func() (pool.Transport, error) { return shared.New() }, nil},
		"shared tiny": {func() (pool.Transport, error) {
			return shared.New(shared.WithCapacity(4), shared.WithBatch(2))
		}, nil},
		"shared of one": {func() (pool.Transport, error) {
			return shared.New(shared.WithCapacity(1), shared.WithBatch(1))
		}, nil},
		// A batch larger than the capacity: one Drain empties a queue.
		"sharded wide": {func() (pool.Transport, error) {
			return sharded.New(sharded.WithCapacity(4), sharded.WithBatch(16))
		}, nil},
		"sharded chunks wide": {func() (pool.Transport, error) {
			return sharded.New(sharded.WithChunks(), sharded.WithCapacity(2), sharded.WithBatch(5))
		}, nil},
		"shared wide": {func() (pool.Transport, error) {
			return shared.New(shared.WithCapacity(8), shared.WithBatch(32))
		}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			s := transportSuite()
			if strings.Contains(name, " ") {
				// The variants (tiny, wide, ...) try the bounds, at light
				// volume; the defaults get the full suite.
				s = s.lite()
			}
			wantOutcomes(t, s.run(c.newT, "conformance_test.go"), c.skips...)
		})
	}
}

func TestInTreeBackings(t *testing.T) {
	t.Run("heap", func(t *testing.T) {
		wantOutcomes(t, backingSuite().run(func() (pool.Backing, error) { return heap.New(4096, 64) }, "conformance_test.go"))
	})
	t.Run("mmap", func(t *testing.T) {
		b, err := mmap.New(4096, 64)
		if err != nil {
			t.Skipf("no mapped backing here: %v", err)
		}
		_ = b.Close()
		wantOutcomes(t, backingSuite().run(func() (pool.Backing, error) { return mmap.New(4096, 64) }, "conformance_test.go"))
	})
}

func TestInTreePolicies(t *testing.T) {
	for name, p := range map[string]pool.ReusePolicy{"lifo": lifo.Policy{}, "fifo": fifo.Policy{}} {
		t.Run(name, func(t *testing.T) {
			wantOutcomes(t, policySuite().run(func() (pool.ReusePolicy, error) { return p, nil }, "conformance_test.go"))
		})
	}
}

func TestInTreePools(t *testing.T) {
	transports := map[string]func() (pool.Transport, error){
		"mailbox": func() (pool.Transport, error) { return mailbox.New(), nil },
		"sharded tiny": func() (pool.Transport, error) {
			return sharded.New(sharded.WithCapacity(4), sharded.WithBatch(2))
		},
		"shared tiny": func() (pool.Transport, error) {
			return shared.New(shared.WithCapacity(8), shared.WithBatch(2))
		},
	}
	for _, name := range slices.Sorted(maps.Keys(transports)) {
		t.Run(name+"/lifo", func(t *testing.T) {
			wantOutcomes(t, poolSuite().run(func() (subject, error) {
				tr, err := transports[name]()
				if err != nil {
					return nil, err
				}
				return realPool(tr)
			}, "conformance_test.go"))
		})
	}
	t.Run("mailbox/fifo", func(t *testing.T) {
		wantOutcomes(t, poolSuite().run(func() (subject, error) {
			b, err := heap.New(64, 128)
			if err != nil {
				return nil, err
			}
			p, err := pool.New(b, mailbox.New(), fifo.Policy{})
			return poolSubject[*heap.Backing, *mailbox.Transport, fifo.Policy]{p}, err
		}, "conformance_test.go"))
	})
}

// The public drivers run every case as a subtest and skip what does not
// apply.
func TestDrivers(t *testing.T) {
	TestTransport(t, func(t *testing.T) pool.Transport { return mailbox.New() })
	TestPolicy(t, func(t *testing.T) pool.ReusePolicy { return lifo.Policy{} })
	TestBacking(t, func(t *testing.T) pool.Backing {
		b, err := heap.New(64, 16)
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
	TestPool(t, func(t *testing.T) *pool.Pool[*heap.Backing, *mailbox.Transport, lifo.Policy] {
		b, err := heap.New(64, 64)
		if err != nil {
			t.Fatal(err)
		}
		p, err := pool.New(b, mailbox.New(), lifo.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	})
}
