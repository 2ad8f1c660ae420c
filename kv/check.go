package kv

import "fmt"

// check verifies the manager's whole state against its counters: what the
// tests call after every step and invariant builds at every Stats and
// Drain. It is O(blocks + sequences' blocks) and allocates nothing once
// checkRefs exists.
func (m *Manager) check() error {
	n := len(m.blocks)
	if cap(m.checkRefs) < n {
		m.checkRefs = make([]int32, n)
	}
	refs := m.checkRefs[:n]
	clear(refs)
	live, reserved := 0, 0
	for si := range m.seqs {
		s := &m.seqs[si]
		if s.gen&1 == 0 {
			if len(s.blocks) != 0 || s.tokens != 0 || s.look != 0 || s.skip != 0 || len(s.hashes) != 0 {
				return fmt.Errorf("released sequence slot %d holds %d blocks", si, len(s.blocks))
			}
			continue
		}
		live++
		if want := m.blocksFor(s.tokens + s.look); s.look < 0 || len(s.blocks) != want || len(s.partial) != s.tokens%m.bs {
			return fmt.Errorf("sequence %d: %d tokens and %d slots in %d blocks, %d partial", si, s.tokens, s.look, len(s.blocks), len(s.partial))
		}
		if want := s.tokens / m.bs; !m.cfg.caching {
			if len(s.hashes) != 0 {
				return fmt.Errorf("sequence %d: %d hashes without prefix caching", si, len(s.hashes))
			}
		} else if len(s.hashes) != want {
			return fmt.Errorf("sequence %d: %d hashes for %d full blocks", si, len(s.hashes), want)
		}
		if s.skip < 0 || s.skip > m.skipFor(s.tokens) {
			return fmt.Errorf("sequence %d: %d blocks outside the window of %d tokens, at most %d", si, s.skip, s.tokens, m.skipFor(s.tokens))
		}
		for k, h := range s.blocks {
			if k < s.skip {
				if !h.IsZero() {
					return fmt.Errorf("sequence %d: block %d is outside the window but held", si, k)
				}
				continue
			}
			i := h.Index()
			if i < 0 || i >= n || !m.blocks[i].held || m.blocks[i].h != h {
				return fmt.Errorf("sequence %d holds %v, which the manager does not", si, h)
			}
			refs[i]++
		}
		for k := m.blocksFor(s.tokens); k < len(s.blocks); k++ {
			reserved++
			if b := &m.blocks[s.blocks[k].Index()]; b.ref != 1 || !b.hash.IsZero() {
				return fmt.Errorf("sequence %d: lookahead block %d is shared (%d) or hashed", si, k, b.ref)
			}
		}
	}
	if live != m.live || reserved != m.reserved {
		return fmt.Errorf("%d live sequences and %d lookahead blocks, counted %d and %d", live, reserved, m.live, m.reserved)
	}
	if !m.cfg.caching && len(m.index) != 0 {
		return fmt.Errorf("%d blocks cached without prefix caching", len(m.index))
	}
	var held, inUse, pinned, listed, unhashed int
	for i := range m.blocks {
		b := &m.blocks[i]
		if b.ref != refs[i] {
			return fmt.Errorf("block %d: ref %d, held by %d sequences", i, b.ref, refs[i])
		}
		if !b.held {
			if b.ref != 0 || b.pins != 0 || b.copies != 0 || b.loading || b.evictAfter || b.listed || !b.hash.IsZero() || b.heap >= 0 {
				return fmt.Errorf("block %d is in the pool but has state %+v", i, *b)
			}
			continue
		}
		held++
		switch {
		case b.ref > 0 || b.pins > 0 || b.copies > 0:
			inUse++
			if b.listed {
				return fmt.Errorf("block %d is in use and in the eviction order", i)
			}
		case b.listed:
		default:
			return fmt.Errorf("block %d is held by nothing and not in the eviction order", i)
		}
		if b.pins > 0 {
			pinned++
		}
		if b.listed {
			listed++
			if b.hash.IsZero() {
				unhashed++
			}
		}
		if !b.hash.IsZero() {
			if j, ok := m.index[b.hash.key()]; !ok || int(j) != i {
				return fmt.Errorf("block %d has hash %v, which the index gives to block %d", i, b.hash, j)
			}
		}
		if b.heap >= 0 && (int(b.heap) >= len(m.decays.items) || int(m.decays.items[b.heap]) != i) {
			return fmt.Errorf("block %d: decay heap position %d is wrong", i, b.heap)
		}
	}
	for k, i := range m.index {
		if h := m.blocks[i].hash; h.IsZero() || h.key() != k {
			return fmt.Errorf("index gives key %#x to block %d, whose hash is %v", k, i, h)
		}
	}
	if held != m.held || inUse != m.inUse || pinned != m.pinned || listed != m.listed || unhashed != m.listedUnhashed {
		return fmt.Errorf("counted held %d in use %d pinned %d listed %d unhashed %d; counters say %d %d %d %d %d",
			held, inUse, pinned, listed, unhashed, m.held, m.inUse, m.pinned, m.listed, m.listedUnhashed)
	}
	walked := 0
	for p := range m.order.lists {
		l := m.order.lists[p]
		nonEmpty := m.order.nonEmpty[p/64]&(1<<(p%64)) != 0
		if nonEmpty != (l.head >= 0) {
			return fmt.Errorf("priority %d: bitmap says non-empty %v, head %d", p, nonEmpty, l.head)
		}
		prev := int32(-1)
		for i := l.head; i >= 0; i = m.blocks[i].next {
			b := &m.blocks[i]
			if !b.listed || int(b.prio) != p || b.prev != prev {
				return fmt.Errorf("priority %d: block %d is linked wrongly", p, i)
			}
			prev = i
			if walked++; walked > listed {
				return fmt.Errorf("the eviction order has a cycle")
			}
		}
		if l.tail != prev {
			return fmt.Errorf("priority %d: tail %d, last block %d", p, l.tail, prev)
		}
	}
	if walked != listed {
		return fmt.Errorf("the eviction order links %d blocks, %d are listed", walked, listed)
	}
	if m.pinned > m.maxPinned {
		return fmt.Errorf("%d blocks pinned, at most %d allowed", m.pinned, m.maxPinned)
	}
	return m.checkTiers()
}
