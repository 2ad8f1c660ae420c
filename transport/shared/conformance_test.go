package shared_test

import (
	"testing"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/conformance"
	"github.com/locus-go/locus/policy/fifo"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/shared"
)

// The public suites, over the record's configuration and a tiny queue that
// makes producers wait all the time.

func TestConformanceDefault(t *testing.T) {
	conformance.TestTransport(t, func(t *testing.T) pool.Transport { return mustNew(t) })
}

func TestConformanceTiny(t *testing.T) {
	conformance.TestTransport(t, func(t *testing.T) pool.Transport {
		return mustNew(t, shared.WithCapacity(4), shared.WithBatch(2))
	})
}

// TestConformancePool runs the pool suite over the default queue and over a
// tiny one that keeps the pool's workers waiting.
func TestConformancePool(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []shared.Option
	}{
		{"shared", nil},
		{"shared-tiny", []shared.Option{shared.WithCapacity(4), shared.WithBatch(2)}},
	} {
		t.Run("backing=heap/transport="+c.name+"/policy=lifo", func(t *testing.T) {
			conformance.TestPool(t, func(t *testing.T) *pool.Pool[*heap.Backing, *shared.Transport, lifo.Policy] {
				return mustPool(t, mustNew(t, c.opts...), lifo.Policy{})
			})
		})
		t.Run("backing=heap/transport="+c.name+"/policy=fifo", func(t *testing.T) {
			conformance.TestPool(t, func(t *testing.T) *pool.Pool[*heap.Backing, *shared.Transport, fifo.Policy] {
				return mustPool(t, mustNew(t, c.opts...), fifo.Policy{})
			})
		})
	}
}

func mustNew(t testing.TB, opts ...shared.Option) *shared.Transport {
	t.Helper()
	tr, err := shared.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func mustPool[P pool.ReusePolicy](t testing.TB, tr *shared.Transport, p P) *pool.Pool[*heap.Backing, *shared.Transport, P] {
	t.Helper()
	b, err := heap.New(64, 64)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := pool.New(b, tr, p)
	if err != nil {
		t.Fatal(err)
	}
	return pl
}
