package bench

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// The LOCUS-EVAL v1 constants of the LOCUS record. They are the versioned
// unit of the suite: changing any of them makes a new suite version.
const (
	// Suite names the frozen workload suite this package replays.
	Suite = "LOCUS-EVAL v1"
	// BlockSize is the size of every block, in bytes.
	BlockSize = 4096
	// Workers is the number of worker goroutines that free finished
	// requests (a Workload's Workers field can change it for scaling runs).
	Workers = 4
	// Requests is the number of requests per trace (a Workload's Requests
	// field can change it).
	Requests = 64
	// MaxWorkers is the most worker goroutines a scaled workload may have.
	MaxWorkers = 64
	// CycleRequestsPerWorker is the number of 16-block requests each worker
	// frees per free-cycle.
	CycleRequestsPerWorker = 8
	// Prefill is the number of blocks a request takes when it is admitted.
	Prefill = 16
	// CancelDecode is the decode length of an "early cancel" request.
	CancelDecode = 8
	// TracePoolBlocks is the pool size of locus contenders on trace workloads.
	TracePoolBlocks = 8192
	// ChurnPoolBlocks is the pool size of locus contenders on churn-touch.
	ChurnPoolBlocks = 16384
	// ChurnLiveChunks is the number of live chunks in churn's steady state.
	ChurnLiveChunks = 256
	// ChurnChunkBlocks is the number of blocks per churn chunk.
	ChurnChunkBlocks = 16
	// ChurnSteps is the number of churn steps per run (one "trace").
	ChurnSteps = 64
	// ChurnSetupFill is the byte written into the steady-state blocks.
	ChurnSetupFill = 0xA5
	// ChurnTimedFill is the byte written into new churn blocks in timed runs;
	// sample rounds write the round number.
	ChurnTimedFill = 0x5A
	// WorkerChannel is the capacity of every worker's command channel.
	WorkerChannel = 64
	// SampleRounds is the number of gate-checked traces Open runs first
	// (the record's sample pass).
	SampleRounds = 4
)

// Workload is one LOCUS-EVAL workload: a trace workload (requests arriving,
// decoding and finishing) or the churn workload.
type Workload struct {
	// Name is the workload's name in results, e.g. "steady-decode".
	Name string
	// Doc says in one line what the workload models.
	Doc string
	// Churn is true for churn-touch, false for the trace workloads.
	Churn bool
	// ArrivalsPerStep is how many requests are admitted per step (trace
	// workloads only).
	ArrivalsPerStep int
	// Decode returns the decode length of request r (trace workloads only).
	Decode func(r int) int
	// Workers is the number of worker goroutines (0: the v1 value,
	// Workers). Scaling runs set it with Scaled.
	Workers int
	// Requests is the number of requests per trace (0: the v1 value,
	// Requests).
	Requests int
	// PerWorker marks a workload whose request count grows with its
	// workers (CycleRequestsPerWorker each): the free-cycle.
	PerWorker bool
}

// workers returns the workload's worker count.
func (w *Workload) workers() int {
	if w.Workers > 0 {
		return w.Workers
	}
	return Workers
}

// requests returns the workload's requests per trace.
func (w *Workload) requests() int {
	if w.Requests > 0 {
		return w.Requests
	}
	return Requests
}

// Scaled returns a copy of w with n workers, named "NAME@wN"; a
// per-worker workload (the free-cycle) also gets
// CycleRequestsPerWorker requests per worker. Use it for scaling runs; the
// v1 suite runs the workloads as they are.
func (w *Workload) Scaled(n int) (*Workload, error) {
	if n < 1 || n > MaxWorkers {
		return nil, fmt.Errorf("%w: %d workers (want 1 to %d)", ErrUnknown, n, MaxWorkers)
	}
	if w.Churn {
		return nil, fmt.Errorf("%w: %s cannot be scaled", ErrUnknown, w.Name)
	}
	s := *w
	s.Name = fmt.Sprintf("%s@w%d", w.Name, n)
	s.Workers = n
	if w.PerWorker {
		s.Requests = n * CycleRequestsPerWorker
		s.ArrivalsPerStep = s.Requests
	}
	return &s, nil
}

func steadyDecodeLen(r int) int {
	if r%4 == 0 {
		return CancelDecode
	}
	return 16 + 16*(r%3)
}

func longTailDecodeLen(r int) int {
	if r%8 == 0 {
		return 512
	}
	return 16
}

