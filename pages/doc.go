// Package pages hands out contiguous runs of fixed-size pages from one
// region: the allocator for memory whose allocations differ in size and
// must each be contiguous, such as a unified pool that holds model weights,
// KV cache, activations and adapters side by side.
//
//	b, err := heap.New(4096*1024, 1) // one region of 1024 pages of 4 KiB
//	p, err := pages.New(b, 4096)
//	r, err := p.Alloc(16, pages.DefaultContent) // 16 contiguous pages
//	buf, err := p.Bytes(r)                      // 64 KiB
//	err = p.Free(r)                             // merged with free neighbours
//
// # Choosing an allocator
//
// One block size: use package pool, whose blocks are the cheapest to hand
// out and can be freed from any goroutine. A few sizes: use package
// classes, one pool per size class, where an allocation takes a block of
// the smallest class that holds it (no external fragmentation, some
// internal). Variable sizes that must be contiguous: use this package.
//
// # Placement and free space
//
// A Pool places a run best fit by default (the smallest free run that
// holds it), first fit with WithFit(FirstFit) (the lowest-addressed one).
// Freeing a run merges it with free neighbours at once, found in O(1)
// through boundary tags on each run's first and last page, so the free
// space is always a set of maximal free runs. Best fit keeps one list of
// free runs per length and a hierarchical bitset over lengths: finding the
// best fit is a few word operations per level (at most five), and every
// other step is O(1). First fit keeps a max tree of fan-out 16 over page
// indices (one cache line per node): finding the first fit and every
// update are O(log16 pages), four levels for 65,536 pages. Best fit is the
// faster of the two (see FirstFit). Nothing allocates after New.
//
// Stats.Fragmentation reports the external fragmentation of the free space,
// 1 - LargestFree/Free: a region may have enough free pages for a run and
// still refuse it because none of its free runs is long enough.
//
// # Content, pins and eviction
//
// Every run carries a content type (WithContentTypes: a name, a priority,
// and whether it may be evicted) and a pin count. Alloc returns a run pinned
// once; a pinned run is never evicted. When a run of evictable content
// loses its last pin it joins the eviction order of its priority as the
// most recently unpinned. An allocation that does not fit evicts unpinned
// runs of priority at most its own, lowest priority first and least
// recently unpinned first within a priority, until it fits;
// WithWatermarks adds proactive eviction with hysteresis: at a high
// watermark of utilization the Pool evicts down to a low one.
//
// An eviction is never silent: the EvictFunc (WithEvictFunc, required when
// any type is evictable) is called on the owner goroutine for every evicted
// run, before its pages are reused, while the run is still valid (Bytes
// works, to copy it elsewhere). Afterwards the run is stale, and every call
// with it is rejected like a double free.
//
// # Owner only
//
// A Pool is owned by one goroutine, and runs are freed by that goroutine:
// there is no remote free. A run is one allocation of many pages, freed
// once per request rather than once per block, so handing it back to the
// owner (over a channel, or in the request's completion) costs little, and
// pins, eviction order and merging stay owner-only state with no atomics.
// Metrics scrapers read Snapshot, which is safe from any goroutine: the
// owner publishes its accounting at Stats and Close, and when a Snapshot has
// asked, at its next Alloc, Free, Pin, Unpin or Evict (one atomic load per
// call while nobody asks), so an owner that never calls Stats still keeps
// its scrapers fresh.
//
// # Invariant builds
//
// Built with -tags locus_invariants, and in every -race build, a Pool
// poisons each freed or evicted run with 0xff, as pools do.
package pages
