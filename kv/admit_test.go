package kv_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/pool"
)

// CanAdmit tells OK, LATER and NEVER apart, with counts, and changes
// nothing; Admit's error carries the same counts.
func TestCanAdmitLaterNever(t *testing.T) {
	m := newManager(t, 10, kv.WithFreedOrder(kv.QueueFreedBehindCached))

	// NEVER: 11 blocks from a pool of 10.
	a, err := m.CanAdmit(span(0, 11*16), kv.Key{})
	require.NoError(t, err)
	require.Equal(t, kv.Admission{Status: kv.AdmitNever, Blocks: 11, Need: 11, Available: 10}, a)
	require.Equal(t, 1, a.Shortfall())
	_, _, err = m.Admit(span(0, 11*16), kv.Key{})
	require.ErrorIs(t, err, kv.ErrTooLarge)
	require.ErrorIs(t, err, pool.ErrExhausted)
	var ee *kv.ExhaustedError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, kv.ExhaustedError{Blocks: 11, Need: 11, Available: 10, Capacity: 10}, *ee)
	require.True(t, ee.Never())

	// A cached system prompt of 3 blocks, then 5 blocks in use elsewhere.
	sys := blocksOf(3)
	first, _ := admit(t, m, cat(sys, repeat(50, 16)), kv.Key{})
	release(t, m, first) // 4 blocks cached
	other, _ := admit(t, m, span(1000, 1000+5*16), kv.Key{})
	st := m.Stats()
	require.Equal(t, 5, st.InUse)
	require.Equal(t, 1, st.Free)
	require.Equal(t, 4, st.Cached)
	order := m.EvictionOrder()

	// LATER: 7 new blocks, the free one and 4 evictable are too few.
	prompt := span(5000, 5000+7*16)
	a, err = m.CanAdmit(prompt, kv.Key{})
	require.NoError(t, err)
	require.Equal(t, kv.Admission{Status: kv.AdmitLater, Blocks: 7, Need: 7, Available: 5}, a)
	require.Equal(t, 2, a.Shortfall())
	require.Equal(t, st, m.Stats(), "CanAdmit changed the accounting")
	require.Equal(t, order, m.EvictionOrder(), "CanAdmit moved blocks")
	_, _, err = m.Admit(prompt, kv.Key{})
	require.ErrorIs(t, err, pool.ErrExhausted)
	require.False(t, errors.Is(err, kv.ErrTooLarge))
	require.ErrorAs(t, err, &ee)
	require.Equal(t, kv.ExhaustedError{Blocks: 7, Need: 7, Available: 5, Capacity: 10}, *ee)
	require.Equal(t, st.Exhausted+1, m.Stats().Exhausted)

	// OK with a hit: the 3 cached blocks are reused, not counted as
	// evictable, and the last token's block is computed again.
	p2 := cat(sys, repeat(60, 20)) // 3 cached + 2 new blocks
	a, err = m.CanAdmit(p2, kv.Key{})
	require.NoError(t, err)
	require.Equal(t, kv.Admission{Status: kv.AdmitOK, Blocks: 5, CachedTokens: 48, Need: 2, Available: 2}, a)
	id, hit, err := m.Admit(p2, kv.Key{})
	require.NoError(t, err)
	require.Equal(t, a.CachedTokens, hit)
	release(t, m, id, other)

	for _, s := range []kv.AdmitStatus{kv.AdmitOK, kv.AdmitLater, kv.AdmitNever, 0} {
		require.NotEmpty(t, s.String())
	}
	require.Contains(t, ee.Error(), "need 7 blocks, 5 available")
}

// Lookup reports the cached prefix as Admit would, without admitting or
// counting, and lets a chunked prefill keep every hit.
func TestLookupChunkedPrefill(t *testing.T) {
	m := newManager(t, 32)
	doc := span(0, 8*16+5) // 8 full blocks and a partial one
	id, _ := admit(t, m, doc, kv.Key{})
	release(t, m, id)
	before := m.Stats()

	n, err := m.Lookup(doc, kv.Key{})
	require.NoError(t, err)
	require.Equal(t, 8*16, n)
	n, err = m.Lookup(doc[:8*16], kv.Key{}) // the last token's block is recomputed
	require.NoError(t, err)
	require.Equal(t, 7*16, n)
	n, err = m.Lookup(doc, kv.Key{Salt: "other tenant"})
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, before, m.Stats(), "Lookup counted or changed something")

	// Chunked prefill, 32 tokens a step: admitting the hit and the first
	// chunk together reuses all 8 blocks.
	const chunk = 32
	hit, err := m.Lookup(doc, kv.Key{})
	require.NoError(t, err)
	end := min(len(doc), hit+chunk)
	id, got := admit(t, m, doc[:end], kv.Key{})
	require.Equal(t, hit, got)
	for ; end < len(doc); end = min(len(doc), end+chunk) {
		require.NoError(t, m.Append(id, doc[end:min(len(doc), end+chunk)]))
	}
	st := m.Stats()
	require.Equal(t, before.HitTokens+uint64(hit), st.HitTokens)
	require.Equal(t, 9, st.InUse)
	release(t, m, id)

	// Admitting only the first chunk loses the hits beyond it.
	id, got = admit(t, m, doc[:chunk], kv.Key{})
	require.Equal(t, 16, got)
	release(t, m, id)
}

