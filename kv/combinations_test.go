package kv_test

import (
	"fmt"
	"testing"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/backing/mmap"
	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/policy/fifo"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
	"github.com/locus-go/locus/transport/sharded"
	"github.com/locus-go/locus/transport/shared"
)

// TestEveryCombination runs the model test and the remote-release test over
// every transport × backing × policy in the tree: the manager must not
// depend on which pool it manages.
func TestEveryCombination(t *testing.T) {
	transports := []struct {
		name string
		new  func() (pool.Transport, error)
	}{
		{"mailbox", func() (pool.Transport, error) { return mailbox.New(), nil }},
		{"sharded-handle", func() (pool.Transport, error) { return sharded.New() }},
		{"sharded-chunk-tiny", func() (pool.Transport, error) {
			return sharded.New(sharded.WithChunks(), sharded.WithCapacity(1), sharded.WithBatch(1))
		}},
		{"shared-tiny", func() (pool.Transport, error) { return shared.New(shared.WithCapacity(8), shared.WithBatch(2)) }},
	}
	backings := []struct {
		name string
		new  func(size, n int) (pool.Backing, error)
	}{
		{"heap", func(size, n int) (pool.Backing, error) { return heap.New(size, n) }},
		{"mmap", func(size, n int) (pool.Backing, error) { return mmap.New(size, n) }},
	}
	policies := []pool.ReusePolicy{lifo.Policy{}, fifo.Policy{}}
	for _, tr := range transports {
		for _, bk := range backings {
			for _, pol := range policies {
				t.Run(fmt.Sprintf("transport=%s/backing=%s/policy=%v", tr.name, bk.name, pol.Order()), func(t *testing.T) {
					newP := func(n, size int) kv.BlockPool {
						b, err := bk.new(size, n)
						if err != nil {
							t.Skipf("no %s backing here: %v", bk.name, err)
						}
						tp, err := tr.new()
						if err != nil {
							t.Fatal(err)
						}
						p, err := pool.New(b, tp, pol)
						if err != nil {
							t.Fatal(err)
						}
						t.Cleanup(func() { _ = p.Close() })
						return p
					}
					for i, seed := range modelSeeds()[:4] {
						if err := runModel(newP(12, 16), seed); err != nil {
							t.Fatalf("seed %d: %v", i, err)
						}
					}
					testRemoteRelease(t, newP(64, 64))
				})
			}
		}
	}
}
