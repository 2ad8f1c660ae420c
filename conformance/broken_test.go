package conformance

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/internal/race"
	"github.com/locus-go/locus/policy/fifo"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
)

// Deliberately broken components. The suite must reject each one with the
// right kind of violation, found by the right case.

// lossyTransport drops every fifth chunk it drains.
type lossyTransport struct {
	*mailbox.Transport
	n int
}

func (t *lossyTransport) Drain(sink *pool.Sink) {
	t.Transport.Drain(pool.NewSink(func(c []pool.Handle) {
		if t.n++; t.n%5 != 0 {
			sink.Put(c)
		}
	}))
}

// dupTransport delivers the first handle of every chunk twice.
type dupTransport struct{ *mailbox.Transport }

func (t dupTransport) Drain(sink *pool.Sink) {
	t.Transport.Drain(pool.NewSink(func(c []pool.Handle) {
		sink.Put(c)
		sink.Put(c[:1])
	}))
}

// aliasingTransport publishes the caller's slice instead of a copy.
type aliasingTransport struct {
	mu      chan struct{}
	pending [][]pool.Handle
}

type aliasingProducer struct{ t *aliasingTransport }

func newAliasingTransport() *aliasingTransport {
	t := &aliasingTransport{mu: make(chan struct{}, 1)}
	t.mu <- struct{}{}
	return t
}

func (t *aliasingTransport) NewProducer() (pool.Producer, error) { return aliasingProducer{t}, nil }
func (t *aliasingTransport) Close() error                        { return nil }
func (t *aliasingTransport) Drain(sink *pool.Sink) {
	<-t.mu
	p := t.pending
	t.pending = nil
	t.mu <- struct{}{}
	for _, c := range p {
		sink.Put(c)
	}
}
func (p aliasingProducer) Close() error { return nil }
func (p aliasingProducer) Send(c []pool.Handle) error {
	<-p.t.mu
	p.t.pending = append(p.t.pending, c) // the bug: no copy
	p.t.mu <- struct{}{}
	return nil
}

// stuckTransport's bounded producers wait forever, even after Close.
type stuckTransport struct{ *mailbox.Transport }

type stuckProducer struct{ block chan struct{} }

func (t stuckTransport) NewProducer() (pool.Producer, error) {
	return stuckProducer{make(chan struct{})}, nil
}
func (p stuckProducer) Send([]pool.Handle) error { <-p.block; return nil }
func (p stuckProducer) Close() error             { return nil }

// flipPolicy changes its order on every call.
type flipPolicy struct{ n *int }

func (p flipPolicy) Order() pool.Order {
	*p.n++
	if *p.n%2 == 0 {
		return pool.FIFO
	}
	return pool.LIFO
}

// overlapBacking returns the same memory for blocks 2k and 2k+1.
type overlapBacking struct{ *heap.Backing }

func (b overlapBacking) Block(i int) []byte { return b.Backing.Block(i &^ 1) }

// dirtyBacking hands out blocks that are not zeroed.
type dirtyBacking struct{ *heap.Backing }

func newDirty() pool.Backing {
	b, _ := heap.New(64, 8)
	for i := range b.Len() {
		b.Block(i)[5] = 1
	}
	return dirtyBacking{b}
}

// noGenPool is a pool that ignores generations: a handle is good while its
// block is allocated, whoever it was allocated to.
type noGenPool struct {
	mu     sync.Mutex // its sender is itself, used from other goroutines
	blocks [][]byte
	free   []int
	used   []bool
	stats  pool.Stats
	closed bool
}

func newNoGenPool() *noGenPool {
	p := &noGenPool{blocks: make([][]byte, 64), used: make([]bool, 64)}
	for i := range p.blocks {
		p.blocks[i] = make([]byte, 64)
	}
	for i := 63; i >= 0; i-- {
		p.free = append(p.free, i)
	}
	p.stats = pool.Stats{BlockSize: 64, Capacity: 64, Order: pool.LIFO, Free: 64}
	return p
}

func (p *noGenPool) handle(i int) pool.Handle { return mkHandle(99, uint32(i), 1) }
func (p *noGenPool) Alloc() (pool.Handle, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return pool.Handle{}, pool.ErrClosed
	}
	if len(p.free) == 0 {
		return pool.Handle{}, pool.ErrExhausted
	}
	i := p.free[len(p.free)-1]
	p.free = p.free[:len(p.free)-1]
	p.used[i] = true
	p.stats.Allocs++
	p.stats.Live++
	p.stats.Free--
	p.stats.HighWater = max(p.stats.HighWater, p.stats.Live)
	return p.handle(i), nil
}
func (p *noGenPool) AllocChunk(dst []pool.Handle) error {
	p.mu.Lock()
	short := len(p.free) < len(dst)
	p.mu.Unlock()
	if short {
		return pool.ErrExhausted
	}
	for i := range dst {
		dst[i], _ = p.Alloc()
	}
	return nil
}
func (p *noGenPool) Free(h pool.Handle) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return pool.ErrClosed
	}
	i := h.Index()
	if h.IsZero() || i >= len(p.used) || !p.used[i] {
		p.stats.Rejected++
		return pool.ErrStaleHandle
	}
	p.used[i] = false
	p.free = append(p.free, i)
	p.stats.Frees++
	p.stats.Live--
	p.stats.Free++
	return nil
}
func (p *noGenPool) FreeChunk(c []pool.Handle) error {
	var err error
	for _, h := range c {
		err = errors.Join(err, p.Free(h))
	}
	return err
}
func (p *noGenPool) Bytes(h pool.Handle) ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i := h.Index(); i < len(p.used) && p.used[i] {
		return p.blocks[i], nil
	}
	return nil, pool.ErrStaleHandle
}
func (p *noGenPool) Drain() (int, error)         { return 0, nil }
func (p *noGenPool) NewSender() (sender, error)  { return p, nil }
func (p *noGenPool) Stats() pool.Stats           { p.mu.Lock(); defer p.mu.Unlock(); return p.stats }
func (p *noGenPool) Order() pool.Order           { return pool.LIFO }
func (p *noGenPool) Close() error                { p.closed = true; return nil }
func (p *noGenPool) other() subject              { return nil }
func (p *noGenPool) abort()                      {}
func (p *noGenPool) bounds() (pool.Bounds, bool) { return pool.Bounds{}, false }

