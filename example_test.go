package locus_test

import (
	"errors"
	"fmt"
	"sync"

	"github.com/locus-go/locus"
	"github.com/locus-go/locus/pool"
)

func errorsIs(err, target error) bool { return errors.Is(err, target) }

// The shipped design: the owner allocates a request's blocks, a worker frees
// the whole request with one call, the owner drains once per step.
func ExampleDefault() {
	p, err := locus.Default(locus.WithBlockSize(4096), locus.WithBlocks(64))
	if err != nil {
		panic(err)
	}
	defer p.Close()

	req := make([]pool.Handle, 16)
	if err := p.AllocChunk(req); err != nil { // owner: prefill
		panic(err)
	}
	for _, h := range req {
		buf, _ := p.Bytes(h)
		buf[0] = 1 // write the KV block
	}

	s, _ := p.NewSender() // one per worker
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.FreeChunk(req) }) // worker: request done
	wg.Wait()

	n, _ := p.Drain() // owner: start of the next step
	st := p.Stats()
	fmt.Printf("drained %d, live %d, high water %d\n", n, st.Live, st.HighWater)
	// Output: drained 16, live 0, high water 16
}
