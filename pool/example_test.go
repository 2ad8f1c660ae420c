package pool_test

import (
	"errors"
	"fmt"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/policy/fifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
)

// Compose a pool from parts; the type arguments are inferred.
func ExampleNew() {
	b, err := heap.New(4096, 8)
	if err != nil {
		panic(err)
	}
	p, err := pool.New(b, mailbox.New(), fifo.Policy{})
	if err != nil {
		panic(err)
	}
	defer p.Close()

	h, _ := p.Alloc()
	buf, _ := p.Bytes(h)
	copy(buf, "kv")
	fmt.Println(h.Index(), len(buf), p.Stats().Order)
	// Output: 7 4096 fifo
}

// A stale handle is rejected instead of reaching the block's new owner.
func ExamplePool_Free() {
	b, _ := heap.New(64, 1)
	p, _ := pool.New(b, mailbox.New(), fifo.Policy{})
	defer p.Close()

	old, _ := p.Alloc()
	_ = p.Free(old)
	reused, _ := p.Alloc() // the same block, a new generation
	err := p.Free(old)
	fmt.Println(reused.Index() == old.Index(), errors.Is(err, pool.ErrStaleHandle))
	_, err = p.Bytes(old)
	fmt.Println(err)
	// Output:
	// true true
	// pool: stale handle
}

// Workers free whole requests through their own senders; the owner drains
// once per step.
func ExampleSender() {
	b, _ := heap.New(4096, 64)
	p, _ := pool.New(b, mailbox.New(), fifo.Policy{})
	defer p.Close()

	request := make([]pool.Handle, 16)
	_ = p.AllocChunk(request) // owner: prefill a request

	s, _ := p.NewSender()
	done := make(chan struct{})
	go func() { // worker: the request finished
		_ = s.FreeChunk(request)
		close(done)
	}()
	<-done

	n, err := p.Drain() // owner: next step
	st := p.Stats()
	fmt.Println(n, err, st.Live, st.RemoteSubmitted, st.RemoteDrained)
	// Output: 16 <nil> 0 16 16
}
