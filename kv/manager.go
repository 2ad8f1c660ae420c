package kv

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/locus-go/locus/internal/ids"
	"github.com/locus-go/locus/internal/invariants"
	"github.com/locus-go/locus/internal/nocopy"
	"github.com/locus-go/locus/internal/owner"
	"github.com/locus-go/locus/internal/snapshot"
	"github.com/locus-go/locus/internal/sysmem"
	"github.com/locus-go/locus/internal/typednil"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/transport/mailbox"
)

// BlockPool is what a Manager needs of a block pool: every
// *pool.Pool[B, T, P] is one. The manager calls it once per request (a
// chunk of blocks), never per block, so the indirect call costs little;
// copy-on-write calls Bytes twice per copied block.
//
// The manager owns the pool's blocks: allocate from the pool only through
// the manager while the manager is open. New refuses a pool with blocks
// already allocated (when it reports them with Live, as pool.Pool does) and a pool another open
// Manager owns.
type BlockPool interface {
	AllocChunk(dst []pool.Handle) error
	FreeChunk(chunk []pool.Handle) error
	Bytes(h pool.Handle) ([]byte, error)
	Capacity() int
}

// Manager manages the KV blocks of a pool for sequences that share them:
// block tables, reference counts, fork, copy-on-write, a prefix cache of
// full blocks with LRU eviction by priority, pinning and cache events.
//
// # Ownership
//
// A Manager has one owner goroutine, the scheduler: every method but
// NewReleaser and Snapshot must be called by one goroutine at a time.
// Reference counts and the cache index are owner-only state and need no
// atomics. Workers release finished sequences through their own Releaser
// (one push); the owner applies those releases when it calls Drain, once
// per scheduling step. Snapshot may be called from any goroutine (a
// metrics scraper).
//
// # Blocks
//
// A sequence holds ceil(tokens/TokensPerBlock) blocks. Admit reuses the
// longest cached prefix of the prompt and allocates the rest; Append grows
// a sequence; both are all or nothing: they count the free blocks and the
// cached blocks they may evict, and fail with pool.ErrExhausted before
// changing anything when those are too few. Fork shares every block of a
// sequence; a shared partial last block is copied (copy-on-write) before
// either holder appends to it. Release drops one reference per block; a
// block returns to the pool when its last reference goes, unless it is
// full: a full block stays in the prefix cache, evictable, until an
// allocation needs it (or the watermarks or Reset drop it).
//
// A block is full, and cached, when its last token is appended; its KV must
// be written before any later admission reads it, which a scheduler that
// computes a step's KV before admitting the next step's requests ensures.
//
// The zero Manager is not usable (its calls fail with pool.ErrClosed);
// make one with New. A Manager must not be copied.
type Manager struct {
	_   nocopy.NoCopy
	id  uint32
	p   BlockPool
	cfg config
	bs  int

	hasher *Hasher
	blocks []blockMeta // by pool block index
	index  map[Hash]int32
	order  order
	decays decays

	held           int // blocks whose handles the manager holds
	inUse          int // held by a sequence or a pin
	reserved       int // of inUse, blocks held only for lookahead slots
	pinned         int
	listed         int // on the eviction order
	listedUnhashed int // of listed, those without a hash (they count as free)
	maxPinned      int

	seqs     []seq
	freeSeqs []uint32
	live     int

	// Scratch of one call, kept so that steady state allocates nothing.
	hashes []Hash
	hits   []int32
	fresh  []pool.Handle
	toFree []pool.Handle

	// Events being built (only with a subscriber).
	event       Event
	removed     []Hash
	storedHash  []Hash
	storedToken []uint32

	st    Stats
	rejN  int
	rejID SeqID

	// drainPool is the pool's Drain, when it has one; see Drain.
	drainPool func() (int, error)

	rel      *mailbox.Transport
	sink     *pool.Sink
	isClosed atomic.Bool // read by releasers
	closed   bool
	final    Stats

	checkRefs []int32 // invariant builds: scratch of check

	pub snapshot.Cell[Stats]

	// Offload tiers (WithTiers); see tiers.go.
	tiers      []tierState
	blockBytes int
	demote     []demotion // blocks held for a store at a later Drain
	xfers      []xfer
	freeX      []int32
	byJob      map[xferKey]int32
	drains     uint64 // Drains so far
	inFlight   int    // blocks with copies > 0
	demoting   int    // write-back victims awaiting their stores
	query      LoadQuery
	// Scratch of the tier paths.
	tkeys []tier.Key
	tres  []tier.Result
	srcT  []int
	tpos  []int32
	batch []int32
	srcs  [][]byte
	tdone []tier.Done
	tev   tierEvents // the tiers' events (events.go)
}

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

