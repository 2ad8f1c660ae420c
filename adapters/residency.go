package adapters

import (
	"errors"
	"math"

	"github.com/locus-go/locus/internal/invariants"
	"github.com/locus-go/locus/pages"
	"github.com/locus-go/locus/pool"
)

// noLimit lets a load demote any adapter that may be demoted.
var noLimit = math.Inf(1)

// pagesOf returns the hot pages an adapter of size bytes takes.
func (m *Manager) pagesOf(size int) int { return (size + m.page - 1) / m.page }

// warmPagesOf returns the warm pages a copy of n bytes takes.
func (m *Manager) warmPagesOf(n int) int { return (n + m.cfg.warmPage - 1) / m.cfg.warmPage }

// info is what the Policy sees of a.
func (m *Manager) info(a *adapter, now int64) Info {
	i, _ := m.infoUntil(a, now)
	return i
}

// infoUntil returns what the Policy sees of a at now, and the time from
// which it will see something else unless a changes: when the oldest
// access within the window leaves it (never, if none is within it).
func (m *Manager) infoUntil(a *adapter, now int64) (Info, int64) {
	recent, until := 0, int64(never)
	for i := range a.ringN {
		t := a.ring[(a.ringPos-1-i+2*len(a.ring))%len(a.ring)]
		if now-t >= int64(m.cfg.window) {
			break
		}
		recent++
		until = addSat(t, int64(m.cfg.window))
	}
	return Info{
		ID: a.id, Bytes: a.size, Recent: recent, HotWorthy: recent == len(a.ring),
		LastUse: durOf(a.lastUse), Loaded: durOf(a.loaded),
	}, until
}

func (m *Manager) hotWorthy(a *adapter, now int64) bool {
	return a.ringN == len(a.ring) && now-a.ring[a.ringPos] < int64(m.cfg.window)
}

func (m *Manager) keep(a *adapter, now int64) float64 { return m.cfg.policy.Keep(m.info(a, now)) }

// topBelow returns the slot at the top of index q if it ranks below limit,
// or -1, once the ranks that aged are refreshed.
func (m *Manager) topBelow(q int, now int64, limit float64) int {
	m.refresh(now)
	if e, ok := m.itop(q); ok && e.hi < limit {
		return int(e.idx)
	}
	return -1
}

// victimHot returns the lowest-ranked hot adapter that may be demoted
// (neither held, pinned, loading nor protected) and ranks below limit, or
// -1: the top of qHot, in O(1) once the ranks that aged are refreshed.
func (m *Manager) victimHot(now int64, limit float64) int {
	v := m.topBelow(qHot, now, limit)
	if invariants.Enabled {
		m.debugVictim("hot", v, m.scanHot(now, limit))
	}
	return v
}

// allocHot places a hot run for adapter idx, demoting adapters ranked
// below limit to meet the budgets and to make room in the pages pool. The
// run comes back pinned once.
func (m *Manager) allocHot(idx uint32, now int64, limit float64) (pages.Run, error) {
	m.protect = int(idx)
	m.reindex(idx, now) // its warm copy, which the load reads, cannot be dropped
	defer func() {
		m.protect = -1
		m.reindex(idx, now)
	}()
	n := m.pagesOf(m.ads[idx].size)
	for (m.cfg.hotSlots > 0 && m.hotN >= m.cfg.hotSlots) ||
		(m.cfg.hotBytes > 0 && int64(m.hotPages+n)*int64(m.page) > m.cfg.hotBytes) {
		v := m.victimHot(now, limit)
		if v < 0 {
			m.c.noRoom++
			return pages.Run{}, ErrNoRoom
		}
		m.demote(uint32(v), now)
	}
	for {
		r, err := m.hot.Alloc(n, m.content)
		if err == nil {
			return r, nil
		}
		if !errors.Is(err, pool.ErrExhausted) {
			return pages.Run{}, err
		}
		v := m.victimHot(now, limit)
		if v < 0 {
			m.c.noRoom++
			return pages.Run{}, ErrNoRoom
		}
		m.demote(uint32(v), now)
	}
}

// makeHot loads adapter idx into a new hot run, from its warm copy, its
// copy in the cold tier or its loader, on the owner goroutine.
func (m *Manager) makeHot(idx uint32, now int64) error {
	r, err := m.allocHot(idx, now, noLimit)
	if err != nil {
		return err
	}
	a := &m.ads[idx]
	run, err := m.hot.Bytes(r)
	if err != nil {
		_ = m.hot.Free(r)
		return err
	}
	buf := run[:a.size]
	switch {
	case !a.warm.IsZero():
		wb, _ := m.warm.Bytes(a.warm) // live: a's copy is protected while it loads
		if a.warmQ {
			err = m.decode(buf, wb[:a.warmLen])
		} else {
			copy(buf, wb[:a.warmLen])
		}
		if err == nil {
			m.c.warmLoads++
			m.c.bytesMoved += uint64(a.warmLen)
		}
	case m.coldLoadable(idx) && m.loadCold(idx, run):
		a = &m.ads[idx]
		m.c.coldTierLoads++
		m.c.bytesMoved += uint64(a.coldLen)
	default:
		a = &m.ads[idx]
		err = load(a.loader, buf)
		if err == nil {
			m.c.coldLoads++
			m.c.bytesMoved += uint64(a.size)
			a.loads = addLoad(a.loads)
		}
	}
	if err != nil {
		_ = m.hot.Free(r)
		m.c.loadErrors++
		return err
	}
	m.setHot(idx, r, now)
	return nil
}

