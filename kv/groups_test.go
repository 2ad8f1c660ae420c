package kv_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/pool"
)

// chain returns the chain hashes of the full blocks of tokens, bs tokens
// to a block, as m computes them.
func chain(m *kv.Manager, tokens []uint32, bs int) []kv.Hash {
	h := m.Hasher()
	var out []kv.Hash
	var parent kv.Hash
	for ; len(tokens) >= bs; tokens = tokens[bs:] {
		parent = h.Block(parent, tokens[:bs], kv.Key{})
		out = append(out, parent)
	}
	return out
}

// identity checks Free + Cached + InUse == Capacity for every group.
func groupIdentity(t testing.TB, sts []kv.Stats) {
	t.Helper()
	for i, st := range sts {
		if st.Free+st.Cached+st.InUse != st.Capacity || st.Free < 0 || st.Cached < 0 || st.InUse < 0 {
			t.Fatalf("group %d: free %d + cached %d + in use %d != capacity %d", i, st.Free, st.Cached, st.InUse, st.Capacity)
		}
	}
}

// zeros counts the leading zero handles of a block table.
func zeros(hs []pool.Handle) int {
	n := 0
	for n < len(hs) && hs[n].IsZero() {
		n++
	}
	for _, h := range hs[n:] {
		if h.IsZero() {
			return -1 // a hole after the window's start: never valid
		}
	}
	return n
}

// TestSlidingWindowCachedPrefix ports vLLM's sliding-window hit search:
// 2 tokens a block, a window of 4 tokens (the hit needs the 2 blocks
// before its end), and a prompt whose full blocks are cached or not as
// the case says. The hit ends with the rightmost run of 2 cached blocks,
// or is the run from the first block; the blocks before the window are
// not held.
func TestSlidingWindowCachedPrefix(t *testing.T) {
	T, F := true, false
	cases := []struct {
		cached []bool
		want   int // hit in blocks
	}{
		{[]bool{F, F, F, F, F, F, F, F, F, F}, 0},
		{[]bool{T}, 1},
		{[]bool{T, F}, 1},
		{[]bool{T, T}, 2},
		{[]bool{T, T, F}, 2},
		{[]bool{T, T, T}, 3},
		{[]bool{T, T, T, F}, 3},
		{[]bool{T, T, F, T, F, F, T, T, F, T, T, T}, 12},
		{[]bool{T, T, F, T, F, F, T, T, F, F, F}, 8},
		{[]bool{T, T, F, T, F, F, T, T, F, F, F, T}, 8},
		{[]bool{F, T, F, T}, 0}, // single cached blocks never make a window
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.cached), func(t *testing.T) {
			m := newManager(t, 100, kv.WithTokensPerBlock(2), kv.WithSlidingWindow(4))
			prompt := span(0, 2*len(c.cached)+1) // every case block full, the last token after them
			id, _ := admit(t, m, prompt, kv.Key{})
			first := ids(t, m, id)
			release(t, m, id)
			for i, h := range chain(m, prompt, 2) {
				if !c.cached[i] {
					require.True(t, m.Uncache(h))
				}
			}
			got, err := m.Lookup(prompt, kv.Key{})
			require.NoError(t, err)
			require.Equal(t, 2*c.want, got)
			id, hit := admit(t, m, prompt, kv.Key{})
			require.Equal(t, 2*c.want, hit)
			hs, err := m.Blocks(id)
			require.NoError(t, err)
			skip := max(0, 2*c.want-3) / 2
			require.Equal(t, skip, zeros(hs), "blocks before the window are not held")
			for k := skip; k < c.want; k++ {
				require.Equal(t, first[k], hs[k].Index(), "block %d is the cached one", k)
			}
			release(t, m, id)
		})
	}
}

