// Package metrics exports the accounting of locus's pools, kv managers,
// KV event publishers, size-class allocators, page pools, offload tiers and
// adapter managers to Prometheus: each constructor (NewPool, NewManager,
// NewPublisher, NewClasses, NewPages, NewTier, NewAdapters) returns a
// prometheus.Collector of one source, which the user registers. NewVLLM
// exports a kv manager under the metric names a vLLM engine uses, and
// NewVLLMLora an adapter manager's vllm:lora_requests_info, which routers
// read to place LoRA requests.
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(
//		metrics.NewPool("kv", p),
//		metrics.NewManager("kv", m),
//		metrics.NewPublisher("kv", pub),
//	)
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// # Cost
//
// A collector reads its source's Snapshot once per scrape, from the
// scraper's goroutine, and builds constant metrics from it. Snapshot is safe
// beside the owner: pools, managers and size-class allocators publish their
// counts at the owner's Drain and Stats (its once-per-step calls), page
// pools at Stats and at the owner's next Alloc, Free, Pin, Unpin or Evict,
// each only when a scrape has asked; a publisher keeps atomic counters.
// Nothing in pool or kv knows about this package: without a registered
// collector, and between scrapes, the owner's hot path does
// exactly what it does without metrics. Counts read at a scrape are as of
// the owner's last Drain or Stats (for a page pool, its last Alloc, Free,
// Pin, Unpin, Evict or Stats). An owner that uses its pool only through
// a kv.Manager needs no extra call: the manager's Drain drains its pool
// too, which publishes the pool's counts.
//
// # Names
//
// Metric names follow Prometheus conventions: the namespace "locus", a
// subsystem per kind of source (pool, kv, kv_events, classes, pages), base
// units (bytes), ratios in 0..1 ending in _ratio, counters ending in
// _total, and a state label on block and page gauges whose values
// partition them, so that a sum over state gives the capacity. Each
// collector carries a constant label naming its source (pool, manager or
// publisher): register one collector per source, with distinct names per
// kind. To add labels of the process (a model, a replica),
// wrap the registerer with prometheus.WrapRegistererWith.
//
// The package imports package events (for its Stats), and with it the ZMQ
// and MessagePack modules; packages pool and kv import neither.
package metrics
