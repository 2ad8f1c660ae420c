// Package adapters keeps LoRA adapters in three residency tiers over one
// paged pool shared with the KV cache (S-LoRA's unified paging, ADR-006):
//
//   - hot: a contiguous run of a pages.Pool, of a content type the Manager
//     owns, next to the KV runs in the same region; ready for the kernels.
//   - warm: a copy in a host-memory region (WithWarm), exact, or int8 with
//     absmax scales (WithQuantization), dequantized on promotion: about
//     half the bytes stored and moved. No engine in the field keeps one.
//   - cold: the adapter's Loader (a file, an io.ReaderAt, a callback), and
//     optionally a cold tier in front of it (WithCold): a tier.Manager,
//     typically over tier/disk (a preallocated file of checksummed slots),
//     holding copies of the adapters that left the hot and warm tiers,
//     admitted by how often their Loader was read. No engine in the field
//     has a disk tier for adapters with admission either.
//
// # Use
//
//	m, err := adapters.New(hot, adapterContent, adapters.WithHotBudget(8, 0), adapters.WithWarm(1<<30, 64, 0))
//	err = m.Register("sql-lora", loader)
//	h, err := m.Acquire("sql-lora") // hot and pinned while h is held
//	w, err := m.Bytes(h)           // the weights: one contiguous run
//	err = m.Release(h)             // or a worker's Releaser.Release(h)
//	done, err := m.Drain(nil)      // once per step: releases, prefetch completions, cold-tier copies
//	err = m.Tick()                 // once per step: pins, idle demotion, compression, promotion
//
// A Batcher forms batches of requests that mix adapters (at most
// MaxAdapters per batch, SGLang's default 8), preferring hot adapters and
// prefetching the next ones.
//
// When to use it: an engine that serves many adapters from one GPU pool
// and wants adapter weights and KV blocks to trade pages. When not: a
// fixed set of adapters that always fits (load them once into their own
// run), or adapters the kernels read from non-contiguous pages (use
// package pages directly, one run per layer).
//
// # Rules
//
// Acquire makes an adapter hot (from warm, else cold) and returns a
// Handle; the adapter stays hot, holding one pin in the pages pool, until
// every handle on it is released. Pin(id, ttl) keeps it hot for at most
// the maximum pin duration (WithMaxPin). Neither the Manager nor the pages
// pool ever demotes or evicts a held, pinned or loading adapter.
//
// Budgets: the hot tier holds at most the slot and byte budgets
// (WithHotBudget, vLLM's max_loras), the warm tier at most its region and
// slot budget (max_cpu_loras). A load that would exceed a budget, or does
// not fit in the pages pool, demotes hot adapters in rank order (the
// Policy: Window by default, LRU, FIFO or SizeAware) until it fits; if
// none may be demoted it fails with ErrNoRoom. A demoted adapter keeps a
// warm copy if one can be made without dropping a warm copy that ranks
// above it, and goes cold otherwise.
//
// Cold tier and admission (WithCold): an adapter is admitted once it has
// been loaded from its Loader at least admitAfter times (the field's SSD
// tiers admit at 2), and is stored when it goes cold: when its last copy
// leaves (the warm copy is dropped for room, or the hot run goes with no
// warm copy made). Its bytes go exactly as they leave (exact weights, or
// the warm tier's int8 encoding) as ceil(len/BlockSize) blocks, under keys
// that name the registration (tier.KeyOf of a hash of the Manager, the
// registration and the id; block i in group i): an id registered again
// never meets its old blocks, which Unregister removes. The owner copies
// the bytes once into a staging buffer; the tier's workers write them,
// and Drain (and Tick) run the tier's Drain to apply the completions. A
// load of an adapter neither hot nor warm reads the cold tier if every
// block is a HIT there, else the Loader; a load that fails (a torn or
// corrupt slot, which the tier's checksums catch and drop) falls back to
// the Loader and forgets the copy: wrong bytes are never served. A tier
// that evicts one block of a copy loses the whole copy (its other blocks
// are removed). An adapter of more blocks than the tier holds is never
// admitted. Stats counts the loads from the tier and from the Loader, the
// stores, rejections, failures and evictions.
//
// Promotion window: an adapter acquired at least 10 times within 60 s
// (WithPromotion) is hot-worthy: it ranks above every adapter that is
// not, Tick never demotes it for idleness and prefetches it back if it
// left the hot tier. Adapters that are not hot-worthy and have been idle
// for the idle threshold are demoted by Tick, giving their pages back to
// the KV cache. Warm copies idle past the compression threshold are
// quantized by Tick.
//
// Sharing the region: when the adapter content type is evictable, the
// pages pool may evict adapters that are neither held nor pinned to place
// KV runs of a priority at least theirs; the pool's EvictFunc must then
// forward to Manager.Evicted, which saves a warm copy while the run is
// still readable.
//
// # Ownership and concurrency
//
// A Manager is owned by the goroutine that owns its pages pool. Workers
// release handles through Releasers (one per worker, padded against false
// sharing), which push onto a chunk mailbox (transport/mailbox) that Drain
// takes in one swap per worker. Prefetch copies run on worker goroutines
// and report through a second mailbox. Happens-before: the owner's writes
// to a prefetch task happen before the worker reads it (channel send);
// the worker's copy into the hot run happens before its mailbox Send,
// which happens before the Drain that applies it (a load from the cold
// tier runs first on the tier's workers, whose writes happen before the
// tier's Drain, run by the owner, which then hands the Prefetch on to a
// copy worker: the staged bytes, or the Loader if the tier failed); a Releaser's Release
// happens before the Drain that applies it. While a prefetch is in flight
// its run is pinned and has no handle, and the warm copy it reads cannot
// be dropped or compressed (a busy count), so no byte is read while it is
// written.
//
// # Cost
//
// Nothing on the owner's path walks the registered adapters: the victims
// of a demotion (the lowest-ranked hot adapter that may be demoted, the
// lowest-ranked warm copy that may be dropped) are the tops of heaps kept
// up to date as adapters change, pins expire from a heap by expiry, and
// Tick visits only the demotable hot adapters, the droppable warm copies
// and the hot-worthy adapters. So with 10,000 registered adapters an
// Acquire that demotes costs what it costs with 1,000 (BenchmarkDemotion).
//
// # Router metrics
//
// Stats.Lora is the state behind vLLM's gauge vllm:lora_requests_info
// (metrics.NewVLLMLora): the held adapters, those queued in the Manager's
// open Batchers, and max_lora, published with the tier counts.
//
// # Accounting
//
// Stats counts every tier exactly and Check verifies it against a recount
// and against the pages pools' own counts; builds with -race or -tags
// locus_invariants run Check after every call.
//
// # Errors
//
// Bad input never panics: unknown ids, stale or doubled handles, loaders
// that fail, panic or deliver the wrong size, and budgets smaller than an
// adapter are errors (see the Err variables), and leave nothing leaked.
package adapters