// TestSlidingWindowReleasesOutOfWindow ports vLLM's skipped-block removal:
// 2 tokens a block, a window of 4. Before computing token p the blocks
// wholly before token p-3 go: none at p=4, block 0 at p=5 and 6, blocks 0
// and 1 at p=7, blocks 0 to 3 at p=11; a run released at once enters the
// eviction order last block first, so the longer prefix is evicted first.
func TestSlidingWindowReleasesOutOfWindow(t *testing.T) {
	rows := []struct{ prior, released int }{{0, 0}, {4, 0}, {5, 1}, {6, 1}, {7, 2}, {11, 4}}
	for _, r := range rows {
		t.Run(fmt.Sprintf("prior=%d", r.prior), func(t *testing.T) {
			m := newManager(t, 64, kv.WithTokensPerBlock(2), kv.WithSlidingWindow(4))
			id, _ := admit(t, m, span(0, max(r.prior, 1)), kv.Key{})
			if r.prior == 0 { // an empty prompt: the first token is appended
				release(t, m, id)
				id, _ = admit(t, m, nil, kv.Key{})
			}
			require.NoError(t, m.Append(id, []uint32{99}))
			hs, err := m.Blocks(id)
			require.NoError(t, err)
			require.Equal(t, r.released, zeros(hs))
			require.NoError(t, m.Check())
			if r.released > 0 {
				_, err = m.Block(id, 2*r.released-1)
				require.ErrorIs(t, err, kv.ErrOutsideWindow)
			}
			h, err := m.Block(id, 2*r.released)
			require.NoError(t, err)
			require.False(t, h.IsZero())
		})
	}
	t.Run("order", func(t *testing.T) {
		m := newManager(t, 64, kv.WithTokensPerBlock(2), kv.WithSlidingWindow(4))
		id, _ := admit(t, m, span(0, 7), kv.Key{}) // blocks 0..3
		require.NoError(t, m.Append(id, span(7, 11)))
		require.Equal(t, []int{1, 0}, m.EvictionOrder())
		require.NoError(t, m.Append(id, []uint32{11}))
		require.Equal(t, []int{1, 0, 3, 2}, m.EvictionOrder())
		st := m.Stats()
		require.Equal(t, 4, st.Cached)
		require.Equal(t, 2, st.InUse) // the blocks of tokens 8 to 11
		release(t, m, id)
	})
}

