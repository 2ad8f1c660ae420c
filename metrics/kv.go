package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/locus-go/locus/kv"
)

// ManagerSource is what NewManager reads: *kv.Manager is one.
type ManagerSource interface {
	Snapshot() kv.Stats
}

// NewManager returns a collector of a kv manager's accounting, labelled
// manager=name. Every scrape reads m.Snapshot once (published by the
// manager at each Drain and Stats), so it never races the owner. A nil m
// makes a collector whose registration fails.
//
// Its metrics:
//
//	locus_kv_blocks{state="free"|"cached"|"in_use"|"pinned"}  gauge: the states partition the pool:
//	                                                   in_use counts blocks held by sequences and not
//	                                                   pinned, pinned the pinned ones (kv.Stats.InUse
//	                                                   counts both), so the four sum to the capacity
//	locus_kv_tokens_per_block                          gauge
//	locus_kv_sequences                                 gauge: live sequences
//	locus_kv_prefix_query_tokens_total                 counter: prompt tokens admissions looked up
//	locus_kv_prefix_hit_tokens_total                   counter: of those, found cached
//	locus_kv_prefix_query_blocks_total                 counter: full prompt blocks looked up
//	locus_kv_prefix_hit_blocks_total                   counter: of those, found cached
//	locus_kv_stored_blocks_total                       counter: blocks added to the prefix cache
//	locus_kv_evicted_blocks_total{reason="allocation"|"watermark"}  counter
//	locus_kv_cleared_blocks_total                      counter: cached blocks dropped by Reset
//	locus_kv_copy_on_write_blocks_total                counter: shared partial blocks copied before an append
//	locus_kv_exhausted_total                           counter: admissions and appends refused for lack of blocks
//	locus_kv_forks_total                               counter
//	locus_kv_releases_total{via="owner"|"releaser"}    counter: sequences released
//	locus_kv_rejected_releases_total                   counter: zero, foreign, stale or double releases
//	locus_kv_subscriber_panics_total                   counter: cache events lost to a panicking subscriber
func NewManager(name string, m ManagerSource) prometheus.Collector {
	return newCollector[kv.Stats]("kv", "manager", name, m, managerFamilies)
}

var managerFamilies = []family[kv.Stats]{
	{"blocks", "Blocks of the manager's pool by state: free, cached (evictable), in_use (held by sequences, not pinned) or pinned.", []string{"state"},
		func(w *writer, s kv.Stats) {
			w.gauge(float64(s.Free), "free")
			w.gauge(float64(s.Cached), "cached")
			w.gauge(float64(s.InUse-s.Pinned), "in_use")
			w.gauge(float64(s.Pinned), "pinned")
		}},
	{"tokens_per_block", "Tokens a block holds.", nil,
		func(w *writer, s kv.Stats) { w.gauge(float64(s.TokensPerBlock)) }},
	{"sequences", "Live sequences.", nil,
		func(w *writer, s kv.Stats) { w.gauge(float64(s.Sequences)) }},
	{"prefix_query_tokens_total", "Prompt tokens admissions looked up in the prefix cache.", nil,
		func(w *writer, s kv.Stats) { w.counter(s.QueryTokens) }},
	{"prefix_hit_tokens_total", "Prompt tokens admissions found in the prefix cache.", nil,
		func(w *writer, s kv.Stats) { w.counter(s.HitTokens) }},
	{"prefix_query_blocks_total", "Full prompt blocks admissions looked up in the prefix cache.", nil,
		func(w *writer, s kv.Stats) { w.counter(s.QueryBlocks) }},
	{"prefix_hit_blocks_total", "Full prompt blocks admissions found in the prefix cache.", nil,
		func(w *writer, s kv.Stats) { w.counter(s.HitBlocks) }},
	{"stored_blocks_total", "Blocks added to the prefix cache.", nil,
		func(w *writer, s kv.Stats) { w.counter(s.Stored) }},
	{"evicted_blocks_total", "Cached blocks evicted: for an allocation, or down to the low watermark.", []string{"reason"},
		func(w *writer, s kv.Stats) {
			w.counter(s.Evictions-s.WatermarkEvictions, "allocation")
			w.counter(s.WatermarkEvictions, "watermark")
		}},
	{"cleared_blocks_total", "Cached blocks dropped by Reset.", nil,
		func(w *writer, s kv.Stats) { w.counter(s.Cleared) }},
	{"copy_on_write_blocks_total", "Shared partial blocks copied before an append.", nil,
		func(w *writer, s kv.Stats) { w.counter(s.CopyOnWrite) }},
	{"exhausted_total", "Admissions and appends refused for lack of blocks.", nil,
		func(w *writer, s kv.Stats) { w.counter(s.Exhausted) }},
	{"forks_total", "Sequences forked.", nil,
		func(w *writer, s kv.Stats) { w.counter(s.Forks) }},
	{"releases_total", "Sequences released, by the owner or through a releaser.", []string{"via"},
		func(w *writer, s kv.Stats) {
			w.counter(s.Releases-s.RemoteReleases, "owner")
			w.counter(s.RemoteReleases, "releaser")
		}},
	{"rejected_releases_total", "Releases refused: zero, foreign, stale or double.", nil,
		func(w *writer, s kv.Stats) { w.counter(s.RejectedReleases) }},
	{"subscriber_panics_total", "Cache events lost because the event subscriber panicked.", nil,
		func(w *writer, s kv.Stats) { w.counter(s.SubscriberPanics) }},
}
