package bench

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
	"github.com/locus-go/locus/transport/sharded"
	"github.com/locus-go/locus/transport/shared"
)

// BenchmarkTransport frees 16-handle chunks through each transport, with 1,
// 2 and 4 producers, side by side:
//
//	go test ./bench -run '^$' -bench Transport -count 10 | benchstat -col /transport -
//
// One op is one chunk: the owner allocates it, a producer frees it with one
// Sender.FreeChunk, and the owner's drains (running while the producers
// send, as bounded queues need) return it. Producers take batches of 64
// chunks each. ns/op is per chunk; ns/handle divides by 16.
func BenchmarkTransport(b *testing.B) {
	for _, producers := range []int{1, 2, 4} {
		name := func(t string) string { return fmt.Sprintf("transport=%s/producers=%d", t, producers) }
		b.Run(name("mailbox"), func(b *testing.B) {
			benchTransport(b, producers, func() (*mailbox.Transport, error) { return mailbox.New(), nil })
		})
		b.Run(name("sharded-handle"), func(b *testing.B) {
			benchTransport(b, producers, func() (*sharded.Transport, error) { return sharded.New() })
		})
		b.Run(name("sharded-chunk"), func(b *testing.B) {
			benchTransport(b, producers, func() (*sharded.Transport, error) { return sharded.New(sharded.WithChunks()) })
		})
		b.Run(name("shared"), func(b *testing.B) {
			benchTransport(b, producers, func() (*shared.Transport, error) {
				return shared.New(shared.WithCapacity(sharedCapacity), shared.WithBatch(sharedBatch))
			})
		})
	}
}

const (
	transportChunk = 16 // handles per chunk
	transportBatch = 64 // chunks per producer per batch
)

func benchTransport[T pool.Transport](b *testing.B, producers int, newT func() (T, error)) {
	tr, err := newT()
	if err != nil {
		b.Fatal(err)
	}
	bk, err := heap.New(64, producers*transportBatch*transportChunk)
	if err != nil {
		b.Fatal(err)
	}
	p, err := pool.New(bk, tr, lifo.Policy{})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	chunks := make([][][]pool.Handle, producers)
	work := make([]chan int, producers)
	var wg sync.WaitGroup
	for w := range producers {
		chunks[w] = make([][]pool.Handle, transportBatch)
		for k := range chunks[w] {
			chunks[w][k] = make([]pool.Handle, transportChunk)
		}
		s, err := p.NewSender()
		if err != nil {
			b.Fatal(err)
		}
		work[w] = make(chan int)
		go func() {
			for n := range work[w] {
				for _, c := range chunks[w][:n] {
					if err := s.FreeChunk(c); err != nil {
						b.Error(err)
					}
				}
				wg.Done()
			}
		}()
	}
	defer func() {
		for _, c := range work {
			close(c)
		}
	}()
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		per := min(transportBatch, (b.N-done+producers-1)/producers)
		for w := range producers {
			for _, c := range chunks[w][:per] {
				if err := p.AllocChunk(c); err != nil {
					b.Fatal(err)
				}
			}
		}
		wg.Add(producers)
		for w := range producers {
			work[w] <- per
		}
		want := per * producers * transportChunk
		for got := 0; got < want; {
			n, err := p.Drain()
			if err != nil {
				b.Fatal(err)
			}
			if got += n; n == 0 {
				runtime.Gosched() // let producers run; a bounded queue needs the owner
			}
		}
		wg.Wait()
		done += per * producers
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*transportChunk), "ns/handle")
}

// BenchmarkSend measures the transports alone, without a pool: a 16-handle
// chunk from Send to a sink that discards it. With producers=0 one goroutine
// sends and then drains (the cost of the operations alone); otherwise that
// many producers race an owner that drains in a loop (the cost of contention;
// on a machine with few cores the producers also compete for the CPU).
// Nothing bounds the chunks in flight here, so when producers outrun the
// owner the unbounded mailbox allocates nodes for them; BenchmarkTransport,
// where the owner's allocations bound them, shows 0 allocs/op.
//
//	go test ./bench -run '^$' -bench BenchmarkSend -count 6 | benchstat -col /transport -
func BenchmarkSend(b *testing.B) {
	transports := []struct {
		name string
		mk   func() (pool.Transport, error)
	}{
		{"mailbox", func() (pool.Transport, error) { return mailbox.New(), nil }},
		{"sharded-handle", func() (pool.Transport, error) { return sharded.New() }},
		{"sharded-chunk", func() (pool.Transport, error) { return sharded.New(sharded.WithChunks()) }},
		{"shared", func() (pool.Transport, error) {
			return shared.New(shared.WithCapacity(sharedCapacity), shared.WithBatch(sharedBatch))
		}},
	}
	for _, producers := range []int{0, 1, 4} {
		for _, tc := range transports {
			b.Run(fmt.Sprintf("producers=%d/transport=%s", producers, tc.name), func(b *testing.B) {
				tr, err := tc.mk()
				if err != nil {
					b.Fatal(err)
				}
				defer tr.Close()
				if producers == 0 {
					sendSerial(b, tr)
				} else {
					sendRacing(b, tr, producers)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*transportChunk), "ns/handle")
			})
		}
	}
}

func sendSerial(b *testing.B, tr pool.Transport) {
	prod, err := tr.NewProducer()
	if err != nil {
		b.Fatal(err)
	}
	chunk := make([]pool.Handle, transportChunk)
	sink := pool.NewSink(func([]pool.Handle) {})
	b.ReportAllocs()
	for b.Loop() {
		if err := prod.Send(chunk); err != nil {
			b.Fatal(err)
		}
		tr.Drain(sink)
	}
}

func sendRacing(b *testing.B, tr pool.Transport, producers int) {
	var got atomic.Int64
	sink := pool.NewSink(func(c []pool.Handle) { got.Add(int64(len(c))) })
	prods := make([]pool.Producer, producers)
	for i := range prods {
		var err error
		if prods[i], err = tr.NewProducer(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for i, prod := range prods {
		n := b.N / producers
		if i < b.N%producers {
			n++
		}
		wg.Go(func() {
			chunk := make([]pool.Handle, transportChunk)
			for range n {
				if err := prod.Send(chunk); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	for want := int64(b.N) * transportChunk; got.Load() < want; {
		before := got.Load()
		tr.Drain(sink)
		if got.Load() == before {
			runtime.Gosched()
		}
	}
	wg.Wait()
	b.StopTimer()
}
