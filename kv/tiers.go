package kv

import (
	"errors"
	"fmt"
	"time"

	"github.com/locus-go/locus/internal/typednil"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/tier"
)

// Tier is what a Manager needs of an offload tier behind its pool: every
// *tier.Manager is one (over tier/host, tier/disk or a Storage of your
// own). A Manager configured WithTiers looks keys up in its tiers, stores
// the blocks that enter its prefix cache into them (Store), loads tier
// hits into fresh pool blocks (Load) and applies the copies' completions
// at its own Drain, which calls each tier's Drain.
//
// Once given to a Manager, a tier's Store, Load and Drain belong to that
// Manager: a completion drained by someone else is lost to it (its blocks
// stay out of the pool; see ErrInFlight). The engine may still call the
// tier's other methods on the owner goroutine: Stats, TakeEvents, Reset
// (copies in flight then complete as failures, and kv recomputes what they
// would have loaded), Close (kv abandons the tier at its next Drain).
//
// With a subscriber (WithSubscriber), a Manager emits the events of every
// tier that has a medium and records events (Medium and TakeEvents, as
// *tier.Manager has them): it takes the tier's events at its Drain (do
// not call TakeEvents yourself then) and emits them, with the tier's
// medium, as the hot pool's events are emitted (see Event).
//
// Implement it yourself only to wrap a *tier.Manager (to count, trace or
// inject faults). A Drain that returns an error matching pool.ErrClosed
// promises that no copy of the tier runs any more: kv then gives the
// blocks of its unfinished jobs back.
type Tier interface {
	// BlockSize is the size of a block, equal to the pool's.
	BlockSize() int
	// Peek is Lookup without side effects (CanAdmit, Lookup, Preempt).
	Peek(keys []tier.Key, dst []tier.Result) []tier.Result
	// Lookup is the admission's lookup (Admit).
	Lookup(keys []tier.Key, dst []tier.Result) []tier.Result
	// Touch marks blocks an admission used, for the tier's eviction.
	Touch(keys []tier.Key)
	// Store copies srcs into the tier on its workers.
	Store(keys []tier.Key, srcs [][]byte) (tier.StorePlan, error)
	// Load copies blocks of the tier into dsts on its workers.
	Load(keys []tier.Key, dsts [][]byte) (tier.Job, error)
	// Drain reports the copies finished since the last call.
	Drain(dst []tier.Done) ([]tier.Done, error)
}

var _ Tier = (*tier.Manager)(nil)

// MaxTiers bounds WithTiers: host and disk, and two more (a remote store,
// a peer) behind them.
const MaxTiers = 4

// Demotion says when a Manager with tiers stores a cached block into them.
type Demotion uint8

const (
	// WriteThrough, the default, stores every block that enters the
	// prefix cache (computed, or loaded from a colder tier) into every
	// tier, at the first Drain after it is full, as vLLM's
	// OffloadingConnector does: a block the hot pool evicts later is
	// already in the tiers, and eviction never waits. It copies every
	// block, hit or not; each tier's tier.Admission may filter (a disk
	// tier admitting at two lookups, say).
	WriteThrough Demotion = iota + 1
	// WriteBack stores a cached block only when Drain's watermarks
	// (WithWatermarks, required) evict it: the block is held until its
	// stores complete and then evicted, unless a hit took it back
	// meanwhile. It copies only what leaves the hot pool under pressure,
	// but a block an allocation evicts on the spot, below the
	// watermarks, is lost as it is without tiers: set the watermarks so
	// that allocations find free blocks.
	WriteBack
)

// String returns the policy's name.
func (d Demotion) String() string {
	switch d {
	case WriteThrough:
		return "write-through"
	case WriteBack:
		return "write-back"
	}
	return fmt.Sprintf("Demotion(%d)", uint8(d))
}

// SourceKind tells where the KV of one block of a sequence comes from.
type SourceKind uint8

const (
	// FromHot: a prefix-cache hit in the pool; nothing to do. A block
	// released out of a sliding window (a zero handle in Blocks) is
	// FromHot too: the engine neither loads nor computes it.
	FromHot SourceKind = iota + 1
	// FromTier: loaded from Source.Tier into a fresh block. Not readable
	// until the sequence is Ready.
	FromTier
	// FromCompute: the engine computes it (a miss, a tier hit the load
	// policy declined, or a load that failed).
	FromCompute
)

// String returns "hot", "tier" or "compute".
func (k SourceKind) String() string {
	switch k {
	case FromHot:
		return "hot"
	case FromTier:
		return "tier"
	case FromCompute:
		return "compute"
	}
	return fmt.Sprintf("SourceKind(%d)", uint8(k))
}

// Source is where the KV of one block of a sequence comes from: its load
// plan, as Sources reports it.
type Source struct {
	Kind SourceKind
	// Tier is the index, in WithTiers order, of the tier a FromTier block
	// is loaded from; 0 otherwise.
	Tier int
}

