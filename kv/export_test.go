package kv

// Check verifies the manager's whole state (see check).
func (m *Manager) Check() error { return m.check() }

// CachedHashes returns every hash in the prefix cache index.
func (m *Manager) CachedHashes() map[Hash]bool {
	out := make(map[Hash]bool, len(m.index))
	for h := range m.index {
		out[h] = true
	}
	return out
}

// BlockHash returns the hash of pool block i (zero when it has none) and
// its reference count.
func (m *Manager) BlockHash(i int) (Hash, int) { return m.blocks[i].hash, int(m.blocks[i].ref) }

// EvictionOrder returns the listed blocks, next victim first.
func (m *Manager) EvictionOrder() []int {
	var out []int
	for p := range m.order.lists {
		for i := m.order.lists[p].head; i >= 0; i = m.blocks[i].next {
			out = append(out, int(i))
		}
	}
	return out
}
