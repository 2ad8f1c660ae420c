package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/locus-go/locus/internal/typednil"
	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/disk"
)

// TierSource is what NewTier reads: *tier.Manager is one (over tier/host,
// tier/disk, tier/redis or a Storage of your own).
type TierSource interface {
	Snapshot() tier.Stats
}

// RecoverySource is what WithRecovery reads: *disk.Tier is one. Its
// Recovery must be safe from any goroutine (disk.Tier's is fixed at Open).
type RecoverySource interface {
	Recovery() disk.Recovery
}

// TierOption configures NewTier.
type TierOption interface{ applyTier(*tierConfig) }

type tierOptionFunc func(*tierConfig)

func (f tierOptionFunc) applyTier(c *tierConfig) { f(c) }

type tierConfig struct {
	recovery RecoverySource
}

// WithRecovery adds what a disk tier found in its file at Open:
// locus_tier_discarded_slots_total{reason="corrupt"|"stale"}. Use it for a
// tier over tier/disk (pass the *disk.Tier given to tier.New), so that a
// crash that tore blocks shows on a dashboard; a tier.Manager alone does not
// know what its storage discarded. A nil r adds nothing.
func WithRecovery(r RecoverySource) TierOption {
	return tierOptionFunc(func(c *tierConfig) {
		if !typednil.Is(r) {
			c.recovery = r
		}
	})
}

// tierSample is what one scrape of a tier reads.
type tierSample struct {
	tier.Stats
	recovery    disk.Recovery
	hasRecovery bool
}

// tierSnapshot adapts a TierSource (and a RecoverySource) to the collector.
type tierSnapshot struct {
	t   TierSource
	rec RecoverySource
}

func (s tierSnapshot) Snapshot() tierSample {
	out := tierSample{Stats: s.t.Snapshot()}
	if s.rec != nil {
		out.recovery, out.hasRecovery = s.rec.Recovery(), true
	}
	return out
}

// NewTier returns a collector of one offload tier's accounting, labelled
// tier=name and, on every sample, medium (the tier's tier.Medium: "CPU",
// "DISK", ...). Every scrape reads t.Snapshot once (published by the tier's
// owner at each Drain and Stats; a kv.Manager WithTiers drains its tiers at
// its own Drain), so it never races the owner. Register one per tier, with
// distinct names ("host", "disk"). A nil t makes a collector whose
// registration fails.
//
// Use it beside NewManager: NewManager's view is the hot pool's, this one is
// the tier's own (what it holds, what it evicted, what its copies did).
//
// Its metrics:
//
//	locus_tier_config_info{block_size, capacity_blocks}  gauge, always 1: the tier's shape, for routers
//	                                                   (vLLM's cache_config_info); capacity is exact, never rounded
//	locus_tier_capacity_bytes                          gauge: capacity × block size
//	locus_tier_blocks{state="free"|"evictable"|"store_pending"|"load_pinned"}  gauge: the states
//	                                                   partition the slots, so they sum to capacity_blocks
//	locus_tier_lookups_total{result="hit"|"miss"|"pending"}  counter: keys looked up (pending: a store in flight)
//	locus_tier_stored_blocks_total                     counter: blocks stored (loadable)
//	locus_tier_stored_bytes_total                      counter: stored blocks × block size
//	locus_tier_store_failures_total                    counter: store jobs that failed
//	locus_tier_store_skipped_blocks_total{reason="present"|"not_admitted"}  counter: keys a store did not store
//	locus_tier_store_refusals_total                    counter: store calls refused for lack of evictable room
//	locus_tier_evicted_blocks_total                    counter
//	locus_tier_loaded_blocks_total                     counter: blocks loaded
//	locus_tier_loaded_bytes_total                      counter: loaded blocks × block size
//	locus_tier_load_failures_total                     counter: load jobs that failed (a corrupt block, dropped)
//	locus_tier_jobs_in_flight                          gauge: loads and stores prepared and not completed
//	locus_tier_rejected_completions_total{reason="stale"|"invalid"}  counter: completions refused
//	                                                   (a job issued before Reset; a forged, foreign or repeated job)
//	locus_tier_copy_conflicts_total                    counter: copies that found their slot busy; always 0
//	                                                   unless the tier's invariant is broken: alert on it
//	locus_tier_recovered_blocks_total                  counter: blocks served again from an earlier run
//	locus_tier_discarded_slots_total{reason="corrupt"|"stale"}  counter, WithRecovery only: slots the
//	                                                   disk tier found torn, corrupt or duplicated, or
//	                                                   written before a Reset, at Open
//
// The byte counts are derived: every block of a tier is BlockSize bytes and
// the tier counts blocks, so bytes = blocks × block size, exactly, for the
// copies that succeeded (a failed copy moves an unknown part of its bytes
// and is not counted).
func NewTier(name string, t TierSource, opts ...TierOption) prometheus.Collector {
	if typednil.Is(t) {
		return newCollector[tierSample]("tier", "tier", name, nil, tierFamilies)
	}
	var cfg tierConfig
	for _, o := range opts {
		if !typednil.Is(o) {
			o.applyTier(&cfg)
		}
	}
	return newCollector[tierSample]("tier", "tier", name, tierSnapshot{t: t, rec: cfg.recovery}, tierFamilies)
}

