package main

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"

	"github.com/locus-go/locus/cmd/locus-eval/internal/eval"
)

func runScale(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("locus-eval scale", fmt.Sprintf(`Usage: locus-eval scale [flags]

The regime the chunk mailbox exists for: many workers freeing at once. (a) The free-cycle: every worker
frees 8 requests of 16 blocks while the owner drains, at 1 to 16 workers, for locus-mailbox, the design
thread's shared, sharded and sharded-chunk transports, and mutex-freelist, mutex-freelist-checked and
sync.Pool; the headline is the per-producer cost (cycle time over workers) and its growth from one worker.
(b) The steady-decode, burst-storm and long-tail traces with 4, 8 and 16 workers. Timed as the scoreboard
is: interleaved blocks, several processes, 99 %% intervals.

Worker counts above max(4, CPUs) are skipped (this machine: %d) unless -force: they cannot run beside
each other, so they would show the scheduler, not the pool. scripts/manycore.sh runs the full sweep on a
machine with 16 or more CPUs; locus-eval report turns its JSON into BENCHMARKS.md's "many cores" section.
Exit status 1 when a cell failed its gates.

Flags:
`, eval.MaxScaleWorkers(runtime.NumCPU())), stderr)
	producers := fs.String("producers", "1,2,4,8,16", "free-cycle worker counts, ascending, starting at 1 (\"\": skip the free-cycle)")
	traceWorkers := fs.String("trace-workers", "4,8,16", "trace worker counts, ascending (\"\": skip the traces)")
	runs := fs.Int("runs", eval.DefaultScaleRuns, fmt.Sprintf("measuring processes (%d to %d)", eval.MinRuns, eval.MaxRuns))
	force := fs.Bool("force", false, "measure worker counts beyond this machine's CPUs too")
	asJSON := fs.Bool("json", false, "print the JSON document instead of the tables")
	quick := fs.Bool("quick", false, "tiny blocks and rounds: a smoke test whose figures mean nothing")
	quiet := fs.Bool("q", false, "no progress on stderr")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	o := eval.ScaleOptions{Runs: *runs, Quick: *quick, Force: *force}
	var errs []error
	var err error
	if o.Producers, err = countList("-producers", *producers); err != nil {
		errs = append(errs, err)
	}
	if o.TraceWorkers, err = countList("-trace-workers", *traceWorkers); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := o.Check(); err != nil {
		return err
	}
	var finish func(seconds float64)
	o.Progress, finish = progressTo(stderr, *quiet)
	sc, err := eval.RunScale(o)
	if err != nil {
		finish(-1)
		return err
	}
	finish(sc.WallSeconds)
	return writeDoc(stdout, *asJSON, sc, func(w io.Writer) { eval.WriteScaleText(w, sc) }, sc.GatesOK, "cells")
}

// countList parses a comma-separated list of counts; "" is an empty, not
// a nil, list (the part is skipped).
func countList(name, s string) ([]int, error) {
	out := []int{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%w: %s %q: %q is not a count", eval.ErrConfig, name, s, f)
		}
		out = append(out, n)
	}
	return out, nil
}
