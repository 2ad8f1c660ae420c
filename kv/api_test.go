package kv_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/pool"
)

// TestSequenceErrors: every call that takes a sequence id says why it
// rejects one (zero, stale after a release or a preemption, another
// manager's), each reason matches ErrInvalidSequence and no other reason,
// and a rejection changes nothing.
func TestSequenceErrors(t *testing.T) {
	reasons := []error{kv.ErrUnknownSequence, kv.ErrStaleSequence, kv.ErrForeignSequence}
	calls := map[string]func(*kv.Manager, kv.SeqID) error{
		"Append":  func(m *kv.Manager, id kv.SeqID) error { return m.Append(id, []uint32{1}) },
		"Tokens":  func(m *kv.Manager, id kv.SeqID) error { _, err := m.Tokens(id); return err },
		"Blocks":  func(m *kv.Manager, id kv.SeqID) error { _, err := m.Blocks(id); return err },
		"Fork":    func(m *kv.Manager, id kv.SeqID) error { _, err := m.Fork(id); return err },
		"Reserve": func(m *kv.Manager, id kv.SeqID) error { return m.Reserve(id, 1) },
		"Preempt": func(m *kv.Manager, id kv.SeqID) error { _, err := m.Preempt(id); return err },
		"Release": func(m *kv.Manager, id kv.SeqID) error { return m.Release(id) },
	}
	cases := []struct {
		name string
		id   func(t *testing.T, m *kv.Manager) kv.SeqID
		want error
	}{
		{"zero", func(*testing.T, *kv.Manager) kv.SeqID { return kv.SeqID{} }, kv.ErrUnknownSequence},
		{"released", func(t *testing.T, m *kv.Manager) kv.SeqID {
			id, _ := admit(t, m, span(0, 20), kv.Key{})
			release(t, m, id)
			return id
		}, kv.ErrStaleSequence},
		{"released, slot reused", func(t *testing.T, m *kv.Manager) kv.SeqID {
			id, _ := admit(t, m, span(0, 20), kv.Key{})
			release(t, m, id)
			admit(t, m, span(100, 120), kv.Key{}) // takes the same slot, a later generation
			return id
		}, kv.ErrStaleSequence},
		{"preempted", func(t *testing.T, m *kv.Manager) kv.SeqID {
			id, _ := admit(t, m, span(0, 20), kv.Key{})
			_, err := m.Preempt(id)
			require.NoError(t, err)
			return id
		}, kv.ErrStaleSequence},
		{"another manager's", func(t *testing.T, _ *kv.Manager) kv.SeqID {
			id, _ := admit(t, newManager(t, 8), span(0, 20), kv.Key{})
			return id
		}, kv.ErrForeignSequence},
	}
	for _, c := range cases {
		for name, call := range calls {
			t.Run(c.name+"/"+name, func(t *testing.T) {
				m := newManager(t, 16)
				id := c.id(t, m)
				before := m.Stats()
				err := call(m, id)
				require.ErrorIs(t, err, c.want)
				require.ErrorIs(t, err, kv.ErrInvalidSequence)
				for _, r := range reasons {
					if r != c.want {
						require.NotErrorIs(t, err, r)
					}
				}
				after := m.Stats()
				if name == "Release" {
					before.RejectedReleases++
				}
				require.Equal(t, before, after, "a rejected id changes nothing")
			})
		}
	}
}

