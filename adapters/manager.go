package adapters

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/internal/ids"
	"github.com/locus-go/locus/internal/invariants"
	"github.com/locus-go/locus/internal/nocopy"
	"github.com/locus-go/locus/internal/snapshot"
	"github.com/locus-go/locus/internal/typednil"
	"github.com/locus-go/locus/pages"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
)

// Residency is the tier an adapter is in.
type Residency uint8

// The residencies, coldest first.
const (
	// Cold: only the Loader has the weights.
	Cold Residency = iota
	// Warm: a copy (exact or int8) is in the warm region.
	Warm
	// Loading: a Prefetch is copying the adapter into its hot run.
	Loading
	// Hot: the weights are in a run of the pages pool, ready to use.
	Hot
)

// String returns "cold", "warm", "loading" or "hot".
func (r Residency) String() string {
	switch r {
	case Cold:
		return "cold"
	case Warm:
		return "warm"
	case Loading:
		return "loading"
	case Hot:
		return "hot"
	}
	return fmt.Sprintf("Residency(%d)", uint8(r))
}

// adapter is one registration slot.
type adapter struct {
	id     string
	gen    uint64 // odd while registered
	order  uint64 // registration order, the ranking's tie-break
	loader Loader
	size   int

	run       pages.Run // the hot run: loaded, or loading while task != nil
	runPinned bool      // the run holds one pages pin (held, pinned or loading)
	task      *task     // the Prefetch in flight
	refs      int       // live leases
	pinUntil  int64     // Pin's expiry since the epoch; 0: not pinned

	warm     pages.Run // the warm copy
	warmLen  int       // its bytes: size, or the int8 encoding's size
	warmQ    bool      // the copy is int8
	warmBusy int       // prefetches reading the copy
	noQuant  bool      // the weights refused quantization

	ring    []int64 // the last promote acquisitions, a ring
	ringPos int
	ringN   int
	lastUse int64
	loaded  int64
	since   int64 // when the warm copy was made

	loads   uint32 // loads through the Loader (saturating): the cold tier's admission
	cold    uint8  // its copy in the cold tier: coldNone, coldStoring, coldStored
	coldQ   bool   // the cold copy is int8
	coldLen int    // the cold copy's bytes

	pos [nIndexes]uint32 // its position in each index, plus one; 0: absent
}

func (a *adapter) live() bool       { return a.gen&1 == 1 }
func (a *adapter) hot() bool        { return !a.run.IsZero() && a.task == nil }
func (a *adapter) wantPinned() bool { return a.refs > 0 || a.pinUntil > 0 || a.task != nil }

// Manager keeps LoRA adapters in three residency tiers: hot (a contiguous
// run of a pages.Pool, sharing the region with the KV cache), warm (a copy
// in a host-memory region, exact or int8) and cold (the adapter's Loader).
// See the package doc for the rules.
//
// A Manager has one owner goroutine, the one that owns its pages.Pool:
// every method but NewReleaser and Releaser.Release must be called by one
// goroutine at a time. Workers release handles through Releasers; the
// owner applies releases and Prefetch completions in Drain.
//
// The zero Manager is not usable (its calls fail with pool.ErrClosed);
// build one with New. A Manager must not be copied.
type Manager struct {
	_       nocopy.NoCopy
	id      uint32
	cfg     config
	hot     *pages.Pool
	content pages.Content
	page    int
	warm    *pages.Pool // nil without a warm tier
	cold    *coldState  // nil without a cold tier (WithCold)
	epoch   time.Time
	last    int64 // the latest clock reading, since the epoch: time never goes back
	closed  bool
	closing atomic.Bool

	ads    []adapter
	free   []uint32
	byID   map[string]uint32
	byRun  map[int]uint32 // a hot run's first page: its adapter
	leases []lease
	freeL  []uint32
	seq    uint64 // registrations and tasks

	rel      *mailbox.Transport
	relSink  *pool.Sink
	done     *mailbox.Transport
	doneSink *pool.Sink
	tasks    chan *task
	parts    chan *decodeJob // the owner's parallel decodes, for idle workers
	job      decodeJob
	wg       sync.WaitGroup
	inflight int

	hotN, hotPages   int
	warmN, warmPages int
	warmBytes        int64
	pinned           int
	held, quantN     int // adapters with leases; int8 warm copies
	both             int // adapters with a hot run and a warm copy

	ix      [nIndexes][]entry // the indexes (index.go)
	scratch []uint32

	batchers  []*Batcher // open Batchers over the Manager: their queues are LoraInfo.Waiting
	lora      LoraInfo   // the lists of the last loraInfo
	loraDirty bool       // the held or waiting adapters changed since
	idScratch []string
	c         counters

	pub snapshot.Cell[Stats] // Stats for Snapshot, published by the owner

	out     []Done
	drainE  error
	invErr  error
	protect int // the adapter being loaded, whose warm copy must stay; -1: none
}

