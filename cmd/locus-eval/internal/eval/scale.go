package eval

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/locus-go/locus/bench"
)

// The scaling runs: the regime the chunk mailbox exists for, many workers
// freeing at once. Part (a) is the free-cycle (bench.FreeCycle: every
// worker frees 8 requests of 16 blocks while the owner drains) at 1 to 16
// workers for every remote-free design and the Go peers; part (b) replays
// the v1 traces with more workers. Each worker count is one interleaved
// group, timed as on the scoreboard; the headline is the per-producer cost
// (cycle time over workers) and its growth from one worker.

// ScaleSchema identifies the scaling runs' JSON document (version
// SchemaVersion).
const ScaleSchema = "locus-eval/scale"

// DefaultScaleRuns is the default number of processes of a scaling run.
const DefaultScaleRuns = 5

// Scale targets, recorded in the document as the issue set them.
const (
	// ScaleSpeedup: at 8 and 16 workers, mutex-freelist's cycle time over
	// locus-mailbox's is at least this.
	ScaleSpeedup = 1.5
	// ScaleGrowth: at 8 and 16 workers, locus-mailbox's per-producer cost
	// is within this factor of its one-worker cost.
	ScaleGrowth = 1.2
)

var (
	// DefaultScaleProducers are the free-cycle's worker counts.
	DefaultScaleProducers = []int{1, 2, 4, 8, 16}
	// DefaultScaleTraceWorkers are the worker counts of the traces.
	DefaultScaleTraceWorkers = []int{4, 8, 16}
	// scaleCycleMembers are the free-cycle's contenders: the design
	// thread's transports and what a Go user would use instead.
	scaleCycleMembers = []string{"locus-mailbox", "locus-shared", "locus-sharded", "locus-sharded-chunk",
		"mutex-freelist", "mutex-freelist-checked", "sync-pool"}
	// scaleTraceMembers are the traces' contenders.
	scaleTraceMembers = []string{"locus-mailbox", "locus-sharded-chunk", "mutex-freelist", "mutex-freelist-checked", "sync-pool"}
	// scaleTraceWorkloads are the traces replayed with more workers.
	scaleTraceWorkloads = []string{bench.SteadyDecode.Name, bench.BurstStorm.Name, bench.LongTail.Name}
)

// ScaleOptions configures a scaling run.
type ScaleOptions struct {
	// Producers are the free-cycle's worker counts, TraceWorkers the
	// traces' (nil: the defaults; empty after Limit: that part is skipped).
	Producers, TraceWorkers []int
	// Runs is the number of measuring processes (MinRuns to MaxRuns).
	Runs  int
	Quick bool
	// Force measures worker counts beyond MaxScaleWorkers of this machine.
	Force    bool
	Progress func(Progress)
}

// MaxScaleWorkers is the most workers a scaling run measures on a machine
// with cpus CPUs unless forced: more workers than that cannot run beside
// each other, so the figures would show the scheduler, not the pool.
func MaxScaleWorkers(cpus int) int { return max(4, cpus) }

// Check validates o: MinRuns to MaxRuns processes, worker counts from 1 to
// bench.MaxWorkers, each once, in ascending order, the free-cycle's
// starting at 1 (its growth is relative to one worker).
func (o *ScaleOptions) Check() error {
	var errs []error
	if err := checkRuns(o.Runs); err != nil {
		errs = append(errs, err)
	}
	for _, l := range []struct {
		flag string
		ns   []int
	}{{"-producers", o.Producers}, {"-trace-workers", o.TraceWorkers}} {
		for i, n := range l.ns {
			switch {
			case n < 1 || n > bench.MaxWorkers:
				errs = append(errs, fmt.Errorf("%w: %s %d: want 1 to %d", ErrConfig, l.flag, n, bench.MaxWorkers))
			case i > 0 && n <= l.ns[i-1]:
				errs = append(errs, fmt.Errorf("%w: %s %v: want ascending counts, each once", ErrConfig, l.flag, l.ns))
			}
		}
	}
	if len(o.Producers) > 0 && o.Producers[0] != 1 {
		errs = append(errs, fmt.Errorf("%w: -producers %v: the first count must be 1 (growth is relative to one worker)", ErrConfig, o.Producers))
	}
	return errors.Join(errs...)
}

