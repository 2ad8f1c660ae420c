package bench

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Contender is one way of recycling blocks, driven by the runner at batch
// granularity: the runner replays a Plan and calls the contender once per
// admission batch, decode run, dispatch and drain, never per block, so every
// contender pays the same (small) harness cost.
//
// Lists are numbered 0 to plan.Lists()-1. The owner (the runner's goroutine)
// appends blocks to lists with Alloc and hands a finished list to a worker
// with Dispatch; the worker frees every block of it and leaves it empty. A
// contender's own workers are persistent goroutines fed by buffered channels
// (capacity WorkerChannel), started by Open and stopped by Close.
//
// All methods are called by the owner goroutine only.
type Contender interface {
	// Open builds the contender for plan: its memory (pool or allocator
	// state), one handle list per plan list with the plan's capacity, and
	// its workers. touch says what Alloc writes into each new block.
	Open(plan *Plan, touch TouchMode) error
	// Alloc appends n newly allocated blocks to each list of lists, in order,
	// writing each block per the touch mode right after allocating it.
	Alloc(lists []int32, n int) error
	// Dispatch hands list l to worker w, which frees all of its blocks.
	Dispatch(l, w int) error
	// Drain is the owner's drain point (step start and step end); it
	// returns how many blocks it freed. Contenders without an owner-side
	// drain return 0.
	Drain() (int, error)
	// Counts returns the blocks allocated and freed since Open. Both are
	// exact; freed includes blocks returned by drains inside Alloc.
	Counts() (allocated, freed uint64)
	// Wait blocks, without spinning, until freed reaches target (the
	// end-of-trace wait), draining as blocks come back.
	Wait(target uint64) error
	// SetFill sets the byte value the touch writes.
	SetFill(v byte)
	// Check verifies the contender's own proof gates (queue counters
	// balanced, nothing rejected, live blocks as expected). The runner calls
	// it only while the workers are idle.
	Check(live int) error
	// Close stops the workers and releases the memory.
	Close() error
}

// Group says whether a contender is a locus pool or a Go peer.
type Group string

// The contender groups.
const (
	// GroupLocus is a composed locus pool (or its hand-written copy).
	GroupLocus Group = "locus"
	// GroupGo is what a Go user would use instead.
	GroupGo Group = "go"
)

// Entry is one row of the contender table.
type Entry struct {
	// Name is the contender's name in results, e.g. "locus-mailbox".
	Name string
	// Group is GroupLocus or GroupGo.
	Group Group
	// Doc says in one line what the contender is.
	Doc string
	// New returns a fresh, unopened contender.
	New func() Contender
	// Floor marks a reference floor rather than a real alternative
	// (locus-inline: no workers, no handoff). It is ranked and printed but
	// not counted when the targets ask which contender is first.
	Floor bool
}

// Baseline is the contender every ratio is taken against.
const Baseline = "locus-mailbox"

var (
	tableMu sync.Mutex
	table   []Entry
)

// register adds entries to the contender table; each contender file
// registers its rows from init, so adding a contender is one table row.
func register(es ...Entry) {
	tableMu.Lock()
	defer tableMu.Unlock()
	table = append(table, es...)
}

// order is the display order of the contender table; names not listed
// come after, in registration order.
var order = []string{
	"locus-mailbox", "locus-shared", "locus-sharded", "locus-sharded-chunk",
	"locus-mmap", "locus-fifo", "locus-inline", "locus-handwritten",
	"go-heap", "sync-pool", "chan-freelist", "mutex-freelist",
}

// Contenders returns the contender table in display order.
func Contenders() []Entry {
	tableMu.Lock()
	defer tableMu.Unlock()
	var out []Entry
	seen := map[string]bool{}
	for _, n := range order {
		for _, e := range table {
			if e.Name == n {
				out = append(out, e)
				seen[n] = true
			}
		}
	}
	for _, e := range table {
		if !seen[e.Name] {
			out = append(out, e)
		}
	}
	return out
}

// ContenderByName returns the table row with the given name.
func ContenderByName(name string) (Entry, error) {
	for _, e := range Contenders() {
		if e.Name == name {
			return e, nil
		}
	}
	return Entry{}, fmt.Errorf("bench: unknown contender %q", name)
}

// errExhausted is returned by a contender whose free list ran dry. The v1
// pools are sized so that this is unreachable (§3.5); if it happens the
// cell fails its gates instead of retrying forever.
var errExhausted = errors.New("bench: free list exhausted")

