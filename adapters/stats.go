package adapters

import (
	"errors"
	"fmt"
)

// counters are the Manager's running totals.
type counters struct {
	registers, unregisters                  uint64
	acquires, hotHits, warmLoads, coldLoads uint64
	releases, remoteReleases, rejected      uint64
	pins, prefetches, loadErrors, noRoom    uint64
	promotions, demotions, idleDemotions    uint64
	evictions, warmStores, warmDrops        uint64
	compressions, quantRefused, invalid     uint64
	bytesMoved                              uint64
	coldTierLoads, coldStores, coldRejected uint64
	coldSkipped, coldErrors, coldEvictions  uint64
}

// TierStats counts one tier.
type TierStats struct {
	Adapters int   // adapters with a copy in the tier
	Pages    int   // pages those copies take (hot: the pages pool's; warm: the warm region's; cold tier: its blocks)
	Bytes    int64 // bytes of the copies (the page-rounded runs' bytes for hot, the stored bytes for warm and the cold tier)
}

// Stats is a snapshot of a Manager's accounting. Every count is exact;
// Check verifies, among others:
//
//	Hot.Adapters + Loading = the pages pool's runs of the adapter content
//	Hot.Pages (loading included) = the pool's pages of that content
//	Warm.Pages = the warm region's used pages
//	Leases = the sum of the adapters' reference counts
//	Hot.Adapters <= the hot slot budget, Hot.Bytes <= the hot byte budget
//	ColdTier: every copy counted is whole in the tier (every block a HIT),
//	every store in flight pending (HIT_PENDING)
type Stats struct {
	Registered int       // adapters registered
	Hot        TierStats // loaded hot adapters and loading ones (their runs are allocated)
	Loading    int       // prefetches in flight
	Warm       TierStats // warm copies (a hot adapter may keep one)
	Quantized  int       // warm copies stored as int8
	Cold       int       // registered adapters with no hot run and no warm copy (a copy in the cold tier or not)
	Held       int       // adapters with live handles
	Leases     int       // live handles
	Pinned     int       // adapters pinned by Pin

	// ColdTier counts the copies in the cold tier (WithCold), whole and
	// loadable: Pages is the tier blocks they take, Bytes their bytes (the
	// exact weights, or the int8 encoding of a warm copy). A hot or warm
	// adapter may keep its cold copy.
	ColdTier    TierStats
	ColdStoring int // stores into the cold tier in flight (of unregistered adapters too, until they complete)

	Acquires         uint64 // successful Acquires
	HotHits          uint64 // Acquires that found the adapter hot
	WarmLoads        uint64 // loads from the warm tier (Acquire, Pin, Prefetch)
	ColdLoads        uint64 // loads through the Loader
	ColdTierLoads    uint64 // loads from the cold tier (WithCold)
	LoadErrors       uint64 // loads that failed
	Prefetches       uint64 // prefetches started
	NoRoom           uint64 // loads refused with ErrNoRoom
	Releases         uint64 // handles released (owner and Releasers)
	RemoteReleases   uint64 // releases that came through Releasers, rejected ones included
	RejectedReleases uint64 // zero, stale, foreign or doubled handles refused
	Promotions       uint64 // adapters made hot
	Demotions        uint64 // hot adapters demoted by the Manager (budgets, room, idleness)
	IdleDemotions    uint64 // of which by Tick's idle rule
	Evictions        uint64 // hot adapters evicted by the pages pool (Evicted)
	WarmStores       uint64 // warm copies made
	WarmDrops        uint64 // warm copies dropped (to cold)
	Compressions     uint64 // warm copies stored or converted as int8
	QuantRefused     uint64 // adapters kept exact: weights not finite or not 16-bit
	BytesMoved       uint64 // bytes copied into the hot, warm and cold tiers

	// The cold tier's admission and its faults (WithCold).
	ColdTierStores    uint64 // copies stored in the cold tier
	ColdTierRejected  uint64 // adapters that went cold unstored by admission: loaded from the Loader fewer than admitAfter times, more blocks than the tier holds, or refused by the tier's own Admission
	ColdTierSkipped   uint64 // stores of admitted adapters and loads the tier could not take: stores in flight at their limit, no evictable room, the tier's job limit, the tier closed
	ColdTierErrors    uint64 // copies into or out of the cold tier that failed (a failed write, a torn or corrupt block): the copy is dropped, a load falls back to the Loader
	ColdTierEvictions uint64 // cold copies lost because the tier evicted one of their blocks

	// Lora is the state behind vLLM's gauge vllm:lora_requests_info
	// (metrics.NewVLLMLora), recorded with the counts above.
	Lora LoraInfo
}

