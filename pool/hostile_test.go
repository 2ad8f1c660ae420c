package pool_test

import (
	"errors"
	"math"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
)

// Every exported entry point of package pool, fed what a careless or hostile
// caller could pass: nothing panics, and every refusal is an error value.

func TestZeroPoolRefusesEverything(t *testing.T) {
	var p pool.Pool[*heap.Backing, *mailbox.Transport, lifo.Policy]
	h := mkHandle(1, 0, 1)
	_, errAlloc := p.Alloc()
	_, _, errAllocBytes := p.AllocBytes()
	_, errBytes := p.Bytes(h)
	_, errBytesZero := p.Bytes(pool.Handle{})
	_, errDrain := p.Drain()
	_, errSender := p.NewSender()
	for name, err := range map[string]error{
		"Alloc":         errAlloc,
		"AllocBytes":    errAllocBytes,
		"AllocChunk(1)": p.AllocChunk(make([]pool.Handle, 1)),
		"AllocChunk(0)": p.AllocChunk(nil),
		"Free":          p.Free(h),
		"Free(zero)":    p.Free(pool.Handle{}),
		"FreeChunk":     p.FreeChunk([]pool.Handle{h}),
		"Bytes":         errBytes,
		"Bytes(zero)":   errBytesZero,
		"Drain":         errDrain,
		"NewSender":     errSender,
		"Close":         p.Close(),
	} {
		require.ErrorIs(t, err, pool.ErrClosed, name)
		require.Contains(t, err.Error(), "zero Pool", name)
	}
	require.Equal(t, pool.Stats{}, p.Snapshot())
	st := p.Stats()
	require.Zero(t, st.Capacity)
	require.Zero(t, p.Capacity())
	require.Zero(t, p.BlockSize())
}

// funcPolicy is a policy whose nil value would panic when asked.
type funcPolicy func() pool.Order

func (f funcPolicy) Order() pool.Order { return f() }

type nilBacking struct{ *heap.Backing }

func TestNewRejectsTypedNilComponents(t *testing.T) {
	b, err := heap.New(8, 4)
	require.NoError(t, err)
	for name, err := range map[string]error{
		"nil *heap.Backing": func() error {
			_, err := pool.New((*heap.Backing)(nil), mailbox.New(), lifo.Policy{})
			return err
		}(),
		"nil *mailbox.Transport": func() error {
			_, err := pool.New(b, (*mailbox.Transport)(nil), lifo.Policy{})
			return err
		}(),
		"nil func policy": func() error {
			_, err := pool.New(b, mailbox.New(), funcPolicy(nil))
			return err
		}(),
		"nil interface transport": func() error {
			_, err := pool.New(b, pool.Transport(nil), lifo.Policy{})
			return err
		}(),
		"struct wrapping a nil backing": func() error {
			_, err := pool.New(nilBacking{}, mailbox.New(), lifo.Policy{})
			return err
		}(),
	} {
		require.ErrorIs(t, err, pool.ErrInvalidConfig, name)
	}
}

// lyingBacking reports n blocks but has none to give.
type lyingBacking struct{ n int }

func (b lyingBacking) Len() int         { return b.n }
func (b lyingBacking) Block(int) []byte { return nil }
func (b lyingBacking) Close() error     { return nil }

func TestNewRejectsHostileBackings(t *testing.T) {
	// A backing claiming the largest pool must be refused before the pool
	// allocates its metadata; the limit makes the test independent of the
	// machine's memory.
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(256 << 20))
	for _, c := range []struct {
		name string
		b    pool.Backing
		want string
	}{
		{"negative length", lyingBacking{-1}, "blocks"},
		{"MaxBlocks+1", lyingBacking{pool.MaxBlocks + 1}, "blocks"},
		{"MaxBlocks of metadata over the memory limit", lyingBacking{pool.MaxBlocks}, "metadata"},
		{"nil blocks", lyingBacking{3}, "block 0"},
		{"math.MaxInt", lyingBacking{math.MaxInt}, "blocks"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := pool.New(c.b, mailbox.New(), lifo.Policy{})
			require.ErrorIs(t, err, pool.ErrInvalidConfig)
			require.Contains(t, err.Error(), c.want)
			require.Nil(t, p)
		})
	}
}

