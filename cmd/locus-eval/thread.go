package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/locus-go/locus/bench"
	"github.com/locus-go/locus/cmd/locus-eval/internal/eval"
)

func runThread(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("locus-eval thread", `Usage: locus-eval thread [flags]

Replays the LOCUS design thread's experiments 0351–0359 on this machine: each experiment's configurations are
timed interleaved over -runs processes, as on the scoreboard, and its bar is judged on the 99 % intervals
(confirmed, falsified, inconclusive). Exit status 1 when a configuration failed its gates.

Flags:
`, stderr)
	exps := fs.String("exp", "", "comma-separated experiments (default all: "+strings.Join(eval.ExperimentIDs(), ",")+")")
	runs := fs.Int("runs", eval.DefaultRuns, fmt.Sprintf("measuring processes (%d to %d)", eval.MinRuns, eval.MaxRuns))
	touch := fs.String("touch", "byte", "touch of the trace configurations: byte, full or none")
	asJSON := fs.Bool("json", false, "print the JSON document instead of the ledger")
	quick := fs.Bool("quick", false, "tiny blocks and rounds: a smoke test whose figures mean nothing")
	quiet := fs.Bool("q", false, "no progress on stderr")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	o := eval.ThreadOptions{Runs: *runs, Quick: *quick}
	var errs []error
	var err error
	if o.IDs, err = splitList("-exp", *exps); err != nil {
		errs = append(errs, err)
	}
	if o.Touch, err = bench.ParseTouchMode(*touch); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, o.Check())
	if err := errors.Join(errs...); err != nil {
		return err
	}
	var finish func(seconds float64)
	o.Progress, finish = progressTo(stderr, *quiet)
	t, err := eval.RunThread(o)
	if err != nil {
		finish(-1)
		return err
	}
	finish(t.WallSeconds)
	return writeDoc(stdout, *asJSON, t, func(w io.Writer) { eval.WriteLedger(w, t) }, t.GatesOK, "configurations")
}