// Stats returns the Manager's accounting; after Close, the zero Stats.
// Only the owner may call it; it also publishes what it returns for
// Snapshot. Other goroutines (a metrics scraper) call Snapshot.
func (m *Manager) Stats() Stats {
	if !m.ok() {
		return Stats{}
	}
	s := m.stats()
	m.pub.Publish(s)
	return s
}

// Snapshot returns the accounting as the owner publishes it, for any
// goroutine, concurrently with the owner: use it for metrics
// (metrics.NewAdapters), not for decisions on the owner, which calls
// Stats. The owner publishes at Stats and Close, and at a Drain when a
// Snapshot has asked since the last publication. So Snapshot returns a
// value published in the last millisecond at once; otherwise it asks and
// waits for the owner's next Drain or Stats, up to 100 ms, and returns
// the latest value, which from an idle owner is what it last published
// (the zero Stats if it never published). After Close it returns the
// counts as they stood at Close, at once. The zero Manager returns the
// zero Stats.
func (m *Manager) Snapshot() Stats {
	if m == nil || m.hot == nil {
		return Stats{}
	}
	return m.pub.Get()
}

func (m *Manager) stats() Stats {
	s := Stats{
		Registered: len(m.byID), Loading: m.inflight, Leases: len(m.leases) - len(m.freeL), Pinned: m.pinned,
		Hot:      TierStats{Adapters: m.hotN, Pages: m.hotPages, Bytes: int64(m.hotPages) * int64(m.page)},
		Warm:     TierStats{Adapters: m.warmN, Pages: m.warmPages, Bytes: m.warmBytes},
		Acquires: m.c.acquires, HotHits: m.c.hotHits, WarmLoads: m.c.warmLoads, ColdLoads: m.c.coldLoads,
		LoadErrors: m.c.loadErrors, Prefetches: m.c.prefetches, NoRoom: m.c.noRoom,
		Releases: m.c.releases, RemoteReleases: m.c.remoteReleases, RejectedReleases: m.c.rejected,
		Promotions: m.c.promotions, Demotions: m.c.demotions, IdleDemotions: m.c.idleDemotions,
		Evictions: m.c.evictions, WarmStores: m.c.warmStores, WarmDrops: m.c.warmDrops,
		Compressions: m.c.compressions, QuantRefused: m.c.quantRefused, BytesMoved: m.c.bytesMoved,
	}
	s.Held, s.Quantized = m.held, m.quantN
	if c := m.cold; c != nil {
		s.ColdTier = TierStats{Adapters: len(c.byHash), Pages: c.blocks, Bytes: c.bytes}
		s.ColdStoring = c.storing
	}
	s.ColdTierLoads, s.ColdTierStores, s.ColdTierRejected = m.c.coldTierLoads, m.c.coldStores, m.c.coldRejected
	s.ColdTierSkipped, s.ColdTierErrors, s.ColdTierEvictions = m.c.coldSkipped, m.c.coldErrors, m.c.coldEvictions
	s.Lora = m.loraInfo()
	s.Cold = len(m.byID) - (m.hotN + m.warmN - m.both)
	return s
}

// Check verifies the Manager's invariants against a recount of its tables
// and against the pages pools: the tier counts, the budgets, the leases,
// that every held or pinned adapter is hot and pinned in the pool (so the
// pool can never evict it), and that the pool's runs of the adapter
// content are exactly the Manager's. It returns nil or the violations
// joined. Builds with -race or -tags locus_invariants run it after every
// call and report the first violation here.
func (m *Manager) Check() error {
	if !m.ok() {
		return errClosed
	}
	return errors.Join(m.invErr, m.check())
}