// LoadQuery is what a LoadPolicy decides on: the blocks of one admission
// that the tiers hold, right after its hits in the pool. It belongs to the
// Manager and is valid only during the call.
type LoadQuery struct {
	// From[i] is the tier (index in WithTiers order) that the i-th block
	// after the pool's hits would be loaded from.
	From []int
	// TokensPerBlock and BlockBytes size the blocks: BlockBytes bytes move
	// per block loaded, TokensPerBlock tokens are computed per block not.
	TokensPerBlock, BlockBytes int
	// Bandwidth[t] is tier t's load bandwidth in bytes per second: the one
	// configured in LoadCost, else measured from the tier's completed
	// loads, else 0 (unknown).
	Bandwidth []float64
	// ComputePerToken and Overhead are LoadCost's.
	ComputePerToken, Overhead time.Duration
}

// LoadPolicy decides how many blocks of q.From, a prefix, an admission
// loads; the engine computes the rest. It runs on the owner goroutine in
// Admit, CanAdmit, Lookup and Preempt, must not call the Manager, and must
// return the same answer for the same query (CanAdmit's answer is Admit's).
type LoadPolicy func(q *LoadQuery) int

// LoadCost is what the default LoadPolicy, CostPolicy, knows of the
// engine and the tiers.
type LoadCost struct {
	// ComputePerToken is the engine's prefill time per token (a
	// forward-pass time divided by its tokens). 0, the default, means
	// unknown: every hit is loaded, as vLLM does.
	ComputePerToken time.Duration
	// Overhead is a fixed cost per admission that loads anything: the
	// step or so a sequence waits for its loads (Ready) before it runs.
	Overhead time.Duration
	// Bandwidth[t] is tier t's load bandwidth in bytes per second; a
	// missing or 0 entry is measured from the tier's completed loads (and
	// assumed fast until the first completes).
	Bandwidth []float64
}

// CostPolicy is the default LoadPolicy: it loads the prefix of q.From
// that saves the most time, each block saving TokensPerBlock ×
// ComputePerToken of compute and costing BlockBytes / Bandwidth of its
// tier's copy, less Overhead once; it loads nothing unless that saving is
// positive, so a hit is never slower than recomputing by the costs it is
// given. With ComputePerToken 0 it loads every block; a tier of unknown
// bandwidth costs nothing.
func CostPolicy(q *LoadQuery) int {
	if q.ComputePerToken <= 0 {
		return len(q.From)
	}
	compute := float64(q.TokensPerBlock) * q.ComputePerToken.Seconds()
	best, k, sum := 0.0, 0, -q.Overhead.Seconds()
	for i, t := range q.From {
		load := 0.0
		if t >= 0 && t < len(q.Bandwidth) && q.Bandwidth[t] > 0 {
			load = float64(q.BlockBytes) / q.Bandwidth[t]
		}
		sum += compute - load
		if sum > best {
			best, k = sum, i+1
		}
	}
	return k
}

// WithTiers puts offload tiers behind the pool, hottest first (host
// memory, then a disk): blocks entering the prefix cache are stored into
// them (see Demotion), and admissions find the longest prefix across the
// pool and the tiers, loading tier hits into fresh blocks (see Admit,
// Sources, Ready). Every tier's block size must be the pool's. At most
// MaxTiers; prefix caching must be on.
//
// Use it when the hot pool cannot hold the prefixes worth reusing (long
// conversations, agents, many system prompts) and host memory or a disk
// can. Do not use it when recomputing is as cheap as copying: LoadCost
// tells the manager so.
func WithTiers(tiers ...Tier) Option {
	return optionFunc(func(c *config) { c.tiers = append([]Tier(nil), tiers...) })
}

// Promotion says how a Manager with two tiers or more brings a block that
// only a colder tier holds (a disk hit, the host tier missing it) into the
// hot pool.
type Promotion uint8

const (
	// PromoteDirect, the default, loads the block from the colder tier
	// straight into its hot pool block: the sequence is Ready after one
	// copy. Write-through (the default Demotion) then stores it into the
	// hotter tiers at the next Drain, as it stores every block that
	// enters the prefix cache, so the host tier holds it soon after
	// either way. Chosen by measurement (locus-eval tiers, the chat
	// workload): the same bytes move as with PromoteStaged, and a disk
	// hit is ready one host copy sooner.
	PromoteDirect Promotion = iota + 1
	// PromoteStaged stages the block through the hotter tiers, as vLLM's
	// secondary tiers do: once its load completes, the hot pool block it
	// landed in is stored into every hotter tier that lacks it (the host
	// tier), and the sequence becomes Ready only when those stores are
	// done. The hot block is the staging buffer, so no copy is made
	// beyond the two a literal disk→host→hot path makes. A hotter tier
	// that refuses the store (full of pinned or pending blocks) or fails
	// it does not fail the load: the sequence is Ready with the block
	// anyway, and the refusal counts in that tier's StoreFailures. Use it
	// when the host tier must hold a disk hit before the engine reads it
	// (a second engine process sharing the host tier, a disk about to be
	// reset); not when time to first token matters more.
	PromoteStaged
)

