package bench

import "fmt"

// The LOCUS-EVAL v1 constants of the LOCUS record. They are the versioned
// unit of the suite: changing any of them makes a new suite version.
const (
	// Suite names the frozen workload suite this package replays.
	Suite = "LOCUS-EVAL v1"
	// BlockSize is the size of every block, in bytes.
	BlockSize = 4096
	// Workers is the number of worker goroutines that free finished requests.
	Workers = 4
	// Requests is the number of requests per trace.
	Requests = 64
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

// Workloads returns the v1 workloads in the record's order.
func Workloads() []*Workload { return []*Workload{SteadyDecode, BurstStorm, LongTail, ChurnTouch} }

// WorkloadByName returns the workload with the given name.
func WorkloadByName(name string) (*Workload, error) {
	for _, w := range Workloads() {
		if w.Name == name {
			return w, nil
		}
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