// perMedium calls yield once, with the snapshot and its medium.
func perMedium(s tierSample, yield func(string, tierSample)) { yield(string(s.Medium), s) }

var tierFamilies = each("medium", []family[tierSample]{
	{"config_info", "The tier's shape, always 1: block size in bytes and capacity in blocks.", []string{"block_size", "capacity_blocks"},
		func(w *writer, s tierSample) {
			w.gauge(1, strconv.Itoa(s.BlockSize), strconv.Itoa(s.Capacity))
		}},
	{"capacity_bytes", "Capacity of the tier: its slots times the block size.", nil,
		func(w *writer, s tierSample) { w.gauge(float64(s.Bytes)) }},
	{"blocks", "Slots of the tier by state: free, evictable (a loadable block), store_pending (being written) or load_pinned (being read).", []string{"state"},
		func(w *writer, s tierSample) {
			w.gauge(float64(s.Free), "free")
			w.gauge(float64(s.Evictable), "evictable")
			w.gauge(float64(s.StorePending), "store_pending")
			w.gauge(float64(s.LoadPinned), "load_pinned")
		}},
	{"lookups_total", "Keys looked up, by result: hit (loadable), miss, or pending (a store in flight).", []string{"result"},
		func(w *writer, s tierSample) {
			w.counter(s.Hits, "hit")
			w.counter(s.Misses, "miss")
			w.counter(s.Pending, "pending")
		}},
	{"stored_blocks_total", "Blocks stored and made loadable.", nil,
		func(w *writer, s tierSample) { w.counter(s.Stores) }},
	{"stored_bytes_total", "Bytes stored: stored blocks times the block size.", nil,
		func(w *writer, s tierSample) { w.counter(s.Stores * uint64(max(s.BlockSize, 0))) }},
	{"store_failures_total", "Store jobs that failed: nothing of them was stored.", nil,
		func(w *writer, s tierSample) { w.counter(s.StoreFailures) }},
	{"store_skipped_blocks_total", "Keys a store did not store: already present or pending, or turned away by admission.", []string{"reason"},
		func(w *writer, s tierSample) {
			w.counter(s.Skipped, "present")
			w.counter(s.NotAdmitted, "not_admitted")
		}},
	{"store_refusals_total", "Store calls refused because not enough blocks were evictable.", nil,
		func(w *writer, s tierSample) { w.counter(s.Refused) }},
	{"evicted_blocks_total", "Blocks evicted to make room for stores.", nil,
		func(w *writer, s tierSample) { w.counter(s.Evictions) }},
	{"loaded_blocks_total", "Blocks loaded out of the tier.", nil,
		func(w *writer, s tierSample) { w.counter(s.Loads) }},
	{"loaded_bytes_total", "Bytes loaded: loaded blocks times the block size.", nil,
		func(w *writer, s tierSample) { w.counter(s.Loads * uint64(max(s.BlockSize, 0))) }},
	{"load_failures_total", "Load jobs that failed; a corrupt block is dropped from the tier.", nil,
		func(w *writer, s tierSample) { w.counter(s.LoadFailures) }},
	{"jobs_in_flight", "Load and store jobs prepared and not completed.", nil,
		func(w *writer, s tierSample) { w.gauge(float64(s.JobsInFlight)) }},
	{"rejected_completions_total", "Completions refused: stale (a job issued before a reset) or invalid (forged, foreign or repeated).", []string{"reason"},
		func(w *writer, s tierSample) {
			w.counter(s.StaleCompletions, "stale")
			w.counter(s.InvalidCompletions, "invalid")
		}},
	{"copy_conflicts_total", "Copies that found their slot busy: always 0 unless the tier's invariant is broken.", nil,
		func(w *writer, s tierSample) { w.counter(s.CopyConflicts) }},
	{"recovered_blocks_total", "Blocks served again from an earlier run of the tier's storage.", nil,
		func(w *writer, s tierSample) { w.counter(s.Recovered) }},
	{"discarded_slots_total", "Slots the storage found at open and discarded: corrupt (torn, corrupt or duplicated) or stale (written before a reset).", []string{"reason"},
		func(w *writer, s tierSample) {
			if s.hasRecovery {
				w.counter(uint64(max(s.recovery.Discarded, 0)), "corrupt")
				w.counter(uint64(max(s.recovery.Stale, 0)), "stale")
			}
		}},
}, perMedium)
