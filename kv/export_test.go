package kv

// Check verifies the manager's whole state (see check).
func (m *Manager) Check() error { return m.check() }

// CachedHashes returns every hash in the prefix cache index.
func (m *Manager) CachedHashes() map[Hash]bool {
	out := make(map[Hash]bool, len(m.index))
	for _, i := range m.index {
		out[m.blocks[i].hash] = true
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

// Uncache drops the cached block of hash h from the prefix cache if no
// sequence holds it, as vLLM's tests pop a hash from their cache map; it
// reports whether it did.
func (m *Manager) Uncache(h Hash) bool {
	bi, ok := m.cached(h)
	if !ok || !m.blocks[bi].listed {
		return false
	}
	m.evict(bi)
	m.release(bi)
	m.log.flushRemoved()
	return m.flushFree() == nil
}

// Check verifies every group (see Groups.check).
func (g *Groups) Check() error { return g.check() }

// Manager returns group i's manager (nil for a state group).
func (g *Groups) Manager(i int) *Manager { return g.gs[i].m }

// Rekey makes the cached block of hash old the cached block of hash h, as
// if its tokens had hashed to h: for tests of hashes that share the
// index's key (Hash.key) and differ after it. It reports whether old was
// cached.
func (m *Manager) Rekey(old, h Hash) bool {
	bi, ok := m.cached(old)
	if !ok {
		return false
	}
	delete(m.index, old.key())
	m.index[h.key()] = bi
	m.blocks[bi].hash = h
	return true
}

// FlipByte returns h with byte i of its digest inverted.
func FlipByte(h Hash, i int) Hash {
	h.sum[i] ^= 0xff
	return h
}
