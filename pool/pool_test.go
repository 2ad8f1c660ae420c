package pool_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/internal/invariants"
	"github.com/locus-go/locus/policy/fifo"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
)

// fakeBacking is a backing whose blocks are given by the test.
type fakeBacking struct{ blocks [][]byte }

func (b *fakeBacking) Len() int           { return len(b.blocks) }
func (b *fakeBacking) Block(i int) []byte { return b.blocks[i] }
func (b *fakeBacking) Close() error       { return nil }

type badPolicy struct{}

func (badPolicy) Order() pool.Order { return 0 }

func TestNewRejectsBadComponents(t *testing.T) {
	spare := make([]byte, 8, 16)
	for _, c := range []struct {
		name    string
		backing pool.Backing
		policy  pool.ReusePolicy
		want    string
	}{
		{"no blocks", &fakeBacking{}, lifo.Policy{}, "0 blocks"},
		{"empty block", &fakeBacking{blocks: [][]byte{{}}}, lifo.Policy{}, "block 0"},
		{"unequal blocks", &fakeBacking{blocks: [][]byte{make([]byte, 8), make([]byte, 9)}}, lifo.Policy{}, "block 1"},
		{"spare capacity", &fakeBacking{blocks: [][]byte{spare}}, lifo.Policy{}, "cap 16"},
		{"invalid order", &fakeBacking{blocks: [][]byte{make([]byte, 8)}}, badPolicy{}, "order"},
		{"nil backing", nil, lifo.Policy{}, "nil"},
		{"nil policy", &fakeBacking{blocks: [][]byte{make([]byte, 8)}}, nil, "nil"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := pool.New(c.backing, mailbox.New(), c.policy)
			require.ErrorIs(t, err, pool.ErrInvalidConfig)
			require.Contains(t, err.Error(), c.want)
			require.Nil(t, p)
		})
	}
}

func TestHeapRejectsBadSizes(t *testing.T) {
	for _, c := range []struct{ size, n int }{
		{0, 1}, {1, 0}, {-1, 1}, {1, -1}, {1, pool.MaxBlocks + 1}, {math.MaxInt/2 + 1, 4},
	} {
		_, err := heap.New(c.size, c.n)
		require.ErrorIs(t, err, pool.ErrInvalidConfig, "heap.New(%d, %d)", c.size, c.n)
	}
}

func TestOrderString(t *testing.T) {
	require.Equal(t, "lifo", pool.LIFO.String())
	require.Equal(t, "fifo", pool.FIFO.String())
	require.Equal(t, "Order(7)", pool.Order(7).String())
	require.False(t, pool.Order(0).Valid())
}

func newPool(t testing.TB, n int, p pool.ReusePolicy) *pool.Pool[*heap.Backing, *mailbox.Transport, pool.ReusePolicy] {
	t.Helper()
	b, err := heap.New(32, n)
	require.NoError(t, err)
	pl, err := pool.New(b, mailbox.New(), p)
	require.NoError(t, err)
	t.Cleanup(func() { pl.Close() })
	return pl
}

// allocWithSender allocates n handles of p and makes a sender of p to free
// them remotely.
func allocWithSender(t testing.TB, p interface {
	AllocChunk([]pool.Handle) error
	NewSender() (*pool.Sender, error)
}, n int) ([]pool.Handle, *pool.Sender) {
	t.Helper()
	hs := make([]pool.Handle, n)
	require.NoError(t, p.AllocChunk(hs))
	s, err := p.NewSender()
	require.NoError(t, err)
	return hs, s
}

func TestHandle(t *testing.T) {
	p := newPool(t, 4, lifo.Policy{})
	h, err := p.Alloc()
	require.NoError(t, err)
	require.False(t, h.IsZero())
	require.True(t, pool.Handle{}.IsZero())
	require.Equal(t, 0, h.Index())
	require.Equal(t, uint64(1), h.Generation())
	require.Equal(t, "pool.Handle{}", pool.Handle{}.String())
	require.True(t, strings.HasSuffix(h.String(), "/block0@1"), h.String())

	enc, err := h.MarshalBinary()
	require.NoError(t, err)
	require.Len(t, enc, pool.HandleSize)
	var back pool.Handle
	require.NoError(t, back.UnmarshalBinary(enc))
	require.Equal(t, h, back)
	_, err = p.Bytes(back)
	require.NoError(t, err, "a decoded handle is as good as the original")

	require.ErrorIs(t, back.UnmarshalBinary(enc[:15]), pool.ErrInvalidArgument)
	require.Equal(t, h, back, "a failed decode leaves the handle unchanged")
}

func TestHandleErrorsMatchInvalidHandle(t *testing.T) {
	for _, err := range []error{pool.ErrZeroHandle, pool.ErrForeignHandle, pool.ErrOutOfRange, pool.ErrStaleHandle} {
		require.ErrorIs(t, err, pool.ErrInvalidHandle)
		require.True(t, strings.HasPrefix(err.Error(), "pool: "))
	}
	require.NotErrorIs(t, pool.ErrExhausted, pool.ErrInvalidHandle)
}

