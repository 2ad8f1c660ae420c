package metrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/locus-go/locus/metrics"
	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/disk"
	"github.com/locus-go/locus/tier/host"
)

// A scripted sequence of tier operations, and the exact exposition it
// leaves.
func TestTier(t *testing.T) {
	st, err := host.New(64, 8, host.WithHeap())
	require.NoError(t, err)
	m, err := tier.New(st)
	require.NoError(t, err)
	defer m.Close()
	k := func(s string) tier.Key { return tier.KeyOf([]byte(s), 0) }
	a, b, c := k("a"), k("b"), k("c")

	m.Lookup([]tier.Key{a, b, c}, nil) // 3 misses
	plan, err := m.PrepareStore([]tier.Key{a, b})
	require.NoError(t, err)
	require.NoError(t, m.CompleteStore(plan.Job, true)) // 2 stored
	m.Lookup([]tier.Key{a, c}, nil)                     // a hit, a miss
	plan, err = m.PrepareStore([]tier.Key{a, c})        // a skipped
	require.NoError(t, err)
	m.Lookup([]tier.Key{c}, nil)                         // pending
	require.NoError(t, m.CompleteStore(plan.Job, false)) // a store failure
	require.ErrorIs(t, m.CompleteStore(plan.Job, true), tier.ErrInvalidJob)
	load, err := m.PrepareLoad([]tier.Key{a})
	require.NoError(t, err)
	require.NoError(t, m.CompleteLoad(load.Job)) // 1 loaded
	_, err = m.PrepareLoad([]tier.Key{b})        // b stays pinned, a job in flight
	require.NoError(t, err)

	m.Stats() // the owner publishes; a scraper on another goroutine is served at the next Drain
	want := `
# HELP locus_tier_blocks Slots of the tier by state: free, evictable (a loadable block), store_pending (being written) or load_pinned (being read).
# TYPE locus_tier_blocks gauge
locus_tier_blocks{medium="CPU",state="evictable",tier="host"} 1
locus_tier_blocks{medium="CPU",state="free",tier="host"} 6
locus_tier_blocks{medium="CPU",state="load_pinned",tier="host"} 1
locus_tier_blocks{medium="CPU",state="store_pending",tier="host"} 0
# HELP locus_tier_capacity_bytes Capacity of the tier: its slots times the block size.
# TYPE locus_tier_capacity_bytes gauge
locus_tier_capacity_bytes{medium="CPU",tier="host"} 512
# HELP locus_tier_config_info The tier's shape, always 1: block size in bytes and capacity in blocks.
# TYPE locus_tier_config_info gauge
locus_tier_config_info{block_size="64",capacity_blocks="8",medium="CPU",tier="host"} 1
# HELP locus_tier_copy_conflicts_total Copies that found their slot busy: always 0 unless the tier's invariant is broken.
# TYPE locus_tier_copy_conflicts_total counter
locus_tier_copy_conflicts_total{medium="CPU",tier="host"} 0
# HELP locus_tier_evicted_blocks_total Blocks evicted to make room for stores.
# TYPE locus_tier_evicted_blocks_total counter
locus_tier_evicted_blocks_total{medium="CPU",tier="host"} 0
# HELP locus_tier_jobs_in_flight Load and store jobs prepared and not completed.
# TYPE locus_tier_jobs_in_flight gauge
locus_tier_jobs_in_flight{medium="CPU",tier="host"} 1
# HELP locus_tier_load_failures_total Load jobs that failed; a corrupt block is dropped from the tier.
# TYPE locus_tier_load_failures_total counter
locus_tier_load_failures_total{medium="CPU",tier="host"} 0
# HELP locus_tier_loaded_blocks_total Blocks loaded out of the tier.
# TYPE locus_tier_loaded_blocks_total counter
locus_tier_loaded_blocks_total{medium="CPU",tier="host"} 1
# HELP locus_tier_loaded_bytes_total Bytes loaded: loaded blocks times the block size.
# TYPE locus_tier_loaded_bytes_total counter
locus_tier_loaded_bytes_total{medium="CPU",tier="host"} 64
# HELP locus_tier_lookups_total Keys looked up, by result: hit (loadable), miss, or pending (a store in flight).
# TYPE locus_tier_lookups_total counter
locus_tier_lookups_total{medium="CPU",result="hit",tier="host"} 1
locus_tier_lookups_total{medium="CPU",result="miss",tier="host"} 4
locus_tier_lookups_total{medium="CPU",result="pending",tier="host"} 1
# HELP locus_tier_recovered_blocks_total Blocks served again from an earlier run of the tier's storage.
# TYPE locus_tier_recovered_blocks_total counter
locus_tier_recovered_blocks_total{medium="CPU",tier="host"} 0
# HELP locus_tier_rejected_completions_total Completions refused: stale (a job issued before a reset) or invalid (forged, foreign or repeated).
# TYPE locus_tier_rejected_completions_total counter
locus_tier_rejected_completions_total{medium="CPU",reason="invalid",tier="host"} 1
locus_tier_rejected_completions_total{medium="CPU",reason="stale",tier="host"} 0
# HELP locus_tier_store_failures_total Store jobs that failed: nothing of them was stored.
# TYPE locus_tier_store_failures_total counter
locus_tier_store_failures_total{medium="CPU",tier="host"} 1
# HELP locus_tier_store_refusals_total Store calls refused because not enough blocks were evictable.
# TYPE locus_tier_store_refusals_total counter
locus_tier_store_refusals_total{medium="CPU",tier="host"} 0
# HELP locus_tier_store_skipped_blocks_total Keys a store did not store: already present or pending, or turned away by admission.
# TYPE locus_tier_store_skipped_blocks_total counter
locus_tier_store_skipped_blocks_total{medium="CPU",reason="not_admitted",tier="host"} 0
locus_tier_store_skipped_blocks_total{medium="CPU",reason="present",tier="host"} 1
# HELP locus_tier_stored_blocks_total Blocks stored and made loadable.
# TYPE locus_tier_stored_blocks_total counter
locus_tier_stored_blocks_total{medium="CPU",tier="host"} 2
# HELP locus_tier_stored_bytes_total Bytes stored: stored blocks times the block size.
# TYPE locus_tier_stored_bytes_total counter
locus_tier_stored_bytes_total{medium="CPU",tier="host"} 128
`
	require.NoError(t, testutil.CollectAndCompare(metrics.NewTier("host", m), strings.NewReader(want)))
	lint(t, metrics.NewTier("host", m))
}

