package kv_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/pool"
)

// The scenarios below port vLLM's prefix-caching tests
// (tests/v1/core/test_prefix_caching.py) one by one. vLLM keeps block 0 as
// its null block, so its block ids are ours plus one; its
// free_block_queue.num_free_blocks counts free and cached blocks, which is
// available(m) here. Where vLLM's expected ids depend on where a freed
// block without a hash goes, the test runs with QueueFreedBehindCached,
// the order those tests were written for.

// test_prefill: block ids after prefill, cache hits while the blocks are in
// use and after they are free, the order of the free queue, and the
// eviction order of a cache miss.
func TestScenarioPrefill(t *testing.T) {
	m := newManager(t, 10, kv.WithFreedOrder(kv.QueueFreedBehindCached))
	common := blocksOf(3)

	req0, hit := admit(t, m, cat(common, repeat(3, 7)), kv.Key{})
	require.Zero(t, hit)
	require.Equal(t, []int{0, 1, 2, 3}, ids(t, m, req0))
	hasher := m.Hasher()
	want := hasher.AppendHashes(nil, common, 16, kv.Key{})
	for i := range 3 {
		h, ref := m.BlockHash(i)
		require.Equal(t, want[i], h, "block %d", i)
		require.Equal(t, 1, ref)
	}
	h, ref := m.BlockHash(3)
	require.True(t, h.IsZero(), "a partial block has no hash")
	require.Equal(t, 1, ref)

	// A hit while the blocks are in use.
	req1, hit := admit(t, m, cat(common, repeat(3, 5)), kv.Key{})
	require.Equal(t, 48, hit)
	require.Equal(t, []int{0, 1, 2, 4}, ids(t, m, req1))
	for i := range 3 {
		_, ref := m.BlockHash(i)
		require.Equal(t, 2, ref)
	}
	require.Equal(t, 5, available(m))

	release(t, m, req0, req1)
	require.Equal(t, 10, available(m))
	// vLLM's queue: [unallocated 6..10] [4] [5] [3 2 1]. Here the
	// unallocated blocks are still in the pool, ahead of the order.
	require.Equal(t, []int{3, 4, 2, 1, 0}, m.EvictionOrder())

	// A hit after the blocks were freed takes them out of the order.
	req2, hit := admit(t, m, cat(common, repeat(3, 6)), kv.Key{})
	require.Equal(t, 48, hit)
	require.Equal(t, []int{0, 1, 2, 5}, ids(t, m, req2))
	require.Equal(t, 6, available(m))
	require.Equal(t, []int{3, 4}, m.EvictionOrder())
	release(t, m, req2)

	// A miss of 10 blocks takes the unallocated blocks, then evicts in
	// order; vLLM expects [7, 8, 9, 10, 4, 5, 6, 3, 2, 1].
	req3, hit := admit(t, m, repeat(99, 160), kv.Key{})
	require.Zero(t, hit)
	require.Equal(t, []int{6, 7, 8, 9, 3, 4, 5, 2, 1, 0}, ids(t, m, req3))
	require.Zero(t, available(m))
	require.Equal(t, uint64(3), m.Stats().Evictions)
}

// The same trace with the default order: freed blocks without a hash go
// back to the pool and are reused before any cached block is evicted.
func TestScenarioPrefillReuseFreedFirst(t *testing.T) {
	m := newManager(t, 10)
	common := blocksOf(3)
	req0, _ := admit(t, m, cat(common, repeat(3, 7)), kv.Key{})
	req1, _ := admit(t, m, cat(common, repeat(3, 5)), kv.Key{})
	release(t, m, req0, req1)
	require.Equal(t, []int{2, 1, 0}, m.EvictionOrder(), "only cached blocks wait in the order")
	st := m.Stats()
	require.Equal(t, 7, st.Free)
	require.Equal(t, 3, st.Cached)

	req2, _ := admit(t, m, cat(common, repeat(3, 6)), kv.Key{})
	require.Equal(t, []int{0, 1, 2, 4}, ids(t, m, req2), "LIFO: the last freed partial block first")
	release(t, m, req2)
	req3, _ := admit(t, m, repeat(99, 160), kv.Key{})
	require.Equal(t, []int{4, 3, 5, 6, 7, 8, 9, 2, 1, 0}, ids(t, m, req3))
}