// String returns "direct" or "staged".
func (p Promotion) String() string {
	switch p {
	case PromoteDirect:
		return "direct"
	case PromoteStaged:
		return "staged"
	}
	return fmt.Sprintf("Promotion(%d)", uint8(p))
}

// WithPromotion sets how blocks that only a colder tier holds are brought
// into the hot pool (default PromoteDirect). It matters only with two
// tiers or more.
func WithPromotion(p Promotion) Option {
	return optionFunc(func(c *config) { c.promotion = p })
}

// WithDemotion sets when cached blocks are stored into the tiers (default
// WriteThrough).
func WithDemotion(d Demotion) Option { return optionFunc(func(c *config) { c.demotion = d }) }

// WithLoadCost gives the default load policy the engine's compute cost and
// the tiers' bandwidths (see CostPolicy).
func WithLoadCost(lc LoadCost) Option {
	return optionFunc(func(c *config) {
		c.cost = lc
		c.cost.Bandwidth = append([]float64(nil), lc.Bandwidth...)
	})
}

// WithLoadPolicy replaces the default load policy, CostPolicy.
func WithLoadPolicy(p LoadPolicy) Option { return optionFunc(func(c *config) { c.policy = p }) }

// TierStats is a Manager's accounting of one tier, in Stats.Tiers.
type TierStats struct {
	// HitBlocks and HitTokens count the admitted prefix blocks that the
	// tier held and the load policy chose to load: the tier's prefix hits.
	HitBlocks, HitTokens uint64
	// DeclinedBlocks counts the tier's hits the load policy left to
	// compute.
	DeclinedBlocks uint64
	// LoadedBlocks counts blocks loaded and served; FailedBlocks blocks
	// planned as loads that fell back to compute (a failed, stale or
	// abandoned copy, a load the tier refused). Loads of a sequence
	// released or preempted before they completed count in neither.
	LoadedBlocks, FailedBlocks uint64
	// StoredBlocks counts blocks stored into the tier; StoreFailures store
	// calls the tier refused (no room, busy, closed) and store copies that
	// failed.
	StoredBlocks, StoreFailures uint64
	// PromotedBlocks counts, within StoredBlocks, the blocks staged into
	// the tier on their way from a colder one to the hot pool
	// (PromoteStaged).
	PromotedBlocks uint64
	// Bandwidth is the load bandwidth the policy uses, bytes per second
	// (configured, else measured; 0 unknown).
	Bandwidth float64
}

// ErrNotReady: the sequence is waiting for blocks loaded from a tier
// (Ready reports false): it cannot be appended to, reserved or forked
// until the Drain that completes its loads.
var ErrNotReady = errors.New("kv: sequence waiting for tier loads")

// ErrInFlight: Close found copies still running between the pool and a
// tier; their blocks were kept out of the pool, never reused (a copy may
// still touch them). Drain until Stats.InFlight is 0 before Close, or
// close the tiers first.
var ErrInFlight = errors.New("kv: copies in flight")

type tierState struct {
	t      Tier
	closed bool // its Drain said closed: abandoned
	bw     float64
	st     TierStats
	// staged are the blocks staged into the tier (PromoteStaged) whose
	// sequence still waits for other copies: announced (BlockStored) at
	// its finalize, once they are indexed.
	staged []stagedRun
}

// stagedRun is the blocks of one staging store into a tier.
type stagedRun struct {
	seq    SeqID
	blocks []int32
}

// demotion is a block held for a store, issued at the first Drain whose
// number is at least ready.
type demotion struct {
	bi    int32
	ready uint64
}

// xfer is a Store or Load job of one tier that holds pool blocks.
type xfer struct {
	job    tier.Job
	seq    SeqID   // loads: the sequence loaded into
	blocks []int32 // pool block indices, in the job's key order
	pos    []int32 // loads: each block's index in the sequence
	tier   int
	load   bool
	stage  bool // a store of loaded blocks into a hotter tier that seq waits for (PromoteStaged)
	live   bool
}

type xferKey struct {
	tier int
	job  tier.Job
}

