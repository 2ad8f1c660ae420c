package bench

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/sharded"
	"github.com/locus-go/locus/transport/shared"
)

// The commanded-cycle harness of the design thread (0351–0353): a pool of
// exactly CycleBlocks blocks; per cycle the owner allocates all of them
// into p contiguous lists, commands producer g to free list g (capacity-1
// command channels), and drains until every block is back. The clock
// covers the whole cycle on the owner.
//
// Where the record's owner spun with an OS yield when a drain round found
// nothing, this owner blocks: woken by a producer after each send, or by a
// timer for producers blocked inside a bounded send (50 µs asked; an idle
// Go process's timers fire about a millisecond late, so the drains before
// every sleep go on until one brings nothing).

// CycleBlocks is the pool size and blocks per cycle of the harness.
const CycleBlocks = 256

// cycleSampleCycles is the number of gate-checked cycles OpenCycle runs.
const cycleSampleCycles = 8

// CycleConfig is one configuration of the commanded-cycle harness.
type CycleConfig struct {
	// Transport is "shared" (one per-handle queue of CycleBlocks handles),
	// "sharded" (one per-handle queue of CycleBlocks/Producers handles per
	// producer, batch 64) or "sharded-chunk" (one queue of 2 chunks per
	// producer, batch 2; each producer frees its list with one FreeChunk).
	Transport string
	// Producers is the number of producer goroutines; it divides CycleBlocks.
	Producers int
	// Batch is the shared queue's drain batch (shared only).
	Batch int
}

// String names the configuration, e.g. "shared p4 b64".
func (c CycleConfig) String() string {
	if c.Transport == "shared" {
		return fmt.Sprintf("shared p%d b%d", c.Producers, c.Batch)
	}
	return fmt.Sprintf("%s p%d", c.Transport, c.Producers)
}

type cycleRig[T pool.Transport] struct {
	p       *pool.Pool[*heap.Backing, T, lifo.Policy]
	lists   [][]pool.Handle
	senders []*pool.Sender
	cmds    []chan int
	exit    chan struct{}
	chunk   bool
	check   func() error
	cycles  int
	waiting atomic.Bool
	wake    chan struct{}
	timer   *time.Timer
	err     error
}

// OpenCycle builds a commanded-cycle rig and runs 8 gate-checked cycles.
// Each Trace is one cycle; Trace.Steps is 1 and nothing is sampled.
func OpenCycle(cfg CycleConfig) (Runner, error) {
	p := cfg.Producers
	if p < 1 || CycleBlocks%p != 0 {
		return nil, fmt.Errorf("bench: %d producers do not divide %d blocks", p, CycleBlocks)
	}
	var r Runner
	var err error
	switch cfg.Transport {
	case "shared":
		if cfg.Batch < 1 {
			return nil, fmt.Errorf("bench: shared batch %d", cfg.Batch)
		}
		r, err = newCycleRig(func() (*shared.Transport, error) {
			return shared.New(shared.WithCapacity(CycleBlocks), shared.WithBatch(cfg.Batch))
		}, checkShared, p, false)
	case "sharded":
		r, err = newCycleRig(func() (*sharded.Transport, error) {
			return sharded.New(sharded.WithCapacity(CycleBlocks/p), sharded.WithBatch(64))
		}, checkSharded, p, false)
	case "sharded-chunk":
		r, err = newCycleRig(func() (*sharded.Transport, error) {
			return sharded.New(sharded.WithChunks(), sharded.WithCapacity(2), sharded.WithBatch(2))
		}, checkSharded, p, true)
	default:
		return nil, fmt.Errorf("%w: cycle transport %q", ErrUnknown, cfg.Transport)
	}
	if err != nil {
		return nil, fmt.Errorf("cycle %s: %w", cfg, err)
	}
	for range cycleSampleCycles {
		if _, err := r.Trace(false); err != nil {
			return nil, errors.Join(err, r.Close())
		}
	}
	return r, nil
}