// test_decode: decode appends fill the partial block without allocating,
// then allocate one block and cache the block they filled.
func TestScenarioDecode(t *testing.T) {
	m := newManager(t, 10)
	req0, _ := admit(t, m, cat(blocksOf(3), repeat(3, 7)), kv.Key{})
	require.Equal(t, []int{0, 1, 2, 3}, ids(t, m, req0))

	require.NoError(t, m.Append(req0, repeat(8, 4)))
	require.Len(t, ids(t, m, req0), 4, "59 tokens still fit 4 blocks")
	h, _ := m.BlockHash(3)
	require.True(t, h.IsZero())

	require.NoError(t, m.Append(req0, repeat(7, 19)))
	got := ids(t, m, req0)
	require.Len(t, got, 5)
	h, _ = m.BlockHash(got[3])
	require.False(t, h.IsZero(), "the filled block is cached")
	h, _ = m.BlockHash(got[4])
	require.True(t, h.IsZero())
	require.Equal(t, uint64(4), m.Stats().Stored)
	require.NoError(t, m.Check())
}

// test_evict: the free queue after two releases, and a hit that unlinks
// blocks from the eviction order.
func TestScenarioEvict(t *testing.T) {
	m := newManager(t, 10, kv.WithFreedOrder(kv.QueueFreedBehindCached))
	last := 5*16 + 7
	req0, _ := admit(t, m, span(0, last), kv.Key{})
	require.Len(t, ids(t, m, req0), 6)
	req1, _ := admit(t, m, span(last, last+48), kv.Key{})
	require.Equal(t, []int{6, 7, 8}, ids(t, m, req1))
	require.Equal(t, 1, available(m))

	release(t, m, req0, req1)
	require.Equal(t, 10, available(m))
	// vLLM: [10, 6, 5, 4, 3, 2, 1, 9, 8, 7]; block 9 here is still in
	// the pool, first in line.
	require.Equal(t, []int{5, 4, 3, 2, 1, 0, 8, 7, 6}, m.EvictionOrder())

	req2, hit := admit(t, m, span(0, 2*16+3), kv.Key{})
	require.Equal(t, 32, hit)
	require.Equal(t, []int{0, 1, 9}, ids(t, m, req2))
	require.Equal(t, 7, available(m))
}

// test_hash_block_correct_reuse: a reused block loses its hash.
func TestScenarioReusedBlockLosesHash(t *testing.T) {
	var removed int
	m := newManager(t, 1, kv.WithSubscriber(func(e *kv.Event) {
		if e.Kind == kv.BlockRemoved {
			removed += len(e.Hashes)
		}
	}))
	req, _ := admit(t, m, span(0, 16), kv.Key{})
	release(t, m, req)
	require.Equal(t, 1, m.Stats().Cached)
	req, _ = admit(t, m, span(0, 15), kv.Key{})
	h, _ := m.BlockHash(ids(t, m, req)[0])
	require.True(t, h.IsZero())
	require.Equal(t, 1, removed)
	require.Empty(t, m.CachedHashes())
}

// test_computed_blocks_not_evicted: a hit is never its own victim.
func TestScenarioHitNotEvicted(t *testing.T) {
	m := newManager(t, 2)
	req0, _ := admit(t, m, span(0, 16), kv.Key{})
	require.Equal(t, []int{0}, ids(t, m, req0))
	req1, _ := admit(t, m, span(16, 32), kv.Key{})
	require.Equal(t, []int{1}, ids(t, m, req1))
	release(t, m, req0, req1)

	req2, hit := admit(t, m, span(0, 32), kv.Key{})
	require.Equal(t, 16, hit)
	require.Equal(t, []int{0, 1}, ids(t, m, req2), "block 1 is evicted, block 0 is hit")
}

