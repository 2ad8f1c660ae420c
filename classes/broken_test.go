package classes_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/backing/mmap"
	"github.com/locus-go/locus/classes"
	"github.com/locus-go/locus/policy/fifo"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
	"github.com/locus-go/locus/transport/sharded"
)

// underTest adapts a classes.Pool to the checks' blockAllocator.
type underTest[B pool.Backing, T pool.Transport, P pool.ReusePolicy] struct {
	*classes.Pool[B, T, P]
}

func (u underTest[B, T, P]) Accounting() []classAccounting {
	var out []classAccounting
	for _, c := range u.Stats().Classes {
		out = append(out, classAccounting{Size: c.BlockSize, Capacity: c.Capacity, Live: c.Live, Free: c.Free,
			Allocs: c.Allocs, Frees: c.Frees, Requested: c.Requested,
			RemoteSubmitted: c.RemoteSubmitted, RemoteDrained: c.RemoteDrained})
	}
	return out
}

func (u underTest[B, T, P]) Reclass(h classes.Handle, k int) classes.Handle {
	return reclass(h, k)
}

func (u underTest[B, T, P]) NewSender() (blockSender[classes.Handle], error) {
	return u.Pool.NewSender()
}

// reclass forges h with another class index, through its encoding.
func reclass(h classes.Handle, k int) classes.Handle {
	b, _ := h.MarshalBinary()
	b[pool.HandleSize] = byte(k)
	var out classes.Handle
	_ = out.UnmarshalBinary(b)
	return out
}

var testClasses = []classes.Class{{Size: 64, Blocks: 16}, {Size: 256, Blocks: 12}, {Size: 1024, Blocks: 8}}

