package bench

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// contender is one way of recycling blocks, driven by a Rig at batch
// granularity: the rig replays a Plan and calls the contender once per
// admission batch, decode run, dispatch and drain, never per block, so every
// contender pays the same (small) harness cost.
//
// Lists are numbered 0 to plan.Lists()-1. The owner (the rig's goroutine)
// appends blocks to lists with alloc and hands a finished list to a worker
// with dispatch; the worker frees every block of it and leaves it empty.
// Every method is called by the owner goroutine only.
type contender interface {
	// open builds the contender for plan: its memory, one handle list per
	// plan list with the plan's capacity, and its workers (a workers set
	// started with the contender's free function).
	open(plan *Plan, touch TouchMode) error
	// alloc appends n newly allocated blocks to each list of lists, in
	// order, writing each block per the touch mode right after allocating it.
	alloc(lists []int32, n int) error
	// dispatch hands list l to worker w, which frees all of its blocks.
	dispatch(l int32, w int) error
	// drain is the owner's drain point (step start and step end); it
	// returns how many blocks it freed. Contenders without an owner-side
	// drain return 0.
	drain() (int, error)
	// barrier waits until every dispatched list is freed, then drains once
	// (the end of a trace).
	barrier() error
	// counts returns the blocks allocated and freed since open. Both are
	// exact; freed counts blocks back on the contender's free list.
	counts() (allocated, freed uint64)
	// setFill sets the byte value the touch writes.
	setFill(v byte)
	// check verifies the contender's own gates (queues balanced, nothing
	// rejected, live blocks as expected); the workers are idle when it runs.
	check(live int) error
	// close stops the workers and releases the memory.
	close() error
}

// Group says whether a contender is a locus pool or a Go peer.
type Group string

// The contender groups.
const (
	// GroupLocus is a composed locus pool or its hand-written reference.
	GroupLocus Group = "locus"
	// GroupGo is what a Go user would use instead: the standard library, a
	// hand-rolled free list or a third-party module.
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
	// Floor marks a reference floor rather than a real alternative
	// (locus-inline: no workers, no handoff). A scoreboard shows it as the
	// limit and does not rank it.
	Floor bool
	// Checked is true when the contender rejects stale, double and foreign
	// frees (generation-checked handles), as locus pools do.
	Checked bool

	new func() contender
}

// Baseline is the contender every scoreboard ratio is taken against.
const Baseline = "locus-mailbox"

var (
	tableMu sync.Mutex
	table   []Entry
	extras  []Entry // found by ContenderByName only (design-thread configurations)
)

// register adds entries to the contender table; each contender file
// registers its rows from init, so adding a contender is one table row.
func register(es ...Entry) {
	tableMu.Lock()
	defer tableMu.Unlock()
	table = append(table, es...)
}

// registerExtra adds entries that ContenderByName finds but Contenders does
// not list.
func registerExtra(es ...Entry) {
	tableMu.Lock()
	defer tableMu.Unlock()
	extras = append(extras, es...)
}

// order is the display order of the contender table; names not listed
// come after, in registration order.
var order = []string{
	"locus-mailbox", "locus-handwritten", "locus-inline", "locus-fifo", "locus-mmap",
	"locus-shared", "locus-sharded", "locus-sharded-chunk",
	"mutex-freelist-checked", "mutex-freelist", "chan-freelist", "sync-pool",
	"go-buffer-pool", "mcache", "go-heap",
}

// Contenders returns the scoreboard's contender table in display order.
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

// ErrUnknown is matched by the errors for an unknown workload, contender or
// configuration name.
var ErrUnknown = errors.New("bench: unknown name")

// ContenderByName returns the contender with the given name: a row of
// Contenders or one of the design-thread configurations (locus-allocchunk).
func ContenderByName(name string) (Entry, error) {
	tableMu.Lock()
	defer tableMu.Unlock()
	for _, es := range [][]Entry{table, extras} {
		for _, e := range es {
			if e.Name == name {
				return e, nil
			}
		}
	}
	return Entry{}, fmt.Errorf("%w: contender %q", ErrUnknown, name)
}

// errExhausted is returned by a contender whose free list ran dry. The v1
// pools are sized so that this is unreachable; if it
// happens the trace fails its gates instead of retrying forever.
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

// workers is a contender's persistent worker goroutines, one buffered
// command channel each (capacity WorkerChannel), carrying list numbers, and
// the end-of-trace barrier every contender shares.
//
// The barrier: a worker adds the blocks of every list it freed to done and
// wakes the owner only when done reaches the target the owner is waiting
// for, so the owner sleeps once per trace, not once per list. The owner
// stores target and then waiting, and re-checks done before it sleeps; a
// worker adds to done and then loads waiting and target. All four are
// sequentially consistent atomics, so either the owner's re-check sees the
// last list or that list's worker sees the owner waiting and wakes it.
type workers struct {
	cmds    []chan int32
	exit    sync.WaitGroup
	done    atomic.Uint64 // blocks whose free returned, added by workers
	target  atomic.Uint64 // owner: the done count it waits for
	waiting atomic.Bool
	wake    chan struct{}
	sent    uint64 // owner: blocks dispatched
}

// start launches n workers; free frees list l on worker w and returns the
// number of blocks it freed.
func (ws *workers) start(n int, free func(w int, l int32) int) {
	ws.wake = make(chan struct{}, 1)
	ws.cmds = make([]chan int32, n)
	for w := range ws.cmds {
		ws.cmds[w] = make(chan int32, WorkerChannel)
		ws.exit.Add(1)
		go func(w int, cmds <-chan int32) {
			defer ws.exit.Done()
			for l := range cmds {
				d := ws.done.Add(uint64(free(w, l)))
				if ws.waiting.Load() && d >= ws.target.Load() {
					select {
					case ws.wake <- struct{}{}:
					default:
					}
				}
			}
		}(w, ws.cmds[w])
	}
}

// dispatch hands list l of n blocks to worker w.
func (ws *workers) dispatch(l int32, w, n int) error {
	if w < 0 || w >= len(ws.cmds) {
		return fmt.Errorf("bench: worker %d out of range", w)
	}
	ws.sent += uint64(n)
	ws.cmds[w] <- l
	return nil
}

// wait blocks until every dispatched block is freed. A bounded
// transport's workers can block inside a send on a full queue, which only
// the owner's drain frees, so with drain set the owner polls instead: it
// drains, and yields its processor when a drain brought nothing (the
// record's owner loop; a sleep would take a millisecond here, the timer
// granularity of an idle Go process).
func (ws *workers) wait(drain func() (int, error)) error {
	target := ws.sent
	if drain != nil {
		for ws.done.Load() < target {
			n, err := drain()
			if err != nil {
				return err
			}
			if n == 0 {
				runtime.Gosched()
			}
		}
		return nil
	}
	if ws.done.Load() >= target {
		return nil
	}
	ws.target.Store(target)
	ws.waiting.Store(true)
	for ws.done.Load() < target {
		<-ws.wake
	}
	ws.waiting.Store(false)
	return nil
}

// stop closes the command channels and waits for the workers to exit.
func (ws *workers) stop() {
	for _, c := range ws.cmds {
		if c != nil {
			close(c)
		}
	}
	ws.exit.Wait()
	ws.cmds = nil
}

// poolBlocks is the pool size a contender uses for plan (the v1 pool sizes).
func poolBlocks(p *Plan) int {
	if p.Workload.Churn {
		return ChurnPoolBlocks
	}
	return TracePoolBlocks
}
