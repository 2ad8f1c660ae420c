package eval

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/locus-go/locus/bench"
)

// GroupSpec is one interleaved group: members that are timed side by side,
// in one process, in short blocks.
type GroupSpec struct {
	// ID names the group in results, e.g. "unpaced/steady-decode".
	ID string `json:"id"`
	// Harness is "trace" (a bench workload; members are contenders),
	// "cycle" or "reuse" (design-thread harnesses; members are
	// configuration names).
	Harness string `json:"harness"`
	// Workload and Touch configure the trace harness.
	Workload string `json:"workload,omitempty"`
	Touch    string `json:"touch,omitempty"`
	// PaceNS is the pace of every step in nanoseconds (trace harness; 0 =
	// unpaced).
	PaceNS int64 `json:"pace_ns,omitempty"`
	// Members are the contenders or configurations, in display order.
	Members []string `json:"members"`
	// Rounds is the number of rounds; every round times one block of every
	// member, in a fresh random order.
	Rounds int `json:"rounds"`
	// Discard is the number of untimed (sampled) traces that open every
	// block; Traces the number of timed traces that follow.
	Discard int `json:"discard"`
	Traces  int `json:"traces"`
	// Warmup is the number of untimed traces every member runs when it is
	// opened (trace harness).
	Warmup int `json:"warmup"`
	// AllocTraces is the number of traces of the allocation pass.
	AllocTraces int `json:"alloc_traces"`
}

func (g GroupSpec) pace() time.Duration { return time.Duration(g.PaceNS) }

// MemberData is what one process measured of one member.
type MemberData struct {
	Name string `json:"name"`
	// BlockUS is, per round, the block's mean owner time per timed trace
	// in µs; rounds after a failure are missing.
	BlockUS []float64 `json:"block_us"`
	// Steps is the number of steps of one trace.
	Steps int `json:"steps"`
	// Peaks are the peaks of outstanding blocks of the sampled traces
	// (the discarded ones; in a paced group every trace).
	Peaks []int `json:"peaks,omitempty"`
	// LiveSum is the sum over sampled traces of their mean live blocks.
	LiveSum float64 `json:"live_sum,omitempty"`
	// Traces is the number of timed traces, GCs the GC cycles that ended
	// during them.
	Traces int    `json:"traces"`
	GCs    uint64 `json:"gcs"`
	// Bytes and Allocs are the heap bytes and objects allocated by the
	// AllocTraces traces of the allocation pass.
	Bytes       uint64 `json:"bytes"`
	Allocs      uint64 `json:"allocs"`
	AllocTraces int    `json:"alloc_traces"`
	// Err is the first gate failure; the member was closed then.
	Err string `json:"error,omitempty"`
}

// GroupData is what one process measured of one group.
type GroupData struct {
	ID      string       `json:"id"`
	Members []MemberData `json:"members"`
	// Seconds is the group's wall time in this process.
	Seconds float64 `json:"seconds"`
}

// open opens member m of group g.
func (g GroupSpec) open(m string) (bench.Runner, error) {
	switch g.Harness {
	case "trace":
		w, err := bench.WorkloadByName(g.Workload)
		if err != nil {
			return nil, err
		}
		e, err := bench.ContenderByName(m)
		if err != nil {
			return nil, err
		}
		touch, err := bench.ParseTouchMode(g.Touch)
		if err != nil {
			return nil, err
		}
		return bench.Open(e, w, bench.Config{Touch: touch, Pace: g.pace(), WarmupTraces: g.Warmup})
	case "cycle":
		c, ok := cycleConfigs[m]
		if !ok {
			return nil, fmt.Errorf("%w: cycle configuration %q", bench.ErrUnknown, m)
		}
		return bench.OpenCycle(c)
	case "reuse":
		c, ok := reuseConfigs[m]
		if !ok {
			return nil, fmt.Errorf("%w: reuse configuration %q", bench.ErrUnknown, m)
		}
		return bench.OpenReuse(c)
	}
	return nil, fmt.Errorf("%w: harness %q", bench.ErrUnknown, g.Harness)
}

// blocks is the number of blocks a group times: its progress units.
func (g GroupSpec) blocks() int { return g.Rounds * len(g.Members) }

