package kv

import (
	"fmt"
	"math"
	"time"

	"github.com/locus-go/locus/pool"
)

// The prefix cache: blocks by hash, reference counts, the eviction order,
// pins and retention priorities, and the watermarks. Every block the
// manager holds has a blockMeta; a block is free (back in the pool),
// cached (listed for eviction) or in use (referenced or pinned).

// blockMeta is one pool block's state, in Manager.blocks by index.
type blockMeta struct {
	h          pool.Handle // valid while held
	hash       Hash        // non-zero while the block is in the prefix cache
	expiry     int64       // UnixNano at which prio decays, when heap >= 0
	ref        int32
	pins       int32
	prev, next int32 // eviction order links, while listed
	heap       int32 // position in decays, -1 when prio does not decay
	prio       Priority
	held       bool
	listed     bool
	loading    bool  // a load into it is in flight: its bytes are not KV yet
	evictAfter bool  // write-back: evicted once its stores complete
	copies     int32 // holds of copies: queued or running stores, a running load
}

// maxHit is how many blocks of a prompt of n tokens a prefix hit may
// cover: never the block of its last token, which the engine computes
// again to sample from.
func (m *Manager) maxHit(n int) int {
	if n == 0 {
		return 0
	}
	return (n - 1) / m.bs
}

// skipFor returns how many leading blocks of a sequence are wholly outside
// the sliding window of its next token once computed tokens are computed
// (vLLM skips computed - window + 1 tokens); 0 without a window.
func (m *Manager) skipFor(computed int) int {
	if m.cfg.window == 0 {
		return 0
	}
	return max(0, computed-m.cfg.window+1) / m.bs
}

// hit finds the longest prefix hit of at most limit blocks among the
// chain hashes in m.hashes: with full attention every block of the prefix
// cached; with a sliding window the last run of window blocks before the
// hit point, found right to left as vLLM's sliding-window manager finds
// it (a run from the first block counts even when shorter). It sets
// m.hits to the cached blocks a sequence admitted at the hit holds and
// returns the hit in blocks, the leading blocks outside the window (not
// held) and how many of m.hits are in the eviction order. It changes
// nothing else.
func (m *Manager) hit(limit int) (hit, skip, listed int) {
	m.hits = m.hits[:0]
	limit = min(limit, len(m.hashes))
	if !m.cfg.caching || limit <= 0 {
		return 0, 0, 0
	}
	if m.cfg.window == 0 {
		for _, h := range m.hashes[:limit] {
			bi, ok := m.cached(h)
			if !ok {
				break
			}
			m.hits = append(m.hits, bi)
			if m.blocks[bi].listed {
				listed++
			}
		}
		return len(m.hits), 0, listed
	}
	need := max(1, m.windowBlocks())
	run := 0
	hit = -1
	for i := limit - 1; i >= 0; i-- {
		if _, ok := m.cached(m.hashes[i]); !ok {
			run = 0
			continue
		}
		if run++; run >= need {
			hit = i + run
			break
		}
	}
	if hit < 0 {
		hit = run // the run from the first block, shorter than the window
	}
	skip = m.skipFor(hit * m.bs)
	for _, h := range m.hashes[skip:hit] {
		bi, _ := m.cached(h)
		m.hits = append(m.hits, bi)
		if m.blocks[bi].listed {
			listed++
		}
	}
	return hit, skip, listed
}

// complete records that block i of s is full of tokens, hashing and
// caching it unless an equal block is cached already (then it stays
// private and is freed, not cached, when released). Without prefix caching
// it does nothing.
func (m *Manager) complete(s *seq, i int, tokens []uint32) {
	if !m.cfg.caching {
		return
	}
	m.store(s, i, m.hasher.Block(s.parent(), tokens, s.key), tokens)
}

// store records that block i of s is full with hash h; see complete.
func (m *Manager) store(s *seq, i int, h Hash, tokens []uint32) {
	s.hashes = append(s.hashes, h)
	m.indexBlock(s, i, tokens)
}

