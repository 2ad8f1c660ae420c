package adapters

import (
	"math"
	"math/rand/v2"
	"testing"
)

// encodeRef is the obviously correct conversion: frexp, scale, round.
func (f Format) encodeRef(x float64) uint16 {
	man, bias := f.bits()
	expMax := uint16(1)<<(15-man) - 1
	var sign uint16
	if math.Signbit(x) {
		sign, x = 0x8000, -x
	}
	switch {
	case math.IsNaN(x):
		return sign | expMax<<man | 1<<(man-1)
	case math.IsInf(x, 0):
		return sign | expMax<<man
	case x < math.Ldexp(1, 1-bias):
		return sign | uint16(math.RoundToEven(math.Ldexp(x, bias-1+int(man))))
	}
	fr, e := math.Frexp(x)
	e--
	m := math.RoundToEven(math.Ldexp(2*fr-1, int(man)))
	if m == float64(uint(1)<<man) {
		m, e = 0, e+1
	}
	if e+bias >= int(expMax) {
		return sign | expMax<<man
	}
	return sign | uint16(e+bias)<<man | uint16(m)
}

// TestEncodeMatchesReference compares the bit-level conversion with the
// reference on random values of every magnitude and on every halfway
// point between neighbouring 16-bit values.
func TestEncodeMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, f := range []Format{FP16, BF16} {
		for range 200000 {
			x := math.Ldexp(rng.Float64()*2-1, rng.IntN(300)-150)
			if got, want := f.encode(x), f.encodeRef(x); got != want {
				t.Fatalf("%v: encode(%g) = %#04x, want %#04x", f, x, got, want)
			}
		}
		for b := range 1<<15 - 1 {
			lo, hi := f.decode(uint16(b)), f.decode(uint16(b+1))
			if math.IsInf(hi, 0) || math.IsNaN(hi) || math.IsNaN(lo) {
				continue
			}
			for _, x := range []float64{(lo + hi) / 2, -(lo + hi) / 2, math.Nextafter((lo+hi)/2, 0), math.Nextafter((lo+hi)/2, 1e300)} {
				if got, want := f.encode(x), f.encodeRef(x); got != want {
					t.Fatalf("%v: encode(%g) = %#04x, want %#04x", f, x, got, want)
				}
			}
		}
	}
}
