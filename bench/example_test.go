package bench_test

import (
	"fmt"
	"time"

	"github.com/locus-go/locus/bench"
)

// Run one workload against one contender: open a rig (it brings the
// contender to steady state and checks the gates), time traces, close it.
func ExampleOpen() {
	e, err := bench.ContenderByName("locus-mailbox")
	if err != nil {
		panic(err)
	}
	r, err := bench.Open(e, bench.SteadyDecode, bench.Config{Touch: bench.TouchByte, Pace: 30 * time.Microsecond})
	if err != nil {
		panic(err)
	}
	defer r.Close()
	tr, err := r.Trace(true) // one paced trace, sampled
	if err != nil {
		panic(err) // a proof gate failed
	}
	p := r.Plan()
	fmt.Println(tr.Steps, "steps,", p.BlocksPerTrace, "blocks, theoretical peak", p.TheoreticalPeak)
	fmt.Println("owner time measured:", tr.Owner > 0, "- peak sampled:", tr.Peak > 0)
	// Output:
	// 64 steps, 2688 blocks, theoretical peak 1344
	// owner time measured: true - peak sampled: true
}
