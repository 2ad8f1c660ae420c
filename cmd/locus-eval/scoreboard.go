package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/locus-go/locus/bench"
	"github.com/locus-go/locus/cmd/locus-eval/internal/eval"
)

var errHelp = flag.ErrHelp

const usageText = `Usage:
  locus-eval [flags]                  the scoreboard: the unpaced v1 suite, then a paced pass at 30 µs (under 4 minutes on 2 cores)
  locus-eval thread [flags]           the design-thread replay 0351–0359 and its ledger
  locus-eval report RUN.json...       print BENCHMARKS.md (Markdown) from runs recorded with -json
  locus-eval compare A.json B.json    check two recorded runs against the stability bar
  locus-eval frag [flags]             external fragmentation of first fit, best fit and size classes
  locus-eval chat [flags]             a chat-shaped KV trace: blocks held with and without prefix sharing, hit rate
  locus-eval scale [flags]            many workers freeing at once: the free-cycle at 1 to 16 workers, traces with more
  locus-eval tiers [flags]            offload tiers beside memmove and the file's pwrite/pread; ADR-006's adapter targets
  locus-eval fleet [flags]            engines behind a KV-aware or round-robin router, with and without a shared Redis tier
  locus-eval adapters [flags]         LoRA adapter residency against ADR-006's targets: loads, 10,000 registered on a Zipf trace, the batcher

Every contender of a workload is opened in one process and timed in short blocks whose order changes every
round; ratios to locus-mailbox are medians of per-round ratios over -runs processes, with 99 % intervals; a
difference whose interval contains 1 is a tie. Exit status: 2 for bad flags or documents, 1 when a proof gate
failed (or compare's stability bar), 0 otherwise (missed performance targets are printed, they are not failures).
Memory: each measuring process opens every contender of a workload at once, one pool of 8192 (churn-touch:
16384) 4 KiB blocks each: about 0.6 GB for the full table; the processes run one after another.

Scoreboard flags:
`

// paceFlag is -pace: a positive duration, or "off".
type paceFlag struct{ d time.Duration }

func (p *paceFlag) String() string {
	if p.d == 0 {
		return "off"
	}
	return p.d.String()
}

func (p *paceFlag) Set(s string) error {
	if s == "off" {
		p.d = 0
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if d <= 0 || d > eval.MaxPace {
		return fmt.Errorf("want a positive duration up to %v (or off), got %v", eval.MaxPace, d)
	}
	p.d = d
	return nil
}

func runScoreboard(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("locus-eval", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usageText)
		fs.PrintDefaults()
	}
	runs := fs.Int("runs", eval.DefaultRuns, fmt.Sprintf("measuring processes (%d to %d)", eval.MinRuns, eval.MaxRuns))
	pace := &paceFlag{eval.DefaultPace}
	fs.Var(pace, "pace", fmt.Sprintf("simulated compute after every step of the paced pass: a duration up to %v, or off", eval.MaxPace))
	passes := fs.String("passes", "both", "passes to run: both, unpaced or paced")
	workloads := fs.String("workloads", "", "comma-separated workloads (default all)")
	contenders := fs.String("contenders", "", "comma-separated contenders (default all; locus-mailbox is always included)")
	touch := fs.String("touch", "byte", "touch of the trace workloads: byte, full or none")
	asJSON := fs.Bool("json", false, "print the JSON document (schema in BENCHMARKS.md) instead of the text")
	svgDir := fs.String("svg", "", "also write the figures (SVG) into this directory")
	quick := fs.Bool("quick", false, fmt.Sprintf("tiny blocks and rounds over %d processes (unless -runs is given): a smoke test of about 15 s on 2 cores whose figures mean nothing", eval.MinRuns))
	list := fs.Bool("list", false, "list workloads and contenders and exit")
	quiet := fs.Bool("q", false, "no progress on stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (subcommands: thread, report, compare, frag, chat, scale, tiers, fleet, adapters)", fs.Arg(0))
	}
	if *list {
		printList(stdout)
		return nil
	}
	o := eval.Options{Runs: *runs, Quick: *quick}
	if *quick && !flagSet(fs, "runs") {
		o.Runs = eval.MinRuns
	}
	var errs []error
	switch *passes {
	case "both":
		o.Unpaced, o.Pace = true, pace.d
	case "unpaced":
		o.Unpaced = true
	case "paced":
		o.Pace = pace.d
		if o.Pace == 0 {
			errs = append(errs, errors.New("-passes paced needs a -pace"))
		}
	default:
		errs = append(errs, fmt.Errorf("-passes %q: want both, unpaced or paced", *passes))
	}
	var err error
	if o.Touch, err = bench.ParseTouchMode(*touch); err != nil {
		errs = append(errs, err)
	}
	if o.Workloads, err = workloadList(*workloads); err != nil {
		errs = append(errs, err)
	}
	if o.Contenders, err = contenderList(*contenders); err != nil {
		errs = append(errs, err)
	}
	if err := o.Check(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// Only now, with every other flag valid, may -svg create its directory;
	// before the run, which may be long.
	if *svgDir != "" {
		if err := writableDir(*svgDir); err != nil {
			return fmt.Errorf("-svg: %w", err)
		}
	}
	var finish func(seconds float64)
	o.Progress, finish = progressTo(stderr, *quiet)
	sb, err := eval.RunScoreboard(o)
	if err != nil {
		finish(-1)
		return err
	}
	finish(sb.WallSeconds)
	if *svgDir != "" {
		files, err := eval.WriteFigures(*svgDir, sb)
		if err != nil {
			return err
		}
		if !*asJSON {
			defer fmt.Fprintf(stdout, "\nfigures: %s\n", strings.Join(files, ", "))
		}
	}
	return writeDoc(stdout, *asJSON, sb, func(w io.Writer) { eval.WriteText(w, sb) }, sb.GatesOK, "cells")
}