// TestSlidingWindowAdmission ports vLLM's counting scenarios for sliding
// windows: an evictable cached block that a prompt hits counts as taken,
// not allocated twice; a window hit holds only the window's blocks; and
// the blocks a chunked prefill holds step by step are what the window
// formula predicts.
func TestSlidingWindowAdmission(t *testing.T) {
	t.Run("evictable hit not allocated twice", func(t *testing.T) {
		m := newManager(t, 10, kv.WithTokensPerBlock(2), kv.WithSlidingWindow(4))
		id, _ := admit(t, m, span(0, 3), kv.Key{})
		release(t, m, id) // block 0 cached, block 1 free
		a, err := m.CanAdmit(span(0, 4), kv.Key{})
		require.NoError(t, err)
		require.Equal(t, kv.Admission{Status: kv.AdmitOK, Blocks: 2, CachedTokens: 2, Need: 1, Available: 9}, a)
		id, hit := admit(t, m, span(0, 4), kv.Key{})
		require.Equal(t, 2, hit)
		st := m.Stats()
		require.Equal(t, [3]int{8, 0, 2}, [3]int{st.Free, st.Cached, st.InUse})
		release(t, m, id)
	})
	t.Run("window hit holds the window", func(t *testing.T) {
		for _, window := range []int{0, 4} {
			m := newManager(t, 100, kv.WithTokensPerBlock(2), kv.WithSlidingWindow(window))
			prompt := span(0, 41)
			id, _ := admit(t, m, prompt[:21], kv.Key{}) // blocks 0..9 full
			release(t, m, id)
			a, err := m.CanAdmit(prompt, kv.Key{})
			require.NoError(t, err)
			want := kv.Admission{Status: kv.AdmitOK, Blocks: 21, CachedTokens: 20, Need: 11, Available: 90}
			if window > 0 { // blocks 0..7 are before the window of token 20
				want = kv.Admission{Status: kv.AdmitOK, Blocks: 13, CachedTokens: 20, Need: 11, Available: 98}
			}
			require.Equal(t, want, a, "window %d", window)
			id, _ = admit(t, m, prompt, kv.Key{})
			require.Equal(t, want.Blocks, m.Stats().InUse)
			release(t, m, id)
		}
	})
	t.Run("chunked prefill holds what the window predicts", func(t *testing.T) {
		m := newManager(t, 100, kv.WithTokensPerBlock(2), kv.WithSlidingWindow(8), kv.WithPrefixCaching(false))
		id, _ := admit(t, m, span(0, 4), kv.Key{})
		require.Equal(t, 2, m.Stats().InUse)
		for _, want := range []int{4, 6, 6, 6} {
			tok, err := m.Tokens(id)
			require.NoError(t, err)
			require.NoError(t, m.Append(id, span(tok, tok+4)))
			require.Equal(t, want, m.Stats().InUse, "after %d tokens", tok+4)
			require.NoError(t, m.Check())
		}
		release(t, m, id)
		require.Equal(t, 100, m.Stats().Free)
	})
	t.Run("long prompt in chunks fits a small pool", func(t *testing.T) {
		m := newManager(t, 6, kv.WithTokensPerBlock(2), kv.WithSlidingWindow(4))
		_, _, err := m.Admit(span(0, 20), kv.Key{})
		require.ErrorIs(t, err, kv.ErrTooLarge) // the whole prompt at once needs 10 blocks
		id, _ := admit(t, m, span(0, 4), kv.Key{})
		for tok := 4; tok < 200; tok += 4 {
			require.NoError(t, m.Append(id, span(tok, tok+4)))
			require.NoError(t, m.Check())
		}
		require.LessOrEqual(t, m.Stats().InUse, 4)
		release(t, m, id)
	})
}

func TestSlidingWindowFork(t *testing.T) {
	m := newManager(t, 32, kv.WithTokensPerBlock(2), kv.WithSlidingWindow(4))
	id, _ := admit(t, m, span(0, 9), kv.Key{})
	require.NoError(t, m.Append(id, []uint32{9})) // releases blocks 0..2
	f, err := m.Fork(id)
	require.NoError(t, err)
	a, b := ids(t, m, id), ids(t, m, f)
	require.Equal(t, a, b)
	require.NoError(t, m.Append(f, []uint32{10, 11, 12})) // f slides on alone
	require.NoError(t, m.Check())
	require.NoError(t, m.SetPriority(f, 0, 13, kv.MaxPriority, 0))
	release(t, m, id, f)
	st := m.Stats()
	require.Equal(t, st.Capacity, st.Free+st.Cached)
}

func TestSlidingWindowPreempt(t *testing.T) {
	m := newManager(t, 32, kv.WithTokensPerBlock(2), kv.WithSlidingWindow(4))
	prompt := span(0, 21)
	id, _ := admit(t, m, prompt, kv.Key{})
	a, err := m.Preempt(id)
	require.NoError(t, err)
	require.Equal(t, kv.Admission{Status: kv.AdmitOK, Blocks: 3, CachedTokens: 20, Need: 1, Available: 30}, a)
	id, hit := admit(t, m, prompt, kv.Key{})
	require.Equal(t, 20, hit)
	release(t, m, id)
}

func TestSlidingWindowConfig(t *testing.T) {
	_, err := kv.New(newPool(t, 4, 64), kv.WithSlidingWindow(-1))
	require.ErrorIs(t, err, pool.ErrInvalidConfig)
}

