package mailbox_test

import (
	"fmt"
	"sync"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
)

// Workers give a finished request's blocks back with one push each; the
// owner takes every worker's chunks back with one Drain per step.
func Example() {
	b, _ := heap.New(64, 64)
	p, err := pool.New(b, mailbox.New(), lifo.Policy{})
	if err != nil {
		panic(err)
	}
	defer p.Close()

	var wg sync.WaitGroup
	for range 4 { // four workers, one request of 8 blocks each
		req := make([]pool.Handle, 8)
		if err := p.AllocChunk(req); err != nil { // the owner allocates
			panic(err)
		}
		s, _ := p.NewSender() // one per worker
		wg.Go(func() {
			defer s.Close()
			_ = s.FreeChunk(req) // one push, never waits
		})
	}
	wg.Wait()
	n, _ := p.Drain() // the owner, at the start of its next step
	fmt.Println("drained", n, "live", p.Stats().Live)
	// Output: drained 32 live 0
}
