package main

import (
	"fmt"
	"io"

	"github.com/locus-go/locus/cmd/locus-eval/internal/eval"
)

func runCompare(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("locus-eval compare", `Usage: locus-eval compare A.json B.json

Checks two scoreboard runs recorded with -json against the stability bar: for every (pass, workload,
contender) the intervals of the ratio to locus-mailbox overlap, and every pair of contenders that both
runs separate is ordered the same way; a cell that failed its proof gates in either run fails the bar.
Exit status 1 when the bar fails, 2 when a file is not a valid scoreboard document or the runs are not
comparable (another -quick, -touch, -pace or set of passes, workloads or contenders).
`, stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		fs.Usage()
		return fmt.Errorf("compare needs two files, got %d", fs.NArg())
	}
	a, err := eval.ReadScoreboard(fs.Arg(0))
	if err != nil {
		return err
	}
	b, err := eval.ReadScoreboard(fs.Arg(1))
	if err != nil {
		return err
	}
	c, err := eval.Compare(a, b)
	if err != nil {
		return err
	}
	eval.WriteComparison(stdout, c)
	if err := c.Err(); err != nil {
		return fmt.Errorf("%w: %w", errFailed, err)
	}
	return nil
}
