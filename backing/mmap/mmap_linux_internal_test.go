//go:build linux

package mmap

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/locus-go/locus/internal/race"
	"github.com/locus-go/locus/pool"
)

// None of these tests runs in parallel: they replace the package's system
// call variables.

// tracker counts the bytes that sysMmap mapped and sysMunmap unmapped, and
// remembers the last region mapped.
type tracker struct {
	mapped, unmapped int
	unmaps           int
	lastAddr         uintptr
	lastLen          int
}

func track(t *testing.T) *tracker {
	tr := &tracker{}
	origMmap, origMunmap := sysMmap, sysMunmap
	sysMmap = func(fd int, off int64, addr unsafe.Pointer, n uintptr, prot, flags int) (unsafe.Pointer, error) {
		p, err := origMmap(fd, off, addr, n, prot, flags)
		if err == nil {
			tr.mapped += int(n)
			tr.lastAddr, tr.lastLen = uintptr(p), int(n)
		}
		return p, err
	}
	sysMunmap = func(p unsafe.Pointer, n uintptr) error {
		err := origMunmap(p, n)
		if err == nil {
			tr.unmapped += int(n)
			tr.unmaps++
		}
		return err
	}
	t.Cleanup(func() { sysMmap, sysMunmap = origMmap, origMunmap })
	return tr
}

// checkNothingMapped fails t if the tracked regions are not all unmapped,
// by the books and according to the kernel.
func (tr *tracker) checkNothingMapped(t *testing.T) {
	t.Helper()
	if tr.mapped == 0 {
		t.Fatal("nothing was mapped: the failure came before mapping")
	}
	if tr.mapped != tr.unmapped {
		t.Errorf("mapped %d bytes, unmapped %d", tr.mapped, tr.unmapped)
	}
	// msync fails with ENOMEM on a range that is not (entirely) mapped.
	_, _, errno := unix.Syscall(unix.SYS_MSYNC, tr.lastAddr, uintptr(tr.lastLen), unix.MS_ASYNC)
	if errno != unix.ENOMEM {
		t.Errorf("msync on the region after the failure: %v, want ENOMEM (still mapped)", errno)
	}
}

func TestCloseUnmapsOnce(t *testing.T) {
	tr := track(t)
	b, err := New(4096, 3, WithHugePages())
	if err != nil {
		t.Fatal(err)
	}
	addr, length := b.Span()
	if hp := hugePageSize(); addr%uintptr(hp) != 0 || length%hp != 0 {
		t.Errorf("huge-page span %#x+%d is not aligned to %d", addr, length, hp)
	}
	before := tr.unmaps
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if got := tr.unmaps - before; got != 1 {
		t.Errorf("Close twice made %d munmap calls, want 1", got)
	}
	tr.checkNothingMapped(t)
}

