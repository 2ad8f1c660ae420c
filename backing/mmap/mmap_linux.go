//go:build linux

package mmap

import (
	"errors"
	"fmt"
	"io/fs"
	"math/bits"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/locus-go/locus/pool"
	"golang.org/x/sys/unix"
)

// The system calls of this file that tests replace to inject failures and to
// count mappings. Nothing else assigns them.
var (
	sysMmap    = unix.MmapPtr
	sysMunmap  = unix.MunmapPtr
	sysMadvise = unix.Madvise
	sysMlock   = unix.Mlock
	sysMbind   = mbind
)

// sysfsRoot holds the node and cpu directories that Nodes and Bind read;
// sysfs is it as a file system, replaced by tests.
const sysfsRoot = "/sys/devices/system"

var sysfs = os.DirFS(sysfsRoot)

// canMap: this system has the anonymous mappings New makes.
const canMap = true

func newBacking(blockSize, blocks, length, align int, cfg config) (*Backing, error) {
	mem, err := mapRegion(length, align)
	if err != nil {
		return nil, fmt.Errorf("mmap: mapping %d bytes: %w", length, err)
	}
	b := &Backing{
		mem: mem,
		// The mapping is outside the Go heap: the garbage collector
		// neither moves nor frees it, so its address stays valid as a
		// plain integer until Close unmaps it.
		addr: uintptr(unsafe.Pointer(unsafe.SliceData(mem))),
		size: blockSize,
		n:    blocks,
	}
	if err := b.setup(cfg); err != nil {
		if cerr := b.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return nil, err
	}
	return b, nil
}

// mapRegion maps length bytes of private anonymous memory, zeroed, starting
// at a multiple of align (a multiple of the page size). For an align above
// the page size it maps align−page bytes more and unmaps the excess on both
// sides, as the Go runtime does for its arenas.
func mapRegion(length, align int) ([]byte, error) {
	extra := 0
	if page := os.Getpagesize(); align > page {
		extra = align - page // New checked that length+align fits an int
	}
	p, err := sysMmap(-1, 0, nil, uintptr(length+extra),
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, err
	}
	head := 0
	if r := int(uintptr(p) % uintptr(align)); r != 0 {
		head = align - r // at most extra: p is page-aligned
	}
	// unsafe.Add stays inside the mapping just made: head+length+tail is
	// its length. The pointers are outside the Go heap, which the garbage
	// collector ignores.
	start := unsafe.Add(p, head)
	if head > 0 {
		if err := sysMunmap(p, uintptr(head)); err != nil {
			_ = sysMunmap(p, uintptr(length+extra))
			return nil, err
		}
	}
	if tail := extra - head; tail > 0 {
		if err := sysMunmap(unsafe.Add(start, length), uintptr(tail)); err != nil {
			_ = sysMunmap(start, uintptr(length+tail))
			return nil, err
		}
	}
	// The slice covers exactly the length bytes still mapped at start, and
	// stays in use only until unmap.
	return unsafe.Slice((*byte)(start), length), nil
}

// unmap unmaps a region that mapRegion returned.
func unmap(mem []byte) error {
	// mem is exactly what mapRegion left mapped.
	return sysMunmap(unsafe.Pointer(unsafe.SliceData(mem)), uintptr(len(mem)))
}

// setup applies the options to a fresh region, in the documented order:
// huge-page advice before any fault, bind before the first touch, prefault
// after the bind, lock last (mlock faults every page in).
func (b *Backing) setup(cfg config) error {
	if cfg.huge {
		err := sysMadvise(b.mem, unix.MADV_HUGEPAGE)
		b.huge = err == nil
		if err != nil && !cfg.fallback {
			hint := ""
			if errors.Is(err, unix.EINVAL) {
				hint = " (kernel without transparent huge pages?)"
			}
			return fmt.Errorf("mmap: madvise(MADV_HUGEPAGE) on %d bytes: %w%s", len(b.mem), err, hint)
		}
	}
	if cfg.bind {
		if err := b.Bind(cfg.node); err != nil {
			return err
		}
	}
	if cfg.prefault {
		if err := b.prefault(); err != nil {
			return err
		}
	}
	if cfg.locked {
		if err := b.lock(); err != nil {
			return err
		}
	}
	return nil
}

