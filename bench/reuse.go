package bench

import (
	"errors"
	"fmt"
	"time"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/backing/mmap"
	"github.com/locus-go/locus/policy/fifo"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
)

// The reuse-order harness R of the design thread (0358, 0359): one
// goroutine, a pool of ReuseBlocks blocks, a FIFO window of 256 chunks of
// 16 blocks; one cycle is 64 steps of "free the oldest chunk, allocate 16
// blocks, write each whole block (touch cases) with the step number through
// the validated accessor, append the chunk".

// ReuseBlocks is harness R's pool size (64 MiB of 4 KiB blocks).
const ReuseBlocks = 16384

const reuseSetupCycles = 4

// ReuseConfig is one configuration of harness R.
type ReuseConfig struct {
	// Backing is "heap" or "mmap"; Policy is "lifo" or "fifo".
	Backing, Policy string
	// Touch writes every new block whole (4 KiB) when set.
	Touch bool
}

// String names the configuration, e.g. "heap lifo touch4k".
func (c ReuseConfig) String() string {
	t := "notouch"
	if c.Touch {
		t = "touch4k"
	}
	return c.Backing + " " + c.Policy + " " + t
}

type reuseRig[B pool.Backing, P pool.ReusePolicy] struct {
	p      *pool.Pool[B, *mailbox.Transport, P]
	window [ChurnLiveChunks][ChurnChunkBlocks]pool.Handle
	head   int // oldest chunk
	touch  bool
	fills  *[ChurnSteps][BlockSize]byte // fills[s] is all byte s
	err    error
}

// OpenReuse builds harness R's steady state for cfg: 256 live chunks, then
// 4 untimed setup cycles. Each Trace is one cycle of 64 steps (1024 blocks
// freed and allocated); nothing is sampled.
func OpenReuse(cfg ReuseConfig) (Runner, error) {
	var r Runner
	var err error
	switch cfg.Backing + "/" + cfg.Policy {
	case "heap/lifo":
		r, err = newReuseRig(heap.New, lifo.Policy{}, cfg.Touch)
	case "heap/fifo":
		r, err = newReuseRig(heap.New, fifo.Policy{}, cfg.Touch)
	case "mmap/lifo":
		r, err = newReuseRig(newMmap, lifo.Policy{}, cfg.Touch)
	case "mmap/fifo":
		r, err = newReuseRig(newMmap, fifo.Policy{}, cfg.Touch)
	default:
		return nil, fmt.Errorf("%w: reuse configuration %q", ErrUnknown, cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("reuse %s: %w", cfg, err)
	}
	return r, nil
}

func newMmap(size, blocks int) (*mmap.Backing, error) { return mmap.New(size, blocks) }

func newReuseRig[B pool.Backing, P pool.ReusePolicy](back func(size, blocks int) (B, error), pol P, touch bool) (*reuseRig[B, P], error) {
	b, err := back(BlockSize, ReuseBlocks)
	if err != nil {
		return nil, err
	}
	p, err := pool.New(b, mailbox.New(), pol)
	if err != nil {
		return nil, errors.Join(err, b.Close())
	}
	r := &reuseRig[B, P]{p: p, touch: touch, fills: new([ChurnSteps][BlockSize]byte)}
	for s := range r.fills {
		for i := range r.fills[s] {
			r.fills[s][i] = byte(s)
		}
	}
	fail := func(err error) (*reuseRig[B, P], error) { return nil, errors.Join(err, p.Close()) }
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

func (r *reuseRig[B, P]) alloc(slot int, v byte) error {
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

func (r *reuseRig[B, P]) cycle() error {
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

// Trace runs one cycle and checks that the pool still balances.
func (r *reuseRig[B, P]) Trace(bool) (Trace, error) {
	if r.err != nil {
		return Trace{}, r.err
	}
	start := time.Now()
	err := r.cycle()
	d := time.Since(start)
	if st := r.p.Stats(); err == nil && (st.Live != ChurnLiveChunks*ChurnChunkBlocks || st.Rejected != 0) {
		err = fmt.Errorf("live %d rejected %d, want 4096 and 0", st.Live, st.Rejected)
	}
	if err != nil {
		r.err = err
		return Trace{}, err
	}
	return Trace{Owner: d, Steps: ChurnSteps}, nil
}

// Close frees every live chunk, checks the pool balances and closes it.
func (r *reuseRig[B, P]) Close() error {
	if r.p == nil {
		return nil
	}
	var err error
	for slot := range r.window {
		if err = r.p.FreeChunk(r.window[slot][:]); err != nil {
			break
		}
	}
	if st := r.p.Stats(); err == nil && (st.Live != 0 || st.Rejected != 0) {
		err = fmt.Errorf("teardown: live %d rejected %d", st.Live, st.Rejected)
	}
	err = errors.Join(err, r.p.Close())
	r.p = nil
	if r.err == nil {
		r.err = errors.New("bench: rig closed")
	}
	return err
}
