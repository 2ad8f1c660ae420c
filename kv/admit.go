package kv

import "fmt"

// AdmitStatus is CanAdmit's answer: whether a prompt can be admitted now,
// later, or never (vLLM's AllocStatus OK, LATER, NEVER).
type AdmitStatus uint8

const (
	// AdmitOK: Admit would succeed now.
	AdmitOK AdmitStatus = iota + 1
	// AdmitLater: the free and evictable blocks are too few now; the
	// prompt fits once Admission.Shortfall more blocks come back (when
	// sequences finish or are preempted, or pins are removed).
	AdmitLater
	// AdmitNever: the prompt needs more blocks than the pool has; Admit
	// would fail with ErrTooLarge however long the scheduler waits.
	AdmitNever
)

// String returns the status as vLLM names it.
func (s AdmitStatus) String() string {
	switch s {
	case AdmitOK:
		return "OK"
	case AdmitLater:
		return "LATER"
	case AdmitNever:
		return "NEVER"
	}
	return fmt.Sprintf("AdmitStatus(%d)", uint8(s))
}

// Admission says what admitting a prompt takes: CanAdmit's answer before an
// admission, Preempt's for a readmission. It is a value computed from the
// manager's state at the call; any later call that allocates, releases or
// evicts may change it.
type Admission struct {
	Status AdmitStatus
	// Blocks is how many blocks the sequence would occupy.
	Blocks int
	// CachedTokens is how many of its first tokens the prefix cache holds:
	// what Admit would return as its second result (with tiers, the
	// blocks it would load from them included).
	CachedTokens int
	// Need is how many blocks Admit would allocate: Blocks less the
	// pool blocks it reuses.
	Need int
	// Available is how many blocks it could take now: free blocks, and
	// cached blocks it may evict (not counting the ones it reuses).
	Available int
	// LoadBlocks is how many of the cached blocks would be loaded from
	// tiers (WithTiers) into blocks Admit allocates: they count in
	// CachedTokens and in Need.
	LoadBlocks int
}

// Shortfall returns how many more blocks must come back before the
// admission can succeed: Need - Available, or 0 when it can succeed now. For
// AdmitNever it is what the pool lacks even when empty.
func (a Admission) Shortfall() int { return max(0, a.Need-a.Available) }

// CanAdmit says whether Admit(tokens, key) would succeed now, and if not
// whether it could later, without changing anything: it allocates,
// evicts, counts and publishes nothing, and moves no block in the
// eviction order. An AdmitOK answer holds until the next call that
// allocates or pins: the scheduler of one owner goroutine that asks and
// then admits gets what it was told.
//
// Use it in a scheduler's admission loop: admit on AdmitOK, keep the
// request waiting on AdmitLater (or preempt a running one when
// Shortfall is small), and reject it on AdmitNever. It hashes the prompt's
// full blocks up to the first one not cached, so it costs what the
// admission's lookup costs; a scheduler that admits right away anyway can
// call Admit alone and read its *ExhaustedError. With prefix caching off
// it hashes nothing.
func (m *Manager) CanAdmit(tokens []uint32, key Key) (Admission, error) {
	if err := m.usable(); err != nil {
		return Admission{}, err
	}
	n := len(tokens)
	hits, listedHits := 0, 0
	if !m.cfg.caching || n == 0 {
		return m.admission(m.blocksFor(n), 0, 0), nil
	}
	if m.cfg.window > 0 {
		maxHit := m.maxHit(n)
		m.hashPrompt(tokens[:maxHit*m.bs], key)
		return m.windowAdmission(n, maxHit), nil
	}
	var parent Hash
	maxHit := (n - 1) / m.bs // never the block of the last token
	for i := range maxHit {
		parent = m.hasher.Block(parent, tokens[i*m.bs:(i+1)*m.bs], key)
		bi, ok := m.cached(parent)
		if !ok {
			break
		}
		hits++
		if m.blocks[bi].listed {
			listedHits++
		}
	}
	a := m.admission(m.blocksFor(n), hits, listedHits)
	if len(m.tiers) > 0 && hits < maxHit {
		// The tiers' part of the prefix, from the pool's first miss on.
		m.hashes = append(m.hashes[:0], parent)
		for i := hits + 1; i < maxHit; i++ {
			parent = m.hasher.Block(parent, tokens[i*m.bs:(i+1)*m.bs], key)
			m.hashes = append(m.hashes, parent)
		}
		m.withLoads(&a, m.hashes)
	}
	return a, nil
}

// withLoads adds to a the loads of the blocks of hashes, those right after
// its pool hits, that Admit would make.
func (m *Manager) withLoads(a *Admission, hashes []Hash) {
	k, _ := m.tierPlan(hashes, false)
	a.LoadBlocks = k
	a.CachedTokens += k * m.bs
}