// prefault faults every page of the region in for writing.
func (b *Backing) prefault() error {
	err := sysMadvise(b.mem, unix.MADV_POPULATE_WRITE)
	if errors.Is(err, unix.EINVAL) {
		// Linux before 5.14 has no MADV_POPULATE_WRITE. Touch one byte
		// per page instead: the region is fresh, so it reads as zero and
		// nothing else can see it yet; writing a zero changes nothing but
		// the page's residency.
		page := os.Getpagesize()
		if b.file != nil {
			// A file's pages hold data: read one byte per page, which
			// faults it in (a tmpfs page is allocated by a read fault
			// too) and changes nothing; KeepAlive keeps the reads.
			var sum byte
			for off := 0; off < len(b.mem); off += page {
				sum += b.mem[off]
			}
			runtime.KeepAlive(sum)
			return nil
		}
		for off := 0; off < len(b.mem); off += page {
			b.mem[off] = 0
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("mmap: prefault: madvise(MADV_POPULATE_WRITE) on %d bytes: %w", len(b.mem), err)
	}
	return nil
}

// lock locks the region in memory, saying what to do when the limit is hit.
func (b *Backing) lock() error {
	err := sysMlock(b.mem)
	if err == nil {
		return nil
	}
	if errors.Is(err, unix.ENOMEM) || errors.Is(err, unix.EPERM) {
		limit := "unknown"
		var rl unix.Rlimit
		if unix.Getrlimit(unix.RLIMIT_MEMLOCK, &rl) == nil {
			if rl.Cur == unix.RLIM_INFINITY {
				limit = "unlimited"
			} else {
				limit = strconv.FormatUint(rl.Cur, 10) + " bytes"
			}
		}
		return fmt.Errorf("mmap: mlock of %d bytes: %w: raise the locked-memory limit "+
			"(RLIMIT_MEMLOCK, ulimit -l; now %s) or grant CAP_IPC_LOCK", len(b.mem), err, limit)
	}
	return fmt.Errorf("mmap: mlock of %d bytes: %w", len(b.mem), err)
}

// bind checks node against the machine's possible nodes, then binds.
func (b *Backing) bind(node int) error {
	// A kernel without NUMA has no node directory: leave the verdict to
	// mbind, which fails with ENOSYS there.
	if data, err := fs.ReadFile(sysfs, "node/possible"); err == nil {
		possible, err := parseList(string(data))
		if err == nil {
			if _, found := slices.BinarySearch(possible, node); !found {
				return &BindError{Node: node, Reason: ReasonInvalidNode,
					Detail: "not a possible node of this machine (possible: " + strings.TrimSpace(string(data)) + ")"}
			}
		}
	}
	if err := sysMbind(b.addr, len(b.mem), node); err != nil {
		return &BindError{Node: node, Reason: classify(err), Err: err}
	}
	return nil
}

// classify maps an mbind errno to the Reason that names its likely cause.
func classify(err error) Reason {
	switch {
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return ReasonPermissionDenied
	case errors.Is(err, unix.ENOSYS):
		return ReasonSyscallUnavailable
	}
	return ReasonSyscallFailed
}

// mbind sets an MPOL_BIND policy for node on [addr, addr+length). x/sys/unix
// has no wrapper for mbind(2), so it is called directly.
func mbind(addr uintptr, length, node int) error {
	// The node mask is an array of C unsigned longs (Go uint: the same
	// size on every Linux port), one bit per node.
	mask := make([]uint, node/bits.UintSize+1)
	mask[node/bits.UintSize] = 1 << (node % bits.UintSize)
	// maxnode is one more than the number of mask bits: the kernel
	// decrements it before reading the mask (get_nodes in
	// mm/mempolicy.c), so it reads maxnode−1 bits. libnuma passes the
	// mask's bit count plus one for the same reason. A maxnode of node+1
	// would make the kernel read bits 0 to node−1 only: the one bit set
	// would never be read, the mask would be empty and every bind would
	// fail with EINVAL on a NUMA kernel.
	maxnode := len(mask)*bits.UintSize + 1
	// MPOL_MF_STRICT without MPOL_MF_MOVE: move nothing, but fail with
	// EIO if a page already faulted in sits on another node, instead of
	// reporting a bind that did not happen for it.
	//
	// The unsafe.Pointer conversion happens in the call's argument list,
	// which keeps mask alive and in place for the duration of the call.
	// addr is the start of a mapping outside the Go heap.
	_, _, errno := unix.Syscall6(unix.SYS_MBIND, addr, uintptr(length), unix.MPOL_BIND,
		uintptr(unsafe.Pointer(&mask[0])), uintptr(maxnode), unix.MPOL_MF_STRICT)
	if errno != 0 {
		return errno
	}
	return nil
}

// placement faults the first page in if it must, then asks its node.
func (b *Backing) placement() (int, error) {
	first := b.mem[:os.Getpagesize()]
	if err := sysMadvise(first, unix.MADV_POPULATE_WRITE); err != nil {
		if !errors.Is(err, unix.EINVAL) {
			return -1, fmt.Errorf("mmap: placement: madvise(MADV_POPULATE_WRITE): %w", err)
		}
		// Linux before 5.14: never write, only look.
		resident, err := residentPage(b.addr)
		if err != nil {
			return -1, err
		}
		if !resident {
			return -1, fmt.Errorf("mmap: placement: the first page was never touched, and this kernel "+
				"has no MADV_POPULATE_WRITE to fault it in without writing: %w", errors.ErrUnsupported)
		}
	}
	// get_mempolicy(2) with MPOL_F_NODE|MPOL_F_ADDR stores the node of the
	// page at addr into its first argument, a C int. The conversion in the
	// argument list keeps node alive for the call; b.addr is the start of
	// the mapping, outside the Go heap.
	var node int32
	_, _, errno := unix.Syscall6(unix.SYS_GET_MEMPOLICY, uintptr(unsafe.Pointer(&node)), 0, 0,
		b.addr, unix.MPOL_F_NODE|unix.MPOL_F_ADDR, 0)
	if errno != 0 {
		return -1, fmt.Errorf("mmap: placement: get_mempolicy: %w", errno)
	}
	return int(node), nil
}

// residentPage reports whether the page at addr is in memory (mincore(2),
// which x/sys/unix does not wrap on Linux).
func residentPage(addr uintptr) (bool, error) {
	var vec [1]byte
	// The conversion in the argument list keeps vec alive for the call,
	// which writes one byte for one page into it.
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, addr, uintptr(os.Getpagesize()), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		return false, fmt.Errorf("mmap: placement: mincore: %w", errno)
	}
	return vec[0]&1 != 0, nil
}

