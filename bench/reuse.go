package bench

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/locus-go/locus/pool"
)

// The reuse-order harness R of design thread §1.C (0358, 0359): one
// goroutine, a pool of ReuseBlocks blocks, a FIFO window of 256 chunks of
// 16 blocks; one cycle is 64 steps of "free the oldest chunk, allocate 16
// blocks, write each whole block (touch cases) with the step number through
// the validated accessor, append the chunk".

// ReuseBlocks is harness R's pool size (64 MiB of 4 KiB blocks).
const ReuseBlocks = 16384

const reuseSetupCycles = 4

type reuseRig[B pool.Backing, T pool.Transport, P pool.ReusePolicy] struct {
	p      *pool.Pool[B, T, P]
	window [ChurnLiveChunks][ChurnChunkBlocks]pool.Handle
	head   int // oldest chunk
	touch  bool
	fills  *[ChurnSteps][BlockSize]byte // fills[s] is all byte s
}

func (r *reuseRig[B, T, P]) alloc(slot int, v byte) error {
	for i := range r.window[slot] {
		h, err := r.p.Alloc()
		if err != nil {
			return err
		}
		if r.touch {
			b, err := r.p.Bytes(h)
			if err != nil {
				return err
			}
			copy(b, r.fills[v%ChurnSteps][:])
		}
		r.window[slot][i] = h
	}
	return nil
}

func (r *reuseRig[B, T, P]) cycle() error {
	for s := range ChurnSteps {
		slot := r.head
		r.head = (r.head + 1) % ChurnLiveChunks
		if err := r.p.FreeChunk(r.window[slot][:]); err != nil {
			return err
		}
		if err := r.alloc(slot, byte(s)); err != nil {
			return err
		}
	}
	return nil
}

// newReuseRig builds harness R's steady state on a pool from build: 256
// live chunks, then the untimed setup cycles.
func newReuseRig[B pool.Backing, T pool.Transport, P pool.ReusePolicy](build func(int) (*pool.Pool[B, T, P], error), touch bool) (*reuseRig[B, T, P], error) {
	p, err := build(ReuseBlocks)
	if err != nil {
		return nil, err
	}
	r := &reuseRig[B, T, P]{p: p, touch: touch, fills: new([ChurnSteps][BlockSize]byte)}
	for s := range r.fills {
		for i := range r.fills[s] {
			r.fills[s][i] = byte(s)
		}
	}
	fail := func(err error) (*reuseRig[B, T, P], error) { return nil, errors.Join(err, p.Close()) }
	for slot := range ChurnLiveChunks {
		if err := r.alloc(slot, 0); err != nil {
			return fail(err)
		}
	}
	for range reuseSetupCycles {
		if err := r.cycle(); err != nil {
			return fail(err)
		}
	}
	if st := p.Stats(); st.Live != ChurnLiveChunks*ChurnChunkBlocks || st.Free != ReuseBlocks-st.Live {
		return fail(fmt.Errorf("setup: live %d free %d, want 4096 and 12288", st.Live, st.Free))
	}
	return r, nil
}

// close frees every live chunk, checks the pool balances and closes it.
func (r *reuseRig[B, T, P]) close() error {
	var err error
	for slot := range r.window {
		if err = r.p.FreeChunk(r.window[slot][:]); err != nil {
			break
		}
	}
	if st := r.p.Stats(); err == nil && (st.Live != 0 || st.Rejected != 0) {
		err = fmt.Errorf("teardown: live %d rejected %d", st.Live, st.Rejected)
	}
	return errors.Join(err, r.p.Close())
}

// runReuse measures one harness-R configuration on a pool from build.
func runReuse[B pool.Backing, T pool.Transport, P pool.ReusePolicy](build func(int) (*pool.Pool[B, T, P], error), touch bool, o Options) (run Run) {
	r, err := newReuseRig(build, touch)
	if err != nil {
		run.Err = err
		return run
	}
	defer func() { run.Err = errors.Join(run.Err, r.close()) }()
	runtime.GC()
	samples := make([]float64, 0, o.MaxTraces)
	start := time.Now()
	for len(samples) < o.MaxTraces && (len(samples) < o.MinTraces || time.Since(start) < o.RunTime) {
		t0 := time.Now()
		err := r.cycle()
		d := time.Since(t0)
		if err != nil {
			run.Err = err
			return run
		}
		samples = append(samples, float64(d.Nanoseconds())/1e3)
	}
	run.Traces = len(samples)
	run.Time = medianCI(samples)
	return run
}