// Admission counts the cached blocks it can evict, and not the ones it
// hits: too few free blocks but enough cached ones is enough.
func TestScenarioAdmitEvictsCached(t *testing.T) {
	m := newManager(t, 4)
	a, _ := admit(t, m, span(0, 64), kv.Key{})
	release(t, m, a)
	require.Equal(t, 0, m.Stats().Free)
	require.Equal(t, 4, m.Stats().Cached)

	// The same prompt and one more block: it hits 4 blocks and needs one
	// more, but the only evictable blocks are its own hits.
	_, _, err := m.Admit(span(0, 80), kv.Key{})
	require.ErrorIs(t, err, pool.ErrExhausted)
	require.Equal(t, 4, m.Stats().Cached, "a refused admission changes nothing")
	require.Len(t, m.CachedHashes(), 4)

	b, hit := admit(t, m, span(100, 148), kv.Key{})
	require.Zero(t, hit)
	require.Len(t, ids(t, m, b), 3)
	st := m.Stats()
	require.Equal(t, uint64(3), st.Evictions)
	require.Equal(t, 1, st.Cached)

	_, _, err = m.Admit(span(200, 232), kv.Key{})
	require.ErrorIs(t, err, pool.ErrExhausted)
	require.Equal(t, uint64(2), m.Stats().Exhausted)
	require.Equal(t, st.Stored, m.Stats().Stored)
}

// A prompt of whole blocks never hits its last block: the engine computes
// the last prompt token again (vLLM's max_cache_hit_length).
func TestScenarioLastTokenRecomputed(t *testing.T) {
	m := newManager(t, 8)
	a, _ := admit(t, m, span(0, 32), kv.Key{})
	b, hit := admit(t, m, span(0, 32), kv.Key{})
	require.Equal(t, 16, hit)
	require.Equal(t, ids(t, m, a)[0], ids(t, m, b)[0])
	require.NotEqual(t, ids(t, m, a)[1], ids(t, m, b)[1])
	release(t, m, a, b)
	require.Equal(t, 2, m.Stats().Cached, "the duplicate of block 1 is not cached")
}

// test_cache_key_salting (and the adapter key): the salt enters the first
// block only; equal salts share, different salts and adapters do not.
func TestScenarioSalting(t *testing.T) {
	m := newManager(t, 16)
	common := blocksOf(3)
	salt1 := kv.Key{Salt: "salt1"}
	req0, hit := admit(t, m, cat(common, repeat(3, 11)), salt1)
	require.Zero(t, hit)

	h := m.Hasher()
	salted := h.AppendHashes(nil, common, 16, salt1)
	plain := h.AppendHashes(nil, common, 16, kv.Key{})
	require.NotEqual(t, salted[0], plain[0])
	// The second block differs only through its parent: the salt is not
	// hashed into it again.
	require.Equal(t, salted[1], h.Block(salted[0], common[16:32], kv.Key{}))

	req1, hit := admit(t, m, cat(common, repeat(4, 11)), salt1)
	require.Equal(t, 48, hit)
	_, hit = admit(t, m, cat(common, repeat(4, 11)), kv.Key{Salt: "salt2"})
	require.Zero(t, hit)
	_, hit = admit(t, m, cat(common, repeat(4, 11)), kv.Key{Adapter: "sql-lora", Salt: "salt1"})
	require.Zero(t, hit)
	release(t, m, req0, req1)
}

// test_reset_prefix_cache: Reset drops what nobody holds and clears the
// index once nothing is cached.
func TestScenarioReset(t *testing.T) {
	var kinds []kv.EventKind
	m := newManager(t, 10, kv.WithSubscriber(func(e *kv.Event) { kinds = append(kinds, e.Kind) }))
	full := blocksOf(3)
	req0, _ := admit(t, m, cat(full, repeat(3, 7)), kv.Key{})
	require.Equal(t, []int{0, 1, 2, 3}, ids(t, m, req0))
	req1, hit := admit(t, m, cat(full, repeat(4, 7)), kv.Key{})
	require.Equal(t, 48, hit)
	require.Equal(t, []int{0, 1, 2, 4}, ids(t, m, req1))

	n, err := m.Reset()
	require.NoError(t, err)
	require.Zero(t, n, "every cached block is in use")
	require.Len(t, m.CachedHashes(), 3)

	release(t, m, req0, req1)
	kinds = nil
	n, err = m.Reset()
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.Empty(t, m.CachedHashes())
	for i := range 10 {
		h, _ := m.BlockHash(i)
		require.True(t, h.IsZero())
	}
	require.Equal(t, []kv.EventKind{kv.AllBlocksCleared}, kinds)
	st := m.Stats()
	require.Equal(t, 10, st.Free)
	require.Equal(t, uint64(3), st.Cleared)
}

