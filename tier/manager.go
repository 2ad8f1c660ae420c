package tier

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locus-go/locus/internal/ids"
	"github.com/locus-go/locus/internal/invariants"
	"github.com/locus-go/locus/internal/nocopy"
	"github.com/locus-go/locus/internal/snapshot"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
)

// Manager is the owner-side index of one tier: which key lives in which
// slot of its Storage, in which state, and what to evict. Build it with
// New; the package doc states the contract.
//
// All methods are called on one owner goroutine. The copy workers that run
// Store and Load never touch the Manager's state: they copy, and report
// back through a mailbox that Drain empties. A Manager must not be copied.
//
// Use one Manager per tier (one over tier/host, one over tier/disk) and
// chain them in the engine: store into the host tier as blocks complete,
// stage a disk hit through the host tier. Do not use it for blocks the hot
// pool serves: kv does that.
type Manager struct {
	_ nocopy.NoCopy

	id     uint32
	st     Storage
	direct DirectStorage // st, when it is one; nil otherwise
	medium Medium
	bs     int

	slots []slot
	free  []int32
	index map[Key]int32
	ev    Eviction
	adm   Admission

	tracked   map[Key]uint32
	trackRing []Key
	trackNext int

	nFree, nEvictable, nStoring, nPinned int

	jobs     []job
	freeJobs []uint32
	inFlight int
	maxJobs  int
	nextGen  uint64 // the next write generation, also the next job generation
	epoch    uint64 // bumped by Reset

	mark      []uint32 // mark[s] == markEpoch: protected in this PrepareStore
	markEpoch uint32
	seen      map[Key]struct{}
	protectFn func(int) bool

	events []Event
	gone   []Key // Remove's scratch: the keys it removed
	c      counters
	invErr error
	closed bool

	// Copy machinery: tasks to the workers, completions back through tr.
	tasks   chan task
	tr      *mailbox.Transport
	sink    *pool.Sink
	done    []Done
	wg      sync.WaitGroup
	guards  []atomic.Int32 // per slot: -1 while written, n>0 while n reads run
	clashes atomic.Uint64

	// pub is the accounting as the owner last published it, for Snapshot.
	pub snapshot.Cell[Stats]
}

type slotState uint8

const (
	slotFree slotState = iota
	slotStoring
	slotResident
)

type slot struct {
	key    Key
	gen    uint64 // write generation of the block held or being written
	pins   int32
	state  slotState
	orphan bool // its key left the index (Reset, a failed load) while a job held it
}

type jobKind uint8

const (
	loadJob jobKind = iota + 1
	storeJob
)

type job struct {
	gen     uint64 // odd-free: 0 when the record is free
	epoch   uint64
	kind    jobKind
	copying bool // run by the workers: completed by Drain, not by Complete*
	slots   []int32
	elapsed *int64 // copying jobs: the worker's copy time in ns, written before its Send

	// A Store or Load task's blocks: its buffers, and a Load's keys and
	// generations. Like slots and elapsed, they are kept from one use of
	// the record to the next (a worker is done with them once Drain has
	// its completion), so that a job allocates nothing here.
	bufs [][]byte
	keys []Key
	gens []uint64
}

// Job names one prepared load or store until it is completed. The zero Job
// is "no job" (a PrepareStore with nothing to store returns it). Jobs are
// comparable and may be sent across goroutines; a Manager rejects a job it
// did not issue, or one already completed.
type Job struct {
	gen uint64
	idx uint32
	mgr uint32
}

// IsZero reports whether j is the zero Job.
func (j Job) IsZero() bool { return j == Job{} }

// String formats the job for debugging.
func (j Job) String() string { return fmt.Sprintf("tier%d/job%d@%d", j.mgr, j.idx, j.gen) }

// StorePlan is what PrepareStore decided.
type StorePlan struct {
	// Job completes the store (CompleteStore); zero when Keys is empty.
	Job Job
	// Keys are the keys to store, in the order given; Positions[i] is the
	// index of Keys[i] in the call's keys and Slots[i] the slot to write.
	Keys      []Key
	Positions []int
	Slots     []int
	// Evicted are the keys evicted to make room.
	Evicted []Key
	// Skipped counts keys already present or pending; NotAdmitted keys the
	// admission rules turned away.
	Skipped, NotAdmitted int
}

// LoadPlan is what PrepareLoad pinned.
type LoadPlan struct {
	// Job completes the load (CompleteLoad).
	Job Job
	// Slots are the slots of the keys, in the order given.
	Slots []int
}