func TestHostileArguments(t *testing.T) {
	p := newPool(t, 8, lifo.Policy{})
	h, err := p.Alloc()
	require.NoError(t, err)
	id := poolID(h)

	// More blocks than the pool has: refused without allocating any.
	require.ErrorIs(t, p.AllocChunk(make([]pool.Handle, 9)), pool.ErrExhausted)
	require.ErrorIs(t, p.AllocChunk(make([]pool.Handle, 1<<20)), pool.ErrExhausted)
	require.Equal(t, 1, p.Stats().Live)
	require.NoError(t, p.AllocChunk(nil))
	require.NoError(t, p.FreeChunk(nil))

	// A flood of garbage in one chunk: every handle refused and counted.
	junk := make([]pool.Handle, 10000)
	for i := range junk {
		switch i % 4 {
		case 1:
			junk[i] = mkHandle(id, uint32(i), uint64(i)) // out of range or wrong generation
		case 2:
			junk[i] = mkHandle(id^1, 0, 1) // foreign
		case 3:
			junk[i] = mkHandle(id, math.MaxUint32, math.MaxUint64)
		}
	}
	var rej *pool.RejectedError
	require.ErrorAs(t, p.FreeChunk(junk), &rej)
	require.Equal(t, len(junk), rej.Rejected)
	require.Equal(t, uint64(len(junk)), p.Stats().Rejected)
	_, err = p.Bytes(h)
	require.NoError(t, err, "the live handle survived the flood")

	// The same flood through a sender: the drain refuses it all.
	s, err := p.NewSender()
	require.NoError(t, err)
	require.NoError(t, s.FreeChunk(junk))
	n, err := p.Drain()
	require.Zero(t, n)
	require.ErrorAs(t, err, &rej)
	require.Equal(t, len(junk), rej.Rejected)
	st := p.Stats()
	require.Equal(t, 1, st.Live)
	require.Equal(t, 7, st.Free)
	require.Equal(t, uint64(len(junk)), st.RemoteDrained)

	for _, k := range []int{math.MinInt, -1, 0, 1, pool.DrainBuckets - 1, pool.DrainBuckets, math.MaxInt} {
		_ = pool.DrainBucketBound(k) // never panics
	}
	require.Equal(t, 0, pool.DrainBucketBound(0))
	require.Equal(t, 1, pool.DrainBucketBound(1))
	require.Equal(t, 3, pool.DrainBucketBound(2))
	require.Equal(t, -1, pool.DrainBucketBound(pool.DrainBuckets-1))
	require.True(t, strings.HasPrefix(pool.Order(200).String(), "Order("))
	require.NotPanics(t, func() { _ = (&pool.RejectedError{}).Error() })
	require.NotPanics(t, func() { pool.NewSink(nil).Put(junk) })
	require.NotPanics(t, func() { new(pool.Sink).Put(junk) })
}

func TestZeroSender(t *testing.T) {
	var s pool.Sender
	require.ErrorIs(t, s.FreeChunk([]pool.Handle{{}}), pool.ErrClosed)
	require.ErrorIs(t, s.Free(pool.Handle{}), pool.ErrClosed)
	n, err := s.TryFreeChunk([]pool.Handle{{}})
	require.Zero(t, n)
	require.ErrorIs(t, err, pool.ErrClosed)
	require.NoError(t, s.Close())
	require.Zero(t, s.Submitted())
}

// shortTry is a producer whose TrySend claims more than it was given.
type shortTry struct{ pool.Producer }

func (s shortTry) TrySend(c []pool.Handle) (int, error) { return len(c) + 5, s.Send(c) }

type liarTransport struct{ *mailbox.Transport }

func (t liarTransport) NewProducer() (pool.Producer, error) {
	p, err := t.Transport.NewProducer()
	return shortTry{p}, err
}

