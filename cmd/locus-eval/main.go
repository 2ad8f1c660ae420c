// Command locus-eval replays the LOCUS evaluation (LOCUS-EVAL v1) on this
// machine: every locus contender against what a Go user would pick instead,
// timed side by side in short interleaved blocks over several processes,
// with proof gates, ratios with confidence intervals and figures.
//
// Usage:
//
//	locus-eval [flags]                  the scoreboard: the unpaced v1 suite and a paced pass at 30 µs
//	locus-eval thread [flags]           the design-thread replay 0351–0359 and its ledger
//	locus-eval report RUN.json...       BENCHMARKS.md (Markdown) from recorded -json runs
//	locus-eval compare A.json B.json    are two recorded runs consistent? (the stability bar)
//	locus-eval frag [flags]             external fragmentation: first fit, best fit, size classes
//	locus-eval chat [flags]             a chat-shaped KV trace: blocks held with and without prefix sharing
//	locus-eval scale [flags]            many workers freeing at once: the free-cycle at 1–16 workers, traces with more workers
//	locus-eval tiers [flags]            offload tiers beside memmove and the file's pwrite/pread; ADR-006's adapter targets
//	locus-eval fleet [flags]            engines behind a KV-aware or round-robin router, with and without a shared Redis tier
//	locus-eval adapters [flags]         LoRA adapter residency against ADR-006's targets: loads, 10,000 registered on a Zipf trace, the batcher
//
// Run "locus-eval -help" or "locus-eval SUBCOMMAND -help" for the flags.
// The exit status is 2 for bad flags or documents (and for runs compare
// cannot compare), 1 when a proof gate failed (or compare found the runs
// inconsistent), 0 otherwise: a missed performance target is printed, not an
// error.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/locus-go/locus/cmd/locus-eval/internal/eval"
)

func main() {
	if eval.IsChild() {
		os.Exit(eval.ChildMain())
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// errFailed marks a run that measured but failed (a gate, or compare's bar):
// exit status 1, after the output was written.
var errFailed = errors.New("failed")

// run runs the command and returns its exit status.
func run(args []string, stdout, stderr io.Writer) int {
	sub, rest := "", args
	if len(args) > 0 {
		switch args[0] {
		case "thread", "report", "compare", "frag", "chat", "scale", "tiers", "fleet", "fleet-engine", "adapters":
			sub, rest = args[0], args[1:]
		}
	}
	var err error
	switch sub {
	case "thread":
		err = runThread(rest, stdout, stderr)
	case "report":
		err = runReport(rest, stdout, stderr)
	case "compare":
		err = runCompare(rest, stdout, stderr)
	case "frag":
		err = runFrag(rest, stdout, stderr)
	case "chat":
		err = runChat(rest, stdout, stderr)
	case "scale":
		err = runScale(rest, stdout, stderr)
	case "tiers":
		err = runTiers(rest, stdout, stderr)
	case "fleet":
		err = runFleet(rest, stdout, stderr)
	case "fleet-engine": // hidden: an engine process of fleet
		err = runFleetEngine(rest, os.Stdin, stdout)
	case "adapters":
		err = runAdapters(rest, stdout, stderr)
	default:
		err = runScoreboard(rest, stdout, stderr)
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errHelp):
		return 0
	case errors.Is(err, errFailed):
		fmt.Fprintln(stderr, "locus-eval:", err)
		return 1
	}
	fmt.Fprintln(stderr, "locus-eval:", err)
	return 2
}
