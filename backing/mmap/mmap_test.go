package mmap_test

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/locus-go/locus/backing/mmap"
	"github.com/locus-go/locus/conformance"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
)

const maxInt = int(^uint(0) >> 1)

// newBacking builds a backing, skipping the test where mapped backings are
// unsupported and closing the backing when the test ends.
func newBacking(t testing.TB, blockSize, blocks int, opts ...mmap.Option) *mmap.Backing {
	t.Helper()
	b, err := mmap.New(blockSize, blocks, opts...)
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skipf("mmap.New: %v", err)
	}
	if err != nil {
		t.Fatalf("mmap.New(%d, %d): %v", blockSize, blocks, err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// skipIfNoNUMA skips the test when the kernel cannot bind at all here.
func skipIfNoNUMA(t *testing.T, err error) {
	t.Helper()
	if errors.Is(err, mmap.ReasonSyscallUnavailable) || errors.Is(err, mmap.ReasonPermissionDenied) {
		t.Skipf("no NUMA policy here: %v", err)
	}
}

func roundUp(n, to int) int { return (n + to - 1) / to * to }

func TestNewInvalid(t *testing.T) {
	for _, c := range []struct {
		name              string
		blockSize, blocks int
	}{
		{"zero size", 0, 1},
		{"negative size", -1, 1},
		{"zero blocks", 4096, 0},
		{"negative blocks", 4096, -1},
		{"too many blocks", 1, pool.MaxBlocks + 1},
		{"overflow", maxInt/2 + 1, 2},
		{"overflow when page-rounded", maxInt - 1, 1},
		{"more than this machine's memory", 1 << 30, 1 << 20},
		{"two terabytes of 4 KiB blocks", 4096, 1 << 29},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := mmap.New(c.blockSize, c.blocks)
			if !errors.Is(err, pool.ErrInvalidConfig) {
				t.Fatalf("New(%d, %d) = %v, %v; want an error wrapping pool.ErrInvalidConfig",
					c.blockSize, c.blocks, b, err)
			}
			if b != nil {
				t.Fatal("New returned a backing with its error")
			}
		})
	}
	if b, err := mmap.New(4096, 1, nil); !errors.Is(err, pool.ErrInvalidConfig) || b != nil {
		t.Errorf("New with a nil option = %v, %v; want an error wrapping pool.ErrInvalidConfig", b, err)
	}
	for _, node := range []int{-1, 4096, maxInt} {
		b, err := mmap.New(4096, 1, mmap.WithNode(node))
		var be *mmap.BindError
		if !errors.As(err, &be) || be.Reason != mmap.ReasonInvalidNode || be.Node != node || be.Err != nil {
			t.Errorf("New(WithNode(%d)) = %v, %v; want a *BindError with ReasonInvalidNode", node, b, err)
		}
		if !errors.Is(err, mmap.ReasonInvalidNode) {
			t.Errorf("New(WithNode(%d)) error %v does not match ReasonInvalidNode", node, err)
		}
	}
}

func TestGeometry(t *testing.T) {
	page := os.Getpagesize()
	for _, c := range []struct{ blockSize, blocks int }{
		{1, 1}, {64, 33}, {100, 37}, {4096, 16}, {4097, 3}, {page, 1},
	} {
		b := newBacking(t, c.blockSize, c.blocks)
		if b.Len() != c.blocks {
			t.Fatalf("%d×%d: Len() = %d", c.blocks, c.blockSize, b.Len())
		}
		addr, length := b.Span()
		if want := roundUp(c.blockSize*c.blocks, page); length != want {
			t.Errorf("%d×%d: Span length %d, want %d (page-rounded)", c.blocks, c.blockSize, length, want)
		}
		if addr == 0 || addr%uintptr(page) != 0 {
			t.Errorf("%d×%d: Span address %#x is not page-aligned", c.blocks, c.blockSize, addr)
		}
		for i := range b.Len() {
			blk := b.Block(i)
			if len(blk) != c.blockSize || cap(blk) != c.blockSize {
				t.Fatalf("%d×%d: block %d has len %d cap %d", c.blocks, c.blockSize, i, len(blk), cap(blk))
			}
			for j, v := range blk {
				if v != 0 {
					t.Fatalf("%d×%d: fresh block %d byte %d = %#x", c.blocks, c.blockSize, i, j, v)
				}
			}
			for j := range blk {
				blk[j] = byte(i*7 + j + 1)
			}
		}
		for i := range b.Len() {
			for j, v := range b.Block(i) {
				if v != byte(i*7+j+1) {
					t.Fatalf("%d×%d: block %d byte %d = %#x: another block's write reached it",
						c.blocks, c.blockSize, i, j, v)
				}
			}
		}
		if b.Node() != -1 {
			t.Errorf("Node() = %d on an unbound backing, want -1", b.Node())
		}
	}
}