// limit drops the worker counts this machine cannot run side by side and
// returns them.
func (o *ScaleOptions) limit(cpus int) (skipped []int) {
	if o.Force {
		return nil
	}
	lim := MaxScaleWorkers(cpus)
	keep := func(ns []int) []int {
		var out []int
		for _, n := range ns {
			if n <= lim {
				out = append(out, n)
			} else if !slices.Contains(skipped, n) {
				skipped = append(skipped, n)
			}
		}
		return out
	}
	o.Producers, o.TraceWorkers = keep(o.Producers), keep(o.TraceWorkers)
	slices.Sort(skipped)
	return skipped
}

// Scale is the scaling runs' JSON document.
type Scale struct {
	Schema        string    `json:"schema"`
	SchemaVersion int       `json:"schema_version"`
	Created       time.Time `json:"created"`
	Runs          int       `json:"runs"`
	Quick         bool      `json:"quick"`
	Machine       Machine   `json:"machine"`
	Revision      Revision  `json:"revision"`
	Method        Method    `json:"method"`
	// Skipped are the worker counts asked for that this machine has too
	// few CPUs to measure (see MaxScaleWorkers).
	Skipped []int `json:"skipped"`
	// Cycle is the free-cycle per worker count; Traces the traces.
	Cycle  []ScaleRow `json:"cycle"`
	Traces []ScaleRow `json:"traces"`
	// Boards are the measured groups, one per workload and worker count,
	// named "WORKLOAD@wN".
	Boards  []WorkloadBoard `json:"boards"`
	Targets []ScaleTarget   `json:"targets"`
	GatesOK bool            `json:"gates_ok"`
	// WallSeconds is the run's wall time.
	WallSeconds float64 `json:"wall_seconds"`
}

// ScaleRow is one contender at one worker count.
type ScaleRow struct {
	Workload  string `json:"workload"`
	Workers   int    `json:"workers"`
	Contender string `json:"contender"`
	// USPerTrace is the median µs per cycle or trace; PerProducerUS that
	// over the workers (free-cycle only, else 0).
	USPerTrace    float64 `json:"us_per_trace"`
	PerProducerUS float64 `json:"per_producer_us"`
	// Growth is PerProducerUS over the same contender's at one worker,
	// from the medians (free-cycle only; 0 without a one-worker cell).
	Growth float64 `json:"growth"`
	// VsMutex is mutex-freelist's time over this contender's, measured
	// side by side (above 1: this contender is faster).
	VsMutex Interval `json:"vs_mutex_freelist"`
	GatesOK bool     `json:"gates_ok"`
}

// scaleShapes cut the scaling groups into blocks.
var scaleShapes = map[string]blockShape{
	bench.FreeCycle.Name:    {8, 1, 40},
	bench.SteadyDecode.Name: {6, 1, 30},
	bench.BurstStorm.Name:   {6, 1, 30},
	bench.LongTail.Name:     {2, 1, 20},
}