// test_kv_cache_events: stored, removed by eviction, cleared by reset.
func TestScenarioEvents(t *testing.T) {
	type rec struct {
		kind   kv.EventKind
		hashes []kv.Hash
		parent kv.Hash
		tokens []uint32
	}
	var events []rec
	m := newManager(t, 2, kv.WithSubscriber(func(e *kv.Event) {
		events = append(events, rec{e.Kind, append([]kv.Hash(nil), e.Hashes...), e.Parent, append([]uint32(nil), e.Tokens...)})
		require.Equal(t, 16, e.BlockSize)
	}))
	req0, _ := admit(t, m, span(0, 32), kv.Key{})
	require.Len(t, events, 1)
	stored := events[0]
	require.Equal(t, kv.BlockStored, stored.kind)
	require.Len(t, stored.hashes, 2)
	require.True(t, stored.parent.IsZero())
	require.Equal(t, span(0, 32), stored.tokens)

	release(t, m, req0)
	events = nil
	req1, _ := admit(t, m, span(32, 64), kv.Key{})
	require.Len(t, events, 2)
	require.Equal(t, kv.BlockRemoved, events[0].kind)
	require.ElementsMatch(t, stored.hashes, events[0].hashes)
	require.Equal(t, kv.BlockStored, events[1].kind)

	// A decode that fills a block stores it with its parent.
	release(t, m, req1)
	_, err := m.Reset()
	require.NoError(t, err)
	events = nil
	req2, _ := admit(t, m, span(32, 40), kv.Key{})
	require.NoError(t, m.Append(req2, span(40, 48)))
	require.Len(t, events, 1)
	h := m.Hasher()
	require.Equal(t, h.AppendHashes(nil, span(32, 48), 16, kv.Key{}), events[0].hashes)
	require.NoError(t, m.Append(req2, span(48, 64)))
	require.Equal(t, h.AppendHashes(nil, span(32, 48), 16, kv.Key{})[0], events[1].parent)

	release(t, m, req2)
	events = nil
	_, err = m.Reset()
	require.NoError(t, err)
	require.Equal(t, kv.AllBlocksCleared, events[len(events)-1].kind)
	require.Empty(t, m.CachedHashes())
}

// The slab-allocator case: two requests sharing a 512-token system prompt
// hold 42 blocks instead of 74.
func TestScenarioSharedSystemPrompt(t *testing.T) {
	m := newManager(t, 128)
	system := span(0, 512)
	a, _ := admit(t, m, cat(system, span(1000, 1080)), kv.Key{})
	b, hit := admit(t, m, cat(system, span(2000, 2080)), kv.Key{})
	require.Equal(t, 512, hit)
	require.Len(t, ids(t, m, a), 37)
	require.Len(t, ids(t, m, b), 37)
	require.Equal(t, 42, m.Stats().InUse, "74 without sharing")
	release(t, m, a, b)
}