// Done is one job that the copy workers finished, reported by Drain.
type Done struct {
	Job   Job
	Store bool // a Store; false for a Load
	// OK: every block was copied. A failed Store stored nothing; a failed
	// Load must not be used, and the block that failed (Failed, an index
	// into the job's keys) was dropped from the tier if it was corrupt.
	OK     bool
	Failed int
	// Err is ErrStaleJob for a job issued before Reset, else the copy's
	// error, or nil.
	Err error
	// Elapsed is how long the worker took to copy the job's blocks (the
	// time the job waited for a worker and for Drain not included), so
	// that blocks × BlockSize / Elapsed is the bandwidth the copy got.
	Elapsed time.Duration
}

// managerIDs numbers the managers, so that a job names its manager.
var managerIDs ids.Source

// New builds a Manager over st, with the blocks st recovered from an
// earlier run already loadable. It starts the copy workers. It fails with
// an error wrapping pool.ErrInvalidConfig for a nil storage, a storage
// with no slots or blocks, or a bad option.
func New(st Storage, opts ...Option) (*Manager, error) {
	if st == nil {
		return nil, fmt.Errorf("%w: tier: nil storage", errConfig)
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	n, bs := st.Slots(), st.BlockSize()
	if n <= 0 || n > pool.MaxBlocks || bs <= 0 {
		return nil, fmt.Errorf("%w: tier: storage of %d slots of %d bytes", errConfig, n, bs)
	}
	ev := cfg.eviction(n)
	if ev == nil {
		return nil, fmt.Errorf("%w: tier: eviction constructor returned nil", errConfig)
	}
	m := &Manager{
		id: managerIDs.Next(), st: st, medium: st.Medium(), bs: bs,
		slots: make([]slot, n), free: make([]int32, 0, n), index: make(map[Key]int32, n),
		ev: ev, adm: cfg.adm, maxJobs: cfg.maxJobs, nextGen: 1,
		mark: make([]uint32, n), seen: make(map[Key]struct{}),
		tasks: make(chan task, cfg.maxJobs), tr: mailbox.New(), guards: make([]atomic.Int32, n),
	}
	if cfg.adm.MinLookups > 1 {
		m.tracked = make(map[Key]uint32)
		m.trackRing = make([]Key, 0, min(cfg.adm.TrackerSize, 1<<16))
	}
	m.direct, _ = st.(DirectStorage)
	m.protectFn = m.protected
	m.sink = pool.NewSink(m.complete)
	rec, next := st.Recovered()
	m.nextGen = max(next, 1)
	used := make([]bool, n)
	for _, r := range rec {
		if r.Slot < 0 || r.Slot >= n || used[r.Slot] || r.Gen >= m.nextGen {
			continue
		}
		if old, dup := m.index[r.Key]; dup {
			if m.slots[old].gen > r.Gen {
				continue
			}
			m.ev.Remove(int(old))
			m.slots[old] = slot{}
			used[old] = false
			m.nEvictable--
		}
		used[r.Slot] = true
		m.slots[r.Slot] = slot{key: r.Key, gen: r.Gen, state: slotResident}
		m.index[r.Key] = int32(r.Slot)
		m.ev.Insert(r.Slot, r.Key)
		m.nEvictable++
	}
	for s := n - 1; s >= 0; s-- {
		if !used[s] {
			m.free = append(m.free, int32(s))
		}
	}
	m.nFree = len(m.free)
	m.c.recovered = uint64(m.nEvictable)
	for range cfg.workers {
		p, err := m.tr.NewProducer()
		if err != nil {
			return nil, err
		}
		m.wg.Add(1)
		go m.worker(p)
	}
	m.debugCheck()
	m.pub.Init(m.stats())
	return m, nil
}

// Medium returns the storage's medium.
func (m *Manager) Medium() Medium {
	if m == nil {
		return ""
	}
	return m.medium
}

// unusable reports a nil, zero or closed Manager: every call then fails
// with pool.ErrClosed, or reports nothing, and never panics.
func (m *Manager) unusable() bool { return m == nil || m.st == nil || m.closed }

// BlockSize returns the size of a block.
func (m *Manager) BlockSize() int {
	if m == nil {
		return 0
	}
	return m.bs
}

// Capacity returns the number of slots.
func (m *Manager) Capacity() int {
	if m == nil {
		return 0
	}
	return len(m.slots)
}

// Lookup appends to dst, per key, whether the tier holds its block: Hit
// (loadable), HitPending (a store in flight) or Miss, and returns dst. A
// missed key's lookup counts toward Admission.MinLookups. Lookup does not
// change recency: use Touch.
func (m *Manager) Lookup(keys []Key, dst []Result) []Result {
	if m.unusable() {
		return misses(keys, dst)
	}
	for _, k := range keys {
		m.c.lookups++
		s, ok := m.index[k]
		switch {
		case !ok || m.closed:
			m.c.misses++
			m.track(k)
			dst = append(dst, Miss)
		case m.slots[s].state == slotResident:
			m.c.hits++
			dst = append(dst, Hit)
		default:
			m.c.pending++
			dst = append(dst, HitPending)
		}
	}
	return dst
}

// Peek is Lookup without side effects: it appends, per key, Hit,
// HitPending or Miss to dst and returns dst, but counts nothing in Stats
// and nothing toward Admission.MinLookups. Use it to ask what an admission
// would find (a scheduler's "can I admit this?" that may be asked many
// times per request); use Lookup for the lookup of the admission itself,
// so that admission by frequency sees it.
func (m *Manager) Peek(keys []Key, dst []Result) []Result {
	if m.unusable() {
		return misses(keys, dst)
	}
	for _, k := range keys {
		s, ok := m.index[k]
		switch {
		case !ok || m.closed:
			dst = append(dst, Miss)
		case m.slots[s].state == slotResident:
			dst = append(dst, Hit)
		default:
			dst = append(dst, HitPending)
		}
	}
	return dst
}

// track counts a missed lookup of k for admission, bounded by TrackerSize.
func (m *Manager) track(k Key) {
	if m.tracked == nil {
		return
	}
	if c, ok := m.tracked[k]; ok {
		m.tracked[k] = c + 1
		return
	}
	if len(m.trackRing) < m.adm.TrackerSize {
		m.trackRing = append(m.trackRing, k)
	} else {
		delete(m.tracked, m.trackRing[m.trackNext])
		m.trackRing[m.trackNext] = k
		m.trackNext = (m.trackNext + 1) % len(m.trackRing)
	}
	m.tracked[k] = 1
}

// Touch records a use of every key the tier holds, for eviction; keys it
// does not hold are ignored. Call it also for blocks the hot pool serves,
// so the tier keeps what the engine uses.
func (m *Manager) Touch(keys []Key) {
	if m.unusable() {
		return
	}
	for _, k := range keys {
		if s, ok := m.index[k]; ok && m.slots[s].state == slotResident {
			m.ev.Access(int(s))
		}
	}
}

// protected reports whether slot s must not be evicted now.
func (m *Manager) protected(s int) bool {
	sl := &m.slots[s]
	return sl.state != slotResident || sl.pins > 0 || sl.orphan || m.mark[s] == m.markEpoch
}

// PrepareStore decides which of keys to store and where: keys present or
// pending are skipped, the admission rules applied, and blocks evicted to
// make room (never a pinned block, one being stored, or one among keys).
// The stored keys answer HitPending until CompleteStore. Write the blocks
// to plan.Slots (or call Store instead, which copies for you), then call
// CompleteStore(plan.Job, ok).
//
// It fails with ErrNoSpace, evicting nothing, when the blocks to store do
// not fit in the free and evictable slots; with ErrBusy at the job limit;
// with pool.ErrClosed after Close.
func (m *Manager) PrepareStore(keys []Key) (StorePlan, error) {
	plan, err := m.prepareStore(keys)
	if err == nil && !plan.Job.IsZero() {
		m.jobs[plan.Job.idx].copying = false
		if m.direct != nil {
			for _, s := range plan.Slots {
				if err = m.direct.Invalidate(s); err != nil {
					_ = m.finishStore(plan.Job.idx, false)
					plan = StorePlan{}
					break
				}
			}
		}
	}
	m.debugCheck()
	return plan, err
}

func (m *Manager) prepareStore(keys []Key) (StorePlan, error) {
	if m.unusable() {
		return StorePlan{}, errClosed
	}
	var plan StorePlan
	if m.closed {
		return plan, errClosed
	}
	if m.inFlight >= m.maxJobs {
		return plan, ErrBusy
	}
	m.markEpoch++
	if m.markEpoch == 0 {
		clear(m.mark)
		m.markEpoch = 1
	}
	clear(m.seen)
	held := 0 // evictable slots among keys, protected from this call's evictions
	for i, k := range keys {
		if _, dup := m.seen[k]; dup {
			plan.Skipped++
			continue
		}
		m.seen[k] = struct{}{}
		if s, ok := m.index[k]; ok {
			plan.Skipped++
			if sl := &m.slots[s]; sl.state == slotResident && sl.pins == 0 {
				m.mark[s] = m.markEpoch
				held++
			}
			continue
		}
		if m.adm.MinLookups > 1 && m.tracked[k] < uint32(m.adm.MinLookups) ||
			m.adm.MaxPerRequest > 0 && len(plan.Keys) >= m.adm.MaxPerRequest {
			plan.NotAdmitted++
			continue
		}
		plan.Keys = append(plan.Keys, k)
		plan.Positions = append(plan.Positions, i)
	}
	m.c.skipped += uint64(plan.Skipped)
	m.c.notAdmitted += uint64(plan.NotAdmitted)
	if len(plan.Keys) == 0 {
		return plan, nil
	}
	need := len(plan.Keys) - m.nFree
	if need > m.nEvictable-held {
		m.c.refused++
		return StorePlan{Skipped: plan.Skipped, NotAdmitted: plan.NotAdmitted}, fmt.Errorf("%w: %d blocks to store, %d free, %d evictable", ErrNoSpace, len(plan.Keys), m.nFree, m.nEvictable-held)
	}
	for range max(need, 0) {
		s, ok := m.ev.Victim(m.protectFn)
		if !ok || m.protected(s) {
			// The policy broke its contract; refuse rather than evict
			// what must stay. Slots already freed stay free.
			m.c.refused++
			m.emitRemoved(plan.Evicted)
			return StorePlan{Skipped: plan.Skipped, NotAdmitted: plan.NotAdmitted, Evicted: plan.Evicted}, fmt.Errorf("%w: the eviction policy found no victim", ErrNoSpace)
		}
		sl := &m.slots[s]
		plan.Evicted = append(plan.Evicted, sl.key)
		delete(m.index, sl.key)
		*sl = slot{}
		m.free = append(m.free, int32(s))
		m.nEvictable--
		m.nFree++
		m.c.evictions++
	}
	m.emitRemoved(plan.Evicted)
	j, rec := m.newJob(storeJob)
	plan.Job = j
	plan.Slots = make([]int, len(plan.Keys))
	for i, k := range plan.Keys {
		s := m.free[len(m.free)-1]
		m.free = m.free[:len(m.free)-1]
		m.slots[s] = slot{key: k, gen: j.gen, state: slotStoring}
		m.index[k] = s
		rec.slots = append(rec.slots, s)
		plan.Slots[i] = int(s)
		if m.tracked != nil {
			delete(m.tracked, k)
		}
	}
	m.nFree -= len(plan.Keys)
	m.nStoring += len(plan.Keys)
	return plan, nil
}

// emitRemoved records a BlockRemoved event for keys, if any.
func (m *Manager) emitRemoved(keys []Key) {
	if len(keys) > 0 {
		m.events = append(m.events, Event{Kind: BlockRemoved, Medium: m.medium, Keys: append([]Key(nil), keys...)})
	}
}

// newJob takes a free job record.
func (m *Manager) newJob(kind jobKind) (Job, *job) {
	var idx uint32
	if n := len(m.freeJobs); n > 0 {
		idx = m.freeJobs[n-1]
		m.freeJobs = m.freeJobs[:n-1]
	} else {
		idx = uint32(len(m.jobs))
		m.jobs = append(m.jobs, job{})
	}
	gen := m.nextGen
	m.nextGen++
	rec := &m.jobs[idx]
	*rec = job{gen: gen, epoch: m.epoch, kind: kind, copying: true, slots: rec.slots[:0], elapsed: rec.elapsed,
		bufs: rec.bufs[:0], keys: rec.keys[:0], gens: rec.gens[:0]}
	m.inFlight++
	return Job{gen: gen, idx: idx, mgr: m.id}, rec
}

// jobOf validates j as a job of kind that the caller completes.
func (m *Manager) jobOf(j Job, kind jobKind) (*job, error) {
	if j.mgr != m.id || j.IsZero() {
		m.c.invalid++
		return nil, fmt.Errorf("%w: %v is not a job of this tier", ErrInvalidJob, j)
	}
	if int(j.idx) >= len(m.jobs) || m.jobs[j.idx].gen != j.gen || j.gen == 0 {
		m.c.invalid++
		return nil, fmt.Errorf("%w: %v was completed already, or never issued", ErrInvalidJob, j)
	}
	rec := &m.jobs[j.idx]
	if rec.kind != kind || rec.copying {
		m.c.invalid++
		return nil, fmt.Errorf("%w: %v is not a prepared %s to complete by hand", ErrInvalidJob, j, map[jobKind]string{loadJob: "load", storeJob: "store"}[kind])
	}
	return rec, nil
}

// releaseJob frees a job record.
func (m *Manager) releaseJob(idx uint32) {
	rec := &m.jobs[idx]
	rec.gen = 0
	rec.slots = rec.slots[:0]
	clear(rec.bufs) // the caller's buffers: not kept alive
	rec.bufs = rec.bufs[:0]
	m.freeJobs = append(m.freeJobs, idx)
	m.inFlight--
}

// CompleteStore ends a store prepared by PrepareStore: with ok, its keys
// become loadable (a BlockStored event); without, they are dropped. It
// fails with ErrInvalidJob for a zero, foreign, forged or completed job (a
// zero Job, from a plan with nothing to store, is accepted and does
// nothing), and with ErrStaleJob for a job issued before Reset (its slots
// are reclaimed, nothing else happens).
func (m *Manager) CompleteStore(j Job, ok bool) error {
	if m.unusable() {
		return errClosed
	}
	if j.IsZero() {
		return nil
	}
	rec, err := m.jobOf(j, storeJob)
	if err != nil {
		return err
	}
	if m.direct != nil && ok && rec.epoch == m.epoch {
		for _, s := range rec.slots {
			if sl := &m.slots[s]; !sl.orphan {
				if ok = m.direct.Commit(int(s), sl.key, sl.gen) == nil; !ok {
					break
				}
			}
		}
	}
	err = m.finishStore(j.idx, ok)
	m.debugCheck()
	return err
}

func (m *Manager) finishStore(idx uint32, ok bool) error {
	rec := &m.jobs[idx]
	stale := rec.epoch != m.epoch
	var stored []Key
	for _, s := range rec.slots {
		sl := &m.slots[s]
		m.nStoring--
		switch {
		case sl.orphan || stale:
			*sl = slot{}
			m.free = append(m.free, s)
			m.nFree++
		case ok:
			sl.state = slotResident
			m.nEvictable++
			m.ev.Insert(int(s), sl.key)
			stored = append(stored, sl.key)
		default:
			delete(m.index, sl.key)
			*sl = slot{}
			m.free = append(m.free, s)
			m.nFree++
		}
	}
	m.releaseJob(idx)
	if stale {
		m.c.stale++
		return ErrStaleJob
	}
	if ok {
		m.c.stores += uint64(len(stored))
		if len(stored) > 0 {
			m.events = append(m.events, Event{Kind: BlockStored, Medium: m.medium, Keys: stored})
		}
	} else {
		m.c.storeFailures++
	}
	return nil
}

// PrepareLoad pins the blocks of keys against eviction until CompleteLoad
// and returns their slots; read them (or call Load instead, which copies
// for you), then call CompleteLoad(plan.Job). A key may be given twice.
// It fails with ErrNotLoadable, pinning nothing, if a key is not a Hit;
// with ErrBusy at the job limit; with pool.ErrClosed after Close.
func (m *Manager) PrepareLoad(keys []Key) (LoadPlan, error) {
	if m.unusable() {
		return LoadPlan{}, errClosed
	}
	j, err := m.prepareLoad(keys)
	if err != nil {
		m.debugCheck()
		return LoadPlan{}, err
	}
	rec := &m.jobs[j.idx]
	rec.copying = false
	plan := LoadPlan{Job: j, Slots: make([]int, len(rec.slots))}
	for i, s := range rec.slots {
		plan.Slots[i] = int(s)
	}
	m.debugCheck()
	return plan, nil
}

// prepareLoad pins the blocks of keys in a new job, whose record's slots
// are theirs in the order of keys.
func (m *Manager) prepareLoad(keys []Key) (Job, error) {
	if m.closed {
		return Job{}, errClosed
	}
	if m.inFlight >= m.maxJobs {
		return Job{}, ErrBusy
	}
	if len(keys) == 0 {
		return Job{}, fmt.Errorf("%w: tier: load of no keys", errArg)
	}
	for _, k := range keys {
		if s, ok := m.index[k]; !ok || m.slots[s].state != slotResident {
			return Job{}, fmt.Errorf("%w: %v", ErrNotLoadable, k)
		}
	}
	j, rec := m.newJob(loadJob)
	for _, k := range keys {
		s := m.index[k]
		sl := &m.slots[s]
		if sl.pins == 0 {
			m.nEvictable--
			m.nPinned++
		}
		sl.pins++
		m.ev.Access(int(s))
		rec.slots = append(rec.slots, s)
	}
	return j, nil
}

// CompleteLoad ends a load prepared by PrepareLoad: its blocks are
// evictable again. Errors as CompleteStore's.
func (m *Manager) CompleteLoad(j Job) error {
	if m.unusable() {
		return errClosed
	}
	if _, err := m.jobOf(j, loadJob); err != nil {
		return err
	}
	err := m.finishLoad(j.idx, -1)
	m.debugCheck()
	return err
}

// finishLoad unpins a load's blocks; the block at index failed (if >= 0)
// is dropped from the tier.
func (m *Manager) finishLoad(idx uint32, failed int) error {
	rec := &m.jobs[idx]
	stale := rec.epoch != m.epoch
	var dropped []Key
	for i, s := range rec.slots {
		sl := &m.slots[s]
		if i == failed && !sl.orphan && !stale {
			// Never served again: out of the index now, freed with its
			// last pin.
			delete(m.index, sl.key)
			m.ev.Remove(int(s))
			sl.orphan = true
			dropped = append(dropped, sl.key)
		}
		sl.pins--
		if sl.pins > 0 {
			continue
		}
		m.nPinned--
		if sl.orphan {
			*sl = slot{}
			m.free = append(m.free, s)
			m.nFree++
		} else {
			m.nEvictable++
		}
	}
	loaded := uint64(len(rec.slots)) // releaseJob empties rec.slots
	m.releaseJob(idx)
	m.emitRemoved(dropped)
	if stale {
		m.c.stale++
		return ErrStaleJob
	}
	if failed >= 0 {
		m.c.loadFailures++
	} else {
		m.c.loads += loaded
	}
	return nil
}

// Reset empties the tier: every block leaves (BlockRemoved events), and
// the Storage is told to never recover them. Jobs in flight become stale:
// their completions fail with ErrStaleJob and only give their slots back,
// so a copy still running never lands in a slot given to a new block.
func (m *Manager) Reset() error {
	if m.unusable() {
		return errClosed
	}
	var removed []Key
	for s := range m.slots {
		sl := &m.slots[s]
		switch {
		case sl.state == slotFree || sl.orphan:
		case sl.state == slotStoring:
			sl.orphan = true
		case sl.pins > 0:
			m.ev.Remove(s)
			removed = append(removed, sl.key)
			sl.orphan = true
		default:
			m.ev.Remove(s)
			removed = append(removed, sl.key)
			*sl = slot{}
			m.free = append(m.free, int32(s))
			m.nEvictable--
			m.nFree++
		}
	}
	clear(m.index)
	clear(m.tracked)
	m.trackRing, m.trackNext = m.trackRing[:0], 0
	m.epoch++
	m.emitRemoved(removed)
	err := m.st.Reset(m.nextGen)
	m.debugCheck()
	return err
}

// TakeEvents appends the events recorded since the last call to dst and
// returns it.
func (m *Manager) TakeEvents(dst []Event) []Event {
	if m == nil {
		return dst
	}
	dst = append(dst, m.events...)
	clear(m.events)
	m.events = m.events[:0]
	return dst
}

// Close stops the copy workers (waiting for the copies they run), and
// closes the storage. Jobs in flight are abandoned. Later calls fail with
// pool.ErrClosed, Lookup says Miss. Close may be called more than once.
func (m *Manager) Close() error {
	if m == nil || m.st == nil || m.closed {
		return nil
	}
	m.closed = true
	close(m.tasks)
	m.wg.Wait()
	m.pub.Seal(m.stats()) // Snapshot readers get the final counts at once
	_ = m.tr.Close()
	return m.st.Close()
}

// misses appends Miss for every key to dst: what an unusable Manager
// answers.
func misses(keys []Key, dst []Result) []Result {
	for range keys {
		dst = append(dst, Miss)
	}
	return dst
}

// debugCheck runs Check in invariant builds and keeps the first failure
// for Check to report. It ends every mutating call (Drain included), so it
// is also where the owner publishes for a Snapshot that asked.
func (m *Manager) debugCheck() {
	m.checkInvariants()
	m.publishWanted()
}

// checkInvariants is debugCheck without the publication.
func (m *Manager) checkInvariants() {
	if invariants.Enabled && !m.unusable() && m.invErr == nil {
		m.invErr = m.check()
	}
}
