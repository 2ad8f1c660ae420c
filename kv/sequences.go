package kv

import (
	"errors"
	"fmt"

	"github.com/locus-go/locus/pool"
)

// The sequences: admission, growth, fork, release and block tables. A
// sequence holds references on its blocks; the prefix cache (cache.go)
// owns the blocks themselves.

// seq is one sequence's state, in Manager.seqs by slot.
type seq struct {
	gen     uint64        // odd while live
	blocks  []pool.Handle // blocksFor(tokens + look)
	tokens  int
	look    int // lookahead slots reserved beyond tokens (Reserve)
	skip    int // leading blocks released out of the sliding window: zero handles
	key     Key
	hashes  []Hash   // chain hashes of the full blocks (with prefix caching)
	partial []uint32 // tokens of the partial last block

	// The admission's plan (see Sources): hot pool hits, then loaded
	// blocks from tiers tierOf, of which the first valid-hot served.
	hot, loaded, valid int
	tierOf             []int
	loads              int      // load jobs in flight: not Ready while > 0
	deferred           []uint32 // tokens of the full blocks after hot, indexed when the loads end
}

// parent returns the hash of the sequence's last full block: the parent of
// its next one.
func (s *seq) parent() Hash {
	if len(s.hashes) == 0 {
		return Hash{}
	}
	return s.hashes[len(s.hashes)-1]
}

// Admit starts a sequence of prompt tokens and returns its id and how many
// of its first tokens the prefix cache already holds: their KV needs no
// computing. It reuses the longest cached prefix, in whole blocks, but
// never the block holding the last prompt token, which the engine computes
// again to sample from (as vLLM does), and allocates the other blocks.
// Blocks that become full enter the prefix cache at once, before the
// engine has computed their KV, as in vLLM: a sequence admitted later in
// the same step may reuse them. That is safe when the engine computes the
// step's sequences in one forward pass that writes each layer's KV before
// attention reads it (vLLM's kernels do), or in admission order. Admit
// and Append copy what they keep of tokens: the caller may reuse the
// slice when they return.
//
// With tiers (WithTiers), the cached prefix continues past the pool's hits
// with the blocks the tiers hold, as far as the load policy finds loading
// them cheaper than computing them: those are loaded into fresh blocks,
// and counted in the tokens returned. The sequence then waits for its
// loads: Ready says when (after a Drain) and how many tokens are final,
// Sources says where each block comes from. A block whose store into a
// tier is still in flight (tier.HitPending) ends the prefix. The full
// blocks computed after loaded ones enter the prefix cache at the
// sequence's next Append, Reserve, Accept or Fork (the sign that the
// engine has run it), not before.
//
// Admit is all or nothing: if the free blocks and the cached blocks it may
// evict cannot cover the blocks it must allocate, it changes nothing and
// returns an *ExhaustedError with the counts (counted in Stats.Exhausted),
// which matches pool.ErrExhausted, and ErrTooLarge too when the prompt
// needs more blocks than the pool has. CanAdmit asks the same question
// without admitting, and Lookup asks only for the cached prefix. An empty
// prompt makes an empty sequence.
func (m *Manager) Admit(tokens []uint32, key Key) (SeqID, int, error) {
	if err := m.usable(); err != nil {
		return SeqID{}, 0, err
	}
	n := len(tokens)
	if nblocks := m.blocksFor(n); m.cfg.window == 0 && nblocks > len(m.blocks) {
		return SeqID{}, 0, m.exhausted(nblocks, nblocks, m.available())
	}
	m.hashPrompt(tokens, key)
	return m.admitHashed(tokens, key, m.maxHit(n))
}

// hashPrompt sets m.hashes to the chain hashes of the full blocks of
// tokens; without prefix caching to none.
func (m *Manager) hashPrompt(tokens []uint32, key Key) {
	m.hashes = m.hashes[:0]
	if m.cfg.caching {
		m.hashes = m.hasher.AppendHashes(m.hashes, tokens, m.bs, key)
	}
}

