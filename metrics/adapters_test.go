package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/locus-go/locus/adapters"
	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/metrics"
	"github.com/locus-go/locus/pages"
	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/host"
)

// A scripted sequence of adapter loads, and the exact exposition it
// leaves: a hot tier of one slot, an int8 warm tier, two adapters of two
// pages that alternate, the second load of the first from warm.
func TestAdapters(t *testing.T) {
	b, err := heap.New(16*4096, 1)
	require.NoError(t, err)
	hot, err := pages.New(b, 4096, pages.WithContentTypes(
		pages.ContentType{Name: "kv"}, pages.ContentType{Name: "adapter", Priority: 1}))
	require.NoError(t, err)
	defer hot.Close()
	m, err := adapters.New(hot, 1, adapters.WithHotBudget(1, 0), adapters.WithWarm(1<<20, 0, 4096),
		adapters.WithQuantization(adapters.Quant{Format: adapters.FP16, Group: 64}, 0))
	require.NoError(t, err)
	for _, id := range []string{"a", "b", "c"} {
		l, err := adapters.Func(8192, func(dst []byte) (int, error) { clear(dst); return len(dst), nil })
		require.NoError(t, err)
		require.NoError(t, m.Register(id, l))
	}
	var h adapters.Handle
	for _, id := range []string{"a", "b", "a", "a"} {
		if !h.IsZero() {
			require.NoError(t, m.Release(h))
		}
		h, err = m.Acquire(id)
		require.NoError(t, err)
	}
	_, err = m.Drain(nil)
	require.NoError(t, err)
	m.Stats() // publishes
	const want = `
# HELP locus_adapters_bytes_moved_total Bytes copied into the hot, warm and cold tiers.
# TYPE locus_adapters_bytes_moved_total counter
locus_adapters_bytes_moved_total{manager="m"} 29440
# HELP locus_adapters_cold_tier_errors_total Copies into or out of the cold tier that failed; a failed load reads the Loader.
# TYPE locus_adapters_cold_tier_errors_total counter
locus_adapters_cold_tier_errors_total{manager="m"} 0
# HELP locus_adapters_cold_tier_evictions_total Cold copies lost to the cold tier's eviction.
# TYPE locus_adapters_cold_tier_evictions_total counter
locus_adapters_cold_tier_evictions_total{manager="m"} 0
# HELP locus_adapters_cold_tier_rejected_total Adapters that went cold unstored by the cold tier's admission: too few Loader loads, too large.
# TYPE locus_adapters_cold_tier_rejected_total counter
locus_adapters_cold_tier_rejected_total{manager="m"} 0
# HELP locus_adapters_cold_tier_skipped_total Stores and loads the cold tier could not take: stores in flight at their limit, no room, busy.
# TYPE locus_adapters_cold_tier_skipped_total counter
locus_adapters_cold_tier_skipped_total{manager="m"} 0
# HELP locus_adapters_cold_tier_stores_total Adapter copies stored in the cold tier.
# TYPE locus_adapters_cold_tier_stores_total counter
locus_adapters_cold_tier_stores_total{manager="m"} 0
# HELP locus_adapters_cold_tier_storing Stores into the cold tier in flight.
# TYPE locus_adapters_cold_tier_storing gauge
locus_adapters_cold_tier_storing{manager="m"} 0
# HELP locus_adapters_compressions_total Warm copies stored or converted as int8.
# TYPE locus_adapters_compressions_total counter
locus_adapters_compressions_total{manager="m"} 2
# HELP locus_adapters_demotions_total Hot adapters demoted by the manager: budgets, room, idleness.
# TYPE locus_adapters_demotions_total counter
locus_adapters_demotions_total{manager="m"} 2
# HELP locus_adapters_evictions_total Hot adapters evicted by the pages pool.
# TYPE locus_adapters_evictions_total counter
locus_adapters_evictions_total{manager="m"} 0
# HELP locus_adapters_held Adapters with live handles.
# TYPE locus_adapters_held gauge
locus_adapters_held{manager="m"} 1
# HELP locus_adapters_hot_hits_total Acquires that found the adapter hot.
# TYPE locus_adapters_hot_hits_total counter
locus_adapters_hot_hits_total{manager="m"} 1
# HELP locus_adapters_load_errors_total Loads that failed.
# TYPE locus_adapters_load_errors_total counter
locus_adapters_load_errors_total{manager="m"} 0
# HELP locus_adapters_loading Prefetches in flight.
# TYPE locus_adapters_loading gauge
locus_adapters_loading{manager="m"} 0
# HELP locus_adapters_loads_total Loads into the hot tier by source: the warm tier, the cold tier (cold_tier) or the adapter's Loader (cold).
# TYPE locus_adapters_loads_total counter
locus_adapters_loads_total{from="cold",manager="m"} 2
locus_adapters_loads_total{from="cold_tier",manager="m"} 0
locus_adapters_loads_total{from="warm",manager="m"} 1
# HELP locus_adapters_promotions_total Adapters made hot.
# TYPE locus_adapters_promotions_total counter
locus_adapters_promotions_total{manager="m"} 3
# HELP locus_adapters_quantized Warm copies stored as int8.
# TYPE locus_adapters_quantized gauge
locus_adapters_quantized{manager="m"} 2
# HELP locus_adapters_registered Adapters registered.
# TYPE locus_adapters_registered gauge
locus_adapters_registered{manager="m"} 3
# HELP locus_adapters_tier_adapters Adapters by residency tier: hot (loading included), warm (copies, a hot adapter may keep one), cold (no hot or warm copy), or with a copy in the cold tier (cold_tier).
# TYPE locus_adapters_tier_adapters gauge
locus_adapters_tier_adapters{manager="m",tier="cold"} 1
locus_adapters_tier_adapters{manager="m",tier="cold_tier"} 0
locus_adapters_tier_adapters{manager="m",tier="hot"} 1
locus_adapters_tier_adapters{manager="m",tier="warm"} 2
# HELP locus_adapters_tier_bytes Bytes held by a tier: the page-rounded runs (hot) or the stored copies (warm, cold_tier).
# TYPE locus_adapters_tier_bytes gauge
locus_adapters_tier_bytes{manager="m",tier="cold_tier"} 0
locus_adapters_tier_bytes{manager="m",tier="hot"} 8192
locus_adapters_tier_bytes{manager="m",tier="warm"} 8704
`
	require.NoError(t, testutil.CollectAndCompare(metrics.NewAdapters("m", m), strings.NewReader(want)))
	lint(t, metrics.NewAdapters("m", m))
	require.NoError(t, m.Release(h))
	require.NoError(t, m.Close())
	// After Close: the counts as they stood at Close, at once.
	require.Equal(t, 3, m.Snapshot().Registered)
	require.Equal(t, 0, m.Snapshot().Held)

	var nilManager *adapters.Manager
	for _, c := range []prometheus.Collector{metrics.NewAdapters("m", nil), metrics.NewAdapters("m", nilManager)} {
		require.Error(t, prometheus.NewRegistry().Register(c))
	}
}

