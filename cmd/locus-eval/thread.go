package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

	"github.com/locus-go/locus/bench"
)

// ThreadReport is the -json document of locus-eval thread.
type ThreadReport struct {
	Suite      string            `json:"suite"`
	GoVersion  string            `json:"go_version"`
	GOMAXPROCS int               `json:"gomaxprocs"`
	NumCPU     int               `json:"num_cpu"`
	GOGC       string            `json:"gogc"`
	Touch      string            `json:"touch"`
	Ledger     []bench.LedgerRow `json:"ledger"`
}

func runThread(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("locus-eval thread", flag.ContinueOnError)
	fs.SetOutput(stderr)
	exps := fs.String("exp", "", "comma-separated experiments (default all: "+strings.Join(bench.ExperimentIDs(), ",")+")")
	runs := fs.Int("runs", 2, "runs per configuration (>= 2; a third above 5 %)")
	runTime := fs.Duration("time", 250*time.Millisecond, "timed duration of one run")
	touch := fs.String("touch", "byte", "touch of the trace configurations: byte, full or none")
	asJSON := fs.Bool("json", false, "print one JSON document")
	quick := fs.Bool("quick", false, "tiny runs, for smoke tests")
	quiet := fs.Bool("q", false, "no progress line on stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o := bench.DefaultOptions()
	if *quick {
		o = bench.QuickOptions()
	} else {
		o.RunTime = *runTime
	}
	o.Runs = *runs
	var err error
	if o.Touch, err = bench.ParseTouchMode(*touch); err != nil {
		return err
	}
	if !*quiet {
		o.Progress = progress(stderr)
	}
	var ids []string
	if *exps != "" {
		for _, id := range strings.Split(*exps, ",") {
			ids = append(ids, strings.TrimSpace(id))
		}
	}
	start := time.Now()
	rows, err := bench.RunThread(ids, o)
	if err != nil {
		return err
	}
	if !*quiet {
		fmt.Fprintf(stderr, "\r%-70s\rdone in %s\n", "", time.Since(start).Round(100*time.Millisecond))
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(ThreadReport{Suite: "design thread 0351–0359 replay", GoVersion: runtime.Version(),
			GOMAXPROCS: runtime.GOMAXPROCS(0), NumCPU: runtime.NumCPU(), GOGC: gogc(), Touch: o.Touch.String(), Ledger: rows})
	}
	fmt.Fprintf(stdout, "Design thread 0351–0359 replayed — %s, GOMAXPROCS=%d, NumCPU=%d, GOGC=%s, trace touch=%s\n",
		runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU(), gogc(), o.Touch)
	fmt.Fprintln(stdout, "Rust figures: the record's per-run points (Apple Silicon, criterion slope); Go: median of run medians here.")
	fmt.Fprint(stdout, bench.FormatLedger(rows))
	fmt.Fprintln(stdout, "\nVerdicts: confirmed = the bar holds here; tie = the 95 % CIs overlap and the bar does not hold;")
	fmt.Fprintln(stdout, "falsified = the bar fails with separated CIs; invalid = a gate failed.")
	return nil
}
