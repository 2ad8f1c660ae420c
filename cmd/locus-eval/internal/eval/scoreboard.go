package eval

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/locus-go/locus/bench"
)

// Schema and SchemaVersion identify the scoreboard's JSON document.
const (
	Schema        = "locus-eval/scoreboard"
	SchemaVersion = 1
)

// MinRuns is the fewest measuring processes a run may use, MaxRuns the
// most (the interval narrows only as the square root of the processes,
// while the run's time grows with them), DefaultRuns the default
// scoreboard's.
const (
	MinRuns     = 3
	MaxRuns     = 100
	DefaultRuns = 14
)

// DefaultPace is the pace of the default scoreboard's paced pass; MaxPace
// is the longest: the paced pass measures the owner's time outside the
// pace, which a longer pace does not change, while every paced trace (tens
// to hundreds of steps) grows with it.
const (
	DefaultPace = 30 * time.Microsecond
	MaxPace     = 10 * time.Millisecond
)

// Options configures a scoreboard run.
type Options struct {
	// Runs is the number of measuring processes (MinRuns to MaxRuns).
	Runs int
	// Unpaced runs the unpaced v1 suite; Pace > 0 (at most MaxPace) adds a
	// paced pass.
	Unpaced bool
	Pace    time.Duration
	// Quick shrinks every group to a smoke test: its figures mean nothing.
	Quick bool
	// Touch is the trace workloads' touch.
	Touch bench.TouchMode
	// Workloads and Contenders select the cells (nil: all).
	Workloads  []*bench.Workload
	Contenders []bench.Entry
	// Progress, if set, is told the progress after every round.
	Progress func(Progress)
}

// Check validates o before any work.
func (o *Options) Check() error {
	var errs []error
	if err := checkRuns(o.Runs); err != nil {
		errs = append(errs, err)
	}
	if o.Pace < 0 || o.Pace > MaxPace {
		errs = append(errs, fmt.Errorf("%w: pace %v; want 0 (no paced pass) to %v", ErrConfig, o.Pace, MaxPace))
	}
	if !o.Unpaced && o.Pace == 0 {
		errs = append(errs, fmt.Errorf("%w: neither the unpaced nor a paced pass selected", ErrConfig))
	}
	seen := map[string]bool{}
	for _, e := range o.Contenders {
		if seen[e.Name] {
			errs = append(errs, fmt.Errorf("%w: contender %s named twice", ErrConfig, e.Name))
		}
		seen[e.Name] = true
	}
	seenW := map[string]bool{}
	for _, w := range o.Workloads {
		if seenW[w.Name] {
			errs = append(errs, fmt.Errorf("%w: workload %s named twice", ErrConfig, w.Name))
		}
		seenW[w.Name] = true
	}
	return errors.Join(errs...)
}

// checkRuns checks a number of measuring processes.
func checkRuns(runs int) error {
	if runs < MinRuns || runs > MaxRuns {
		return fmt.Errorf("%w: -runs %d: want %d to %d processes (%d are needed to see layout effects)", ErrConfig, runs, MinRuns, MaxRuns, MinRuns)
	}
	return nil
}

// ErrConfig is matched by every configuration error.
var ErrConfig = errors.New("invalid configuration")

// blockShape is how one workload is cut into blocks.
type blockShape struct{ traces, discard, rounds int }

// shapes: timed traces per block (the baseline's unpaced block is about
// 0.5–1 ms), untimed sampled traces opening each block, and rounds per
// process. A paced block is one timed (and sampled) trace with nothing
// discarded: a paced trace lasts 1.5–16 ms, so the cold caches of its first
// step after another contender's block are a small share, the same for all.
var (
	unpacedShapes = map[string]blockShape{
		bench.SteadyDecode.Name: {6, 1, 30},
		bench.BurstStorm.Name:   {6, 1, 30},
		bench.LongTail.Name:     {2, 1, 20},
		bench.ChurnTouch.Name:   {2, 1, 20},
	}
	pacedShapes = map[string]blockShape{
		bench.SteadyDecode.Name: {1, 0, 12},
		bench.BurstStorm.Name:   {1, 0, 12},
		bench.LongTail.Name:     {1, 0, 4},
		bench.ChurnTouch.Name:   {1, 0, 12},
	}
	quickShape = blockShape{1, 1, 2}
)