// RunScale measures the scaling runs.
func RunScale(o ScaleOptions) (*Scale, error) {
	if o.Producers == nil {
		o.Producers = DefaultScaleProducers
	}
	if o.TraceWorkers == nil {
		o.TraceWorkers = DefaultScaleTraceWorkers
	}
	if err := o.Check(); err != nil {
		return nil, err
	}
	skipped := o.limit(runtime.NumCPU())
	start := time.Now()
	warm, alloc := bench.DefaultWarmup, DefaultAllocTraces
	if o.Quick {
		warm, alloc = 1, 1
	}
	var groups []GroupSpec
	add := func(workload string, n int, members []string) {
		s := scaleShapes[workload]
		if o.Quick {
			s = quickShape
		}
		name := fmt.Sprintf("%s@w%d", workload, n)
		groups = append(groups, GroupSpec{ID: name, Harness: "trace", Workload: name, Touch: bench.TouchByte.String(),
			Members: members, Rounds: s.rounds, Traces: s.traces, Discard: s.discard, Warmup: warm, AllocTraces: alloc})
	}
	for _, n := range o.Producers {
		add(bench.FreeCycle.Name, n, scaleCycleMembers)
	}
	for _, w := range scaleTraceWorkloads {
		for _, n := range o.TraceWorkers {
			add(w, n, scaleTraceMembers)
		}
	}
	if len(groups) == 0 {
		return nil, fmt.Errorf("%w: nothing to measure: this machine has %d CPUs, and every worker count asked for is above %d (use -force)",
			ErrConfig, runtime.NumCPU(), MaxScaleWorkers(runtime.NumCPU()))
	}
	specs := repeat(groups, o.Runs)
	data, err := runProcesses(specs, newTracker(specs, o.Progress).update)
	if err != nil {
		return nil, err
	}
	sc := &Scale{Schema: ScaleSchema, SchemaVersion: SchemaVersion, Created: time.Now().UTC(), Runs: o.Runs, Quick: o.Quick,
		Machine: ThisMachine(), Revision: ThisRevision(), Method: method, Skipped: skipped, GatesOK: true,
		Cycle: []ScaleRow{}, Traces: []ScaleRow{}}
	if sc.Skipped == nil {
		sc.Skipped = []int{}
	}
	for gi, g := range groups {
		var gd []GroupData
		for _, d := range data {
			gd = append(gd, d.Groups[gi])
		}
		sc.Boards = append(sc.Boards, buildWorkload(g, gd))
	}
	for i := range sc.Boards {
		wb := &sc.Boards[i]
		base, n := splitScaled(wb.Workload)
		for _, c := range wb.Cells {
			sc.GatesOK = sc.GatesOK && c.GatesOK
			r := ScaleRow{Workload: base, Workers: n, Contender: c.Contender, USPerTrace: c.USPerTrace, GatesOK: c.GatesOK}
			if iv, ok := wb.Ratio("mutex-freelist", c.Contender); ok {
				r.VsMutex = iv
			}
			if base == bench.FreeCycle.Name {
				r.PerProducerUS = c.USPerTrace / float64(n)
				sc.Cycle = append(sc.Cycle, r)
			} else {
				sc.Traces = append(sc.Traces, r)
			}
		}
	}
	for i := range sc.Cycle {
		r := &sc.Cycle[i]
		if one := findRow(sc.Cycle, bench.FreeCycle.Name, 1, r.Contender); one != nil && one.GatesOK && r.GatesOK && one.PerProducerUS > 0 {
			r.Growth = r.PerProducerUS / one.PerProducerUS
		}
	}
	sc.Targets = scaleTargets(sc)
	sc.WallSeconds = time.Since(start).Seconds()
	return sc, nil
}

// splitScaled splits "NAME@wN" into NAME and N.
func splitScaled(name string) (string, int) {
	w, err := bench.WorkloadByName(name)
	if err != nil {
		return name, 0
	}
	base, _, _ := strings.Cut(name, "@w")
	return base, w.Workers
}

// findRow returns the row of a workload, worker count and contender, or nil.
func findRow(rows []ScaleRow, workload string, workers int, contender string) *ScaleRow {
	for i := range rows {
		if rows[i].Workload == workload && rows[i].Workers == workers && rows[i].Contender == contender {
			return &rows[i]
		}
	}
	return nil
}

