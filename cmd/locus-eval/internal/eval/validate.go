package eval

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/locus-go/locus/bench"
)

// ErrDocument is matched by every error of a document that is not a valid
// locus-eval document: not JSON, another schema or version, or content
// that a run of this locus-eval cannot have written (see Validate).
var ErrDocument = errors.New("invalid document")

// maxProblems bounds the problems one validation error lists.
const maxProblems = 10

// problems collects what is wrong with a document, each with where.
type problems struct{ list []string }

func (p *problems) add(where, format string, args ...any) {
	p.list = append(p.list, where+": "+fmt.Sprintf(format, args...))
}

func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	more := ""
	if len(p.list) > maxProblems {
		more = fmt.Sprintf("\n  (and %d more)", len(p.list)-maxProblems)
		p.list = p.list[:maxProblems]
	}
	return fmt.Errorf("%w:\n  %s%s", ErrDocument, strings.Join(p.list, "\n  "), more)
}

// finite reports whether every x is a finite number.
func finite(xs ...float64) bool {
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

// nonNegative reports whether every x is finite and not negative.
func nonNegative(xs ...float64) bool {
	for _, x := range xs {
		if !finite(x) || x < 0 {
			return false
		}
	}
	return true
}

// Validate checks what a scoreboard document says against what a run of
// this locus-eval writes, so that the report, the figures and compare
// never meet a document they would misread: the schema and version; the
// configuration (MinRuns to MaxRuns processes, a known touch, a pace of 0
// to MaxPace, a group shape for every pass and workload); passes that
// match it, each named once; known workloads, each once per pass; per
// workload known contenders, each once, the baseline among them, and
// blocks_us with one list per process and member (a valid cell: one
// positive time per round in every process); per cell a verdict, ratio and
// rank that agree with each other and with its gates (an invalid cell has
// gate errors, no ratio and no rank); finite, non-negative figures; gates_ok
// that agrees with the cells; and targets with a known status.
func (sb *Scoreboard) Validate() error {
	var p problems
	if sb.Schema != Schema || sb.SchemaVersion != SchemaVersion {
		p.add("schema", "%q version %d; want %q version %d", sb.Schema, sb.SchemaVersion, Schema, SchemaVersion)
	}
	if sb.Suite != bench.Suite {
		p.add("suite", "%q; want %q", sb.Suite, bench.Suite)
	}
	cfg := sb.Config
	runsOK := checkRuns(cfg.Runs) == nil
	if !runsOK {
		p.add("config.runs", "%d; want %d to %d", cfg.Runs, MinRuns, MaxRuns)
	}
	if _, err := bench.ParseTouchMode(cfg.Touch); err != nil {
		p.add("config.touch", "%q: want byte, full or none", cfg.Touch)
	}
	if !nonNegative(cfg.PaceUS) || cfg.PaceUS > us(MaxPace) {
		p.add("config.pace_us", "%g; want 0 (no paced pass) to %g", cfg.PaceUS, us(MaxPace))
	}
	if !cfg.Unpaced && cfg.PaceUS == 0 {
		p.add("config", "neither the unpaced nor a paced pass")
	}
	rounds := map[string]int{}
	for i, g := range cfg.Groups {
		where := fmt.Sprintf("config.groups[%d]", i)
		if _, dup := rounds[g.ID]; dup {
			p.add(where, "group %q given twice", g.ID)
		}
		rounds[g.ID] = g.Rounds
		if g.Rounds < 1 || g.Traces < 1 || g.Discard < 0 || g.Warmup < 0 {
			p.add(where, "%q: %d rounds of %d discarded + %d timed traces, %d warm-up traces; want at least 1 round and 1 timed trace",
				g.ID, g.Rounds, g.Discard, g.Traces, g.Warmup)
		}
	}
	validateMachine(&p, sb.Machine)
	if !(sb.Method.Confidence > 0 && sb.Method.Confidence < 1) {
		p.add("method.confidence", "%g; want a level between 0 and 1", sb.Method.Confidence)
	}
	if !nonNegative(sb.WallSeconds) {
		p.add("wall_seconds", "%g", sb.WallSeconds)
	}

	if len(sb.Passes) == 0 {
		p.add("passes", "none")
	}
	gates := true
	groups := map[string]bool{}
	seenPass := map[string]bool{}
	for pi := range sb.Passes {
		ps := &sb.Passes[pi]
		where := fmt.Sprintf("passes[%d]", pi)
		switch {
		case ps.Name != "unpaced" && ps.Name != "paced":
			p.add(where, "name %q; want unpaced or paced", ps.Name)
		case seenPass[ps.Name]:
			p.add(where, "the %s pass given twice", ps.Name)
		case ps.Name == "unpaced" && (!cfg.Unpaced || ps.PaceUS != 0):
			p.add(where, "an unpaced pass at pace %g µs, in a run configured unpaced=%v", ps.PaceUS, cfg.Unpaced)
		case ps.Name == "paced" && (cfg.PaceUS == 0 || ps.PaceUS != cfg.PaceUS):
			p.add(where, "a paced pass at %g µs, in a run configured with pace %g µs", ps.PaceUS, cfg.PaceUS)
		}
		seenPass[ps.Name] = true
		if len(ps.Workloads) == 0 {
			p.add(where, "no workloads")
		}
		seenW := map[string]bool{}
		for wi := range ps.Workloads {
			wb := &ps.Workloads[wi]
			at := fmt.Sprintf("%s.workloads[%d] (%s)", where, wi, wb.Workload)
			if _, err := bench.WorkloadByName(wb.Workload); err != nil {
				p.add(at, "unknown workload")
			}
			if seenW[wb.Workload] {
				p.add(at, "given twice in the %s pass", ps.Name)
			}
			seenW[wb.Workload] = true
			id := ps.Name + "/" + wb.Workload
			groups[id] = true
			r, ok := rounds[id]
			if !ok {
				p.add("config.groups", "no group %q", id)
				r = -1
			}
			if !runsOK {
				continue // the shape of blocks_us cannot be checked
			}
			validateBoard(&p, at, wb, cfg.Runs, r)
			base := wb.Cell(bench.Baseline)
			if base == nil {
				p.add(at, "no %s cell: every ratio is taken against it", bench.Baseline)
			}
			for ci, c := range wb.Cells {
				gates = gates && c.GatesOK
				if _, err := bench.ContenderByName(c.Contender); err != nil {
					p.add(fmt.Sprintf("%s.cells[%d]", at, ci), "unknown contender %q", c.Contender)
				}
				if c.Verdict == "n/a" && c.GatesOK && base != nil && base.GatesOK {
					p.add(fmt.Sprintf("%s.cells[%d] (%s)", at, ci, c.Contender), "verdict n/a, yet it and %s passed their gates", bench.Baseline)
				}
				if c.Group != bench.GroupLocus && c.Group != bench.GroupGo {
					p.add(fmt.Sprintf("%s.cells[%d] (%s)", at, ci, c.Contender), "group %q; want locus or go", c.Group)
				}
			}
		}
	}
	if !seenPass["unpaced"] && cfg.Unpaced {
		p.add("passes", "no unpaced pass in a run configured with one")
	}
	if !seenPass["paced"] && cfg.PaceUS > 0 {
		p.add("passes", "no paced pass in a run configured with pace %g µs", cfg.PaceUS)
	}
	for id := range rounds {
		if !groups[id] {
			p.add("config.groups", "group %q has no workload in the passes", id)
		}
	}
	if sb.GatesOK != gates {
		p.add("gates_ok", "%v, but the cells say %v", sb.GatesOK, gates)
	}
	for i, t := range sb.Targets {
		validateTarget(&p, fmt.Sprintf("targets[%d]", i), t)
	}
	return p.err()
}

// Validate checks a thread document as Scoreboard.Validate checks a
// scoreboard: schema and version, MinRuns to MaxRuns processes, a known
// touch, ledger rows of known experiments (each once) with a known
// verdict, the boards "cycle", "trace" (steady-decode) and "reuse" (each
// once, checked as the scoreboard's workloads are, without a baseline),
// and gates_ok that agrees with their cells.
func (t *Thread) Validate() error {
	var p problems
	if t.Schema != ThreadSchema || t.SchemaVersion != SchemaVersion {
		p.add("schema", "%q version %d; want %q version %d", t.Schema, t.SchemaVersion, ThreadSchema, SchemaVersion)
	}
	runsOK := checkRuns(t.Runs) == nil
	if !runsOK {
		p.add("runs", "%d; want %d to %d", t.Runs, MinRuns, MaxRuns)
	}
	if _, err := bench.ParseTouchMode(t.Touch); err != nil {
		p.add("touch", "%q: want byte, full or none", t.Touch)
	}
	validateMachine(&p, t.Machine)
	if !nonNegative(t.WallSeconds) {
		p.add("wall_seconds", "%g", t.WallSeconds)
	}
	if len(t.Ledger) == 0 {
		p.add("ledger", "no experiments")
	}
	seen := map[string]bool{}
	for i, r := range t.Ledger {
		where := fmt.Sprintf("ledger[%d] (%s)", i, r.ID)
		if !slices.Contains(ExperimentIDs(), r.ID) {
			p.add(where, "unknown experiment")
		}
		if seen[r.ID] {
			p.add(where, "given twice")
		}
		seen[r.ID] = true
		if !slices.Contains([]string{Confirmed, Falsified, Inconclusive, Invalid}, r.Verdict) {
			p.add(where, "verdict %q; want %s, %s, %s or %s", r.Verdict, Confirmed, Falsified, Inconclusive, Invalid)
		}
	}
	gates := true
	seenB := map[string]bool{}
	for i := range t.Boards {
		wb := &t.Boards[i]
		where := fmt.Sprintf("boards[%d] (%s)", i, wb.Workload)
		if wb.Workload != "cycle" && wb.Workload != "reuse" && wb.Workload != bench.SteadyDecode.Name {
			p.add(where, "unknown board; want cycle, reuse or %s", bench.SteadyDecode.Name)
		}
		if seenB[wb.Workload] {
			p.add(where, "given twice")
		}
		seenB[wb.Workload] = true
		if runsOK {
			validateBoard(&p, where, wb, t.Runs, -1)
		}
		for _, c := range wb.Cells {
			gates = gates && c.GatesOK
		}
	}
	if t.GatesOK != gates {
		p.add("gates_ok", "%v, but the cells say %v", t.GatesOK, gates)
	}
	return p.err()
}

func validateMachine(p *problems, m Machine) {
	if m.NumCPU < 1 || m.GOMAXPROCS < 1 {
		p.add("machine", "%d CPUs, GOMAXPROCS=%d; want at least 1", m.NumCPU, m.GOMAXPROCS)
	}
}

// validateBoard checks one board of runs processes whose groups ran rounds
// rounds (-1: unknown; then a valid cell has the same number of blocks in
// every process).
func validateBoard(p *problems, where string, wb *WorkloadBoard, runs, rounds int) {
	if wb.Workload == "" {
		p.add(where, "no workload name")
	}
	if wb.BlocksPerTrace < 0 || wb.TheoreticalPeak < 0 || wb.Steps < 0 {
		p.add(where, "%d blocks per trace, theoretical peak %d, %d steps", wb.BlocksPerTrace, wb.TheoreticalPeak, wb.Steps)
	}
	if len(wb.Seconds) != runs || !nonNegative(wb.Seconds...) {
		p.add(where+".seconds", "%v; want a time per process (%d)", wb.Seconds, runs)
	}
	if len(wb.Cells) == 0 {
		p.add(where, "no cells")
	}
	names := make([]string, len(wb.Cells))
	for i, c := range wb.Cells {
		names[i] = c.Contender
		if c.Contender == "" || slices.Index(names, c.Contender) < i {
			p.add(fmt.Sprintf("%s.cells[%d]", where, i), "contender %q empty or given twice", c.Contender)
		}
	}
	if !slices.Equal(wb.Raw.Members, names) {
		p.add(where+".raw.members", "%q; want the cells' contenders in order, %q", wb.Raw.Members, names)
		return // the blocks cannot be matched to the cells
	}
	if len(wb.Raw.Blocks) != runs {
		p.add(where+".raw.blocks_us", "%d processes; want %d", len(wb.Raw.Blocks), runs)
	}
	for pi, proc := range wb.Raw.Blocks {
		if len(proc) != len(names) {
			p.add(fmt.Sprintf("%s.raw.blocks_us[%d]", where, pi), "%d members; want %d", len(proc), len(names))
			continue
		}
		for mi, bs := range proc {
			if !nonNegative(bs...) || (rounds >= 0 && len(bs) > rounds) {
				p.add(fmt.Sprintf("%s.raw.blocks_us[%d][%d] (%s)", where, pi, mi, names[mi]), "%d blocks %v; want at most %d non-negative times", len(bs), bs, rounds)
			}
		}
	}
	for i := range wb.Cells {
		validateCell(p, fmt.Sprintf("%s.cells[%d] (%s)", where, i, wb.Cells[i].Contender), wb, i, rounds)
	}
}

// validateCell checks cell i of wb.
func validateCell(p *problems, where string, wb *WorkloadBoard, i, rounds int) {
	c := &wb.Cells[i]
	if !nonNegative(c.USPerTrace, c.USPerStep, c.MeanLive, c.BytesPerTrace, c.AllocsPerTrace, c.GCPerTrace,
		c.Quality.Median, c.Quality.Worst) || c.Quality.Median > c.Quality.Worst || c.Blocks < 0 || c.Traces < 0 {
		p.add(where, "figures not finite, negative or out of order: %g µs/trace, %g µs/step, quality %+v, mean live %g, "+
			"%g B, %g allocs, %g GCs per trace, %d blocks, %d traces", c.USPerTrace, c.USPerStep, c.Quality, c.MeanLive,
			c.BytesPerTrace, c.AllocsPerTrace, c.GCPerTrace, c.Blocks, c.Traces)
	}
	if c.GatesOK != (len(c.GateErrors) == 0) {
		p.add(where, "gates_ok %v with %d gate errors", c.GatesOK, len(c.GateErrors))
	}
	ranked := c.GatesOK && !c.Floor
	if (ranked && (c.Rank < 1 || c.Rank > len(wb.Cells))) || (!ranked && c.Rank != 0) {
		p.add(where, "rank %d; want 1 to %d for a valid cell, 0 for the floor and invalid cells", c.Rank, len(wb.Cells))
	}
	iv := c.Ratio
	switch {
	case c.Verdict == "n/a":
		if iv != (Interval{}) {
			p.add(where, "verdict n/a with a ratio %+v", iv)
		}
	case !c.GatesOK:
		p.add(where, "failed its gates, yet has the verdict %q; want n/a", c.Verdict)
	case !finite(iv.Point, iv.Lo, iv.Hi) || !(0 < iv.Lo && iv.Lo <= iv.Point && iv.Point <= iv.Hi):
		p.add(where, "ratio %+v; want 0 < lo <= point <= hi, finite", iv)
	case (c.Verdict == "baseline") != (c.Contender == bench.Baseline):
		p.add(where, "verdict %q", c.Verdict)
	case c.Verdict == "baseline" && iv != (Interval{1, 1, 1}):
		p.add(where, "the baseline's ratio to itself is %+v; want 1", iv)
	case c.Verdict == "faster" && !(iv.Hi < 1), c.Verdict == "slower" && !(iv.Lo > 1),
		c.Verdict == "tie" && !(iv.Lo <= 1 && 1 <= iv.Hi):
		p.add(where, "verdict %s with the ratio %+v", c.Verdict, iv)
	case !slices.Contains([]string{"baseline", "faster", "slower", "tie"}, c.Verdict):
		p.add(where, "verdict %q; want baseline, faster, slower, tie or n/a", c.Verdict)
	}
	if !c.GatesOK {
		return
	}
	// A valid cell timed every round of every process.
	n := -1
	for pi, proc := range wb.Raw.Blocks {
		if i >= len(proc) {
			continue // reported by validateBoard
		}
		bs := proc[i]
		if n < 0 {
			n = len(bs)
		}
		if len(bs) == 0 || len(bs) != n || (rounds >= 0 && len(bs) != rounds) || slices.ContainsFunc(bs, func(x float64) bool { return !(x > 0) }) {
			p.add(fmt.Sprintf("%s: raw.blocks_us[%d]", where, pi), "%d blocks %v of a valid cell; want one positive time per round (%d rounds)", len(bs), bs, max(rounds, n))
		}
	}
}

func validateTarget(p *problems, where string, t Target) {
	if !slices.Contains([]string{Met, Missed, Undecided, NotMeasured}, t.Status) {
		p.add(where, "status %q; want %s, %s, %s or %s", t.Status, Met, Missed, Undecided, NotMeasured)
	}
	if t.Met != (t.Status == Met) {
		p.add(where, "met %v with status %q", t.Met, t.Status)
	}
	if t.Want.Op != "<=" || (t.Want.Unit != "×" && t.Want.Unit != "B") || !finite(t.Want.Value) {
		p.add(where, "want %+v; want op <=, a finite value and unit × or B", t.Want)
	}
	g := t.Got
	if !finite(g.Point, g.Lo, g.Hi) || (t.Status != NotMeasured && !(g.Lo <= g.Point && g.Point <= g.Hi)) {
		p.add(where, "got %+v; want lo <= point <= hi, finite", g)
	}
}
