package sharded_test

import (
	"testing"

	"github.com/locus-go/locus/conformance"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/internal/transporttest"
	"github.com/locus-go/locus/transport/sharded"
)

// The public suites, over both modes with the record's defaults and with tiny
// queues that make producers wait all the time.
// Pools over these configurations run the pool suite in the module root's
// TestEveryCombination.

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

func mustNew(t testing.TB, opts ...sharded.Option) *sharded.Transport {
	t.Helper()
	return transporttest.MustNew(t, sharded.New, opts...)
}
