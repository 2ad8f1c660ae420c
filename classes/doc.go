// Package classes serves allocations of a few different sizes from size
// classes: several fixed-size pools behind one allocator (a multi-slab). An
// allocation of n bytes takes a block of the smallest class whose blocks
// hold n bytes.
//
//	cs := []classes.Class{{Size: 4096, Blocks: 1024}, {Size: 16384, Blocks: 256}}
//	c, err := classes.Default(cs)     // or classes.New(cs, build) for other components
//	h, buf, err := c.AllocBytes(6000) // a 16 KiB block
//	err = c.Free(h)
//
// # Choosing an allocator
//
// One block size: use package pool directly; it is what each class is. A few
// sizes: use this package. Its classes never fragment externally (every
// free block of a class serves every allocation of that class) but waste
// the difference between the size asked for and the class's block size,
// which Stats reports as internal fragmentation; and memory given to one
// class cannot serve another, so size the classes for the mix you expect
// (Split divides a byte budget by weights). Variable sizes that must be
// contiguous: use package pages, which cuts runs of pages from one region.
//
// # Handles and remote frees
//
// A Handle is a pool.Handle plus its class index; each class's pool checks
// the block handle's generation, so stale, double-freed and foreign handles
// are rejected exactly as pool rejects them, and a handle whose class index
// was altered names a block of another pool and is rejected as foreign.
// Remote frees work as in pool: a worker holds one Sender, covering every
// class, and frees a finished request's blocks with one FreeChunk, which
// sends one chunk per class; the owner drains all classes with Drain.
//
// # Configuration
//
// Classes come as a list of sizes with block counts, or from Split, which
// divides a byte budget among sizes. Default composes each class from the
// shipped components (Go-heap blocks, chunk mailbox, LIFO reuse); New takes a
// build function that returns any backing, transport and policy per class,
// such as a backing/mmap region per class.
package classes
