package bench

import (
	"math"
	"slices"
)

// Estimate is a point estimate with a 95 % confidence interval.
type Estimate struct {
	// Point is the median.
	Point float64
	// Lo and Hi bound the 95 % confidence interval of the median.
	Lo, Hi float64
}

// RelWidth returns the interval's full relative width, (Hi-Lo)/Point.
func (e Estimate) RelWidth() float64 {
	if e.Point == 0 {
		return 0
	}
	return (e.Hi - e.Lo) / e.Point
}

// Overlaps reports whether two intervals overlap (the record's tie rule).
func (e Estimate) Overlaps(o Estimate) bool { return e.Lo <= o.Hi && o.Lo <= e.Hi }

// medianCI returns the sample median of xs with its distribution-free 95 %
// confidence interval: the order statistics at ranks n/2 ∓ 0.98·√n (the
// normal approximation of the binomial sign-test interval). It sorts xs.
func medianCI(xs []float64) Estimate {
	n := len(xs)
	if n == 0 {
		return Estimate{}
	}
	slices.Sort(xs)
	med := median(xs)
	h := 0.98 * math.Sqrt(float64(n))
	lo := int(math.Floor(float64(n)/2 - h))
	hi := int(math.Ceil(float64(n)/2+h)) - 1
	lo = max(lo, 0)
	hi = min(hi, n-1)
	return Estimate{Point: med, Lo: xs[lo], Hi: xs[hi]}
}

// median returns the median of sorted xs.
func median(xs []float64) float64 {
	n := len(xs)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// medianOf returns the median of xs without modifying it.
func medianOf(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return median(s)
}