// runGroup opens every member of g (in a shuffled order, so memory layout
// differs between processes), then runs g.Rounds rounds: each round visits
// the members in a fresh random order and times one block of each. A block
// is g.Discard sampled, untimed traces followed by g.Traces timed ones; the
// block's value is the timed traces' mean owner time. A member whose gates
// fail is closed and left out of later rounds. done is called after every
// block.
func runGroup(g GroupSpec, rng *rand.Rand, done func()) (GroupData, error) {
	start := time.Now()
	out := GroupData{ID: g.ID, Members: make([]MemberData, len(g.Members))}
	rs := make([]bench.Runner, len(g.Members))
	defer func() {
		for _, r := range rs {
			if r != nil {
				_ = r.Close()
			}
		}
	}()
	for i, m := range g.Members {
		out.Members[i].Name = m
	}
	fail := func(i int, err error) {
		out.Members[i].Err = err.Error()
		if rs[i] != nil {
			if cerr := rs[i].Close(); cerr != nil {
				out.Members[i].Err += "; close: " + cerr.Error()
			}
			rs[i] = nil
		}
	}
	for _, i := range rng.Perm(len(g.Members)) {
		r, err := g.open(g.Members[i])
		if err != nil {
			if errors.Is(err, bench.ErrUnknown) {
				return out, err
			}
			fail(i, err)
			continue
		}
		rs[i] = r
	}
	runtime.GC()
	ms := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	paced := g.PaceNS > 0
	for range g.Rounds {
		for _, i := range rng.Perm(len(g.Members)) {
			if rs[i] != nil {
				if err := block(g, rs[i], &out.Members[i], ms, paced); err != nil {
					fail(i, err)
				}
			}
			done()
		}
	}
	allocPass(g, rs, out.Members, fail)
	for i, r := range rs {
		if r != nil {
			err := r.Close()
			rs[i] = nil
			if err != nil {
				out.Members[i].Err = "close: " + err.Error()
			}
		}
	}
	runtime.GC()
	out.Seconds = time.Since(start).Seconds()
	return out, nil
}

// gcCycles returns the number of GC cycles completed so far.
func gcCycles(s []metrics.Sample) uint64 {
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 {
		return s[0].Value.Uint64()
	}
	return 0
}

// block times one block of r into m.
func block(g GroupSpec, r bench.Runner, m *MemberData, ms []metrics.Sample, paced bool) error {
	for range g.Discard {
		tr, err := r.Trace(true)
		if err != nil {
			return err
		}
		m.Steps = tr.Steps
		if tr.Peak > 0 {
			m.Peaks = append(m.Peaks, tr.Peak)
			m.LiveSum += tr.MeanLive
		}
	}
	gc0 := gcCycles(ms)
	var owner time.Duration
	for range g.Traces {
		tr, err := r.Trace(paced)
		if err != nil {
			return err
		}
		owner += tr.Owner
		m.Steps = tr.Steps
		if paced && tr.Peak > 0 {
			m.Peaks = append(m.Peaks, tr.Peak)
			m.LiveSum += tr.MeanLive
		}
	}
	m.GCs += gcCycles(ms) - gc0
	m.Traces += g.Traces
	m.BlockUS = append(m.BlockUS, float64(owner.Nanoseconds())/1e3/float64(g.Traces))
	return nil
}

// DefaultAllocTraces is the number of traces each member runs in the
// allocation pass.
const DefaultAllocTraces = 4

// allocPass counts what every open member allocates per trace in steady
// state (after the rounds), one member at a time, with the collector off: a
// collection empties the runtime's caches of channel waiters, and refilling
// them charges whichever contender parks its workers next, which is
// harness noise, not the contender's allocation. One trace refills those
// caches, then runtime.ReadMemStats (which flushes every P's allocation
// cache, so its counts are exact) brackets g.AllocTraces traces.
func allocPass(g GroupSpec, rs []bench.Runner, ms []MemberData, fail func(int, error)) {
	if g.AllocTraces <= 0 {
		return
	}
	old := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(old)
	paced := g.PaceNS > 0
	var m0, m1 runtime.MemStats
	for i, r := range rs {
		if r == nil {
			continue
		}
		if _, err := r.Trace(paced); err != nil {
			fail(i, err)
			continue
		}
		runtime.ReadMemStats(&m0)
		for range g.AllocTraces {
			if _, err := r.Trace(paced); err != nil {
				fail(i, err)
				break
			}
		}
		runtime.ReadMemStats(&m1)
		ms[i].Bytes = m1.TotalAlloc - m0.TotalAlloc
		ms[i].Allocs = m1.Mallocs - m0.Mallocs
		ms[i].AllocTraces = g.AllocTraces
	}
	runtime.GC()
}