// validateTiers checks the tier options against the pool.
func (c *config) validateTiers(p BlockPool) (blockBytes int, err error) {
	bad := func(format string, a ...any) (int, error) {
		return 0, fmt.Errorf("kv: %w: "+format, append([]any{pool.ErrInvalidConfig}, a...)...)
	}
	if c.demotion != WriteThrough && c.demotion != WriteBack {
		return bad("%v", c.demotion)
	}
	if p := c.promotion; p != 0 && p != PromoteDirect && p != PromoteStaged {
		return bad("%v", p)
	}
	if c.policy == nil {
		return bad("nil load policy")
	}
	if c.cost.ComputePerToken < 0 || c.cost.Overhead < 0 {
		return bad("negative load cost %+v", c.cost)
	}
	if len(c.cost.Bandwidth) > len(c.tiers) {
		return bad("%d bandwidths for %d tiers", len(c.cost.Bandwidth), len(c.tiers))
	}
	for _, b := range c.cost.Bandwidth {
		if !(b >= 0) {
			return bad("bandwidth %v", b)
		}
	}
	if len(c.tiers) == 0 {
		if c.demotion == WriteBack {
			return bad("write-back demotion without tiers")
		}
		return 0, nil
	}
	switch {
	case len(c.tiers) > MaxTiers:
		return bad("%d tiers, at most %d", len(c.tiers), MaxTiers)
	case !c.caching:
		return bad("tiers without prefix caching")
	case c.demotion == WriteBack && c.high == 0:
		return bad("write-back demotion needs WithWatermarks")
	}
	for i, t := range c.tiers {
		if typednil.Is(t) {
			return bad("tier %d is nil", i)
		}
		for j := range i {
			if c.tiers[j] == t {
				return bad("tier %d given twice", i)
			}
		}
		if blockBytes == 0 {
			blockBytes = t.BlockSize()
		}
		if t.BlockSize() != blockBytes || blockBytes <= 0 {
			return bad("tier %d has blocks of %d bytes, tier 0 of %d", i, t.BlockSize(), blockBytes)
		}
	}
	if bp, ok := p.(interface{ BlockSize() int }); ok && bp.BlockSize() != blockBytes {
		return bad("the pool's blocks are %d bytes, the tiers' %d", bp.BlockSize(), blockBytes)
	}
	return blockBytes, nil
}

// keyOf returns the tier key of block hash h.
func keyOf(h Hash) tier.Key { return tier.Key{Hash: h.sum} }

// tierPlan finds which of the blocks of hashes (the blocks right after an
// admission's pool hits) the tiers hold, as a prefix, and asks the load
// policy how many of them to load. It leaves in m.srcT the tier of each
// block to load and returns their count and the prefix's length. count
// says whether the lookups count (Admit) or only peek.
func (m *Manager) tierPlan(hashes []Hash, count bool) (k, found int) {
	n := len(hashes)
	if n == 0 {
		return 0, 0
	}
	m.tkeys = m.tkeys[:0]
	for _, h := range hashes {
		m.tkeys = append(m.tkeys, keyOf(h))
	}
	m.srcT = m.srcT[:0]
	for range n {
		m.srcT = append(m.srcT, -1)
	}
	lo := 0
	for t := range m.tiers {
		ts := &m.tiers[t]
		if ts.closed || lo == n {
			continue
		}
		if count {
			m.tres = ts.t.Lookup(m.tkeys[lo:], m.tres[:0])
		} else {
			m.tres = ts.t.Peek(m.tkeys[lo:], m.tres[:0])
		}
		for i, r := range m.tres {
			if i+lo < n && r == tier.Hit && m.srcT[lo+i] < 0 {
				m.srcT[lo+i] = t
			}
		}
		for lo < n && m.srcT[lo] >= 0 {
			lo++
		}
	}
	found = lo
	if found == 0 {
		return 0, 0
	}
	m.query.From = m.srcT[:found]
	m.query.Bandwidth = m.query.Bandwidth[:0]
	for t := range m.tiers {
		m.query.Bandwidth = append(m.query.Bandwidth, m.bandwidth(t))
	}
	k = min(max(m.cfg.policy(&m.query), 0), found)
	m.query.From = nil
	return k, found
}

// bandwidth is tier t's load bandwidth estimate.
func (m *Manager) bandwidth(t int) float64 {
	if t < len(m.cfg.cost.Bandwidth) && m.cfg.cost.Bandwidth[t] > 0 {
		return m.cfg.cost.Bandwidth[t]
	}
	return m.tiers[t].bw
}

