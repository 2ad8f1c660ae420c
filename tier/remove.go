package tier

// Remove drops the blocks of keys from the tier now, as an eviction would:
// their slots become free, they answer Miss, and one BlockRemoved event
// names them. It returns how many blocks it removed, and busy with the
// keys it left appended.
//
// Use it when the owner knows blocks are no longer wanted and should give
// their room back before eviction would reach them: a LoRA adapter
// unregistered or promoted out of a warm tier, blocks whose content the
// engine invalidated. Do not use it to cancel a job, and do not use it to
// empty the tier (Reset does, and also tells the Storage to forget).
//
// A block a job holds is busy and is not removed: one being stored
// (HIT_PENDING until its CompleteStore or the Drain that reports its
// Store) or pinned by a load (until its CompleteLoad or Drain). Its key is
// appended to busy, so the caller learns exactly which keys stayed; Remove
// them again once their jobs are completed. Keys the tier does not hold,
// and repeated keys, are ignored. Jobs are untouched, so every job
// completes as before: a block that was removed is never in a job, and a
// slot it frees is written again only under a new write generation, so a
// read stamped with the removed block's generation fails as stale.
//
// Remove does not erase the medium. A persistent Storage (tier/disk) may
// recover a removed block after a restart if its slot was not written
// again, as it may an evicted one; that is safe because keys name content.
// A caller whose keys do not name content (a registration, not a hash)
// must make them unique per process, or call Reset.
//
// It costs O(len(keys)) and allocates only the event's key list (nothing
// when it removes nothing). It fails with pool.ErrClosed on a nil, zero or
// closed Manager, removing nothing.
func (m *Manager) Remove(keys []Key, busy []Key) (removed int, _ []Key, err error) {
	if m.unusable() {
		return 0, busy, errClosed
	}
	gone := m.gone[:0]
	for _, k := range keys {
		s, ok := m.index[k]
		if !ok {
			continue
		}
		sl := &m.slots[s]
		if sl.state != slotResident || sl.pins > 0 {
			m.c.removeBusy++
			busy = append(busy, k)
			continue
		}
		m.ev.Remove(int(s))
		delete(m.index, k)
		*sl = slot{}
		m.free = append(m.free, s)
		m.nEvictable--
		m.nFree++
		gone = append(gone, k)
	}
	m.c.removals += uint64(len(gone))
	m.emitRemoved(gone)
	clear(gone)
	m.gone = gone[:0]
	m.debugCheck()
	return len(gone), busy, nil
}
