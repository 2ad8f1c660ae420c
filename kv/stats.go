package kv

// Stats is a snapshot of a Manager's accounting. Every block of the pool is
// in exactly one of three states:
//
//	Free + Cached + InUse == Capacity
//
// Free blocks hold nothing (a freed block without a hash that
// QueueFreedBehindCached keeps in the eviction order counts as free);
// Cached blocks are full blocks in the prefix cache that no sequence holds
// and that eviction may reclaim; InUse blocks are held by a sequence, a
// pin or a tier copy. Pinned counts the pinned blocks, and InFlight the
// blocks held by copies, within InUse.
//
// Manager.Stats returns the counts as they are now, to the owner;
// Manager.Snapshot returns them as the owner last published them, to any
// goroutine.
type Stats struct {
	Capacity       int // blocks in the pool
	TokensPerBlock int

	Free   int
	Cached int
	InUse  int
	Pinned int
	// Reserved counts, within InUse, the blocks that hold only the
	// lookahead slots of sequences (Reserve): none of their tokens yet.
	Reserved int
	// InFlight counts, within InUse, the blocks a tier copy holds: being
	// loaded into, being stored (or queued for the next Drain to store),
	// or held by a write-back store before their eviction. None is reused
	// until the Drain that applies its copy's completion.
	InFlight int

	Sequences int // live sequences

	// Prefix cache lookups by admissions: tokens and full blocks asked
	// for, and those found cached. HitTokens/QueryTokens is the prefix hit
	// rate.
	QueryTokens, HitTokens uint64
	QueryBlocks, HitBlocks uint64

	Stored             uint64 // blocks added to the prefix cache
	Evictions          uint64 // cached blocks evicted, lazily or by the watermarks
	WatermarkEvictions uint64 // of Evictions, those the watermarks started
	Cleared            uint64 // cached blocks dropped by Reset
	CopyOnWrite        uint64 // shared partial blocks copied before an append
	Exhausted          uint64 // admissions and appends refused for lack of blocks

	Forks            uint64
	Releases         uint64 // sequences released, locally or remotely (not preempted)
	Preemptions      uint64 // sequences preempted (Preempt)
	RolledBackTokens uint64 // lookahead slots given back unfilled: rejected draft tokens
	RemoteReleases   uint64 // of Releases, those released through a Releaser
	RejectedReleases uint64 // releases refused: zero, foreign, stale or double

	// SubscriberPanics counts events lost because the subscriber panicked
	// (see WithSubscriber).
	SubscriberPanics uint64

	// Tiers[t] is the accounting of tier t of WithTiers: its prefix hits
	// in blocks and tokens, loads, stores. HitTokens above counts the
	// pool's hits only; the prefix hit rate across tiers adds each
	// tier's HitTokens.
	Tiers [MaxTiers]TierStats
}
