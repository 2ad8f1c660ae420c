// Command locus-eval replays the LOCUS evaluation (LOCUS-EVAL v1) on this
// machine: the four workloads of the design thread, every locus contender
// and what a Go user would otherwise use, with proof gates and figures.
//
// Usage:
//
//	locus-eval [flags]            the v1 scoreboard (about two minutes)
//	locus-eval thread [flags]     the design-thread replay 0351–0359 and its ledger
//
// Scoreboard flags:
//
//	-workloads list   workloads to run (default: all)
//	-contenders list  contenders to run (default: all)
//	-runs n           runs per cell, at least 2 (a third is added above 5 %)
//	-time d           timed duration of one run (default 300ms)
//	-touch mode       trace touch: byte (default), full or none
//	-json             print one JSON document instead of the table
//	-svg dir          also write the figures into dir
//	-quick            tiny runs, for smoke tests
//	-list             list workloads and contenders and exit
//
// Compare the same cells as Go benchmarks with benchstat:
//
//	go test ./bench -run '^$' -bench 'Eval' -count 6 > new.txt && benchstat new.txt
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/locus-go/locus/bench"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "locus-eval:", err)
		}
		os.Exit(2)
	}
}

// errGates is returned when a cell failed its gates: the table is printed,
// but the command exits non-zero.
var errGates = errors.New("some cells failed their proof gates (printed as INVALID)")

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "thread" {
		return runThread(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("locus-eval", flag.ContinueOnError)
	fs.SetOutput(stderr)
	workloads := fs.String("workloads", "", "comma-separated workloads (default all)")
	contenders := fs.String("contenders", "", "comma-separated contenders (default all)")
	runs := fs.Int("runs", 2, "runs per cell (>= 2; a third is added when the first two differ by > 5 %)")
	runTime := fs.Duration("time", bench.DefaultOptions().RunTime, "timed duration of one run")
	touch := fs.String("touch", "byte", "touch of the trace workloads: byte, full or none")
	asJSON := fs.Bool("json", false, "print one JSON document")
	svgDir := fs.String("svg", "", "write figures (SVG) into this directory")
	quick := fs.Bool("quick", false, "tiny runs, for smoke tests")
	list := fs.Bool("list", false, "list workloads and contenders")
	quiet := fs.Bool("q", false, "no progress line on stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *list {
		printList(stdout)
		return nil
	}
	ws, es, err := selection(*workloads, *contenders)
	if err != nil {
		return err
	}
	o := bench.DefaultOptions()
	if *quick {
		o = bench.QuickOptions()
	} else {
		o.RunTime = *runTime
	}
	o.Runs = *runs
	if o.Touch, err = bench.ParseTouchMode(*touch); err != nil {
		return err
	}
	if !*quiet {
		o.Progress = progress(stderr)
	}
	start := time.Now()
	rs := bench.RunCells(bench.Cells(ws, es), o)
	var touchRs []*bench.Result
	if *svgDir != "" {
		touchRs = touchComparison(ws, es, o, rs)
	}
	if !*quiet {
		fmt.Fprintf(stderr, "\r%-70s\rdone in %s\n", "", time.Since(start).Round(100*time.Millisecond))
	}
	if *svgDir != "" {
		if err := writeFigures(*svgDir, rs, touchRs); err != nil {
			return err
		}
	}
	if *asJSON {
		doc := Report{Suite: bench.Suite, GoVersion: runtime.Version(), GOMAXPROCS: runtime.GOMAXPROCS(0),
			NumCPU: runtime.NumCPU(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, GOGC: gogc(),
			Touch: o.Touch.String(), Results: rs, Targets: bench.Targets(rs), TouchComparison: touchRs,
			Statistic: "median of per-trace times per run; cell = median of run medians; ci = 95% order-statistic CI of the median, full width / median"}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(doc); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "%s scoreboard — %s, GOMAXPROCS=%d, NumCPU=%d, %s/%s, GOGC=%s, touch=%s (churn-touch: full)\n",
			bench.Suite, runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH,
			gogc(), o.Touch)
		fmt.Fprint(stdout, bench.FormatTable(rs))
		fmt.Fprintln(stdout)
		fmt.Fprint(stdout, formatTargets(bench.Targets(rs)))
		fmt.Fprintln(stdout)
		fmt.Fprintln(stdout, bench.Legend)
		if *svgDir != "" {
			fmt.Fprintf(stdout, "\nfigures written to %s\n", *svgDir)
		}
	}
	for _, r := range rs {
		if !r.GatesOK {
			return errGates
		}
	}
	return nil
}

// Report is the -json document of the scoreboard.
type Report struct {
	Suite           string          `json:"suite"`
	GoVersion       string          `json:"go_version"`
	GOMAXPROCS      int             `json:"gomaxprocs"`
	NumCPU          int             `json:"num_cpu"`
	GOOS            string          `json:"goos"`
	GOARCH          string          `json:"goarch"`
	GOGC            string          `json:"gogc"`
	Touch           string          `json:"touch"`
	Statistic       string          `json:"statistic"`
	Results         []*bench.Result `json:"results"`
	Targets         []bench.Target  `json:"targets"`
	TouchComparison []*bench.Result `json:"touch_comparison,omitempty"`
}

func gogc() string {
	if v := os.Getenv("GOGC"); v != "" {
		return v
	}
	return "100 (default)"
}

func progress(w io.Writer) func(string) {
	return func(line string) { fmt.Fprintf(w, "\r%-70s", line) }
}

func selection(workloads, contenders string) ([]*bench.Workload, []bench.Entry, error) {
	ws := bench.Workloads()
	if workloads != "" {
		ws = nil
		for _, n := range strings.Split(workloads, ",") {
			w, err := bench.WorkloadByName(strings.TrimSpace(n))
			if err != nil {
				return nil, nil, err
			}
			ws = append(ws, w)
		}
	}
	es := bench.Contenders()
	if contenders != "" {
		es = nil
		for _, n := range strings.Split(contenders, ",") {
			e, err := bench.ContenderByName(strings.TrimSpace(n))
			if err != nil {
				return nil, nil, err
			}
			es = append(es, e)
		}
	}
	return ws, es, nil
}

func printList(w io.Writer) {
	fmt.Fprintln(w, "workloads:")
	for _, wl := range bench.Workloads() {
		fmt.Fprintf(w, "  %-14s %s\n", wl.Name, wl.Doc)
	}
	fmt.Fprintln(w, "contenders:")
	for _, e := range bench.Contenders() {
		fmt.Fprintf(w, "  %-19s %-5s %s\n", e.Name, e.Group, e.Doc)
	}
}

func formatTargets(ts []bench.Target) string {
	var b strings.Builder
	fmt.Fprintln(&b, "Targets (ratios from this run):")
	for _, t := range ts {
		v := "MISSED"
		switch {
		case !t.Known:
			v = "n/a (cell invalid)"
		case t.Met:
			v = "met"
		}
		fmt.Fprintf(&b, "  %-52s want %-9s got %-28s %s\n", t.Name, t.Want, t.Got, v)
	}
	return b.String()
}

// touchContenders are measured in every touch mode for the touch-parity
// figure (go-heap is left out: make zeroes every block whatever the mode).
var touchContenders = []string{"locus-mailbox", "locus-inline", "sync-pool", "chan-freelist", "mutex-freelist"}

// touchComparison measures the trace workloads in the touch modes the
// scoreboard did not run, for the touch-parity figure, and returns every
// mode's results (the scoreboard's own included).
func touchComparison(ws []*bench.Workload, es []bench.Entry, o bench.Options, rs []*bench.Result) []*bench.Result {
	var cw []*bench.Workload
	for _, w := range ws {
		if !w.Churn {
			cw = append(cw, w)
		}
	}
	var ce []bench.Entry
	for _, n := range touchContenders {
		for _, e := range es {
			if e.Name == n {
				ce = append(ce, e)
			}
		}
	}
	if len(cw) == 0 || len(ce) == 0 {
		return nil
	}
	var out []*bench.Result
	for _, r := range rs {
		for _, e := range ce {
			if r.Contender == e.Name && r.Touch == o.Touch.String() {
				out = append(out, r)
			}
		}
	}
	for _, m := range []bench.TouchMode{bench.TouchNone, bench.TouchByte, bench.TouchFull} {
		if m == o.Touch {
			continue
		}
		mo := o
		mo.Touch = m
		mo.RunTime = max(o.RunTime/3, time.Millisecond)
		if mo.Progress != nil {
			mo.Progress = func(s string) { o.Progress("touch=" + m.String() + " " + s) }
		}
		out = append(out, bench.RunCells(bench.Cells(cw, ce), mo)...)
	}
	return out
}