// fakeTier is a tier whose counts the test sets.
type fakeTier tier.Stats

func (f *fakeTier) Snapshot() tier.Stats { return tier.Stats(*f) }

// fakeRecovery is a disk tier's recovery counts.
type fakeRecovery disk.Recovery

func (f fakeRecovery) Recovery() disk.Recovery { return disk.Recovery(f) }

// Every count of a tier, in its metric; the recovery of a disk tier.
func TestTierCounts(t *testing.T) {
	src := &fakeTier{Medium: tier.MediumDisk, Capacity: 100, BlockSize: 4096, Bytes: 409600,
		Free: 10, Evictable: 60, StorePending: 20, LoadPinned: 10,
		Lookups: 16, Hits: 7, Misses: 6, Pending: 3,
		Stores: 11, StoreFailures: 2, Skipped: 5, NotAdmitted: 4, Refused: 1, Evictions: 9,
		Loads: 8, LoadFailures: 1, StaleCompletions: 2, InvalidCompletions: 3, JobsInFlight: 4,
		Recovered: 12, CopyConflicts: 0}
	c := metrics.NewTier("disk", src, metrics.WithRecovery(fakeRecovery{Recovered: 12, Discarded: 3, Stale: 2, Empty: 83}), nil)
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(`
# HELP locus_tier_blocks Slots of the tier by state: free, evictable (a loadable block), store_pending (being written) or load_pinned (being read).
# TYPE locus_tier_blocks gauge
locus_tier_blocks{medium="DISK",state="evictable",tier="disk"} 60
locus_tier_blocks{medium="DISK",state="free",tier="disk"} 10
locus_tier_blocks{medium="DISK",state="load_pinned",tier="disk"} 10
locus_tier_blocks{medium="DISK",state="store_pending",tier="disk"} 20
# HELP locus_tier_config_info The tier's shape, always 1: block size in bytes and capacity in blocks.
# TYPE locus_tier_config_info gauge
locus_tier_config_info{block_size="4096",capacity_blocks="100",medium="DISK",tier="disk"} 1
# HELP locus_tier_discarded_slots_total Slots the storage found at open and discarded: corrupt (torn, corrupt or duplicated) or stale (written before a reset).
# TYPE locus_tier_discarded_slots_total counter
locus_tier_discarded_slots_total{medium="DISK",reason="corrupt",tier="disk"} 3
locus_tier_discarded_slots_total{medium="DISK",reason="stale",tier="disk"} 2
# HELP locus_tier_evicted_blocks_total Blocks evicted to make room for stores.
# TYPE locus_tier_evicted_blocks_total counter
locus_tier_evicted_blocks_total{medium="DISK",tier="disk"} 9
# HELP locus_tier_jobs_in_flight Load and store jobs prepared and not completed.
# TYPE locus_tier_jobs_in_flight gauge
locus_tier_jobs_in_flight{medium="DISK",tier="disk"} 4
# HELP locus_tier_load_failures_total Load jobs that failed; a corrupt block is dropped from the tier.
# TYPE locus_tier_load_failures_total counter
locus_tier_load_failures_total{medium="DISK",tier="disk"} 1
# HELP locus_tier_loaded_blocks_total Blocks loaded out of the tier.
# TYPE locus_tier_loaded_blocks_total counter
locus_tier_loaded_blocks_total{medium="DISK",tier="disk"} 8
# HELP locus_tier_loaded_bytes_total Bytes loaded: loaded blocks times the block size.
# TYPE locus_tier_loaded_bytes_total counter
locus_tier_loaded_bytes_total{medium="DISK",tier="disk"} 32768
# HELP locus_tier_lookups_total Keys looked up, by result: hit (loadable), miss, or pending (a store in flight).
# TYPE locus_tier_lookups_total counter
locus_tier_lookups_total{medium="DISK",result="hit",tier="disk"} 7
locus_tier_lookups_total{medium="DISK",result="miss",tier="disk"} 6
locus_tier_lookups_total{medium="DISK",result="pending",tier="disk"} 3
# HELP locus_tier_rejected_completions_total Completions refused: stale (a job issued before a reset) or invalid (forged, foreign or repeated).
# TYPE locus_tier_rejected_completions_total counter
locus_tier_rejected_completions_total{medium="DISK",reason="invalid",tier="disk"} 3
locus_tier_rejected_completions_total{medium="DISK",reason="stale",tier="disk"} 2
# HELP locus_tier_recovered_blocks_total Blocks served again from an earlier run of the tier's storage.
# TYPE locus_tier_recovered_blocks_total counter
locus_tier_recovered_blocks_total{medium="DISK",tier="disk"} 12
# HELP locus_tier_store_failures_total Store jobs that failed: nothing of them was stored.
# TYPE locus_tier_store_failures_total counter
locus_tier_store_failures_total{medium="DISK",tier="disk"} 2
# HELP locus_tier_store_refusals_total Store calls refused because not enough blocks were evictable.
# TYPE locus_tier_store_refusals_total counter
locus_tier_store_refusals_total{medium="DISK",tier="disk"} 1
# HELP locus_tier_store_skipped_blocks_total Keys a store did not store: already present or pending, or turned away by admission.
# TYPE locus_tier_store_skipped_blocks_total counter
locus_tier_store_skipped_blocks_total{medium="DISK",reason="not_admitted",tier="disk"} 4
locus_tier_store_skipped_blocks_total{medium="DISK",reason="present",tier="disk"} 5
# HELP locus_tier_stored_blocks_total Blocks stored and made loadable.
# TYPE locus_tier_stored_blocks_total counter
locus_tier_stored_blocks_total{medium="DISK",tier="disk"} 11
# HELP locus_tier_stored_bytes_total Bytes stored: stored blocks times the block size.
# TYPE locus_tier_stored_bytes_total counter
locus_tier_stored_bytes_total{medium="DISK",tier="disk"} 45056
`), "locus_tier_blocks", "locus_tier_config_info", "locus_tier_discarded_slots_total",
		"locus_tier_evicted_blocks_total", "locus_tier_jobs_in_flight", "locus_tier_load_failures_total",
		"locus_tier_loaded_blocks_total", "locus_tier_loaded_bytes_total", "locus_tier_lookups_total",
		"locus_tier_rejected_completions_total", "locus_tier_recovered_blocks_total",
		"locus_tier_store_failures_total", "locus_tier_store_refusals_total",
		"locus_tier_store_skipped_blocks_total", "locus_tier_stored_blocks_total", "locus_tier_stored_bytes_total"))
	lint(t, c)
	require.Equal(t, 26, testutil.CollectAndCount(c)) // the 24 above, capacity_bytes and copy_conflicts_total

	// Without WithRecovery (or with a nil one) there are no discarded slots.
	var nilDisk *disk.Tier
	require.Equal(t, 0, testutil.CollectAndCount(metrics.NewTier("disk", src, metrics.WithRecovery(nilDisk)), "locus_tier_discarded_slots_total"))
}