// TestDrainReportsRejected: Drain counts the releases it applied and those
// it rejected apart, and its error names the first rejection's reason.
func TestDrainReportsRejected(t *testing.T) {
	m := newManager(t, 16)
	other := newManager(t, 8)
	a, _ := admit(t, m, span(0, 20), kv.Key{})
	b, _ := admit(t, m, span(100, 120), kv.Key{})
	foreign, _ := admit(t, other, span(0, 5), kv.Key{})
	r, err := m.NewReleaser()
	require.NoError(t, err)

	require.NoError(t, r.Release(a))
	require.NoError(t, r.Release(a)) // doubled: stale at the drain
	require.NoError(t, r.Release(foreign))
	require.NoError(t, r.Release(b))
	d, err := m.Drain()
	require.Equal(t, kv.Drained{Released: 2, Rejected: 2}, d)
	require.ErrorIs(t, err, kv.ErrStaleSequence, "the first rejection is the doubled release")
	require.ErrorIs(t, err, kv.ErrInvalidSequence)
	require.Equal(t, uint64(2), m.Stats().RejectedReleases)

	require.NoError(t, r.Release(foreign))
	d, err = m.Drain()
	require.Equal(t, kv.Drained{Released: 0, Rejected: 1}, d)
	require.ErrorIs(t, err, kv.ErrForeignSequence)

	d, err = m.Drain()
	require.NoError(t, err)
	require.Equal(t, kv.Drained{}, d, "the counts are per Drain")
}

// TestBlocksIsACopy: the table Blocks returns is the caller's; AppendBlocks
// appends to the caller's slice without allocating when it has room.
func TestBlocksIsACopy(t *testing.T) {
	m := newManager(t, 16)
	id, _ := admit(t, m, span(0, 40), kv.Key{})
	want := ids(t, m, id)
	require.Len(t, want, 3)

	hs, err := m.Blocks(id)
	require.NoError(t, err)
	hs[0] = pool.Handle{}
	_ = append(hs[:1], pool.Handle{}, pool.Handle{})
	require.Equal(t, want, ids(t, m, id), "editing the copy leaves the manager's table")

	pre := pool.Handle{}
	dst := make([]pool.Handle, 1, 8)
	dst[0] = pre
	dst, err = m.AppendBlocks(dst, id)
	require.NoError(t, err)
	require.Len(t, dst, 4)
	require.Equal(t, pre, dst[0])
	for i, h := range dst[1:] {
		require.Equal(t, want[i], h.Index())
	}
	allocs := testing.AllocsPerRun(100, func() { dst, _ = m.AppendBlocks(dst[:0], id) })
	require.Zero(t, allocs)

	stale, _ := admit(t, m, span(500, 510), kv.Key{})
	release(t, m, stale)
	got, err := m.AppendBlocks(dst[:2], stale)
	require.ErrorIs(t, err, kv.ErrStaleSequence)
	require.Len(t, got, 2, "on error dst comes back unchanged")
}

// TestTokensNotKept: Admit and Append copy the tokens they keep, so a
// caller that reuses its slice at once changes neither the blocks' hashes
// nor the partial block.
func TestTokensNotKept(t *testing.T) {
	var hashes [2][]kv.Hash
	for round, reuse := range []bool{false, true} {
		var got []kv.Hash
		m := newManager(t, 16, kv.WithSubscriber(func(e *kv.Event) {
			if e.Kind == kv.BlockStored {
				got = append(got, e.Hashes...)
			}
		}))
		buf := span(0, 24) // one full block and 8 tokens of the next
		id, _ := admit(t, m, buf, kv.Key{})
		if reuse {
			for i := range buf {
				buf[i] = 9999
			}
		}
		next := span(24, 32)
		require.NoError(t, m.Append(id, next)) // fills the second block
		if reuse {
			for i := range next {
				next[i] = 9999
			}
		}
		hashes[round] = got
		n, err := m.Lookup(span(0, 40), kv.Key{})
		require.NoError(t, err)
		require.Equal(t, 32, n, "round %d", round)
	}
	require.Len(t, hashes[0], 2)
	require.Equal(t, hashes[0], hashes[1])
}