// indexBlock enters full block i of s, of hash s.hashes[i] and tokens,
// into the prefix cache, unless an equal block is cached already; with
// write-through tiers it queues the block's store for the next Drain.
func (m *Manager) indexBlock(s *seq, i int, tokens []uint32) {
	h := s.hashes[i]
	var parent Hash
	if i > 0 {
		parent = s.hashes[i-1]
	}
	bi := int32(s.blocks[i].Index())
	if _, taken := m.index[h.key()]; taken {
		// An equal block is cached, or (for hashes that differ only after
		// their first 8 bytes, which the index cannot tell apart) another
		// block holds the key: this one stays private, as a duplicate.
		m.log.flushStored(s.key) // the run of stored blocks breaks here
		return
	}
	m.index[h.key()] = bi
	m.blocks[bi].hash = h
	m.st.Stored++
	if len(m.tiers) > 0 && m.cfg.demotion == WriteThrough {
		m.queue(bi, m.drains+1) // its KV is computed by the next Drain
		m.keepForStore(bi, parent, s.key, tokens)
	}
	m.log.stored(parent, h, tokens)
}

// allocate takes need blocks: as many as the pool has free (the only step
// that can fail, done before anything changes), the rest to be evicted by
// evictInto. It returns the scratch slice of need handles and how many came
// from the pool.
func (m *Manager) allocate(need int) ([]pool.Handle, int, error) {
	if cap(m.fresh) < need {
		m.fresh = make([]pool.Handle, need)
	}
	fresh := m.fresh[:need]
	k := min(need, len(m.blocks)-m.held)
	if k > 0 {
		if err := m.p.AllocChunk(fresh[:k]); err != nil {
			return nil, 0, err
		}
		for j, h := range fresh[:k] {
			// A BlockPool that hands out a block past its capacity, or
			// one the manager holds, is refused: the blocks marked so far
			// are unmarked and the chunk given back, so nothing indexes
			// out of range or holds a block twice.
			i := h.Index()
			if i < 0 || i >= len(m.blocks) || m.blocks[i].held {
				for _, g := range fresh[:j] {
					m.blocks[g.Index()].held = false
				}
				_ = m.p.FreeChunk(fresh[:k])
				return nil, 0, fmt.Errorf("kv: %w: the pool handed out block %d of %d, outside its capacity or already held", errBadPool, i, len(m.blocks))
			}
			b := &m.blocks[i]
			b.h, b.held = h, true
		}
		m.held += k
	}
	return fresh, k, nil
}

// evictInto fills dst with evicted blocks, lowest priority and least
// recently released first. The caller has counted that enough are listed.
func (m *Manager) evictInto(dst []pool.Handle) {
	for k := range dst {
		i := m.victim()
		m.evict(i)
		dst[k] = m.blocks[i].h
	}
}

// evict takes listed block i out of the eviction order and the cache; the
// manager still holds it.
func (m *Manager) evict(i int32) {
	m.unlink(i)
	b := &m.blocks[i]
	if !b.hash.IsZero() {
		delete(m.index, b.hash.key())
		m.log.removed(b.hash)
		b.hash = Hash{}
		m.st.Evictions++
	}
	m.keep(i)
	b.prio = DefaultPriority
}

// own gives a fresh block to its first holder.
func (m *Manager) own(h pool.Handle) {
	m.blocks[h.Index()].ref = 1
	m.inUse++
}

// acquire adds a reference to cached or held block i.
func (m *Manager) acquire(i int32) {
	b := &m.blocks[i]
	if b.ref == 0 && b.pins == 0 && b.copies == 0 {
		m.unlink(i)
		m.inUse++
	}
	b.ref++
	if b.evictAfter {
		m.rescue(i)
	}
}

// drop removes a reference from block i. A block nobody holds any more
// stays cached if it has a hash, else joins the eviction order
// (QueueFreedBehindCached) or is queued in m.toFree for the pool.
func (m *Manager) drop(i int32) {
	b := &m.blocks[i]
	b.ref--
	if b.ref > 0 || b.pins > 0 || b.copies > 0 {
		return
	}
	m.inUse--
	m.settle(i)
}

