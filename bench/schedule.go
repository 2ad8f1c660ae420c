package bench

// opKind is what one step of a plan does.
type opKind uint8

const (
	// opPrefill: each of the lists lists[a : a+b] gets Prefill new blocks.
	opPrefill opKind = iota
	// opDecode: each of the lists lists[a : a+b] gets one new block.
	opDecode
	// opDispatch: list a (a finished request) goes to worker b.
	opDispatch
)

// op is one operation of a plan. Runs of allocations between two
// dispatches are one op, so a contender is called per batch, not per block.
type op struct {
	kind opKind
	a, b int32
}

// Dispatch is one finished request handed to a worker.
type Dispatch struct {
	Step, Request, Worker int
}

// Plan is a trace workload's schedule, computed once and replayed by every
// contender: per step, the admissions, the decode pass's allocations and
// the dispatches of finished requests, in the exact order of the LOCUS
// record (move-last-into-slot removal, round-robin dispatch restarting at
// worker 0 every trace). Replaying a plan is just walking flat arrays, so
// no contender pays bookkeeping that another does not.
//
// Churn-touch has a Plan too (for its counters), but its steps are generated
// by the runner (see runChurn), since they are the same every step.
type Plan struct {
	// Workload is the workload this plan replays.
	Workload *Workload
	// Steps is the number of steps of one trace.
	Steps int
	// BlocksPerTrace is the number of blocks one trace allocates (and frees).
	BlocksPerTrace int
	// TheoreticalPeak is the instant-free peak of live blocks (see TheoreticalPeak).
	TheoreticalPeak int
	// ListCap is the capacity every request's handle list needs (16 + decode).
	ListCap []int
	// AllocsPerStep is the number of blocks allocated in each step.
	AllocsPerStep []int
	// Dispatches lists every dispatch in order.
	Dispatches []Dispatch
	// Workers is the number of worker goroutines the plan dispatches to.
	Workers int
	// WorkerBlocks is the number of blocks dispatched to each worker per trace.
	WorkerBlocks []int
	// WorkerRequests is the number of requests dispatched to each worker per trace.
	WorkerRequests []int

	stepOps []int32 // ops of step s are ops[stepOps[s]:stepOps[s+1]]
	ops     []op
	lists   []int32 // list ids referenced by prefill and decode ops
	allocd  []int32 // blocks allocated by the end of step s (cumulative)
}

// NewPlan computes the schedule of w.
func NewPlan(w *Workload) *Plan {
	if w.Churn {
		return newChurnPlan(w)
	}
	requests, nw := w.requests(), w.workers()
	p := &Plan{Workload: w, ListCap: make([]int, requests), TheoreticalPeak: TheoreticalPeak(w),
		Workers: nw, WorkerBlocks: make([]int, nw), WorkerRequests: make([]int, nw)}
	type req struct{ id, left int }
	var active []req
	arrived, next, total := 0, 0, 0
	p.stepOps = append(p.stepOps, 0)
	for arrived < requests || len(active) > 0 {
		allocs := 0
		if k := min(w.ArrivalsPerStep, requests-arrived); k > 0 {
			off := len(p.lists)
			for range k {
				d := w.Decode(arrived)
				p.ListCap[arrived] = Prefill + d
				p.lists = append(p.lists, int32(arrived))
				active = append(active, req{arrived, d})
				arrived++
			}
			p.ops = append(p.ops, op{opPrefill, int32(off), int32(k)})
			allocs += k * Prefill
		}
		run := len(p.lists)
		flush := func() {
			if n := len(p.lists) - run; n > 0 {
				p.ops = append(p.ops, op{opDecode, int32(run), int32(n)})
			}
			run = len(p.lists)
		}
		for i := 0; i < len(active); {
			if active[i].left == 0 {
				flush()
				r := active[i]
				last := len(active) - 1
				active[i] = active[last]
				active = active[:last]
				p.ops = append(p.ops, op{opDispatch, int32(r.id), int32(next)})
				p.Dispatches = append(p.Dispatches, Dispatch{Step: p.Steps, Request: r.id, Worker: next})
				p.WorkerBlocks[next] += Prefill + w.Decode(r.id)
				p.WorkerRequests[next]++
				next = (next + 1) % nw
				continue // re-examine slot i
			}
			p.lists = append(p.lists, int32(active[i].id))
			active[i].left--
			allocs++
			i++
		}
		flush()
		total += allocs
		p.AllocsPerStep = append(p.AllocsPerStep, allocs)
		p.allocd = append(p.allocd, int32(total))
		p.stepOps = append(p.stepOps, int32(len(p.ops)))
		p.Steps++
	}
	p.BlocksPerTrace = total
	return p
}

// Lists returns the number of handle lists a contender must hold for this
// plan: one per request, or the churn window plus one run of new chunks.
func (p *Plan) Lists() int { return len(p.ListCap) }

// churnSlots is the number of chunk lists churn cycles through: the live
// window plus one run's worth of new chunks. At global step t the oldest
// chunk is slot t mod churnSlots and the new chunk goes to slot
// (t+ChurnLiveChunks) mod churnSlots, which was dispatched ChurnSteps steps
// earlier, in the previous run, so it is free again.
const churnSlots = ChurnLiveChunks + ChurnSteps

func newChurnPlan(w *Workload) *Plan {
	p := &Plan{Workload: w, Steps: ChurnSteps, BlocksPerTrace: ChurnSteps * ChurnChunkBlocks,
		TheoreticalPeak: TheoreticalPeak(w), ListCap: make([]int, churnSlots),
		Workers: Workers, WorkerBlocks: make([]int, Workers), WorkerRequests: make([]int, Workers)}
	for i := range p.ListCap {
		p.ListCap[i] = ChurnChunkBlocks
	}
	for s := range ChurnSteps {
		p.AllocsPerStep = append(p.AllocsPerStep, ChurnChunkBlocks)
		p.Dispatches = append(p.Dispatches, Dispatch{Step: s, Request: s, Worker: s % Workers})
		p.WorkerBlocks[s%Workers] += ChurnChunkBlocks
		p.WorkerRequests[s%Workers]++
	}
	return p
}