// mislabeled is a real FIFO pool that claims to be LIFO.
type mislabeled struct{ subject }

func (mislabeled) Order() pool.Order { return pool.LIFO }

// violations returns the cases that reported kind.
func violations(err, kind error) []string {
	var cases []string
	var walk func(error)
	walk = func(e error) {
		if v, ok := e.(*Violation); ok && errors.Is(v, kind) {
			cases = append(cases, v.Case)
		}
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
		}
	}
	walk(err)
	return cases
}

func TestSuiteRejectsBrokenComponents(t *testing.T) {
	defer func(d time.Duration) { caseTimeout = d }(caseTimeout)

	newHeap := func() (*heap.Backing, error) { return heap.New(64, 64) }
	for _, c := range []struct {
		name     string
		check    func() error
		kind     error
		wantCase string
	}{
		{"transport loses a chunk", func() error {
			return CheckTransport(func() (pool.Transport, error) { return &lossyTransport{Transport: mailbox.New()}, nil })
		}, ErrLost, "ExactlyOnceConcurrent"},
		{"transport duplicates a handle", func() error {
			return CheckTransport(func() (pool.Transport, error) { return dupTransport{mailbox.New()}, nil })
		}, ErrDuplicated, "DeliverInOrder"},
		{"transport aliases the caller's chunk", func() error {
			return CheckTransport(func() (pool.Transport, error) { return newAliasingTransport(), nil })
		}, ErrAliased, "ChunkCopied"},
		{"transport never returns from Send", func() error {
			return CheckTransport(func() (pool.Transport, error) { return stuckTransport{mailbox.New()}, nil })
		}, ErrDeadlock, "DeliverInOrder"},
		{"pool over a lossy transport", func() error {
			return CheckPool(func() (*pool.Pool[*heap.Backing, *lossyTransport, lifo.Policy], error) {
				b, _ := newHeap()
				return pool.New(b, &lossyTransport{Transport: mailbox.New()}, lifo.Policy{})
			})
		}, ErrLost, "RemoteExactlyOnce"},
		{"pool over a duplicating transport", func() error {
			return CheckPool(func() (*pool.Pool[*heap.Backing, dupTransport, lifo.Policy], error) {
				b, _ := newHeap()
				return pool.New(b, dupTransport{mailbox.New()}, lifo.Policy{})
			})
		}, ErrDuplicated, "RemoteExactlyOnce"},
		{"pool ignores generations", func() error {
			return poolSuite().runCheck(func() (subject, error) { return newNoGenPool(), nil })
		}, ErrAliased, "StaleHandle"},
		{"pool breaks its order", func() error {
			return poolSuite().runCheck(func() (subject, error) {
				b, _ := newHeap()
				p, err := pool.New(b, mailbox.New(), fifo.Policy{})
				return mislabeled{wrapPool(p, nil)}, err
			})
		}, ErrOrder, "ReuseOrder"},
		{"policy changes its order", func() error {
			return CheckPolicy(func() (pool.ReusePolicy, error) { return flipPolicy{new(int)}, nil })
		}, ErrOrder, "StableOrder"},
		{"backing overlaps blocks", func() error {
			return CheckBacking(func() (pool.Backing, error) { b, err := newHeap(); return overlapBacking{b}, err })
		}, ErrAliased, "Disjoint"},
		{"backing is not zeroed", func() error {
			return CheckBacking(func() (pool.Backing, error) { return newDirty(), nil })
		}, ErrContract, "Zeroed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.wantCase == "ChunkCopied" && race.Enabled {
				t.Skip("the race detector itself reports the aliasing transport's data race")
			}
			caseTimeout = 2 * time.Second
			if c.kind == ErrDeadlock {
				caseTimeout = 200 * time.Millisecond
			}
			err := c.check()
			if err == nil {
				t.Fatal("the suite accepted a broken component")
			}
			if !errors.Is(err, c.kind) {
				t.Fatalf("violations do not include %v:\n%v", c.kind, err)
			}
			if got := violations(err, c.kind); !slices.Contains(got, c.wantCase) {
				t.Fatalf("%v reported by %v, want by %s:\n%v", c.kind, got, c.wantCase, err)
			}
		})
	}
}

func TestCheckPassesInTree(t *testing.T) {
	if err := CheckPool(func() (*pool.Pool[*heap.Backing, *mailbox.Transport, lifo.Policy], error) {
		b, err := heap.New(64, 64)
		if err != nil {
			return nil, err
		}
		return pool.New(b, mailbox.New(), lifo.Policy{})
	}); err != nil {
		t.Fatal(err)
	}
}