// TestMaxPinned: the pin cap's zero value means no cap, the default is
// half the pool, a share under one block forbids pins, and a share out of
// range fails New.
func TestMaxPinned(t *testing.T) {
	const blocks = 8
	prompt := span(0, blocks*16)
	cases := []struct {
		name   string
		opts   []kv.Option
		pinned int // blocks a pin of the whole cached prompt may hold
	}{
		{"default", nil, blocks / 2},
		{"zero: no cap", []kv.Option{kv.WithMaxPinned(0)}, blocks},
		{"a quarter", []kv.Option{kv.WithMaxPinned(0.25)}, blocks / 4},
		{"under one block", []kv.Option{kv.WithMaxPinned(0.1)}, 0},
		{"all", []kv.Option{kv.WithMaxPinned(1)}, blocks},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := newManager(t, blocks, c.opts...)
			id, _ := admit(t, m, prompt, kv.Key{})
			release(t, m, id) // every block cached
			for n := 1; n <= blocks; n++ {
				_, err := m.Pin(prompt[:n*16], kv.Key{})
				if n <= c.pinned {
					require.NoError(t, err, "pin of %d blocks", n)
					_, err = m.Unpin(prompt[:n*16], kv.Key{})
					require.NoError(t, err)
				} else {
					require.ErrorIs(t, err, kv.ErrPinLimit, "pin of %d blocks", n)
				}
			}
		})
	}
	for _, share := range []float64{-0.5, 1.5} {
		_, err := kv.New(newPool(t, blocks, 64), kv.WithMaxPinned(share))
		require.ErrorIs(t, err, kv.ErrInvalidConfig, "share %v", share)
	}
}

// TestReexportedErrors: kv's names for the pool's errors are the pool's
// values, so either name matches what a Manager returns.
func TestReexportedErrors(t *testing.T) {
	for _, c := range []struct{ kv, pool error }{
		{kv.ErrExhausted, pool.ErrExhausted},
		{kv.ErrInvalidArgument, pool.ErrInvalidArgument},
		{kv.ErrInvalidConfig, pool.ErrInvalidConfig},
		{kv.ErrClosed, pool.ErrClosed},
	} {
		require.Same(t, c.pool, c.kv)
	}
	m := newManager(t, 2)
	_, _, err := m.Admit(span(0, 100), kv.Key{})
	require.ErrorIs(t, err, kv.ErrExhausted)
	var ex *kv.ExhaustedError
	require.True(t, errors.As(err, &ex))
	require.NoError(t, m.Close())
	_, _, err = m.Admit(span(0, 10), kv.Key{})
	require.ErrorIs(t, err, kv.ErrClosed)
}

// TestGroupsSequenceErrors: Groups say why they reject an id as a
// Manager does, and their block tables are copies too.
func TestGroupsSequenceErrors(t *testing.T) {
	g := hybrid(t, 16, "full", "state")
	id, _, err := g.Admit(span(0, 40), kv.Key{})
	require.NoError(t, err)
	want, err := g.Blocks(id, 0)
	require.NoError(t, err)
	got, _ := g.Blocks(id, 0)
	got[0] = pool.Handle{}
	again, _ := g.Blocks(id, 0)
	require.Equal(t, want, again, "editing the copy leaves the table")
	dst, err := g.AppendBlocks(make([]pool.Handle, 0, 8), id, 1)
	require.NoError(t, err)
	require.Len(t, dst, 1, "a state group's table is its one state block")

	released, _, err := g.Admit(span(100, 120), kv.Key{})
	require.NoError(t, err)
	require.NoError(t, g.Release(released))
	mid, _ := admit(t, newManager(t, 8), span(0, 5), kv.Key{})
	for _, c := range []struct {
		id   kv.SeqID
		want error
	}{{kv.SeqID{}, kv.ErrUnknownSequence}, {released, kv.ErrStaleSequence}, {mid, kv.ErrForeignSequence}} {
		_, err := g.Tokens(c.id)
		require.ErrorIs(t, err, c.want)
		require.ErrorIs(t, g.Release(c.id), c.want)
		_, err = g.AppendBlocks(nil, c.id, 0)
		require.ErrorIs(t, err, c.want)
		require.ErrorIs(t, err, kv.ErrInvalidSequence)
	}
}