// managerIDs numbers the managers, so that a handle names its manager.
var managerIDs ids.Source

// New builds a Manager whose hot tier is runs of content c in hot. The
// Manager owns content c: nothing else may allocate runs of it, and Check
// holds the pool's counts of it to the Manager's. hot stays the caller's
// (it holds the KV cache too) and must outlive the Manager; close the
// Manager first.
//
// Make c evictable (pages.ContentType.Evictable) to let the pages pool
// evict adapters that are neither held nor pinned when the KV cache needs
// room, and forward the pool's EvictFunc to Evicted; otherwise adapters
// leave the hot tier only by the Manager's own demotions.
//
// New fails with an error wrapping pool.ErrInvalidConfig if hot is nil, c
// is not one of its content types, or an option is invalid.
func New(hot *pages.Pool, c pages.Content, opts ...Option) (*Manager, error) {
	if hot == nil || hot.Pages() == 0 || int(c) >= len(hot.ContentTypes()) {
		return nil, fmt.Errorf("%w: adapters: need an open pages pool and one of its content types", errConfig)
	}
	cfg := defaults()
	for _, o := range opts {
		if typednil.Is(o) {
			return nil, fmt.Errorf("%w: adapters: nil option", errConfig)
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	m := &Manager{
		id: managerIDs.Next(), cfg: cfg, hot: hot, content: c, page: hot.PageSize(),
		epoch: cfg.clock(), byID: map[string]uint32{}, byRun: map[int]uint32{},
		rel: mailbox.New(), done: mailbox.New(), tasks: make(chan *task, cfg.inflight), protect: -1,
		parts: make(chan *decodeJob, cfg.workers),
	}
	if cfg.warmBytes > 0 {
		n := int(cfg.warmBytes / int64(cfg.warmPage))
		b, err := heap.New(n*cfg.warmPage, 1)
		if err != nil {
			return nil, fmt.Errorf("adapters: warm region: %w", err)
		}
		w, err := pages.New(b, cfg.warmPage)
		if err != nil {
			_ = b.Close()
			return nil, fmt.Errorf("adapters: warm region: %w", err)
		}
		m.warm = w
	}
	if cfg.cold != nil {
		m.cold = newColdState(cfg.cold)
	}
	m.relSink = pool.NewSink(m.applyReleases)
	m.doneSink = pool.NewSink(m.complete)
	for range cfg.workers {
		p, err := m.done.NewProducer()
		if err != nil { // cannot happen: the transport is new
			m.stopWorkers()
			return nil, err
		}
		m.wg.Add(1)
		go m.worker(p)
	}
	m.debugCheck()
	return m, nil
}

func (m *Manager) ok() bool { return m != nil && m.hot != nil && !m.closed }

// lookup returns the slot of adapter id: errClosed once the Manager is
// closed, ErrUnknown for an id not registered.
func (m *Manager) lookup(id string) (uint32, error) {
	if !m.ok() {
		return 0, errClosed
	}
	idx, ok := m.byID[id]
	if !ok {
		return 0, ErrUnknown
	}
	return idx, nil
}

// now reads the clock as nanoseconds since the epoch, never going back.
func (m *Manager) now() int64 {
	t := int64(m.cfg.clock().Sub(m.epoch))
	if t > m.last {
		m.last = t
	}
	return m.last
}

// Register adds an adapter, cold: nothing is read until it is first
// acquired, pinned or prefetched. It fails with ErrExists for an id
// already registered, ErrTooLarge if the adapter could never be hot (larger
// than the hot byte budget or the pages region), and with an error wrapping
// pool.ErrInvalidArgument for an empty id or a nil loader or one whose size
// is not positive.
func (m *Manager) Register(id string, l Loader) error {
	if !m.ok() {
		return errClosed
	}
	if id == "" || typednil.Is(l) {
		return fmt.Errorf("%w: adapters: Register needs an id and a loader", errArg)
	}
	size := l.Size()
	if size <= 0 || size > maxSize {
		return fmt.Errorf("%w: adapters: adapter %q has size %d", errArg, id, size)
	}
	if _, ok := m.byID[id]; ok {
		return ErrExists
	}
	if pg := m.pagesOf(int(size)); pg > m.hot.Pages() || (m.cfg.hotBytes > 0 && int64(pg)*int64(m.page) > m.cfg.hotBytes) {
		return fmt.Errorf("%w: %q is %d bytes", ErrTooLarge, id, size)
	}
	var idx uint32
	if n := len(m.free); n > 0 {
		idx, m.free = m.free[n-1], m.free[:n-1]
	} else {
		m.ads = append(m.ads, adapter{})
		idx = uint32(len(m.ads) - 1)
	}
	a := &m.ads[idx]
	ring := a.ring
	if cap(ring) < m.cfg.promote {
		ring = make([]int64, m.cfg.promote)
	}
	m.seq++
	*a = adapter{id: id, gen: a.gen + 1, order: m.seq, loader: l, size: int(size), ring: ring[:m.cfg.promote]}
	clear(a.ring)
	m.byID[id] = idx
	m.c.registers++
	m.debugCheck()
	return nil
}

// Unregister removes an adapter and frees its hot run and warm copy, and
// removes its copy from the cold tier (WithCold; a copy still being stored
// is removed once its store completes, at a Drain). It fails with ErrBusy
// while the adapter is held or loading (pins are dropped with it) and with
// ErrUnknown for an id not registered.
func (m *Manager) Unregister(id string) error {
	idx, err := m.lookup(id)
	if err != nil {
		return err
	}
	a := &m.ads[idx]
	if a.refs > 0 || a.task != nil {
		return ErrBusy
	}
	if a.pinUntil > 0 {
		a.pinUntil = 0
		m.pinned--
	}
	if !a.run.IsZero() {
		m.dropHot(idx, true)
	}
	if !a.warm.IsZero() {
		m.dropWarm(idx, false)
	}
	if m.cold != nil {
		m.dropCold(idx)
		a.cold = coldNone // a store in flight: its completion removes it
	}
	delete(m.byID, id)
	a.gen++
	a.loader = nil
	a.id = ""
	m.unindex(idx)
	m.free = append(m.free, idx)
	m.c.unregisters++
	m.debugCheck()
	return nil
}

// Acquire returns a handle on adapter id, hot: it loads the adapter
// (dequantizing a warm int8 copy, or reading its Loader) if it is not hot,
// demoting the lowest-ranked adapters that are neither held nor pinned to
// make room. The adapter stays hot, pinned in the pages pool, until every
// handle on it is released. Every Acquire counts as an access for the
// promotion window.
//
// It fails with ErrUnknown, ErrLoading (a Prefetch of it is in flight:
// Drain and retry), ErrNoRoom (the hot tier is full of held or pinned
// adapters) or an error wrapping ErrLoad (the loader failed; the adapter
// stays cold).
func (m *Manager) Acquire(id string) (Handle, error) {
	idx, err := m.lookup(id)
	if err != nil {
		return Handle{}, err
	}
	now := m.now()
	m.expirePins(now)
	a := &m.ads[idx]
	if a.task != nil {
		return Handle{}, ErrLoading
	}
	if a.hot() {
		m.c.hotHits++
	} else if err := m.makeHot(idx, now); err != nil {
		m.debugCheck()
		return Handle{}, err
	}
	a = &m.ads[idx]
	a.ring[a.ringPos] = now
	a.ringPos = (a.ringPos + 1) % len(a.ring)
	a.ringN = min(a.ringN+1, len(a.ring))
	a.lastUse = now
	if a.refs == 0 {
		m.held++
		m.loraDirty = true
	}
	a.refs++
	m.syncPin(a)
	if m.hotWorthy(a, now) {
		m.iset(qWorthy, idx, 0, uint64(addSat(a.ring[a.ringPos], int64(m.cfg.window))))
	}
	m.reindex(idx, now)
	var li uint32
	if n := len(m.freeL); n > 0 {
		li, m.freeL = m.freeL[n-1], m.freeL[:n-1]
	} else {
		m.leases = append(m.leases, lease{})
		li = uint32(len(m.leases) - 1)
	}
	l := &m.leases[li]
	l.gen++ // odd: live
	l.adapter = idx
	m.c.acquires++
	m.debugCheck()
	return Handle{gen: l.gen, idx: li, mgr: m.id}, nil
}

// lease validates h and returns its lease.
func (m *Manager) lease(h Handle) (*lease, error) {
	if h.mgr != m.id || int(h.idx) >= len(m.leases) || h.gen&1 == 0 || m.leases[h.idx].gen != h.gen {
		return nil, ErrInvalidHandle
	}
	return &m.leases[h.idx], nil
}

// Bytes returns the weights of the adapter h holds: its hot run, exactly
// the adapter's size. The slice is the caller's to read (and the GPU's to
// copy from) until h is released.
func (m *Manager) Bytes(h Handle) ([]byte, error) {
	if !m.ok() {
		return nil, errClosed
	}
	l, err := m.lease(h)
	if err != nil {
		m.c.rejected++
		return nil, err
	}
	a := &m.ads[l.adapter]
	b, err := m.hot.Bytes(a.run)
	if err != nil {
		return nil, err
	}
	return b[:a.size], nil
}

// ID returns the id of the adapter h holds.
func (m *Manager) ID(h Handle) (string, error) {
	if !m.ok() {
		return "", errClosed
	}
	l, err := m.lease(h)
	if err != nil {
		return "", err
	}
	return m.ads[l.adapter].id, nil
}

// Release drops the claim of h, on the owner goroutine (workers use a
// Releaser). When the last handle on an adapter that is not pinned goes,
// its run is unpinned in the pages pool: it stays hot, and may be demoted
// or evicted. A zero, stale, foreign or doubled handle fails with
// ErrInvalidHandle and changes nothing.
func (m *Manager) Release(h Handle) error {
	if !m.ok() {
		return errClosed
	}
	err := m.release(h)
	m.debugCheck()
	return err
}

func (m *Manager) release(h Handle) error {
	l, err := m.lease(h)
	if err != nil {
		m.c.rejected++
		return err
	}
	l.gen++
	m.freeL = append(m.freeL, h.idx)
	a := &m.ads[l.adapter]
	a.refs--
	if a.refs == 0 {
		m.held--
		m.loraDirty = true
	}
	m.syncPin(a)
	m.reindex(l.adapter, m.last)
	m.c.releases++
	return nil
}

// Pin keeps adapter id hot for ttl, loading it now if it is not hot
// (vLLM's pin_adapter): a pinned adapter is never demoted or evicted. A
// later Pin replaces the expiry; Unpin ends the pin early. ttl must be
// positive and at most the maximum pin duration (WithMaxPin), else Pin
// fails with ErrPinDuration; it fails as Acquire does otherwise, but a Pin
// of an adapter that is loading succeeds (it stays hot once loaded).
func (m *Manager) Pin(id string, ttl time.Duration) error {
	if !m.ok() {
		return errClosed
	}
	if ttl <= 0 || ttl > m.cfg.maxPin {
		return fmt.Errorf("%w: %v (max %v)", ErrPinDuration, ttl, m.cfg.maxPin)
	}
	idx, err := m.lookup(id)
	if err != nil {
		return err
	}
	now := m.now()
	m.expirePins(now)
	if a := &m.ads[idx]; a.run.IsZero() {
		if err := m.makeHot(idx, now); err != nil {
			m.debugCheck()
			return err
		}
	}
	a := &m.ads[idx]
	if a.pinUntil == 0 {
		m.pinned++
	}
	a.pinUntil = now + int64(ttl)
	m.syncPin(a)
	m.iset(qPin, idx, 0, uint64(a.pinUntil))
	m.reindex(idx, now)
	m.c.pins++
	m.debugCheck()
	return nil
}

// Unpin ends a pin. Unpin of an adapter that is not pinned does nothing;
// of an unknown id it fails with ErrUnknown.
func (m *Manager) Unpin(id string) error {
	idx, err := m.lookup(id)
	if err != nil {
		return err
	}
	if m.ads[idx].pinUntil > 0 {
		m.endPin(idx, m.last)
	}
	m.debugCheck()
	return nil
}

// expirePins ends the pins whose time has come, in the order of their
// expiry (qPin): no walk over the adapters.
func (m *Manager) expirePins(now int64) {
	for {
		e, ok := m.itop(qPin)
		if !ok || int64(e.lo) > now {
			return
		}
		m.endPin(e.idx, now)
	}
}

// endPin ends adapter idx's pin: Unpin, or its expiry.
func (m *Manager) endPin(idx uint32, now int64) {
	a := &m.ads[idx]
	a.pinUntil = 0
	m.pinned--
	m.idel(qPin, idx)
	m.syncPin(a)
	m.reindex(idx, now)
}

// syncPin makes the run's pages pin match the adapter's state: one pin
// while it is held, pinned or loading, none otherwise (so the pages pool
// may evict it, and orders it by when it was last unpinned).
func (m *Manager) syncPin(a *adapter) {
	if a.run.IsZero() || a.runPinned == a.wantPinned() {
		return
	}
	var err error
	if a.runPinned {
		err = m.hot.Unpin(a.run)
	} else {
		err = m.hot.Pin(a.run)
	}
	if err == nil {
		a.runPinned = !a.runPinned
	}
}

// Residency returns the tier adapter id is in (the hottest, when it has
// copies in two).
func (m *Manager) Residency(id string) (Residency, error) {
	idx, err := m.lookup(id)
	if err != nil {
		return Cold, err
	}
	return m.residency(&m.ads[idx]), nil
}

func (m *Manager) residency(a *adapter) Residency {
	switch {
	case a.task != nil:
		return Loading
	case !a.run.IsZero():
		return Hot
	case !a.warm.IsZero():
		return Warm
	}
	return Cold
}

// Close stops the copy workers (waiting for the copies in flight, the cold
// tier's included), frees every hot run back to the pages pool and
// releases the warm region. It leaves the cold tier's tier.Manager open,
// with the copies stored in it: the caller closes it after the Manager.
// Handles die with it; releasers fail with pool.ErrClosed. Later calls of
// every method, Close included, return pool.ErrClosed.
func (m *Manager) Close() error {
	if !m.ok() {
		return errClosed
	}
	m.waitCold()
	m.stopWorkers()
	m.pub.Seal(m.Stats()) // the counts as they stood at Close, for Snapshot
	m.closed = true
	m.closing.Store(true)
	_ = m.rel.Close()
	_ = m.done.Close()
	for i := range m.ads {
		if a := &m.ads[i]; !a.run.IsZero() {
			_ = m.hot.Free(a.run)
			a.run = pages.Run{}
		}
	}
	if m.warm != nil {
		_ = m.warm.Close()
	}
	return nil
}

func (m *Manager) stopWorkers() {
	close(m.tasks)
	m.wg.Wait()
}

func (m *Manager) debugCheck() {
	if invariants.Enabled && m.invErr == nil {
		m.invErr = m.check()
	}
}