// hybrid returns Groups of kinds ("full", "sw" for a window of 2 blocks,
// "swl" for 4, "state"), each over a pool of blocks blocks of 16 tokens.
func hybrid(t testing.TB, blocks int, kinds ...string) *kv.Groups {
	t.Helper()
	specs := make([]kv.GroupSpec, len(kinds))
	for i, k := range kinds {
		s := kv.GroupSpec{Pool: newPool(t, blocks, 64)}
		switch k {
		case "full":
			s.Kind = kv.FullAttention
		case "sw":
			s.Kind, s.Window = kv.SlidingWindow, 32
		case "swl":
			s.Kind, s.Window = kv.SlidingWindow, 64
		case "state":
			s.Kind = kv.StateSpace
		}
		specs[i] = s
	}
	g, err := kv.NewGroups(specs)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, g.Check())
		require.NoError(t, g.Close())
	})
	return g
}

func blockIDs(t testing.TB, g *kv.Groups, id kv.SeqID, group int) []int {
	t.Helper()
	hs, err := g.Blocks(id, group)
	require.NoError(t, err)
	out := make([]int, len(hs))
	for i, h := range hs {
		out[i] = h.Index()
		if h.IsZero() {
			out[i] = -1
		}
	}
	return out
}

// TestGroupsPrefillHybrid ports vLLM's hybrid prefill: a full-attention
// group and two sliding-window groups (window 2 blocks), 16 tokens a
// block. A second prompt with the same 3 full blocks hits all 3; the
// window groups hold only the 2 blocks before the hit point. Then, cache
// entries dropped per group, the hit is the longest prefix every group
// can still serve.
func TestGroupsPrefillHybrid(t *testing.T) {
	common := blocksOf(3)
	req0 := cat(common, repeat(3, 7))
	req1 := cat(common, repeat(3, 5))
	setup := func(t *testing.T) (*kv.Groups, []kv.Hash) {
		g := hybrid(t, 10, "full", "sw", "sw")
		id0, hit, err := g.Admit(req0, kv.Key{})
		require.NoError(t, err)
		require.Zero(t, hit)
		for i := range 3 {
			require.Equal(t, []int{0, 1, 2, 3}, blockIDs(t, g, id0, i))
		}
		id1, hit, err := g.Admit(req1, kv.Key{})
		require.NoError(t, err)
		require.Equal(t, 48, hit)
		require.Equal(t, []int{0, 1, 2, 4}, blockIDs(t, g, id1, 0))
		require.Equal(t, []int{-1, 1, 2, 4}, blockIDs(t, g, id1, 1))
		require.Equal(t, []int{-1, 1, 2, 4}, blockIDs(t, g, id1, 2))
		sts := g.Stats(nil)
		groupIdentity(t, sts)
		require.Equal(t, 5, sts[0].InUse)
		require.Equal(t, 5, sts[1].InUse)
		require.NoError(t, g.Release(id0))
		require.NoError(t, g.Release(id1))
		require.NoError(t, g.Check())
		return g, chain(g.Manager(0), req1, 16)
	}
	type drop struct{ block, group int }
	cases := []struct {
		name string
		drop []drop
		want int // hit in blocks
	}{
		{"blocks outside the window do not matter", []drop{{0, 1}, {0, 2}}, 3},
		{"first full-attention block: miss", []drop{{0, 0}}, 0},
		{"last block of every group", []drop{{2, 0}, {2, 1}, {2, 2}}, 2},
		{"last full-attention block", []drop{{2, 0}}, 2},
		{"last block of one window group", []drop{{2, 1}}, 2},
		{"last block of the other window group", []drop{{2, 2}}, 2},
		{"groups that agree on no prefix", []drop{{2, 0}, {0, 1}, {0, 2}}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, hashes := setup(t)
			for _, d := range c.drop {
				require.True(t, g.Manager(d.group).Uncache(hashes[d.block]))
			}
			got, err := g.Lookup(req1, kv.Key{})
			require.NoError(t, err)
			require.Equal(t, 16*c.want, got)
			a, err := g.CanAdmit(req1, kv.Key{})
			require.NoError(t, err)
			require.Equal(t, kv.AdmitOK, a.Status)
			require.Equal(t, 16*c.want, a.CachedTokens)
			id, hit, err := g.Admit(req1, kv.Key{})
			require.NoError(t, err)
			require.Equal(t, 16*c.want, hit)
			require.NoError(t, g.Check())
			require.NoError(t, g.Release(id))
		})
	}
}