// Fork shares every block; the first append to a shared partial block
// copies it, bytes included; release drops one reference per block.
func TestScenarioForkCopyOnWrite(t *testing.T) {
	p := newPool(t, 8, 64)
	m, err := kv.New(p)
	require.NoError(t, err)
	a, _ := admit(t, m, span(0, 20), kv.Key{})
	require.Equal(t, []int{0, 1}, ids(t, m, a))
	last, err := m.Block(a, 19)
	require.NoError(t, err)
	mem, err := p.Bytes(last)
	require.NoError(t, err)
	copy(mem, "kv of tokens 16..19")

	b, err := m.Fork(a)
	require.NoError(t, err)
	require.Equal(t, []int{0, 1}, ids(t, m, b))
	for i := range 2 {
		_, ref := m.BlockHash(i)
		require.Equal(t, 2, ref)
	}
	require.Equal(t, 2, m.Stats().InUse)

	require.NoError(t, m.Append(b, []uint32{7}))
	require.Equal(t, []int{0, 2}, ids(t, m, b), "the shared partial block was copied")
	copied, _ := m.Block(b, 20)
	cmem, _ := p.Bytes(copied)
	require.Equal(t, "kv of tokens 16..19", string(cmem[:19]))
	require.Equal(t, uint64(1), m.Stats().CopyOnWrite)

	require.NoError(t, m.Append(a, []uint32{9}))
	require.Equal(t, []int{0, 1}, ids(t, m, a), "a holds block 1 alone now: no copy")
	require.Equal(t, uint64(1), m.Stats().CopyOnWrite)

	// A full shared block is never copied: appends go to new blocks.
	c, err := m.Fork(a)
	require.NoError(t, err)
	require.NoError(t, m.Append(c, span(21, 32)))
	require.NoError(t, m.Append(a, span(21, 33)))
	require.NoError(t, m.Check())

	release(t, m, a)
	_, ref := m.BlockHash(0)
	require.Equal(t, 2, ref)
	release(t, m, b, c)
	st := m.Stats()
	require.Zero(t, st.InUse)
	require.Equal(t, 8, st.Free+st.Cached)
	require.NoError(t, m.Close())
	require.Zero(t, p.Stats().Live, "Close returns every block to the pool")
}

// Priorities: lower ones are evicted first, LRU within one; a timed
// priority decays; pins are never evicted and are capped.
func TestScenarioPriorityAndPins(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	m := newManager(t, 4, kv.WithClock(clock), kv.WithMaxPinned(0.5))

	a, _ := admit(t, m, span(0, 32), kv.Key{}) // blocks 0 1
	require.NoError(t, m.SetPriority(a, 0, 32, 10, time.Second))
	b, _ := admit(t, m, span(100, 132), kv.Key{}) // blocks 2 3
	release(t, m, b, a)
	require.Equal(t, []int{1, 0, 3, 2}, m.EvictionOrder(), "the low priority goes first though released last")

	now = now.Add(2 * time.Second)
	_, err := m.Drain()
	require.NoError(t, err)
	order := m.EvictionOrder()
	require.Equal(t, []int{3, 2}, order[:2], "decayed to the default, behind the blocks released before")
	require.ElementsMatch(t, []int{0, 1}, order[2:])

	// Pin a's prefix: it stays out of eviction.
	n, err := m.Pin(span(0, 32), kv.Key{})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	st := m.Stats()
	require.Equal(t, 2, st.Pinned)
	require.Equal(t, 2, st.InUse)
	require.Equal(t, 2, st.Cached)
	_, err = m.Pin(span(100, 132), kv.Key{})
	require.ErrorIs(t, err, kv.ErrPinLimit)

	_, _, err = m.Admit(span(200, 248), kv.Key{})
	require.ErrorIs(t, err, pool.ErrExhausted, "pinned blocks are not evictable")
	c, _ := admit(t, m, span(200, 232), kv.Key{})
	require.Equal(t, []int{3, 2}, ids(t, m, c))

	n, err = m.Unpin(span(0, 32), kv.Key{})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, 2, m.Stats().Cached)
	release(t, m, c)
	require.Zero(t, m.Stats().Pinned)
}

// The watermarks evict at Drain from high down to low, and no further.
func TestScenarioWatermarks(t *testing.T) {
	m := newManager(t, 10, kv.WithWatermarks(0.9, 0.6))
	a, _ := admit(t, m, span(0, 80), kv.Key{})    // 5 blocks
	b, _ := admit(t, m, span(100, 132), kv.Key{}) // 2 blocks
	release(t, m, a)
	_, err := m.Drain()
	require.NoError(t, err)
	require.Equal(t, 5, m.Stats().Cached, "7 of 10 used: below the high watermark")

	c, _ := admit(t, m, span(200, 248), kv.Key{}) // 3 blocks: 10 of 10 used
	_, err = m.Drain()
	require.NoError(t, err)
	st := m.Stats()
	require.Equal(t, 6, st.InUse+st.Cached, "evicted down to the low watermark")
	require.Equal(t, 1, st.Cached)
	require.Equal(t, uint64(4), st.WatermarkEvictions)
	require.Equal(t, 4, st.Free)
	release(t, m, b, c)
}
