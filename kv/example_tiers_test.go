package kv_test

import (
	"fmt"
	"time"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/host"
	"github.com/locus-go/locus/transport/mailbox"
)

// A hot pool too small for a conversation's history, with a host tier
// behind it: computed blocks are written through to the tier at the next
// Drain; once the pool has evicted them, an admission loads them back
// instead of computing them, and the sequence runs when Ready says so.
func ExampleWithTiers() {
	const blockBytes = 4096
	b, _ := heap.New(blockBytes, 16)
	p, _ := pool.New(b, mailbox.New(), lifo.Policy{})
	defer p.Close()
	st, _ := host.New(blockBytes, 256) // 1 MiB of host memory, exactly
	h, _ := tier.New(st)
	defer h.Close()
	m, err := kv.New(p, kv.WithTiers(h))
	if err != nil {
		panic(err)
	}
	defer m.Close()

	history := make([]uint32, 8*16+1) // 8 full blocks and a token
	for i := range history {
		history[i] = uint32(i)
	}
	id, cached, _ := m.Admit(history, kv.Key{})
	fmt.Println("first turn: cached", cached)
	// ... the engine computes the KV of the blocks ...
	_ = m.Release(id)
	drainUntilStored(m)
	_, _ = m.Reset() // the pool forgets them (as eviction would)

	id, cached, _ = m.Admit(history, kv.Key{})
	src, _ := m.Sources(id, nil)
	fmt.Println("next turn: cached", cached, "first block from", src[0].Kind, src[0].Tier, "last from", src[8].Kind)
	for {
		_, _ = m.Drain() // once per engine step
		if c, ready, _ := m.Ready(id); ready {
			fmt.Println("ready with", c, "tokens loaded")
			break
		}
		time.Sleep(time.Millisecond)
	}
	s := m.Stats()
	fmt.Println("host tier hits:", s.Tiers[0].HitBlocks, "blocks,", s.Tiers[0].HitTokens, "tokens")
	_ = m.Release(id)
	drainUntilStored(m)
	// Output:
	// first turn: cached 0
	// next turn: cached 128 first block from tier 0 last from compute
	// ready with 128 tokens loaded
	// host tier hits: 8 blocks, 128 tokens
}

// drainUntilStored drains until no copy is in flight; an engine drains
// once per step instead.
func drainUntilStored(m *kv.Manager) {
	for {
		_, _ = m.Drain()
		if m.Stats().InFlight == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
}
