package adapters

import (
	"fmt"
	"math"
	"slices"
)

// The Manager's indexes over its adapter slots. Each is a binary min-heap
// that holds a slot at most once, so that demotion finds its victim at the
// top (O(1)) and every change of an adapter's state costs O(log n), where
// the linear scans they replace cost O(registered adapters) per demotion.
const (
	// qHot: hot adapters that may be demoted (neither held, pinned,
	// loading nor protected), by (Policy.Keep, registration order).
	qHot = iota
	// qWarm: warm copies that may be dropped (no Prefetch reads them, not
	// protected), by (Keep, order), copies of hot adapters at -Inf.
	qWarm
	// qAge: the slots of qHot and qWarm whose Keep would change with time
	// alone (an access leaving the promotion window), by when it does.
	qAge
	// qPin: pinned adapters, by the pin's expiry.
	qPin
	// qWorthy: hot-worthy adapters, by when they stop being so.
	qWorthy
	nIndexes
)

// entry is one slot in an index: its key (hi, then lo) and the slot.
type entry struct {
	hi  float64
	lo  uint64
	idx uint32
}

func (e entry) less(f entry) bool { return e.hi < f.hi || (e.hi == f.hi && e.lo < f.lo) }

// never is the time of an event that does not come.
const never = math.MaxInt64

// iset puts slot i into index q with key (hi, lo), or moves it there. A
// NaN key ranks as +Inf: like the scan it replaces, no demotion ever picks
// it.
func (m *Manager) iset(q int, i uint32, hi float64, lo uint64) {
	if hi != hi {
		hi = math.Inf(1)
	}
	h := m.ix[q]
	e := entry{hi: hi, lo: lo, idx: i}
	p := m.ads[i].pos[q]
	if p == 0 {
		m.ix[q] = append(h, e)
		j := len(m.ix[q]) - 1
		m.ads[i].pos[q] = uint32(j + 1)
		m.up(q, j)
		return
	}
	j := int(p - 1)
	old := h[j]
	h[j] = e
	if e.less(old) {
		m.up(q, j)
	} else {
		m.down(q, j)
	}
}

// idel removes slot i from index q, if it is there.
func (m *Manager) idel(q int, i uint32) {
	p := m.ads[i].pos[q]
	if p == 0 {
		return
	}
	m.ads[i].pos[q] = 0
	h := m.ix[q]
	j, last := int(p-1), len(h)-1
	if j != last {
		h[j] = h[last]
		m.ads[h[j].idx].pos[q] = uint32(j + 1)
	}
	m.ix[q] = h[:last]
	if j != last {
		m.down(q, j)
		m.up(q, j)
	}
}

// itop returns the least entry of index q.
func (m *Manager) itop(q int) (entry, bool) {
	if len(m.ix[q]) == 0 {
		return entry{}, false
	}
	return m.ix[q][0], true
}

func (m *Manager) up(q, j int) {
	h := m.ix[q]
	for j > 0 {
		p := (j - 1) / 2
		if !h[j].less(h[p]) {
			return
		}
		m.swap(q, j, p)
		j = p
	}
}

func (m *Manager) down(q, j int) {
	h := m.ix[q]
	for {
		l := 2*j + 1
		if l >= len(h) {
			return
		}
		c := l
		if r := l + 1; r < len(h) && h[r].less(h[l]) {
			c = r
		}
		if !h[c].less(h[j]) {
			return
		}
		m.swap(q, j, c)
		j = c
	}
}

func (m *Manager) swap(q, i, j int) {
	h := m.ix[q]
	h[i], h[j] = h[j], h[i]
	m.ads[h[i].idx].pos[q] = uint32(i + 1)
	m.ads[h[j].idx].pos[q] = uint32(j + 1)
}

// members copies the slots of index q, in slot order, into the Manager's
// scratch slice and returns it: for loops that change the index.
func (m *Manager) members(q int) []uint32 {
	s := m.scratch[:0]
	for _, e := range m.ix[q] {
		s = append(s, e.idx)
	}
	slices.Sort(s)
	m.scratch = s
	return s
}

// demotable reports whether slot i belongs in qHot.
func (m *Manager) demotable(a *adapter, i uint32) bool {
	return a.live() && a.hot() && a.refs == 0 && a.pinUntil == 0 && int(i) != m.protect
}

// droppable reports whether slot i belongs in qWarm.
func (m *Manager) droppable(a *adapter, i uint32) bool {
	return a.live() && !a.warm.IsZero() && a.warmBusy == 0 && int(i) != m.protect
}

// reindex puts slot i where its state says in qHot, qWarm and qAge, its
// keys as of now. Call it after every change of what those depend on:
// residency, references, pin, Prefetch, protection, or an access.
func (m *Manager) reindex(i uint32, now int64) {
	a := &m.ads[i]
	hot, warm := m.demotable(a, i), m.droppable(a, i)
	if !hot && !warm {
		m.idel(qHot, i)
		m.idel(qWarm, i)
		m.idel(qAge, i)
		return
	}
	info, until := m.infoUntil(a, now)
	k := m.cfg.policy.Keep(info)
	if hot {
		m.iset(qHot, i, k, a.order)
	} else {
		m.idel(qHot, i)
	}
	if warm {
		wk := k
		if a.hot() {
			wk = math.Inf(-1) // another copy exists: drop it first
		}
		m.iset(qWarm, i, wk, a.order)
	} else {
		m.idel(qWarm, i)
	}
	if until != never {
		m.iset(qAge, i, 0, uint64(until))
	} else {
		m.idel(qAge, i)
	}
}

