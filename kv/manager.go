package kv

import (
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"

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
	blocks []blockMeta      // by pool block index
	index  map[uint64]int32 // key(hash) -> the cached block; see cached
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

	log eventLog // the hot pool's events (events.go)

	st     Stats
	rejN   int
	rejID  SeqID
	rejErr error

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
	m.index = make(map[uint64]int32, n)
	m.order.init()
	m.decays.m = m
	m.maxPinned = n // WithMaxPinned(0): no cap
	if cfg.maxPinned > 0 {
		m.maxPinned = int(cfg.maxPinned * float64(n))
	}
	if d, ok := p.(interface{ Drain() (int, error) }); ok {
		m.drainPool = d.Drain
	}
	m.rel = mailbox.New()
	m.sink = pool.NewSink(m.applyReleases)
	m.log = eventLog{sub: cfg.subscriber, event: Event{BlockSize: m.bs}}
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
	r := &Releaser{}
	r.s.Init(prod, &m.isClosed)
	return r, nil
}

// Drain is the owner's once-per-step call: it applies the releases workers
// pushed since the last Drain, returns priorities whose duration has passed
// to the default, evicts down to the low watermark if the high one is
// reached (WithWatermarks), and publishes the accounting when a Snapshot
// asked for it. It reports how many sequences the releases ended and how
// many releases it rejected (stale, doubled, foreign or unknown ids: they
// changed nothing, are counted in Stats.RejectedReleases too, and are
// reported in an error matching the first one's reason, ErrStaleSequence,
// ErrForeignSequence or ErrUnknownSequence, and ErrInvalidSequence); the
// other releases are applied all the same. When the pool has a Drain
// method (every *pool.Pool has), Drain drains the pool too, so that the
// pool publishes its accounting for a scraper even when the owner drives
// only the manager; its error, if any, is joined to Drain's.
func (m *Manager) Drain() (Drained, error) {
	if err := m.usable(); err != nil {
		return Drained{}, err
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
	m.log.flushRemoved()
	err := m.flushFree()
	d := Drained{Released: int(m.st.RemoteReleases - before), Rejected: m.rejN}
	if err == nil && m.rejN > 0 {
		err = fmt.Errorf("%w: %v (%d release(s) rejected)", m.rejErr, m.rejID, m.rejN)
	}
	m.rejN, m.rejID, m.rejErr = 0, SeqID{}, nil
	if invariants.Enabled || m.pub.Wanted() {
		m.Stats() // checks the invariants in invariant builds; publishes
	}
	if m.drainPool != nil {
		if _, perr := m.drainPool(); perr != nil {
			err = errors.Join(err, perr)
		}
	}
	return d, err
}

// Drained is what one Manager.Drain applied of the workers' releases.
type Drained struct {
	// Released is how many sequences the releases ended.
	Released int
	// Rejected is how many releases named no live sequence of the manager
	// (stale, doubled, foreign or unknown ids); they changed nothing.
	Rejected int
}

// applyReleases is the release mailbox's sink.
func (m *Manager) applyReleases(chunk []pool.Handle) {
	for _, h := range chunk {
		id := seqOf(h)
		si, ok := m.liveSeq(id)
		if !ok {
			m.st.RejectedReleases++
			if m.rejN == 0 {
				m.rejID, m.rejErr = id, m.seqError(id)
			}
			m.rejN++
			continue
		}
		m.releaseSeq(si)
		m.st.Releases++
		m.st.RemoteReleases++
	}
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
	st.SubscriberPanics = m.log.panics
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