func TestBlockOutOfRange(t *testing.T) {
	b := newBacking(t, 64, 4)
	for _, i := range []int{-1, 4, maxInt, -maxInt - 1} {
		if blk := b.Block(i); blk != nil {
			t.Errorf("Block(%d) of 4 blocks = %d bytes, want nil", i, len(blk))
		}
	}
}

func TestNilBacking(t *testing.T) {
	var b *mmap.Backing
	if b.Len() != 0 || b.Block(0) != nil || b.Node() != -1 {
		t.Error("a nil Backing has blocks")
	}
	if addr, n := b.Span(); addr != 0 || n != 0 {
		t.Errorf("nil Backing Span() = %#x, %d", addr, n)
	}
	wantInert(t, "nil", b)
	if _, err := pool.New(b, mailbox.New(), lifo.Policy{}); !errors.Is(err, pool.ErrInvalidConfig) {
		t.Errorf("pool.New over a nil *mmap.Backing = %v, want pool.ErrInvalidConfig", err)
	}
}

func TestClose(t *testing.T) {
	b := newBacking(t, 4096, 4)
	b.Block(3)[4095] = 1
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if n := b.Len(); n != 0 {
		t.Errorf("Len() = %d after Close, want 0", n)
	}
	if addr, length := b.Span(); addr != 0 || length != 0 {
		t.Errorf("Span() = %#x, %d after Close, want 0, 0", addr, length)
	}
	if blk := b.Block(0); blk != nil {
		t.Errorf("Block(0) after Close = %d bytes, want nil", len(blk))
	}
	if err := b.Bind(0); !errors.Is(err, pool.ErrClosed) {
		t.Errorf("Bind after Close = %v, want pool.ErrClosed", err)
	}
	if _, err := b.Placement(); !errors.Is(err, pool.ErrClosed) {
		t.Errorf("Placement after Close = %v, want pool.ErrClosed", err)
	}
}

// wantInert checks that b, a nil or zero Backing (what names which),
// refuses Bind and Placement with pool.ErrInvalidArgument and closes
// without an error.
func wantInert(t *testing.T, what string, b *mmap.Backing) {
	t.Helper()
	if err := b.Bind(0); !errors.Is(err, pool.ErrInvalidArgument) {
		t.Errorf("%s Backing Bind = %v, want pool.ErrInvalidArgument", what, err)
	}
	if _, err := b.Placement(); !errors.Is(err, pool.ErrInvalidArgument) {
		t.Errorf("%s Backing Placement = %v, want pool.ErrInvalidArgument", what, err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("%s Backing Close = %v", what, err)
	}
}

func TestZeroBacking(t *testing.T) {
	var b mmap.Backing
	if b.Len() != 0 || b.Node() != -1 {
		t.Errorf("zero Backing Len() = %d, Node() = %d", b.Len(), b.Node())
	}
	wantInert(t, "zero", &b)
}

func TestOptions(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []mmap.Option
	}{
		{"huge", []mmap.Option{mmap.WithHugePages()}},
		{"prefault", []mmap.Option{mmap.WithPrefault()}},
		{"locked", []mmap.Option{mmap.WithLocked()}},
		{"all", []mmap.Option{mmap.WithHugePages(), mmap.WithPrefault(), mmap.WithLocked()}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := mmap.New(4096, 64, c.opts...)
			if errors.Is(err, errors.ErrUnsupported) {
				t.Skip(err)
			}
			if err != nil && strings.Contains(err.Error(), "locked-memory limit") {
				t.Skipf("locked memory limit too low here: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if b.Len() != 64 {
				t.Fatalf("Len() = %d", b.Len())
			}
			blk := b.Block(63)
			if len(blk) != 4096 || cap(blk) != 4096 || blk[0] != 0 || blk[4095] != 0 {
				t.Fatalf("block 63: len %d cap %d, not zero", len(blk), cap(blk))
			}
			blk[4095] = 0xff
		})
	}
}

