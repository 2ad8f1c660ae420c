// Package mmap is a pool backing in one contiguous anonymous memory mapping:
// block i is bytes [i×size, (i+1)×size) of a private, read-write region
// mapped outside the Go heap. The region can be bound to a NUMA node, backed
// by transparent huge pages, pre-faulted and locked in memory, or mapped
// shared from a named file in /dev/shm (WithFile) so that its blocks
// outlive the process.
//
// Choose backing/heap by default. Choose this package when the blocks must
// be placed: on the NUMA node of the cores that use them (WithNode, Bind),
// in huge pages to spare TLB misses (WithHugePages), resident from the start
// (WithPrefault) or never swapped (WithLocked). It is Linux only: on other
// systems New fails with an error wrapping errors.ErrUnsupported, unless
// WithFallback lets it take Go heap memory instead (as locus.Default does).
//
//	b, err := mmap.New(4096, 16384, mmap.WithNode(0), mmap.WithPrefault())
//	p, err := pool.New(b, mailbox.New(), lifo.Policy{})
//
// # Rules for mapped memory
//
// The region is not Go memory, and that has consequences:
//
//   - The race detector does not see it: the race runtime ignores addresses
//     outside the Go arena, so a data race on block contents goes
//     unreported. Run race-mode tests of block handoffs between goroutines
//     over backing/heap, whose blocks the detector does see.
//   - No synchronization word may live in a block: no sync/atomic value, no
//     sync.Mutex, nothing another goroutine spins or waits on. The race
//     detector cannot see it, and it vanishes under its waiters at Close.
//   - No Go pointer may be stored in a block (through unsafe): the garbage
//     collector does not scan mapped memory and would free what it points
//     to.
//   - A slice returned by Block, or by Pool.Bytes, must not be used after
//     Close: it points into unmapped memory, and touching it kills the
//     process with a fault that no recover can catch. Nothing unmaps the
//     region but Close; a Backing that is never closed leaks it.
//   - Pages are faulted in lazily, on first touch, unless WithPrefault (or
//     WithLocked) is given; the first write to each page of a fresh region
//     pays a page fault. A page is placed on a NUMA node when it is first
//     faulted in, which is why a bind must come before the first touch.
//
// # NUMA
//
// WithNode (or Bind) sets an MPOL_BIND policy on the whole region with one
// mbind(2) call: its pages are then allocated only on that node, and an
// allocation fails rather than spill to another node. Placement asks the
// kernel where a page actually is. Nodes lists the machine's nodes and their
// CPUs, for pairing pools with the goroutines (pinned threads) that use them.
// A bind failure is a *BindError that says why (see Reason) and wraps the
// errno.
package mmap

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/locus-go/locus/internal/race"
	"github.com/locus-go/locus/internal/sysmem"
	"github.com/locus-go/locus/pool"
)

// maxNodes bounds the node IDs that Bind and WithNode accept: [0, 4096),
// above the kernel's own limit (MAX_NUMNODES is at most 1024, NODES_SHIFT
// 10). It also bounds the node mask that Bind builds (64 words).
const maxNodes = 4096

// Backing is blocks of one anonymous memory mapping. Build it with New; the
// zero Backing has no blocks. It is owned by the pool it is given to; like
// the pool, it is not safe for concurrent use.
type Backing struct {
	mem    []byte  // the whole mapping, page-rounded; nil once closed
	addr   uintptr // start of mem, for the syscalls and Span; 0 for a Go-heap region
	off    int     // offset of block 0 in mem: the page-rounded meta area of WithMeta
	meta   int     // bytes of the meta area (WithMeta)
	file   *file   // the mapped file and its lock (WithFile); nil for anonymous memory
	size   int     // block size
	n      int     // number of blocks; 0 once closed
	node   int     // node of the last successful bind, if bound
	bound  bool
	closed bool
	goHeap bool // WithFallback took Go heap memory instead of a mapping
	huge   bool // the kernel accepted the huge-page advice
}

var _ pool.Backing = (*Backing)(nil)

// file is the mapped file of WithFile, held open (and locked) until Close.
type file struct {
	f    *os.File
	path string
}

