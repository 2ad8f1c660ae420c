package bench

import (
	"testing"
	"time"
)

// BenchmarkEval runs every scoreboard cell as a Go benchmark, one trace per
// iteration, for benchstat (ns/op is then a mean over sequential traces,
// not the scoreboard's interleaved ratios):
//
//	go test ./bench -run '^$' -bench 'Eval/workload=steady-decode' -count 6 | tee new.txt
//	benchstat -col /contender new.txt
func BenchmarkEval(b *testing.B) {
	for _, w := range Workloads() {
		for _, e := range Contenders() {
			b.Run("workload="+w.Name+"/contender="+e.Name, func(b *testing.B) {
				benchRig(b, e, w, Config{Touch: TouchByte})
			})
		}
	}
}

// BenchmarkPaced is BenchmarkEval in the paced serving regime: after every
// step the owner spins 30 µs (the model's compute) while the workers free.
// ns/op includes the spins; owner-ns/step is what the pool, the dispatch
// and the drains cost the owner per step, and peak-ratio the sampled peak
// over the theoretical peak.
//
//	go test ./bench -run '^$' -bench Paced -count 6 | benchstat -col /contender -
func BenchmarkPaced(b *testing.B) {
	for _, w := range Workloads() {
		for _, e := range Contenders() {
			b.Run("workload="+w.Name+"/contender="+e.Name, func(b *testing.B) {
				benchRig(b, e, w, Config{Touch: TouchByte, Pace: 30 * time.Microsecond})
			})
		}
	}
}

func benchRig(b *testing.B, e Entry, w *Workload, cfg Config) {
	r, err := Open(e, w, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := r.Close(); err != nil {
			b.Error(err)
		}
	}()
	var owner time.Duration
	steps, peak := 0, 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		tr, err := r.Trace(cfg.Pace > 0)
		if err != nil {
			b.Fatal(err)
		}
		owner += tr.Owner
		steps += tr.Steps
		peak = max(peak, tr.Peak)
	}
	b.StopTimer()
	if cfg.Pace > 0 {
		b.ReportMetric(float64(owner.Nanoseconds())/float64(steps), "owner-ns/step")
	} else {
		for range SampleRounds {
			tr, err := r.Trace(true)
			if err != nil {
				b.Fatal(err)
			}
			peak = max(peak, tr.Peak)
		}
	}
	b.ReportMetric(float64(peak)/float64(r.Plan().TheoreticalPeak), "peak-ratio")
}

// BenchmarkChurn is the design thread's reuse-order harness R (0358
// and 0359) as a Go benchmark: one op is one cycle of 64 steps (free the
// oldest 16-block chunk, allocate 16 blocks, with touch=full write each
// whole block), 1024 blocks allocated and freed. Compare the orders and
// backings with benchstat:
//
//	go test ./bench -run '^$' -bench Churn -count 10 | benchstat -col /policy -
func BenchmarkChurn(b *testing.B) {
	for _, touch := range []bool{false, true} {
		for _, back := range []string{"heap", "mmap"} {
			for _, pol := range []string{"lifo", "fifo"} {
				name := map[bool]string{false: "none", true: "full"}[touch]
				b.Run("backing="+back+"/policy="+pol+"/touch="+name, func(b *testing.B) {
					r, err := OpenReuse(ReuseConfig{Backing: back, Policy: pol, Touch: touch})
					if err != nil {
						b.Skip(err) // no mapped backing on this system
					}
					b.ReportAllocs()
					for b.Loop() {
						if _, err := r.Trace(false); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*ChurnSteps*ChurnChunkBlocks), "ns/block")
					if err := r.Close(); err != nil {
						b.Fatal(err)
					}
				})
			}
		}
	}
}