// admitTiers plans and starts the loads of an admission of sequence si
// (id), whose first hits blocks are pool hits and whose blocks up to
// maxHit may be loaded, and touches the prefix in every tier. It returns
// whether the sequence waits for loads; if so, its full blocks after the
// hits are indexed only when they complete (finalize).
func (m *Manager) admitTiers(id SeqID, si uint32, tokens []uint32, hits, maxHit, full int) bool {
	k, found := m.tierPlan(m.hashes[hits:maxHit], true)
	s := &m.seqs[si]
	for i := range found {
		ts := &m.tiers[m.srcT[i]]
		if i < k {
			ts.st.HitBlocks++
			ts.st.HitTokens += uint64(m.bs)
		} else {
			ts.st.DeclinedBlocks++
		}
	}
	// Touch the prefix the admission uses, pool hits included, so that
	// the tiers keep what the engine uses.
	m.tkeys = m.tkeys[:0]
	for _, h := range m.hashes[:hits+k] {
		m.tkeys = append(m.tkeys, keyOf(h))
	}
	for t := range m.tiers {
		if !m.tiers[t].closed && len(m.tkeys) > 0 {
			m.tiers[t].t.Touch(m.tkeys)
		}
	}
	if k == 0 {
		return false
	}
	s.loaded = k
	s.tierOf = append(s.tierOf[:0], m.srcT[:k]...)
	s.valid = hits + k
	s.deferred = append(s.deferred[:0], tokens[hits*m.bs:full*m.bs]...)
	for t := range m.tiers {
		m.tkeys, m.tpos = m.tkeys[:0], m.tpos[:0]
		var dsts [][]byte // the tier's workers keep it: one per job
		for i, st := range s.tierOf {
			if st != t {
				continue
			}
			b, err := m.p.Bytes(s.blocks[hits+i])
			if err != nil {
				continue // a live handle the pool refuses: not reachable
			}
			m.tkeys = append(m.tkeys, keyOf(m.hashes[hits+i]))
			m.tpos = append(m.tpos, int32(hits+i))
			dsts = append(dsts, b)
		}
		if len(m.tkeys) == 0 {
			continue
		}
		job, err := m.tiers[t].t.Load(m.tkeys, dsts)
		if err != nil {
			s.valid = min(s.valid, int(m.tpos[0]))
			continue
		}
		x := m.newXfer(t, true, job)
		x.seq = id
		for _, p := range m.tpos {
			bi := int32(s.blocks[p].Index())
			m.hold(bi)
			m.blocks[bi].loading = true
			x.blocks = append(x.blocks, bi)
			x.pos = append(x.pos, p)
		}
		s.loads++
	}
	if s.loads == 0 {
		m.finalize(si)
		return false
	}
	return true
}

// finalize ends the loads of sequence si: it counts what they served and
// indexes the blocks loaded. The full blocks after them, which the engine
// computes once the sequence is ready, stay out of the index until the
// sequence is extended or forked (indexDeferred): the first sign that the
// engine ran it, so that no admission hits, and no store copies, a block
// whose KV is not computed yet.
func (m *Manager) finalize(si uint32) {
	s := &m.seqs[si]
	for i, t := range s.tierOf {
		if s.hot+i < s.valid {
			m.tiers[t].st.LoadedBlocks++
		} else {
			m.tiers[t].st.FailedBlocks++
		}
	}
	bs := m.bs
	for i := s.hot; i < s.valid; i++ {
		j := (i - s.hot) * bs
		m.indexBlock(s, i, s.deferred[j:j+bs])
	}
	m.log.flushStored(s.key)
	m.announceStaged(SeqID{gen: s.gen, idx: si, mgr: m.id})
	n := copy(s.deferred, s.deferred[(s.valid-s.hot)*bs:])
	s.deferred = s.deferred[:n]
}

// indexDeferred indexes the full blocks of s that the engine computed
// after its loads: those from s.valid on.
func (m *Manager) indexDeferred(s *seq) {
	bs := m.bs
	for k := 0; k+bs <= len(s.deferred); k += bs {
		m.indexBlock(s, s.valid+k/bs, s.deferred[k:k+bs])
	}
	m.log.flushStored(s.key)
	s.deferred = s.deferred[:0]
}

// hold adds a copy's hold on block i, which the manager holds.
func (m *Manager) hold(i int32) {
	b := &m.blocks[i]
	if b.copies == 0 {
		m.inFlight++
	}
	b.copies++
}

// unhold drops a copy's hold on block i; the last one lets the block go
// where its holders (or none) put it.
func (m *Manager) unhold(i int32) {
	b := &m.blocks[i]
	b.copies--
	if b.copies > 0 {
		return
	}
	m.inFlight--
	m.dropStoreMeta(i)
	if b.evictAfter {
		b.evictAfter = false
		m.demoting--
		if b.ref == 0 && b.pins == 0 { // a write-back victim nobody took back
			m.inUse--
			if !b.hash.IsZero() {
				delete(m.index, b.hash.key())
				m.log.removed(b.hash)
				b.hash = Hash{}
				m.st.Evictions++
				m.st.WatermarkEvictions++
			}
			m.release(i)
			return
		}
	}
	if b.ref > 0 || b.pins > 0 {
		return
	}
	m.inUse--
	m.settle(i)
}

// rescue takes block i back from a write-back eviction: a hit wants it.
func (m *Manager) rescue(i int32) {
	if b := &m.blocks[i]; b.evictAfter {
		b.evictAfter = false
		m.demoting--
	}
}

// queue holds block i for a store at the first Drain numbered ready.
func (m *Manager) queue(i int32, ready uint64) {
	m.hold(i)
	m.demote = append(m.demote, demotion{bi: i, ready: ready})
}

// newXfer records a job of tier t.
func (m *Manager) newXfer(t int, load bool, job tier.Job) *xfer {
	xi := takeSlot(&m.freeX, &m.xfers)
	x := &m.xfers[xi]
	*x = xfer{job: job, tier: t, load: load, live: true, blocks: x.blocks[:0], pos: x.pos[:0]}
	m.byJob[xferKey{t, job}] = xi
	return x
}

