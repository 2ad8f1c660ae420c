package kv_test

import (
	"errors"
	"fmt"

	"github.com/locus-go/locus"
	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/pool"
)

// A scheduler's admission loop: admit on OK, wait on LATER, reject on
// NEVER; when a decode step finds the pool full, preempt and readmit later.
func ExampleManager_CanAdmit() {
	p, _ := locus.Default(locus.WithBlocks(8))
	defer p.Close()
	m, _ := kv.New(p) // 16 tokens per block
	defer m.Close()

	tokens := func(first, n int) []uint32 {
		t := make([]uint32, n)
		for i := range t {
			t[i] = uint32(first + i)
		}
		return t
	}
	running, _, _ := m.Admit(tokens(0, 6*16), kv.Key{}) // 6 of 8 blocks
	for _, prompt := range [][]uint32{tokens(1000, 3*16), tokens(2000, 9*16)} {
		a, _ := m.CanAdmit(prompt, kv.Key{})
		fmt.Printf("%d blocks: %v, need %d, available %d\n", a.Blocks, a.Status, a.Need, a.Available)
	}

	// Admit says the same, with the counts in its error.
	_, _, err := m.Admit(tokens(1000, 3*16), kv.Key{})
	var full *kv.ExhaustedError
	if errors.As(err, &full) && !errors.Is(err, kv.ErrTooLarge) {
		fmt.Println("later: short of", full.Need-full.Available, "blocks")
	}
	_ = m.Release(running)
	a, _ := m.CanAdmit(tokens(1000, 3*16), kv.Key{})
	fmt.Println("after a release:", a.Status)
	// Output:
	// 3 blocks: LATER, need 3, available 2
	// 9 blocks: NEVER, need 9, available 2
	// later: short of 1 blocks
	// after a release: OK
}

// Chunked prefill: Lookup tells how much of a prompt is cached, so the
// first chunk is admitted together with the whole cached prefix.
func ExampleManager_Lookup() {
	p, _ := locus.Default(locus.WithBlocks(64))
	defer p.Close()
	m, _ := kv.New(p)
	defer m.Close()

	doc := make([]uint32, 500) // a long prompt whose first 256 tokens were seen
	for i := range doc {
		doc[i] = uint32(i)
	}
	first, _, _ := m.Admit(doc[:260], kv.Key{})
	_ = m.Release(first)

	const chunk = 64
	cached, _ := m.Lookup(doc, kv.Key{})
	id, hit, _ := m.Admit(doc[:cached+chunk], kv.Key{})
	_ = m.Append(id, doc[cached+chunk:]) // the next chunks
	fmt.Println("cached", cached, "reused", hit)
	// Output: cached 256 reused 256
}

// Recompute preemption: the sequence's full blocks stay cached, so
// readmitting its tokens recomputes only the rest.
func ExampleManager_Preempt() {
	p, _ := locus.Default(locus.WithBlocks(16))
	defer p.Close()
	m, _ := kv.New(p)
	defer m.Close()

	tokens := make([]uint32, 100) // a prompt and what it generated so far
	for i := range tokens {
		tokens[i] = uint32(i)
	}
	id, _, _ := m.Admit(tokens, kv.Key{})
	readmit, _ := m.Preempt(id)
	fmt.Println("readmission:", readmit.Status, readmit.Blocks, "blocks,", readmit.CachedTokens, "tokens cached")
	_, hit, _ := m.Admit(tokens, kv.Key{}) // later
	fmt.Println("reused", hit)
	// Output:
	// readmission: OK 7 blocks, 96 tokens cached
	// reused 96
}

// Speculative decoding: reserve slots for the draft tokens, write their KV,
// then accept what the target model verified; the rest roll back.
func ExampleManager_Reserve() {
	p, _ := locus.Default(locus.WithBlocks(16))
	defer p.Close()
	m, _ := kv.New(p, kv.WithTokensPerBlock(4))
	defer m.Close()

	id, _, _ := m.Admit([]uint32{1, 2, 3, 4, 5, 6}, kv.Key{})
	drafts := []uint32{7, 8, 9, 10, 11}
	_ = m.Reserve(id, len(drafts))
	for i := range drafts {
		h, _ := m.Block(id, 6+i) // the draft's slot: write its KV there
		_, _ = p.Bytes(h)
	}
	fmt.Println("held", m.Stats().InUse, "blocks,", m.Stats().Reserved, "for lookahead")

	// The target accepts 7 and 8 and samples 42 itself.
	_ = m.Accept(id, []uint32{7, 8, 42})
	n, _ := m.Tokens(id)
	st := m.Stats()
	fmt.Println("tokens", n, "held", st.InUse, "rolled back", st.RolledBackTokens, "cached", st.Stored)
	// Output:
	// held 3 blocks, 1 for lookahead
	// tokens 9 held 3 rolled back 2 cached 2
}

// Without prefix caching a manager hashes nothing and reuses nothing.
func ExampleWithPrefixCaching() {
	p, _ := locus.Default(locus.WithBlocks(8))
	defer p.Close()
	m, _ := kv.New(p, kv.WithPrefixCaching(false))
	defer m.Close()

	prompt := make([]uint32, 40)
	a, _, _ := m.Admit(prompt, kv.Key{})
	_, hit, _ := m.Admit(prompt, kv.Key{})
	f, _ := m.Fork(a) // fork and copy-on-write work as before
	_ = m.Append(f, []uint32{1})
	_, _, err := m.Admit(make([]uint32, 48), kv.Key{})
	fmt.Println("reused", hit, "in use", m.Stats().InUse, "exhausted", errors.Is(err, pool.ErrExhausted))
	// Output: reused 0 in use 7 exhausted true
}

// Sizing a pool from a model's shape: Llama-3-70B in bf16.
func ExampleBlockBytes() {
	shape := kv.Shape{Layers: 80, KVHeads: 8, HeadDim: 128, DTypeBytes: 2, TokensPerBlock: 16}
	size, _ := kv.BlockBytes(shape)
	blocks, _, _ := kv.BlocksIn(40<<30, shape) // 40 GiB left for the KV cache
	fmt.Printf("%d MiB per block, %d blocks, %d tokens\n", size>>20, blocks, blocks*shape.TokensPerBlock)
	// Output: 5 MiB per block, 8192 blocks, 131072 tokens
}
