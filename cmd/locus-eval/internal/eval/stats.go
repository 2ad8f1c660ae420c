package eval

import (
	"math"
	"slices"
)

// Interval is a point estimate with its confidence interval.
type Interval struct {
	Point float64 `json:"point"`
	Lo    float64 `json:"lo"`
	Hi    float64 `json:"hi"`
}

// Excludes reports whether x lies outside the interval.
func (iv Interval) Excludes(x float64) bool { return x < iv.Lo || x > iv.Hi }

// Overlaps reports whether two intervals share a point.
func (iv Interval) Overlaps(o Interval) bool { return iv.Lo <= o.Hi && o.Lo <= iv.Hi }

// Inverse is the interval of 1/x.
func (iv Interval) Inverse() Interval {
	return Interval{Point: 1 / iv.Point, Lo: 1 / iv.Hi, Hi: 1 / iv.Lo}
}

// Confidence is the level of every interval. A scoreboard makes about a
// hundred ratio claims, and two runs must agree on all of them, so each
// claim is held to 99 %, not 95 %.
const Confidence = 0.99

// Median returns the median of xs without modifying it; NaN for none.
func Median(xs []float64) float64 {
	n := len(xs)
	if n == 0 {
		return math.NaN()
	}
	s := sorted(xs)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// sorted returns a sorted copy of xs.
func sorted(xs []float64) []float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s
}

// t995 are the 0.995 quantiles of Student's t distribution with 1 to 30
// degrees of freedom (two-sided 99 %).
var t995 = [...]float64{63.657, 9.925, 5.841, 4.604, 4.032, 3.707, 3.499, 3.355, 3.250, 3.169,
	3.106, 3.055, 3.012, 2.977, 2.947, 2.921, 2.898, 2.878, 2.861, 2.845,
	2.831, 2.819, 2.807, 2.797, 2.787, 2.779, 2.771, 2.763, 2.756, 2.750}

// tQuantile returns the 0.995 quantile of Student's t with df >= 1 degrees
// of freedom; past 30, the normal quantile corrected to first order.
func tQuantile(df int) float64 {
	if df <= len(t995) {
		return t995[df-1]
	}
	return 2.576 + 4.92/float64(df)
}

// ratioInterval combines per-process samples of a ratio (one process's
// per-round ratios each): every process contributes the median of its
// ratios, and the result is the geometric mean of those medians with a
// Student t interval on their logarithms (G-1 degrees of freedom for G
// processes). The processes are the units because their memory layout
// differs and they run at different times, and that, more than the rounds'
// noise, says where another run would land. Empty samples are ignored;
// with one process the interval is the point.
func ratioInterval(samples [][]float64) Interval {
	var logs []float64
	for _, xs := range samples {
		if m := Median(xs); m > 0 && !math.IsInf(m, 0) {
			logs = append(logs, math.Log(m))
		}
	}
	g := len(logs)
	if g == 0 {
		nan := math.NaN()
		return Interval{nan, nan, nan}
	}
	mean := 0.0
	for _, l := range logs {
		mean += l
	}
	mean /= float64(g)
	if g == 1 {
		x := math.Exp(mean)
		return Interval{x, x, x}
	}
	ss := 0.0
	for _, l := range logs {
		ss += (l - mean) * (l - mean)
	}
	half := tQuantile(g-1) * math.Sqrt(ss/float64(g-1)/float64(g))
	return Interval{Point: math.Exp(mean), Lo: math.Exp(mean - half), Hi: math.Exp(mean + half)}
}

// ratios returns, per process, the per-round ratios a[r]/b[r] of two
// members' block times.
func ratios(a, b [][]float64) [][]float64 {
	out := make([][]float64, len(a))
	for p := range a {
		if p >= len(b) {
			break
		}
		n := min(len(a[p]), len(b[p]))
		out[p] = make([]float64, 0, n)
		for r := range n {
			if a[p][r] > 0 && b[p][r] > 0 {
				out[p] = append(out[p], a[p][r]/b[p][r])
			}
		}
	}
	return out
}
