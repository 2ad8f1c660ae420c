package bench

import "testing"

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