// settle puts block i, which nothing holds any more, where it goes: the
// eviction order if it is cached, else the pool (or the eviction order,
// with QueueFreedBehindCached).
func (m *Manager) settle(i int32) {
	b := &m.blocks[i]
	if !b.hash.IsZero() {
		m.push(i) // cached: evictable at its priority
		return
	}
	if m.cfg.freed == QueueFreedBehindCached {
		// Freed, not cached: queued like a cached block, but with the
		// default priority, as SetPriority promises for a freed block.
		m.keep(i)
		b.prio = DefaultPriority
		m.push(i)
		return
	}
	m.release(i)
}

// release gives held, unlisted block i back to the pool (through m.toFree).
func (m *Manager) release(i int32) {
	b := &m.blocks[i]
	m.keep(i)
	b.prio = DefaultPriority
	b.held = false
	m.held--
	m.toFree = append(m.toFree, b.h)
}

// flushFree returns the blocks queued by release to the pool, in one chunk.
func (m *Manager) flushFree() error {
	if len(m.toFree) == 0 {
		return nil
	}
	err := m.p.FreeChunk(m.toFree)
	clear(m.toFree)
	m.toFree = m.toFree[:0]
	if err != nil {
		return fmt.Errorf("kv: the pool refused blocks the manager held: %w", err)
	}
	return nil
}

// copyBlock copies the bytes of block src of p into block dst.
func copyBlock(p BlockPool, dst, src pool.Handle) error {
	d, err := p.Bytes(dst)
	if err != nil {
		return err
	}
	s, err := p.Bytes(src)
	if err != nil {
		return err
	}
	copy(d, s)
	return nil
}

// SetPriority sets the retention priority of the blocks of a live sequence
// that hold tokens from to to-1: when they are cached and blocks must be
// evicted, lower priorities go first. A positive duration makes the
// priority decay to DefaultPriority once it has passed (checked when an
// allocation evicts and at Drain); 0 keeps it. A block keeps its priority
// while it stays cached and gets DefaultPriority back when it is evicted or
// freed. Blocks shared by several sequences take the latest priority set.
func (m *Manager) SetPriority(id SeqID, from, to int, p Priority, d time.Duration) error {
	si, ok := m.liveSeq(id)
	if !ok {
		return m.seqError(id)
	}
	s := &m.seqs[si]
	if p > MaxPriority || from < 0 || from > to || to > s.tokens || d < 0 {
		return fmt.Errorf("kv: %w: priority %d for tokens [%d, %d) of %d, duration %v",
			pool.ErrInvalidArgument, p, from, to, s.tokens, d)
	}
	if from == to {
		return nil
	}
	var at int64
	if d > 0 {
		at = expiry(m.cfg.clock(), d)
	}
	for k := max(from/m.bs, s.skip); k <= (to-1)/m.bs; k++ {
		i := int32(s.blocks[k].Index())
		m.setPriority(i, p)
		if d > 0 {
			m.expire(i, at)
		} else {
			m.keep(i)
		}
	}
	return nil
}

// Pin keeps the cached blocks of the longest cached prefix of tokens (full
// blocks, computed with key) out of eviction until Unpin, even when no
// sequence holds them: a system prompt that should stay resident. It
// returns how many blocks the prefix has. Pins count: a block pinned twice
// needs two Unpins. Pinned blocks count as in use. Pinning fails with
// ErrPinLimit, and pins nothing, if it would take the pinned blocks past
// the share set by WithMaxPinned.
func (m *Manager) Pin(tokens []uint32, key Key) (int, error) {
	if err := m.usable(); err != nil {
		return 0, err
	}
	m.cachedPrefix(tokens, key)
	added := 0
	for _, bi := range m.hits {
		if m.blocks[bi].pins == 0 {
			added++
		}
	}
	if m.pinned+added > m.maxPinned {
		return 0, ErrPinLimit
	}
	for _, bi := range m.hits {
		b := &m.blocks[bi]
		if b.pins == 0 {
			m.pinned++
			if b.ref == 0 && b.copies == 0 {
				m.unlink(bi)
				m.inUse++
			}
		}
		b.pins++
		if b.evictAfter {
			m.rescue(bi)
		}
	}
	return len(m.hits), nil
}