// The four v1 workloads, in the record's order.
var (
	// SteadyDecode is the T-0354 schedule: 4 arrivals per step, decode
	// lengths 8 (every 4th request, the early cancel) or 16/32/48.
	SteadyDecode = &Workload{Name: "steady-decode", Doc: "4 arrivals/step; decode 8 if r%4==0 else 16+16·(r%3)",
		ArrivalsPerStep: 4, Decode: steadyDecodeLen}
	// BurstStorm admits all 64 requests at step 0, with steady-decode's
	// decode lengths.
	BurstStorm = &Workload{Name: "burst-storm", Doc: "all 64 requests arrive at step 0; steady-decode's decode lengths",
		ArrivalsPerStep: Requests, Decode: steadyDecodeLen}
	// LongTail has every 8th request decode 512 steps and the rest 16.
	LongTail = &Workload{Name: "long-tail", Doc: "4 arrivals/step; decode 512 if r%8==0 else 16",
		ArrivalsPerStep: 4, Decode: longTailDecodeLen}
	// ChurnTouch is the harness-R churn with frees routed through each
	// contender's free path and every new block fully written.
	ChurnTouch = &Workload{Name: "churn-touch", Doc: "256 live 16-block chunks; per step the oldest is freed remotely and 16 new blocks are fully written",
		Churn: true}
)

// FreeCycle is the scaling runs' cycle, the design thread's commanded
// cycle (0351–0357) in trace form: in one step the owner admits
// CycleRequestsPerWorker 16-block requests per worker, all finish at once
// and go round-robin to the workers, which free them while the owner
// drains until every block is back. Each worker frees the same amount
// whatever the worker count, so the cycle's time divided by the workers is
// the per-producer cost, flat when freeing scales. It is not part of the
// v1 suite.
var FreeCycle = &Workload{Name: "free-cycle",
	Doc:      "per worker 8 requests of 16 blocks admitted, finished and freed at once; the owner drains until all are back",
	Requests: CycleRequestsPerWorker * Workers, ArrivalsPerStep: CycleRequestsPerWorker * Workers,
	Decode:    func(int) int { return 0 },
	PerWorker: true}

// Workloads returns the v1 workloads in the record's order.
func Workloads() []*Workload { return []*Workload{SteadyDecode, BurstStorm, LongTail, ChurnTouch} }

var (
	scaledMu sync.Mutex
	scaled   = map[string]*Workload{}
)

// WorkloadByName returns the workload with the given name: a v1 workload,
// "free-cycle", or either scaled to N workers as "NAME@wN" (the same
// *Workload for the same name, so its plan is computed once).
func WorkloadByName(name string) (*Workload, error) {
	base, n, isScaled := strings.Cut(name, "@w")
	for _, w := range append(Workloads(), FreeCycle) {
		if w.Name != base {
			continue
		}
		if !isScaled {
			return w, nil
		}
		k, err := strconv.Atoi(n)
		if err != nil || strconv.Itoa(k) != n {
			break
		}
		scaledMu.Lock()
		defer scaledMu.Unlock()
		if s, ok := scaled[name]; ok {
			return s, nil
		}
		s, err := w.Scaled(k)
		if err != nil {
			return nil, err
		}
		scaled[name] = s
		return s, nil
	}
	return nil, fmt.Errorf("%w: workload %q", ErrUnknown, name)
}

// TouchMode says which bytes every contender writes into a block right
// after allocating it, on the owner goroutine.
type TouchMode uint8

// The touch modes.
const (
	// TouchByte writes one byte at TouchOffset: the v1-style trace touch.
	TouchByte TouchMode = iota
	// TouchFull writes the whole block: the "touched" variant.
	TouchFull
	// TouchNone writes nothing (the record's pre-audit locus runner). The
	// go-heap contender still zeroes every block in make.
	TouchNone
)

// TouchOffset is the fixed offset of the one-byte touch.
const TouchOffset = 0

// String returns "byte", "full" or "none".
func (m TouchMode) String() string {
	switch m {
	case TouchByte:
		return "byte"
	case TouchFull:
		return "full"
	case TouchNone:
		return "none"
	}
	return fmt.Sprintf("TouchMode(%d)", uint8(m))
}

// ParseTouchMode parses "byte", "full" or "none".
func ParseTouchMode(s string) (TouchMode, error) {
	for _, m := range []TouchMode{TouchByte, TouchFull, TouchNone} {
		if m.String() == s {
			return m, nil
		}
	}
	return 0, fmt.Errorf("%w: touch mode %q (want byte, full or none)", ErrUnknown, s)
}

// effectiveTouch is the touch a workload actually uses: churn-touch always
// writes the whole block, whatever the suite's trace touch mode.
func effectiveTouch(w *Workload, m TouchMode) TouchMode {
	if w.Churn {
		return TouchFull
	}
	return m
}
