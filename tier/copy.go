package tier

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/locus-go/locus/pool"
)

// task is one Store or Load job handed to the copy workers. The worker
// owns the task; it shares nothing with the owner but the slot memory
// (through the Storage) and the caller's buffers, both fenced by the
// slot states (see the package doc).
type task struct {
	idx   uint32
	gen   uint64
	store bool
	slots []int32
	keys  []Key
	gens  []uint64
	bufs  [][]byte
	took  *int64 // the copy time in ns, for Done.Elapsed
}

// Store prepares a store of keys (as PrepareStore) and copies the blocks
// to store from srcs (srcs[i] is the block of keys[i], BlockSize bytes) on
// a copy worker. The keys stay HitPending until the Drain that reports the
// job done. The caller must not change a stored src until then: the copy
// may run at any time before.
//
// It fails as PrepareStore does, and with an error wrapping
// pool.ErrInvalidArgument if srcs does not match keys.
func (m *Manager) Store(keys []Key, srcs [][]byte) (StorePlan, error) {
	if m.unusable() {
		return StorePlan{}, errClosed
	}
	if len(srcs) != len(keys) {
		return StorePlan{}, fmt.Errorf("%w: tier: %d keys, %d blocks", errArg, len(keys), len(srcs))
	}
	for i, b := range srcs {
		if len(b) != m.bs {
			return StorePlan{}, fmt.Errorf("%w: tier: block %d is %d bytes, want %d", errArg, i, len(b), m.bs)
		}
	}
	plan, err := m.prepareStore(keys)
	if err != nil || plan.Job.IsZero() {
		m.debugCheck()
		return plan, err
	}
	rec := m.copyJob(plan.Job.idx)
	for _, p := range plan.Positions {
		rec.bufs = append(rec.bufs, srcs[p])
	}
	// The worker reads the job's own copy of the keys: plan.Keys is the
	// caller's to keep and change.
	rec.keys = append(rec.keys, plan.Keys...)
	m.tasks <- task{idx: plan.Job.idx, gen: plan.Job.gen, store: true, slots: rec.slots, keys: rec.keys, bufs: rec.bufs, took: rec.elapsed} // never blocks: at most maxJobs jobs are in flight, the channel's capacity
	m.debugCheck()
	return plan, nil
}

// Load pins the blocks of keys (as PrepareLoad) and copies them into dsts
// (dsts[i] receives the block of keys[i], BlockSize bytes) on a copy
// worker. The caller must not read a dst until the Drain that reports the
// job done, and must use it only if that Done is OK.
//
// It fails as PrepareLoad does, and with an error wrapping
// pool.ErrInvalidArgument if dsts does not match keys.
func (m *Manager) Load(keys []Key, dsts [][]byte) (Job, error) {
	if m.unusable() {
		return Job{}, errClosed
	}
	if len(dsts) != len(keys) {
		return Job{}, fmt.Errorf("%w: tier: %d keys, %d buffers", errArg, len(keys), len(dsts))
	}
	for i, b := range dsts {
		if len(b) != m.bs {
			return Job{}, fmt.Errorf("%w: tier: buffer %d is %d bytes, want %d", errArg, i, len(b), m.bs)
		}
	}
	j, err := m.prepareLoad(keys)
	if err != nil {
		m.debugCheck()
		return Job{}, err
	}
	rec := m.copyJob(j.idx)
	for _, s := range rec.slots {
		rec.keys = append(rec.keys, m.slots[s].key)
		rec.gens = append(rec.gens, m.slots[s].gen)
	}
	m.tasks <- task{idx: j.idx, gen: j.gen, slots: rec.slots, keys: rec.keys, gens: rec.gens, bufs: dsts, took: rec.elapsed}
	m.debugCheck()
	return j, nil
}

// copyJob returns the record of job idx, just prepared, with its
// elapsed cell (made on the record's first copying job, then reused).
func (m *Manager) copyJob(idx uint32) *job {
	rec := &m.jobs[idx]
	if rec.elapsed == nil {
		rec.elapsed = new(int64)
	}
	return rec
}