// Option configures New. The options are the functions of this package that
// return one.
type Option interface{ apply(*config) }

type config struct {
	bind     bool
	node     int
	huge     bool
	prefault bool
	locked   bool
	fallback bool
	path     string // WithFile
	hasPath  bool
	meta     int // WithMeta
	hasMeta  bool
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithHugePages asks for transparent huge pages: New aligns the region to
// the huge page size (2 MiB on x86-64 and arm64 with 4 KiB pages), rounds
// its length up to a multiple of it and advises the kernel with
// madvise(MADV_HUGEPAGE). The kernel honours the advice only where
// /sys/kernel/mm/transparent_hugepage/enabled is "always" or "madvise", and
// falls back to base pages silently when no huge page is free. New fails if
// the kernel was built without transparent huge pages (EINVAL).
func WithHugePages() Option { return optionFunc(func(c *config) { c.huge = true }) }

// WithFallback makes New take what the system offers instead of failing
// for want of it: huge-page advice the kernel refuses is dropped (HugePages
// reports false), and where this package cannot map memory (systems other
// than Linux) or the race detector is compiled in (it does not see mapped
// memory, so a data race on block contents would go unreported), the
// region is ordinary Go heap memory (Mapped reports false). It cannot be
// combined with WithNode or WithLocked, which need a mapping. locus.Default
// uses it with WithHugePages: huge pages where the system offers them, a
// clean fallback where it does not. Do not use it where the placement is
// the point: there a silent fallback hides the failure. With WithFallback,
// huge pages are asked for only for a region of at least two huge pages:
// below that the rounding would cost more memory than the TLB saves.
// WithPrefault does nothing to a Go-heap region.
func WithFallback() Option { return optionFunc(func(c *config) { c.fallback = true }) }

// WithNode binds the region to NUMA node node, as Bind does, right after
// mapping it and before anything touches it, so every page is allocated on
// that node. New fails with a *BindError if the bind fails; the region is
// then unmapped.
func WithNode(node int) Option {
	return optionFunc(func(c *config) { c.bind, c.node = true, node })
}

// WithPrefault faults every page in before New returns (after the bind, so
// the pages land on the bound node), with madvise(MADV_POPULATE_WRITE)
// where the kernel has it (Linux 5.14 and later) and by writing one byte per
// page elsewhere. It moves the cost of the first touch out of the hot path
// and makes the whole region resident at once: size it to fit in memory.
func WithPrefault() Option { return optionFunc(func(c *config) { c.prefault = true }) }

// WithLocked locks the region in memory with mlock(2), which also faults
// every page in: it is never swapped out. Locking counts against
// RLIMIT_MEMLOCK (ulimit -l) unless the process has CAP_IPC_LOCK; past the
// limit New fails with an error that wraps the errno (ENOMEM, or EPERM when
// the limit is 0) and says to raise the limit.
func WithLocked() Option { return optionFunc(func(c *config) { c.locked = true }) }

// WithFile maps the region from the file at path, shared (MAP_SHARED),
// instead of anonymous memory: a file under /dev/shm or any tmpfs or
// hugetlbfs mount, so that the blocks outlive the process and another
// process can map them after it. New creates the file (mode 0600) if it
// does not exist and sizes a new or empty file to exactly the region: the
// WithMeta area, page-rounded, then blockSize×blocks bytes (on hugetlbfs,
// which sizes files in huge pages only, rounded up to its page size). A
// file of another size is refused with an error wrapping
// pool.ErrInvalidConfig, and its contents are left alone. The contents of
// an existing file are kept: the blocks are not zeroed.
//
// The file has one owner at a time: New takes an exclusive lock on it
// (flock(2), LOCK_EX|LOCK_NB) that Close, or the owner's death, releases,
// and fails with an error wrapping ErrFileLocked while another Backing
// holds it, in this process or another. Close unmaps and unlocks the file
// but does not remove it: remove it (os.Remove) when its blocks are no
// longer wanted.
//
// Choose it for host memory that must survive a restart of the process
// that fills it (tier/host's WithSharedFile). Do not choose it for a file
// on a disk file system: the kernel then writes dirty pages back to the
// device at its own pace, with no checksum and no ordering; tier/disk is
// built for that. It cannot be combined with WithFallback (a Go-heap
// region shares nothing) or WithHugePages (use a hugetlbfs path for huge
// pages). Linux only: elsewhere New fails with an error wrapping
// errors.ErrUnsupported.
func WithFile(path string) Option {
	return optionFunc(func(c *config) { c.path, c.hasPath = path, true })
}

// WithMeta reserves n bytes for the caller's own metadata before block 0,
// in the same mapping: Meta returns them, and block 0 starts at the next
// page boundary (the next huge page on hugetlbfs). It needs WithFile: it
// is where a user of a shared file keeps what must outlive the process
// with the blocks (tier/host keeps a header per block there). n must be
// positive.
func WithMeta(n int) Option {
	return optionFunc(func(c *config) { c.meta, c.hasMeta = n, true })
}

// ErrFileLocked is the error New wraps when the file of WithFile is held
// by another Backing, in this process or another.
var ErrFileLocked = errors.New("mmap: file is mapped by another owner")

// New maps one region for blocks blocks of blockSize bytes each, zeroed,
// and applies the options in this order: huge-page advice, bind, prefault,
// lock. The region's length is blockSize×blocks rounded up to the page size
// (the huge page size with WithHugePages).
//
// It fails with an error wrapping pool.ErrInvalidConfig if either count is
// not positive, if blocks exceeds pool.MaxBlocks, if the region's length
// overflows an int or exceeds the memory this process may use (the smaller
// of its Go memory limit and the machine's physical memory), or if an option
// is nil; with a *BindError if WithNode's node is out of range or
// the bind fails; with an error wrapping the errno if a system call fails;
// and with an error wrapping errors.ErrUnsupported on systems other than
// Linux. On failure nothing stays mapped.
func New(blockSize, blocks int, opts ...Option) (*Backing, error) {
	if blockSize <= 0 || blocks <= 0 || blocks > pool.MaxBlocks {
		return nil, fmt.Errorf("%w: mmap backing of %d blocks of %d bytes", pool.ErrInvalidConfig, blocks, blockSize)
	}
	// A pool over it must fit too: refuse before mapping the region.
	if err := pool.CheckBlocks(blocks); err != nil {
		return nil, err
	}
	if blockSize > maxInt/blocks {
		return nil, fmt.Errorf("%w: %d blocks of %d bytes overflow an int", pool.ErrInvalidConfig, blocks, blockSize)
	}
	if err := sysmem.Fits(uint64(blockSize) * uint64(blocks)); err != nil {
		return nil, fmt.Errorf("%w: mmap backing of %d blocks of %d bytes: %v", pool.ErrInvalidConfig, blocks, blockSize, err)
	}
	var cfg config
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: mmap: nil option", pool.ErrInvalidConfig)
		}
		o.apply(&cfg)
	}
	if cfg.fallback && (cfg.bind || cfg.locked) {
		return nil, fmt.Errorf("%w: mmap: WithFallback cannot be combined with WithNode or WithLocked", pool.ErrInvalidConfig)
	}
	if cfg.bind {
		if err := checkNode(cfg.node); err != nil {
			return nil, err
		}
	}
	if cfg.hasPath || cfg.hasMeta {
		return newFileChecked(blockSize, blocks, cfg)
	}
	if cfg.fallback && (!canMap || race.Enabled) {
		// Go heap memory, zeroed by make; the garbage collector keeps it
		// until Close drops it.
		return &Backing{mem: make([]byte, blockSize*blocks), size: blockSize, n: blocks, goHeap: true}, nil
	}
	if cfg.fallback && cfg.huge && blockSize*blocks < 2*hugePageSize() {
		cfg.huge = false
	}
	align := os.Getpagesize()
	if cfg.huge {
		align = max(hugePageSize(), align)
	}
	length := blockSize * blocks
	if length > maxInt-align {
		return nil, fmt.Errorf("%w: %d blocks of %d bytes: region overflows an int when rounded to %d bytes",
			pool.ErrInvalidConfig, blocks, blockSize, align)
	}
	length = (length + align - 1) / align * align
	return newBacking(blockSize, blocks, length, align, cfg)
}

