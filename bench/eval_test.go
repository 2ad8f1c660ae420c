package bench

import (
	"slices"
	"testing"
)

// The numbers of design thread §2.7, pinned.
func TestPlanNumbers(t *testing.T) {
	for _, tc := range []struct {
		w               *Workload
		blocks, peak    int
		steps           int
		workerBlocks    [Workers]int
		firstStepAllocs []int
	}{
		{SteadyDecode, 2688, 1344, 64, [Workers]int{688, 656, 672, 672},
			[]int{68, 72, 76, 80, 84, 88, 92, 96, 99, 102, 105, 108, 111, 114, 117, 120, 54, 52, 50, 48}},
		{BurstStorm, 2688, 1537, 49, [Workers]int{672, 672, 672, 672},
			[]int{1088, 64, 64, 64, 64, 64, 64, 64, 48, 48, 48, 48, 48, 48, 48, 48, 32}},
		{LongTail, 6016, 4168, 527, [Workers]int{1504, 1504, 1504, 1504},
			[]int{68, 72, 76, 80, 84, 88, 92, 96, 100, 104, 108, 112, 116, 120, 124, 128}},
		{ChurnTouch, 1024, 4096, 64, [Workers]int{256, 256, 256, 256}, nil},
	} {
		t.Run(tc.w.Name, func(t *testing.T) {
			p := NewPlan(tc.w)
			if p.BlocksPerTrace != tc.blocks {
				t.Errorf("blocks per trace = %d, want %d", p.BlocksPerTrace, tc.blocks)
			}
			if p.TheoreticalPeak != tc.peak {
				t.Errorf("theoretical peak = %d, want %d", p.TheoreticalPeak, tc.peak)
			}
			if p.Steps != tc.steps {
				t.Errorf("steps = %d, want %d", p.Steps, tc.steps)
			}
			if p.WorkerBlocks != tc.workerBlocks {
				t.Errorf("worker blocks = %v, want %v", p.WorkerBlocks, tc.workerBlocks)
			}
			if p.WorkerRequests != [Workers]int{16, 16, 16, 16} {
				t.Errorf("worker requests = %v, want 16 each", p.WorkerRequests)
			}
			if n := len(tc.firstStepAllocs); n > 0 && !slices.Equal(p.AllocsPerStep[:n], tc.firstStepAllocs) {
				t.Errorf("allocations per step = %v, want %v", p.AllocsPerStep[:n], tc.firstStepAllocs)
			}
			sum := 0
			for _, a := range p.AllocsPerStep {
				sum += a
			}
			if sum != tc.blocks || SampleRounds*sum != map[int]int{2688: 10752, 6016: 24064, 1024: 4096}[tc.blocks] {
				t.Errorf("allocations sum to %d (sample total %d)", sum, SampleRounds*sum)
			}
		})
	}
}

func TestBurstAllocsFromStep16(t *testing.T) {
	p := NewPlan(BurstStorm)
	for s := 16; s < 32; s++ {
		if p.AllocsPerStep[s] != 32 {
			t.Fatalf("burst step %d allocates %d, want 32", s, p.AllocsPerStep[s])
		}
	}
}

func TestFirstDispatches(t *testing.T) {
	want := []Dispatch{{8, 0, 0}, {9, 4, 1}, {10, 8, 2}, {11, 12, 3}, {12, 16, 0}, {13, 20, 1},
		{14, 24, 2}, {15, 28, 3}, {16, 3, 0}, {16, 32, 1}, {17, 6, 2}, {17, 36, 3}}
	p := NewPlan(SteadyDecode)
	if got := p.Dispatches[:len(want)]; !slices.Equal(got, want) {
		t.Fatalf("first dispatches = %v, want %v", got, want)
	}
	if len(p.Dispatches) != Requests {
		t.Fatalf("%d dispatches, want %d", len(p.Dispatches), Requests)
	}
}

// Every contender replays the same schedule: the plan is computed once per
// workload and the ops are a pure function of the workload.
func TestPlanDeterministic(t *testing.T) {
	for _, w := range Workloads() {
		a, b := NewPlan(w), NewPlan(w)
		if !slices.Equal(a.ops, b.ops) || !slices.Equal(a.lists, b.lists) || !slices.Equal(a.stepOps, b.stepOps) {
			t.Fatalf("%s: plan differs between two computations", w.Name)
		}
		if p1, p2 := planFor(w), planFor(w); p1 != p2 {
			t.Fatalf("%s: planFor not cached", w.Name)
		}
	}
}

// Every contender passes its gates on every workload, in every touch mode.
func TestContendersGates(t *testing.T) {
	o := QuickOptions()
	o.MinTraces, o.MaxTraces = 2, 4
	modes := []TouchMode{TouchByte, TouchFull, TouchNone}
	if testing.Short() {
		modes = modes[:1]
	}
	for _, m := range modes {
		o.Touch = m
		for _, e := range Contenders() {
			for _, w := range Workloads() {
				r := RunOnce(e, w, o)
				if r.Err != nil {
					t.Errorf("touch=%s %s/%s: %v", m, w.Name, e.Name, r.Err)
					continue
				}
				if r.Traces < 2 || float64(r.Peak) < 0.99*float64(TheoreticalPeak(w)) || r.Time.Point <= 0 {
					t.Errorf("touch=%s %s/%s: implausible run %+v", m, w.Name, e.Name, r)
				}
			}
		}
	}
}

func TestMedianCI(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3}
	e := medianCI(xs)
	if e.Point != 3 || e.Lo > 3 || e.Hi < 3 {
		t.Fatalf("medianCI = %+v", e)
	}
	if got := medianOf([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Fatalf("medianOf = %v", got)
	}
}
