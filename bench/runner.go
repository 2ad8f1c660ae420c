package bench

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"
)

// Options configures how cells are measured.
type Options struct {
	// Touch is the touch mode of the trace workloads (churn-touch always
	// writes whole blocks).
	Touch TouchMode
	// RunTime is how long one run times traces (at least MinTraces).
	RunTime time.Duration
	// MinTraces and MaxTraces bound the timed traces of one run.
	MinTraces, MaxTraces int
	// Runs is the number of runs per cell, at least 2; a third is added
	// when the first two medians differ by more than ThirdRunPct percent.
	Runs int
	// ThirdRunPct is the third-run trigger, in percent (the record's 5).
	ThirdRunPct float64
	// Warmup and WarmupTraces bound the untimed warm-up traces that follow
	// the sample pass (whichever is reached first).
	Warmup       time.Duration
	WarmupTraces int
	// Progress, if set, is called before each run with a one-line status.
	Progress func(line string)
}

// DefaultOptions returns the scoreboard defaults: one-byte touch, 2 runs
// of 500 ms each, third run above 5 %.
func DefaultOptions() Options {
	return Options{Touch: TouchByte, RunTime: 500 * time.Millisecond, MinTraces: 20, MaxTraces: 20000,
		Runs: 2, ThirdRunPct: 5, Warmup: 40 * time.Millisecond, WarmupTraces: 64}
}

// QuickOptions returns options for tests and smoke runs: tiny runs.
func QuickOptions() Options {
	o := DefaultOptions()
	o.RunTime = 5 * time.Millisecond
	o.MinTraces, o.MaxTraces = 3, 50
	o.Warmup, o.WarmupTraces = time.Millisecond, 1
	return o
}

func (o *Options) fix() {
	d := DefaultOptions()
	if o.RunTime <= 0 {
		o.RunTime = d.RunTime
	}
	if o.MinTraces <= 0 {
		o.MinTraces = 1
	}
	if o.MaxTraces < o.MinTraces {
		o.MaxTraces = max(o.MinTraces, d.MaxTraces)
	}
	if o.Runs < 2 {
		o.Runs = 2
	}
	if o.Warmup <= 0 {
		o.Warmup = d.Warmup
	}
	if o.WarmupTraces <= 0 {
		o.WarmupTraces = d.WarmupTraces
	}
	if o.ThirdRunPct <= 0 {
		o.ThirdRunPct = d.ThirdRunPct
	}
}

// Run is the outcome of one run of one cell.
type Run struct {
	// Time is the median per-trace time in µs with its 95 % CI.
	Time Estimate
	// Traces is the number of timed traces.
	Traces int
	// Peak is the sample pass's peak of outstanding blocks.
	Peak int
	// GCPerTrace and BytesPerTrace are GC cycles and heap bytes allocated
	// per timed trace (runtime/metrics deltas over the timed traces).
	GCPerTrace, BytesPerTrace float64
	// Err is the first gate failure, nil when every gate held.
	Err error
}

var metricNames = []string{"/gc/cycles/total:gc-cycles", "/gc/heap/allocs:bytes"}

// gcCounts returns the GC cycle count and cumulative heap bytes allocated.
func gcCounts(s []metrics.Sample) (gcs, bytes uint64) {
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 {
		gcs = s[0].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		bytes = s[1].Value.Uint64()
	}
	return gcs, bytes
}

// tracer replays plans on one opened contender.
type tracer struct {
	c     Contender
	p     *Plan
	alloc uint64 // counts at the end of the last trace
	freed uint64
	t     int // churn: global step
}

// slotIDs[i] == i: one-list slices for churn's Alloc calls.
var slotIDs = func() []int32 {
	s := make([]int32, churnSlots)
	for i := range s {
		s[i] = int32(i)
	}
	return s
}()