// managerIDs numbers the managers, so that a sequence id names its manager.
var managerIDs ids.Source

var errZeroManager = fmt.Errorf("%w: zero kv.Manager; make it with kv.New", pool.ErrClosed)

const maxInt = int(^uint(0) >> 1)

// New returns a manager of every block of p. p must not have blocks
// allocated: the manager assumes it holds all of them. New fails with an
// error wrapping pool.ErrInvalidConfig for a nil or empty pool or an
// invalid option.
func New(p BlockPool, opts ...Option) (*Manager, error) {
	if typednil.Is(p) {
		return nil, fmt.Errorf("kv: %w: nil pool", pool.ErrInvalidConfig)
	}
	cfg := defaults()
	for _, o := range opts {
		if typednil.Is(o) {
			return nil, fmt.Errorf("kv: %w: nil option", pool.ErrInvalidConfig)
		}
		o.apply(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	bb, err := cfg.validateTiers(p)
	if err != nil {
		return nil, err
	}
	n := p.Capacity()
	if n <= 0 || n > pool.MaxBlocks {
		return nil, fmt.Errorf("kv: %w: pool of %d blocks", pool.ErrInvalidConfig, n)
	}
	if err := sysmem.Fits(uint64(n) * metaBytesPerBlock); err != nil {
		return nil, fmt.Errorf("kv: %w: metadata of %d blocks: %v", pool.ErrInvalidConfig, n, err)
	}
	if lp, ok := p.(interface{ Live() int }); ok {
		if live := lp.Live(); live != 0 {
			return nil, fmt.Errorf("kv: %w: the pool has %d blocks allocated already; a manager needs a fresh pool", pool.ErrInvalidConfig, live)
		}
	}
	hasher, err := NewHasher(cfg.algo, cfg.seed)
	if err != nil {
		return nil, err
	}
	m := &Manager{p: p, cfg: cfg, bs: cfg.tokensPerBlock, hasher: hasher}
	if v := reflect.ValueOf(p); v.Kind() == reflect.Pointer {
		if err := owner.Claim(&pools, v.Pointer(), m); err != nil {
			return nil, fmt.Errorf("kv: %w: the pool is %v by another open manager", pool.ErrInvalidConfig, err)
		}
	}
	m.id = managerIDs.Next()
	m.blocks = make([]blockMeta, n)
	for i := range m.blocks {
		m.blocks[i] = blockMeta{prev: -1, next: -1, heap: -1, prio: DefaultPriority}
	}
	m.index = make(map[Hash]int32, n)
	m.order.init()
	m.decays.m = m
	m.maxPinned = int(cfg.maxPinned * float64(n))
	if d, ok := p.(interface{ Drain() (int, error) }); ok {
		m.drainPool = d.Drain
	}
	m.rel = mailbox.New()
	m.sink = pool.NewSink(m.applyReleases)
	m.event.BlockSize = m.bs
	if invariants.Enabled {
		m.checkRefs = make([]int32, n)
	}
	m.st.Capacity, m.st.TokensPerBlock = n, m.bs
	if len(cfg.tiers) > 0 {
		m.blockBytes = bb
		m.tiers = make([]tierState, len(cfg.tiers))
		for i, t := range cfg.tiers {
			m.tiers[i].t = t
		}
		m.byJob = make(map[xferKey]int32)
		m.query = LoadQuery{TokensPerBlock: m.bs, BlockBytes: bb, ComputePerToken: cfg.cost.ComputePerToken, Overhead: cfg.cost.Overhead}
		m.initTierEvents()
	}
	m.pub.Init(m.stats())
	return m, nil
}

// TokensPerBlock returns how many tokens a block holds.
func (m *Manager) TokensPerBlock() int {
	if m == nil {
		return 0
	}
	return m.bs
}

// Hasher returns a new Hasher that computes the manager's block hashes; nil
// for a zero or nil Manager.
func (m *Manager) Hasher() *Hasher {
	if m == nil || m.id == 0 {
		return nil
	}
	h, _ := NewHasher(m.cfg.algo, m.cfg.seed)
	return h
}

var errNilManager = fmt.Errorf("%w: nil *kv.Manager", pool.ErrClosed)

func (m *Manager) usable() error {
	switch {
	case m == nil:
		return errNilManager
	case m.id == 0:
		return errZeroManager
	case m.closed:
		return errClosedManager
	}
	return nil
}

// errClosedManager says the manager, not its pool, is closed.
var errClosedManager = fmt.Errorf("kv: manager closed: %w", pool.ErrClosed)

// Admit starts a sequence of prompt tokens and returns its id and how many
// of its first tokens the prefix cache already holds: their KV needs no
// computing. It reuses the longest cached prefix, in whole blocks, but
// never the block holding the last prompt token, which the engine computes
// again to sample from (as vLLM does), and allocates the other blocks.
// Blocks that become full enter the prefix cache.
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
			bi, ok := m.index[h]
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
		if _, ok := m.index[m.hashes[i]]; !ok {
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
		bi := m.index[h]
		m.hits = append(m.hits, bi)
		if m.blocks[bi].listed {
			listed++
		}
	}
	return hit, skip, listed
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
	m.flushRemoved()
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
			m.flushStored(s.key)
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
	si, err := m.lookup(id)
	if err != nil {
		return err
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
	m.flushRemoved()
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
	m.flushStored(s.key)
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
	if _, dup := m.index[h]; dup {
		m.flushStored(s.key) // the run of stored blocks breaks here
		return
	}
	m.index[h] = bi
	m.blocks[bi].hash = h
	m.st.Stored++
	if len(m.tiers) > 0 && m.cfg.demotion == WriteThrough {
		m.queue(bi, m.drains+1) // its KV is computed by the next Drain
		m.keepForStore(bi, parent, s.key, tokens)
	}
	if m.cfg.subscriber != nil {
		if len(m.storedHash) == 0 {
			m.event.Parent = parent
		}
		m.storedHash = append(m.storedHash, h)
		m.storedToken = append(m.storedToken, tokens...)
	}
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
		delete(m.index, b.hash)
		if m.cfg.subscriber != nil {
			m.removed = append(m.removed, b.hash)
		}
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

// lookup validates id and returns its slot.
func (m *Manager) lookup(id SeqID) (uint32, error) {
	if err := m.usable(); err != nil {
		return 0, err
	}
	if id.mgr != m.id || id.idx >= uint32(len(m.seqs)) || id.gen&1 == 0 || m.seqs[id.idx].gen != id.gen {
		return 0, ErrInvalidSequence
	}
	return id.idx, nil
}

// Fork returns a new sequence that shares every block of id that holds its
// tokens: each block's reference count goes up by one and nothing is
// allocated. The two sequences diverge as they append; a shared partial
// last block is copied at the first append (copy-on-write). Lookahead
// slots (Reserve) are not shared: the fork has none.
func (m *Manager) Fork(id SeqID) (SeqID, error) {
	si, err := m.lookup(id)
	if err != nil {
		return SeqID{}, err
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
// evicted before its start. A stale id (a second release) or one of another
// manager fails with ErrInvalidSequence and changes nothing but
// Stats.RejectedReleases.
func (m *Manager) Release(id SeqID) error {
	si, err := m.lookup(id)
	if err != nil {
		if err == ErrInvalidSequence {
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
	si, err := m.lookup(id)
	if err != nil {
		return 0, err
	}
	return m.seqs[si].tokens, nil
}

// Blocks returns a live sequence's block table: its blocks in token order,
// then those that only hold its lookahead slots (Reserve). With a sliding
// window the blocks released out of the window are zero handles.
// The slice is the manager's: read it before the next call that changes the
// sequence, and do not change it.
func (m *Manager) Blocks(id SeqID) ([]pool.Handle, error) {
	si, err := m.lookup(id)
	if err != nil {
		return nil, err
	}
	return m.seqs[si].blocks, nil
}

// Block returns the block that holds token i of a live sequence, 0 <= i <
// Tokens plus its lookahead slots (Reserve); the pool's Bytes gives its
// memory. A token outside the sequence fails with pool.ErrInvalidArgument,
// and one whose block left the sliding window with ErrOutsideWindow.
func (m *Manager) Block(id SeqID, i int) (pool.Handle, error) {
	si, err := m.lookup(id)
	if err != nil {
		return pool.Handle{}, err
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

// SetPriority sets the retention priority of the blocks of a live sequence
// that hold tokens from to to-1: when they are cached and blocks must be
// evicted, lower priorities go first. A positive duration makes the
// priority decay to DefaultPriority once it has passed (checked when an
// allocation evicts and at Drain); 0 keeps it. A block keeps its priority
// while it stays cached and gets DefaultPriority back when it is evicted or
// freed. Blocks shared by several sequences take the latest priority set.
func (m *Manager) SetPriority(id SeqID, from, to int, p Priority, d time.Duration) error {
	si, err := m.lookup(id)
	if err != nil {
		return err
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
		bi, ok := m.index[parent]
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
			delete(m.index, h)
			if m.cfg.subscriber != nil {
				m.removed = append(m.removed, h)
			}
			m.blocks[i].hash = Hash{}
		}
		m.release(i)
	}
	m.st.Cleared += uint64(n)
	if m.resetClearsAll() {
		m.removed = m.removed[:0]
		m.emit(AllBlocksCleared, nil)
	}
	m.flushRemoved()
	return n, m.flushFree()
}

// NewReleaser returns a Releaser for one worker goroutine. It is safe to
// call from any goroutine.
func (m *Manager) NewReleaser() (*Releaser, error) {
	if m == nil {
		return nil, errNilManager
	}
	if m.id == 0 {
		return nil, errZeroManager
	}
	if m.isClosed.Load() {
		return nil, pool.ErrClosed
	}
	prod, err := m.rel.NewProducer()
	if err != nil {
		return nil, err
	}
	return &Releaser{prod: prod, closed: &m.isClosed}, nil
}

// Drain is the owner's once-per-step call: it applies the releases workers
// pushed since the last Drain, returns priorities whose duration has passed
// to the default, evicts down to the low watermark if the high one is
// reached (WithWatermarks), and publishes the accounting when a Snapshot
// asked for it. It returns how many sequences it released. Releases it
// rejects (stale, doubled, foreign) are counted in Stats.RejectedReleases and
// reported in an error matching ErrInvalidSequence; the others are applied
// all the same. When the pool has a Drain method (every *pool.Pool has),
// Drain drains the pool too, so that the pool publishes its accounting for
// a scraper even when the owner drives only the manager; its error, if any,
// is joined to Drain's.
func (m *Manager) Drain() (int, error) {
	if err := m.usable(); err != nil {
		return 0, err
	}
	before := m.st.RemoteReleases
	m.drains++
	m.rel.Drain(m.sink)
	if len(m.tiers) > 0 {
		m.drainTiers()
	}
	m.decay()
	m.watermark()
	if len(m.tiers) > 0 {
		m.issueStores()
	}
	m.flushRemoved()
	err := m.flushFree()
	if err == nil && m.rejN > 0 {
		err = fmt.Errorf("%w: %v (%d release(s) rejected)", ErrInvalidSequence, m.rejID, m.rejN)
	}
	m.rejN, m.rejID = 0, SeqID{}
	if invariants.Enabled || m.pub.Wanted() {
		m.Stats() // checks the invariants in invariant builds; publishes
	}
	if m.drainPool != nil {
		if _, perr := m.drainPool(); perr != nil {
			err = errors.Join(err, perr)
		}
	}
	return int(m.st.RemoteReleases - before), err
}

// applyReleases is the release mailbox's sink.
func (m *Manager) applyReleases(chunk []pool.Handle) {
	for _, h := range chunk {
		id := seqOf(h)
		si, err := m.lookup(id)
		if err != nil {
			m.st.RejectedReleases++
			if m.rejN == 0 {
				m.rejID = id
			}
			m.rejN++
			continue
		}
		m.releaseSeq(si)
		m.st.Releases++
		m.st.RemoteReleases++
	}
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

func (m *Manager) flushRemoved() {
	if len(m.removed) == 0 {
		return
	}
	m.emit(BlockRemoved, m.removed)
	clear(m.removed)
	m.removed = m.removed[:0]
}

func (m *Manager) flushStored(key Key) {
	if len(m.storedHash) == 0 {
		return
	}
	m.event.Tokens = m.storedToken
	m.event.Key = key
	m.emit(BlockStored, m.storedHash)
	m.event.Tokens, m.event.Key = nil, Key{}
	clear(m.storedHash)
	m.storedHash = m.storedHash[:0]
	m.storedToken = m.storedToken[:0]
}

func (m *Manager) emit(kind EventKind, hashes []Hash) {
	m.event.Kind, m.event.Hashes = kind, hashes
	defer func() {
		m.event.Hashes, m.event.Parent = nil, Hash{}
		if recover() != nil {
			m.st.SubscriberPanics++
		}
	}()
	m.cfg.subscriber(&m.event)
}

// Stats returns the accounting as it is now; after Close, as it stood at
// Close. Only the owner may call it; it also publishes what it returns for
// Snapshot. In invariant builds (-race, -tags locus_invariants) it first
// checks the manager's whole state and panics if it is inconsistent.
func (m *Manager) Stats() Stats {
	if m == nil {
		return Stats{}
	}
	st := m.stats()
	if m.id != 0 && !m.closed {
		m.pub.Publish(st)
	}
	return st
}

// stats computes Stats without publishing, checking the invariants first in
// invariant builds.
func (m *Manager) stats() Stats {
	if m.closed {
		return m.final
	}
	if invariants.Enabled && m.id != 0 {
		if err := m.check(); err != nil {
			panic("kv: invariant violated: " + err.Error())
		}
	}
	st := m.st
	st.Free = len(m.blocks) - m.held + m.listedUnhashed
	st.Cached = m.listed - m.listedUnhashed
	st.InUse = m.inUse
	st.Pinned = m.pinned
	st.Reserved = m.reserved
	st.Sequences = m.live
	st.InFlight = m.inFlight
	for t := range m.tiers {
		st.Tiers[t] = m.tiers[t].st
		st.Tiers[t].Bandwidth = m.bandwidth(t)
	}
	return st
}

// Snapshot returns the accounting as the owner publishes it, for any
// goroutine (a metrics scraper), concurrently with the owner. The owner
// publishes at Stats and Close, and at a Drain when a Snapshot has asked
// since the last publication (a Drain nobody asked costs one atomic load
// more). So Snapshot returns a value published in the last millisecond at
// once; otherwise it asks and waits for the owner's next Drain, up to 100
// ms, and returns the latest value, which from an idle owner is what it last
// published. After Close it returns the final counts at once. The
// identities of Stats hold within one snapshot.
func (m *Manager) Snapshot() Stats {
	if m == nil {
		return Stats{}
	}
	if m.id == 0 {
		return Stats{}
	}
	return m.pub.Get()
}

// Close returns every block the manager holds to the pool, live sequences'
// included, and stops its releasers. Later calls fail with pool.ErrClosed.
// The pool stays open: it is the caller's; so do the tiers. A block that a
// tier's copy may still read or write is not returned: Close then fails
// with ErrInFlight (drain until Stats.InFlight is 0 first, or close the
// tiers before the manager).
func (m *Manager) Close() error {
	if err := m.usable(); err != nil {
		return err
	}
	m.isClosed.Store(true)
	m.rel.Drain(m.sink) // what workers released before counts
	if len(m.tiers) > 0 {
		m.drainTiers() // what the copies finished counts
	}
	m.final = m.stats()
	// Blocks only queued for a store are not being copied; those of jobs
	// still running are, and stay out of the pool.
	for _, d := range m.demote {
		m.blocks[d.bi].copies--
	}
	m.demote = nil
	leaked := 0
	for i := range m.blocks {
		if m.blocks[i].held {
			if m.blocks[i].copies > 0 {
				leaked++
				continue
			}
			m.blocks[i].held = false
			m.toFree = append(m.toFree, m.blocks[i].h)
		}
	}
	m.held = 0
	err := m.flushFree()
	if leaked > 0 {
		err = errors.Join(err, fmt.Errorf("%w: %d blocks kept out of the pool", ErrInFlight, leaked))
	}
	m.closed = true
	m.blocks, m.index, m.seqs = nil, nil, nil
	m.pub.Seal(m.final)
	if v := reflect.ValueOf(m.p); v.Kind() == reflect.Pointer {
		owner.Release(&pools, v.Pointer(), m)
	}
	return err
}

// pools records which open Manager owns each pool: two managers over one
// pool would each count the other's blocks as free.
var pools owner.Registry

// metaBytesPerBlock bounds what a Manager keeps per block of its pool (its
// metadata and a prefix-cache index entry), for refusing pools whose
// manager could not fit in memory.
const metaBytesPerBlock = 256

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
