package kv_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/pool"
)

// A speculative step: reserve lookahead slots, accept some drafts, reject
// the rest; only blocks full of accepted tokens are hashed, and the
// accounting is exact throughout.
func TestSpeculativeAcceptReject(t *testing.T) {
	var stored []kv.Hash
	m := newManager(t, 8, kv.WithTokensPerBlock(4), kv.WithSubscriber(func(e *kv.Event) {
		if e.Kind == kv.BlockStored {
			stored = append(stored, e.Hashes...)
		}
	}))
	identity := func() {
		t.Helper()
		st := m.Stats()
		require.Equal(t, st.Capacity, st.Free+st.Cached+st.InUse)
		require.NoError(t, m.Check())
	}
	id, _ := admit(t, m, span(0, 6), kv.Key{}) // one full block, 2 tokens
	require.Len(t, stored, 1)

	// Five drafts: slots 6..10, one more block.
	require.NoError(t, m.Reserve(id, 5))
	identity()
	st := m.Stats()
	require.Equal(t, 3, st.InUse)
	require.Equal(t, 1, st.Reserved)
	n, _ := m.Tokens(id)
	require.Equal(t, 6, n, "a reservation adds no tokens")
	_, err := m.Block(id, 10)
	require.NoError(t, err)
	_, err = m.Block(id, 11)
	require.ErrorIs(t, err, pool.ErrInvalidArgument)
	require.Len(t, stored, 1, "nothing is hashed at reservation")

	// Two drafts accepted and the target's own token: 9 tokens, block 1
	// full of accepted tokens, 2 slots rolled back.
	require.NoError(t, m.Accept(id, []uint32{6, 7, 8}))
	identity()
	st = m.Stats()
	require.Equal(t, 3, st.InUse, "block 2 holds token 8")
	require.Zero(t, st.Reserved)
	require.Equal(t, uint64(2), st.RolledBackTokens)
	want := m.Hasher().AppendHashes(nil, span(0, 8), 4, kv.Key{})
	require.Equal(t, want, stored, "only blocks full of accepted tokens are hashed")

	// Every draft rejected: the lookahead block goes back, unhashed.
	require.NoError(t, m.Reserve(id, 7)) // slots 9..15: block 3 more
	require.Equal(t, 4, m.Stats().InUse)
	require.NoError(t, m.Accept(id, nil))
	identity()
	st = m.Stats()
	require.Equal(t, 3, st.InUse)
	require.Equal(t, 5, st.Free)
	require.Equal(t, uint64(9), st.RolledBackTokens)
	require.Len(t, stored, 2)

	// A smaller reservation gives blocks back; Append keeps what the
	// tokens do not fill.
	require.NoError(t, m.Reserve(id, 11)) // to 20 tokens: 5 blocks
	require.Equal(t, 2, m.Stats().Reserved)
	require.NoError(t, m.Reserve(id, 3)) // to 12: 3 blocks
	require.Equal(t, 0, m.Stats().Reserved)
	require.NoError(t, m.Append(id, []uint32{9})) // one slot filled, 2 kept
	require.NoError(t, m.Reserve(id, 7))
	require.NoError(t, m.Append(id, []uint32{10, 11, 12}))
	identity()
	hs, _ := m.Blocks(id)
	require.Len(t, hs, 5) // 13 tokens and 4 slots: 17
	require.Equal(t, 1, m.Stats().Reserved)

	// Too large, invalid and exhausted reservations change nothing.
	before := m.Stats()
	require.ErrorIs(t, m.Reserve(id, 100), kv.ErrTooLarge)
	require.ErrorIs(t, m.Reserve(id, -1), pool.ErrInvalidArgument)
	other, _ := admit(t, m, span(100, 112), kv.Key{}) // 3 blocks: the pool is full
	err = m.Reserve(id, 8)
	var ee *kv.ExhaustedError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, kv.ExhaustedError{Blocks: 6, Need: 1, Available: 0, Capacity: 8}, *ee)
	require.Equal(t, before.Reserved, m.Stats().Reserved)
	identity()
	release(t, m, id, other)
	identity()
	require.Zero(t, m.Stats().InUse)
}

// Reserving after a fork copies the shared block the drafts go to, so the
// drafts never touch the other sequence's tokens; the fork gets no slots.
func TestReserveCopiesSharedBlock(t *testing.T) {
	p := newPool(t, 8, 64)
	m, err := kv.New(p, kv.WithTokensPerBlock(4))
	require.NoError(t, err)
	a, _ := admit(t, m, span(0, 6), kv.Key{})
	require.NoError(t, m.Reserve(a, 4))
	b, err := m.Fork(a)
	require.NoError(t, err)
	hb, _ := m.Blocks(b)
	require.Len(t, hb, 2, "the fork shares no lookahead block")
	require.NoError(t, m.Reserve(b, 2))
	require.Equal(t, uint64(1), m.Stats().CopyOnWrite)
	ha, _ := m.Block(a, 6)
	hb2, _ := m.Block(b, 6)
	require.NotEqual(t, ha, hb2)
	require.NoError(t, m.Accept(a, []uint32{6}))
	require.NoError(t, m.Accept(b, []uint32{7, 8}))
	require.NoError(t, m.Check())
	require.NoError(t, m.Release(a))
	require.NoError(t, m.Release(b))
	require.NoError(t, m.Close())
	require.Zero(t, p.Stats().Live)
}

func TestBlockBytes(t *testing.T) {
	llama70B := kv.Shape{Layers: 80, KVHeads: 8, HeadDim: 128, DTypeBytes: 2, TokensPerBlock: 16}
	n, err := kv.BlockBytes(llama70B)
	require.NoError(t, err)
	require.Equal(t, 5<<20, n, "5 MiB per 16-token block")

	blocks, size, err := kv.BlocksIn(40<<30, llama70B) // 40 GiB for the cache
	require.NoError(t, err)
	require.Equal(t, 8192, blocks)
	require.Equal(t, 5<<20, size)
	blocks, _, err = kv.BlocksIn(5<<20-1, llama70B)
	require.NoError(t, err)
	require.Zero(t, blocks)

	for _, s := range []kv.Shape{
		{},
		{Layers: 80, KVHeads: 8, HeadDim: 128, DTypeBytes: 2},
		{Layers: -1, KVHeads: 8, HeadDim: 128, DTypeBytes: 2, TokensPerBlock: 16},
		{Layers: 1 << 30, KVHeads: 1 << 30, HeadDim: 1 << 30, DTypeBytes: 2, TokensPerBlock: 16},
	} {
		_, err := kv.BlockBytes(s)
		require.ErrorIs(t, err, pool.ErrInvalidArgument, "%+v", s)
	}
	_, _, err = kv.BlocksIn(-1, llama70B)
	require.ErrorIs(t, err, pool.ErrInvalidArgument)
}