// scaleTargets judges the free-cycle at 8 and 16 workers: locus-mailbox at
// least ScaleSpeedup× faster than mutex-freelist (on the interval), and its
// per-producer cost within ScaleGrowth× of one worker's (on the medians).
// A worker count that was not measured is "not measured", not met.
func scaleTargets(sc *Scale) []ScaleTarget {
	var ts []ScaleTarget
	for _, n := range []int{8, 16} {
		r := findRow(sc.Cycle, bench.FreeCycle.Name, n, bench.Baseline)
		speed := ScaleTarget{Name: fmt.Sprintf("free-cycle, %d workers: mutex-freelist / locus-mailbox", n),
			Bar: fmt.Sprintf("≥ %.1f", ScaleSpeedup)}
		growth := ScaleTarget{Name: fmt.Sprintf("free-cycle, %d workers: locus-mailbox per-producer cost / one worker's", n),
			Bar: fmt.Sprintf("≤ %.1f", ScaleGrowth)}
		switch {
		case r == nil:
			speed.Status, growth.Status = "not measured", "not measured"
			speed.Measured, growth.Measured = "this machine has too few CPUs", "this machine has too few CPUs"
		case !r.GatesOK:
			speed.Status, growth.Status = "invalid", "invalid"
		default:
			speed.Measured = fmtX(r.VsMutex.Point) + "× " + fmtIv(r.VsMutex)
			speed.Status = metStatus(r.VsMutex.Lo >= ScaleSpeedup, r.VsMutex.Hi < ScaleSpeedup)
			growth.Measured = fmtX(r.Growth) + "× (medians)"
			growth.Status = metStatus(r.Growth > 0 && r.Growth <= ScaleGrowth, r.Growth > ScaleGrowth)
		}
		ts = append(ts, speed, growth)
	}
	return ts
}

// ScaleTarget is one target of a scaling run and how it fared: "met",
// "missed", "inconclusive" (the interval straddles the bar), "invalid" or
// "not measured".
type ScaleTarget struct {
	Name     string `json:"name"`
	Bar      string `json:"bar"`
	Measured string `json:"measured"`
	Status   string `json:"status"`
}

func metStatus(met, missed bool) string {
	switch {
	case met:
		return "met"
	case missed:
		return "missed"
	}
	return "inconclusive"
}

// WriteScaleText writes a scaling run as text.
func WriteScaleText(w io.Writer, sc *Scale) {
	fmt.Fprintf(w, "Scaling: many workers freeing at once — %s\n", sc.Machine)
	if d := sc.Machine.Details(); d != "" {
		fmt.Fprintf(w, "host: %s\n", d)
	}
	fmt.Fprintf(w, "%s; %s; %s", revString(sc.Revision), plural(sc.Runs, "process"), time.Duration(sc.WallSeconds*1e9).Round(time.Second))
	if sc.Quick {
		fmt.Fprint(w, "; QUICK (smoke test: the figures mean nothing)")
	}
	fmt.Fprintln(w)
	if len(sc.Skipped) > 0 {
		fmt.Fprintf(w, "NOT MEASURED: %v workers: this machine has %s, and more workers than %d cannot run beside each other;\n"+
			"run scripts/manycore.sh on a machine with at least 16 CPUs for them.\n", sc.Skipped, plural(sc.Machine.NumCPU, "CPU"),
			MaxScaleWorkers(sc.Machine.NumCPU))
	}
	writeScaleTables(w, sc, func(cells ...string) { fmt.Fprintln(w, "  "+strings.Join(cells, "  ")) }, false)
	fmt.Fprintln(w, "\nTargets:")
	for _, t := range sc.Targets {
		fmt.Fprintf(w, "  %-78s %-6s %-30s %s\n", t.Name, t.Bar, t.Measured, strings.ToUpper(t.Status))
	}
}

// writeScaleTables writes the free-cycle and trace tables through row
// (text or Markdown).
func writeScaleTables(w io.Writer, sc *Scale, row func(cells ...string), md bool) {
	head := func(title string, cells ...string) {
		fmt.Fprintf(w, "\n%s\n\n", title)
		row(cells...)
		if md {
			seps := make([]string, len(cells))
			for i := range seps {
				seps[i] = "---"
			}
			row(seps...)
		}
	}
	valid := func(r ScaleRow, s string) string {
		if !r.GatesOK {
			return "INVALID"
		}
		return s
	}
	if len(sc.Cycle) > 0 {
		head("Free-cycle (per worker 8 requests of 16 blocks freed at once; µs per cycle, per producer = cycle / workers, growth against one worker, × = mutex-freelist's time over this one's, 99 % interval):",
			pad("contender", 23, md), pad("workers", 7, md), pad("µs/cycle", 9, md), pad("µs/producer", 11, md), pad("growth", 7, md), "mutex-freelist ×")
		for _, r := range sc.Cycle {
			g := "-"
			if r.Growth > 0 {
				g = fmtX(r.Growth) + "×"
			}
			row(pad(r.Contender, 23, md), pad(itoa(r.Workers), 7, md), pad(valid(r, fmtUS(r.USPerTrace)), 9, md),
				pad(valid(r, fmtUS(r.PerProducerUS)), 11, md), pad(valid(r, g), 7, md), valid(r, fmtX(r.VsMutex.Point)+"× "+fmtIv(r.VsMutex)))
		}
	}
	if len(sc.Traces) > 0 {
		head("Traces with more workers (µs per trace; × = mutex-freelist's time over this one's, 99 % interval):",
			pad("workload", 14, md), pad("contender", 23, md), pad("workers", 7, md), pad("µs/trace", 9, md), "mutex-freelist ×")
		for _, r := range sc.Traces {
			row(pad(r.Workload, 14, md), pad(r.Contender, 23, md), pad(itoa(r.Workers), 7, md), pad(valid(r, fmtUS(r.USPerTrace)), 9, md),
				valid(r, fmtX(r.VsMutex.Point)+"× "+fmtIv(r.VsMutex)))
		}
	}
}

