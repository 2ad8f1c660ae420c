// Package locus recycles fixed-size memory blocks across goroutines, fast: the
// KV-cache blocks of a CPU LLM serving engine, say, allocated by one owner
// goroutine and freed a whole request at a time by worker goroutines.
//
// Every worker frees a finished request's blocks with one atomic push into
// its own chunk mailbox, and the owner takes everything back with one swap
// per worker, once per scheduling step, off the allocation path. Handles
// carry a generation, so a stale or double-freed handle is rejected with an
// error instead of aliasing live memory, and every pool accounts its blocks
// exactly.
//
// # Choosing a preset
//
// Default is the shipped design and the right start:
//
//	p, err := locus.Default(locus.WithBlockSize(4096), locus.WithBlocks(8192))
//	h, err := p.Alloc()          // owner goroutine
//	buf, err := p.Bytes(h)       // 4096 bytes, yours until freed
//	s, err := p.NewSender()      // one per worker goroutine
//	err = s.FreeChunk(handles)   // worker: free a whole request at once
//	n, err := p.Drain()          // owner, once per step
//
// # Composing components
//
// A pool is pool.New(backing, transport, policy); the type arguments are
// inferred:
//
//   - backing/heap: one Go-heap region (the race detector sees it).
//     backing/mmap: one mapped region that can be bound to a NUMA node,
//     backed by huge pages or locked; Default uses it with huge pages where
//     the system offers them and Go heap memory where it does not.
//   - transport/mailbox: per-producer lock-free chunk mailboxes (the
//     default). transport/sharded and transport/shared: bounded queues,
//     per producer or shared, for bounding memory in flight and pushing
//     back on workers.
//   - policy/lifo: hand out the most recently freed block (the default,
//     cache-warm). policy/fifo: the one free longest.
//
// For example, FIFO reuse over the default parts:
//
//	b, err := heap.New(4096, 1024)
//	p, err := pool.New(b, mailbox.New(), fifo.Policy{})
//
// # Writing a component
//
// Implement pool.Backing, pool.Transport or pool.ReusePolicy; each is three
// methods or fewer, called per chunk or per pool, never per block. Then run
// the public suite against it in one line of a test:
//
//	func TestMyTransport(t *testing.T) {
//		conformance.TestTransport(t, func(t *testing.T) pool.Transport { return mytransport.New() })
//	}
//
// conformance.TestPool runs the end-to-end suite over a whole pool built from
// any parts.
package locus