// hugePageSize is the size of a transparent huge page (a PMD mapping), from
// sysfs, or 2 MiB if sysfs does not say.
var hugePageSize = sync.OnceValue(func() int {
	const fallback = 2 << 20
	data, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size")
	if err != nil {
		return fallback
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || n <= 0 || n > 1<<30 || n&(n-1) != 0 {
		return fallback
	}
	return n
})

func nodes() ([]Node, error) { return readNodes(sysfs) }

// readNodes reads the topology from fsys, a view of /sys/devices/system.
func readNodes(fsys fs.FS) ([]Node, error) {
	ids, err := readList(fsys, "node/online")
	if err != nil {
		if _, serr := fs.Stat(fsys, "node"); !errors.Is(serr, fs.ErrNotExist) {
			return nil, err
		}
		// No node directory: a kernel without NUMA is one node.
		cpus, err := readList(fsys, "cpu/online")
		if err != nil {
			return nil, err
		}
		return []Node{{ID: 0, CPUs: cpus}}, nil
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("mmap: %s/node/online lists no node", sysfsRoot)
	}
	out := make([]Node, 0, len(ids))
	for _, id := range ids {
		cpus, err := readList(fsys, "node/node"+strconv.Itoa(id)+"/cpulist")
		if err != nil {
			return nil, err
		}
		out = append(out, Node{ID: id, CPUs: cpus})
	}
	return out, nil
}

// readList reads and parses one sysfs list file of fsys.
func readList(fsys fs.FS, name string) ([]int, error) {
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("mmap: reading %s/%s: %w", sysfsRoot, name, err)
	}
	list, err := parseList(string(data))
	if err != nil {
		return nil, fmt.Errorf("mmap: %s/%s: %w", sysfsRoot, name, err)
	}
	return list, nil
}