func (m *Manager) check() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("adapters: "+format, args...)) }
	var hotN, hotPages, warmN, warmPages, refs, pinned, inflight, live, held, quantN, both int
	var warmBytes int64
	for i := range m.ads {
		a := &m.ads[i]
		if !a.live() {
			if !a.run.IsZero() || !a.warm.IsZero() || a.refs != 0 || a.task != nil {
				bad("unregistered slot %d holds state", i)
			}
			continue
		}
		live++
		if idx, ok := m.byID[a.id]; !ok || idx != uint32(i) {
			bad("adapter %q not indexed", a.id)
		}
		if !a.run.IsZero() {
			hotN++
			hotPages += m.pagesOf(a.size)
			if idx, ok := m.byRun[a.run.First()]; !ok || idx != uint32(i) {
				bad("hot run of %q not indexed", a.id)
			}
			pins, err := m.hot.Pins(a.run)
			switch {
			case err != nil:
				bad("hot run of %q is not live: %v", a.id, err)
			case a.runPinned != a.wantPinned():
				bad("%q: run pinned %v, want %v", a.id, a.runPinned, a.wantPinned())
			case (pins > 0) != a.runPinned:
				bad("%q: the pool has %d pins on its run, the manager thinks pinned=%v", a.id, pins, a.runPinned)
			}
		} else if a.refs > 0 || a.pinUntil > 0 || a.task != nil {
			bad("%q is held, pinned or loading but has no hot run", a.id)
		}
		if a.task != nil {
			inflight++
		}
		if a.refs > 0 {
			held++
		}
		if a.warmQ {
			quantN++
		}
		if !a.run.IsZero() && !a.warm.IsZero() {
			both++
		}
		if !a.warm.IsZero() {
			warmN++
			warmPages += m.warmPagesOf(a.warmLen)
			warmBytes += int64(a.warmLen)
		}
		if a.warmBusy < 0 || (a.warmBusy > 0 && (a.task == nil || a.warm.IsZero())) {
			bad("%q: warm copy busy %d without a prefetch reading it", a.id, a.warmBusy)
		}
		if a.refs < 0 {
			bad("%q: %d references", a.id, a.refs)
		}
		refs += a.refs
		if a.pinUntil > 0 {
			pinned++
		}
	}
	if live != len(m.byID) || len(m.byRun) != hotN {
		bad("indexes: %d live, %d ids, %d hot, %d runs indexed", live, len(m.byID), hotN, len(m.byRun))
	}
	leases := len(m.leases) - len(m.freeL) // the live ones, by the free list
	if hotN != m.hotN || hotPages != m.hotPages || warmN != m.warmN || warmPages != m.warmPages ||
		warmBytes != m.warmBytes || refs != leases || pinned != m.pinned || inflight != m.inflight {
		bad("counts: hot %d/%d pages %d/%d warm %d/%d pages %d/%d bytes %d/%d refs %d/%d pinned %d/%d inflight %d/%d",
			hotN, m.hotN, hotPages, m.hotPages, warmN, m.warmN, warmPages, m.warmPages, warmBytes, m.warmBytes,
			refs, leases, pinned, m.pinned, inflight, m.inflight)
	}
	if held != m.held || quantN != m.quantN || both != m.both {
		bad("counts: held %d/%d quantized %d/%d hot and warm %d/%d", held, m.held, quantN, m.quantN, both, m.both)
	}
	m.checkIndexes(bad)
	m.checkCold(bad)
	if !m.loraDirty {
		if r, w := m.loraLists(); r != m.lora.Running || w != m.lora.Waiting {
			bad("lora info: running %q waiting %q, recounted %q %q", m.lora.Running, m.lora.Waiting, r, w)
		}
	}
	liveLeases := 0
	for i := range m.leases {
		l := &m.leases[i]
		if l.gen&1 == 1 {
			liveLeases++
			if int(l.adapter) >= len(m.ads) || !m.ads[l.adapter].hot() || m.ads[l.adapter].refs == 0 {
				bad("lease %d names adapter %d, which is not hot and held", i, l.adapter)
			}
		}
	}
	if liveLeases != leases {
		bad("leases: %d live, %d free, %d slots, %d references", liveLeases, len(m.freeL), len(m.leases), refs)
	}
	if m.cfg.hotSlots > 0 && hotN > m.cfg.hotSlots {
		bad("hot tier holds %d adapters, budget %d", hotN, m.cfg.hotSlots)
	}
	if m.cfg.hotBytes > 0 && int64(hotPages)*int64(m.page) > m.cfg.hotBytes {
		bad("hot tier holds %d bytes, budget %d", int64(hotPages)*int64(m.page), m.cfg.hotBytes)
	}
	if m.cfg.warmSlots > 0 && warmN > m.cfg.warmSlots {
		bad("warm tier holds %d adapters, budget %d", warmN, m.cfg.warmSlots)
	}
	if cs := m.hot.Stats().Content[m.content]; cs.Runs != hotN || cs.Pages != hotPages {
		bad("the pages pool holds %d runs of %d pages of adapter content, the manager %d of %d", cs.Runs, cs.Pages, hotN, hotPages)
	}
	if m.warm != nil {
		if ws := m.warm.Stats(); ws.Runs != warmN || ws.Used != warmPages {
			bad("the warm region holds %d runs of %d pages, the manager %d of %d", ws.Runs, ws.Used, warmN, warmPages)
		}
	}
	if m.c.invalid > 0 {
		bad("%d completions named no task in flight", m.c.invalid)
	}
	return errors.Join(errs...)
}