// issueStores starts the stores of the queued blocks whose turn has come:
// one Store per open tier for all of them.
func (m *Manager) issueStores() {
	m.batch = m.batch[:0]
	keep := m.demote[:0]
	for _, d := range m.demote {
		if d.ready <= m.drains {
			m.batch = append(m.batch, d.bi)
		} else {
			keep = append(keep, d)
		}
	}
	clear(m.demote[len(keep):])
	m.demote = keep
	if len(m.batch) == 0 {
		return
	}
	m.tkeys, m.srcs = m.tkeys[:0], m.srcs[:0]
	m.tpos = m.tpos[:0] // the batch entries that have bytes
	for k, bi := range m.batch {
		b := &m.blocks[bi]
		src, err := m.p.Bytes(b.h)
		if err != nil || b.hash.IsZero() {
			continue
		}
		m.tkeys = append(m.tkeys, keyOf(b.hash))
		m.srcs = append(m.srcs, src)
		m.tpos = append(m.tpos, int32(k))
	}
	for t := range m.tiers {
		ts := &m.tiers[t]
		if ts.closed || len(m.tkeys) == 0 {
			continue
		}
		// A tier without room for the whole batch stores its newest
		// half, and so on: at most log2(batch) refusals.
		off := 0
		plan, err := ts.t.Store(m.tkeys, m.srcs)
		for errors.Is(err, tier.ErrNoSpace) && len(m.tkeys)-off > 1 {
			off += (len(m.tkeys) - off) / 2
			plan, err = ts.t.Store(m.tkeys[off:], m.srcs[off:])
		}
		m.takeTierEvents(t) // what the store evicted
		if err != nil {
			ts.st.StoreFailures++
			continue
		}
		if plan.Job.IsZero() {
			continue
		}
		x := m.newXfer(t, false, plan.Job)
		for _, p := range plan.Positions {
			if p += off; p < off || p >= len(m.tpos) {
				continue
			}
			bi := m.batch[m.tpos[p]]
			m.hold(bi)
			x.blocks = append(x.blocks, bi)
		}
	}
	clear(m.srcs)
	for _, bi := range m.batch {
		m.unhold(bi) // the queue's hold
	}
}

// drainTiers applies the completions of every tier's copies; a closed
// tier's unfinished jobs are abandoned (its Drain promised that no copy
// runs any more).
func (m *Manager) drainTiers() {
	for t := range m.tiers {
		ts := &m.tiers[t]
		if ts.closed {
			continue
		}
		m.takeTierEvents(t) // what the engine's calls (Reset) removed
		done, err := ts.t.Drain(m.tdone[:0])
		for _, d := range done {
			if xi, ok := m.byJob[xferKey{t, d.Job}]; ok {
				m.finish(xi, d)
			}
		}
		m.takeTierEvents(t) // what the copies removed (corrupt blocks)
		clear(done)
		m.tdone = done[:0]
		if err != nil && errors.Is(err, pool.ErrClosed) {
			ts.closed = true
			m.abandon(t)
		}
	}
}

// abandon fails every unfinished job of tier t.
func (m *Manager) abandon(t int) {
	for xi := range m.xfers {
		if x := &m.xfers[xi]; x.live && x.tier == t {
			m.finish(int32(xi), tier.Done{Job: x.job, Store: !x.load, Err: pool.ErrClosed})
		}
	}
}

// ewma is the weight of a new bandwidth sample.
const ewma = 0.25

// finish applies the completion d of job xi.
func (m *Manager) finish(xi int32, d tier.Done) {
	x := &m.xfers[xi]
	delete(m.byJob, xferKey{x.tier, x.job})
	ts := &m.tiers[x.tier]
	ok := d.OK && d.Err == nil
	if x.load {
		if ok && d.Elapsed > 0 {
			bw := float64(len(x.blocks)*m.blockBytes) / d.Elapsed.Seconds()
			if ts.bw == 0 {
				ts.bw = bw
			} else {
				ts.bw += ewma * (bw - ts.bw)
			}
		}
		for _, bi := range x.blocks {
			m.blocks[bi].loading = false
		}
		if si, live := m.liveSeq(x.seq); live {
			s := &m.seqs[si]
			if !ok {
				f := d.Failed
				if !d.OK && f >= 0 && f < len(x.pos) {
					s.valid = min(s.valid, int(x.pos[f]))
				} else {
					s.valid = min(s.valid, int(x.pos[0]))
				}
			} else if x.tier > 0 && m.cfg.promotion == PromoteStaged {
				m.stage(xi, si)
				x = &m.xfers[xi] // stage may grow m.xfers
			}
			s.loads--
			if s.loads == 0 {
				m.finalize(si)
			}
		}
		// Else the sequence is gone (released or preempted while its
		// loads ran): its blocks are unhashed and go back to the pool
		// with their last hold, counted neither loaded nor failed.
	} else if x.stage {
		si, live := m.liveSeq(x.seq)
		if ok {
			ts.st.StoredBlocks += uint64(len(x.blocks))
			ts.st.PromotedBlocks += uint64(len(x.blocks))
			if live && m.tev.on {
				ts.staged = append(ts.staged, stagedRun{seq: x.seq, blocks: append([]int32(nil), x.blocks...)})
			}
		} else {
			ts.st.StoreFailures++
		}
		if live {
			// Ready with the block whether or not the hotter tier took
			// it: the load itself succeeded.
			if s := &m.seqs[si]; s.loads > 0 {
				s.loads--
				if s.loads == 0 {
					m.finalize(si)
				}
			}
		}
	} else if ok {
		ts.st.StoredBlocks += uint64(len(x.blocks))
		m.emitTierStored(x.tier, x.blocks)
	} else {
		ts.st.StoreFailures++
	}
	for _, bi := range x.blocks {
		m.unhold(bi)
	}
	x.live = false
	x.blocks, x.pos = x.blocks[:0], x.pos[:0]
	m.freeX = append(m.freeX, xi)
}

