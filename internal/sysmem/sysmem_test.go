package sysmem

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestFits(t *testing.T) {
	if err := Fits(1 << 20); err != nil {
		t.Fatalf("1 MiB does not fit: %v", err)
	}
	if err := Fits(math.MaxUint64); err == nil {
		t.Fatal("2^64-1 bytes fit")
	}
	if p := physical(); p != 0 && Fits(p+1) == nil {
		t.Fatalf("more than physical memory (%d) fits", p)
	}
}

func TestFitsHonoursMemoryLimit(t *testing.T) {
	old := debug.SetMemoryLimit(64 << 20)
	defer debug.SetMemoryLimit(old)
	if Fits(65<<20) == nil {
		t.Fatal("65 MiB fit under a 64 MiB memory limit")
	}
	if err := Fits(63 << 20); err != nil {
		t.Fatal(err)
	}
}

func TestProduct(t *testing.T) {
	for _, c := range []struct {
		a, b, want int
		ok         bool
	}{
		{0, 5, 0, true}, {3, 4, 12, true}, {-1, 2, 0, false}, {2, -1, 0, false},
		{math.MaxInt, 2, 0, false}, {math.MaxInt / 2, 2, math.MaxInt - 1, true},
	} {
		got, ok := Product(c.a, c.b)
		if got != c.want || ok != c.ok {
			t.Errorf("Product(%d, %d) = %d, %v; want %d, %v", c.a, c.b, got, ok, c.want, c.ok)
		}
	}
}
