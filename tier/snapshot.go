package tier

// Snapshot returns the tier's accounting as the owner publishes it, for any
// goroutine (a metrics scraper, see metrics.NewTier), concurrently with the
// owner. Use Stats on the owner goroutine; use Snapshot everywhere else.
//
// The owner publishes at Stats and Close, and at the end of a Drain (or of
// any other call that changes the tier) when a Snapshot has asked since the
// last publication; a call nobody asked costs one atomic load more. A kv
// Manager configured WithTiers drains its tiers at its own Drain, so an
// engine that drives its tiers through kv publishes once per step without
// doing anything. Snapshot returns a value published in the last
// millisecond at once; otherwise it asks and waits for the owner's next
// call, up to 100 ms, and returns the latest value, which from an idle
// owner is what it last published. After Close it returns the final counts
// at once. CopyConflicts is read at the call (it is an atomic count);
// every other count is as published, and the identity Free + Evictable +
// StorePending + LoadPinned == Capacity holds within one snapshot.
//
// A Snapshot on the owner's goroutine cannot be served by the owner: unless
// the owner published in the last millisecond, it waits the full 100 ms.
// A nil or zero Manager returns the zero Stats and never waits.
func (m *Manager) Snapshot() Stats {
	if m == nil || m.st == nil {
		return Stats{}
	}
	st := m.pub.Get()
	st.CopyConflicts = max(st.CopyConflicts, m.clashes.Load())
	return st
}

// publishWanted publishes the accounting if a Snapshot asked for it: one
// atomic load when nobody did. Owner goroutine only.
func (m *Manager) publishWanted() {
	if m.unusable() || !m.pub.Wanted() {
		return
	}
	m.pub.Publish(m.stats())
}
