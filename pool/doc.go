// Package pool is the locus engine: a pool of fixed-size blocks composed from
// a backing (the memory), a transport (how blocks freed on other goroutines
// come back to the owner) and a reuse policy (which free block goes out
// next), with generation-checked handles and exact accounting.
//
//	p, err := pool.New(backing, transport, policy)
//
// # Handles and generations
//
// Alloc returns a Handle: the pool's id, a block index and the block's
// generation. The generation is bumped when the block is handed out and
// again when it is freed, so a handle is good only while its allocation
// lives. Every call validates the handle it is given: a stale handle (freed,
// double-freed, or kept after the block was reused), one of another pool, the
// zero handle and forged ones get an error matching ErrInvalidHandle, are
// counted in Stats.Rejected and change nothing else. No block is handed out
// twice while live, and a freed block's memory is never reachable through
// its old handle.
//
// # Owner and senders
//
// One goroutine owns the pool and makes every Pool call. Other goroutines
// free blocks through Senders (NewSender, one per goroutine), a whole chunk
// per call. The owner validates remotely freed handles when it drains them:
// once per step with Drain, or when an allocation finds the free list empty.
// A Sender.FreeChunk that returns nil happens before the Drain that returns
// its blocks to the free list, so the owner sees every write the worker made
// to them (https://go.dev/ref/mem).
//
// # Components
//
// Backing, Transport and ReusePolicy are small interfaces called per pool or
// per chunk, never per block: Go calls a method of a type parameter through
// a dictionary and never inlines it, so the per-block path (pop a free index,
// check a generation, push it back) is concrete code here, inlined into
// Alloc, AllocBytes, AllocChunk, Free, FreeChunk, Bytes and the drain, and
// the handle check indexes without a bounds check (TestCompilerDecisions
// pins both). The bench package's BenchmarkPool compares the composed
// pool with a hand-written, non-generic one.
// Package conformance checks a component, or a whole pool, against these
// contracts.
//
// # Invariant builds
//
// Built with -tags locus_invariants, and in every -race build, a pool
// poisons each freed block with 0xff, so a use after free reads garbage
// rather than plausible data. Normal builds compile the check away.
package pool