// The cold tier's series: a host-memory tier under a hot tier of one
// slot, two adapters that alternate, the first loaded back from the tier.
func TestAdaptersColdTier(t *testing.T) {
	b, err := heap.New(16*4096, 1)
	require.NoError(t, err)
	hot, err := pages.New(b, 4096, pages.WithContentTypes(pages.ContentType{Name: "adapter"}))
	require.NoError(t, err)
	defer hot.Close()
	st, err := host.New(4096, 8, host.WithHeap())
	require.NoError(t, err)
	cold, err := tier.New(st)
	require.NoError(t, err)
	defer cold.Close()
	m, err := adapters.New(hot, 0, adapters.WithHotBudget(1, 0), adapters.WithCold(cold, 1))
	require.NoError(t, err)
	defer m.Close()
	for _, id := range []string{"a", "b", "c"} {
		l, err := adapters.Func(6000, func(dst []byte) (int, error) { clear(dst); return len(dst), nil })
		require.NoError(t, err)
		require.NoError(t, m.Register(id, l))
	}
	for _, id := range []string{"a", "b", "a"} { // a stored, loaded back; b stored
		h, err := m.Acquire(id)
		require.NoError(t, err)
		require.NoError(t, m.Release(h))
		for m.Stats().ColdStoring > 0 {
			_, err = m.Drain(nil)
			require.NoError(t, err)
		}
	}
	m.Stats() // publishes
	const want = `
# HELP locus_adapters_cold_tier_stores_total Adapter copies stored in the cold tier.
# TYPE locus_adapters_cold_tier_stores_total counter
locus_adapters_cold_tier_stores_total{manager="m"} 2
# HELP locus_adapters_cold_tier_storing Stores into the cold tier in flight.
# TYPE locus_adapters_cold_tier_storing gauge
locus_adapters_cold_tier_storing{manager="m"} 0
# HELP locus_adapters_loads_total Loads into the hot tier by source: the warm tier, the cold tier (cold_tier) or the adapter's Loader (cold).
# TYPE locus_adapters_loads_total counter
locus_adapters_loads_total{from="cold",manager="m"} 2
locus_adapters_loads_total{from="cold_tier",manager="m"} 1
locus_adapters_loads_total{from="warm",manager="m"} 0
# HELP locus_adapters_tier_adapters Adapters by residency tier: hot (loading included), warm (copies, a hot adapter may keep one), cold (no hot or warm copy), or with a copy in the cold tier (cold_tier).
# TYPE locus_adapters_tier_adapters gauge
locus_adapters_tier_adapters{manager="m",tier="cold"} 2
locus_adapters_tier_adapters{manager="m",tier="cold_tier"} 2
locus_adapters_tier_adapters{manager="m",tier="hot"} 1
locus_adapters_tier_adapters{manager="m",tier="warm"} 0
# HELP locus_adapters_tier_bytes Bytes held by a tier: the page-rounded runs (hot) or the stored copies (warm, cold_tier).
# TYPE locus_adapters_tier_bytes gauge
locus_adapters_tier_bytes{manager="m",tier="cold_tier"} 12000
locus_adapters_tier_bytes{manager="m",tier="hot"} 8192
locus_adapters_tier_bytes{manager="m",tier="warm"} 0
`
	require.NoError(t, testutil.CollectAndCompare(metrics.NewAdapters("m", m), strings.NewReader(want),
		"locus_adapters_cold_tier_stores_total", "locus_adapters_cold_tier_storing", "locus_adapters_loads_total",
		"locus_adapters_tier_adapters", "locus_adapters_tier_bytes"))
}

