package bench_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/locus-go/locus"
	"github.com/locus-go/locus/bench/internal/handwritten"
	"github.com/locus-go/locus/pool"
)

// BenchmarkPool compares the composed default pool with the hand-written
// one (bench/internal/handwritten) on the two hot paths:
//
//	op=allocfree: one Alloc and one Free on the owner.
//	op=remotefree: one 16-block chunk's round trip: the owner allocates it,
//	  a worker frees it with one FreeChunk, the owner drains it back.
//	  Workers free batches of 256 chunks each; the owner drains once per
//	  batch, after the workers are done, as it would once per step. ns/op
//	  is per chunk; ns/handle divides by 16.
//
// Compare with: go test -run '^$' -bench BenchmarkPool -count 10 ./bench | benchstat -col /impl -
func BenchmarkPool(b *testing.B) {
	b.Run("op=allocfree/impl=default", func(b *testing.B) {
		p := newDefault(b, 1024)
		b.ReportAllocs()
		for b.Loop() {
			h, err := p.Alloc()
			if err != nil {
				b.Fatal(err)
			}
			if err := p.Free(h); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("op=allocfree/impl=handwritten", func(b *testing.B) {
		p := handwritten.New(64, 1024)
		b.ReportAllocs()
		for b.Loop() {
			h, err := p.Alloc()
			if err != nil {
				b.Fatal(err)
			}
			if err := p.Free(h); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, producers := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("op=remotefree/producers=%d/impl=default", producers), func(b *testing.B) {
			p := newDefault(b, producers*batchChunks*chunkLen)
			senders := make([]*pool.Sender, producers)
			for i := range senders {
				var err error
				if senders[i], err = p.NewSender(); err != nil {
					b.Fatal(err)
				}
			}
			runRemote(b, producers, remoteOps[pool.Handle]{
				fill: func(chunks [][]pool.Handle) {
					for _, c := range chunks {
						if err := p.AllocChunk(c); err != nil {
							b.Error(err)
						}
					}
				},
				send: func(w int, chunks [][]pool.Handle) {
					for _, c := range chunks {
						if err := senders[w].FreeChunk(c); err != nil {
							b.Error(err)
						}
					}
				},
				drain: func() int {
					n, err := p.Drain()
					if err != nil {
						b.Error(err)
					}
					return n
				},
			})
		})
		b.Run(fmt.Sprintf("op=remotefree/producers=%d/impl=handwritten", producers), func(b *testing.B) {
			p := handwritten.New(64, producers*batchChunks*chunkLen)
			senders := make([]*handwritten.Sender, producers)
			for i := range senders {
				senders[i] = p.NewSender()
			}
			runRemote(b, producers, remoteOps[handwritten.Handle]{
				fill: func(chunks [][]handwritten.Handle) {
					for _, c := range chunks {
						if err := p.AllocChunk(c); err != nil {
							b.Error(err)
						}
					}
				},
				send: func(w int, chunks [][]handwritten.Handle) {
					for _, c := range chunks {
						if err := senders[w].FreeChunk(c); err != nil {
							b.Error(err)
						}
					}
				},
				drain: p.Drain,
			})
		})
	}
}

const (
	chunkLen    = 16  // handles per chunk: a request's blocks
	batchChunks = 256 // chunks per worker per batch
)

// remoteOps are one implementation's batch-granular steps; the per-chunk
// loops inside them are concrete code.
type remoteOps[H any] struct {
	fill  func(chunks [][]H)        // owner: allocate every chunk
	send  func(w int, chunks [][]H) // worker w: free its chunks
	drain func() int                // owner: drain, returning blocks freed
}

func runRemote[H any](b *testing.B, producers int, ops remoteOps[H]) {
	bufs := make([][][]H, producers)
	for w := range bufs {
		bufs[w] = make([][]H, batchChunks)
		for k := range bufs[w] {
			bufs[w][k] = make([]H, chunkLen)
		}
	}
	work := make([]chan int, producers)
	var wg sync.WaitGroup
	for w := range work {
		work[w] = make(chan int)
		go func() {
			for n := range work[w] {
				ops.send(w, bufs[w][:n])
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
		per := min(batchChunks, (b.N-done+producers-1)/producers)
		for w := range producers {
			ops.fill(bufs[w][:per])
		}
		wg.Add(producers)
		for w := range producers {
			work[w] <- per
		}
		wg.Wait()
		if got, want := ops.drain(), per*producers*chunkLen; got != want {
			b.Fatalf("drained %d blocks, want %d", got, want)
		}
		done += per * producers
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*chunkLen), "ns/handle")
}

func newDefault(b *testing.B, blocks int) *locus.DefaultPool {
	b.Helper()
	p, err := locus.Default(locus.WithBlockSize(64), locus.WithBlocks(blocks))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	return p
}