func TestFreeChunkReportsRejects(t *testing.T) {
	p := newPool(t, 8, lifo.Policy{})
	hs := make([]pool.Handle, 3)
	require.NoError(t, p.AllocChunk(hs))
	require.NoError(t, p.Free(hs[1]))
	err := p.FreeChunk([]pool.Handle{hs[0], hs[1], {}, hs[2]})
	var rej *pool.RejectedError
	require.ErrorAs(t, err, &rej)
	require.Equal(t, 2, rej.Rejected)
	require.Equal(t, hs[1], rej.First)
	require.ErrorIs(t, err, pool.ErrStaleHandle)
	require.Contains(t, err.Error(), "2 handle(s) rejected")
	st := p.Stats()
	require.Equal(t, 0, st.Live)
	require.Equal(t, uint64(2), st.Rejected)
}

func TestDrainReportsRejectsFromAllocDrain(t *testing.T) {
	// A bad remote handle drained inside Alloc is reported by the next Drain.
	p := newPool(t, 2, lifo.Policy{})
	a, _ := p.Alloc()
	b, _ := p.Alloc()
	require.NoError(t, p.Free(a))
	a2, _ := p.Alloc() // reuses a's block
	s, err := p.NewSender()
	require.NoError(t, err)
	require.NoError(t, s.FreeChunk([]pool.Handle{a, b})) // a is stale
	h, err := p.Alloc()                                  // drains: frees b, rejects a
	require.NoError(t, err)
	require.Equal(t, b.Index(), h.Index())
	n, err := p.Drain()
	require.Equal(t, 0, n)
	require.ErrorIs(t, err, pool.ErrStaleHandle)
	n, err = p.Drain()
	require.Equal(t, 0, n)
	require.NoError(t, err, "a rejection is reported once")
	_, err = p.Bytes(a2)
	require.NoError(t, err, "the stale remote free did not touch the new owner")
}

func TestSenderTryFreeChunkOnUnboundedTransport(t *testing.T) {
	p := newPool(t, 4, lifo.Policy{})
	hs, s := allocWithSender(t, p, 3)
	n, err := s.TryFreeChunk(hs)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.Equal(t, uint64(3), s.Submitted())
	got, err := p.Drain()
	require.NoError(t, err)
	require.Equal(t, 3, got)
	require.NoError(t, s.Free(pool.Handle{}), "a sender does not validate; the drain does")
	_, err = p.Drain()
	require.ErrorIs(t, err, pool.ErrZeroHandle)
	require.NoError(t, p.Close())
	_, err = s.TryFreeChunk(hs)
	require.ErrorIs(t, err, pool.ErrClosed)
}

func TestStatsAfterCloseKeepFinalCounts(t *testing.T) {
	p := newPool(t, 4, fifo.Policy{})
	h, _ := p.Alloc()
	_, _ = p.Alloc()
	require.NoError(t, p.Free(h))
	before := p.Stats()
	require.NoError(t, p.Close())
	require.Equal(t, before, p.Stats())
	require.Equal(t, pool.Stats{BlockSize: 32, Capacity: 4, Order: pool.FIFO, Live: 1, Free: 3, HighWater: 2, Allocs: 2, Frees: 1}, before)
	require.ErrorIs(t, p.Close(), pool.ErrClosed)
}

func TestCloseReportsComponentErrors(t *testing.T) {
	b := &closeErrBacking{fakeBacking{blocks: [][]byte{make([]byte, 8)}}}
	p, err := pool.New(b, mailbox.New(), lifo.Policy{})
	require.NoError(t, err)
	require.ErrorIs(t, p.Close(), errBackingClose)
}

var errBackingClose = errors.New("backing close failed")

type closeErrBacking struct{ fakeBacking }

func (*closeErrBacking) Close() error { return errBackingClose }

func TestInvariantsPoisonFreedBlocks(t *testing.T) {
	if !invariants.Enabled {
		t.Skip("poisoning is compiled in only with -race or -tags locus_invariants")
	}
	p := newPool(t, 2, lifo.Policy{})
	h, _ := p.Alloc()
	b, _ := p.Bytes(h)
	b[0] = 1
	require.NoError(t, p.Free(h))
	for _, v := range b {
		require.Equal(t, byte(0xff), v)
	}
}

func TestHotPathsDoNotAllocate(t *testing.T) {
	p := newPool(t, 64, lifo.Policy{})
	s, err := p.NewSender()
	require.NoError(t, err)
	chunk := make([]pool.Handle, 3)
	op := func() {
		if err := p.AllocChunk(chunk); err != nil {
			t.Fatal(err)
		}
		if err := s.FreeChunk(chunk); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Drain(); err != nil {
			t.Fatal(err)
		}
	}
	op()
	if a := testing.AllocsPerRun(100, op); a != 0 {
		t.Fatalf("AllocChunk+sender FreeChunk+Drain: %v allocs, want 0", a)
	}
}

func TestAllocBytes(t *testing.T) {
	p := newPool(t, 2, lifo.Policy{})
	h, b, err := p.AllocBytes()
	require.NoError(t, err)
	b2, err := p.Bytes(h)
	require.NoError(t, err)
	require.Same(t, &b[0], &b2[0])
	require.Len(t, b, 32)
	_, _, err = p.AllocBytes()
	require.NoError(t, err)
	_, _, err = p.AllocBytes()
	require.ErrorIs(t, err, pool.ErrExhausted)
	require.NoError(t, p.Free(h))
	op := func() {
		h, _, err := p.AllocBytes()
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Free(h); err != nil {
			t.Fatal(err)
		}
	}
	if a := testing.AllocsPerRun(100, op); a != 0 {
		t.Fatalf("AllocBytes+Free: %v allocs, want 0", a)
	}
	require.NoError(t, p.Close())
	_, _, err = p.AllocBytes()
	require.ErrorIs(t, err, pool.ErrClosed)
}
