package metrics

import (
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/locus-go/locus/adapters"
	"github.com/locus-go/locus/internal/typednil"
)

// AdaptersSource is what NewAdapters reads: *adapters.Manager is one.
type AdaptersSource interface {
	Snapshot() adapters.Stats
}

// NewAdapters returns a collector of an adapter manager's residency
// accounting, labelled manager=name; register it with a
// prometheus.Registerer. Every scrape reads m.Snapshot once (published by
// the manager at its Drain and Stats), so it never races the owner and
// the samples of one scrape agree. A nil m makes a collector whose
// registration fails. Use it for dashboards of the tiers; for a router
// that reads vLLM's lora gauge, register NewVLLMLora beside it.
//
// Its metrics (counters end in _total):
//
//	locus_adapters_registered                       gauge: adapters registered
//	locus_adapters_tier_adapters{tier="hot"|"warm"|"cold"|"cold_tier"}  gauge: hot counts loading ones; a hot adapter may keep a warm copy;
//	                                                cold: no hot or warm copy; cold_tier: copies in the cold tier (WithCold), of adapters in any tier
//	locus_adapters_tier_bytes{tier="hot"|"warm"|"cold_tier"}  gauge: page-rounded run bytes (hot), stored bytes (warm, cold_tier)
//	locus_adapters_loading                          gauge: prefetches in flight
//	locus_adapters_quantized                        gauge: warm copies stored as int8
//	locus_adapters_held                             gauge: adapters with live handles
//	locus_adapters_loads_total{from="warm"|"cold_tier"|"cold"}  counter: cold is the adapter's Loader
//	locus_adapters_load_errors_total                counter
//	locus_adapters_hot_hits_total                   counter: acquires that found the adapter hot
//	locus_adapters_promotions_total                 counter: adapters made hot
//	locus_adapters_demotions_total                  counter: by the manager (budgets, room, idleness)
//	locus_adapters_evictions_total                  counter: by the pages pool
//	locus_adapters_compressions_total               counter: warm copies stored or converted as int8
//	locus_adapters_bytes_moved_total                counter: bytes copied into the hot, warm and cold tiers
//	locus_adapters_cold_tier_storing                gauge: stores into the cold tier in flight
//	locus_adapters_cold_tier_stores_total           counter: copies stored in the cold tier
//	locus_adapters_cold_tier_rejected_total         counter: adapters that went cold unstored by admission (too few Loader loads, too large)
//	locus_adapters_cold_tier_skipped_total          counter: stores and loads the tier could not take (stores in flight at their limit, no room, busy)
//	locus_adapters_cold_tier_errors_total           counter: copies into or out of the cold tier that failed (a load then reads the Loader)
//	locus_adapters_cold_tier_evictions_total        counter: cold copies lost to the tier's eviction
//
// The cold_tier series are 0 for a manager without a cold tier.
func NewAdapters(name string, m AdaptersSource) prometheus.Collector {
	return newCollector[adapters.Stats]("adapters", "manager", name, m, adaptersFamilies)
}

