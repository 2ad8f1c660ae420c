package bench

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
)

// The commanded-cycle harness of design thread §1.A (0351–0353): a pool of
// exactly CycleBlocks blocks; per cycle the owner allocates all of them
// into p contiguous lists, commands producer g to free list g (capacity-1
// command channels), and drains until every block is back. The clock
// covers the whole cycle on the owner.
//
// Where the record's owner spun with an OS yield when a drain round found
// nothing, this owner blocks (waiter: woken by a producer's notify, or by
// a 50 µs timer for producers blocked inside a bounded send).

// CycleBlocks is the pool size and blocks per cycle of the harness.
const CycleBlocks = 256

// cycleSampleCycles is the number of cycles of the separate sample pass.
const cycleSampleCycles = 8

// CycleMode says how producers free their list.
type CycleMode uint8

// The producer modes.
const (
	// PerHandle: one FreeChunk per handle (the record's per-handle enqueue).
	PerHandle CycleMode = iota
	// Chunk: one FreeChunk of the whole list.
	Chunk
)

type cycleRig[T pool.Transport] struct {
	p       *pool.Pool[*heap.Backing, T, lifo.Policy]
	lists   [][]pool.Handle
	senders []*pool.Sender
	cmds    []chan int
	exit    chan struct{}
	w       waiter
	check   func(T) error
	freed   uint64
}

func newCycleRig[T pool.Transport](newT func() (T, error), check func(T) error, producers int, mode CycleMode) (*cycleRig[T], error) {
	if producers < 1 || CycleBlocks%producers != 0 {
		return nil, fmt.Errorf("bench: %d producers do not divide %d blocks", producers, CycleBlocks)
	}
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
	r := &cycleRig[T]{p: p, check: check, exit: make(chan struct{}, producers)}
	r.w.init()
	for g := 0; g < producers; g++ {
		s, err := p.NewSender()
		if err != nil {
			return nil, errors.Join(err, p.Close())
		}
		r.senders = append(r.senders, s)
		r.lists = append(r.lists, make([]pool.Handle, 0, CycleBlocks/producers))
		r.cmds = append(r.cmds, make(chan int, 1))
	}
	for g := range r.cmds {
		go r.producer(g, mode)
	}
	return r, nil
}

func (r *cycleRig[T]) producer(g int, mode CycleMode) {
	defer func() { r.exit <- struct{}{} }()
	s := r.senders[g]
	for range r.cmds[g] {
		list := r.lists[g]
		if mode == Chunk {
			_ = s.FreeChunk(list)
			r.w.notify()
			continue
		}
		for _, h := range list {
			_ = s.Free(h)
			r.w.notify()
		}
	}
}

func (r *cycleRig[T]) frees() uint64 { return r.p.Stats().Frees }

// cycle runs one commanded cycle.
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
	r.freed += CycleBlocks
	return r.w.waitUntil(r.freed, r.frees, r.p.Drain)
}

func (r *cycleRig[T]) gates(cycles int) error {
	st := r.p.Stats()
	want := uint64(cycles * CycleBlocks)
	var errs []error
	if st.Allocs != want || st.Frees != want || st.RemoteSubmitted != want || st.RemoteDrained != want {
		errs = append(errs, fmt.Errorf("allocs %d frees %d submitted %d drained %d, want %d each",
			st.Allocs, st.Frees, st.RemoteSubmitted, st.RemoteDrained, want))
	}
	if st.Rejected != 0 {
		errs = append(errs, fmt.Errorf("%d handles rejected", st.Rejected))
	}
	if r.check != nil {
		if err := r.check(r.p.Transport()); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (r *cycleRig[T]) close() error {
	for _, c := range r.cmds {
		close(c)
	}
	for range r.cmds {
		<-r.exit
	}
	return r.p.Close()
}

// runCycle measures one commanded-cycle configuration: a separate fresh
// rig runs the 8-cycle sample pass and its gates, then another fresh rig is
// timed.
func runCycle[T pool.Transport](newT func() (T, error), check func(T) error, producers int, mode CycleMode, o Options) Run {
	var run Run
	sample, err := newCycleRig(newT, check, producers, mode)
	if err != nil {
		run.Err = err
		return run
	}
	for range cycleSampleCycles {
		if err = sample.cycle(); err != nil {
			break
		}
	}
	if err == nil {
		err = sample.gates(cycleSampleCycles)
	}
	if err = errors.Join(err, sample.close()); err != nil {
		run.Err = fmt.Errorf("sample pass: %w", err)
		return run
	}
	rig, err := newCycleRig(newT, check, producers, mode)
	if err != nil {
		run.Err = err
		return run
	}
	cycles := 0
	for start := time.Now(); cycles < o.WarmupTraces && time.Since(start) < o.Warmup; cycles++ {
		if err := rig.cycle(); err != nil {
			run.Err = errors.Join(err, rig.close())
			return run
		}
	}
	runtime.GC()
	samples := make([]float64, 0, o.MaxTraces)
	start := time.Now()
	for len(samples) < o.MaxTraces && (len(samples) < o.MinTraces || time.Since(start) < o.RunTime) {
		t0 := time.Now()
		err := rig.cycle()
		d := time.Since(t0)
		if err != nil {
			run.Err = errors.Join(err, rig.close())
			return run
		}
		cycles++
		samples = append(samples, float64(d.Nanoseconds())/1e3)
	}
	run.Traces = len(samples)
	run.Time = medianCI(samples)
	run.Err = errors.Join(rig.gates(cycles), rig.close())
	return run
}
