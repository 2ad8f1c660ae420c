package adapters_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/locus-go/locus/adapters"
)

// The ADR's budgets: 100 adapters hot, 1,000 warm.
const (
	adrHot  = 100
	adrWarm = 1000
)

// scaleFixture registers n adapters of one page each (one shared loader:
// what is measured is the Manager, not the weights) over a hot tier of
// adrHot slots and a warm tier of adrWarm.
func scaleFixture(b *testing.B, n int, opts ...adapters.Option) (*fixture, []string) {
	b.Helper()
	l, err := adapters.Func(pageSize, func(dst []byte) (int, error) { return len(dst), nil })
	if err != nil {
		b.Fatal(err)
	}
	f := newFixture(b, adrHot+16, append([]adapters.Option{adapters.WithHotBudget(adrHot, 0),
		adapters.WithWarm(adrWarm*pageSize, adrWarm, pageSize)}, opts...)...)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprint("lora-", i)
		if err := f.m.Register(ids[i], l); err != nil {
			b.Fatal(err)
		}
	}
	return f, ids
}

// BenchmarkDemotion: every acquire misses the hot tier and demotes one
// adapter to warm, which drops one warm copy to cold (a round robin over
// 1,200 adapters, more than the 1,100 the two tiers hold). The cost per
// acquire must not grow with the adapters registered: the victims come off
// the tops of indexes, not from a scan of every registration.
func BenchmarkDemotion(b *testing.B) {
	const cycle = 1200
	for _, n := range []int{cycle, 10_000, 100_000} {
		b.Run(fmt.Sprintf("registered=%d", n), func(b *testing.B) {
			f, ids := scaleFixture(b, n)
			i := 0
			acquire := func() {
				f.clk.advance(time.Millisecond)
				h, err := f.m.Acquire(ids[i%cycle])
				if err != nil {
					b.Fatal(err)
				}
				if err := f.m.Release(h); err != nil {
					b.Fatal(err)
				}
				i++
			}
			for range 2 * cycle { // fill both tiers
				acquire()
			}
			before := f.m.Stats()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				acquire()
			}
			b.StopTimer()
			s := f.m.Stats()
			b.ReportMetric(float64(s.Demotions-before.Demotions)/float64(b.N), "demotions/op")
			b.ReportMetric(float64(s.WarmDrops-before.WarmDrops)/float64(b.N), "warm-drops/op")
		})
	}
}

// BenchmarkZipf is the ADR's scale: 10,000 registered adapters, 100 hot
// and 1,000 warm, acquired on a Zipf trace (s = 1.1), 1 ms of the fake
// clock apart, with a Tick every 100 acquires. It reports the Manager's
// heap per registered adapter (registration slot, index map entry, access
// ring, the id string; one loader shared by all) and the distribution of
// Acquire's latency, hits and loads together.
func BenchmarkZipf(b *testing.B) {
	const n = 10_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f, ids := scaleFixture(b, n)
	runtime.GC()
	runtime.ReadMemStats(&after)
	perAdapter := float64(after.HeapAlloc-before.HeapAlloc-uint64(adrHot+16+adrWarm)*pageSize) / n

	rng := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(rng, 1.1, 1, n-1)
	lat := make([]time.Duration, 0, 1<<20)
	k := 0
	acquire := func(record bool) {
		f.clk.advance(time.Millisecond)
		id := ids[zipf.Uint64()]
		t0 := time.Now()
		h, err := f.m.Acquire(id)
		d := time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		if record {
			lat = append(lat, d)
		}
		if err := f.m.Release(h); err != nil {
			b.Fatal(err)
		}
		if k++; k%100 == 0 {
			if err := f.m.Tick(); err != nil {
				b.Fatal(err)
			}
			for f.m.Stats().Loading > 0 { // Tick's prefetches of hot-worthy adapters
				if _, err := f.m.Drain(nil); err != nil {
					b.Fatal(err)
				}
				runtime.Gosched()
			}
		}
	}
	for range 20_000 { // warm up the tiers
		acquire(false)
	}
	s0 := f.m.Stats()
	b.ResetTimer()
	for b.Loop() {
		acquire(true)
	}
	b.StopTimer()
	s := f.m.Stats()
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Nanoseconds()) }
	b.ReportMetric(perAdapter, "B/registered")
	b.ReportMetric(pct(0.5), "p50-ns/acquire")
	b.ReportMetric(pct(0.99), "p99-ns/acquire")
	b.ReportMetric(pct(0.999), "p99.9-ns/acquire")
	b.ReportMetric(pct(1), "max-ns/acquire")
	acq := float64(s.Acquires - s0.Acquires)
	b.ReportMetric(float64(s.HotHits-s0.HotHits)/acq, "hot-hit-rate")
	b.ReportMetric(float64(s.WarmLoads-s0.WarmLoads)/acq, "warm-loads/acquire")
	b.ReportMetric(float64(s.ColdLoads-s0.ColdLoads)/acq, "cold-loads/acquire")
}