// TestGroupsCombinations ports vLLM's hybrid combinations: 2 to 4 groups,
// none to two full-attention groups, windows of 2 and 4 blocks, state
// groups, interleaved. A prompt sharing 3 full blocks with an earlier one
// hits all 3, except with a state group: Groups caches no states, so
// there it hits nothing (vLLM caches states at block boundaries).
func TestGroupsCombinations(t *testing.T) {
	for _, kinds := range [][]string{
		{"full", "sw"}, {"full", "state"}, {"sw", "state"}, {"sw", "swl"},
		{"full", "sw", "sw"}, {"full", "state", "state"}, {"full", "sw", "state"},
		{"full", "sw", "swl"}, {"full", "full", "sw"}, {"full", "full", "state"},
		{"full", "sw", "full", "swl"}, {"full", "state", "full", "state"},
		{"sw", "state", "swl", "state"}, {"full", "full", "sw", "state"},
	} {
		t.Run(fmt.Sprint(kinds), func(t *testing.T) {
			g := hybrid(t, 10, kinds...)
			want := 48
			for _, k := range kinds {
				if k == "state" {
					want = 0
				}
			}
			id0, _, err := g.Admit(cat(blocksOf(3), repeat(3, 7)), kv.Key{})
			require.NoError(t, err)
			id1, hit, err := g.Admit(cat(blocksOf(3), repeat(4, 5)), kv.Key{})
			require.NoError(t, err)
			require.Equal(t, want, hit)
			for i := range kinds {
				hs, err := g.Blocks(id1, i)
				require.NoError(t, err)
				require.NotEmpty(t, hs)
			}
			groupIdentity(t, g.Stats(nil))
			require.NoError(t, g.Release(id0))
			require.NoError(t, g.Release(id1))
			groupIdentity(t, g.Stats(nil))
		})
	}
}

func TestNewGroupsRefuses(t *testing.T) {
	p := newPool(t, 8, 64)
	full := kv.GroupSpec{Kind: kv.FullAttention, Pool: newPool(t, 8, 64)}
	cases := []struct {
		name  string
		specs []kv.GroupSpec
		opts  []kv.Option
	}{
		{"no group", nil, nil},
		{"unknown kind", []kv.GroupSpec{{Kind: 9, Pool: p}}, nil},
		{"window missing", []kv.GroupSpec{{Kind: kv.SlidingWindow, Pool: p}}, nil},
		{"window not wanted", []kv.GroupSpec{{Kind: kv.StateSpace, Window: 4, Pool: p}}, nil},
		{"nil pool", []kv.GroupSpec{{Kind: kv.FullAttention}}, nil},
		{"one pool twice", []kv.GroupSpec{{Kind: kv.FullAttention, Pool: p}, {Kind: kv.StateSpace, Pool: p}}, nil},
		{"subscriber", []kv.GroupSpec{full}, []kv.Option{kv.WithSubscriber(func(*kv.Event) {})}},
		{"window option", []kv.GroupSpec{full}, []kv.Option{kv.WithSlidingWindow(4)}},
		{"bad option", []kv.GroupSpec{full}, []kv.Option{kv.WithTokensPerBlock(0)}},
		{"nil option", []kv.GroupSpec{full}, []kv.Option{nil}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, err := kv.NewGroups(c.specs, c.opts...)
			require.ErrorIs(t, err, pool.ErrInvalidConfig)
			require.Nil(t, g)
		})
	}
	// A refused NewGroups gave back the pools it claimed.
	g, err := kv.NewGroups([]kv.GroupSpec{{Kind: kv.FullAttention, Pool: p}, full})
	require.NoError(t, err)
	require.NoError(t, g.Close())
}