// Snapshot from another goroutine while the owner works: race-free, and
// the owner's Drain answers a waiting reader.
func TestAdaptersSnapshotConcurrent(t *testing.T) {
	b, err := heap.New(16*4096, 1)
	require.NoError(t, err)
	hot, err := pages.New(b, 4096)
	require.NoError(t, err)
	defer hot.Close()
	m, err := adapters.New(hot, pages.DefaultContent)
	require.NoError(t, err)
	l, err := adapters.Func(4096, func(dst []byte) (int, error) { return len(dst), nil })
	require.NoError(t, err)
	require.NoError(t, m.Register("a", l))
	done := make(chan adapters.Stats)
	go func() { done <- m.Snapshot() }()
	for {
		select {
		case s := <-done:
			require.Equal(t, 1, s.Registered)
			require.NoError(t, m.Close())
			return
		default:
			h, err := m.Acquire("a")
			require.NoError(t, err)
			require.NoError(t, m.Release(h))
			_, err = m.Drain(nil)
			require.NoError(t, err)
		}
	}
}

// vllm:lora_requests_info from the manager's published state: vLLM's
// labels, the recording time as the value, the running adapters the held
// ones, the waiting ones those queued in its Batcher.
func TestVLLMLora(t *testing.T) {
	b, err := heap.New(16*4096, 1)
	require.NoError(t, err)
	hot, err := pages.New(b, 4096)
	require.NoError(t, err)
	defer hot.Close()
	at := time.Unix(1_700_000_000, 500_000_000)
	m, err := adapters.New(hot, pages.DefaultContent, adapters.WithHotBudget(4, 0), adapters.WithClock(func() time.Time { return at }))
	require.NoError(t, err)
	defer m.Close()
	c := metrics.NewVLLMLora(m)
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(""))) // nothing published yet
	for _, id := range []string{"sql", "chat", "code"} {
		l, err := adapters.Func(4096, func(dst []byte) (int, error) { return len(dst), nil })
		require.NoError(t, err)
		require.NoError(t, m.Register(id, l))
	}
	bt, err := adapters.NewBatcher(m, adapters.BatchConfig{MaxAdapters: 2, NoPrefetch: true})
	require.NoError(t, err)
	for i, id := range []string{"sql", "sql", "chat", "code"} {
		require.NoError(t, bt.Enqueue(adapters.Request{Seq: uint64(i), Adapter: id}))
	}
	var batch adapters.Batch
	require.NoError(t, bt.Next(&batch)) // sql (the longest queue), then chat (ties: by id)
	require.Equal(t, []string{"sql", "chat"}, batch.Adapters)
	m.Stats() // publishes
	const want = `
# HELP vllm:lora_requests_info Running stats on lora requests.
# TYPE vllm:lora_requests_info gauge
vllm:lora_requests_info{max_lora="2",running_lora_adapters="chat,sql",waiting_lora_adapters="code"} 1.7000000005e+09
`
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want))) // vLLM's name has a colon: no lint
	require.NoError(t, bt.Release(&batch))

	var nilManager *adapters.Manager
	for _, c := range []prometheus.Collector{metrics.NewVLLMLora(nil), metrics.NewVLLMLora(nilManager)} {
		require.Error(t, prometheus.NewRegistry().Register(c))
	}
}