func openTracer(c Contender, p *Plan, touch TouchMode) (*tracer, error) {
	if err := c.Open(p, effectiveTouch(p.Workload, touch)); err != nil {
		return nil, err
	}
	tr := &tracer{c: c, p: p}
	if p.Workload.Churn {
		// Steady state: 256 chunks of 16 blocks, fully written with 0xA5.
		c.SetFill(ChurnSetupFill)
		for i := range ChurnLiveChunks {
			if err := c.Alloc(slotIDs[i:i+1], ChurnChunkBlocks); err != nil {
				return tr, err
			}
		}
	}
	tr.alloc, tr.freed = c.Counts()
	return tr, nil
}

// live is the number of blocks live between traces.
func (tr *tracer) live() int {
	if tr.p.Workload.Churn {
		return ChurnLiveChunks * ChurnChunkBlocks
	}
	return 0
}

// trace runs one trace (or churn run); with sample set it tracks the peak of
// outstanding blocks at every step end. It does not check counts: see gate.
func (tr *tracer) trace(sample bool) (peak int, err error) {
	if tr.p.Workload.Churn {
		return tr.churn(sample)
	}
	c, p := tr.c, tr.p
	for s := range p.Steps {
		if _, err := c.Drain(); err != nil {
			return 0, err
		}
		for _, o := range p.ops[p.stepOps[s]:p.stepOps[s+1]] {
			switch o.kind {
			case opPrefill:
				err = c.Alloc(p.lists[o.a:o.a+o.b], Prefill)
			case opDecode:
				err = c.Alloc(p.lists[o.a:o.a+o.b], 1)
			default:
				err = c.Dispatch(int(o.a), int(o.b))
			}
			if err != nil {
				return 0, err
			}
		}
		if _, err := c.Drain(); err != nil {
			return 0, err
		}
		if sample {
			_, f := c.Counts()
			peak = max(peak, int(p.allocd[s])-int(f-tr.freed))
		}
	}
	return peak, c.Wait(tr.freed + uint64(p.BlocksPerTrace))
}

// churn runs one churn-touch run (§2.5).
func (tr *tracer) churn(sample bool) (peak int, err error) {
	c := tr.c
	dispatched, inFlight := 0, 0
	for s := range ChurnSteps {
		oldest := tr.t % churnSlots
		fresh := (tr.t + ChurnLiveChunks) % churnSlots
		tr.t++
		if err := c.Dispatch(oldest, s%Workers); err != nil {
			return 0, err
		}
		dispatched += ChurnChunkBlocks
		if err := c.Alloc(slotIDs[fresh:fresh+1], ChurnChunkBlocks); err != nil {
			return 0, err
		}
		if _, err := c.Drain(); err != nil {
			return 0, err
		}
		if sample {
			_, f := c.Counts()
			inFlight = max(inFlight, dispatched-min(int(f-tr.freed), dispatched))
		}
	}
	return ChurnLiveChunks*ChurnChunkBlocks + inFlight, c.Wait(tr.freed + uint64(tr.p.BlocksPerTrace))
}

// gate checks the last trace's counts: allocated = freed = blocks per
// trace. It then makes the current counts the next trace's base.
func (tr *tracer) gate() error {
	a, f := tr.c.Counts()
	da, df := a-tr.alloc, f-tr.freed
	tr.alloc, tr.freed = a, f
	if want := uint64(tr.p.BlocksPerTrace); da != want || df != want {
		return fmt.Errorf("trace allocated %d freed %d, want %d each", da, df, want)
	}
	return nil
}

// RunOnce opens a fresh contender of e for workload w, runs the untimed
// sample pass (SampleRounds traces, which also warm it up, checking the
// gates and recording the peak), then times traces for o.RunTime, checks
// the gates of every trace and the contender's own gates, and closes it.
func RunOnce(e Entry, w *Workload, o Options) Run {
	o.fix()
	p := planFor(w)
	var r Run
	c := e.New()
	tr, err := openTracer(c, p, o.Touch)
	if err != nil {
		r.Err = errors.Join(err, c.Close())
		return r
	}
	r, err = tr.measure(o)
	if err == nil {
		err = c.Check(tr.live())
	}
	r.Err = errors.Join(err, c.Close())
	return r
}