const maxInt = int(^uint(0) >> 1)

// newFileChecked checks the options of a file mapping, then maps it.
func newFileChecked(blockSize, blocks int, cfg config) (*Backing, error) {
	switch {
	case !cfg.hasPath:
		return nil, fmt.Errorf("%w: mmap: WithMeta needs WithFile", pool.ErrInvalidConfig)
	case cfg.path == "":
		return nil, fmt.Errorf("%w: mmap: WithFile with an empty path", pool.ErrInvalidConfig)
	case cfg.fallback || cfg.huge:
		return nil, fmt.Errorf("%w: mmap: WithFile cannot be combined with WithFallback or WithHugePages", pool.ErrInvalidConfig)
	case cfg.hasMeta && (cfg.meta <= 0 || cfg.meta > maxInt/2):
		return nil, fmt.Errorf("%w: mmap: WithMeta(%d)", pool.ErrInvalidConfig, cfg.meta)
	case cfg.meta > maxInt/2-blockSize*blocks:
		return nil, fmt.Errorf("%w: mmap: %d blocks of %d bytes and %d bytes of meta overflow an int", pool.ErrInvalidConfig, blocks, blockSize, cfg.meta)
	}
	if err := sysmem.Fits(uint64(blockSize)*uint64(blocks) + uint64(cfg.meta)); err != nil {
		return nil, fmt.Errorf("%w: mmap backing of %d blocks of %d bytes: %v", pool.ErrInvalidConfig, blocks, blockSize, err)
	}
	return newFileBacking(blockSize, blocks, cfg)
}