func TestNewLeaksNothingOnFailure(t *testing.T) {
	errnoAt := func(advice int, errno unix.Errno) func([]byte, int) error {
		return func(b []byte, a int) error {
			if a == advice {
				return errno
			}
			return unix.Madvise(b, a)
		}
	}
	for _, c := range []struct {
		name     string
		opts     []Option
		inject   func()
		matches  []error
		text     string
		realBind bool // calls the real mbind for node 0
	}{
		{
			name:    "missing node",
			opts:    []Option{WithNode(missingNode(t))},
			matches: []error{ReasonInvalidNode},
		},
		{
			name:    "mbind EPERM",
			opts:    []Option{WithNode(0)},
			inject:  func() { sysMbind = func(uintptr, int, int) error { return unix.EPERM } },
			matches: []error{ReasonPermissionDenied, unix.EPERM},
		},
		{
			name:    "mbind EACCES",
			opts:    []Option{WithNode(0)},
			inject:  func() { sysMbind = func(uintptr, int, int) error { return unix.EACCES } },
			matches: []error{ReasonPermissionDenied, unix.EACCES},
		},
		{
			name:    "mbind ENOSYS",
			opts:    []Option{WithNode(0)},
			inject:  func() { sysMbind = func(uintptr, int, int) error { return unix.ENOSYS } },
			matches: []error{ReasonSyscallUnavailable, unix.ENOSYS, errors.ErrUnsupported},
		},
		{
			name:    "mbind EINVAL",
			opts:    []Option{WithNode(0)},
			inject:  func() { sysMbind = func(uintptr, int, int) error { return unix.EINVAL } },
			matches: []error{ReasonSyscallFailed, unix.EINVAL},
		},
		{
			name:    "no transparent huge pages",
			opts:    []Option{WithHugePages()},
			inject:  func() { sysMadvise = errnoAt(unix.MADV_HUGEPAGE, unix.EINVAL) },
			matches: []error{unix.EINVAL},
			text:    "transparent huge pages",
		},
		{
			name:    "prefault out of memory",
			opts:    []Option{WithPrefault()},
			inject:  func() { sysMadvise = errnoAt(unix.MADV_POPULATE_WRITE, unix.ENOMEM) },
			matches: []error{unix.ENOMEM},
		},
		{
			name:     "mlock over the limit",
			opts:     []Option{WithNode(0), WithPrefault(), WithLocked()},
			inject:   func() { sysMlock = func([]byte) error { return unix.ENOMEM } },
			matches:  []error{unix.ENOMEM},
			text:     "raise the locked-memory limit",
			realBind: true,
		},
		{
			name:    "mlock with a zero limit",
			opts:    []Option{WithLocked()},
			inject:  func() { sysMlock = func([]byte) error { return unix.EPERM } },
			matches: []error{unix.EPERM},
			text:    "RLIMIT_MEMLOCK",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			madvise, mlock, mbind := sysMadvise, sysMlock, sysMbind
			defer func() { sysMadvise, sysMlock, sysMbind = madvise, mlock, mbind }()
			if c.inject != nil {
				c.inject()
			}
			if c.realBind {
				if err := probeBind(); err != nil {
					t.Skipf("mbind to node 0 fails here: %v", err)
				}
			}
			tr := track(t)
			b, err := New(4096, 64, c.opts...)
			if err == nil {
				b.Close()
				t.Fatal("New succeeded")
			}
			if b != nil {
				t.Fatal("New returned a backing with its error")
			}
			for _, target := range c.matches {
				if !errors.Is(err, target) {
					t.Errorf("error %q does not match %v", err, target)
				}
			}
			if !strings.Contains(err.Error(), c.text) {
				t.Errorf("error %q does not say %q", err, c.text)
			}
			tr.checkNothingMapped(t)
			t.Logf("%v", err)
		})
	}
}

// missingNode returns the first node that is not possible on this machine.
func missingNode(t *testing.T) int {
	list, err := readList(sysfs, "node/possible")
	if err != nil || len(list) == 0 {
		return maxNodes - 1
	}
	return list[len(list)-1] + 1
}

// probeBind binds a scratch region to node 0 and reports the error.
func probeBind() error {
	mem, err := unix.Mmap(-1, 0, os.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return err
	}
	defer unix.Munmap(mem)
	// mem is a mapping outside the Go heap, alive until the deferred unmap.
	return mbind(uintptr(unsafe.Pointer(&mem[0])), len(mem), 0)
}

// TestKernelRejectsMissingNode lets the kernel judge a node that sysfs would
// have rejected: mbind must fail with EINVAL, classified syscall_failed, and
// New must unmap.
func TestKernelRejectsMissingNode(t *testing.T) {
	if err := probeBind(); err != nil {
		t.Skipf("mbind to node 0 fails here: %v", err)
	}
	missing := missingNode(t)
	saved := sysfs
	sysfs = fstest.MapFS{"node/possible": {Data: []byte("0-4095\n")}}
	defer func() { sysfs = saved }()
	for _, node := range []int{missing, 1000, maxNodes - 1} {
		tr := track(t)
		_, err := New(4096, 16, WithNode(node))
		var be *BindError
		if !errors.As(err, &be) || be.Reason != ReasonSyscallFailed || !errors.Is(err, unix.EINVAL) {
			t.Fatalf("New(WithNode(%d)) with a lying sysfs = %v, want syscall_failed EINVAL", node, err)
		}
		t.Logf("kernel verdict on node %d: %v", node, err)
		tr.checkNothingMapped(t)
	}
}