// A nil source fails registration with an error, never a panic; two tiers
// need two names; a closed tier is collected from its final counts.
func TestTierRegistration(t *testing.T) {
	var nilManager *tier.Manager
	for _, src := range []metrics.TierSource{nil, nilManager} {
		err := prometheus.NewRegistry().Register(metrics.NewTier("t", src))
		require.ErrorContains(t, err, "nil source")
	}
	reg := prometheus.NewRegistry()
	st, err := host.New(64, 4, host.WithHeap())
	require.NoError(t, err)
	m, err := tier.New(st)
	require.NoError(t, err)
	require.NoError(t, reg.Register(metrics.NewTier("host", m)))
	require.Error(t, reg.Register(metrics.NewTier("host", m)), "two tiers of one name")
	require.NoError(t, m.Close())
	require.NoError(t, testutil.CollectAndCompare(metrics.NewTier("host", m), strings.NewReader(`
# HELP locus_tier_blocks Slots of the tier by state: free, evictable (a loadable block), store_pending (being written) or load_pinned (being read).
# TYPE locus_tier_blocks gauge
locus_tier_blocks{medium="CPU",state="evictable",tier="host"} 0
locus_tier_blocks{medium="CPU",state="free",tier="host"} 4
locus_tier_blocks{medium="CPU",state="load_pinned",tier="host"} 0
locus_tier_blocks{medium="CPU",state="store_pending",tier="host"} 0
`), "locus_tier_blocks"))
}
