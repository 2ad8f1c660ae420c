package tier

import "fmt"

type counters struct {
	lookups, hits, misses, pending      uint64
	stores, storeFailures, skipped      uint64
	notAdmitted, refused, evictions     uint64
	loads, loadFailures, stale, invalid uint64
	recovered                           uint64
	removals, removeBusy                uint64
}

// Stats is a Manager's accounting. The slot counts always satisfy
// Free + Evictable + StorePending + LoadPinned == Capacity.
type Stats struct {
	Medium Medium
	// Capacity is the number of slots and BlockSize their size: exactly
	// what the tier was built with, never rounded; Bytes is their product.
	Capacity, BlockSize int
	Bytes               int64
	// Free slots hold nothing; Evictable ones hold a loadable block no
	// job pins; StorePending ones are being written (HIT_PENDING, or
	// orphaned by Reset until their job completes); LoadPinned ones are
	// being read by at least one load.
	Free, Evictable, StorePending, LoadPinned int
	// Lookups counts keys looked up: Hits + Misses + Pending.
	Lookups, Hits, Misses, Pending uint64
	// Stores counts blocks stored; StoreFailures store jobs that failed;
	// Skipped keys already present or pending; NotAdmitted keys turned
	// away by admission; Refused PrepareStore calls with no room.
	Stores, StoreFailures, Skipped, NotAdmitted, Refused uint64
	// Evictions counts blocks evicted to make room.
	Evictions uint64
	// Removed counts blocks Remove dropped; RemoveBusy keys Remove left
	// because a job held them.
	Removed, RemoveBusy uint64
	// Loads counts blocks loaded; LoadFailures load jobs that failed (a
	// corrupt block, dropped).
	Loads, LoadFailures uint64
	// StaleCompletions counts completions of jobs issued before a Reset;
	// InvalidCompletions completions of invalid jobs.
	StaleCompletions, InvalidCompletions uint64
	// JobsInFlight is the jobs prepared and not completed.
	JobsInFlight int
	// Recovered is the blocks served again from an earlier run.
	Recovered uint64
	// CopyConflicts counts copies that found their slot busy (a read
	// under a write, a write under a read or write): always 0 unless the
	// Manager's invariant is broken.
	CopyConflicts uint64
}

// Stats returns the accounting. In invariant builds it also runs Check;
// see Check for the result. Only the owner may call it; it also publishes
// what it returns for Snapshot (until Close).
func (m *Manager) Stats() Stats {
	if m == nil || m.st == nil {
		return Stats{}
	}
	m.checkInvariants()
	st := m.stats()
	if !m.closed {
		m.pub.Publish(st)
	}
	return st
}

// stats computes Stats without checking or publishing.
func (m *Manager) stats() Stats {
	c := m.c
	return Stats{
		Medium: m.medium, Capacity: len(m.slots), BlockSize: m.bs, Bytes: int64(len(m.slots)) * int64(m.bs),
		Free: m.nFree, Evictable: m.nEvictable, StorePending: m.nStoring, LoadPinned: m.nPinned,
		Lookups: c.lookups, Hits: c.hits, Misses: c.misses, Pending: c.pending,
		Stores: c.stores, StoreFailures: c.storeFailures, Skipped: c.skipped, NotAdmitted: c.notAdmitted, Refused: c.refused,
		Evictions: c.evictions, Removed: c.removals, RemoveBusy: c.removeBusy, Loads: c.loads, LoadFailures: c.loadFailures,
		StaleCompletions: c.stale, InvalidCompletions: c.invalid, JobsInFlight: m.inFlight,
		Recovered: c.recovered, CopyConflicts: m.clashes.Load(),
	}
}

// Check verifies the Manager's whole state against its counters: the
// accounting identity, every slot's state against the index and the jobs
// in flight, and no copy conflict. It returns the first failure an
// invariant build found after any earlier call, else what it finds now.
// It is O(slots + jobs); tests call it, invariant builds run it after
// every mutating call.
func (m *Manager) Check() error {
	if m == nil || m.st == nil {
		return errClosed
	}
	if m.invErr != nil {
		return m.invErr
	}
	return m.check()
}

func (m *Manager) check() error {
	n := len(m.slots)
	if m.nFree+m.nEvictable+m.nStoring+m.nPinned != n {
		return fmt.Errorf("tier: accounting: free %d + evictable %d + store-pending %d + load-pinned %d != capacity %d", m.nFree, m.nEvictable, m.nStoring, m.nPinned, n)
	}
	if c := m.clashes.Load(); c != 0 {
		return fmt.Errorf("tier: %d copies found their slot busy", c)
	}
	var free, ev, st, pin int
	for s := range m.slots {
		sl := &m.slots[s]
		switch {
		case sl.state == slotFree:
			free++
			if sl.pins != 0 || sl.orphan {
				return fmt.Errorf("tier: free slot %d has state %+v", s, *sl)
			}
			continue
		case sl.state == slotStoring:
			st++
		case sl.pins > 0:
			pin++
		case sl.pins < 0 || sl.orphan:
			return fmt.Errorf("tier: resident slot %d has state %+v", s, *sl)
		default:
			ev++
		}
		// An orphan's key may be in the index again, stored anew in
		// another slot after Reset; it must not point to the orphan.
		if i, ok := m.index[sl.key]; ok && int(i) == s && sl.orphan || !sl.orphan && (!ok || int(i) != s) {
			return fmt.Errorf("tier: slot %d (key %v, orphan %v) and the index disagree", s, sl.key, sl.orphan)
		}
	}
	if free != m.nFree || free != len(m.free) || ev != m.nEvictable || st != m.nStoring || pin != m.nPinned {
		return fmt.Errorf("tier: counted free %d (list %d) evictable %d storing %d pinned %d; counters say %d %d %d %d",
			free, len(m.free), ev, st, pin, m.nFree, m.nEvictable, m.nStoring, m.nPinned)
	}
	if len(m.index) != n-free-m.orphans() {
		return fmt.Errorf("tier: index holds %d keys, %d slots are in use", len(m.index), n-free-m.orphans())
	}
	live, pins := 0, make(map[int32]int32)
	for i := range m.jobs {
		j := &m.jobs[i]
		if j.gen == 0 {
			continue
		}
		live++
		for _, s := range j.slots {
			want := slotStoring
			if j.kind == loadJob {
				want = slotResident
				pins[s]++
			}
			if m.slots[s].state != want {
				return fmt.Errorf("tier: job %d holds slot %d in state %d", i, s, m.slots[s].state)
			}
		}
	}
	if live != m.inFlight {
		return fmt.Errorf("tier: %d jobs live, %d counted in flight", live, m.inFlight)
	}
	for s := range m.slots {
		if m.slots[s].state == slotResident && m.slots[s].pins != pins[int32(s)] {
			return fmt.Errorf("tier: slot %d has %d pins, load jobs hold %d", s, m.slots[s].pins, pins[int32(s)])
		}
	}
	return nil
}

func (m *Manager) orphans() int {
	o := 0
	for s := range m.slots {
		if m.slots[s].orphan {
			o++
		}
	}
	return o
}
