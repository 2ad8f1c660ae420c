// Package kv manages the KV-cache blocks of an LLM serving engine on top of
// a locus pool: sequences and their block tables, blocks shared by
// reference count, fork and copy-on-write, and a prefix cache that lets
// requests with a common prefix (a system prompt, a conversation's earlier
// turns) hold its blocks once.
//
// The pool stays the block engine (memory, generation-checked handles,
// remote frees); a Manager decides which sequence holds which block.
// Table is the simpler block table of a sequence that shares nothing.
//
// # The prefix cache
//
// A full block is identified by a chained hash of its parent block's hash,
// its token ids and the request's Key (adapter and salt); see Hasher.
// Admit finds the longest cached prefix of a prompt and reuses those blocks;
// a released full block stays cached and evictable, least recently used
// first within the lowest retention Priority, until an allocation needs it
// (and, with WithWatermarks, between a high and a low watermark at Drain).
// Pins keep a prefix resident; their share of the pool is capped.
//
// # Scheduling
//
// A scheduler asks before it commits: CanAdmit says whether a prompt fits
// now (AdmitOK), later (AdmitLater, with the blocks needed and available)
// or never (AdmitNever), and Lookup how much of it is cached, without
// changing anything. Refused requests fail with an *ExhaustedError that
// matches pool.ErrExhausted (and ErrTooLarge for never). When a running
// sequence cannot grow, Preempt releases it, leaving its full blocks cached
// as vLLM's recompute preemption does, and says what readmitting it takes.
// Speculative decoding reserves lookahead slots for draft tokens (Reserve)
// and appends only the accepted ones (Accept); rejected slots roll back and
// no block is hashed with a rejected token in it. WithPrefixCaching(false)
// turns the cache off; BlockBytes sizes a block from a model's shape.
//
// # Sliding windows and hybrid models
//
// WithSlidingWindow makes a Manager's sequences sliding-window sequences:
// blocks that fall wholly out of the window go back to the pool (or stay
// cached, if full) at the next Append, and a prefix hit needs only the
// window's blocks, so a decode step costs the same at any length. Groups
// manages a hybrid model's KV cache groups (full attention, sliding
// window, state space), one pool and block table per group, with vLLM's
// hybrid prefix hit: the longest prefix every group can serve.
//
// # Offload tiers
//
// WithTiers puts tiers (a *tier.Manager over tier/host, tier/disk or a
// Storage of your own, hottest first) behind the pool. Every block that
// enters the prefix cache is stored into every tier at the next Drain
// (WriteThrough, vLLM's write-through; WriteBack stores only what the
// watermarks evict), on the tiers' copy workers; the pool block is held,
// counted in Stats.InFlight within InUse, until the Drain that applies the
// store's completion, so no copy reads a block being reused. Admit finds
// the longest prefix across the pool and the tiers: a block a tier holds
// is loaded, from the hottest tier that holds it, into a fresh block
// (a disk hit goes straight to the pool, and write-through then puts it
// into the host tier too). A LoadPolicy (default CostPolicy, fed by
// LoadCost and the bandwidth measured from completed loads) decides how
// much of that prefix to load rather than compute, so that a hit is never
// slower than recomputing. The sequence is not Ready until its loads
// complete at a Drain; a load that fails, goes stale (tier.Reset) or is
// abandoned (the tier closed) is never served: the blocks from it on
// become blocks to compute, and Ready says how many tokens are final.
// Sources gives each block's origin; Stats.Tiers the hits per tier.
//
// With tiers, call Drain once per step after the step's forward pass: it
// applies the copies' completions and starts the stores of the blocks
// completed before it, whose KV the engine has computed by then.
//
// # Compatibility with vLLM and its routers
//
// The default hash is vLLM's "sha256_cbor": SHA-256 over the canonical CBOR
// encoding of (parent, token ids, extra keys), chained from the hash of a
// seed, with the adapter name and the cache salt as vLLM's extra keys. A
// manager configured WithHash(SHA256CBOR, s) computes the same block hashes
// as a vLLM engine run with --prefix-caching-hash-algo sha256_cbor and
// PYTHONHASHSEED=s, for text-only requests; XXH3CBOR matches
// "xxhash_cbor". The cache events (Event) carry what vLLM's BlockStored,
// BlockRemoved and AllBlocksCleared carry, so a publisher can speak vLLM's
// KV event protocol to routers such as llm-d's KV-cache indexer.
//
// # Ownership
//
// Like a pool, a Manager has one owner goroutine; reference counts and the
// cache index are plain owner state. Workers release finished sequences
// through a Releaser with one push each; the owner applies the releases at
// Drain, once per step. Sequence ids are generation-checked like pool
// handles, so a sequence released twice, or by two workers, is rejected
// without dropping anyone else's references.
//
// # Accounting
//
// Every block is free, cached or in use, and Free + Cached + InUse ==
// Capacity in every Stats (pinned blocks and blocks held by tier copies
// count within InUse). Built with
// -race or -tags locus_invariants, the manager checks its whole state
// against that identity at every Stats and Drain.
package kv