// windowBlocks is how many blocks before a hit point hold the tokens its
// next token attends to: ceil((window-1)/TokensPerBlock).
func (m *Manager) windowBlocks() int { return (m.cfg.window - 1 + m.bs - 1) / m.bs }

// admitHashed is Admit for a prompt whose full blocks' hashes are in
// m.hashes, reusing a prefix hit of at most limit blocks.
func (m *Manager) admitHashed(tokens []uint32, key Key, limit int) (SeqID, int, error) {
	bs := m.bs
	n := len(tokens)
	full := n / bs
	hit, skip, listedHits := m.hit(limit)
	held := m.blocksFor(n) - skip
	if held > len(m.blocks) {
		return SeqID{}, 0, m.exhausted(held, held, m.available())
	}
	need := held - len(m.hits)
	m.decay()
	if avail := m.available() - listedHits; need > avail {
		return SeqID{}, 0, m.exhausted(held, need, avail)
	}
	fresh, fromPool, err := m.allocate(need)
	if err != nil {
		return SeqID{}, 0, err
	}
	id, si := m.newSeq()
	s := &m.seqs[si]
	s.key = key
	s.skip = skip
	for range skip {
		s.blocks = append(s.blocks, pool.Handle{}) // outside the window
	}
	for _, bi := range m.hits {
		m.acquire(bi)
		s.blocks = append(s.blocks, m.blocks[bi].h)
	}
	m.evictInto(fresh[fromPool:])
	m.log.flushRemoved()
	for _, h := range fresh {
		m.own(h)
		s.blocks = append(s.blocks, h)
	}
	s.tokens = n
	s.hot, s.valid = hit, hit
	if m.cfg.caching {
		s.hashes = append(s.hashes, m.hashes[:full]...)
	}
	if m.cfg.caching && (len(m.tiers) == 0 || !m.admitTiers(id, si, tokens, hit, limit, full)) {
		s = &m.seqs[si]
		if s.loaded == 0 {
			for i := hit; i < full; i++ {
				m.indexBlock(s, i, tokens[i*bs:(i+1)*bs])
			}
			m.log.flushStored(s.key)
		}
	}
	s = &m.seqs[si]
	s.partial = append(s.partial, tokens[full*bs:]...)
	if !m.cfg.caching {
		return id, 0, nil
	}
	m.st.QueryTokens += uint64(n)
	m.st.HitTokens += uint64(hit * bs)
	m.st.QueryBlocks += uint64(full)
	m.st.HitBlocks += uint64(hit)
	return id, s.valid * bs, nil
}

// Append grows a live sequence by tokens: a decode step, or the next chunk
// of a chunked prefill. If the block the tokens go to is shared (after
// Fork), Append first copies it into a fresh block (copy-on-write), so that
// the sequence writes only blocks it holds alone. Blocks that become full
// enter the prefix cache. Tokens fill the lookahead slots Reserve made
// first (the reservation shrinks by as many) and then new blocks. Like
// Admit it is all or nothing and fails with an *ExhaustedError (matching
// pool.ErrExhausted) when the free and evictable blocks are too few for
// the new blocks and the copy.
func (m *Manager) Append(id SeqID, tokens []uint32) error {
	si, ok := m.liveSeq(id)
	if !ok {
		return m.seqError(id)
	}
	if len(tokens) == 0 {
		return nil
	}
	s := &m.seqs[si]
	return m.extend(si, tokens, max(0, s.look-len(tokens)))
}