// refresh re-ranks the adapters whose Keep changed with time alone since
// it was computed: each access leaves the window once, so this costs
// O(log n) per access, amortized.
func (m *Manager) refresh(now int64) {
	for {
		e, ok := m.itop(qAge)
		if !ok || int64(e.lo) > now {
			return
		}
		m.reindex(e.idx, now) // its new expiry is after now: the loop ends
	}
}

// unindex removes slot i from every index: Unregister.
func (m *Manager) unindex(i uint32) {
	for q := range nIndexes {
		m.idel(q, i)
	}
}

// addSat returns t+d, saturated at never.
func addSat(t, d int64) int64 {
	if t > never-d {
		return never
	}
	return t + d
}

// checkIndexes verifies the indexes against the adapters' state: heap
// order, positions, membership, and keys that are not due a refresh.
func (m *Manager) checkIndexes(bad func(string, ...any)) {
	for q := range nIndexes {
		h := m.ix[q]
		for j, e := range h {
			if int(e.idx) >= len(m.ads) || m.ads[e.idx].pos[q] != uint32(j+1) {
				bad("index %d: entry %d names slot %d, whose position disagrees", q, j, e.idx)
				return
			}
			if j > 0 && e.less(h[(j-1)/2]) {
				bad("index %d: entry %d is less than its parent", q, j)
			}
		}
	}
	for i := range m.ads {
		a, idx := &m.ads[i], uint32(i)
		in := func(q int) bool { return a.pos[q] != 0 }
		key := func(q int) entry { return m.ix[q][a.pos[q]-1] }
		hot, warm := m.demotable(a, idx), m.droppable(a, idx)
		if in(qHot) != hot || in(qWarm) != warm {
			bad("slot %d (%q): indexed demotable %v droppable %v, want %v %v", i, a.id, in(qHot), in(qWarm), hot, warm)
			continue
		}
		if in(qPin) != (a.live() && a.pinUntil > 0) || (in(qPin) && key(qPin).lo != uint64(a.pinUntil)) {
			bad("slot %d (%q): pin index disagrees with pin until %d", i, a.id, a.pinUntil)
		}
		worthy := a.live() && m.hotWorthy(a, m.last)
		if worthy && (!in(qWorthy) || key(qWorthy).lo != uint64(addSat(a.ring[a.ringPos], int64(m.cfg.window)))) {
			bad("slot %d (%q): hot-worthy, not indexed so", i, a.id)
		}
		if in(qWorthy) && (!a.live() || (!worthy && int64(key(qWorthy).lo) > m.last)) {
			bad("slot %d (%q): indexed hot-worthy, not so", i, a.id)
		}
		if !hot && !warm {
			if in(qAge) {
				bad("slot %d (%q): aged but in no ranking index", i, a.id)
			}
			continue
		}
		if in(qAge) && int64(key(qAge).lo) <= m.last {
			continue // due a refresh: its keys may be stale
		}
		info, until := m.infoUntil(a, m.last)
		k := m.cfg.policy.Keep(info)
		if k != k {
			k = math.Inf(1)
		}
		if until != never && (!in(qAge) || key(qAge).lo != uint64(until)) || until == never && in(qAge) {
			bad("slot %d (%q): age index disagrees with %d", i, a.id, until)
		}
		if hot && key(qHot) != (entry{hi: k, lo: a.order, idx: idx}) {
			bad("slot %d (%q): hot key %v, want %v", i, a.id, key(qHot).hi, k)
		}
		if warm {
			if a.hot() {
				k = math.Inf(-1)
			}
			if key(qWarm) != (entry{hi: k, lo: a.order, idx: idx}) {
				bad("slot %d (%q): warm key %v, want %v", i, a.id, key(qWarm).hi, k)
			}
		}
	}
}

// The scans the indexes replace, kept to check them: builds with -race or
// -tags locus_invariants compare every victim the indexes pick with the
// scan's (debugVictim).

func (m *Manager) scanHot(now int64, limit float64) int {
	return m.scan(limit, func(a *adapter, i uint32) (float64, bool) {
		if !m.demotable(a, i) {
			return 0, false
		}
		return m.keep(a, now), true
	})
}

func (m *Manager) scanWarm(now int64, limit float64) int {
	return m.scan(limit, func(a *adapter, i uint32) (float64, bool) {
		if !m.droppable(a, i) {
			return 0, false
		}
		if a.hot() {
			return math.Inf(-1), true
		}
		return m.keep(a, now), true
	})
}

// scan returns the candidate with the lowest keep value below limit, the
// earliest registered among equals, or -1 for none. keep returns an
// adapter's value and whether it is a candidate.
func (m *Manager) scan(limit float64, keep func(a *adapter, i uint32) (float64, bool)) int {
	best, bestK := -1, 0.0
	for i := range m.ads {
		a := &m.ads[i]
		k, ok := keep(a, uint32(i))
		if ok && k < limit && (best < 0 || k < bestK || (k == bestK && a.order < m.ads[best].order)) {
			best, bestK = i, k
		}
	}
	return best
}

// debugVictim records a violation when the index picked another victim
// than the scan would.
func (m *Manager) debugVictim(tier string, got, want int) {
	if got != want && m.invErr == nil {
		m.invErr = fmt.Errorf("adapters: %s victim %d from the index, %d from a scan", tier, got, want)
	}
}