// setHot records run r as adapter idx's hot run, pinned once.
func (m *Manager) setHot(idx uint32, r pages.Run, now int64) {
	a := &m.ads[idx]
	a.run, a.runPinned, a.loaded = r, true, now
	m.byRun[r.First()] = idx
	m.hotN++
	m.hotPages += m.pagesOf(a.size)
	if !a.warm.IsZero() {
		m.both++
	}
	m.c.promotions++
	m.reindex(idx, now)
}

// demote moves a hot adapter down: to the warm tier if it has no warm copy
// and one can be made, else to cold, and frees its run.
func (m *Manager) demote(idx uint32, now int64) {
	a := &m.ads[idx]
	m.saveHot(idx, a.run, now)
	m.dropHot(idx, true)
	m.c.demotions++
}

// saveHot keeps a copy of adapter idx's hot run r, about to go: in the
// warm tier if it has no copy there and one can be made, else in the cold
// tier (WithCold) if it is admitted.
func (m *Manager) saveHot(idx uint32, r pages.Run, now int64) {
	a := &m.ads[idx]
	if !a.warm.IsZero() {
		return
	}
	buf, err := m.hot.Bytes(r)
	if err != nil {
		return
	}
	if m.warm != nil && m.storeWarm(idx, buf[:a.size], now) {
		return
	}
	m.toCold(idx, buf[:a.size], false)
}

// dropHot forgets adapter idx's hot run, freeing it when free (not when
// the pages pool evicted it).
func (m *Manager) dropHot(idx uint32, free bool) {
	a := &m.ads[idx]
	if free {
		_ = m.hot.Free(a.run)
	}
	delete(m.byRun, a.run.First())
	m.hotN--
	m.hotPages -= m.pagesOf(a.size)
	if !a.warm.IsZero() {
		m.both--
	}
	a.run, a.runPinned = pages.Run{}, false
	m.reindex(idx, m.last)
}

// Evicted tells the Manager that the pages pool evicted run r of content
// c; it reports whether the run was one of the Manager's. Call it from the
// pool's EvictFunc (pages.WithEvictFunc) when the adapter content type is
// evictable:
//
//	var m *adapters.Manager
//	evict := func(r pages.Run, c pages.Content) {
//		if m.Evicted(r, c) {
//			return
//		}
//		// a KV run: drop it from the block table
//	}
//
// The pool evicts only runs without pins, so only adapters neither held,
// pinned nor loading. While the run is still readable the Manager copies
// it to the warm tier (if it has none there), then forgets it: the
// adapter is warm or cold and its next Acquire reloads it.
func (m *Manager) Evicted(r pages.Run, c pages.Content) bool {
	if m == nil || m.closed || m.hot == nil || c != m.content {
		return false
	}
	idx, ok := m.byRun[r.First()]
	if !ok || m.ads[idx].run != r {
		return false
	}
	m.saveHot(idx, r, m.last)
	m.dropHot(idx, false)
	m.c.evictions++
	return true
}

// storeWarm copies src, adapter idx's weights, into the warm tier,
// quantized when the Manager quantizes at demotion, dropping warm copies
// ranked below the adapter to make room. It reports whether the copy was
// made; if not, the adapter goes cold.
func (m *Manager) storeWarm(idx uint32, src []byte, now int64) bool {
	a := &m.ads[idx]
	q := m.cfg.quant
	quant := q.valid() && m.cfg.compressAfter == 0 && !a.noQuant && q.EncodedSize(a.size) > 0
	length := a.size
	if quant {
		length = q.EncodedSize(a.size)
	}
	n := m.warmPagesOf(length)
	if n > m.warm.Pages() {
		return false
	}
	limit := m.keep(a, now)
	for m.cfg.warmSlots > 0 && m.warmN >= m.cfg.warmSlots {
		v := m.victimWarm(now, limit)
		if v < 0 {
			return false
		}
		m.dropWarm(uint32(v), true)
	}
	var r pages.Run
	for {
		var err error
		r, err = m.warm.Alloc(n, pages.DefaultContent)
		if err == nil {
			break
		}
		v := m.victimWarm(now, limit)
		if !errors.Is(err, pool.ErrExhausted) || v < 0 {
			return false
		}
		m.dropWarm(uint32(v), true)
	}
	wb, _ := m.warm.Bytes(r)
	wb = wb[:length]
	if quant {
		if err := q.Encode(wb, src); err != nil {
			_ = m.warm.Free(r)
			a.noQuant = true
			m.c.quantRefused++
			return m.storeWarm(idx, src, now) // once: noQuant is set
		}
		m.c.compressions++
	} else {
		copy(wb, src)
	}
	a.warm, a.warmLen, a.warmQ, a.since = r, length, quant, now
	m.warmN++
	m.warmPages += n
	m.warmBytes += int64(length)
	if quant {
		m.quantN++
	}
	if !a.run.IsZero() {
		m.both++
	}
	m.c.bytesMoved += uint64(length)
	m.c.warmStores++
	m.reindex(idx, now)
	return true
}