// extend appends tokens to sequence si and leaves it holding blocks for
// look slots beyond them: allocating, copying the shared block the next
// token goes to, or returning lookahead blocks no longer wanted. It is all
// or nothing.
func (m *Manager) extend(si uint32, tokens []uint32, look int) error {
	s := &m.seqs[si]
	if s.loads > 0 {
		return ErrNotReady
	}
	if len(s.deferred) > 0 {
		m.indexDeferred(s)
	}
	bs := m.bs
	if len(tokens) > maxInt-s.tokens || look > maxInt-s.tokens-len(tokens) {
		return fmt.Errorf("kv: %w: append %d tokens and %d slots to %d", pool.ErrInvalidArgument, len(tokens), look, s.tokens)
	}
	if err := m.slide(s); err != nil {
		return err
	}
	n := s.tokens + len(tokens)
	p := m.planExtend(s, len(tokens), look)
	nblocks, excess, cow, need := p.blocks, p.excess, p.cow, p.need
	if nblocks-s.skip > len(m.blocks) {
		return m.exhausted(nblocks-s.skip, nblocks-len(s.blocks), m.available())
	}
	c := s.tokens / bs
	m.decay()
	if avail := m.available(); need > avail+excess {
		return m.exhausted(nblocks-s.skip, need, avail+excess)
	}
	before := len(s.blocks) - m.blocksFor(s.tokens)
	if rolled := s.look - len(tokens) - look; rolled > 0 {
		m.st.RolledBackTokens += uint64(rolled) // lookahead slots given back
	}
	if excess > 0 { // lookahead blocks no longer wanted: private, unhashed
		for k := len(s.blocks) - 1; k >= nblocks; k-- {
			m.drop(int32(s.blocks[k].Index()))
			s.blocks[k] = pool.Handle{}
		}
		s.blocks = s.blocks[:nblocks]
		if err := m.flushFree(); err != nil {
			return err
		}
	}
	fresh, fromPool, err := m.allocate(need)
	if err != nil {
		return err
	}
	m.evictInto(fresh[fromPool:])
	m.log.flushRemoved()
	for _, h := range fresh {
		m.own(h)
	}
	if cow {
		if err := copyBlock(m.p, fresh[0], s.blocks[c]); err != nil {
			return err // a pool that refuses its own live handles: not reachable
		}
		m.blocks[s.blocks[c].Index()].ref-- // still held by the other sharers
		s.blocks[c] = fresh[0]
		fresh = fresh[1:]
		m.st.CopyOnWrite++
	}
	s.blocks = append(s.blocks, fresh...)
	next := s.tokens / bs // the block the next token goes to
	rest := tokens
	if p := len(s.partial); p > 0 {
		k := min(bs-p, len(rest))
		s.partial = append(s.partial, rest[:k]...)
		rest = rest[k:]
		if len(s.partial) == bs {
			m.complete(s, next, s.partial)
			s.partial = s.partial[:0]
			next++
		}
	}
	for ; len(rest) >= bs; rest = rest[bs:] {
		m.complete(s, next, rest[:bs])
		next++
	}
	s.partial = append(s.partial, rest...)
	m.reserved += nblocks - m.blocksFor(n) - before
	s.tokens, s.look = n, look
	m.log.flushStored(s.key)
	return nil
}

// extendPlan is what appending tokens and keeping lookahead slots takes of
// a sequence: the blocks it will span, those to allocate (grow) or give
// back (excess), and whether the block the next token goes to is copied
// first (cow); need is grow plus the copy.
type extendPlan struct {
	blocks, grow, excess, need int
	cow                        bool
}

func (m *Manager) planExtend(s *seq, ntok, look int) extendPlan {
	nblocks := m.blocksFor(s.tokens + ntok + look)
	p := extendPlan{
		blocks: nblocks,
		grow:   max(0, nblocks-len(s.blocks)),
		excess: max(0, len(s.blocks)-nblocks),
	}
	// The block the next token goes to is written if anything is: copy it
	// first if another sequence shares it.
	c := s.tokens / m.bs
	p.cow = s.tokens%m.bs != 0 && (ntok > 0 || look > 0) && m.blocks[s.blocks[c].Index()].ref > 1
	p.need = p.grow
	if p.cow {
		p.need++
	}
	return p
}

// slide releases, last first, the blocks of sequence s that lie wholly
// before the sliding window of its next token (WithSlidingWindow), leaving
// zero handles in their place.
func (m *Manager) slide(s *seq) error {
	k := m.skipFor(s.tokens)
	if k <= s.skip {
		return nil
	}
	for i := k - 1; i >= s.skip; i-- {
		m.drop(int32(s.blocks[i].Index()))
		s.blocks[i] = pool.Handle{}
	}
	s.skip = k
	return m.flushFree()
}