var adaptersFamilies = []family[adapters.Stats]{
	{"registered", "Adapters registered.", nil,
		func(w *writer, s adapters.Stats) { w.gauge(float64(s.Registered)) }},
	{"tier_adapters", "Adapters by residency tier: hot (loading included), warm (copies, a hot adapter may keep one), cold (no hot or warm copy), or with a copy in the cold tier (cold_tier).", []string{"tier"},
		func(w *writer, s adapters.Stats) {
			w.gauge(float64(s.Hot.Adapters), "hot")
			w.gauge(float64(s.Warm.Adapters), "warm")
			w.gauge(float64(s.Cold), "cold")
			w.gauge(float64(s.ColdTier.Adapters), "cold_tier")
		}},
	{"tier_bytes", "Bytes held by a tier: the page-rounded runs (hot) or the stored copies (warm, cold_tier).", []string{"tier"},
		func(w *writer, s adapters.Stats) {
			w.gauge(float64(s.Hot.Bytes), "hot")
			w.gauge(float64(s.Warm.Bytes), "warm")
			w.gauge(float64(s.ColdTier.Bytes), "cold_tier")
		}},
	{"loading", "Prefetches in flight.", nil,
		func(w *writer, s adapters.Stats) { w.gauge(float64(s.Loading)) }},
	{"quantized", "Warm copies stored as int8.", nil,
		func(w *writer, s adapters.Stats) { w.gauge(float64(s.Quantized)) }},
	{"held", "Adapters with live handles.", nil,
		func(w *writer, s adapters.Stats) { w.gauge(float64(s.Held)) }},
	{"loads_total", "Loads into the hot tier by source: the warm tier, the cold tier (cold_tier) or the adapter's Loader (cold).", []string{"from"},
		func(w *writer, s adapters.Stats) {
			w.counter(s.WarmLoads, "warm")
			w.counter(s.ColdTierLoads, "cold_tier")
			w.counter(s.ColdLoads, "cold")
		}},
	{"load_errors_total", "Loads that failed.", nil,
		func(w *writer, s adapters.Stats) { w.counter(s.LoadErrors) }},
	{"hot_hits_total", "Acquires that found the adapter hot.", nil,
		func(w *writer, s adapters.Stats) { w.counter(s.HotHits) }},
	{"promotions_total", "Adapters made hot.", nil,
		func(w *writer, s adapters.Stats) { w.counter(s.Promotions) }},
	{"demotions_total", "Hot adapters demoted by the manager: budgets, room, idleness.", nil,
		func(w *writer, s adapters.Stats) { w.counter(s.Demotions) }},
	{"evictions_total", "Hot adapters evicted by the pages pool.", nil,
		func(w *writer, s adapters.Stats) { w.counter(s.Evictions) }},
	{"compressions_total", "Warm copies stored or converted as int8.", nil,
		func(w *writer, s adapters.Stats) { w.counter(s.Compressions) }},
	{"bytes_moved_total", "Bytes copied into the hot, warm and cold tiers.", nil,
		func(w *writer, s adapters.Stats) { w.counter(s.BytesMoved) }},
	{"cold_tier_storing", "Stores into the cold tier in flight.", nil,
		func(w *writer, s adapters.Stats) { w.gauge(float64(s.ColdStoring)) }},
	{"cold_tier_stores_total", "Adapter copies stored in the cold tier.", nil,
		func(w *writer, s adapters.Stats) { w.counter(s.ColdTierStores) }},
	{"cold_tier_rejected_total", "Adapters that went cold unstored by the cold tier's admission: too few Loader loads, too large.", nil,
		func(w *writer, s adapters.Stats) { w.counter(s.ColdTierRejected) }},
	{"cold_tier_skipped_total", "Stores and loads the cold tier could not take: stores in flight at their limit, no room, busy.", nil,
		func(w *writer, s adapters.Stats) { w.counter(s.ColdTierSkipped) }},
	{"cold_tier_errors_total", "Copies into or out of the cold tier that failed; a failed load reads the Loader.", nil,
		func(w *writer, s adapters.Stats) { w.counter(s.ColdTierErrors) }},
	{"cold_tier_evictions_total", "Cold copies lost to the cold tier's eviction.", nil,
		func(w *writer, s adapters.Stats) { w.counter(s.ColdTierEvictions) }},
}

// NewVLLMLora returns a collector of vLLM's router-facing gauge
// vllm:lora_requests_info, from the state an adapter manager publishes
// with the rest of its accounting (Stats.Lora: the Snapshot NewAdapters
// reads), so the adapters it names running are exactly the held ones the
// tier metrics count. Routers that balance LoRA traffic (the Gateway API
// inference extension, llm-d, AIBrix) read it: they send a request where
// its adapter is running or waiting, or where fewer than max_lora are.
//
// It has vLLM's labels and nothing more, as vLLM's engine exports it:
//
//	vllm:lora_requests_info{max_lora, running_lora_adapters, waiting_lora_adapters}  gauge
//
// max_lora is the most adapters one batch mixes (the manager's Batchers'
// MaxAdapters, else its hot slot budget), the two lists are adapter ids
// joined with commas, and the value is the Unix time in seconds at which
// the state was recorded (vLLM sets it to the current time every step).
// Nothing is sent before the manager first publishes. Register one per
// engine, as vLLM exports one per engine process: two managers in one
// registry with the same lists would collide. Every scrape reads
// m.Snapshot once. A nil m makes a collector whose registration fails.
func NewVLLMLora(m AdaptersSource) prometheus.Collector {
	return &loraCollector{m: m, desc: prometheus.NewDesc("vllm:lora_requests_info", "Running stats on lora requests.",
		[]string{"max_lora", "running_lora_adapters", "waiting_lora_adapters"}, nil)}
}

type loraCollector struct {
	m    AdaptersSource
	desc *prometheus.Desc
}

// Describe sends the description; with no source, an invalid one, so that
// registration fails rather than scrapes.
func (c *loraCollector) Describe(ch chan<- *prometheus.Desc) {
	if typednil.Is(c.m) {
		ch <- prometheus.NewInvalidDesc(fmt.Errorf("locus/metrics: vllm:lora_requests_info: nil source"))
		return
	}
	ch <- c.desc
}

// Collect reads one snapshot and sends the gauge.
func (c *loraCollector) Collect(ch chan<- prometheus.Metric) {
	if typednil.Is(c.m) {
		return
	}
	l := c.m.Snapshot().Lora
	if l.At.IsZero() {
		return
	}
	w := writer{ch: ch, desc: c.desc}
	w.gauge(float64(l.At.UnixNano())/1e9, strconv.Itoa(l.MaxLora), l.Running, l.Waiting)
}
