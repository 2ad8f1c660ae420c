package adapters_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/locus-go/locus/adapters"
)

// BenchmarkLoad measures the ADR's targets for a 16 MiB adapter: acquire
// of a hot adapter (< 100 µs), a load from the warm tier (< 1 ms, exact
// and int8) and from cold (< 10 ms, a file in the page cache). Two
// adapters alternate in a hot tier of one slot, so every acquire but the
// hot case loads one. Compare with the memmove limit, BenchmarkMemmove.
func BenchmarkLoad(b *testing.B) {
	const size = 16 << 20
	w := make([]byte, size)
	for i := range size / 2 {
		binary.LittleEndian.PutUint16(w[2*i:], adapters.FP16.Encode16(float64(i%2001-1000)/1e4))
	}
	dir := b.TempDir()
	for _, id := range []string{"a", "b"} {
		if err := os.WriteFile(filepath.Join(dir, id), w, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	q := adapters.Quant{Format: adapters.FP16, Group: 64}
	cases := []struct {
		name string
		ids  []string
		opts []adapters.Option
	}{
		{"tier=hot", []string{"a"}, nil},
		{"tier=warm/exact", []string{"a", "b"}, []adapters.Option{adapters.WithWarm(64<<20, 0, 0)}},
		{"tier=warm/int8", []string{"a", "b"}, []adapters.Option{adapters.WithWarm(64<<20, 0, 0), adapters.WithQuantization(q, 0)}},
		{"tier=cold/file", []string{"a", "b"}, nil},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			f := newFixture(b, 2*size/pageSize+8, append([]adapters.Option{adapters.WithHotBudget(1, 0)}, c.opts...)...)
			for _, id := range c.ids {
				l, err := adapters.File(filepath.Join(dir, id))
				if err != nil {
					b.Fatal(err)
				}
				if err := f.m.Register(id, l); err != nil {
					b.Fatal(err)
				}
				h, err := f.m.Acquire(id) // the first, cold load; makes the warm copies
				if err != nil {
					b.Fatal(err)
				}
				_ = f.m.Release(h)
			}
			b.SetBytes(size)
			b.ResetTimer()
			i := 0
			for b.Loop() {
				h, err := f.m.Acquire(c.ids[i%len(c.ids)])
				if err != nil {
					b.Fatal(err)
				}
				_ = f.m.Release(h)
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/acquire")
		})
	}
}

// BenchmarkFileRead is the limit of a cold load from a file: one pread of
// 16 MiB from the page cache into a buffer, as the File loader does.
func BenchmarkFileRead(b *testing.B) {
	path := filepath.Join(b.TempDir(), "w")
	if err := os.WriteFile(path, make([]byte, 16<<20), 0o600); err != nil {
		b.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	dst := make([]byte, 16<<20)
	b.SetBytes(int64(len(dst)))
	for b.Loop() {
		if n, err := f.ReadAt(dst, 0); n != len(dst) || err != nil {
			b.Fatal(n, err)
		}
	}
}

// BenchmarkBatcher replays the Zipf trace of TestBatcherZipf (64 adapters,
// 12 hot, 20 requests a step, at most 4 adapters a batch) through both
// orders and reports the comparison: loads per 1,000 requests,
// the p50 and p99 queueing delay in steps, and the hot-tier hit rate.
func BenchmarkBatcher(b *testing.B) {
	for _, c := range []struct {
		name  string
		order adapters.Order
	}{{"order=residency-first", adapters.ResidencyFirst}, {"order=largest-queue-first", adapters.LargestQueueFirst}} {
		b.Run(c.name, func(b *testing.B) {
			var r traceResult
			for b.Loop() {
				r = replay(b, c.order, 400, func(int) []string { return nil })
			}
			b.ReportMetric(r.loadsPer1000(), "loads/1000req")
			b.ReportMetric(float64(r.pct(0.5)), "p50-steps")
			b.ReportMetric(float64(r.pct(0.99)), "p99-steps")
			b.ReportMetric(r.hitRate(), "hot-hit-rate")
		})
	}
}

// BenchmarkMemmove is the limit of a warm exact load: one copy of 16 MiB.
func BenchmarkMemmove(b *testing.B) {
	src, dst := make([]byte, 16<<20), make([]byte, 16<<20)
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		copy(dst, src)
	}
}