// stage stores the blocks of load job xi, which completed, into every open
// tier hotter than the one they came from (PromoteStaged), as jobs that
// sequence si waits for. Only the blocks the sequence will serve (below
// its valid prefix) are staged. A tier that refuses is skipped: the
// sequence does not wait for it.
func (m *Manager) stage(xi int32, si uint32) {
	s := &m.seqs[si]
	from := m.xfers[xi].tier
	seq := m.xfers[xi].seq
	m.batch, m.tkeys, m.srcs = m.batch[:0], m.tkeys[:0], m.srcs[:0]
	for k, bi := range m.xfers[xi].blocks {
		p := int(m.xfers[xi].pos[k])
		if p >= s.valid {
			continue
		}
		src, err := m.p.Bytes(m.blocks[bi].h)
		if err != nil {
			continue
		}
		m.batch = append(m.batch, bi)
		m.tkeys = append(m.tkeys, keyOf(s.hashes[p]))
		m.srcs = append(m.srcs, src)
	}
	for t := range from {
		ts := &m.tiers[t]
		if ts.closed || len(m.tkeys) == 0 {
			continue
		}
		plan, err := ts.t.Store(m.tkeys, m.srcs)
		m.takeTierEvents(t) // what the store evicted
		if err != nil {
			ts.st.StoreFailures++
			continue
		}
		if plan.Job.IsZero() {
			continue // the tier holds them all already, or admits none
		}
		x := m.newXfer(t, false, plan.Job)
		x.stage, x.seq = true, seq
		for _, p := range plan.Positions {
			if p >= 0 && p < len(m.batch) {
				m.hold(m.batch[p])
				x.blocks = append(x.blocks, m.batch[p])
			}
		}
		m.seqs[si].loads++
	}
	clear(m.srcs)
	m.srcs = m.srcs[:0]
}

// announceStaged emits the BlockStored events of the blocks staged into
// tiers for sequence id, now indexed, and forgets them.
func (m *Manager) announceStaged(id SeqID) {
	for t := range m.tiers {
		ts := &m.tiers[t]
		keep := ts.staged[:0]
		for _, r := range ts.staged {
			if r.seq == id {
				m.emitTierStored(t, r.blocks)
				continue
			}
			keep = append(keep, r)
		}
		clear(ts.staged[len(keep):])
		ts.staged = keep
	}
}

// Ready reports whether a live sequence's blocks loaded from tiers are all
// in the pool, and how many of its first tokens need no computing: its
// pool hits and the loads that succeeded, as a prefix. Until Ready says
// true, its blocks from tiers must not be read and the engine must not
// compute it (Append, Reserve, Accept and Fork fail with ErrNotReady);
// once it does, cached is final (never more than Admit said: a failed
// load lowers it, and the engine computes from there). A sequence without
// loads is ready at once, with Admit's count.
//
// Use it in the scheduler's loop: keep an admitted sequence waiting until
// Ready, after a Drain.
func (m *Manager) Ready(id SeqID) (cached int, ready bool, err error) {
	si, ok := m.liveSeq(id)
	if !ok {
		return 0, false, m.seqError(id)
	}
	s := &m.seqs[si]
	return s.valid * m.bs, s.loads == 0, nil
}

// Sources appends to dst where the KV of each of a live sequence's blocks
// comes from (its load plan) and returns dst: FromHot for its pool hits,
// FromTier for blocks loaded (or, until Ready, being loaded) from a tier,
// FromCompute for the rest, lookahead blocks included. After a failed
// load, the blocks from the first one that failed on are FromCompute.
func (m *Manager) Sources(id SeqID, dst []Source) ([]Source, error) {
	si, ok := m.liveSeq(id)
	if !ok {
		return dst, m.seqError(id)
	}
	s := &m.seqs[si]
	for i := range s.blocks {
		switch {
		case i < s.hot:
			dst = append(dst, Source{Kind: FromHot})
		case i < s.hot+s.loaded && (s.loads > 0 || i < s.valid):
			dst = append(dst, Source{Kind: FromTier, Tier: s.tierOf[i-s.hot]})
		default:
			dst = append(dst, Source{Kind: FromCompute})
		}
	}
	return dst, nil
}