func TestBindNode0(t *testing.T) {
	b, err := mmap.New(4096, 256, mmap.WithNode(0))
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skip(err)
	}
	skipIfNoNUMA(t, err)
	if err != nil {
		t.Fatalf("New(WithNode(0)): %v", err)
	}
	defer b.Close()
	if b.Node() != 0 {
		t.Errorf("Node() = %d, want 0", b.Node())
	}
	node, err := b.Placement()
	if err != nil {
		t.Fatalf("Placement: %v", err)
	}
	if node != 0 {
		t.Errorf("Placement() = %d after a bind to node 0", node)
	}
	// Touching everything and binding again to the same node is fine: no
	// page is on another node.
	for i := range b.Len() {
		b.Block(i)[0] = 1
	}
	if err := b.Bind(0); err != nil {
		t.Errorf("second Bind(0) after touching: %v", err)
	}
}

func TestBindAfterNew(t *testing.T) {
	b := newBacking(t, 4096, 16)
	err := b.Bind(0)
	skipIfNoNUMA(t, err)
	if err != nil {
		t.Fatalf("Bind(0): %v", err)
	}
	if node, err := b.Placement(); err != nil || node != 0 {
		t.Fatalf("Placement() = %d, %v; want 0", node, err)
	}
	if b.Block(0)[0] != 0 {
		t.Error("Placement changed the first page")
	}
}

func TestBindMissingNode(t *testing.T) {
	nodes, err := mmap.Nodes()
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	missing := nodes[len(nodes)-1].ID + 1
	for _, node := range []int{missing, 1000} {
		b, err := mmap.New(4096, 16, mmap.WithNode(node))
		skipIfNoNUMA(t, err)
		if b != nil {
			b.Close()
			t.Fatalf("New(WithNode(%d)) succeeded on a machine whose highest node is %d", node, missing-1)
		}
		var be *mmap.BindError
		if !errors.As(err, &be) || be.Node != node {
			t.Fatalf("New(WithNode(%d)) = %v, want a *BindError for node %d", node, err, node)
		}
		// Where sysfs is readable the node is rejected before the call;
		// otherwise the kernel rejects it with EINVAL.
		if be.Reason != mmap.ReasonInvalidNode && !errors.Is(err, syscall.EINVAL) {
			t.Errorf("New(WithNode(%d)) = %v, want ReasonInvalidNode or EINVAL", node, err)
		}
		t.Logf("WithNode(%d): %v", node, err)
	}
	b := newBacking(t, 4096, 16)
	if err := b.Bind(missing); err == nil {
		t.Fatalf("Bind(%d) succeeded", missing)
	} else if b.Node() != -1 {
		t.Errorf("Node() = %d after a failed bind, want -1", b.Node())
	}
}

