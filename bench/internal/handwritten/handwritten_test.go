package handwritten

import (
	"errors"
	"testing"

	"github.com/locus-go/locus/pool"
)

// The reference must keep the real pool's semantics, or the benchmarks
// compare different work.
func TestSameSemanticsAsPool(t *testing.T) {
	p := New(64, 4)
	var hs [4]Handle
	for i := range hs {
		h, b, err := p.AllocBytes()
		if err != nil || h.Index() != i || len(b) != 64 {
			t.Fatalf("AllocBytes %d = %v, %d bytes, %v; want block %d", i, h, len(b), err, i)
		}
		hs[i] = h
	}
	if _, err := p.Alloc(); !errors.Is(err, pool.ErrExhausted) {
		t.Fatalf("Alloc on an empty pool = %v", err)
	}
	if err := p.Free(hs[1]); err != nil {
		t.Fatal(err)
	}
	if err := p.Free(hs[1]); !errors.Is(err, pool.ErrStaleHandle) {
		t.Fatalf("double Free = %v", err)
	}
	if _, err := p.Bytes(Handle{}); !errors.Is(err, pool.ErrZeroHandle) {
		t.Fatalf("Bytes(zero) = %v", err)
	}
	s := p.NewSender()
	if err := s.FreeChunk(hs[2:]); err != nil {
		t.Fatal(err)
	}
	if n := p.Drain(); n != 2 {
		t.Fatalf("Drain = %d, want 2", n)
	}
	h, _ := p.Alloc()
	if h.Index() != hs[3].Index() {
		t.Fatalf("LIFO after drain gave block %d, want %d", h.Index(), hs[3].Index())
	}
	c := p.Counts()
	if c != (Counts{Allocs: 5, Frees: 3, Submitted: 2, Drained: 2, Rejected: 2}) {
		t.Fatalf("counts %+v", c)
	}
	p.Close()
	if err := s.FreeChunk(hs[:1]); !errors.Is(err, pool.ErrClosed) {
		t.Fatalf("FreeChunk after Close = %v", err)
	}
}
