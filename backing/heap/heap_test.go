package heap_test

import (
	"testing"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/conformance"
	"github.com/locus-go/locus/pool"
)

func TestConformance(t *testing.T) {
	conformance.TestBacking(t, func(t *testing.T) pool.Backing {
		b, err := heap.New(4096, 256)
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}

func TestCloseDropsBlocks(t *testing.T) {
	b, err := heap.New(8, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if b.Len() != 0 {
		t.Fatalf("Len after Close = %d, want 0", b.Len())
	}
}