// Lookup returns how many of the first tokens of a prompt the prefix cache
// holds, in whole blocks, without admitting it: what Admit would return
// as its second result (never the block of the last token, which the
// engine computes again to sample from), tier hits it would load
// included. It changes nothing and counts nothing in Stats' hit rate (nor
// in the tiers' lookups); with prefix caching off it returns 0.
//
// Use it to plan a chunked prefill: admit the cached prefix and the first
// chunk together, Admit(tokens[:cached+chunk], key), so that the whole hit
// is reused, then Append the later chunks. Admitting only a first chunk
// loses the cached blocks beyond it: Append computes them again. The
// answer holds until the next call that evicts.
func (m *Manager) Lookup(tokens []uint32, key Key) (int, error) {
	a, err := m.CanAdmit(tokens, key)
	return a.CachedTokens, err
}

// windowAdmission answers, with a sliding window, for a prompt of n
// tokens whose full blocks' hashes are in m.hashes, with a prefix hit of
// at most limit blocks: the sequence would hold its blocks from the
// window of the hit on.
func (m *Manager) windowAdmission(n, limit int) Admission {
	hit, skip, listed := m.hit(limit)
	return m.admissionOf(m.blocksFor(n)-skip, len(m.hits), hit, listed)
}

// admission answers for a prompt of blocks blocks whose first hits blocks
// are cached, listedHits of them evictable.
func (m *Manager) admission(blocks, hits, listedHits int) Admission {
	return m.admissionOf(blocks, hits, hits, listedHits)
}

// admissionOf answers for a sequence that would hold blocks blocks, held
// of them cached ones it reuses (listed of those evictable), after a
// prefix hit of hit blocks (held and hit differ with a sliding window).
func (m *Manager) admissionOf(blocks, held, hit, listed int) Admission {
	a := Admission{
		Blocks:       blocks,
		CachedTokens: hit * m.bs,
		Need:         blocks - held,
		Available:    m.available() - listed,
	}
	switch {
	case blocks > len(m.blocks):
		a.Status = AdmitNever
	case a.Need > a.Available:
		a.Status = AdmitLater
	default:
		a.Status = AdmitOK
	}
	return a
}

// available is how many blocks an allocation may take: free and evictable.
func (m *Manager) available() int { return len(m.blocks) - m.held + m.listed }

// blocksFor returns how many blocks n tokens occupy.
func (m *Manager) blocksFor(n int) int { return n/m.bs + min(n%m.bs, 1) }

// exhausted counts a refused request and returns its error.
func (m *Manager) exhausted(blocks, need, avail int) error {
	m.st.Exhausted++
	return &ExhaustedError{Blocks: blocks, Need: need, Available: avail, Capacity: len(m.blocks)}
}

// Preempt takes a running sequence off the pool so that others can run,
// and says what readmitting it will take. It releases the sequence's blocks
// as Release does, last block first: its full blocks stay in the prefix
// cache, evictable, and its partial last block and lookahead blocks go back
// to the pool. This is vLLM's recompute preemption: to resume, the engine
// admits the sequence's tokens again (its prompt and what it generated so
// far) with Admit, which reuses whatever of those cached blocks is still
// cached and recomputes the rest. The id is stale afterwards: readmission
// makes a new one.
//
// The Admission returned is CanAdmit's answer for those tokens right after
// the preemption: Blocks, the CachedTokens readmission would reuse if
// nothing is evicted before, and whether it could be readmitted at once.
// Preemptions are counted in Stats.Preemptions, not in Releases.
//
// Use it when an Append, Reserve or admission the scheduler must serve
// fails with pool.ErrExhausted: preempt the sequence with the lowest
// priority (vLLM preempts the latest admitted) and retry. Use Release, not
// Preempt, for a sequence that is finished.
func (m *Manager) Preempt(id SeqID) (Admission, error) {
	si, ok := m.liveSeq(id)
	if !ok {
		return Admission{}, m.seqError(id)
	}
	s := &m.seqs[si]
	n := s.tokens
	// The hashes of its full blocks outlive the sequence in m.hashes, for
	// the answer.
	m.hashes = append(m.hashes[:0], s.hashes...)
	m.releaseSeq(si)
	m.st.Preemptions++
	err := m.flushFree()
	if m.cfg.window > 0 {
		return m.windowAdmission(n, m.maxHit(n)), err
	}
	maxHit := min(len(m.hashes), m.maxHit(n))
	hits, _, listedHits := m.hit(maxHit)
	a := m.admission(m.blocksFor(n), hits, listedHits)
	if len(m.tiers) > 0 && hits < maxHit {
		m.withLoads(&a, m.hashes[hits:maxHit])
	}
	return a, err
}