// TestContract runs the size-class checks over classes.Pool: the default
// composition, mmap backings, and a bounded transport with FIFO reuse.
func TestContract(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		if err := checkClasses(func() (blockAllocator[classes.Handle], error) {
			c, err := classes.Default(testClasses)
			return underTest[*heap.Backing, *mailbox.Transport, lifo.Policy]{c}, err
		}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("backing=mmap", func(t *testing.T) {
		if _, err := mmap.New(64, 1); errors.Is(err, errors.ErrUnsupported) {
			t.Skip(err)
		}
		if err := checkClasses(func() (blockAllocator[classes.Handle], error) {
			c, err := classes.New(testClasses, func(c classes.Class) (*mmap.Backing, *mailbox.Transport, fifo.Policy, error) {
				b, err := mmap.New(c.Size, c.Blocks)
				return b, mailbox.New(), fifo.Policy{}, err
			})
			return underTest[*mmap.Backing, *mailbox.Transport, fifo.Policy]{c}, err
		}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("transport=sharded", func(t *testing.T) {
		if err := checkClasses(func() (blockAllocator[classes.Handle], error) {
			c, err := classes.New(testClasses, func(c classes.Class) (*heap.Backing, *sharded.Transport, fifo.Policy, error) {
				b, err := heap.New(c.Size, c.Blocks)
				if err != nil {
					return nil, nil, fifo.Policy{}, err
				}
				tr, err := sharded.New()
				return b, tr, fifo.Policy{}, err
			})
			return underTest[*heap.Backing, *sharded.Transport, fifo.Policy]{c}, err
		}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestContractRejectsBroken feeds the checks deliberately broken allocators;
// each must be caught by the case that names its flaw, and the correct
// reference must pass.
func TestContractRejectsBroken(t *testing.T) {
	for _, c := range []struct {
		bug  string
		want []string
	}{
		{"", nil},
		{"rounds-up", []string{"smallest-class"}},
		{"requested-is-size", []string{"smallest-class", "churn"}},
		{"no-generation", []string{"rejects"}},
		{"trusts-class", []string{"rejects"}},
		{"shared-memory", []string{"churn"}},
		{"borrows", []string{"isolation"}},
		{"loses-remote", []string{"remote"}},
		{"usable-after-close", []string{"closed"}},
	} {
		t.Run("bug="+c.bug, func(t *testing.T) {
			ids := 0
			err := checkClasses(func() (blockAllocator[naiveHandle], error) {
				ids++
				return newNaive(ids, testClasses, c.bug), nil
			})
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("the correct reference failed the checks: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("the checks passed an allocator with bug %q", c.bug)
			}
			for _, name := range c.want {
				if !strings.Contains(err.Error(), name+": ") {
					t.Errorf("case %q did not report bug %q; got:\n%v", name, c.bug, err)
				}
			}
		})
	}
}

// naive is an obviously correct size-class allocator (a slice of blocks, a
// generation and a free stack per class, a mutex for remote frees), with
// switchable bugs.
type naive struct {
	id     int
	bug    string
	cls    []naiveClass
	mu     sync.Mutex
	queued []naiveHandle
	closed bool
}

type naiveClass struct {
	size      int
	mem       [][]byte
	gens      []uint64
	free      []int
	allocs    uint64
	frees     uint64
	requested uint64
	submitted uint64
	drained   uint64
}

type naiveHandle struct {
	pool, class, idx int
	owner            int // the class's own id, as each class's pool has one
	gen              uint64
}

func newNaive(id int, cs []classes.Class, bug string) *naive {
	a := &naive{id: id, bug: bug}
	for _, c := range cs {
		nc := naiveClass{size: c.Size, gens: make([]uint64, c.Blocks)}
		for i := range c.Blocks {
			nc.mem = append(nc.mem, make([]byte, c.Size))
			nc.free = append(nc.free, c.Blocks-1-i)
		}
		a.cls = append(a.cls, nc)
	}
	if bug == "shared-memory" { // the first two blocks of class 1 are one
		a.cls[1].mem[1] = a.cls[1].mem[0]
	}
	return a
}

func (a *naive) usable() bool { return !a.closed || a.bug == "usable-after-close" }

func (a *naive) Alloc(n int) (naiveHandle, error) {
	if !a.usable() {
		return naiveHandle{}, pool.ErrClosed
	}
	for k := range a.cls {
		c := &a.cls[k]
		fits := n <= c.size
		if a.bug == "rounds-up" {
			fits = n < c.size
		}
		if !fits || n <= 0 {
			continue
		}
		if len(c.free) == 0 && a.bug == "borrows" && k+1 < len(a.cls) {
			continue // takes a block of the next class
		}
		if len(c.free) == 0 {
			return naiveHandle{}, pool.ErrExhausted
		}
		i := c.free[len(c.free)-1]
		c.free = c.free[:len(c.free)-1]
		c.gens[i]++
		c.allocs++
		c.requested += uint64(n)
		if a.bug == "requested-is-size" {
			c.requested += uint64(c.size - n)
		}
		return naiveHandle{a.id, k, i, a.id<<8 | k, c.gens[i]}, nil
	}
	return naiveHandle{}, pool.ErrInvalidArgument
}

func (a *naive) lookup(h naiveHandle) (*naiveClass, error) {
	if !a.usable() {
		return nil, pool.ErrClosed
	}
	if h.pool != a.id || h.class < 0 || h.class >= len(a.cls) {
		return nil, pool.ErrForeignHandle
	}
	c := &a.cls[h.class]
	if h.owner != a.id<<8|h.class && a.bug != "trusts-class" {
		return nil, pool.ErrForeignHandle
	}
	if h.idx >= len(c.gens) {
		if a.bug != "trusts-class" {
			return nil, pool.ErrOutOfRange
		}
		h.idx %= len(c.gens)
	}
	if c.gens[h.idx] != h.gen || h.gen%2 == 0 {
		if a.bug != "no-generation" {
			return nil, pool.ErrStaleHandle
		}
	}
	return c, nil
}

func (a *naive) Free(h naiveHandle) error {
	c, err := a.lookup(h)
	if err != nil {
		return err
	}
	idx := h.idx % len(c.gens)
	c.gens[idx]++
	c.free = append(c.free, idx)
	c.frees++
	return nil
}

func (a *naive) Bytes(h naiveHandle) ([]byte, error) {
	c, err := a.lookup(h)
	if err != nil {
		return nil, err
	}
	return c.mem[h.idx%len(c.gens)], nil
}

func (a *naive) Accounting() []classAccounting {
	var out []classAccounting
	for _, c := range a.cls {
		out = append(out, classAccounting{Size: c.size, Capacity: len(c.gens), Live: int(c.allocs - c.frees),
			Free: len(c.free), Allocs: c.allocs, Frees: c.frees, Requested: c.requested,
			RemoteSubmitted: c.submitted, RemoteDrained: c.drained})
	}
	return out
}

func (a *naive) Reclass(h naiveHandle, k int) naiveHandle { h.class = k; return h }

func (a *naive) NewSender() (blockSender[naiveHandle], error) { return naiveSender{a}, nil }

func (a *naive) Drain() (int, error) {
	if !a.usable() {
		return 0, pool.ErrClosed
	}
	a.mu.Lock()
	q := a.queued
	a.queued = nil
	for _, h := range q {
		a.cls[h.class].submitted++
	}
	a.mu.Unlock()
	n := 0
	for _, h := range q {
		a.cls[h.class].drained++
		if a.bug == "loses-remote" && h.class > 0 {
			continue
		}
		if a.Free(h) == nil {
			n++
		}
	}
	return n, nil
}

func (a *naive) Close() error {
	if !a.usable() {
		return pool.ErrClosed
	}
	a.closed = true
	return nil
}

type naiveSender struct{ a *naive }

func (s naiveSender) FreeChunk(chunk []naiveHandle) error {
	s.a.mu.Lock()
	defer s.a.mu.Unlock()
	if s.a.closed && s.a.bug != "usable-after-close" {
		return pool.ErrClosed
	}
	s.a.queued = append(s.a.queued, chunk...)
	return nil
}

func (s naiveSender) Close() error { return nil }
