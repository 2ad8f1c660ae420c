package bench

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/locus-go/locus/internal/race"
)

// The numbers of the LOCUS-EVAL v1 specification, pinned.
func TestPlanNumbers(t *testing.T) {
	for _, tc := range []struct {
		w               *Workload
		blocks, peak    int
		steps           int
		workerBlocks    []int
		firstStepAllocs []int
	}{
		{SteadyDecode, 2688, 1344, 64, []int{688, 656, 672, 672},
			[]int{68, 72, 76, 80, 84, 88, 92, 96, 99, 102, 105, 108, 111, 114, 117, 120, 54, 52, 50, 48}},
		{BurstStorm, 2688, 1537, 49, []int{672, 672, 672, 672},
			[]int{1088, 64, 64, 64, 64, 64, 64, 64, 48, 48, 48, 48, 48, 48, 48, 48, 32}},
		{LongTail, 6016, 4168, 527, []int{1504, 1504, 1504, 1504},
			[]int{68, 72, 76, 80, 84, 88, 92, 96, 100, 104, 108, 112, 116, 120, 124, 128}},
		{ChurnTouch, 1024, 4096, 64, []int{256, 256, 256, 256}, nil},
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
			if !slices.Equal(p.WorkerBlocks, tc.workerBlocks) {
				t.Errorf("worker blocks = %v, want %v", p.WorkerBlocks, tc.workerBlocks)
			}
			if !slices.Equal(p.WorkerRequests, []int{16, 16, 16, 16}) {
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

// Every contender passes its gates on every workload with the one-byte
// touch, and a few (a locus pool, a bounded one, the checked and a
// third-party peer) also with the full and no touch and paced; the sampled
// peak (taken at step ends) is at least 99 % of the theoretical peak (which
// also counts mid-step highs).
func TestContendersGates(t *testing.T) {
	few := []string{"locus-mailbox", "locus-sharded-chunk", "mutex-freelist-checked", "go-buffer-pool"}
	cfgs := []Config{{Touch: TouchByte}, {Touch: TouchFull}, {Touch: TouchNone}, {Touch: TouchByte, Pace: 2 * time.Microsecond}}
	ws := Workloads()
	if testing.Short() {
		cfgs = cfgs[:1]
	}
	if race.Enabled { // ten times slower: every contender still runs a trace workload and churn
		cfgs, ws = []Config{cfgs[0], cfgs[3]}, []*Workload{SteadyDecode, ChurnTouch}
	}
	for i, cfg := range cfgs {
		cfg.WarmupTraces = 1
		for _, e := range Contenders() {
			if i > 0 && !slices.Contains(few, e.Name) {
				continue
			}
			for _, w := range ws {
				r, err := Open(e, w, cfg)
				if err != nil {
					t.Errorf("touch=%s pace=%v %s/%s: %v", cfg.Touch, cfg.Pace, w.Name, e.Name, err)
					continue
				}
				for range 2 {
					tr, err := r.Trace(true)
					if err != nil {
						t.Errorf("touch=%s pace=%v %s/%s: %v", cfg.Touch, cfg.Pace, w.Name, e.Name, err)
						break
					}
					if tr.Owner <= 0 || float64(tr.Peak) < 0.99*float64(r.Plan().TheoreticalPeak) || tr.MeanLive <= 0 || tr.MeanLive > float64(tr.Peak) {
						t.Errorf("touch=%s pace=%v %s/%s: implausible trace %+v (theoretical peak %d)",
							cfg.Touch, cfg.Pace, w.Name, e.Name, tr, r.Plan().TheoreticalPeak)
					}
				}
				if err := r.Close(); err != nil {
					t.Errorf("%s/%s: close: %v", w.Name, e.Name, err)
				}
			}
		}
	}
}

// leaky loses one block of every list it frees: the per-trace gate must
// catch it.
type leaky struct{ mutexFreelist }

func (c *leaky) open(plan *Plan, touch TouchMode) error {
	if err := c.mutexFreelist.open(plan, touch); err != nil {
		return err
	}
	c.ws.stop()
	c.ws = workers{}
	c.ws.start(plan.Workers, func(w int, l int32) int {
		c.lists[l] = c.lists[l][1:]
		return c.putList(w, l) + 1
	})
	return nil
}

func TestGatesCatchLostBlocks(t *testing.T) {
	e := Entry{Name: "leaky", new: func() contender { return new(leaky) }}
	r, err := Open(e, SteadyDecode, Config{})
	if err == nil {
		_, err = r.Trace(false)
		_ = r.Close()
	}
	if err == nil {
		t.Fatal("a contender that loses blocks passed its gates")
	}
}

func TestUnknownNames(t *testing.T) {
	if _, err := ContenderByName("nope"); !errors.Is(err, ErrUnknown) {
		t.Errorf("ContenderByName: %v", err)
	}
	if _, err := WorkloadByName("nope"); !errors.Is(err, ErrUnknown) {
		t.Errorf("WorkloadByName: %v", err)
	}
	if _, err := OpenCycle(CycleConfig{Transport: "nope", Producers: 1}); !errors.Is(err, ErrUnknown) {
		t.Errorf("OpenCycle: %v", err)
	}
	if _, err := OpenReuse(ReuseConfig{Backing: "nope", Policy: "lifo"}); !errors.Is(err, ErrUnknown) {
		t.Errorf("OpenReuse: %v", err)
	}
	if _, err := OpenCycle(CycleConfig{Transport: "shared", Producers: 3, Batch: 8}); err == nil {
		t.Error("OpenCycle accepted 3 producers for 256 blocks")
	}
	if _, err := ContenderByName("locus-allocchunk"); err != nil {
		t.Errorf("locus-allocchunk: %v", err)
	}
}

func TestCycleAndReuse(t *testing.T) {
	var rs []Runner
	for _, c := range []CycleConfig{{"shared", 1, 8}, {"shared", 4, 256}, {"sharded", 2, 0}, {"sharded-chunk", 4, 0}} {
		r, err := OpenCycle(c)
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		rs = append(rs, r)
	}
	for _, c := range []ReuseConfig{{"heap", "lifo", true}, {"heap", "fifo", false}, {"mmap", "lifo", true}} {
		r, err := OpenReuse(c)
		if err != nil {
			t.Logf("%s: %v (skipped)", c, err)
			continue
		}
		rs = append(rs, r)
	}
	for _, r := range rs {
		for range 3 {
			if tr, err := r.Trace(false); err != nil || tr.Owner <= 0 {
				t.Fatalf("trace %+v: %v", tr, err)
			}
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Trace(false); err == nil {
			t.Fatal("Trace after Close succeeded")
		}
	}
}

// The floor has no goroutines, so its allocation count is exact: nothing
// per trace.
func TestInlineAllocatesNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("allocation counts are not checked under the race detector (and it makes this slow)")
	}
	e, err := ContenderByName("locus-inline")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range Workloads() {
		r, err := Open(e, w, Config{})
		if err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(5, func() {
			if _, err := r.Trace(false); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("%s: %v allocations per trace, want 0", w.Name, n)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// Scaled workloads keep the v1 schedule's blocks and spread its requests
// over more workers; the free-cycle grows with its workers.
func TestScaledPlans(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		workers, requests        int
		blocks, steps, peak, per int // per: blocks per worker
	}{
		{"steady-decode@w8", 8, 64, 2688, 64, 1344, 0},
		{"steady-decode@w16", 16, 64, 2688, 64, 1344, 0},
		{"free-cycle", Workers, 32, 512, 1, 512, 128},
		{"free-cycle@w1", 1, 8, 128, 1, 128, 128},
		{"free-cycle@w16", 16, 128, 2048, 1, 2048, 128},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := WorkloadByName(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if again, _ := WorkloadByName(tc.name); again != w {
				t.Error("WorkloadByName returned a new workload for the same name")
			}
			p := NewPlan(w)
			if p.Workers != tc.workers || len(p.WorkerBlocks) != tc.workers || len(p.Dispatches) != tc.requests ||
				p.BlocksPerTrace != tc.blocks || p.Steps != tc.steps || p.TheoreticalPeak != tc.peak {
				t.Fatalf("workers %d (%d), dispatches %d, blocks %d, steps %d, peak %d; want %d, %d, %d, %d, %d",
					p.Workers, len(p.WorkerBlocks), len(p.Dispatches), p.BlocksPerTrace, p.Steps, p.TheoreticalPeak,
					tc.workers, tc.requests, tc.blocks, tc.steps, tc.peak)
			}
			sum := 0
			for i, b := range p.WorkerBlocks {
				sum += b
				if tc.per > 0 && b != tc.per {
					t.Errorf("worker %d frees %d blocks, want %d", i, b, tc.per)
				}
			}
			if sum != tc.blocks {
				t.Errorf("workers free %d blocks, want %d", sum, tc.blocks)
			}
		})
	}
	for _, bad := range []string{"churn-touch@w8", "steady-decode@w0", "steady-decode@w65", "steady-decode@w08", "steady-decode@w", "nope@w4"} {
		if _, err := WorkloadByName(bad); !errors.Is(err, ErrUnknown) {
			t.Errorf("WorkloadByName(%q) = %v, want ErrUnknown", bad, err)
		}
	}
}

// Every contender replays scaled workloads with its gates holding.
func TestScaledRigs(t *testing.T) {
	names := []string{"free-cycle@w1", "free-cycle@w4", "steady-decode@w8"}
	if testing.Short() {
		names = names[:2]
	}
	for _, name := range names {
		w, err := WorkloadByName(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range Contenders() {
			t.Run(name+"/"+e.Name, func(t *testing.T) {
				r, err := Open(e, w, Config{WarmupTraces: 1})
				if err != nil {
					t.Fatal(err)
				}
				for range 3 {
					if _, err := r.Trace(true); err != nil {
						t.Fatal(err)
					}
				}
				if err := r.Close(); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}
