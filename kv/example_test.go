package kv_test

import (
	"fmt"

	"github.com/locus-go/locus"
	"github.com/locus-go/locus/kv"
)

// Two requests share a 512-token system prompt: the second reuses its 32
// cached blocks. A worker releases the first with one push.
func Example() {
	p, _ := locus.Default(locus.WithBlocks(1024))
	defer p.Close()
	m, _ := kv.New(p) // 16 tokens per block, SHA-256 block hashes
	defer m.Close()

	system := make([]uint32, 512)
	for i := range system {
		system[i] = uint32(i)
	}
	a, cached, _ := m.Admit(append(system, 1, 2, 3), kv.Key{})
	fmt.Println("first request reuses", cached, "tokens")
	b, cached, _ := m.Admit(append(system, 4, 5, 6), kv.Key{})
	fmt.Println("second request reuses", cached, "tokens")
	_ = m.Append(b, []uint32{7}) // a decode step
	fmt.Println("blocks in use:", m.Stats().InUse, "(66 without sharing)")

	r, _ := m.NewReleaser() // one per worker goroutine
	done := make(chan struct{})
	go func() { _ = r.Release(a); close(done) }() // the worker: request a is finished
	<-done
	d, _ := m.Drain() // the owner, once per step
	st := m.Stats()
	fmt.Println("released", d.Released, "- in use", st.InUse, "cached", st.Cached, "free", st.Free)
	// Output:
	// first request reuses 0 tokens
	// second request reuses 512 tokens
	// blocks in use: 34 (66 without sharing)
	// released 1 - in use 33 cached 0 free 991
}

// A fork shares every block; the first append to the shared partial block
// copies it.
func ExampleManager_Fork() {
	p, _ := locus.Default(locus.WithBlocks(16))
	defer p.Close()
	m, _ := kv.New(p)
	defer m.Close()

	a, _, _ := m.Admit(make([]uint32, 20), kv.Key{}) // a full block and a partial one
	b, _ := m.Fork(a)                                // beam search: two continuations
	_ = m.Append(b, []uint32{1})
	_ = m.Append(a, []uint32{2})
	st := m.Stats()
	fmt.Println("in use", st.InUse, "copied", st.CopyOnWrite)
	// Output: in use 3 copied 1
}
