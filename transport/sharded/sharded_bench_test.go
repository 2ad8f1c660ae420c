package sharded_test

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
	"github.com/locus-go/locus/transport/sharded"
)

// BenchmarkSend measures a chunk of 16 handles from Send to the sink, against
// transport/mailbox as the baseline: serially (one goroutine sends, then
// drains: the cost of the operations alone), and with producers racing an
// owner that drains in a loop (the cost of contention; on a machine with few
// cores the producers also compete for the CPU). Compare ns/handle.
//
//	go test -run '^$' -bench Send -benchtime 100ms -count 6 ./transport/sharded/ | benchstat -col /impl -
func BenchmarkSend(b *testing.B) {
	impls := []struct {
		name string
		mk   func(b *testing.B) pool.Transport
	}{
		{"sharded-handles", func(b *testing.B) pool.Transport { return mustNew(b) }},
		{"sharded-chunks", func(b *testing.B) pool.Transport { return mustNew(b, sharded.WithChunks()) }},
		{"mailbox", func(b *testing.B) pool.Transport { return mailbox.New() }},
	}
	for _, im := range impls {
		b.Run("producers=0/impl="+im.name, func(b *testing.B) { benchSerial(b, im.mk(b)) })
	}
	for _, p := range []int{1, 4} {
		for _, im := range impls {
			b.Run(fmt.Sprintf("producers=%d/impl=%s", p, im.name), func(b *testing.B) { benchRace(b, im.mk(b), p) })
		}
	}
}

const benchChunk = 16

func benchSerial(b *testing.B, tr pool.Transport) {
	defer tr.Close()
	prod, err := tr.NewProducer()
	if err != nil {
		b.Fatal(err)
	}
	chunk := make([]pool.Handle, benchChunk)
	sink := pool.NewSink(func([]pool.Handle) {})
	b.ReportAllocs()
	for b.Loop() {
		if err := prod.Send(chunk); err != nil {
			b.Fatal(err)
		}
		tr.Drain(sink)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchChunk), "ns/handle")
}

func benchRace(b *testing.B, tr pool.Transport, producers int) {
	defer tr.Close()
	var got atomic.Int64
	sink := pool.NewSink(func(c []pool.Handle) { got.Add(int64(len(c))) })
	prods := make([]pool.Producer, producers)
	for i := range prods {
		var err error
		if prods[i], err = tr.NewProducer(); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	var wg sync.WaitGroup
	for i, prod := range prods {
		n := b.N / producers
		if i < b.N%producers {
			n++
		}
		wg.Go(func() {
			chunk := make([]pool.Handle, benchChunk)
			for range n {
				if err := prod.Send(chunk); err != nil {
					panic(err)
				}
			}
		})
	}
	for want := int64(b.N) * benchChunk; got.Load() < want; {
		before := got.Load()
		tr.Drain(sink)
		if got.Load() == before {
			runtime.Gosched()
		}
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchChunk), "ns/handle")
}