func newCycleRig[T pool.Transport](newT func() (T, error), check func(T) error, producers int, chunk bool) (*cycleRig[T], error) {
	t, err := newT()
	if err != nil {
		return nil, err
	}
	b, err := heap.New(BlockSize, CycleBlocks)
	if err != nil {
		return nil, errors.Join(err, t.Close())
	}
	p, err := pool.New(b, t, lifo.Policy{})
	if err != nil {
		return nil, err
	}
	r := &cycleRig[T]{p: p, chunk: chunk, check: func() error { return check(t) },
		exit: make(chan struct{}, producers), wake: make(chan struct{}, 1), timer: time.NewTimer(time.Hour)}
	r.timer.Stop()
	for range producers {
		s, err := p.NewSender()
		if err != nil {
			return nil, errors.Join(err, p.Close())
		}
		r.senders = append(r.senders, s)
		r.lists = append(r.lists, make([]pool.Handle, 0, CycleBlocks/producers))
		r.cmds = append(r.cmds, make(chan int, 1))
	}
	for g := range r.cmds {
		go r.producer(g)
	}
	return r, nil
}

func (r *cycleRig[T]) notify() {
	if r.waiting.Load() {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

func (r *cycleRig[T]) producer(g int) {
	defer func() { r.exit <- struct{}{} }()
	s := r.senders[g]
	for range r.cmds[g] {
		list := r.lists[g]
		if r.chunk {
			_ = s.FreeChunk(list)
			r.notify()
			continue
		}
		for _, h := range list {
			_ = s.Free(h)
			r.notify()
		}
	}
}

// Trace runs one commanded cycle.
func (r *cycleRig[T]) Trace(bool) (Trace, error) {
	if r.err != nil {
		return Trace{}, r.err
	}
	start := time.Now()
	if err := r.cycle(); err != nil {
		r.err = err
		return Trace{}, err
	}
	d := time.Since(start)
	r.cycles++
	if err := r.gates(); err != nil {
		r.err = err
		return Trace{}, err
	}
	return Trace{Owner: d, Steps: 1}, nil
}

func (r *cycleRig[T]) cycle() error {
	n := len(r.lists)
	for g := range r.lists {
		r.lists[g] = r.lists[g][:0]
	}
	for i := range CycleBlocks {
		h, err := r.p.Alloc()
		if err != nil {
			return err
		}
		g := i * n / CycleBlocks
		r.lists[g] = append(r.lists[g], h)
	}
	for g := range r.cmds {
		r.cmds[g] <- g
	}
	target := uint64((r.cycles + 1) * CycleBlocks)
	frees := func() uint64 { return r.p.Stats().Frees }
	// Drain until every block is back; between drains that found nothing,
	// sleep until a producer sends or the timer fires.
	for frees() < target {
		n, err := r.p.Drain()
		if err != nil {
			return err
		}
		if n > 0 {
			continue
		}
		r.waiting.Store(true)
		if n, err = r.p.Drain(); err != nil || n > 0 {
			r.waiting.Store(false)
			if err != nil {
				return err
			}
			continue
		}
		r.timer.Reset(50 * time.Microsecond)
		select {
		case <-r.wake:
		case <-r.timer.C:
		}
		r.timer.Stop()
		r.waiting.Store(false)
	}
	return nil
}

func (r *cycleRig[T]) gates() error {
	st := r.p.Stats()
	want := uint64(r.cycles * CycleBlocks)
	var errs []error
	if st.Allocs != want || st.Frees != want || st.RemoteSubmitted != want || st.RemoteDrained != want {
		errs = append(errs, fmt.Errorf("allocs %d frees %d submitted %d drained %d, want %d each",
			st.Allocs, st.Frees, st.RemoteSubmitted, st.RemoteDrained, want))
	}
	if st.Rejected != 0 {
		errs = append(errs, fmt.Errorf("%d handles rejected", st.Rejected))
	}
	if err := r.check(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Close stops the producers and closes the pool.
func (r *cycleRig[T]) Close() error {
	if r.cmds == nil {
		return nil
	}
	for _, c := range r.cmds {
		close(c)
	}
	for range r.cmds {
		<-r.exit
	}
	r.cmds = nil
	if r.err == nil {
		r.err = errors.New("bench: rig closed")
	}
	return r.p.Close()
}
