package pages

import (
	"math/rand/v2"
	"testing"
)

// TestBitset checks next and last against a plain slice of bools, over
// sizes that give one to four levels.
func TestBitset(t *testing.T) {
	for _, n := range []int{1, 63, 64, 65, 4095, 4097, 300000} {
		s := newBitset(n)
		ref := make([]bool, n)
		rng := rand.New(rand.NewPCG(uint64(n), 1))
		for op := range 3000 {
			i := rng.IntN(n)
			if rng.IntN(3) == 0 {
				s.clear(i)
				ref[i] = false
			} else if !ref[i] {
				s.set(i)
				ref[i] = true
			}
			q := rng.IntN(n + 2)
			want := none
			for j := q; j < n; j++ {
				if ref[j] {
					want = j
					break
				}
			}
			if got := s.next(q); got != want {
				t.Fatalf("n %d op %d: next(%d) = %d, want %d", n, op, q, got, want)
			}
			last := none
			for j := n - 1; j >= 0; j-- {
				if ref[j] {
					last = j
					break
				}
			}
			if got := s.last(); got != last {
				t.Fatalf("n %d op %d: last = %d, want %d", n, op, got, last)
			}
		}
	}
}

// TestByAddr checks the first-fit tree against a linear scan.
func TestByAddr(t *testing.T) {
	for _, n := range []int{1, 2, 3, 16, 17, 100, 256, 257, 1024, 1500, 4097} {
		x := newByAddr(n)
		ref := make([]uint32, n)
		rng := rand.New(rand.NewPCG(uint64(n), 2))
		for op := range 3000 {
			i := rng.IntN(n)
			v := uint32(rng.IntN(20))
			if rng.IntN(2) == 0 {
				v = 0
			}
			x.set(int32(i), v)
			ref[i] = v
			q := 1 + rng.IntN(20)
			want, big := int32(none), uint32(0)
			for j := range ref {
				if want == none && int(ref[j]) >= q {
					want = int32(j)
				}
				big = max(big, ref[j])
			}
			if got := x.find(q); got != want {
				t.Fatalf("n %d op %d: find(%d) = %d, want %d", n, op, q, got, want)
			}
			if x.largest() != int(big) {
				t.Fatalf("n %d op %d: largest = %d, want %d", n, op, x.largest(), big)
			}
		}
	}
}
