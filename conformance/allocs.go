package conformance

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"

	"github.com/locus-go/locus/internal/race"
)

// allocRuns is how many times an allocation case repeats the operation it
// measures, in each of allocRounds rounds (lightAllocRuns in a light run).
// A component that allocates once every allocRuns calls or more often is
// caught; the count is a total, never an average that integer division
// rounds to zero.
const (
	allocRuns      = 4096
	lightAllocRuns = 256
	allocRounds    = 3
)

// allocRuns is how many times the run's allocation cases repeat an
// operation per round.
func (r *run[X]) allocRuns() int {
	if r.light {
		return lightAllocRuns
	}
	return allocRuns
}

// mallocs counts the heap allocations of runs calls of op: the difference of
// runtime.MemStats.Mallocs, with the collector off and one P, over
// allocRounds rounds. It returns the smallest round's total (so that an
// allocation by some unrelated goroutine in one round is not blamed on op)
// and every round's. op has been warmed up by the caller.
func mallocs(runs int, op func()) (least uint64, rounds [allocRounds]uint64) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var before, after runtime.MemStats
	for r := range rounds {
		runtime.ReadMemStats(&before)
		for range runs {
			op()
		}
		runtime.ReadMemStats(&after)
		rounds[r] = after.Mallocs - before.Mallocs
	}
	return slices.Min(rounds[:]), rounds
}

// namedOp is an operation noAllocs measures, and its name.
type namedOp struct {
	name string
	op   func() error
}

// allocFree checks every op with noAllocs, in order.
func allocFree(runs int, ops []namedOp) error {
	for _, o := range ops {
		if err := noAllocs(runs, o.name, o.op); err != nil {
			return err
		}
	}
	return nil
}

// noAllocs checks that op allocates nothing in steady state: it warms op up,
// then counts runs calls per round. what names op in the violation.
func noAllocs(runs int, what string, op func() error) error {
	if race.Enabled {
		return skip("the race runtime allocates on its own")
	}
	var opErr error
	call := func() {
		if err := op(); err != nil && opErr == nil {
			opErr = err
		}
	}
	for range 64 {
		call()
	}
	least, rounds := mallocs(runs, call)
	if opErr != nil {
		return fmt.Errorf("%s: %w", what, opErr)
	}
	if least != 0 {
		return violationf(ErrAllocs, "%s: %d allocations in %d calls (rounds: %v), want 0", what, least, runs, rounds)
	}
	return nil
}