// TestMaxnode pins the fix of the record's off-by-one: the kernel reads
// maxnode−1 bits of the mask, so maxnode = node+1 hides the node's own bit.
func TestMaxnode(t *testing.T) {
	if err := probeBind(); err != nil {
		t.Skipf("mbind to node 0 fails here: %v", err)
	}
	mem, err := unix.Mmap(-1, 0, 4*os.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	// mem is a mapping outside the Go heap, alive until the deferred unmap;
	// mask is kept alive by the conversion in the call's argument list.
	addr := uintptr(unsafe.Pointer(&mem[0]))
	mask := []uint{1} // node 0
	for _, c := range []struct {
		maxnode uintptr
		want    unix.Errno
	}{
		{1, unix.EINVAL}, // the record's node+1: an empty mask
		{2, 0},           // node+2
		{64, 0},
		{65, 0}, // bits in the mask + 1, as libnuma and mbind here pass
	} {
		_, _, errno := unix.Syscall6(unix.SYS_MBIND, addr, uintptr(len(mem)), unix.MPOL_BIND,
			uintptr(unsafe.Pointer(&mask[0])), c.maxnode, 0)
		if errno != c.want {
			t.Errorf("mbind(node 0, maxnode %d) = %v, want %v", c.maxnode, errno, c.want)
		}
	}
	if err := mbind(addr, len(mem), 0); err != nil {
		t.Errorf("mbind(node 0) = %v", err)
	}
}

func TestPrefaultResident(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		saved := sysMadvise
		if fallback {
			// A kernel before 5.14.
			sysMadvise = func(b []byte, a int) error {
				if a == unix.MADV_POPULATE_WRITE {
					return unix.EINVAL
				}
				return unix.Madvise(b, a)
			}
		}
		b, err := New(4096, 32, WithPrefault())
		sysMadvise = saved
		if err != nil {
			t.Fatal(err)
		}
		addr, length := b.Span()
		for off := 0; off < length; off += os.Getpagesize() {
			if ok, err := residentPage(addr + uintptr(off)); err != nil || !ok {
				t.Errorf("fallback %v: page at offset %d not resident after WithPrefault (%v)", fallback, off, err)
			}
		}
		for i := range b.Len() {
			if slices.ContainsFunc(b.Block(i), func(v byte) bool { return v != 0 }) {
				t.Fatalf("fallback %v: block %d not zero after prefault", fallback, i)
			}
		}
		b.Close()
	}
	b, err := New(4096, 32)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if ok, _ := residentPage(b.addr); ok {
		t.Error("the first page of a fresh region is resident without WithPrefault")
	}
}

func TestPlacementWithoutPopulate(t *testing.T) {
	if err := probeBind(); errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		t.Skip(err)
	}
	saved := sysMadvise
	sysMadvise = func(b []byte, a int) error {
		if a == unix.MADV_POPULATE_WRITE {
			return unix.EINVAL
		}
		return unix.Madvise(b, a)
	}
	defer func() { sysMadvise = saved }()
	b, err := New(4096, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Placement(); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Placement of an untouched page without MADV_POPULATE_WRITE = %v, want ErrUnsupported", err)
	}
	if ok, _ := residentPage(b.addr); ok {
		t.Fatal("Placement faulted the page in although it must not write")
	}
	b.Block(0)[0] = 1
	if node, err := b.Placement(); err != nil || node < 0 {
		t.Fatalf("Placement of a touched page = %d, %v", node, err)
	}
}