// Len returns the number of blocks; 0 after Close, and for a nil or zero
// Backing.
func (b *Backing) Len() int {
	if b == nil {
		return 0
	}
	return b.n
}

// Block returns block i: blockSize bytes with no spare capacity, so an
// append cannot spill into block i+1. It returns nil if i is not in
// [0, Len()); after Close every index is out of range.
func (b *Backing) Block(i int) []byte {
	if uint(i) >= uint(b.Len()) {
		return nil
	}
	lo, hi := b.off+i*b.size, b.off+(i+1)*b.size
	return b.mem[lo:hi:hi]
}

// Meta returns the metadata area of WithMeta: exactly the bytes asked
// for, before block 0 in the same mapping (so, with WithFile, in the same
// file). It returns nil without WithMeta and after Close. Like a block,
// it must not be used after Close.
func (b *Backing) Meta() []byte {
	if b == nil || b.mem == nil || b.meta == 0 {
		return nil
	}
	return b.mem[:b.meta:b.meta]
}

// Path returns the file of WithFile, or "" for anonymous memory.
func (b *Backing) Path() string {
	if b == nil || b.file == nil {
		return ""
	}
	return b.file.path
}

// Mapped reports whether the blocks live in a memory mapping (false for a
// Go-heap region that WithFallback took instead, and after Close).
func (b *Backing) Mapped() bool { return b != nil && b.mem != nil && !b.goHeap }

// HugePages reports whether the kernel accepted the huge-page advice of
// WithHugePages. The kernel may still back parts of the region with base
// pages when no huge page is free (see AnonHugePages in /proc/self/smaps).
func (b *Backing) HugePages() bool { return b != nil && b.mem != nil && b.huge }

// Span returns the start address and length of the whole mapping: blocks
// occupy Len()×blockSize bytes after the page-rounded WithMeta area (at
// the start without one), and the length is rounded up to the page size
// (the huge page size with WithHugePages or on hugetlbfs). It returns 0, 0
// after Close. The address is for diagnostics and for system calls such as
// madvise on the region; it is not a Go pointer.
func (b *Backing) Span() (addr uintptr, length int) {
	if b == nil || b.goHeap {
		return 0, 0
	}
	return b.addr, len(b.mem)
}

// Node returns the node of the last Bind (or WithNode) that succeeded, or -1
// if the region was never bound. It is what was asked for; Placement reports
// what the kernel did.
func (b *Backing) Node() int {
	if b == nil || !b.bound {
		return -1
	}
	return b.node
}