// checkTiers verifies the tier machinery: every copy hold accounted for
// by the demotion queue or a live job, loading blocks in load jobs,
// waiting sequences' loads counted.
func (m *Manager) checkTiers() error {
	if len(m.tiers) == 0 {
		if m.inFlight != 0 || len(m.demote) != 0 {
			return fmt.Errorf("%d blocks in flight without tiers", m.inFlight)
		}
		return nil
	}
	holds := make(map[int32]int32)
	loading := make(map[int32]bool)
	loads := make(map[SeqID]int)
	for _, d := range m.demote {
		holds[d.bi]++
	}
	live := 0
	for xi := range m.xfers {
		x := &m.xfers[xi]
		if !x.live {
			continue
		}
		live++
		if j, ok := m.byJob[xferKey{x.tier, x.job}]; !ok || j != int32(xi) {
			return fmt.Errorf("transfer %d is not indexed by its job", xi)
		}
		for _, bi := range x.blocks {
			holds[bi]++
			if x.load {
				loading[bi] = true
			}
		}
		if x.load || x.stage {
			loads[x.seq]++
		}
	}
	if live != len(m.byJob) {
		return fmt.Errorf("%d live transfers, %d indexed", live, len(m.byJob))
	}
	inFlight, demoting := 0, 0
	for i := range m.blocks {
		b := &m.blocks[i]
		if b.copies != holds[int32(i)] {
			return fmt.Errorf("block %d has %d copy holds, %d accounted for", i, b.copies, holds[int32(i)])
		}
		if b.loading != loading[int32(i)] || b.loading && !b.hash.IsZero() {
			return fmt.Errorf("block %d: loading %v, in a load job %v, hash %v", i, b.loading, loading[int32(i)], b.hash)
		}
		if b.copies > 0 {
			inFlight++
		}
		if b.evictAfter {
			demoting++
			if b.copies == 0 {
				return fmt.Errorf("block %d awaits a store to be evicted, but none holds it", i)
			}
		}
	}
	if inFlight != m.inFlight || demoting != m.demoting {
		return fmt.Errorf("counted %d blocks in flight, %d write-back victims; counters say %d, %d", inFlight, demoting, m.inFlight, m.demoting)
	}
	for si := range m.seqs {
		s := &m.seqs[si]
		if s.gen&1 == 0 {
			continue
		}
		id := SeqID{gen: s.gen, idx: uint32(si), mgr: m.id}
		if s.loads != loads[id] {
			return fmt.Errorf("sequence %d waits for %d loads, %d are in flight", si, s.loads, loads[id])
		}
		from := s.valid // after the loads: the blocks to compute
		if s.loads > 0 {
			from = s.hot
		}
		if d := len(s.deferred); d != 0 && d != (s.tokens/m.bs-from)*m.bs {
			return fmt.Errorf("sequence %d keeps %d tokens for %d deferred blocks", si, d, s.tokens/m.bs-from)
		}
		if s.loads > 0 && len(s.deferred) == 0 {
			return fmt.Errorf("sequence %d waits for loads without its tokens", si)
		}
		if s.valid < s.hot || s.valid > s.hot+s.loaded || len(s.tierOf) != s.loaded {
			return fmt.Errorf("sequence %d: %d hot, %d loaded, %d valid, %d tiers", si, s.hot, s.loaded, s.valid, len(s.tierOf))
		}
	}
	return nil
}

// tierUsage is what a tier tells of its occupancy; every *tier.Manager
// has it (Stats).
type tierUsage interface{ Stats() tier.Stats }

// tiersHoldBlocks reports whether a tier that the manager still uses may
// hold a block: stored, being stored or being loaded. A tier that does not
// say (not a tierUsage) is taken to hold some; a closed one holds nothing
// the manager can load.
func (m *Manager) tiersHoldBlocks() bool {
	for t := range m.tiers {
		ts := &m.tiers[t]
		if ts.closed {
			continue
		}
		u, ok := ts.t.(tierUsage)
		if !ok {
			return true
		}
		if st := u.Stats(); st.Capacity > st.Free {
			return true
		}
	}
	return false
}

// resetClearsAll reports whether a Reset that left the pool's index as it
// is now may announce AllBlocksCleared: with a subscriber and prefix
// caching, when the pool caches nothing and no tier keeps a block. A
// router (llm-d's, vLLM's) takes AllBlocksCleared as every medium of the
// engine emptied, so while a tier keeps blocks after Reset the dropped
// hashes are announced as BlockRemoved of the hot pool's medium instead,
// and the tiers' entries stay indexed.
func (m *Manager) resetClearsAll() bool {
	return m.cfg.subscriber != nil && m.cfg.caching && len(m.index) == 0 && !m.tiersHoldBlocks()
}
