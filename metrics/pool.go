package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/locus-go/locus/pool"
)

// PoolSource is what NewPool reads: every *pool.Pool[B, T, P] is one.
type PoolSource interface {
	Snapshot() pool.Stats
}

// NewPool returns a collector of a pool's accounting, labelled
// pool=name; register it with a prometheus.Registerer. Every scrape reads
// p.Snapshot once, so it never races the owner and the pool does nothing
// for it between scrapes. A nil p makes a collector whose registration
// fails.
//
// Its metrics (counters end in _total):
//
//	locus_pool_blocks{state="free"|"in_use"}        gauge: free and allocated blocks; they sum to the capacity
//	locus_pool_block_size_bytes                     gauge
//	locus_pool_high_water_blocks                    gauge: the most blocks ever allocated at once
//	locus_pool_allocated_blocks_total               counter
//	locus_pool_freed_blocks_total                   counter: locally and by drains
//	locus_pool_remote_submitted_handles_total       counter: handles accepted by senders
//	locus_pool_remote_drained_handles_total         counter: handles taken out of the transport
//	locus_pool_rejected_handles_total               counter: stale, double-freed, foreign, zero or out of range
//	locus_pool_drain_size_handles                   histogram: handles per drain
//
// The drain histogram is built at scrape time from Stats.DrainSizes, whose
// power-of-two buckets give its upper bounds 0, 1, 3, 7, ... 2^22-1 (see
// pool.DrainBucketBound); its count is Stats.Drains, and its sum is
// Stats.RemoteDrained: the handles every drain took out of the transport,
// rejected ones included, which equals the sum of the drains' sizes.
func NewPool(name string, p PoolSource) prometheus.Collector {
	return newCollector[pool.Stats]("pool", "pool", name, p, poolFamilies)
}

// drainBounds are the upper bounds of the drain histogram's buckets: every
// bucket of pool.Stats.DrainSizes but the last, which has none.
var drainBounds = func() []float64 {
	b := make([]float64, pool.DrainBuckets-1)
	for k := range b {
		b[k] = float64(pool.DrainBucketBound(k))
	}
	return b
}()

var poolFamilies = []family[pool.Stats]{
	{"blocks", "Blocks of the pool by state: free, or in_use (allocated and not yet freed back).", []string{"state"},
		func(w *writer, s pool.Stats) {
			w.gauge(float64(s.Free), "free")
			w.gauge(float64(s.Live), "in_use")
		}},
	{"block_size_bytes", "Size of every block of the pool.", nil,
		func(w *writer, s pool.Stats) { w.gauge(float64(s.BlockSize)) }},
	{"high_water_blocks", "Most blocks ever allocated at once.", nil,
		func(w *writer, s pool.Stats) { w.gauge(float64(s.HighWater)) }},
	{"allocated_blocks_total", "Blocks handed out.", nil,
		func(w *writer, s pool.Stats) { w.counter(s.Allocs) }},
	{"freed_blocks_total", "Blocks returned to the free list, locally or by drains.", nil,
		func(w *writer, s pool.Stats) { w.counter(s.Frees) }},
	{"remote_submitted_handles_total", "Handles accepted by senders for a remote free.", nil,
		func(w *writer, s pool.Stats) { w.counter(s.RemoteSubmitted) }},
	{"remote_drained_handles_total", "Handles the owner's drains took out of the transport.", nil,
		func(w *writer, s pool.Stats) { w.counter(s.RemoteDrained) }},
	{"rejected_handles_total", "Handles refused: stale, double-freed, foreign, zero or out of range.", nil,
		func(w *writer, s pool.Stats) { w.counter(s.Rejected) }},
	{"drain_size_handles", "Handles taken out of the transport per drain.", nil,
		func(w *writer, s pool.Stats) {
			w.histogram(drainBounds, s.DrainSizes[:], s.Drains, float64(s.RemoteDrained))
		}},
}