func shapeOf(w *bench.Workload, paced, quick bool) blockShape {
	if quick {
		return quickShape
	}
	m := unpacedShapes
	if paced {
		m = pacedShapes
	}
	if s, ok := m[w.Name]; ok {
		return s
	}
	return blockShape{2, 1, 40}
}

// specs returns the work of every process.
func (o *Options) specs() []Spec {
	ws, es := o.Workloads, o.Contenders
	if ws == nil {
		ws = bench.Workloads()
	}
	if es == nil {
		es = bench.Contenders()
	}
	names := make([]string, len(es))
	for i, e := range es {
		names[i] = e.Name
	}
	warm, alloc := bench.DefaultWarmup, DefaultAllocTraces
	if o.Quick {
		warm, alloc = 1, 1
	}
	var groups []GroupSpec
	pass := func(paced bool) {
		for _, w := range ws {
			s := shapeOf(w, paced, o.Quick)
			g := GroupSpec{ID: passName(paced) + "/" + w.Name, Harness: "trace", Workload: w.Name,
				Touch: o.Touch.String(), Members: names, Rounds: s.rounds, Discard: s.discard, Traces: s.traces,
				Warmup: warm, AllocTraces: alloc}
			if paced {
				g.PaceNS = o.Pace.Nanoseconds()
			}
			groups = append(groups, g)
		}
	}
	if o.Unpaced {
		pass(false)
	}
	if o.Pace > 0 {
		pass(true)
	}
	return repeat(groups, o.Runs)
}

func passName(paced bool) string {
	if paced {
		return "paced"
	}
	return "unpaced"
}

