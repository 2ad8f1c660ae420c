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

// TestConformancePool runs the pool suite over both modes, with the defaults
// and with tiny queues that keep the pool's workers waiting.
func TestConformancePool(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []sharded.Option
	}{
		{"sharded-handles", nil},
		{"sharded-handles-tiny", []sharded.Option{sharded.WithCapacity(4), sharded.WithBatch(2)}},
		{"sharded-chunks", []sharded.Option{sharded.WithChunks()}},
		{"sharded-chunks-tiny", []sharded.Option{sharded.WithChunks(), sharded.WithCapacity(1), sharded.WithBatch(1)}},
	} {
		t.Run("backing=heap/transport="+c.name+"/policy=lifo", func(t *testing.T) {
			conformance.TestPool(t, func(t *testing.T) *pool.Pool[*heap.Backing, *sharded.Transport, lifo.Policy] {
				return mustPool(t, mustNew(t, c.opts...), lifo.Policy{})
			})
		})
		t.Run("backing=heap/transport="+c.name+"/policy=fifo", func(t *testing.T) {
			conformance.TestPool(t, func(t *testing.T) *pool.Pool[*heap.Backing, *sharded.Transport, fifo.Policy] {
				return mustPool(t, mustNew(t, c.opts...), fifo.Policy{})
			})
		})
	}
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
