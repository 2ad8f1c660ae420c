package kv_test

import (
	"fmt"

	"github.com/locus-go/locus"
	"github.com/locus-go/locus/kv"
)

// A scheduler asks before it commits: OK admits, LATER waits or preempts,
// NEVER refuses (the README's admission snippet).
func ExampleAdmitStatus() {
	p, _ := locus.Default(locus.WithBlocks(8))
	defer p.Close()
	m, _ := kv.New(p)
	defer m.Close()

	for _, n := range []int{3 * 16, 9 * 16} {
		prompt := make([]uint32, n)
		a, _ := m.CanAdmit(prompt, kv.Key{}) // no side effect: OK, LATER or NEVER
		switch a.Status {
		case kv.AdmitOK:
			id, cached, _ := m.Admit(prompt, kv.Key{})
			fmt.Println("admitted", id != kv.SeqID{}, "reusing", cached, "tokens")
		case kv.AdmitLater:
			fmt.Println("short of", a.Need-a.Available, "blocks: wait, or preempt a running sequence")
		case kv.AdmitNever:
			fmt.Println("larger than the whole pool")
		}
	}
	// Output:
	// admitted true reusing 0 tokens
	// larger than the whole pool
}