// RunScoreboard measures the scoreboard in o.Runs child processes and
// builds its document.
func RunScoreboard(o Options) (*Scoreboard, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	start := time.Now()
	specs := o.specs()
	tr := newTracker(specs, o.Progress)
	data, err := runProcesses(specs, tr.update)
	if err != nil {
		return nil, err
	}
	sb := buildScoreboard(specs, data)
	sb.Config = RunConfig{Runs: o.Runs, Quick: o.Quick, Touch: o.Touch.String(), PaceUS: us(o.Pace), Unpaced: o.Unpaced}
	for _, g := range specs[0].Groups {
		sb.Config.Groups = append(sb.Config.Groups, GroupShape{ID: g.ID, Rounds: g.Rounds, Traces: g.Traces, Discard: g.Discard, Warmup: g.Warmup})
	}
	sb.WallSeconds = time.Since(start).Seconds()
	return sb, nil
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// Scoreboard is the scoreboard's JSON document (locus-eval -json). Its
// schema is Schema, version SchemaVersion; BENCHMARKS.md documents it.
type Scoreboard struct {
	Schema        string    `json:"schema"`
	SchemaVersion int       `json:"schema_version"`
	Suite         string    `json:"suite"`
	Created       time.Time `json:"created"`
	Config        RunConfig `json:"config"`
	Machine       Machine   `json:"machine"`
	Revision      Revision  `json:"revision"`
	// Method says how the figures were computed, in words.
	Method Method `json:"method"`
	Passes []Pass `json:"passes"`
	// Targets are the performance targets, judged from the intervals.
	Targets []Target `json:"targets"`
	// GatesOK is false when any cell failed a proof gate.
	GatesOK     bool    `json:"gates_ok"`
	WallSeconds float64 `json:"wall_seconds"`
}

// RunConfig is the configuration of a scoreboard run.
type RunConfig struct {
	Runs    int          `json:"runs"`
	Quick   bool         `json:"quick"`
	Touch   string       `json:"touch"`
	Unpaced bool         `json:"unpaced"`
	PaceUS  float64      `json:"pace_us"`
	Groups  []GroupShape `json:"groups"`
}

// GroupShape is how one group was cut into blocks.
type GroupShape struct {
	ID      string `json:"id"`
	Rounds  int    `json:"rounds"`
	Traces  int    `json:"traces_per_block"`
	Discard int    `json:"discarded_per_block"`
	Warmup  int    `json:"warmup_traces"`
}

// Method documents the statistics.
type Method struct {
	Timing     string  `json:"timing"`
	Ratio      string  `json:"ratio"`
	Interval   string  `json:"interval"`
	Confidence float64 `json:"confidence"`
	Quality    string  `json:"quality"`
}

var method = Method{
	Timing: "per workload, every contender is opened in one process; rounds visit the contenders in a fresh random order " +
		"and time one block each: untimed sampled traces, then timed traces whose mean owner time is the block's value; " +
		"the whole is repeated in separate processes, one after another",
	Ratio: "per process, the median over rounds of the per-round ratio (contender's block / the other's block in the same round); " +
		"over processes, the geometric mean of those medians",
	Interval:   "Student t interval on the logarithms of the per-process medians (processes - 1 degrees of freedom)",
	Confidence: Confidence,
	Quality:    "peak of outstanding blocks at step ends / theoretical instant-free peak, over the sampled traces: median and worst",
}

// Pass is the unpaced or the paced pass.
type Pass struct {
	Name      string          `json:"name"`
	PaceUS    float64         `json:"pace_us"`
	Workloads []WorkloadBoard `json:"workloads"`
}

// WorkloadBoard is one workload of one pass.
type WorkloadBoard struct {
	Workload        string `json:"workload"`
	BlocksPerTrace  int    `json:"blocks_per_trace"`
	TheoreticalPeak int    `json:"theoretical_peak"`
	Steps           int    `json:"steps"`
	// Verdict is the one-line summary of the baseline against the others.
	Verdict string `json:"verdict"`
	// Seconds is the wall time of the workload in each process.
	Seconds []float64 `json:"seconds"`
	Cells   []Cell    `json:"cells"`
	// Raw is every block time, for recomputation.
	Raw Raw `json:"raw"`

	ratios map[[2]string]Interval // Ratio's results
}

// Raw is the block times behind a workload board: Blocks[process][member]
// lists one mean owner µs per trace per round.
type Raw struct {
	Members []string      `json:"members"`
	Blocks  [][][]float64 `json:"blocks_us"`
}

// Cell is one contender on one workload of one pass.
type Cell struct {
	Contender string      `json:"contender"`
	Group     bench.Group `json:"group"`
	// Floor marks the reference floor: shown as the limit, never ranked.
	Floor bool `json:"floor"`
	// Checked marks contenders that reject stale, double and foreign frees.
	Checked bool `json:"checked"`
	GatesOK bool `json:"gates_ok"`
	// GateErrors lists gate failures (one per failing process; empty when
	// the gates held).
	GateErrors []string `json:"gate_errors"`
	// USPerTrace is the median over blocks of the mean owner time per
	// timed trace, µs (paced: the pace spins excluded); USPerStep divides
	// it by the trace's steps.
	USPerTrace float64 `json:"us_per_trace"`
	USPerStep  float64 `json:"us_per_step"`
	// Ratio is this contender's time over the baseline's.
	Ratio Interval `json:"ratio"`
	// Verdict is "baseline", "faster" or "slower" (than the baseline,
	// when the interval excludes 1), or "tie".
	Verdict string `json:"verdict"`
	// Rank is 1 + the number of ranked contenders faster than this one
	// with an interval that excludes 1; 0 for the floor and invalid cells.
	Rank int `json:"rank"`
	// Quality is peak / theoretical peak over the sampled traces.
	Quality Quality `json:"quality"`
	// MeanLive is the mean of outstanding blocks at step ends over the
	// sampled traces.
	MeanLive float64 `json:"mean_live"`
	// BytesPerTrace and AllocsPerTrace are the heap bytes and objects
	// allocated per trace in steady state (the allocation pass after the
	// rounds, collector off).
	BytesPerTrace  float64 `json:"bytes_per_trace"`
	AllocsPerTrace float64 `json:"allocs_per_trace"`
	// GCPerTrace is the GC cycles that ended during its timed traces, per trace.
	GCPerTrace float64 `json:"gc_per_trace"`
	Blocks     int     `json:"blocks"`
	Traces     int     `json:"traces"`
}

// Quality is the median and the worst of peak / theoretical peak.
type Quality struct {
	Median float64 `json:"median"`
	Worst  float64 `json:"worst"`
}

// buildScoreboard combines the processes' data.
func buildScoreboard(specs []Spec, data []ProcessData) *Scoreboard {
	sb := &Scoreboard{Schema: Schema, SchemaVersion: SchemaVersion, Suite: bench.Suite, Created: time.Now().UTC(),
		Machine: ThisMachine(), Revision: ThisRevision(), Method: method, GatesOK: true}
	for gi, g := range specs[0].Groups {
		paced := g.PaceNS > 0
		var pass *Pass
		for i := range sb.Passes {
			if sb.Passes[i].Name == passName(paced) {
				pass = &sb.Passes[i]
			}
		}
		if pass == nil {
			sb.Passes = append(sb.Passes, Pass{Name: passName(paced), PaceUS: float64(g.PaceNS) / 1e3})
			pass = &sb.Passes[len(sb.Passes)-1]
		}
		var gd []GroupData
		for _, d := range data {
			if gi < len(d.Groups) {
				gd = append(gd, d.Groups[gi])
			}
		}
		wb := buildWorkload(g, gd)
		for _, c := range wb.Cells {
			sb.GatesOK = sb.GatesOK && c.GatesOK
		}
		pass.Workloads = append(pass.Workloads, wb)
	}
	sb.Targets = targets(sb)
	return sb
}

func buildWorkload(g GroupSpec, gd []GroupData) WorkloadBoard {
	w, _ := bench.WorkloadByName(g.Workload)
	wb := WorkloadBoard{Workload: cmp.Or(g.Workload, g.ID), Raw: Raw{Members: g.Members}}
	if w != nil {
		p := bench.NewPlan(w)
		wb.BlocksPerTrace, wb.TheoreticalPeak, wb.Steps = p.BlocksPerTrace, p.TheoreticalPeak, p.Steps
	}
	// Every list is non-nil, so that the document has [] where a list is
	// empty, never null.
	wb.Raw.Blocks = make([][][]float64, len(gd))
	wb.Seconds = []float64{}
	for p, d := range gd {
		wb.Seconds = append(wb.Seconds, d.Seconds)
		wb.Raw.Blocks[p] = make([][]float64, len(g.Members))
		for i := range g.Members {
			wb.Raw.Blocks[p][i] = []float64{}
			if i < len(d.Members) {
				wb.Raw.Blocks[p][i] = append(wb.Raw.Blocks[p][i], d.Members[i].BlockUS...)
			}
		}
	}
	for i, name := range g.Members {
		e, _ := bench.ContenderByName(name)
		c := Cell{Contender: name, Group: e.Group, Floor: e.Floor, Checked: e.Checked, GatesOK: true, GateErrors: []string{}}
		var blocks []float64
		var peaks []int
		var live float64
		var bytes, allocs, gcs uint64
		allocTr := 0
		steps := 0
		for _, d := range gd {
			if i >= len(d.Members) {
				continue
			}
			m := d.Members[i]
			if m.Err != "" {
				c.GatesOK = false
				c.GateErrors = append(c.GateErrors, m.Err)
			}
			blocks = append(blocks, m.BlockUS...)
			peaks = append(peaks, m.Peaks...)
			live += m.LiveSum
			bytes += m.Bytes
			allocs += m.Allocs
			allocTr += m.AllocTraces
			gcs += m.GCs
			c.Traces += m.Traces
			steps = max(steps, m.Steps)
		}
		c.Blocks = len(blocks)
		if len(blocks) > 0 {
			c.USPerTrace = Median(blocks)
		}
		if steps > 0 {
			c.USPerStep = c.USPerTrace / float64(steps)
		}
		if c.Traces > 0 {
			c.GCPerTrace = float64(gcs) / float64(c.Traces)
		}
		if allocTr > 0 {
			c.BytesPerTrace = float64(bytes) / float64(allocTr)
			c.AllocsPerTrace = float64(allocs) / float64(allocTr)
		}
		if len(peaks) > 0 && wb.TheoreticalPeak > 0 {
			qs := make([]float64, len(peaks))
			for j, pk := range peaks {
				qs[j] = float64(pk) / float64(wb.TheoreticalPeak)
			}
			c.Quality = Quality{Median: Median(qs), Worst: slices.Max(qs)}
			c.MeanLive = live / float64(len(peaks))
		}
		wb.Cells = append(wb.Cells, c)
	}
	rankCells(&wb)
	wb.Verdict = verdictLine(&wb, g.PaceNS > 0)
	return wb
}

// Ratio returns a's time over b's on this board, from the raw blocks (see
// ratioInterval). ok is false when either is missing or failed its gates.
func (wb *WorkloadBoard) Ratio(a, b string) (iv Interval, ok bool) {
	ca, cb := wb.Cell(a), wb.Cell(b)
	ia, ib := slices.Index(wb.Raw.Members, a), slices.Index(wb.Raw.Members, b)
	if ca == nil || cb == nil || !ca.GatesOK || !cb.GatesOK || ia < 0 || ib < 0 {
		return Interval{}, false
	}
	if a == b {
		return Interval{1, 1, 1}, true
	}
	if a > b { // one computation per pair, so that b/a is exactly the inverse of a/b
		iv, ok := wb.Ratio(b, a)
		return iv.Inverse(), ok
	}
	if iv, ok := wb.ratios[[2]string{a, b}]; ok {
		return iv, true
	}
	var xs, ys [][]float64
	for _, p := range wb.Raw.Blocks {
		if ia < len(p) && ib < len(p) {
			xs = append(xs, p[ia])
			ys = append(ys, p[ib])
		}
	}
	iv = ratioInterval(ratios(xs, ys))
	if math.IsNaN(iv.Point) || math.IsInf(iv.Point, 0) {
		return iv, false
	}
	if wb.ratios == nil {
		wb.ratios = map[[2]string]Interval{}
	}
	wb.ratios[[2]string{a, b}] = iv
	return iv, true
}

// Cell returns the named cell, or nil.
func (wb *WorkloadBoard) Cell(name string) *Cell {
	for i := range wb.Cells {
		if wb.Cells[i].Contender == name {
			return &wb.Cells[i]
		}
	}
	return nil
}

// rankCells fills Ratio, Verdict and Rank.
func rankCells(wb *WorkloadBoard) {
	for i := range wb.Cells {
		c := &wb.Cells[i]
		iv, ok := wb.Ratio(c.Contender, bench.Baseline)
		switch {
		case !ok:
			c.Verdict = "n/a"
			continue
		case c.Contender == bench.Baseline:
			c.Verdict = "baseline"
		case iv.Lo > 1:
			c.Verdict = "slower"
		case iv.Hi < 1:
			c.Verdict = "faster"
		default:
			c.Verdict = "tie"
		}
		c.Ratio = iv
	}
	for i := range wb.Cells {
		c := &wb.Cells[i]
		if c.Floor || !c.GatesOK {
			continue
		}
		c.Rank = 1
		for j := range wb.Cells {
			o := &wb.Cells[j]
			if j == i || o.Floor || !o.GatesOK {
				continue
			}
			if iv, ok := wb.Ratio(c.Contender, o.Contender); ok && iv.Lo > 1 {
				c.Rank++
			}
		}
	}
}
