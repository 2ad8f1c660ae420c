package shared_test

import (
	"testing"

	"github.com/locus-go/locus/conformance"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/internal/transporttest"
	"github.com/locus-go/locus/transport/shared"
)

// The public suites, over the record's configuration and a tiny queue that
// makes producers wait all the time.
// Pools over these configurations run the pool suite in the module root's
// TestEveryCombination.

func TestConformanceDefault(t *testing.T) {
	conformance.TestTransport(t, func(t *testing.T) pool.Transport { return mustNew(t) })
}

func TestConformanceTiny(t *testing.T) {
	conformance.TestTransport(t, func(t *testing.T) pool.Transport {
		return mustNew(t, shared.WithCapacity(4), shared.WithBatch(2))
	})
}

func mustNew(t testing.TB, opts ...shared.Option) *shared.Transport {
	t.Helper()
	return transporttest.MustNew(t, shared.New, opts...)
}