// Bind binds the whole region to NUMA node node: one mbind(2) call with
// MPOL_BIND and MPOL_MF_STRICT. Pages faulted in afterwards are allocated
// only on that node: when it runs out of memory the kernel reclaims, swaps
// or OOM-kills rather than spill to another node. Call it before the blocks
// are first touched: pages already faulted in are not moved, and if any of
// them is on another node Bind fails with EIO (errors.Is(err, unix.EIO)),
// although the kernel has then still applied the policy to later faults.
//
// Bind validates node before the call: it must be in [0, 4096) and, where
// /sys/devices/system/node/possible is readable, a possible node of this
// machine. A failure is a *BindError; match its Reason with errors.Is (for
// example errors.Is(err, mmap.ReasonPermissionDenied)) and its errno with
// errors.Is too. After Close, Bind fails with an error wrapping
// pool.ErrClosed.
func (b *Backing) Bind(node int) error {
	if b == nil {
		return fmt.Errorf("%w: mmap: bind: nil Backing", pool.ErrInvalidArgument)
	}
	if b.closed {
		return fmt.Errorf("mmap: bind: %w", pool.ErrClosed)
	}
	if b.mem == nil {
		return fmt.Errorf("%w: mmap: bind: backing was not built with New", pool.ErrInvalidArgument)
	}
	if b.goHeap {
		return fmt.Errorf("mmap: bind: a Go-heap region (WithFallback) cannot be bound: %w", errors.ErrUnsupported)
	}
	if err := checkNode(node); err != nil {
		return err
	}
	if err := b.bind(node); err != nil {
		return err
	}
	b.node, b.bound = node, true
	return nil
}

// Placement reports the NUMA node that holds the first page of the region,
// as the kernel sees it: get_mempolicy(2) with MPOL_F_NODE|MPOL_F_ADDR.
//
// A page that was never touched is on no node yet. Placement therefore
// first faults the first page in, with madvise(MADV_POPULATE_WRITE), which
// allocates it under the region's policy (on the bound node after a bind)
// and leaves its contents unchanged; that page then counts against memory
// like any touched page. Kernels before Linux 5.14 lack MADV_POPULATE_WRITE:
// there Placement never writes, and fails with an error wrapping
// errors.ErrUnsupported if the first page is not resident yet.
//
// The first page is a sample: the other pages follow the same policy but
// are each placed when first touched (see /proc/self/numa_maps for counts
// per node). On a kernel without NUMA, Placement fails with an error
// wrapping ENOSYS (which matches errors.ErrUnsupported). After Close it
// fails with an error wrapping pool.ErrClosed.
func (b *Backing) Placement() (node int, err error) {
	if b == nil {
		return -1, fmt.Errorf("%w: mmap: placement: nil Backing", pool.ErrInvalidArgument)
	}
	if b.closed {
		return -1, fmt.Errorf("mmap: placement: %w", pool.ErrClosed)
	}
	if b.mem == nil {
		return -1, fmt.Errorf("%w: mmap: placement: backing was not built with New", pool.ErrInvalidArgument)
	}
	if b.goHeap {
		return -1, fmt.Errorf("mmap: placement: a Go-heap region (WithFallback) has no placement to report: %w", errors.ErrUnsupported)
	}
	return b.placement()
}

// Close unmaps the region, once: Len is 0 afterwards and a later Close
// returns nil without unmapping again. Every slice returned by Block must be
// dead by then (see the package doc).
func (b *Backing) Close() error {
	if b == nil {
		return nil
	}
	if b.closed || b.mem == nil {
		b.closed = true
		return nil
	}
	mem, f := b.mem, b.file
	b.mem, b.addr, b.n, b.bound, b.closed = nil, 0, 0, false, true
	if b.goHeap {
		return nil // the garbage collector takes it
	}
	var err error
	if uerr := unmap(mem); uerr != nil {
		err = fmt.Errorf("mmap: munmap of %d bytes: %w", len(mem), uerr)
	}
	if f != nil {
		// After the unmap: the lock guards the mapping's life.
		if cerr := f.f.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("mmap: closing %s: %w", f.path, cerr))
		}
	}
	return err
}