// canExtend says, changing nothing but Stats.Exhausted, whether extend of
// sequence si by ntok tokens and look slots would succeed: nil, or the
// error extend would return. The blocks slide would release count as
// available when nothing else holds them.
func (m *Manager) canExtend(si uint32, ntok, look int) error {
	s := &m.seqs[si]
	if s.loads > 0 {
		return ErrNotReady
	}
	if ntok > maxInt-s.tokens || look > maxInt-s.tokens-ntok {
		return fmt.Errorf("kv: %w: append %d tokens and %d slots to %d", pool.ErrInvalidArgument, ntok, look, s.tokens)
	}
	skip, freed := s.skip, 0
	if k := m.skipFor(s.tokens); k > skip {
		for _, h := range s.blocks[skip:k] {
			if b := &m.blocks[h.Index()]; b.ref == 1 && b.pins == 0 && b.copies == 0 {
				freed++
			}
		}
		skip = k
	}
	p := m.planExtend(s, ntok, look)
	if p.blocks-skip > len(m.blocks) {
		return m.exhausted(p.blocks-skip, p.blocks-len(s.blocks), m.available()+freed)
	}
	if avail := m.available() + freed + p.excess; p.need > avail {
		return m.exhausted(p.blocks-skip, p.need, avail)
	}
	return nil
}

// newSeq takes a sequence slot and returns its id and index.
func (m *Manager) newSeq() (SeqID, uint32) {
	si := takeSlot(&m.freeSeqs, &m.seqs)
	s := &m.seqs[si]
	s.gen++
	m.live++
	return SeqID{gen: s.gen, idx: si, mgr: m.id}, si
}

// takeSlot returns the index of a slot of *slots to use: the last one put
// on *free, else a zero one it appends.
func takeSlot[T any, I int32 | uint32](free *[]I, slots *[]T) I {
	if k := len(*free); k > 0 {
		i := (*free)[k-1]
		*free = (*free)[:k-1]
		return i
	}
	*slots = append(*slots, *new(T))
	return I(len(*slots) - 1)
}

// liveSeq returns id's slot when the manager is usable and id names a live
// sequence of it; seqError says why not. It inlines (pinned in a test):
// every call that takes a sequence id starts with it.
func (m *Manager) liveSeq(id SeqID) (uint32, bool) {
	if m != nil && !m.closed && id.mgr == m.id && id.idx < uint32(len(m.seqs)) && id.gen&1 == 1 && m.seqs[id.idx].gen == id.gen {
		return id.idx, true
	}
	return 0, false
}

// seqError says why liveSeq rejected id: the manager is unusable, or the id
// names no live sequence of it (see seqErr). A zero Manager's id is 0,
// which no live SeqID carries, so usable catches it first.
func (m *Manager) seqError(id SeqID) error {
	if err := m.usable(); err != nil {
		return err
	}
	in := id.idx < uint32(len(m.seqs))
	var cur uint64
	if in {
		cur = m.seqs[id.idx].gen
	}
	return seqErr(id, m.id, in, cur)
}

// Fork returns a new sequence that shares every block of id that holds its
// tokens: each block's reference count goes up by one and nothing is
// allocated. The two sequences diverge as they append; a shared partial
// last block is copied at the first append (copy-on-write). Lookahead
// slots (Reserve) are not shared: the fork has none.
func (m *Manager) Fork(id SeqID) (SeqID, error) {
	si, ok := m.liveSeq(id)
	if !ok {
		return SeqID{}, m.seqError(id)
	}
	if m.seqs[si].loads > 0 {
		return SeqID{}, ErrNotReady
	}
	if s := &m.seqs[si]; len(s.deferred) > 0 {
		m.indexDeferred(s)
	}
	nid, ni := m.newSeq() // may move m.seqs: index, don't keep pointers
	s, ns := &m.seqs[si], &m.seqs[ni]
	ns.blocks = append(ns.blocks, s.blocks[:m.blocksFor(s.tokens)]...)
	for _, h := range ns.blocks[s.skip:] {
		m.blocks[h.Index()].ref++
	}
	ns.tokens, ns.skip, ns.key = s.tokens, s.skip, s.key
	ns.hot, ns.loaded, ns.valid = s.hot, s.loaded, s.valid
	ns.tierOf = append(ns.tierOf, s.tierOf...)
	ns.hashes = append(ns.hashes, s.hashes...)
	ns.partial = append(ns.partial, s.partial...)
	m.st.Forks++
	return nid, nil
}