// writeDoc writes a run's JSON document with -json, else its text, and
// then fails with errFailed if some of its parts (what: cells,
// configurations) failed their proof gates.
func writeDoc(stdout io.Writer, asJSON bool, doc any, text func(io.Writer), gatesOK bool, what string) error {
	if asJSON {
		if err := writeJSON(stdout, doc); err != nil {
			return err
		}
	} else {
		text(stdout)
	}
	if !gatesOK {
		return fmt.Errorf("%w: some %s failed their proof gates (INVALID)", errFailed, what)
	}
	return nil
}

// progressTo returns the progress sink of a run (nil when quiet) and the
// function that ends the progress display, saying how long the run took
// (seconds < 0: it failed).
func progressTo(stderr io.Writer, quiet bool) (func(eval.Progress), func(seconds float64)) {
	if quiet {
		return nil, func(float64) {}
	}
	report, done := eval.NewProgressPrinter(stderr, isTerminal(stderr))
	return report, func(seconds float64) {
		done()
		if seconds >= 0 {
			fmt.Fprintf(stderr, "done in %s\n", time.Duration(seconds*1e9).Round(time.Second))
		}
	}
}

// newFlagSet returns a subcommand's flag set: errors and the usage go to
// stderr, the usage being usage followed by the flags' defaults.
func newFlagSet(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses a subcommand's flags, which take no arguments.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// flagSet reports whether the command line set flag name.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// writeJSON writes v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(v)
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// writableDir creates dir if needed and checks a file can be written in
// it; when it cannot, the directories it created are removed again.
func writableDir(dir string) (err error) {
	var created []string // the directories it creates, deepest first
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || filepath.Dir(d) == d {
			break
		}
		created = append(created, d)
	}
	defer func() {
		if err != nil {
			for _, d := range created {
				os.Remove(d) // only if empty: whatever else is there stays
			}
		}
	}()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".locus-eval-*")
	if err != nil {
		return err
	}
	name := f.Name()
	return errors.Join(f.Close(), os.Remove(name))
}

// splitList splits the comma-separated names of a flag ("": none); an
// empty name is an error.
func splitList(name, s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	out := strings.Split(s, ",")
	for i, n := range out {
		if out[i] = strings.TrimSpace(n); out[i] == "" {
			return nil, fmt.Errorf("%s %q: an empty name", name, s)
		}
	}
	return out, nil
}

func workloadList(s string) ([]*bench.Workload, error) {
	names, err := splitList("-workloads", s)
	if err != nil || names == nil {
		return nil, err
	}
	var ws []*bench.Workload
	for _, n := range names {
		w, err := bench.WorkloadByName(n)
		if err != nil {
			return nil, err
		}
		ws = append(ws, w)
	}
	return ws, nil
}

// contenderList parses -contenders; the baseline is added first when absent
// (every ratio is taken against it).
func contenderList(s string) ([]bench.Entry, error) {
	names, err := splitList("-contenders", s)
	if err != nil || names == nil {
		return nil, err
	}
	var es []bench.Entry
	hasBase := false
	for _, n := range names {
		e, err := bench.ContenderByName(n)
		if err != nil {
			return nil, err
		}
		hasBase = hasBase || n == bench.Baseline
		es = append(es, e)
	}
	if !hasBase {
		b, err := bench.ContenderByName(bench.Baseline)
		if err != nil {
			return nil, err
		}
		es = append([]bench.Entry{b}, es...)
	}
	return es, nil
}

func printList(w io.Writer) {
	fmt.Fprintln(w, "workloads:")
	for _, wl := range bench.Workloads() {
		fmt.Fprintf(w, "  %-14s %s\n", wl.Name, wl.Doc)
	}
	fmt.Fprintln(w, "contenders:")
	for _, e := range bench.Contenders() {
		fmt.Fprintf(w, "  %-23s %-5s %s\n", e.Name, e.Group, e.Doc)
	}
}
