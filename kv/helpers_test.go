package kv_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
)

// newPool returns a LIFO heap pool of n blocks of size bytes: a fresh one
// hands out blocks 0, 1, 2, ..., which makes block ids predictable.
func newPool(t testing.TB, n, size int) *pool.Pool[*heap.Backing, *mailbox.Transport, lifo.Policy] {
	t.Helper()
	b, err := heap.New(size, n)
	require.NoError(t, err)
	p, err := pool.New(b, mailbox.New(), lifo.Policy{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// newManager returns a manager over a fresh LIFO pool of n blocks, 16 tokens
// to a block unless opts say otherwise, and checks its invariants when the
// test ends.
func newManager(t testing.TB, n int, opts ...kv.Option) *kv.Manager {
	t.Helper()
	m, err := kv.New(newPool(t, n, 64), opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := m.Check(); err != nil {
			t.Errorf("invariants at the end: %v", err)
		}
	})
	return m
}

// ids returns the block indices of a sequence.
func ids(t testing.TB, m *kv.Manager, id kv.SeqID) []int {
	t.Helper()
	hs, err := m.Blocks(id)
	require.NoError(t, err)
	out := make([]int, len(hs))
	for i, h := range hs {
		out[i] = h.Index()
	}
	return out
}

// repeat returns the tokens v, v, ..., n of them.
func repeat(v uint32, n int) []uint32 {
	s := make([]uint32, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// blocksOf returns tokens 0, 0, ... (16 times), 1, 1, ...: n full blocks of
// 16 tokens, as vLLM's tests build their common prefix.
func blocksOf(n int) []uint32 {
	var s []uint32
	for i := range n {
		s = append(s, repeat(uint32(i), 16)...)
	}
	return s
}

func cat(parts ...[]uint32) []uint32 {
	var s []uint32
	for _, p := range parts {
		s = append(s, p...)
	}
	return s
}

func span(from, to int) []uint32 {
	s := make([]uint32, 0, to-from)
	for t := from; t < to; t++ {
		s = append(s, uint32(t))
	}
	return s
}

func admit(t testing.TB, m *kv.Manager, tokens []uint32, key kv.Key) (kv.SeqID, int) {
	t.Helper()
	id, hit, err := m.Admit(tokens, key)
	require.NoError(t, err)
	require.NoError(t, m.Check())
	return id, hit
}

func release(t testing.TB, m *kv.Manager, ids ...kv.SeqID) {
	t.Helper()
	for _, id := range ids {
		require.NoError(t, m.Release(id))
	}
	require.NoError(t, m.Check())
}

// available is what vLLM's free block queue counts: free and cached blocks.
func available(m *kv.Manager) int {
	st := m.Stats()
	return st.Free + st.Cached
}
