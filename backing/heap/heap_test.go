package heap_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/conformance"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
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

func TestNewRejectsBadSizes(t *testing.T) {
	for _, c := range []struct {
		name     string
		size, n  int
		contains string
	}{
		{"zero size", 0, 1, "heap backing"},
		{"zero blocks", 1, 0, "heap backing"},
		{"negative size", -1, 1, "heap backing"},
		{"negative blocks", 1, -1, "heap backing"},
		{"too many blocks", 1, pool.MaxBlocks + 1, "heap backing"},
		{"overflow", math.MaxInt/2 + 1, 4, "overflow"},
		{"more than this machine's memory", 1 << 30, 1 << 20, "exceed"},
		{"two terabytes of 4 KiB blocks", 4096, 1 << 29, "exceed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := heap.New(c.size, c.n)
			if !errors.Is(err, pool.ErrInvalidConfig) || b != nil {
				t.Fatalf("heap.New(%d, %d) = %v, %v; want an error wrapping pool.ErrInvalidConfig", c.size, c.n, b, err)
			}
			if !strings.Contains(err.Error(), c.contains) {
				t.Fatalf("error %q does not say %q", err, c.contains)
			}
		})
	}
}

func TestNilAndZeroBacking(t *testing.T) {
	for _, b := range []*heap.Backing{nil, new(heap.Backing)} {
		if b.Len() != 0 || b.Block(0) != nil || b.Block(-1) != nil || b.Close() != nil {
			t.Errorf("%#v: has blocks or fails to close", b)
		}
		if _, err := pool.New(b, mailbox.New(), lifo.Policy{}); !errors.Is(err, pool.ErrInvalidConfig) {
			t.Errorf("pool.New over %#v = %v, want pool.ErrInvalidConfig", b, err)
		}
	}
}

func TestBlockGeometry(t *testing.T) {
	b, err := heap.New(24, 5)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b.Len() {
		blk := b.Block(i)
		if len(blk) != 24 || cap(blk) != 24 {
			t.Fatalf("block %d: len %d cap %d, want 24 24: an append must not reach the next block", i, len(blk), cap(blk))
		}
	}
	for _, i := range []int{-1, 5, math.MaxInt, math.MinInt} {
		if b.Block(i) != nil {
			t.Errorf("Block(%d) of 5 = non-nil", i)
		}
	}
}

// FuzzNew checks that no size makes New panic or hand out a wrong geometry:
// it fails with pool.ErrInvalidConfig or returns blocks of the asked size.
func FuzzNew(f *testing.F) {
	f.Add(4096, 16)
	f.Add(0, 0)
	f.Add(-1, math.MaxInt)
	f.Add(math.MaxInt32, 1<<30)
	f.Fuzz(func(t *testing.T, size, n int) {
		total, ok := int64(size)*int64(n), size > 0 && n > 0 && size <= math.MaxInt32 && n <= math.MaxInt32
		if ok && total <= 16<<20 {
			b, err := heap.New(size, n)
			if err != nil {
				t.Fatalf("heap.New(%d, %d): %v", size, n, err)
			}
			if b.Len() != n || len(b.Block(n-1)) != size {
				t.Fatalf("heap.New(%d, %d): %d blocks of %d bytes", size, n, b.Len(), len(b.Block(n-1)))
			}
			return
		}
		if !ok || total > 1<<50 || size <= 0 || n <= 0 {
			// Only sizes no machine holds are tried: the others would
			// really allocate.
			b, err := heap.New(size, n)
			if !errors.Is(err, pool.ErrInvalidConfig) || b != nil {
				t.Fatalf("heap.New(%d, %d) = %v, %v; want pool.ErrInvalidConfig", size, n, b, err)
			}
		}
	})
}