func TestGroupsAllOrNothing(t *testing.T) {
	specs := func() []kv.GroupSpec {
		return []kv.GroupSpec{
			{Kind: kv.FullAttention, Pool: newPool(t, 16, 64)},
			{Kind: kv.SlidingWindow, Window: 32, Pool: newPool(t, 4, 64)},
			{Kind: kv.StateSpace, Pool: newPool(t, 2, 64)},
		}
	}
	t.Run("admit too large for one group", func(t *testing.T) {
		g, err := kv.NewGroups(specs())
		require.NoError(t, err)
		before := g.Stats(nil)
		_, _, err = g.Admit(blocksOf(5), kv.Key{})
		require.ErrorIs(t, err, kv.ErrTooLarge)
		var ex *kv.ExhaustedError
		require.ErrorAs(t, err, &ex)
		require.Equal(t, kv.ExhaustedError{Blocks: 5, Need: 5, Available: 4, Capacity: 4}, *ex)
		after := g.Stats(nil)
		for i := range after {
			after[i].Exhausted = before[i].Exhausted
		}
		require.Equal(t, before, after)
		a, err := g.CanAdmit(blocksOf(5), kv.Key{})
		require.NoError(t, err)
		require.Equal(t, kv.AdmitNever, a.Status)
		require.NoError(t, g.Check())
		require.NoError(t, g.Close())
	})
	t.Run("state blocks run out", func(t *testing.T) {
		g, err := kv.NewGroups(specs())
		require.NoError(t, err)
		a, _, err := g.Admit(span(0, 5), kv.Key{})
		require.NoError(t, err)
		b, _, err := g.Admit(span(0, 5), kv.Key{})
		require.NoError(t, err)
		adm, err := g.CanAdmit(span(0, 5), kv.Key{})
		require.NoError(t, err)
		require.Equal(t, kv.AdmitLater, adm.Status)
		require.Equal(t, 1, adm.Shortfall())
		_, _, err = g.Admit(span(0, 5), kv.Key{})
		require.ErrorIs(t, err, pool.ErrExhausted)
		_, err = g.Fork(a)
		require.ErrorIs(t, err, pool.ErrExhausted)
		require.NoError(t, g.Release(b))
		f, err := g.Fork(a)
		require.NoError(t, err)
		require.NoError(t, g.Append(f, span(5, 40)))
		require.NoError(t, g.Check())
		require.NoError(t, g.Close())
	})
	t.Run("append refused by the window group changes no group", func(t *testing.T) {
		g, err := kv.NewGroups(specs())
		require.NoError(t, err)
		id, _, err := g.Admit(span(0, 16), kv.Key{})
		require.NoError(t, err)
		before := g.Stats(nil)
		err = g.Append(id, span(16, 80)) // the window group would need 5 blocks at once
		require.ErrorIs(t, err, kv.ErrTooLarge)
		after := g.Stats(nil)
		for i := range after {
			after[i].Exhausted = before[i].Exhausted
		}
		require.Equal(t, before, after)
		n, err := g.Tokens(id)
		require.NoError(t, err)
		require.Equal(t, 16, n)
		for tok := 16; tok < 80; tok += 16 { // in chunks it fits
			require.NoError(t, g.Append(id, span(tok, tok+16)))
		}
		require.NoError(t, g.Check())
		require.NoError(t, g.Close())
	})
}

