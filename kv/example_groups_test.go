package kv_test

import (
	"fmt"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
)

// A hybrid model in the manner of Gemma: full-attention layers and
// sliding-window layers with a window of 32 tokens, each group over a pool
// of its own (a StateSpace group would add one state block per sequence).
func ExampleGroups() {
	newPool := func(blocks, size int) *pool.Pool[*heap.Backing, *mailbox.Transport, lifo.Policy] {
		b, err := heap.New(size, blocks)
		if err != nil {
			panic(err)
		}
		p, err := pool.New(b, mailbox.New(), lifo.Policy{})
		if err != nil {
			panic(err)
		}
		return p
	}
	g, err := kv.NewGroups([]kv.GroupSpec{
		{Kind: kv.FullAttention, Pool: newPool(64, 4096)},
		{Kind: kv.SlidingWindow, Window: 32, Pool: newPool(16, 4096)},
	}, kv.WithTokensPerBlock(16))
	if err != nil {
		panic(err)
	}
	defer g.Close()

	prompt := make([]uint32, 100)
	for i := range prompt {
		prompt[i] = uint32(i)
	}
	id, _, _ := g.Admit(prompt, kv.Key{})
	for t := range 60 { // decode: the window's blocks slide along
		_ = g.Append(id, []uint32{uint32(1000 + t)})
	}
	full, _ := g.Blocks(id, 0)
	window, _ := g.Blocks(id, 1)
	held := 0
	for _, h := range window {
		if !h.IsZero() {
			held++
		}
	}
	fmt.Printf("160 tokens: full attention holds %d blocks, the window %d of %d\n", len(full), held, len(window))
	_ = g.Release(id)

	// The same prompt again: every group serves the first 96 tokens, the
	// window group from the blocks of its last 32 tokens.
	id, cached, _ := g.Admit(prompt, kv.Key{})
	fmt.Println("cached tokens:", cached)
	_ = g.Release(id)
	for i, st := range g.Stats(nil) {
		fmt.Printf("group %d: free %d + cached %d + in use %d = %d\n", i, st.Free, st.Cached, st.InUse, st.Capacity)
	}
	// Output:
	// 160 tokens: full attention holds 10 blocks, the window 2 of 10
	// cached tokens: 96
	// group 0: free 54 + cached 10 + in use 0 = 64
	// group 1: free 6 + cached 10 + in use 0 = 16
}
