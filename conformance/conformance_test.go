package conformance

import (
	"testing"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/policy/fifo"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
)

// The in-tree components pass; broken_test.go checks that broken ones fail.

func TestInTreeTransport(t *testing.T) {
	TestTransport(t, func(t *testing.T) pool.Transport { return mailbox.New() })
}

func TestInTreeBacking(t *testing.T) {
	TestBacking(t, func(t *testing.T) pool.Backing { return mustHeap(t, 4096, 64) })
}

func TestInTreePolicies(t *testing.T) {
	t.Run("lifo", func(t *testing.T) { TestPolicy(t, func(t *testing.T) pool.ReusePolicy { return lifo.Policy{} }) })
	t.Run("fifo", func(t *testing.T) { TestPolicy(t, func(t *testing.T) pool.ReusePolicy { return fifo.Policy{} }) })
}

func TestInTreePools(t *testing.T) {
	t.Run("heap/mailbox/lifo", func(t *testing.T) {
		TestPool(t, func(t *testing.T) *pool.Pool[*heap.Backing, *mailbox.Transport, lifo.Policy] {
			return mustPool(t, mustHeap(t, 64, 128), mailbox.New(), lifo.Policy{})
		})
	})
	t.Run("heap/mailbox/fifo", func(t *testing.T) {
		TestPool(t, func(t *testing.T) *pool.Pool[*heap.Backing, *mailbox.Transport, fifo.Policy] {
			return mustPool(t, mustHeap(t, 64, 128), mailbox.New(), fifo.Policy{})
		})
	})
}

func mustHeap(t *testing.T, size, n int) *heap.Backing {
	t.Helper()
	b, err := heap.New(size, n)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustPool[B pool.Backing, T pool.Transport, P pool.ReusePolicy](t *testing.T, b B, tr T, p P) *pool.Pool[B, T, P] {
	t.Helper()
	pl, err := pool.New(b, tr, p)
	if err != nil {
		t.Fatal(err)
	}
	return pl
}