func TestGroupsForkCopiesState(t *testing.T) {
	p := newPool(t, 4, 64)
	g, err := kv.NewGroups([]kv.GroupSpec{
		{Kind: kv.FullAttention, Pool: newPool(t, 16, 64)},
		{Kind: kv.StateSpace, Pool: p},
	})
	require.NoError(t, err)
	defer func() { require.NoError(t, g.Close()) }()
	id, _, err := g.Admit(span(0, 20), kv.Key{})
	require.NoError(t, err)
	h, err := g.Block(id, 1, 0)
	require.NoError(t, err)
	buf, err := p.Bytes(h)
	require.NoError(t, err)
	copy(buf, "state of the parent")
	f, err := g.Fork(id)
	require.NoError(t, err)
	fh, err := g.Block(f, 1, 19)
	require.NoError(t, err)
	require.NotEqual(t, h, fh)
	fbuf, err := p.Bytes(fh)
	require.NoError(t, err)
	require.Equal(t, buf, fbuf)
	require.Equal(t, blockIDs(t, g, id, 0), blockIDs(t, g, f, 0)) // attention blocks shared
	sts := g.Stats(nil)
	require.Equal(t, kv.Stats{Capacity: 4, TokensPerBlock: 16, Free: 2, InUse: 2, Sequences: 2, Forks: 1}, sts[1])
	a, err := g.Preempt(f)
	require.NoError(t, err)
	require.Equal(t, kv.AdmitOK, a.Status)
	require.NoError(t, g.Release(id))
	require.NoError(t, g.Check())
	require.Equal(t, 4, g.Stats(nil)[1].Free)
}

func TestGroupsBadCalls(t *testing.T) {
	g := hybrid(t, 8, "full", "sw", "state")
	id, _, err := g.Admit(span(0, 70), kv.Key{})
	require.NoError(t, err)
	m := newManager(t, 4)
	foreign, _ := admit(t, m, span(0, 3), kv.Key{})
	for name, call := range map[string]func(kv.SeqID) error{
		"Append":  func(id kv.SeqID) error { return g.Append(id, []uint32{1}) },
		"Reserve": func(id kv.SeqID) error { return g.Reserve(id, 1) },
		"Accept":  func(id kv.SeqID) error { return g.Accept(id, nil) },
		"Release": g.Release,
		"Fork":    func(id kv.SeqID) error { _, err := g.Fork(id); return err },
		"Preempt": func(id kv.SeqID) error { _, err := g.Preempt(id); return err },
		"Tokens":  func(id kv.SeqID) error { _, err := g.Tokens(id); return err },
		"Blocks":  func(id kv.SeqID) error { _, err := g.Blocks(id, 0); return err },
		"Block":   func(id kv.SeqID) error { _, err := g.Block(id, 0, 0); return err },
	} {
		for _, bad := range []kv.SeqID{{}, foreign} {
			require.ErrorIs(t, call(bad), kv.ErrInvalidSequence, name)
		}
	}
	_, err = g.Blocks(id, 3)
	require.ErrorIs(t, err, pool.ErrInvalidArgument)
	_, err = g.Block(id, -1, 0)
	require.ErrorIs(t, err, pool.ErrInvalidArgument)
	require.ErrorIs(t, g.Reserve(id, -1), pool.ErrInvalidArgument)
	require.NoError(t, g.Reserve(id, 3)) // the window of token 70 starts at token 39
	_, err = g.Block(id, 1, 0)
	require.ErrorIs(t, err, kv.ErrOutsideWindow)
	require.NoError(t, g.Accept(id, []uint32{1, 2}))
	n, err := g.Tokens(id)
	require.NoError(t, err)
	require.Equal(t, 72, n)
	require.NoError(t, g.Drain())
	require.NoError(t, g.Release(id))
	require.ErrorIs(t, g.Release(id), kv.ErrInvalidSequence)

	var zero kv.Groups
	_, _, err = zero.Admit(nil, kv.Key{})
	require.True(t, errors.Is(err, pool.ErrClosed))
	var nilG *kv.Groups
	require.ErrorIs(t, nilG.Drain(), pool.ErrClosed)
	require.Zero(t, nilG.Len())
}