// Preempt releases a running sequence, leaves its full blocks cached and
// reports what readmission takes; readmission reuses them.
func TestPreempt(t *testing.T) {
	m := newManager(t, 8)
	prompt := span(0, 40) // 2 full blocks and 8 tokens
	id, _ := admit(t, m, prompt, kv.Key{})
	gen := span(100, 130) // 30 generated tokens: 70 in all, 4 full blocks and 6
	require.NoError(t, m.Append(id, gen))
	require.NoError(t, m.Reserve(id, 20)) // and lookahead slots: 6 blocks held
	require.Equal(t, 6, m.Stats().InUse)

	a, err := m.Preempt(id)
	require.NoError(t, err)
	require.Equal(t, kv.Admission{Status: kv.AdmitOK, Blocks: 5, CachedTokens: 64, Need: 1, Available: 4}, a)
	st := m.Stats()
	require.Equal(t, 4, st.Cached, "the full blocks stay cached")
	require.Equal(t, 4, st.Free)
	require.Zero(t, st.InUse+st.Reserved+st.Sequences)
	require.Equal(t, uint64(1), st.Preemptions)
	require.Zero(t, st.Releases)
	require.ErrorIs(t, m.Release(id), kv.ErrInvalidSequence, "a preempted id is stale")
	_, err = m.Preempt(id)
	require.ErrorIs(t, err, kv.ErrInvalidSequence)

	// Readmission: the engine admits prompt and generated tokens again.
	all := cat(prompt, gen)
	ca, err := m.CanAdmit(all, kv.Key{})
	require.NoError(t, err)
	require.Equal(t, a, ca)
	id, hit := admit(t, m, all, kv.Key{})
	require.Equal(t, 64, hit)
	require.Equal(t, 5, m.Stats().InUse)

	// Preempted under pressure: its cached blocks are evicted before
	// readmission, which then needs more.
	a, err = m.Preempt(id)
	require.NoError(t, err)
	other, _ := admit(t, m, span(1000, 1000+7*16), kv.Key{}) // 7 blocks: 3 evictions
	ca, err = m.CanAdmit(all, kv.Key{})
	require.NoError(t, err)
	require.Equal(t, kv.AdmitLater, ca.Status)
	require.Equal(t, 16, ca.CachedTokens, "the chain's tail went first")
	require.Greater(t, ca.Need, a.Need)
	release(t, m, other)
}

// Without prefix caching nothing is hashed, reused, kept or announced;
// fork and copy-on-write still work.
func TestPrefixCachingOff(t *testing.T) {
	events := 0
	p := newPool(t, 6, 64)
	m, err := kv.New(p, kv.WithTokensPerBlock(4), kv.WithPrefixCaching(false),
		kv.WithSubscriber(func(*kv.Event) { events++ }))
	require.NoError(t, err)
	prompt := span(0, 10) // 2 full blocks and 2 tokens
	a, hit := admit(t, m, prompt, kv.Key{})
	require.Zero(t, hit)
	b, hit := admit(t, m, prompt, kv.Key{}) // the same prompt: no reuse
	require.Zero(t, hit)
	require.Equal(t, 6, m.Stats().InUse)
	n, err := m.Lookup(prompt, kv.Key{})
	require.NoError(t, err)
	require.Zero(t, n)
	ca, err := m.CanAdmit(prompt, kv.Key{})
	require.NoError(t, err)
	require.Equal(t, kv.Admission{Status: kv.AdmitLater, Blocks: 3, Need: 3}, ca)
	_, _, err = m.Admit(span(50, 51), kv.Key{}) // plain exhaustion
	require.ErrorIs(t, err, pool.ErrExhausted)

	release(t, m, b)
	st := m.Stats()
	require.Equal(t, 3, st.Free, "released blocks go back to the pool, not to a cache")
	require.Zero(t, st.Cached+int(st.Stored+st.QueryTokens+st.HitTokens))
	pinned, err := m.Pin(prompt, kv.Key{})
	require.NoError(t, err)
	require.Zero(t, pinned)

	// Fork and copy-on-write.
	h, err := m.Block(a, 9)
	require.NoError(t, err)
	mem, err := p.Bytes(h)
	require.NoError(t, err)
	mem[0] = 42
	f, err := m.Fork(a)
	require.NoError(t, err)
	require.NoError(t, m.Append(f, span(20, 21)))
	h2, err := m.Block(f, 9)
	require.NoError(t, err)
	require.NotEqual(t, h, h2, "the shared partial block was not copied")
	mem2, err := p.Bytes(h2)
	require.NoError(t, err)
	require.Equal(t, byte(42), mem2[0])
	require.Equal(t, uint64(1), m.Stats().CopyOnWrite)
	release(t, m, a, f)
	_, err = m.Reset()
	require.NoError(t, err)
	require.Zero(t, events)
	st = m.Stats()
	require.Equal(t, st.Capacity, st.Free)
	require.NoError(t, m.Close())
	require.Zero(t, p.Stats().Live)
}

func TestNilReceiversAdmission(t *testing.T) {
	var m *kv.Manager
	_, err := m.CanAdmit(span(0, 4), kv.Key{})
	require.ErrorIs(t, err, pool.ErrClosed)
	_, err = m.Lookup(span(0, 4), kv.Key{})
	require.ErrorIs(t, err, pool.ErrClosed)
	_, err = m.Preempt(kv.SeqID{})
	require.ErrorIs(t, err, pool.ErrClosed)
	require.ErrorIs(t, m.Reserve(kv.SeqID{}, 1), pool.ErrClosed)
	require.ErrorIs(t, m.Accept(kv.SeqID{}, nil), pool.ErrClosed)

	live := newManager(t, 4)
	_, err = live.Preempt(kv.SeqID{})
	require.ErrorIs(t, err, kv.ErrInvalidSequence)
	require.ErrorIs(t, live.Reserve(kv.SeqID{}, 1), kv.ErrInvalidSequence)
	require.ErrorIs(t, live.Accept(kv.SeqID{}, nil), kv.ErrInvalidSequence)
}