func TestBindErrorMatching(t *testing.T) {
	inner := errors.New("errno")
	err := error(&mmap.BindError{Node: 3, Reason: mmap.ReasonPermissionDenied, Err: inner})
	wrapped := errors.Join(errors.New("context"), err)
	if !errors.Is(wrapped, mmap.ReasonPermissionDenied) || errors.Is(wrapped, mmap.ReasonSyscallFailed) {
		t.Error("errors.Is does not match the Reason exactly")
	}
	if !errors.Is(wrapped, inner) {
		t.Error("errors.Is does not reach the errno")
	}
	if got, want := err.Error(), "mmap: bind to NUMA node 3: permission_denied: errno"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	for r, want := range map[mmap.Reason]string{
		mmap.ReasonInvalidNode:        "invalid_node",
		mmap.ReasonPermissionDenied:   "permission_denied",
		mmap.ReasonSyscallUnavailable: "syscall_unavailable",
		mmap.ReasonSyscallFailed:      "syscall_failed",
		0:                             "Reason(0)",
	} {
		if r.String() != want || r.Error() != "mmap: bind: "+want {
			t.Errorf("Reason %d: String %q Error %q, want %q", r, r.String(), r.Error(), want)
		}
	}
}

func TestPlacementUnbound(t *testing.T) {
	b := newBacking(t, 4096, 4)
	node, err := b.Placement()
	skipIfNoNUMA(t, err)
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatalf("Placement: %v", err)
	}
	nodes, err := mmap.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, n := range nodes {
		found = found || n.ID == node
	}
	if !found {
		t.Errorf("Placement() = %d, not among Nodes() %v", node, nodes)
	}
}

func TestNodes(t *testing.T) {
	nodes, err := mmap.Nodes()
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatalf("Nodes: %v", err)
	}
	if len(nodes) == 0 {
		t.Fatal("Nodes returned no node")
	}
	seen := map[int]int{}
	cpus := 0
	for i, n := range nodes {
		if i > 0 && n.ID <= nodes[i-1].ID {
			t.Errorf("node IDs not ascending: %v", nodes)
		}
		for j, c := range n.CPUs {
			if j > 0 && c <= n.CPUs[j-1] {
				t.Errorf("node %d CPUs not ascending: %v", n.ID, n.CPUs)
			}
			if other, dup := seen[c]; dup {
				t.Errorf("CPU %d is on nodes %d and %d", c, other, n.ID)
			}
			seen[c] = n.ID
		}
		cpus += len(n.CPUs)
	}
	if cpus == 0 {
		t.Errorf("no CPU on any node: %v", nodes)
	}
	t.Logf("nodes: %+v", nodes)
}

func TestPool(t *testing.T) {
	b := newBacking(t, 256, 8)
	p, err := pool.New(b, mailbox.New(), lifo.Policy{})
	if err != nil {
		t.Fatalf("pool.New: %v", err)
	}
	hs := make([]pool.Handle, 8)
	if err := p.AllocChunk(hs); err != nil {
		t.Fatal(err)
	}
	for i, h := range hs {
		buf, err := p.Bytes(h)
		if err != nil || len(buf) != 256 || cap(buf) != 256 {
			t.Fatalf("Bytes(%v) = len %d cap %d, %v", h, len(buf), cap(buf), err)
		}
		for j := range buf {
			buf[j] = byte(i)
		}
	}
	for i, h := range hs {
		buf, _ := p.Bytes(h)
		for _, v := range buf {
			if v != byte(i) {
				t.Fatalf("block of handle %d overwritten", i)
			}
		}
	}
	if _, err := p.Alloc(); !errors.Is(err, pool.ErrExhausted) {
		t.Fatalf("Alloc from a full pool = %v, want ErrExhausted", err)
	}
	if err := p.FreeChunk(hs); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Alloc(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("pool Close: %v", err)
	}
	if b.Len() != 0 {
		t.Errorf("backing Len() = %d after the pool closed it", b.Len())
	}
}

func TestConformance(t *testing.T) {
	conformance.TestBacking(t, func(t *testing.T) pool.Backing { return newBacking(t, 100, 37) })
}

func BenchmarkNew(b *testing.B) {
	for b.Loop() {
		m, err := mmap.New(4096, 256)
		if errors.Is(err, errors.ErrUnsupported) {
			b.Skip(err)
		}
		if err != nil {
			b.Fatal(err)
		}
		m.Close()
	}
}
