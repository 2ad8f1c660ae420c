package kv_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locus-go/locus"
	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/pool"
)

// Contracts an outside review found broken; each test failed before its fix.

// A freed block queued behind cached ones (QueueFreedBehindCached) gets
// DefaultPriority back, as SetPriority promises: it does not outlive cached
// blocks because of the priority its sequence had.
func TestFreedBlockLosesItsPriority(t *testing.T) {
	removed := 0
	m, err := kv.New(newPool(t, 3, 64), kv.WithTokensPerBlock(4), kv.WithFreedOrder(kv.QueueFreedBehindCached),
		kv.WithSubscriber(func(e *kv.Event) {
			if e.Kind == kv.BlockRemoved {
				removed += len(e.Hashes)
			}
		}))
	require.NoError(t, err)
	y, _, err := m.Admit(span(0, 2), kv.Key{}) // one partial block
	require.NoError(t, err)
	require.NoError(t, m.SetPriority(y, 0, 2, kv.MaxPriority, 0))
	require.NoError(t, m.Release(y))               // freed, not cached
	z, _, err := m.Admit(span(100, 104), kv.Key{}) // one full block, cached
	require.NoError(t, err)
	require.NoError(t, m.Release(z))
	_, _, err = m.Admit(span(200, 208), kv.Key{}) // two blocks: the pool's and the freed one
	require.NoError(t, err)
	st := m.Stats()
	require.Zero(t, st.Evictions, "a cached block was evicted while a freed block was free")
	require.Zero(t, removed)
	require.Equal(t, 1, st.Cached)
}

// A priority duration that reaches past the largest time an int64 holds
// means "never decays", not "decays at once".
func TestHugePriorityDurations(t *testing.T) {
	for _, d := range []time.Duration{24 * time.Hour, 250 * 365 * 24 * time.Hour, time.Duration(math.MaxInt64)} {
		t.Run(d.String(), func(t *testing.T) {
			m := newManager(t, 3, kv.WithTokensPerBlock(4))
			a, _, err := m.Admit(span(100, 105), kv.Key{}) // a full block and a partial one
			require.NoError(t, err)
			require.NoError(t, m.SetPriority(a, 0, 4, kv.MaxPriority, d))
			require.NoError(t, m.Release(a))
			b, _, err := m.Admit(span(200, 205), kv.Key{})
			require.NoError(t, err)
			require.NoError(t, m.Release(b))
			_, err = m.Drain() // decay runs here
			require.NoError(t, err)
			require.Equal(t, 2, m.Stats().Cached)
			// Two blocks needed, one free: one eviction, of b's block (default
			// priority), never of a's.
			_, _, err = m.Admit(span(300, 308), kv.Key{})
			require.NoError(t, err)
			n, err := m.Pin(span(100, 104), kv.Key{})
			require.NoError(t, err)
			require.Equal(t, 1, n, "the high-priority block was evicted: its priority decayed")
		})
	}
}

// A subscriber that panics loses its event and nothing else: the manager
// finishes the call, counts the panic, keeps its identities and loses no
// block.
func TestSubscriberPanic(t *testing.T) {
	boom := false
	p := newPool(t, 2, 64)
	m, err := kv.New(p, kv.WithTokensPerBlock(4), kv.WithSubscriber(func(e *kv.Event) {
		if boom {
			panic("publisher bug")
		}
	}))
	require.NoError(t, err)
	a, _, err := m.Admit(span(0, 4), kv.Key{})
	require.NoError(t, err)
	b, _, err := m.Admit(span(10, 14), kv.Key{})
	require.NoError(t, err)
	require.NoError(t, m.Release(a))
	require.NoError(t, m.Release(b))
	boom = true
	c, _, err := m.Admit(span(20, 24), kv.Key{}) // evicts a cached block, stores a new one
	require.NoError(t, err)
	boom = false
	st := m.Stats()
	require.Equal(t, st.Capacity, st.Free+st.Cached+st.InUse)
	require.Equal(t, 1, st.Sequences)
	require.Positive(t, st.SubscriberPanics)
	require.NoError(t, m.Check())
	require.NoError(t, m.Release(c))
	require.NoError(t, m.Close())
	require.Zero(t, p.Stats().Live, "blocks lost after a subscriber panic")
}

func TestTableTypedNilAndClosedPools(t *testing.T) {
	tb, err := kv.NewTable(16)
	require.NoError(t, err)
	var p *locus.DefaultPool
	var s *pool.Sender
	require.ErrorIs(t, tb.Append(p, 16), pool.ErrInvalidArgument)
	require.ErrorIs(t, tb.Release(s), pool.ErrInvalidArgument)
	require.ErrorIs(t, tb.Release(p), pool.ErrInvalidArgument)

	closed, err := locus.Default(locus.WithBlocks(4))
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	require.ErrorIs(t, tb.Append(closed, 1), pool.ErrClosed)
	var zero locus.DefaultPool
	require.ErrorIs(t, tb.Append(&zero, 1), pool.ErrClosed)

	var nilTable *kv.Table
	require.ErrorIs(t, nilTable.Append(closed, 1), pool.ErrInvalidArgument)
	require.NoError(t, nilTable.Release(closed))
	require.Zero(t, nilTable.Tokens()+nilTable.TokensPerBlock()+len(nilTable.Handles()))
}

func TestNilReceivers(t *testing.T) {
	var m *kv.Manager
	_, _, err := m.Admit(span(0, 4), kv.Key{})
	require.ErrorIs(t, err, pool.ErrClosed)
	require.ErrorIs(t, m.Append(kv.SeqID{}, span(0, 1)), pool.ErrClosed)
	_, err = m.Fork(kv.SeqID{})
	require.ErrorIs(t, err, pool.ErrClosed)
	require.ErrorIs(t, m.Release(kv.SeqID{}), pool.ErrClosed)
	_, err = m.Drain()
	require.ErrorIs(t, err, pool.ErrClosed)
	_, err = m.Reset()
	require.ErrorIs(t, err, pool.ErrClosed)
	_, err = m.NewReleaser()
	require.ErrorIs(t, err, pool.ErrClosed)
	_, err = m.Pin(span(0, 16), kv.Key{})
	require.ErrorIs(t, err, pool.ErrClosed)
	require.ErrorIs(t, m.Close(), pool.ErrClosed)
	require.Equal(t, kv.Stats{}, m.Stats())
	require.Equal(t, kv.Stats{}, m.Snapshot())
	require.Zero(t, m.TokensPerBlock())
	require.Nil(t, m.Hasher())

	var r *kv.Releaser
	require.ErrorIs(t, r.Release(kv.SeqID{}), pool.ErrClosed)
	require.NoError(t, r.Close())

	var h *kv.Hasher
	require.True(t, h.Block(kv.Hash{}, span(0, 16), kv.Key{}).IsZero())
	require.Empty(t, h.AppendHashes(nil, span(0, 32), 16, kv.Key{}))
	require.True(t, h.Root().IsZero())
	var zh kv.Hasher
	require.True(t, zh.Block(kv.Hash{}, span(0, 16), kv.Key{}).IsZero())
	require.False(t, errors.Is(nil, pool.ErrClosed))
}
