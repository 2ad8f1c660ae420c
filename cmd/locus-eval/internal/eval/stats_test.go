package eval

import (
	"math"
	"strings"
	"testing"
	"time"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{7}, 7},
	} {
		if got := Median(tc.xs); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.xs, got, tc.want)
		}
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("Median(nil) is not NaN")
	}
}

// The interval is Student's t on the logs of the per-process medians,
// computed here by hand for three processes.
func TestRatioInterval(t *testing.T) {
	samples := [][]float64{{1.0, 1.1, 0.9}, {1.2, 1.2, 5}, {0.8, 0.79, 0.81}}
	meds := []float64{1.0, 1.2, 0.8}
	mean := 0.0
	for _, m := range meds {
		mean += math.Log(m) / 3
	}
	ss := 0.0
	for _, m := range meds {
		ss += (math.Log(m) - mean) * (math.Log(m) - mean)
	}
	half := 9.925 * math.Sqrt(ss/2/3)
	got := ratioInterval(samples)
	want := Interval{math.Exp(mean), math.Exp(mean - half), math.Exp(mean + half)}
	if !near(got.Point, want.Point) || !near(got.Lo, want.Lo) || !near(got.Hi, want.Hi) {
		t.Fatalf("ratioInterval = %+v, want %+v", got, want)
	}
	if got := ratioInterval([][]float64{{2, 2}, nil}); got != (Interval{2, 2, 2}) {
		t.Errorf("one process: %+v, want the point", got)
	}
	if got := ratioInterval(nil); !math.IsNaN(got.Point) {
		t.Errorf("no data: %+v, want NaN", got)
	}
	// Inverting every ratio inverts the interval.
	inv := make([][]float64, len(samples))
	for i, xs := range samples {
		for _, x := range xs {
			inv[i] = append(inv[i], 1/x)
		}
	}
	gi := ratioInterval(inv).Inverse()
	if !near(gi.Point, got.Point) || !near(gi.Lo, got.Lo) || !near(gi.Hi, got.Hi) {
		t.Errorf("inverse %+v, want %+v", gi, got)
	}
}

func TestTQuantile(t *testing.T) {
	for _, tc := range []struct {
		df   int
		want float64
	}{{1, 63.657}, {2, 9.925}, {13, 3.012}, {30, 2.750}} {
		if got := tQuantile(tc.df); got != tc.want {
			t.Errorf("tQuantile(%d) = %v, want %v", tc.df, got, tc.want)
		}
	}
	if q := tQuantile(1000); q < 2.576 || q > 2.59 {
		t.Errorf("tQuantile(1000) = %v", q)
	}
}

func TestRatios(t *testing.T) {
	got := ratios([][]float64{{2, 4, 0}, {9}}, [][]float64{{1, 2, 1}, {3, 3}})
	if len(got) != 2 || len(got[0]) != 2 || got[0][0] != 2 || got[0][1] != 2 || len(got[1]) != 1 || got[1][0] != 3 {
		t.Fatalf("ratios = %v", got)
	}
}

func TestJudge(t *testing.T) {
	for _, tc := range []struct {
		iv    Interval
		bound float64
		want  string
	}{
		{Interval{0.9, 0.85, 0.95}, 1, Met},
		{Interval{1.1, 1.05, 1.2}, 1, Missed},
		{Interval{1.0, 0.95, 1.05}, 1, Undecided},
		{Interval{1.0, 1.0, 1.0}, 1, Met},
	} {
		if got := judge(tc.iv, tc.bound); got != tc.want {
			t.Errorf("judge(%+v, %v) = %s, want %s", tc.iv, tc.bound, got, tc.want)
		}
	}
}

func TestThreadVerdicts(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  string
		want string
	}{
		{"atLeast above", atLeast(Interval{1.6, 1.55, 1.7}, true, 1.5), Confirmed},
		{"atLeast below", atLeast(Interval{1.2, 1.1, 1.3}, true, 1.5), Falsified},
		{"atLeast straddles", atLeast(Interval{1.5, 1.4, 1.6}, true, 1.5), Inconclusive},
		{"atLeast invalid", atLeast(Interval{}, false, 1.5), Invalid},
		{"atMost", atMost(Interval{1.0, 0.98, 1.03}, true, 1.05), Confirmed},
		{"atMost above", atMost(Interval{1.2, 1.1, 1.3}, true, 1.05), Falsified},
		{"within", within(Interval{1.0, 0.95, 1.05}, true, 1.10), Confirmed},
		{"within outside", within(Interval{1.3, 1.2, 1.4}, true, 1.10), Falsified},
		{"within straddles", within(Interval{1.1, 1.0, 1.2}, true, 1.10), Inconclusive},
		{"worst", worst(Confirmed, Inconclusive, Confirmed), Inconclusive},
		{"worst invalid", worst(Falsified, Invalid), Invalid},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, tc.got, tc.want)
		}
	}
}

// The progress total is fixed up front; the estimate appears once a
// process has done a share of its blocks, and after the first process it
// follows that process's timeline.
func TestTracker(t *testing.T) {
	g := GroupSpec{ID: "g", Members: []string{"a", "b"}, Rounds: 50}
	specs := []Spec{{Process: 0, Groups: []GroupSpec{g}}, {Process: 1, Groups: []GroupSpec{g}}}
	var got []Progress
	tr := newTracker(specs, func(p Progress) { got = append(got, p) })
	tr.update(0, 1)
	tr.update(0, 50)
	tr.update(0, 100)
	tr.update(1, 50)
	if len(got) != 4 {
		t.Fatalf("%d reports", len(got))
	}
	for _, p := range got {
		if p.Total != 200 || p.Processes != 2 || p.Group != "g" {
			t.Errorf("report %+v", p)
		}
	}
	if got[0].ETA >= 0 || got[1].ETA < 0 || got[3].Done != 150 || got[3].Process != 2 || got[3].ETA < 0 {
		t.Errorf("estimates: %+v", got)
	}
}

func TestProgressPrinter(t *testing.T) {
	var plain, tty strings.Builder
	for _, c := range []struct {
		w        *strings.Builder
		terminal bool
	}{{&plain, false}, {&tty, true}} {
		report, done := NewProgressPrinter(c.w, c.terminal)
		report(Progress{Process: 1, Processes: 2, Done: 1, Total: 4, Group: "a", ETA: -1})
		report(Progress{Process: 1, Processes: 2, Done: 2, Total: 4, Group: "a", ETA: time.Second})
		report(Progress{Process: 2, Processes: 2, Done: 4, Total: 4, Group: "a", ETA: 0})
		done()
	}
	if n := strings.Count(plain.String(), "\n"); n != 2 || strings.Contains(plain.String(), "\r") {
		t.Errorf("plain progress: %q", plain.String())
	}
	if !strings.Contains(tty.String(), "\r\033[K") || strings.Contains(tty.String(), "\n") || !strings.Contains(tty.String(), "100%") {
		t.Errorf("terminal progress: %q", tty.String())
	}
}