// worker runs copy tasks until the task channel closes. It reports each
// finished task as one handle on its own mailbox producer (used by this
// goroutine only): the job's generation and index, and in the pool field 0
// for success or 1 + the index of the block that failed.
func (m *Manager) worker(p pool.Producer) {
	defer m.wg.Done()
	defer func() { _ = p.Close() }()
	var enc [pool.HandleSize]byte
	var out [1]pool.Handle
	batch, _ := m.st.(BatchStorage)
	var slots []int // the slots of a batch, reused
	for t := range m.tasks {
		failed := -1
		start := time.Now()
		if batch != nil && len(t.slots) > 1 {
			failed, slots = m.copyBatch(batch, &t, slots[:0])
		} else {
			for i, s := range t.slots {
				if !m.copy(&t, i, s) {
					failed = i
					break
				}
			}
		}
		*t.took = int64(time.Since(start)) // read by the owner after the Send below
		binary.LittleEndian.PutUint64(enc[0:], t.gen)
		binary.LittleEndian.PutUint32(enc[8:], t.idx)
		binary.LittleEndian.PutUint32(enc[12:], uint32(failed+1))
		_ = out[0].UnmarshalBinary(enc[:])
		if p.Send(out[:]) != nil {
			return // the transport closed under us: the Manager is closing
		}
	}
}

// copy runs one block of a task under the slot's guard word.
func (m *Manager) copy(t *task, i int, s int32) bool {
	if !m.guard(s, t.store) {
		return false
	}
	var err error
	if t.store {
		err = m.st.WriteSlot(int(s), t.keys[i], t.gen, t.bufs[i])
	} else {
		err = m.st.ReadSlot(int(s), t.keys[i], t.gens[i], t.bufs[i])
	}
	m.unguard(s, t.store)
	return err == nil
}

// copyBatch runs every block of a task in one call of st, under the guard
// words of all its slots (slots is scratch space for their numbers). It
// returns the index of the block that failed, or -1.
func (m *Manager) copyBatch(st BatchStorage, t *task, slots []int) (int, []int) {
	for i, s := range t.slots {
		if !m.guard(s, t.store) {
			for _, held := range t.slots[:i] {
				m.unguard(held, t.store)
			}
			return i, slots
		}
		slots = append(slots, int(s))
	}
	var failed int
	var err error
	if t.store {
		failed, err = st.WriteSlots(slots, t.keys, t.gen, t.bufs)
	} else {
		failed, err = st.ReadSlots(slots, t.keys, t.gens, t.bufs)
	}
	for _, s := range t.slots {
		m.unguard(s, t.store)
	}
	switch {
	case err == nil:
		return -1, slots
	case failed < 0 || failed >= len(t.slots):
		return 0, slots // a storage that named no block: blame the first
	}
	return failed, slots
}

// guard takes slot s's guard word for a write (-1) or one more read; it
// counts a conflict and fails if the slot is busy the other way.
func (m *Manager) guard(s int32, write bool) bool {
	g := &m.guards[s]
	if write {
		if !g.CompareAndSwap(0, -1) {
			m.clashes.Add(1)
			return false
		}
		return true
	}
	for {
		v := g.Load()
		if v < 0 {
			m.clashes.Add(1)
			return false
		}
		if g.CompareAndSwap(v, v+1) {
			return true
		}
	}
}

// unguard releases what guard took.
func (m *Manager) unguard(s int32, write bool) {
	if write {
		m.guards[s].Store(0)
	} else {
		m.guards[s].Add(-1)
	}
}

// Drain applies the completions the copy workers sent since the last
// Drain and appends one Done per finished Store or Load job to dst. It
// never waits for a copy. Call it once per engine step.
func (m *Manager) Drain(dst []Done) ([]Done, error) {
	if m.unusable() {
		return dst, errClosed
	}
	m.done = dst
	m.tr.Drain(m.sink)
	dst, m.done = m.done, nil
	m.debugCheck()
	return dst, nil
}

// complete is the sink of Drain: it applies each completion.
func (m *Manager) complete(chunk []pool.Handle) {
	for _, h := range chunk {
		var buf [pool.HandleSize]byte
		enc, _ := h.AppendBinary(buf[:0])
		gen := binary.LittleEndian.Uint64(enc[0:])
		idx := binary.LittleEndian.Uint32(enc[8:])
		failed := int(binary.LittleEndian.Uint32(enc[12:])) - 1
		if int(idx) >= len(m.jobs) || m.jobs[idx].gen != gen || !m.jobs[idx].copying {
			m.c.invalid++ // cannot happen: workers report only jobs they were given
			continue
		}
		d := Done{Job: Job{gen: gen, idx: idx, mgr: m.id}, Store: m.jobs[idx].kind == storeJob, OK: failed < 0, Failed: failed}
		if e := m.jobs[idx].elapsed; e != nil {
			d.Elapsed = time.Duration(*e)
		}
		if d.Store {
			d.Err = m.finishStore(idx, d.OK)
		} else {
			d.Err = m.finishLoad(idx, failed)
		}
		if !d.OK && d.Err == nil {
			d.Err = fmt.Errorf("tier: copy of block %d of %v failed", failed, d.Job)
		}
		m.done = append(m.done, d)
	}
}
