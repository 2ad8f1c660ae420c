package shared_test

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/shared"
)

// A worker frees six blocks through a queue that holds four: its FreeChunk
// waits while the owner drains, two handles per Drain.
func Example() {
	b, err := heap.New(4096, 16)
	if err != nil {
		panic(err)
	}
	tr, err := shared.New(shared.WithCapacity(4), shared.WithBatch(2))
	if err != nil {
		panic(err)
	}
	p, err := pool.New(b, tr, lifo.Policy{})
	if err != nil {
		panic(err)
	}
	defer p.Close()

	blocks := make([]pool.Handle, 6)
	if err := p.AllocChunk(blocks); err != nil {
		panic(err)
	}
	s, err := p.NewSender()
	if err != nil {
		panic(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.FreeChunk(blocks) }() // a worker frees a request

	for freed := 0; freed < len(blocks); { // the owner's scheduling loop
		n, err := p.Drain()
		if err != nil {
			panic(err)
		}
		if n > 2 {
			panic("a drain took more than its batch")
		}
		freed += n
		if n == 0 {
			runtime.Gosched()
		}
	}
	fmt.Println("FreeChunk:", <-done)
	st := tr.Stats()
	fmt.Printf("submitted %d, drained %d, pending %d\n", st.Submitted, st.Drained, st.Pending)
	fmt.Println("live blocks:", p.Stats().Live)
	// Output:
	// FreeChunk: <nil>
	// submitted 6, drained 6, pending 0
	// live blocks: 0
}

// TrySend takes what fits and reports the rest with pool.ErrFull; a pool's
// Sender.TryFreeChunk calls it.
func ExampleProducer_TrySend() {
	tr, err := shared.New(shared.WithCapacity(4))
	if err != nil {
		panic(err)
	}
	defer tr.Close()
	prod, err := tr.NewProducer()
	if err != nil {
		panic(err)
	}
	handles := make([]pool.Handle, 6) // a transport does not validate handles
	n, err := prod.(pool.TryProducer).TrySend(handles)
	fmt.Println(n, errors.Is(err, pool.ErrFull))

	tr.Drain(pool.NewSink(func(chunk []pool.Handle) { fmt.Println("drained", len(chunk)) }))
	n, err = prod.(pool.TryProducer).TrySend(handles[n:])
	fmt.Println(n, err)
	fmt.Printf("%+v\n", tr.Stats())
	// Output:
	// 4 true
	// drained 4
	// 2 <nil>
	// {Capacity:4 Batch:64 Producers:1 Submitted:6 Drained:4 Pending:2 Full:1 Blocked:0}
}

// A producer made for one request is closed when the request is done; what
// it sent stays queued until the owner drains it.
func ExampleProducer_Close() {
	tr, err := shared.New(shared.WithCapacity(8))
	if err != nil {
		panic(err)
	}
	defer tr.Close()
	prod, err := tr.NewProducer()
	if err != nil {
		panic(err)
	}
	if err := prod.Send(make([]pool.Handle, 3)); err != nil {
		panic(err)
	}
	if err := prod.Close(); err != nil {
		panic(err)
	}
	fmt.Println("Send after Close:", prod.Send(make([]pool.Handle, 1)))
	tr.Drain(pool.NewSink(func(chunk []pool.Handle) { fmt.Println("drained", len(chunk)) }))
	fmt.Printf("%+v\n", tr.Stats())
	// Output:
	// Send after Close: pool: closed
	// drained 3
	// {Capacity:8 Batch:64 Producers:0 Submitted:3 Drained:3 Pending:0 Full:0 Blocked:0}
}
