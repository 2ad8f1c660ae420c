package locus_test

import (
	"errors"
	"math"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/locus-go/locus"
	"github.com/locus-go/locus/conformance"
	"github.com/locus-go/locus/internal/race"
	"github.com/locus-go/locus/pool"
)

func TestDefaultConformance(t *testing.T) {
	conformance.TestPool(t, func(t *testing.T) *locus.DefaultPool {
		p, err := locus.Default(locus.WithBlocks(256), locus.WithBlockSize(512))
		if err != nil {
			t.Fatal(err)
		}
		return p
	})
}

func TestDefaultDefaults(t *testing.T) {
	p, err := locus.Default()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	st := p.Stats()
	if st.BlockSize != locus.DefaultBlockSize || st.Capacity != locus.DefaultBlocks || st.Order != pool.LIFO {
		t.Fatalf("Default() stats %+v, want %d blocks of %d bytes, LIFO", st, locus.DefaultBlocks, locus.DefaultBlockSize)
	}
}

// The default region is mapped and advised into huge pages on Linux when it
// spans at least two, Go heap memory under the race detector (which does
// not see mapped memory) and on other systems.
func TestDefaultRegion(t *testing.T) {
	for _, blocks := range []int{16, 4096} { // 64 KiB, 16 MiB
		p, err := locus.Default(locus.WithBlocks(blocks))
		if err != nil {
			t.Fatal(err)
		}
		b := p.Backing()
		wantMapped := runtime.GOOS == "linux" && !race.Enabled
		if b.Mapped() != wantMapped || (b.HugePages() && (!wantMapped || blocks == 16)) {
			t.Errorf("%d blocks: mapped %v (want %v), huge pages %v", blocks, b.Mapped(), wantMapped, b.HugePages())
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// A size whose pool metadata could not fit is refused before the region is
// taken: nothing of the 64 MiB region is allocated.
func TestDefaultRefusesBeforeAllocating(t *testing.T) {
	old := debug.SetMemoryLimit(512 << 20)
	defer debug.SetMemoryLimit(old)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := locus.Default(locus.WithBlockSize(1), locus.WithBlocks(1<<26)) // 64 MiB of blocks, 2.5 GiB of metadata
	runtime.ReadMemStats(&after)
	if !errors.Is(err, pool.ErrInvalidConfig) || !strings.Contains(err.Error(), "metadata") {
		t.Fatalf("Default: %v, want ErrInvalidConfig naming the metadata", err)
	}
	if d := after.TotalAlloc - before.TotalAlloc; d > 1<<20 {
		t.Fatalf("refusing allocated %d bytes first", d)
	}
}

func TestDefaultRejectsBadOptions(t *testing.T) {
	for _, opts := range [][]locus.Option{
		{locus.WithBlockSize(0)},
		{locus.WithBlocks(0)},
		{locus.WithBlocks(-3)},
		{locus.WithBlockSize(math.MaxInt/2 + 1), locus.WithBlocks(4)},
		{locus.WithBlockSize(1 << 30), locus.WithBlocks(1 << 20)}, // a petabyte
		{nil},
		{locus.WithBlocks(8), nil},
	} {
		if p, err := locus.Default(opts...); err == nil {
			p.Close()
			t.Errorf("Default(%v) succeeded", opts)
		} else if !errorsIs(err, pool.ErrInvalidConfig) {
			t.Errorf("Default(%v) = %v, want pool.ErrInvalidConfig", opts, err)
		}
	}
}
