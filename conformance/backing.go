package conformance

import (
	"context"
	"testing"

	"github.com/locus-go/locus/pool"
)

// TestBacking runs the backing suite: every block has the same non-zero size
// with no spare capacity, blocks are zeroed, disjoint and stable, Close may
// be called twice, and a pool can be built on the backing. newB is called
// once per case.
func TestBacking(t *testing.T, newB func(t *testing.T) pool.Backing) {
	t.Helper()
	backingSuite().runT(t, newB)
}

// CheckBacking runs the backing suite outside go test and returns every
// violation found.
func CheckBacking(newB func() (pool.Backing, error)) error {
	return backingSuite().runCheck(newB)
}

func backingSuite() suite[pool.Backing] {
	return suite[pool.Backing]{
		cases:   backingCases,
		abort:   func(pool.Backing) {},
		release: func(b pool.Backing) { _ = b.Close() },
	}
}

var backingCases = []testCase[pool.Backing]{
	{
		name:        "Geometry",
		explanation: "a backing has at least one block; every block has the same non-zero length and no spare capacity",
		run: func(ctx context.Context, b pool.Backing) error {
			n := b.Len()
			if n <= 0 {
				return violationf(ErrContract, "Len() = %d, want > 0", n)
			}
			size := len(b.Block(0))
			for i := range n {
				blk := b.Block(i)
				if len(blk) == 0 || len(blk) != size {
					return violationf(ErrContract, "block %d has %d bytes, block 0 has %d", i, len(blk), size)
				}
				if cap(blk) != len(blk) {
					return violationf(ErrAliased, "block %d has cap %d > len %d: an append would write into the next block", i, cap(blk), len(blk))
				}
			}
			return nil
		},
	},
	{
		name:        "Zeroed",
		explanation: "a fresh backing's blocks read as zero",
		run: func(ctx context.Context, b pool.Backing) error {
			for i := range b.Len() {
				for j, v := range b.Block(i) {
					if v != 0 {
						return violationf(ErrContract, "block %d byte %d = %#x, want 0", i, j, v)
					}
				}
			}
			return nil
		},
	},
	{
		name:        "Disjoint",
		explanation: "no two blocks share memory: writing one block changes no other",
		run: func(ctx context.Context, b pool.Backing) error {
			n := b.Len()
			for i := range n {
				fill(b.Block(i), pattern(i))
			}
			for i := range n {
				if j, ok := check(b.Block(i), pattern(i)); !ok {
					return violationf(ErrAliased, "block %d byte %d was overwritten by a write to another block", i, j)
				}
			}
			return nil
		},
	},
	{
		name:        "Stable",
		explanation: "Block(i) returns the same memory on every call",
		run: func(ctx context.Context, b pool.Backing) error {
			for i := range b.Len() {
				first, again := b.Block(i), b.Block(i)
				if &first[0] != &again[0] {
					return violationf(ErrContract, "block %d moved between two calls", i)
				}
			}
			return nil
		},
	},
	{
		name:        "CloseTwice",
		explanation: "Close releases the memory and may be called again without harm",
		run: func(ctx context.Context, b pool.Backing) error {
			if err := b.Close(); err != nil {
				return violationf(ErrContract, "Close: %v", err)
			}
			_ = b.Close() // must not panic; an error is allowed
			return nil
		},
	},
}

// pattern is the byte written into block i by the aliasing checks.
func pattern(i int) byte { return byte(i*31 + 7) }

func fill(b []byte, v byte) {
	for j := range b {
		b[j] = v
	}
}

// check reports the first byte of b that is not v.
func check(b []byte, v byte) (int, bool) {
	for j, x := range b {
		if x != v {
			return j, false
		}
	}
	return 0, true
}
