// Package bench is LOCUS-EVAL v1 in Go: the four workloads of the LOCUS
// design thread and the contenders that replay them (the composed locus
// pools and what a Go user would pick instead), each opened as a Rig that
// runs one trace at a time under proof gates. The command cmd/locus-eval
// times rigs interleaved across processes and prints the scoreboard; this
// package is what it times, and also exposes every cell as a testing.B
// benchmark. Use it to run a workload against a contender of your own
// choosing from the table; do not use it as a pool.
//
// # Workloads
//
// A trace models one scheduling window of a CPU LLM server: 64 requests
// arrive, each takes 16 KV-cache blocks of 4 KiB when admitted (prefill)
// and one more per step while it decodes; a finished request's whole block
// list is handed to one of 4 worker goroutines, round-robin, which frees it.
// The owner goroutine (the scheduler) drains remote frees at the start and
// the end of every step and, at the end of the trace, waits once until
// every dispatched list is freed and drains once.
//
//   - steady-decode: 4 arrivals per step; decode length 8 for every 4th
//     request (an early cancel), else 16, 32 or 48. 2688 blocks, 64 steps.
//   - burst-storm: all 64 requests arrive at step 0, same decode lengths.
//     2688 blocks, 49 steps, the heaviest first step (1088 allocations).
//   - long-tail: 4 arrivals per step; every 8th request decodes 512 steps,
//     the rest 16. 6016 blocks, 527 steps.
//   - churn-touch: 256 live chunks of 16 blocks; each of 64 steps frees
//     the oldest chunk through a worker and allocates and fully writes 16
//     new blocks. 1024 blocks per run.
//
// The schedule of a workload is computed once (NewPlan) following the
// record exactly (move-last-into-slot removal, round-robin dispatch
// restarting at worker 0 every trace) and replayed by every contender, so
// every contender runs a byte-identical schedule and the same harness code.
//
// # Paced traces
//
// With Config.Pace set, the owner spins for the pace after every step (a
// serving engine's model compute) while the workers free; Trace.Owner then
// counts only the owner's time outside the spins, and the peak and mean of
// outstanding blocks are sampled inside them, at no cost to the owner.
//
// # Touch parity
//
// Every contender writes the same bytes at the same moment: right after
// allocating a block, on the owner. Trace workloads write one byte at
// offset 0 (TouchByte) or, in the touched variant, the whole block
// (TouchFull); churn-touch always writes the whole block. Every contender
// writes through the slice its allocation returned (locus contenders
// through Pool.AllocBytes's; locus-allocchunk, which allocates whole
// chunks, through the validated Pool.Bytes); go-heap's make also zeroes
// every block.
//
// # Contenders
//
// Contenders lists locus-mailbox (locus.Default), locus-handwritten (the
// hand-written, non-generic copy of its path: what the generic composition
// costs), locus-inline (no workers: the owner frees inline; the floor
// without the cross-goroutine handoff), locus-fifo, locus-mmap, locus-shared,
// locus-sharded and locus-sharded-chunk; then the Go peers: the mutex free
// list with generation-checked handles (mutex-freelist-checked, the peer
// with locus's safety contract), the plain mutex free list, the channel free
// list, sync.Pool, two third-party modules (libp2p/go-buffer-pool and
// bytedance/gopkg's mcache) and the Go heap. Only the locus contenders and
// mutex-freelist-checked reject stale, double and foreign frees
// (Entry.Checked). ContenderByName also finds locus-allocchunk, design
// thread 0356's configuration. Each locus contender calls its concrete pool
// type directly in the per-block loop, as a user's code would.
//
// # Gates
//
// Every trace must allocate and free exactly its blocks, and afterwards
// every contender's own gates must hold (remote frees submitted = drained,
// queues empty, nothing rejected, live blocks as expected); a trace that
// fails returns an error and the rig is done.
//
// # Design-thread harnesses
//
// OpenCycle (commanded cycles, 0351–0353) and OpenReuse (the reuse-order
// harness R, 0358–0359) return Runners too, so the same timing engine
// replays the thread.
//
// # Comparing with benchstat
//
// The same cells are Go benchmarks (ns/op is then a mean over sequential
// traces, not the scoreboard's interleaved ratio):
//
//	go test ./bench -run '^$' -bench 'Eval/workload=steady-decode' -count 6 > new.txt
//	benchstat -col /contender new.txt
//	go test ./bench -run '^$' -bench Paced -count 6 | benchstat -col /contender -
package bench