func (tr *tracer) measure(o Options) (Run, error) {
	var r Run
	for i := range SampleRounds {
		if tr.p.Workload.Churn {
			tr.c.SetFill(byte(i))
		}
		peak, err := tr.trace(true)
		if err != nil {
			return r, err
		}
		if err := tr.gate(); err != nil {
			return r, fmt.Errorf("sample pass: %w", err)
		}
		r.Peak = max(r.Peak, peak)
	}
	if err := tr.c.Check(tr.live()); err != nil {
		return r, fmt.Errorf("after sample pass: %w", err)
	}
	if tr.p.Workload.Churn {
		tr.c.SetFill(ChurnTimedFill)
	}
	// Untimed warm-up beyond the sample pass: transports that recycle
	// nodes (the mailboxes) allocate until they have carried their largest
	// chunks at their deepest backlog; after that they allocate nothing.
	for start, i := time.Now(), 0; i < o.WarmupTraces && time.Since(start) < o.Warmup; i++ {
		if _, err := tr.trace(false); err != nil {
			return r, err
		}
		if err := tr.gate(); err != nil {
			return r, fmt.Errorf("warm-up: %w", err)
		}
	}
	runtime.GC()
	samples := make([]float64, 0, o.MaxTraces)
	ms := make([]metrics.Sample, len(metricNames))
	for i, n := range metricNames {
		ms[i].Name = n
	}
	gc0, b0 := gcCounts(ms)
	start := time.Now()
	for len(samples) < o.MaxTraces && (len(samples) < o.MinTraces || time.Since(start) < o.RunTime) {
		t0 := time.Now()
		_, err := tr.trace(false)
		d := time.Since(t0)
		if err != nil {
			return r, err
		}
		if err := tr.gate(); err != nil {
			return r, err
		}
		samples = append(samples, float64(d.Nanoseconds())/1e3)
	}
	gc1, b1 := gcCounts(ms)
	r.Traces = len(samples)
	r.GCPerTrace = float64(gc1-gc0) / float64(r.Traces)
	r.BytesPerTrace = float64(b1-b0) / float64(r.Traces)
	r.Time = medianCI(samples)
	return r, nil
}

var (
	plansMu sync.Mutex
	plans   = map[*Workload]*Plan{}
)

// planFor returns w's plan, computing it once per workload.
func planFor(w *Workload) *Plan {
	plansMu.Lock()
	defer plansMu.Unlock()
	p, ok := plans[w]
	if !ok {
		p = NewPlan(w)
		plans[w] = p
	}
	return p
}

// Benchmark runs one cell as a testing.B benchmark: it opens a fresh
// contender, runs the sample pass (gates and peak), then times b.N traces,
// checking the gates of each. It reports the sample-pass quality and the
// peak as extra metrics; ns/op is the mean per-trace time (benchstat's
// statistic, not the scoreboard's median).
func Benchmark(b *testing.B, e Entry, w *Workload, touch TouchMode) {
	p := planFor(w)
	c := e.New()
	tr, err := openTracer(c, p, touch)
	if err != nil {
		_ = c.Close()
		b.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			b.Error(err)
		}
	}()
	peak := 0
	for i := range SampleRounds {
		if w.Churn {
			c.SetFill(byte(i))
		}
		pk, err := tr.trace(true)
		if err == nil {
			err = tr.gate()
		}
		if err != nil {
			b.Fatal(err)
		}
		peak = max(peak, pk)
	}
	if w.Churn {
		c.SetFill(ChurnTimedFill)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := tr.trace(false); err != nil {
			b.Fatal(err)
		}
		if err := tr.gate(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if err := c.Check(tr.live()); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(peak), "peak")
	b.ReportMetric(float64(peak)/float64(p.TheoreticalPeak), "quality")
}