// Unpin removes one pin from each pinned block of the longest cached prefix
// of tokens and returns how many blocks it unpinned. A block without pins
// left that no sequence holds becomes evictable again.
func (m *Manager) Unpin(tokens []uint32, key Key) (int, error) {
	if err := m.usable(); err != nil {
		return 0, err
	}
	m.cachedPrefix(tokens, key)
	n := 0
	for _, bi := range m.hits {
		b := &m.blocks[bi]
		if b.pins == 0 {
			continue
		}
		n++
		b.pins--
		if b.pins == 0 {
			m.pinned--
			if b.ref == 0 && b.copies == 0 {
				m.inUse--
				m.push(bi)
			}
		}
	}
	return n, nil
}

// cached returns the cached block of hash h. The index is keyed by the
// hash's first 8 bytes (Hash.key); the block's whole hash is compared, so
// a hash that shares only its key with a cached block's is a miss. Every
// indexed block's hash is its key's (indexBlock adds no second block
// under a key), so deleting by key removes the right entry.
func (m *Manager) cached(h Hash) (int32, bool) {
	bi, ok := m.index[h.key()]
	return bi, ok && m.blocks[bi].hash == h
}

// cachedPrefix sets m.hits to the cached blocks of the longest cached prefix
// of tokens.
func (m *Manager) cachedPrefix(tokens []uint32, key Key) {
	m.hits = m.hits[:0]
	if !m.cfg.caching {
		return
	}
	var parent Hash
	for ; len(tokens) >= m.bs; tokens = tokens[m.bs:] {
		parent = m.hasher.Block(parent, tokens[:m.bs], key)
		bi, ok := m.cached(parent)
		if !ok {
			return
		}
		m.hits = append(m.hits, bi)
	}
}

// Reset drops every cached block that nobody holds (no sequence, no pin)
// and returns how many it dropped; blocks in use stay cached. The
// subscriber gets AllBlocksCleared when the cache is empty afterwards and
// no tier keeps a block either (a router clears every medium of the engine
// on it), else BlockRemoved with the dropped hashes.
func (m *Manager) Reset() (int, error) {
	if err := m.usable(); err != nil {
		return 0, err
	}
	n := 0
	for m.listed > 0 {
		i := m.victim()
		m.unlink(i)
		if h := m.blocks[i].hash; !h.IsZero() {
			n++
			delete(m.index, h.key())
			m.log.removed(h)
			m.blocks[i].hash = Hash{}
		}
		m.release(i)
	}
	m.st.Cleared += uint64(n)
	if m.resetClearsAll() {
		m.log.clearedAll()
	}
	m.log.flushRemoved()
	return n, m.flushFree()
}

// watermark evicts cached blocks to the pool while the blocks in use and
// cached are above the low watermark, once they reached the high one.
func (m *Manager) watermark() {
	if m.cfg.high == 0 {
		return
	}
	used := m.held - m.listedUnhashed - m.demoting
	if float64(used) < m.cfg.high*float64(len(m.blocks)) {
		return
	}
	low := int(m.cfg.low * float64(len(m.blocks)))
	for used > low && m.listed > 0 {
		i := m.victim()
		if !m.blocks[i].hash.IsZero() {
			used--
			if m.cfg.demotion == WriteBack && len(m.tiers) > 0 {
				// Store it first; evicted when the stores complete.
				m.unlink(i)
				m.inUse++
				m.blocks[i].evictAfter = true
				m.demoting++
				m.queue(i, m.drains)
				continue
			}
			m.st.WatermarkEvictions++
		}
		m.evict(i)
		m.release(i)
	}
}

// expiry returns the UnixNano at which a priority set at now for d decays,
// saturating at the largest time an int64 holds: a duration that reaches past
// it (year 2262) means never, not at once.
func expiry(now time.Time, d time.Duration) int64 {
	t := now.UnixNano()
	if t > 0 && int64(d) > math.MaxInt64-t {
		return math.MaxInt64
	}
	return t + int64(d)
}
