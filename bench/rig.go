package bench

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Runner runs one trace (or one cycle of a design-thread harness) per call
// and checks its gates: what a timing engine needs. A Runner belongs to one
// goroutine.
type Runner interface {
	// Trace runs one trace. With sample set it also records the peak and
	// the mean of outstanding blocks at every step end, which costs the
	// owner a count per step outside any pace. A failed gate is an error
	// and the runner must not be used further, except to Close it.
	Trace(sample bool) (Trace, error)
	// Close stops the runner's goroutines and releases its memory.
	Close() error
}

// Trace is the outcome of one trace.
type Trace struct {
	// Owner is the owner goroutine's wall time for the trace, from the
	// first drain to the end of the barrier's drain, less the pace spins:
	// pool operations, dispatch, drains and the end-of-trace wait.
	Owner time.Duration
	// Steps is the number of steps of the trace.
	Steps int
	// Peak is the most blocks outstanding (allocated and not yet back on
	// the free list) at any step end; MeanLive their mean over the step
	// ends. Both are zero unless the trace was sampled.
	Peak     int
	MeanLive float64
}

// Config says how a Rig replays its workload.
type Config struct {
	// Touch is the touch mode of the trace workloads (churn-touch always
	// writes whole blocks).
	Touch TouchMode
	// Pace, when positive, is the simulated model compute of every step:
	// after each step the owner spins for Pace while the workers run. The
	// spins are not counted in Trace.Owner.
	Pace time.Duration
	// WarmupTraces is the number of untimed, unpaced traces Open runs
	// after the first SampleRounds (which check the gates) so that
	// transports that grow their node stock reach steady state; 0 means
	// DefaultWarmup.
	WarmupTraces int
}

// DefaultWarmup is the default Config.WarmupTraces.
const DefaultWarmup = 16

// Rig is one contender opened on one workload: it replays the workload's
// plan, one trace per Trace call, and checks the proof gates of every
// trace: every block allocated in the trace is freed by its end (allocated
// = freed = blocks per trace), and the contender's own gates hold (remote
// frees submitted = drained, queues empty, nothing rejected, live blocks as
// expected).
type Rig struct {
	e     Entry
	c     contender
	p     *Plan
	pace  time.Duration
	alloc uint64 // counts at the end of the last trace
	freed uint64
	t     int // churn: global step
	err   error
}

// slotIDs[i] == i: one-list slices for churn's alloc calls.
var slotIDs = func() []int32 {
	s := make([]int32, churnSlots)
	for i := range s {
		s[i] = int32(i)
	}
	return s
}()

// Open opens a fresh contender of e on workload w and brings it to steady
// state: churn-touch's 256 live chunks, then SampleRounds traces whose
// gates must hold, then cfg.WarmupTraces untimed traces.
func Open(e Entry, w *Workload, cfg Config) (*Rig, error) {
	if e.new == nil || w == nil {
		return nil, fmt.Errorf("%w: empty contender or workload", ErrUnknown)
	}
	if cfg.Pace < 0 {
		return nil, fmt.Errorf("bench: negative pace %v", cfg.Pace)
	}
	p := planFor(w)
	c := e.new()
	if err := c.open(p, effectiveTouch(w, cfg.Touch)); err != nil {
		return nil, err
	}
	// The sample and warm-up traces run unpaced: an unpaced trace has the
	// deepest backlog (its workers mostly run at its end), so transports
	// that grow their node stock reach the size any paced trace needs.
	r := &Rig{e: e, c: c, p: p}
	fail := func(err error) (*Rig, error) { return nil, errors.Join(err, c.close()) }
	if w.Churn {
		// Steady state: 256 chunks of 16 blocks, fully written with 0xA5.
		c.setFill(ChurnSetupFill)
		for i := range ChurnLiveChunks {
			if err := c.alloc(slotIDs[i:i+1], ChurnChunkBlocks); err != nil {
				return fail(fmt.Errorf("%s/%s: %w", w.Name, e.Name, err))
			}
		}
	}
	r.alloc, r.freed = c.counts()
	warm := cfg.WarmupTraces
	if warm <= 0 {
		warm = DefaultWarmup
	}
	for i := range SampleRounds + warm {
		if w.Churn && i < SampleRounds {
			c.setFill(byte(i)) // the record's sample rounds write the round number
		}
		if _, err := r.Trace(false); err != nil {
			return fail(err)
		}
	}
	if w.Churn {
		c.setFill(ChurnTimedFill)
	}
	r.pace = cfg.Pace
	return r, nil
}

// Entry returns the rig's contender.
func (r *Rig) Entry() Entry { return r.e }

