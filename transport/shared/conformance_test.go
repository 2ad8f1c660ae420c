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

// TestConformancePool runs the pool suite over the default queue. Its pools
// have fewer blocks than the queue holds, so no send can ever find it full:
// the suite frees through senders on the owner goroutine without draining in
// between, which would wait forever on a full queue.
func TestConformancePool(t *testing.T) {
	t.Run("heap/shared/lifo", func(t *testing.T) {
		conformance.TestPool(t, func(t *testing.T) *pool.Pool[*heap.Backing, *shared.Transport, lifo.Policy] {
			return mustPool(t, mustNew(t), lifo.Policy{})
		})
	})
	t.Run("heap/shared/fifo", func(t *testing.T) {
		conformance.TestPool(t, func(t *testing.T) *pool.Pool[*heap.Backing, *shared.Transport, fifo.Policy] {
			return mustPool(t, mustNew(t), fifo.Policy{})
		})
	})
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
