package kv

import (
	"container/heap"
	"math/bits"
)

// The eviction order: one doubly linked list of block indices per
// priority, least recently released at the head, and a bitmap of the
// non-empty lists, so that finding the next victim is one bit scan. A
// block is on a list ("listed") exactly when nothing holds it and it is
// either cached (it has a hash) or an unhashed block that
// QueueFreedBehindCached keeps in line.

const levels = int(MaxPriority) + 1

type list struct{ head, tail int32 }

type order struct {
	lists    [levels]list
	nonEmpty [(levels + 63) / 64]uint64
}

func (o *order) init() {
	for i := range o.lists {
		o.lists[i] = list{-1, -1}
	}
}

// push appends block i at the tail of its priority's list.
func (m *Manager) push(i int32) {
	b := &m.blocks[i]
	p := int(b.prio)
	l := &m.order.lists[p]
	b.prev, b.next = l.tail, -1
	if l.tail >= 0 {
		m.blocks[l.tail].next = i
	} else {
		l.head = i
		m.order.nonEmpty[p/64] |= 1 << (p % 64)
	}
	l.tail = i
	b.listed = true
	m.listed++
	if b.hash.IsZero() {
		m.listedUnhashed++
	}
}

// unlink takes block i off its list.
func (m *Manager) unlink(i int32) {
	b := &m.blocks[i]
	p := int(b.prio)
	l := &m.order.lists[p]
	if b.prev >= 0 {
		m.blocks[b.prev].next = b.next
	} else {
		l.head = b.next
	}
	if b.next >= 0 {
		m.blocks[b.next].prev = b.prev
	} else {
		l.tail = b.prev
	}
	if l.head < 0 {
		m.order.nonEmpty[p/64] &^= 1 << (p % 64)
	}
	b.prev, b.next, b.listed = -1, -1, false
	m.listed--
	if b.hash.IsZero() {
		m.listedUnhashed--
	}
}

// victim returns the next block to evict: the head of the lowest non-empty
// priority. The order must not be empty.
func (m *Manager) victim() int32 {
	for w, word := range m.order.nonEmpty {
		if word != 0 {
			return m.order.lists[w*64+bits.TrailingZeros64(word)].head
		}
	}
	panic("kv: victim of an empty eviction order") // callers count first
}

// setPriority gives block i priority p; a listed block moves to the tail of
// p's list.
func (m *Manager) setPriority(i int32, p Priority) {
	b := &m.blocks[i]
	if b.prio == p {
		return
	}
	if b.listed {
		m.unlink(i)
		b.prio = p
		m.push(i)
		return
	}
	b.prio = p
}

// decays is a min-heap of the blocks whose priority expires, by expiry;
// each block knows its position (blockMeta.heap), so that a block is in it
// at most once and leaves it in O(log n).
type decays struct {
	m     *Manager
	items []int32
}

func (d *decays) Len() int { return len(d.items) }
func (d *decays) Less(a, b int) bool {
	return d.m.blocks[d.items[a]].expiry < d.m.blocks[d.items[b]].expiry
}
func (d *decays) Swap(a, b int) {
	d.items[a], d.items[b] = d.items[b], d.items[a]
	d.m.blocks[d.items[a]].heap = int32(a)
	d.m.blocks[d.items[b]].heap = int32(b)
}

// Push and Pop are heap.Interface's; adding goes through expire, which
// appends and fixes without boxing an int32 into an interface.
func (d *decays) Push(any) { panic("kv: decays.Push is not used") }
func (d *decays) Pop() any {
	last := d.items[len(d.items)-1]
	d.m.blocks[last].heap = -1
	d.items = d.items[:len(d.items)-1]
	return nil
}

// expire makes block i's priority decay at time at (UnixNano).
func (m *Manager) expire(i int32, at int64) {
	b := &m.blocks[i]
	b.expiry = at
	if b.heap >= 0 {
		heap.Fix(&m.decays, int(b.heap))
		return
	}
	b.heap = int32(len(m.decays.items))
	m.decays.items = append(m.decays.items, i)
	heap.Fix(&m.decays, int(b.heap))
}

// keep cancels block i's decay.
func (m *Manager) keep(i int32) {
	if h := m.blocks[i].heap; h >= 0 {
		heap.Remove(&m.decays, int(h))
	}
}

// decay returns the blocks whose priority has expired to DefaultPriority.
// It reads the clock only when some priority is timed.
func (m *Manager) decay() {
	if len(m.decays.items) == 0 {
		return
	}
	now := m.cfg.clock().UnixNano()
	for len(m.decays.items) > 0 {
		i := m.decays.items[0]
		if m.blocks[i].expiry > now {
			return
		}
		heap.Remove(&m.decays, 0)
		m.setPriority(i, DefaultPriority)
	}
}