// Node is one NUMA node of the machine.
type Node struct {
	// ID is the node number, as Bind and WithNode take it.
	ID int
	// CPUs are the node's online CPUs, ascending. It is empty for a node
	// with memory but no CPUs (a CXL or HBM memory expander, say).
	CPUs []int
}

// Nodes lists the machine's online NUMA nodes and their CPUs, ascending by
// ID, from sysfs (/sys/devices/system/node/online and nodeN/cpulist).
//
// On a kernel built without NUMA, which has no /sys/devices/system/node,
// Nodes reports a single node 0 holding every online CPU
// (/sys/devices/system/cpu/online): the machine is one memory node, though a
// Bind to it fails with ENOSYS. It fails if sysfs is not mounted or cannot
// be parsed, and with an error wrapping errors.ErrUnsupported on systems
// other than Linux.
func Nodes() ([]Node, error) { return nodes() }

// Reason classifies a bind failure by its likely cause, so a caller can tell
// a node that does not exist from a sandbox that forbids the call or a
// kernel without NUMA. A Reason is also an error, so a *BindError can be
// matched against one with errors.Is.
type Reason uint8

// The reasons a bind fails.
const (
	// ReasonInvalidNode: the node is out of range or not a possible node of
	// this machine; Bind rejected it before the system call.
	ReasonInvalidNode Reason = iota + 1
	// ReasonPermissionDenied: mbind failed with EPERM or EACCES, typically
	// a seccomp filter (Docker's default profile) or a missing
	// CAP_SYS_NICE.
	ReasonPermissionDenied
	// ReasonSyscallUnavailable: mbind failed with ENOSYS, a kernel built
	// without NUMA (or a sandbox that hides the call).
	ReasonSyscallUnavailable
	// ReasonSyscallFailed: mbind failed with any other errno, for example
	// EINVAL for a node that has no memory or is outside the process's
	// cpuset, or EIO for pages already faulted in on another node.
	ReasonSyscallFailed
)

// String returns the reason's name: "invalid_node", "permission_denied",
// "syscall_unavailable" or "syscall_failed".
func (r Reason) String() string {
	switch r {
	case ReasonInvalidNode:
		return "invalid_node"
	case ReasonPermissionDenied:
		return "permission_denied"
	case ReasonSyscallUnavailable:
		return "syscall_unavailable"
	case ReasonSyscallFailed:
		return "syscall_failed"
	}
	return "Reason(" + strconv.Itoa(int(r)) + ")"
}

// Error returns "mmap: bind: " followed by the reason's name.
func (r Reason) Error() string { return "mmap: bind: " + r.String() }

// BindError reports a failed bind of a region to a NUMA node.
type BindError struct {
	// Node is the node the bind asked for.
	Node int
	// Reason classifies the failure.
	Reason Reason
	// Err is the errno of the failed mbind call (a syscall.Errno), or nil
	// when the node was rejected before the call.
	Err error
	// Detail says why an invalid node was rejected; it may be empty.
	Detail string
}

// Error describes the failure, for example
// "mmap: bind to NUMA node 1: permission_denied: operation not permitted".
func (e *BindError) Error() string {
	s := "mmap: bind to NUMA node " + strconv.Itoa(e.Node) + ": " + e.Reason.String()
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the errno, so that errors.Is(err, unix.EPERM) and the like
// work.
func (e *BindError) Unwrap() error { return e.Err }

// Is reports whether target is e's Reason, so that errors.Is(err,
// mmap.ReasonSyscallUnavailable) and the like work.
func (e *BindError) Is(target error) bool {
	r, ok := target.(Reason)
	return ok && r == e.Reason
}

// checkNode rejects a node outside [0, maxNodes) before any system call.
func checkNode(node int) error {
	if node < 0 || node >= maxNodes {
		return &BindError{Node: node, Reason: ReasonInvalidNode,
			Detail: "want 0 to " + strconv.Itoa(maxNodes-1)}
	}
	return nil
}