// hugetlbfsMagic is statfs(2)'s f_type of a hugetlbfs mount.
const hugetlbfsMagic = 0x958458f6

// newFileBacking maps the file of WithFile, shared: the meta area, page
// rounded (huge-page rounded on hugetlbfs), then the blocks. It creates,
// locks and sizes the file first; on failure nothing stays mapped, open or
// locked.
func newFileBacking(blockSize, blocks int, cfg config) (b *Backing, err error) {
	f, err := os.OpenFile(cfg.path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("mmap: %w", err)
	}
	defer func() {
		if err != nil {
			_ = f.Close() // releases the lock too
		}
	}()
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("mmap: %s: %w", cfg.path, err)
	}
	var lerr error
	var st unix.Statfs_t
	// The calls run inside Control, which keeps the descriptor open for
	// them. The lock belongs to f's open file description: it lasts
	// until f is closed, whoever holds the number.
	if cerr := rc.Control(func(fd uintptr) {
		if lerr = unix.Flock(int(fd), unix.LOCK_EX|unix.LOCK_NB); lerr == nil {
			lerr = unix.Fstatfs(int(fd), &st)
		}
	}); cerr != nil {
		return nil, fmt.Errorf("mmap: %s: %w", cfg.path, cerr)
	}
	if errors.Is(lerr, unix.EWOULDBLOCK) {
		return nil, fmt.Errorf("%w: %s: %w", ErrFileLocked, cfg.path, lerr)
	}
	if lerr != nil {
		return nil, fmt.Errorf("mmap: %s: %w", cfg.path, lerr)
	}
	align := os.Getpagesize()
	if uint32(st.Type) == hugetlbfsMagic && int(st.Bsize) > align {
		align = int(st.Bsize) // hugetlbfs sizes and maps files in huge pages only
	}
	off := 0
	if cfg.meta > 0 {
		off = (cfg.meta + align - 1) / align * align
	}
	size := off + blockSize*blocks // newFileChecked bounded it
	mapLen := (size + align - 1) / align * align
	if align > os.Getpagesize() {
		size = mapLen
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("mmap: %w", err)
	}
	switch {
	case fi.Size() == 0:
		if err := f.Truncate(int64(size)); err != nil {
			return nil, fmt.Errorf("mmap: sizing %s to %d bytes: %w", cfg.path, size, err)
		}
	case fi.Size() != int64(size):
		return nil, fmt.Errorf("%w: mmap: %s holds %d bytes, not the %d of %d blocks of %d bytes and %d of meta",
			pool.ErrInvalidConfig, cfg.path, fi.Size(), size, blocks, blockSize, cfg.meta)
	}
	var p unsafe.Pointer
	var merr error
	if cerr := rc.Control(func(fd uintptr) {
		// The last page may run past the end of the file (size is exact,
		// mapLen page-rounded): that is allowed, and no block reaches
		// past the end.
		p, merr = sysMmap(int(fd), 0, nil, uintptr(mapLen), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	}); cerr != nil {
		return nil, fmt.Errorf("mmap: %s: %w", cfg.path, cerr)
	}
	if merr != nil {
		return nil, fmt.Errorf("mmap: mapping %d bytes of %s: %w", mapLen, cfg.path, merr)
	}
	b = &Backing{
		// mapLen bytes are mapped at p, outside the Go heap, until
		// Close unmaps them; the mapping holds the file, not f.
		mem:  unsafe.Slice((*byte)(p), mapLen),
		addr: uintptr(p),
		off:  off,
		meta: cfg.meta,
		file: &file{f: f, path: cfg.path},
		size: blockSize,
		n:    blocks,
	}
	if err := b.setup(cfg); err != nil {
		b.file = nil // the deferred Close above closes f
		if cerr := b.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return nil, err
	}
	return b, nil
}
