// Package bench is LOCUS-EVAL v1 in Go: the four workloads of the LOCUS
// design thread, the contenders that replay them (the composed locus pools
// and what a Go user would otherwise use), the runner with its proof gates,
// and the design-thread replay 0351–0359. The command cmd/locus-eval prints
// the scoreboard and the ledger; this package is its engine and also
// exposes every cell as a testing.B benchmark.
//
// # Workloads
//
// A trace models one scheduling window of a CPU LLM server: 64 requests
// arrive, each takes 16 KV-cache blocks of 4 KiB when admitted (prefill)
// and one more per step while it decodes; a finished request's whole block
// list is handed to one of 4 worker goroutines, round-robin, which frees it.
// The owner goroutine (the scheduler) drains remote frees at the start and
// the end of every step and, at the end of the trace, waits until every
// block is back.
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
// # Touch parity
//
// Every contender writes the same bytes at the same moment: right after
// allocating a block, on the owner. Trace workloads write one byte at
// offset 0 (TouchByte) or, in the touched variant, the whole block
// (TouchFull); churn-touch always writes the whole block. Every contender
// writes through the raw slice its allocation returned (locus contenders
// through Pool.AllocBytes's; locus-allocchunk, which allocates whole
// chunks, through the validated Pool.Bytes); go-heap's make also zeroes
// every block.
//
// # Contenders
//
// The table (Contenders) lists locus-mailbox (locus.Default), locus-shared,
// locus-sharded, locus-sharded-chunk, locus-mmap, locus-fifo, locus-inline
// (no workers: the owner frees inline; the floor without the cross-goroutine
// handoff) and locus-handwritten (a concrete, non-generic copy of
// locus-mailbox's path: what generics cost), then the Go peers go-heap,
// sync-pool, chan-freelist and mutex-freelist. Adding a contender is one
// Entry passed to register.
//
// # Measurement
//
// A run opens a fresh contender, runs the untimed sample pass (4 traces:
// gates and the peak of outstanding blocks), warms up, then times traces
// one by one. A run's velocity is the median per-trace time with a 95 %
// distribution-free confidence interval of the median; a cell is run at
// least twice, a third time when the first two medians differ by more than
// 5 %, and reports the median of its runs. Quality is the worst sample
// peak over the theoretical instant-free peak. Gates are hard: allocated =
// freed = blocks per trace every trace, submitted = drained, queues
// balanced, nothing rejected; a cell that fails is printed as invalid and
// never ranked.
//
// # Comparing with benchstat
//
// The same cells are Go benchmarks (ns/op is then a mean, not a median):
//
//	go test ./bench -run '^$' -bench 'Eval/workload=steady-decode' -count 6 > new.txt
//	benchstat new.txt
//	benchstat -col /contender new.txt
package bench
