package sharded_test

import (
	"testing"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/conformance"
	"github.com/locus-go/locus/policy/fifo"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/sharded"
)

// The public suites, over both modes with the record's defaults and with tiny
// queues that make producers wait all the time.

func TestConformanceHandles(t *testing.T) {
	conformance.TestTransport(t, func(t *testing.T) pool.Transport { return mustNew(t) })
}

func TestConformanceChunks(t *testing.T) {
	conformance.TestTransport(t, func(t *testing.T) pool.Transport { return mustNew(t, sharded.WithChunks()) })
}

func TestConformanceTinyHandles(t *testing.T) {
	conformance.TestTransport(t, func(t *testing.T) pool.Transport {
		return mustNew(t, sharded.WithCapacity(4), sharded.WithBatch(2))
	})
}

func TestConformanceTinyChunks(t *testing.T) {
	conformance.TestTransport(t, func(t *testing.T) pool.Transport {
		return mustNew(t, sharded.WithChunks(), sharded.WithCapacity(1), sharded.WithBatch(1))
	})
}

// TestConformancePool runs the pool suite over both modes. Its pools have no
// more blocks than a queue holds items, so no send can ever find a queue
// full: the suite frees through senders on the owner goroutine without
// draining in between, which would wait forever on a full queue. The default
// per-handle capacity (64) already qualifies; chunk queues get 64 slots.
func TestConformancePool(t *testing.T) {
	chunks := func(t *testing.T) *sharded.Transport {
		return mustNew(t, sharded.WithChunks(), sharded.WithCapacity(64))
	}
	t.Run("heap/sharded/lifo", func(t *testing.T) {
		conformance.TestPool(t, func(t *testing.T) *pool.Pool[*heap.Backing, *sharded.Transport, lifo.Policy] {
			return mustPool(t, mustNew(t), lifo.Policy{})
		})
	})
	t.Run("heap/sharded/fifo", func(t *testing.T) {
		conformance.TestPool(t, func(t *testing.T) *pool.Pool[*heap.Backing, *sharded.Transport, fifo.Policy] {
			return mustPool(t, mustNew(t), fifo.Policy{})
		})
	})
	t.Run("heap/sharded-chunks/lifo", func(t *testing.T) {
		conformance.TestPool(t, func(t *testing.T) *pool.Pool[*heap.Backing, *sharded.Transport, lifo.Policy] {
			return mustPool(t, chunks(t), lifo.Policy{})
		})
	})
	t.Run("heap/sharded-chunks/fifo", func(t *testing.T) {
		conformance.TestPool(t, func(t *testing.T) *pool.Pool[*heap.Backing, *sharded.Transport, fifo.Policy] {
			return mustPool(t, chunks(t), fifo.Policy{})
		})
	})
}

func mustNew(t testing.TB, opts ...sharded.Option) *sharded.Transport {
	t.Helper()
	tr, err := sharded.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func mustPool[P pool.ReusePolicy](t testing.TB, tr *sharded.Transport, p P) *pool.Pool[*heap.Backing, *sharded.Transport, P] {
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
