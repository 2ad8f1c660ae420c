package sharded_test

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/sharded"
)

// Four workers each free whole requests through a queue of their own that
// holds two chunks, waiting while it is full; the owner allocates requests,
// hands them out and drains every queue once per scheduling step.
func Example() {
	b, err := heap.New(4096, 64)
	if err != nil {
		panic(err)
	}
	tr, err := sharded.New(sharded.WithChunks(), sharded.WithCapacity(2), sharded.WithBatch(2))
	if err != nil {
		panic(err)
	}
	p, err := pool.New(b, tr, lifo.Policy{})
	if err != nil {
		panic(err)
	}
	defer p.Close()

	const workers = 4
	finished := make([]chan []pool.Handle, workers)
	var wg sync.WaitGroup
	for w := range workers {
		s, err := p.NewSender()
		if err != nil {
			panic(err)
		}
		finished[w] = make(chan []pool.Handle, 16)
		wg.Go(func() {
			for request := range finished[w] {
				if err := s.FreeChunk(request); err != nil {
					panic(err)
				}
			}
		})
	}

	// The owner: 12 requests of 4 to 7 blocks, 66 blocks in all from a
	// pool of 64, so it must reuse blocks the workers freed.
	for r := range 12 {
		request := make([]pool.Handle, 4+r%4)
		for {
			err := p.AllocChunk(request) // drains once if the pool is empty
			if err == nil {
				break
			}
			if !errors.Is(err, pool.ErrExhausted) {
				panic(err)
			}
			runtime.Gosched()
		}
		finished[r%workers] <- request
		if _, err := p.Drain(); err != nil { // once per step
			panic(err)
		}
	}
	for _, c := range finished {
		close(c)
	}
	for p.Stats().Live > 0 {
		if n, err := p.Drain(); err != nil {
			panic(err)
		} else if n == 0 {
			runtime.Gosched()
		}
	}
	wg.Wait()

	st := tr.Stats()
	fmt.Printf("%d producers, %d chunks submitted, %d drained, %d pending\n", st.Producers, st.Submitted, st.Drained, st.Pending)
	fmt.Println("blocks freed remotely:", p.Stats().RemoteDrained)
	// Output:
	// 4 producers, 12 chunks submitted, 12 drained, 0 pending
	// blocks freed remotely: 66
}

// In chunk mode TrySend takes a whole chunk or nothing.
func ExampleProducer_TrySend() {
	tr, err := sharded.New(sharded.WithChunks(), sharded.WithCapacity(1))
	if err != nil {
		panic(err)
	}
	defer tr.Close()
	prod, err := tr.NewProducer()
	if err != nil {
		panic(err)
	}
	chunk := make([]pool.Handle, 3) // a transport does not validate handles
	for range 2 {
		n, err := prod.(pool.TryProducer).TrySend(chunk)
		fmt.Println(n, err, errors.Is(err, pool.ErrFull))
	}
	// Output:
	// 3 <nil> false
	// 0 pool: transport full true
}

// A producer made for one request is closed when the request is done: what
// it sent is still delivered, and the Drain that takes its last item forgets
// its queue.
func ExampleProducer_Close() {
	tr, err := sharded.New(sharded.WithCapacity(4), sharded.WithBatch(2))
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

	drained := 0
	sink := pool.NewSink(func(chunk []pool.Handle) { drained += len(chunk) })
	tr.Drain(sink) // two of three: the batch limit
	tr.Drain(sink) // the last one; the queue is forgotten
	st := tr.Stats()
	fmt.Printf("drained %d; producers %d, submitted %d, pending %d\n", drained, st.Producers, st.Submitted, st.Pending)
	// Output:
	// Send after Close: pool: closed
	// drained 3; producers 0, submitted 3, pending 0
}