// victimWarm returns the warm copy to drop first among those ranked below
// limit (copies of hot adapters rank lowest: another copy exists), sparing
// the protected adapter and copies a Prefetch reads, or -1: the top of
// qWarm. The adapter being stored has no copy yet, so it is not there.
func (m *Manager) victimWarm(now int64, limit float64) int {
	v := m.topBelow(qWarm, now, limit)
	if invariants.Enabled {
		m.debugVictim("warm", v, m.scanWarm(now, limit))
	}
	return v
}

// dropWarm frees adapter idx's warm copy: the adapter is cold unless hot.
// If it goes cold and save is set, the copy goes to the cold tier first
// (WithCold, if admitted).
func (m *Manager) dropWarm(idx uint32, save bool) {
	a := &m.ads[idx]
	if save && a.run.IsZero() && m.cold != nil {
		if wb, err := m.warm.Bytes(a.warm); err == nil {
			m.toCold(idx, wb[:a.warmLen], a.warmQ)
		}
		a = &m.ads[idx]
	}
	_ = m.warm.Free(a.warm)
	m.warmN--
	m.warmPages -= m.warmPagesOf(a.warmLen)
	m.warmBytes -= int64(a.warmLen)
	if a.warmQ {
		m.quantN--
	}
	if !a.run.IsZero() {
		m.both--
	}
	a.warm, a.warmLen, a.warmQ = pages.Run{}, 0, false
	m.c.warmDrops++
	m.reindex(idx, m.last)
}

// compress replaces an exact warm copy with its int8 encoding. It makes no
// room for it: a copy that does not fit stays exact until a later Tick.
func (m *Manager) compress(idx uint32, now int64) {
	a := &m.ads[idx]
	q := m.cfg.quant
	length := q.EncodedSize(a.size)
	if length < 0 {
		a.noQuant = true
		return
	}
	n := m.warmPagesOf(length)
	r, err := m.warm.Alloc(n, pages.DefaultContent)
	if err != nil {
		return
	}
	dst, _ := m.warm.Bytes(r)
	src, _ := m.warm.Bytes(a.warm)
	if err := q.Encode(dst[:length], src[:a.size]); err != nil {
		_ = m.warm.Free(r)
		a.noQuant = true
		m.c.quantRefused++
		return
	}
	_ = m.warm.Free(a.warm)
	m.warmPages += n - m.warmPagesOf(a.warmLen)
	m.warmBytes += int64(length - a.warmLen)
	a.warm, a.warmLen, a.warmQ, a.since = r, length, true, now
	m.quantN++
	m.c.compressions++
}

// Tick applies the time-driven rules; call it once per scheduling step
// (or every few): it applies the cold tier's finished copies (WithCold,
// as Drain does), ends expired pins, demotes hot adapters that are not
// hot-worthy and have been idle past the idle threshold (WithPromotion),
// compresses warm copies idle past the compression threshold
// (WithQuantization), and prefetches hot-worthy adapters that are not hot
// when they outrank a hot adapter that may be demoted (or room is free).
// Its error joins the prefetches that could not start for another reason
// than room.
func (m *Manager) Tick() error {
	if !m.ok() {
		return errClosed
	}
	m.drainCold()
	now := m.now()
	m.expirePins(now)
	// Only adapters that may be demoted (qHot), warm copies that may be
	// compressed (qWarm) and hot-worthy adapters (qWorthy) can change:
	// Tick never walks the registered adapters.
	for _, i := range m.members(qHot) {
		a := &m.ads[i]
		if m.demotable(a, i) && now-max(a.lastUse, a.loaded) >= int64(m.cfg.hotIdle) && !m.hotWorthy(a, now) {
			m.demote(i, now)
			m.c.idleDemotions++
		}
	}
	if m.warm != nil && m.cfg.quant.valid() && m.cfg.compressAfter > 0 {
		for _, i := range m.members(qWarm) {
			a := &m.ads[i]
			if m.droppable(a, i) && !a.warmQ && !a.noQuant && now-max(a.lastUse, a.since) >= int64(m.cfg.compressAfter) {
				m.compress(i, now)
			}
		}
	}
	for {
		e, ok := m.itop(qWorthy)
		if !ok || int64(e.lo) > now {
			break
		}
		m.idel(qWorthy, e.idx) // no longer hot-worthy
	}
	var errs []error
	for _, i := range m.members(qWorthy) {
		a := &m.ads[i]
		if a.live() && a.run.IsZero() && m.hotWorthy(a, now) {
			err := m.prefetch(i, now, m.keep(a, now))
			if err != nil && !errors.Is(err, ErrNoRoom) && !errors.Is(err, ErrBusy) {
				errs = append(errs, err)
			}
		}
	}
	m.debugCheck()
	return errors.Join(errs...)
}
