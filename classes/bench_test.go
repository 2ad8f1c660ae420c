package classes_test

import (
	"slices"
	"testing"
	"time"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/classes"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/transport/mailbox"
)

// BenchmarkClasses compares one Alloc and one Free through the size-class
// allocator with the same pair on a single pool of the same components
// (Go-heap blocks, chunk mailbox, LIFO), side by side in one run, so that
// benchstat pairs them:
//
//	impl=classes: four classes of 64 B, 256 B, 1 KiB and 4 KiB (1024
//	  blocks each), asked for size bytes: 48 takes class 0 (the lookup
//	  stops at the first class), 1000 class 2.
//	impl=pool: a pool of 1024 blocks of the size of that class.
//	size=mixed: sizes cycle over all four classes (classes only).
//
// Compare with: go test -run '^$' -bench BenchmarkClasses -count 6 ./classes | benchstat -col /impl -
func BenchmarkClasses(b *testing.B) {
	for _, c := range []struct {
		size      string
		sizes     []int
		blockSize int
	}{
		{"48", []int{48}, 64},
		{"1000", []int{1000}, 1024},
		{"mixed", []int{48, 200, 1000, 4000}, 0},
	} {
		if c.blockSize > 0 {
			b.Run("op=allocfree/size="+c.size+"/impl=pool", func(b *testing.B) {
				p := newSinglePool(b, c.blockSize)
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
		}
		b.Run("op=allocfree/size="+c.size+"/impl=classes", func(b *testing.B) {
			a := newDefault(b, benchClasses)
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				h, err := a.Alloc(c.sizes[i&3%len(c.sizes)])
				i++
				if err != nil {
					b.Fatal(err)
				}
				if err := a.Free(h); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkClassesRatio measures the same two pairs as BenchmarkClasses
// at size=48 (impl=pool and impl=classes) interleaved in blocks of 4096 pairs
// within one process, and reports the median over blocks of the per-block
// ratio classes/pool: the host's speed modes, which last far longer than
// a block, then hit both sides alike.
func BenchmarkClassesRatio(b *testing.B) {
	p := newSinglePool(b, 64)
	a := newDefault(b, benchClasses)
	const pairs = 4096
	var poolNs, classNs, ratios []float64
	for b.Loop() {
		t0 := time.Now()
		for range pairs {
			h, _ := p.Alloc()
			_ = p.Free(h)
		}
		t1 := time.Now()
		for range pairs {
			h, _ := a.Alloc(48)
			_ = a.Free(h)
		}
		t2 := time.Now()
		pn, cn := float64(t1.Sub(t0))/pairs, float64(t2.Sub(t1))/pairs
		poolNs, classNs, ratios = append(poolNs, pn), append(classNs, cn), append(ratios, cn/pn)
	}
	b.ReportMetric(median(poolNs), "pool-ns/pair")
	b.ReportMetric(median(classNs), "classes-ns/pair")
	b.ReportMetric(median(ratios), "classes/pool")
}

// benchClasses are the classes of the benchmarks: 64 B, 256 B, 1 KiB and
// 4 KiB, 1024 blocks each.
var benchClasses = []classes.Class{{Size: 64, Blocks: 1024}, {Size: 256, Blocks: 1024}, {Size: 1024, Blocks: 1024}, {Size: 4096, Blocks: 1024}}

// newSinglePool is a pool the classes are compared with: 1024 blocks of
// size bytes, with the classes' components.
func newSinglePool(b *testing.B, size int) *pool.Pool[*heap.Backing, *mailbox.Transport, lifo.Policy] {
	hb, err := heap.New(size, 1024)
	if err != nil {
		b.Fatal(err)
	}
	p, err := pool.New(hb, mailbox.New(), lifo.Policy{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Close() })
	return p
}

func median(x []float64) float64 {
	x = slices.Clone(x)
	slices.Sort(x)
	return x[len(x)/2]
}