// toucher writes the touch into new blocks.
type toucher struct {
	mode    TouchMode
	fill    byte
	pattern [BlockSize]byte
}

func (t *toucher) setMode(m TouchMode) { t.mode = m; t.setFill(1) }

func (t *toucher) setFill(v byte) {
	t.fill = v
	for i := range t.pattern {
		t.pattern[i] = v
	}
}

// touch writes the touch into b: one byte at TouchOffset, or all of it.
func (t *toucher) touch(b []byte) {
	switch t.mode {
	case TouchByte:
		b[TouchOffset] = t.fill
	case TouchFull:
		copy(b, t.pattern[:])
	}
}

// waiter lets the owner block until a worker makes progress, without
// spinning and without lost wake-ups. The owner announces that it is about
// to sleep (waiting = true), checks for progress once more, and only then
// blocks on ch; a worker checks waiting after publishing its progress. Both
// sides use sequentially consistent atomics, so either the owner's re-check
// sees the worker's progress or the worker sees waiting and sends a token.
//
// A producer of a bounded transport can also make progress in the middle of
// a send (it was blocked on a full queue, the owner drained, it enqueued
// more and blocked again) without returning, so without notifying. The
// owner's sleep is therefore also bounded by a timer (waitSlice): a blocking
// wait with a safety net, never a Gosched spin. On the unbounded mailbox the
// timer practically never fires.
type waiter struct {
	waiting atomic.Bool
	ch      chan struct{}
	timer   *time.Timer
}

// waitSlice bounds one sleep of the owner's end-of-trace wait.
const waitSlice = 50 * time.Microsecond

func (w *waiter) init() {
	w.ch = make(chan struct{}, 1)
	w.timer = time.NewTimer(time.Hour)
	w.timer.Stop()
}

// notify is called by a worker after it published progress.
func (w *waiter) notify() {
	if w.waiting.Load() {
		select {
		case w.ch <- struct{}{}:
		default:
		}
	}
}

// waitUntil drains until freed() reaches target, blocking between drains
// that freed nothing. drain may be nil (no owner-side drain).
func (w *waiter) waitUntil(target uint64, freed func() uint64, drain func() (int, error)) error {
	progress := func() (bool, error) {
		if freed() >= target {
			return true, nil
		}
		if drain == nil {
			return false, nil
		}
		n, err := drain()
		return n > 0, err
	}
	for freed() < target {
		ok, err := progress()
		if err != nil {
			return err
		}
		if ok {
			continue
		}
		w.waiting.Store(true)
		ok, err = progress()
		if err != nil {
			w.waiting.Store(false)
			return err
		}
		if !ok {
			w.timer.Reset(waitSlice)
			select {
			case <-w.ch:
			case <-w.timer.C:
			}
			w.timer.Stop()
		}
		w.waiting.Store(false)
	}
	return nil
}

// workerSet is the persistent worker goroutines of a contender: one
// buffered command channel each, carrying list numbers.
type workerSet struct {
	cmds [Workers]chan int32
	exit sync.WaitGroup
	w    waiter
}

// start launches the workers; free frees list l on worker w and must
// publish its progress (the freed count or the transport push) last.
func (ws *workerSet) start(free func(w int, l int32)) {
	ws.w.init()
	for w := range ws.cmds {
		ws.cmds[w] = make(chan int32, WorkerChannel)
		ws.exit.Add(1)
		go func(w int, cmds <-chan int32) {
			defer ws.exit.Done()
			for l := range cmds {
				free(w, l)
				ws.w.notify()
			}
		}(w, ws.cmds[w])
	}
}

func (ws *workerSet) dispatch(l, w int) error {
	if w < 0 || w >= Workers {
		return fmt.Errorf("bench: worker %d out of range", w)
	}
	ws.cmds[w] <- int32(l)
	return nil
}

// stop closes the command channels and waits for the workers to exit.
func (ws *workerSet) stop() {
	for _, c := range ws.cmds {
		if c != nil {
			close(c)
		}
	}
	ws.exit.Wait()
	ws.cmds = [Workers]chan int32{}
}

// poolBlocks is the pool size a locus contender uses for plan (§2.1).
func poolBlocks(p *Plan) int {
	if p.Workload.Churn {
		return ChurnPoolBlocks
	}
	return TracePoolBlocks
}
