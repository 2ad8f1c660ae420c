package locus_test

import (
	"testing"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/backing/mmap"
	"github.com/locus-go/locus/conformance"
	"github.com/locus-go/locus/policy/fifo"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
	"github.com/locus-go/locus/transport/sharded"
	"github.com/locus-go/locus/transport/shared"
)

// TestEveryCombination runs the pool suite over every transport × backing ×
// policy in the tree, bounded transports also at tiny bounds so that they
// fill up, and with a batch larger than the capacity. Over mmap the race
// detector cannot see block contents (see backing/mmap); the heap runs cover
// the handoffs under -race.
func TestEveryCombination(t *testing.T) {
	t.Run("transport=mailbox", func(t *testing.T) {
		withBackings(t, func(*testing.T) *mailbox.Transport { return mailbox.New() })
	})
	t.Run("transport=sharded-handle", func(t *testing.T) { withBackings(t, mustT(sharded.New)) })
	t.Run("transport=sharded-handle-tiny", func(t *testing.T) {
		withBackings(t, mustT(sharded.New, sharded.WithCapacity(4), sharded.WithBatch(2)))
	})
	t.Run("transport=sharded-chunk", func(t *testing.T) { withBackings(t, mustT(sharded.New, sharded.WithChunks())) })
	t.Run("transport=sharded-chunk-tiny", func(t *testing.T) {
		withBackings(t, mustT(sharded.New, sharded.WithChunks(), sharded.WithCapacity(1), sharded.WithBatch(1)))
	})
	t.Run("transport=shared", func(t *testing.T) { withBackings(t, mustT(shared.New)) })
	t.Run("transport=shared-tiny", func(t *testing.T) {
		withBackings(t, mustT(shared.New, shared.WithCapacity(8), shared.WithBatch(2)))
	})
	// A batch larger than the capacity: one Drain empties a queue.
	t.Run("transport=sharded-handle-wide", func(t *testing.T) {
		withBackings(t, mustT(sharded.New, sharded.WithCapacity(4), sharded.WithBatch(16)))
	})
	t.Run("transport=shared-wide", func(t *testing.T) {
		withBackings(t, mustT(shared.New, shared.WithCapacity(8), shared.WithBatch(32)))
	})
}

// mustT turns a transport constructor and its options into a test constructor.
func mustT[T pool.Transport, O any](newT func(...O) (T, error), opts ...O) func(*testing.T) T {
	return func(t *testing.T) T {
		tr, err := newT(opts...)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
}

func withBackings[T pool.Transport](t *testing.T, newT func(*testing.T) T) {
	t.Run("backing=heap", func(t *testing.T) {
		withPolicies(t, func(t *testing.T) *heap.Backing {
			b, err := heap.New(64, 128)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}, newT)
	})
	t.Run("backing=mmap", func(t *testing.T) {
		withPolicies(t, func(t *testing.T) *mmap.Backing {
			b, err := mmap.New(64, 128)
			if err != nil {
				t.Skipf("no mapped backing here: %v", err)
			}
			return b
		}, newT)
	})
}

func withPolicies[B pool.Backing, T pool.Transport](t *testing.T, newB func(*testing.T) B, newT func(*testing.T) T) {
	t.Run("policy=lifo", func(t *testing.T) {
		conformance.TestPool(t, func(t *testing.T) *pool.Pool[B, T, lifo.Policy] {
			return mustPool(t, newB(t), newT(t), lifo.Policy{})
		})
	})
	t.Run("policy=fifo", func(t *testing.T) {
		conformance.TestPool(t, func(t *testing.T) *pool.Pool[B, T, fifo.Policy] {
			return mustPool(t, newB(t), newT(t), fifo.Policy{})
		})
	})
}

func mustPool[B pool.Backing, T pool.Transport, P pool.ReusePolicy](t *testing.T, b B, tr T, p P) *pool.Pool[B, T, P] {
	t.Helper()
	pl, err := pool.New(b, tr, p)
	if err != nil {
		t.Fatal(err)
	}
	return pl
}