func TestReadNodes(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	for _, c := range []struct {
		name string
		fsys fstest.MapFS
		want []Node
		ok   bool
	}{
		{
			name: "two nodes, one without CPUs",
			fsys: fstest.MapFS{
				"node/online":          file("0,2\n"),
				"node/node0/cpulist":   file("0-3,8-11\n"),
				"node/node2/cpulist":   file("\n"),
				"node/node1/cpulist":   file("4-7\n"), // offline: not listed
				"cpu/online":           file("0-11\n"),
				"node/possible":        file("0-3\n"),
				"node/has_memory":      file("0,2\n"),
				"node/has_normal_memo": file("0\n"),
			},
			want: []Node{{0, []int{0, 1, 2, 3, 8, 9, 10, 11}}, {2, nil}},
			ok:   true,
		},
		{
			name: "kernel without NUMA",
			fsys: fstest.MapFS{"cpu/online": file("0-3\n")},
			want: []Node{{0, []int{0, 1, 2, 3}}},
			ok:   true,
		},
		{name: "no sysfs", fsys: fstest.MapFS{}},
		{name: "node directory without online", fsys: fstest.MapFS{"node/node0/cpulist": file("0\n")}},
		{name: "no online node", fsys: fstest.MapFS{"node/online": file("\n")}},
		{name: "missing cpulist", fsys: fstest.MapFS{"node/online": file("0-1\n"), "node/node0/cpulist": file("0\n")}},
		{name: "malformed online", fsys: fstest.MapFS{"node/online": file("0-\n")}},
		{name: "malformed cpulist", fsys: fstest.MapFS{"node/online": file("0\n"), "node/node0/cpulist": file("x\n")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := readNodes(c.fsys)
			if !c.ok {
				if err == nil {
					t.Fatalf("readNodes = %v, want an error", got)
				}
				t.Logf("%v", err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(got, c.want, func(a, b Node) bool { return a.ID == b.ID && slices.Equal(a.CPUs, b.CPUs) }) {
				t.Fatalf("readNodes = %v, want %v", got, c.want)
			}
		})
	}
}

// WithFallback drops huge-page advice the kernel refuses instead of
// failing, asks for none below two huge pages, and takes Go heap memory in
// race builds; a Go-heap region refuses what needs a mapping.
func TestFallback(t *testing.T) {
	hp := hugePageSize()
	t.Run("advice refused", func(t *testing.T) {
		madvise := sysMadvise
		defer func() { sysMadvise = madvise }()
		advised := 0
		sysMadvise = func(b []byte, a int) error {
			if a == unix.MADV_HUGEPAGE {
				advised++
				return unix.EINVAL
			}
			return unix.Madvise(b, a)
		}
		b, err := New(4096, 2*hp/4096, WithHugePages(), WithFallback())
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if b.HugePages() || b.Mapped() == race.Enabled || (advised != 1) == !race.Enabled {
			t.Fatalf("huge %v mapped %v advised %d (race %v)", b.HugePages(), b.Mapped(), advised, race.Enabled)
		}
	})
	t.Run("small region", func(t *testing.T) {
		b, err := New(4096, hp/4096, WithHugePages(), WithFallback())
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if _, n := b.Span(); b.HugePages() || (b.Mapped() && n != hp) {
			t.Fatalf("a region of one huge page: advised %v, %d bytes mapped", b.HugePages(), n)
		}
	})
	t.Run("large region", func(t *testing.T) {
		b, err := New(4096, 4*hp/4096, WithHugePages(), WithFallback())
		if err != nil {
			t.Fatal(err)
		}
		if race.Enabled {
			checkGoHeap(t, b)
			return
		}
		defer b.Close()
		if !b.Mapped() {
			t.Fatal("not mapped on Linux without the race detector")
		}
		if addr, _ := b.Span(); b.HugePages() && addr%uintptr(hp) != 0 {
			t.Fatalf("advised region at %#x, not huge-page aligned", addr)
		}
	})
	for _, o := range []Option{WithNode(0), WithLocked()} {
		if _, err := New(4096, 4, o, WithFallback()); !errors.Is(err, pool.ErrInvalidConfig) {
			t.Errorf("WithFallback with a placement option: %v, want ErrInvalidConfig", err)
		}
	}
}

// checkGoHeap checks what a Go-heap region from WithFallback does, and
// closes it.
func checkGoHeap(t *testing.T, b *Backing) {
	t.Helper()
	if b.Mapped() || b.HugePages() || b.Len() == 0 {
		t.Fatalf("mapped %v huge %v len %d", b.Mapped(), b.HugePages(), b.Len())
	}
	if addr, n := b.Span(); addr != 0 || n != 0 {
		t.Errorf("Span of a Go-heap region: %#x, %d", addr, n)
	}
	if err := b.Bind(0); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Bind: %v", err)
	}
	if _, err := b.Placement(); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Placement: %v", err)
	}
	blk := b.Block(b.Len() - 1)
	blk[len(blk)-1] = 1
	if err := b.Close(); err != nil || b.Len() != 0 || b.Close() != nil {
		t.Fatalf("Close: %v, len %d", err, b.Len())
	}
}
