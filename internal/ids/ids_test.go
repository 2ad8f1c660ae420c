package ids

import (
	"math"
	"testing"
)

func TestNextNeverZero(t *testing.T) {
	var s Source
	if s.Next() != 1 || s.Next() != 2 {
		t.Fatal("a fresh Source does not count from 1")
	}
	s.setLast(math.MaxUint32 - 1)
	if id := s.Next(); id != math.MaxUint32 {
		t.Fatalf("before the wrap: %d", id)
	}
	if id := s.Next(); id != 1 {
		t.Fatalf("the wrap handed out %d, want 1 (0 skipped)", id)
	}
}