// Plan returns the rig's plan.
func (r *Rig) Plan() *Plan { return r.p }

// live is the number of blocks live between traces.
func (r *Rig) live() int {
	if r.p.Workload.Churn {
		return ChurnLiveChunks * ChurnChunkBlocks
	}
	return 0
}

// Trace runs one trace and checks its gates (see Rig).
func (r *Rig) Trace(sample bool) (Trace, error) {
	if r.err != nil {
		return Trace{}, r.err
	}
	var tr Trace
	var err error
	if r.p.Workload.Churn {
		tr, err = r.churn(sample)
	} else {
		tr, err = r.trace(sample)
	}
	if err == nil {
		err = r.gate()
	}
	if err != nil {
		r.err = fmt.Errorf("%s/%s: %w", r.p.Workload.Name, r.e.Name, err)
		return Trace{}, r.err
	}
	return tr, nil
}

// stepEnd ends step s: it records the outstanding blocks when sampling and
// spins for the pace. It returns the time spent in it when pacing (the
// sample is then taken inside the spin, so it costs the owner nothing
// measured).
func (r *Rig) stepEnd(tr *Trace, sample bool, allocated int) time.Duration {
	var t0 time.Time
	if r.pace > 0 {
		t0 = time.Now()
	}
	if sample {
		_, f := r.c.counts()
		out := allocated - int(f-r.freed)
		tr.Peak = max(tr.Peak, out)
		tr.MeanLive += float64(out)
	}
	if r.pace <= 0 {
		return 0
	}
	for {
		if d := time.Since(t0); d >= r.pace {
			return d
		}
	}
}

// trace runs one trace of a trace workload.
func (r *Rig) trace(sample bool) (tr Trace, err error) {
	c, p := r.c, r.p
	var spin time.Duration
	start := time.Now()
	for s := range p.Steps {
		if _, err := c.drain(); err != nil {
			return tr, err
		}
		for _, o := range p.ops[p.stepOps[s]:p.stepOps[s+1]] {
			switch o.kind {
			case opPrefill:
				err = c.alloc(p.lists[o.a:o.a+o.b], Prefill)
			case opDecode:
				err = c.alloc(p.lists[o.a:o.a+o.b], 1)
			default:
				err = c.dispatch(o.a, int(o.b))
			}
			if err != nil {
				return tr, err
			}
		}
		if _, err := c.drain(); err != nil {
			return tr, err
		}
		spin += r.stepEnd(&tr, sample, int(p.allocd[s]))
	}
	if err := c.barrier(); err != nil {
		return tr, err
	}
	tr.Owner = time.Since(start) - spin
	tr.Steps = p.Steps
	if sample {
		tr.MeanLive /= float64(p.Steps)
	}
	return tr, nil
}

// churn runs one churn-touch run: per step the oldest chunk goes to
// a worker, 16 new blocks are allocated and fully written, and the owner
// drains.
func (r *Rig) churn(sample bool) (tr Trace, err error) {
	c := r.c
	var spin time.Duration
	start := time.Now()
	for s := range ChurnSteps {
		oldest := r.t % churnSlots
		fresh := (r.t + ChurnLiveChunks) % churnSlots
		r.t++
		if err := c.dispatch(int32(oldest), s%r.p.Workers); err != nil {
			return tr, err
		}
		if err := c.alloc(slotIDs[fresh:fresh+1], ChurnChunkBlocks); err != nil {
			return tr, err
		}
		if _, err := c.drain(); err != nil {
			return tr, err
		}
		spin += r.stepEnd(&tr, sample, ChurnLiveChunks*ChurnChunkBlocks+(s+1)*ChurnChunkBlocks)
	}
	if err := c.barrier(); err != nil {
		return tr, err
	}
	tr.Owner = time.Since(start) - spin
	tr.Steps = ChurnSteps
	if sample {
		tr.MeanLive /= ChurnSteps
	}
	return tr, nil
}

// gate checks the last trace's counts (allocated = freed = blocks per
// trace) and the contender's own gates, then makes the current counts the
// next trace's base.
func (r *Rig) gate() error {
	a, f := r.c.counts()
	da, df := a-r.alloc, f-r.freed
	r.alloc, r.freed = a, f
	if want := uint64(r.p.BlocksPerTrace); da != want || df != want {
		return fmt.Errorf("trace allocated %d freed %d, want %d each", da, df, want)
	}
	return r.c.check(r.live())
}

// Close closes the contender.
func (r *Rig) Close() error {
	if r.c == nil {
		return nil
	}
	err := r.c.close()
	r.c = nil
	if r.err == nil {
		r.err = errors.New("bench: rig closed")
	}
	return err
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
