package kv_test

import (
	"fmt"
	"testing"

	"github.com/locus-go/locus/kv"
)

// slidingSeq returns a manager with a sliding window of window tokens and
// one sequence of length tokens, prefilled in chunks of 1024.
func slidingSeq(tb testing.TB, window, length int) (*kv.Manager, kv.SeqID) {
	tb.Helper()
	m, err := kv.New(newPool(tb, 256, 64), kv.WithSlidingWindow(window))
	if err != nil {
		tb.Fatal(err)
	}
	tokens := vocab(3, length)
	id, _, err := m.Admit(tokens[:min(1024, length)], kv.Key{})
	if err != nil {
		tb.Fatal(err)
	}
	for at := 1024; at < length; at += 1024 {
		if err := m.Append(id, tokens[at:min(at+1024, length)]); err != nil {
			tb.Fatal(err)
		}
	}
	return m, id
}

// BenchmarkSlidingWindowDecode: one decode step (Append of one token) of a
// sequence with a sliding window of 1024 tokens, 16 tokens a block, at
// two lengths: the step costs the same, since the sequence holds the
// window's blocks only; every 16th step hashes and caches a block and
// releases the block that left the window.
func BenchmarkSlidingWindowDecode(b *testing.B) {
	for _, length := range []int{1 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("tokens=%d", length), func(b *testing.B) {
			m, id := slidingSeq(b, 1024, length)
			tok := []uint32{7}
			b.ReportAllocs()
			for b.Loop() {
				tok[0]++
				if err := m.Append(id, tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGroupsDecode: one decode step of a hybrid sequence, in a
// full-attention group, a sliding-window group (1024 tokens) and a state
// group at once.
func BenchmarkGroupsDecode(b *testing.B) {
	for _, length := range []int{1 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("tokens=%d", length), func(b *testing.B) {
			g, id := groupsSeq(b, length, 8192)
			tok := []uint32{7}
			b.ReportAllocs()
			for b.Loop() {
				tok[0]++
				if err := g.Append(id, tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func groupsSeq(tb testing.TB, length, fullBlocks int) (*kv.Groups, kv.SeqID) {
	tb.Helper()
	g, err := kv.NewGroups([]kv.GroupSpec{
		{Kind: kv.FullAttention, Pool: newPool(tb, fullBlocks, 64)},
		{Kind: kv.SlidingWindow, Window: 1024, Pool: newPool(tb, 256, 64)},
		{Kind: kv.StateSpace, Pool: newPool(tb, 4, 64)},
	})
	if err != nil {
		tb.Fatal(err)
	}
	tokens := vocab(4, length)
	id, _, err := g.Admit(tokens[:min(1024, length)], kv.Key{})
	if err != nil {
		tb.Fatal(err)
	}
	for at := 1024; at < length; at += 1024 {
		if err := g.Append(id, tokens[at:min(at+1024, length)]); err != nil {
			tb.Fatal(err)
		}
	}
	return g, id
}

// TestSlidingWindowDecodeAllocatesNothing: a warm sliding-window decode
// step allocates nothing, in a Manager and in Groups (the block table's
// one handle and hash per 16 tokens grow it by doubling, amortized away).
func TestSlidingWindowDecodeAllocatesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts need warm runs")
	}
	m, id := slidingSeq(t, 1024, 4096)
	g, gid := groupsSeq(t, 4096, 1024)
	tok := []uint32{7}
	for name, step := range map[string]func() error{
		"manager": func() error { return m.Append(id, tok) },
		"groups":  func() error { return g.Append(gid, tok) },
	} {
		for range 64 { // warm: the cache and eviction order reach steady state
			tok[0]++
			if err := step(); err != nil {
				t.Fatal(err)
			}
		}
		if n := testing.AllocsPerRun(2000, func() {
			tok[0]++
			if err := step(); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("%s: %v allocations per decode step, want 0", name, n)
		}
	}
	if err := g.Check(); err != nil {
		t.Fatal(err)
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
}