func TestSenderTrustsNoTransportCount(t *testing.T) {
	b, _ := heap.New(8, 4)
	p, err := pool.New(b, liarTransport{mailbox.New()}, lifo.Policy{})
	require.NoError(t, err)
	defer p.Close()
	hs, s := allocWithSender(t, p, 2)
	n, err := s.TryFreeChunk(hs)
	require.NoError(t, err)
	require.Equal(t, 2, n, "a count beyond the chunk is clamped")
	require.Equal(t, uint64(2), s.Submitted())
}

func TestErrorsAreSentinels(t *testing.T) {
	for _, err := range []error{pool.ErrZeroHandle, pool.ErrForeignHandle, pool.ErrOutOfRange, pool.ErrStaleHandle} {
		require.True(t, errors.Is(err, pool.ErrInvalidHandle))
	}
	for _, err := range []error{pool.ErrExhausted, pool.ErrClosed, pool.ErrFull, pool.ErrInvalidConfig, pool.ErrInvalidArgument} {
		require.False(t, errors.Is(err, pool.ErrInvalidHandle))
		require.True(t, strings.HasPrefix(err.Error(), "pool: "))
	}
}

func TestNilPoolRefusesEverything(t *testing.T) {
	var p *pool.Pool[*heap.Backing, *mailbox.Transport, lifo.Policy]
	h := mkHandle(1, 0, 1)
	_, errAlloc := p.Alloc()
	_, _, errAllocBytes := p.AllocBytes()
	_, errBytes := p.Bytes(h)
	_, errDrain := p.Drain()
	_, errSender := p.NewSender()
	for name, err := range map[string]error{
		"Alloc": errAlloc, "AllocBytes": errAllocBytes, "AllocChunk": p.AllocChunk(make([]pool.Handle, 1)),
		"Free": p.Free(h), "FreeChunk": p.FreeChunk([]pool.Handle{h}), "Bytes": errBytes,
		"Drain": errDrain, "NewSender": errSender, "Close": p.Close(),
	} {
		require.ErrorIs(t, err, pool.ErrClosed, name)
	}
	require.Equal(t, pool.Stats{}, p.Stats())
	require.Equal(t, pool.Stats{}, p.Snapshot())
	require.Zero(t, p.Capacity()+p.BlockSize())
	require.Nil(t, p.Backing())
	require.Nil(t, p.Transport())
	_ = p.Policy()

	var s *pool.Sender
	require.ErrorIs(t, s.FreeChunk([]pool.Handle{h}), pool.ErrClosed)
	require.ErrorIs(t, s.Free(h), pool.ErrClosed)
	n, err := s.TryFreeChunk([]pool.Handle{h})
	require.Zero(t, n)
	require.ErrorIs(t, err, pool.ErrClosed)
	require.NoError(t, s.Close())
	require.Zero(t, s.Submitted())
}

// A backing's memory and a transport belong to one open pool: a second
// pool over either is refused (it would hand out the same bytes, or take
// the other's frees), and Close hands them back.
func TestSecondOwnerRefused(t *testing.T) {
	b, err := heap.New(64, 8)
	if err != nil {
		t.Fatal(err)
	}
	tr := mailbox.New()
	p, err := pool.New(b, tr, lifo.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	other, err := heap.New(64, 8)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		new  func() error
	}{
		{"same backing", func() error { _, err := pool.New(b, mailbox.New(), lifo.Policy{}); return err }},
		{"same transport", func() error { _, err := pool.New(other, tr, lifo.Policy{}); return err }},
	} {
		if err := tc.new(); !errors.Is(err, pool.ErrInvalidConfig) || !strings.Contains(err.Error(), "another open pool") {
			t.Errorf("%s: %v, want ErrInvalidConfig naming the other pool", tc.name, err)
		}
	}
	// The refused transport claim left the other backing free.
	q, err := pool.New(other, mailbox.New(), lifo.Policy{})
	if err != nil {
		t.Fatalf("a fresh backing after a refusal: %v", err)
	}
	if err := errors.Join(p.Close(), q.Close()); err != nil {
		t.Fatal(err)
	}
	// Close gave the transport back (closed, but no longer owned).
	b2, _ := heap.New(64, 8)
	if _, err := pool.New(b2, tr, lifo.Policy{}); err != nil {
		t.Fatalf("the transport of a closed pool: %v", err)
	}
}