// Release ends a sequence on the owner: it drops one reference of each of
// its blocks, last block first, so that the end of a cached chain is
// evicted before its start. A stale id (a second release) fails with
// ErrStaleSequence, one of another manager with ErrForeignSequence and one
// this manager never issued with ErrUnknownSequence (all three match
// ErrInvalidSequence); each changes nothing but Stats.RejectedReleases.
func (m *Manager) Release(id SeqID) error {
	si, ok := m.liveSeq(id)
	if !ok {
		err := m.seqError(id)
		if errors.Is(err, ErrInvalidSequence) {
			m.st.RejectedReleases++
		}
		return err
	}
	m.releaseSeq(si)
	m.st.Releases++
	return m.flushFree()
}

func (m *Manager) releaseSeq(si uint32) {
	s := &m.seqs[si]
	for k := len(s.blocks) - 1; k >= s.skip; k-- {
		m.drop(int32(s.blocks[k].Index()))
	}
	m.reserved -= len(s.blocks) - m.blocksFor(s.tokens)
	clear(s.blocks)
	s.blocks = s.blocks[:0]
	s.hashes = s.hashes[:0]
	s.partial = s.partial[:0]
	s.tokens, s.look, s.skip, s.key = 0, 0, 0, Key{}
	s.hot, s.loaded, s.valid, s.loads = 0, 0, 0, 0
	s.tierOf, s.deferred = s.tierOf[:0], s.deferred[:0]
	s.gen++
	m.freeSeqs = append(m.freeSeqs, si)
	m.live--
}

// Tokens returns a live sequence's length in tokens.
func (m *Manager) Tokens(id SeqID) (int, error) {
	si, ok := m.liveSeq(id)
	if !ok {
		return 0, m.seqError(id)
	}
	return m.seqs[si].tokens, nil
}

// Blocks returns a copy of a live sequence's block table: its blocks in
// token order, then those that only hold its lookahead slots (Reserve).
// With a sliding window the blocks released out of the window are zero
// handles. The copy is the caller's; a step loop that reads tables every
// step uses AppendBlocks with a reused slice instead, which allocates
// nothing.
func (m *Manager) Blocks(id SeqID) ([]pool.Handle, error) {
	return m.AppendBlocks(nil, id)
}

// AppendBlocks appends a live sequence's block table (see Blocks) to dst
// and returns the extended slice; on error it returns dst unchanged.
func (m *Manager) AppendBlocks(dst []pool.Handle, id SeqID) ([]pool.Handle, error) {
	si, ok := m.liveSeq(id)
	if !ok {
		return dst, m.seqError(id)
	}
	return append(dst, m.seqs[si].blocks...), nil
}

// Block returns the block that holds token i of a live sequence, 0 <= i <
// Tokens plus its lookahead slots (Reserve); the pool's Bytes gives its
// memory. A token outside the sequence fails with pool.ErrInvalidArgument,
// and one whose block left the sliding window with ErrOutsideWindow.
func (m *Manager) Block(id SeqID, i int) (pool.Handle, error) {
	si, ok := m.liveSeq(id)
	if !ok {
		return pool.Handle{}, m.seqError(id)
	}
	s := &m.seqs[si]
	if i < 0 || i >= s.tokens+s.look {
		return pool.Handle{}, fmt.Errorf("kv: %w: token %d of %d", pool.ErrInvalidArgument, i, s.tokens+s.look)
	}
	if i/m.bs < s.skip {
		return pool.Handle{}, fmt.Errorf("%w: token %d, the window starts at block %d", ErrOutsideWindow, i, s.skip)
	}
	return s.blocks[i/m.bs], nil
}
