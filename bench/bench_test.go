package bench

import (
	"testing"

	"github.com/locus-go/locus/policy/fifo"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
)

// BenchmarkEval runs every scoreboard cell as a Go benchmark, one trace per
// iteration, for benchstat:
//
//	go test ./bench -run '^$' -bench Eval -count 6 | tee new.txt
//	benchstat new.txt
func BenchmarkEval(b *testing.B) {
	for _, w := range Workloads() {
		for _, e := range Contenders() {
			b.Run("workload="+w.Name+"/contender="+e.Name, func(b *testing.B) {
				Benchmark(b, e, w, TouchByte)
			})
		}
	}
}

// BenchmarkChurn is the design thread's reuse-order harness R (§1.C, 0358
// and 0359) as a Go benchmark: one op is one cycle of 64 steps (free the
// oldest 16-block chunk, allocate 16 blocks, with touch=full write each
// whole block), 1024 blocks allocated and freed. Compare the orders and
// backings with benchstat:
//
//	go test ./bench -run '^$' -bench Churn -count 10 | benchstat -col /policy -
func BenchmarkChurn(b *testing.B) {
	for _, touch := range []bool{false, true} {
		name := map[bool]string{false: "none", true: "full"}[touch]
		b.Run("backing=heap/policy=lifo/touch="+name, func(b *testing.B) {
			benchReuse(b, heapPool(mailbox.New, lifo.Policy{}), touch)
		})
		b.Run("backing=heap/policy=fifo/touch="+name, func(b *testing.B) {
			benchReuse(b, heapPool(mailbox.New, fifo.Policy{}), touch)
		})
		b.Run("backing=mmap/policy=lifo/touch="+name, func(b *testing.B) {
			benchReuse(b, mmapPool(mailbox.New, lifo.Policy{}), touch)
		})
		b.Run("backing=mmap/policy=fifo/touch="+name, func(b *testing.B) {
			benchReuse(b, mmapPool(mailbox.New, fifo.Policy{}), touch)
		})
	}
}

func benchReuse[B pool.Backing, T pool.Transport, P pool.ReusePolicy](b *testing.B, build func(int) (*pool.Pool[B, T, P], error), touch bool) {
	r, err := newReuseRig(build, touch)
	if err != nil {
		b.Skip(err) // no mapped backing on this system
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := r.cycle(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*ChurnSteps*ChurnChunkBlocks), "ns/block")
	if err := r.close(); err != nil {
		b.Fatal(err)
	}
}
