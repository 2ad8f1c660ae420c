// Package tier keeps KV blocks beyond the hot pool: a tier is a fixed number
// of block slots on one medium (host memory, a local disk, a remote store)
// and a Manager is the owner-side index over it, with the contract vLLM's
// offloading manager converged on, made safe the locus way.
//
// # The contract
//
// Every Manager method but Snapshot is called on one owner goroutine (the
// engine's scheduler), like a pool's Alloc:
//
//   - Lookup(keys) says per key MISS, HIT or HIT_PENDING (a store is in
//     flight: not loadable yet). Touch(keys) updates recency.
//   - PrepareLoad(keys) pins HIT blocks against eviction until
//     CompleteLoad(job); PrepareStore(keys) returns which keys to store
//     (present and pending ones skipped, admission applied), the slots to
//     write and the keys evicted to make room, or refuses with ErrNoSpace
//     when not enough is evictable; it never evicts a pinned block, a block
//     being stored, or a block among the keys of the same call.
//     CompleteStore(job, ok) makes the keys loadable, or drops them.
//   - Remove(keys, busy) drops resident blocks no job holds, at once, as
//     an eviction would; a block being stored or loaded is busy and stays
//     (its key is reported in busy).
//   - Every in-flight job has a generation-checked Job handle: completing a
//     job twice, a job of another manager or a forged one fails with
//     ErrInvalidJob; completing a job issued before Reset fails with
//     ErrStaleJob (its slots are reclaimed, nothing else is applied).
//   - Accounting is exact: Free + Evictable + StorePending + LoadPinned ==
//     Capacity at every return, checked by Check (after every call in
//     -race and -tags locus_invariants builds).
//
// Engines that move the bytes themselves (a GPU DMA into a registered host
// region) use the Prepare/Complete pairs and the slot numbers they return.
// Engines that want the copies done for them call Store and Load: the
// copies run on a bounded set of worker goroutines, their completions come
// back to the owner through a transport/mailbox chunk mailbox (the pool's
// own remote-free path) and are applied by Drain; until then the keys are
// HIT_PENDING, and the owner never blocks on a copy.
//
// # Invariant: no read of a slot under a write
//
// A slot is written only while it is store-pending (its key answers
// HIT_PENDING and cannot be pinned, evicted or removed), and read only
// while it is load-pinned (it cannot be evicted or removed, so no store can
// be given it). So
// nothing is read from a slot while a copy into it is in flight, the
// silent-corruption bug of the field. The copy workers also assert it at run
// time, per slot with one atomic word (a writer holds it at -1, readers
// count up from 0): a conflict is counted in Stats.CopyConflicts and makes
// Check fail. For Load, the same rule binds the caller: dst must not be read
// until Drain reports the job done.
//
// Happens-before: a worker's copy happens before its mailbox Send, which
// happens before the Drain that takes it (see transport/mailbox); so what a
// Load wrote into dst, and what a Store wrote into a slot, is visible to the
// owner once Drain has reported the job.
//
// # Storage
//
// A Storage is the medium under a Manager: tier/host (one memory region of
// fixed rows) and tier/disk (one preallocated file of checksummed slots).
// Implement Storage to plug another medium; conformance.TestTier checks the
// whole tier.
//
// # Events
//
// A Manager records BlockStored (on a successful CompleteStore) and
// BlockRemoved (eviction, Remove, a failed or corrupt block, Reset)
// events, each carrying the tier's Medium; TakeEvents hands them over.
// kv/events publishes them in vLLM's wire format with the event's medium.
package tier