func pad(s string, n int, md bool) string {
	if md {
		return s
	}
	return fmt.Sprintf("%-*s", n, s)
}

// WriteScaleMarkdown writes the "many cores" section of BENCHMARKS.md.
func WriteScaleMarkdown(w io.Writer, sc *Scale) {
	fmt.Fprintf(w, "\n## Many cores: %s\n\n", sc.Machine)
	fmt.Fprintln(w, "Generated from a recorded `locus-eval scale -json` run (scripts/manycore.sh); do not edit by hand.")
	fmt.Fprintln(w)
	writeRunRows(w, sc.Machine, sc.Created, sc.Revision)
	fmt.Fprintf(w, "| method | %s, interleaved blocks as on the scoreboard |\n", plural(sc.Runs, "process"))
	if len(sc.Skipped) > 0 {
		fmt.Fprintf(w, "| not measured | %v workers (too few CPUs) |\n", sc.Skipped)
	}
	writeScaleTables(w, sc, func(cells ...string) { fmt.Fprintln(w, "| "+strings.Join(cells, " | ")+" |") }, true)
	fmt.Fprintln(w, "\n| status | target | want | got |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, t := range sc.Targets {
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", t.Status, t.Name, t.Bar, t.Measured)
	}
}

// Validate checks a scaling document as Scoreboard.Validate checks a
// scoreboard: every board, its rows matching its cells, and the gates.
func (sc *Scale) Validate() error {
	var p problems
	if sc.Schema != ScaleSchema || sc.SchemaVersion != SchemaVersion {
		p.add("schema", "%q version %d; want %q version %d", sc.Schema, sc.SchemaVersion, ScaleSchema, SchemaVersion)
	}
	if err := checkRuns(sc.Runs); err != nil {
		p.add("runs", "%v", err)
	}
	validateMachine(&p, sc.Machine)
	gates, cells := true, 0
	for i := range sc.Boards {
		wb := &sc.Boards[i]
		validateBoard(&p, fmt.Sprintf("boards[%d]", i), wb, sc.Runs, -1)
		base, n := splitScaled(wb.Workload)
		if n == 0 {
			p.add(fmt.Sprintf("boards[%d].workload", i), "%q is not a scaled workload", wb.Workload)
		}
		rows := sc.Traces
		if base == bench.FreeCycle.Name {
			rows = sc.Cycle
		}
		for _, c := range wb.Cells {
			gates = gates && c.GatesOK
			r := findRow(rows, base, n, c.Contender)
			if r == nil || r.GatesOK != c.GatesOK || r.USPerTrace != c.USPerTrace {
				p.add(fmt.Sprintf("boards[%d] %s", i, c.Contender), "no row, or a row that differs from the cell: %+v", r)
			}
		}
		cells += len(wb.Cells)
	}
	if len(sc.Cycle)+len(sc.Traces) != cells {
		p.add("cycle+traces", "%d rows; want one per cell (%d)", len(sc.Cycle)+len(sc.Traces), cells)
	}
	if sc.GatesOK != gates {
		p.add("gates_ok", "%v, but the cells say %v", sc.GatesOK, gates)
	}
	return p.err()
}
