package bench

import (
	"fmt"
	"math"
	"runtime"
	"strings"
)

// Result is one cell of the scoreboard: one workload, one contender, over
// all its runs. Its JSON form is the locus-eval -json schema.
type Result struct {
	Workload  string `json:"workload"`
	Contender string `json:"contender"`
	Group     Group  `json:"group"`
	// Floor marks a reference floor (locus-inline), not a real alternative.
	Floor bool `json:"floor,omitempty"`
	// RunsUS is each run's median per-trace time, µs.
	RunsUS []float64 `json:"runs_us"`
	// RunsCIPct is each run's 95 % CI full width, percent of its median.
	RunsCIPct []float64 `json:"runs_ci_pct"`
	// RunsTraces is each run's number of timed traces.
	RunsTraces []int `json:"runs_traces"`
	// MedianUS is the median of RunsUS: the cell's velocity.
	MedianUS float64 `json:"median_us"`
	// LoUS and HiUS are the medians of the runs' CI bounds.
	LoUS float64 `json:"lo_us"`
	HiUS float64 `json:"hi_us"`
	// CIPct is (HiUS-LoUS)/MedianUS, percent.
	CIPct float64 `json:"ci_pct"`
	// Ratio is MedianUS over the baseline's MedianUS on the same workload.
	Ratio           float64 `json:"ratio,omitempty"`
	BlocksPerTrace  int     `json:"blocks_per_trace"`
	Peak            int     `json:"peak"`
	TheoreticalPeak int     `json:"theoretical_peak"`
	// Quality is Peak / TheoreticalPeak (worst run).
	Quality float64 `json:"quality"`
	GatesOK bool    `json:"gates_ok"`
	// Gates lists gate failures; empty when GatesOK.
	Gates []string `json:"gate_errors,omitempty"`
	// GCPerTrace and BytesPerTrace are the worst run's GC cycles and heap
	// bytes allocated per timed trace.
	GCPerTrace    float64 `json:"gc_per_trace"`
	BytesPerTrace float64 `json:"bytes_per_trace"`
	// Touch is the touch mode this cell used.
	Touch string `json:"touch"`
	// Rank is the velocity rank among valid cells of the workload (1 =
	// fastest); 0 for invalid cells.
	Rank int `json:"rank"`

	lo, hi []float64 // the runs' CI bounds
}

// Estimate returns the cell's velocity estimate.
func (r *Result) Estimate() Estimate { return Estimate{Point: r.MedianUS, Lo: r.LoUS, Hi: r.HiUS} }

func (r *Result) add(run Run) {
	r.RunsUS = append(r.RunsUS, run.Time.Point)
	r.RunsCIPct = append(r.RunsCIPct, 100*run.Time.RelWidth())
	r.RunsTraces = append(r.RunsTraces, run.Traces)
	r.Peak = max(r.Peak, run.Peak)
	r.GCPerTrace = math.Max(r.GCPerTrace, run.GCPerTrace)
	r.BytesPerTrace = math.Max(r.BytesPerTrace, run.BytesPerTrace)
	if run.Err != nil {
		r.GatesOK = false
		r.Gates = append(r.Gates, run.Err.Error())
	}
	r.lo = append(r.lo, run.Time.Lo)
	r.hi = append(r.hi, run.Time.Hi)
	r.MedianUS = medianOf(r.RunsUS)
	r.LoUS, r.HiUS = medianOf(r.lo), medianOf(r.hi)
	if r.MedianUS > 0 {
		r.CIPct = 100 * (r.HiUS - r.LoUS) / r.MedianUS
	}
	if r.TheoreticalPeak > 0 {
		r.Quality = float64(r.Peak) / float64(r.TheoreticalPeak)
	}
}

// needsThird reports whether the first two runs differ by more than pct.
func (r *Result) needsThird(pct float64) bool {
	if len(r.RunsUS) != 2 {
		return false
	}
	a, b := r.RunsUS[0], r.RunsUS[1]
	return math.Abs(a-b)/math.Min(a, b)*100 > pct
}

// Cell names a (workload, contender) pair to measure.
type Cell struct {
	Workload  *Workload
	Contender Entry
}

// Cells returns the cross product of workloads and contenders.
func Cells(ws []*Workload, es []Entry) []Cell {
	var cs []Cell
	for _, w := range ws {
		for _, e := range es {
			cs = append(cs, Cell{w, e})
		}
	}
	return cs
}

// RunCells measures every cell: o.Runs rounds over all cells (runs of
// different cells interleave, so slow drift of a shared machine spreads
// over every cell instead of biasing one), then a third round for the
// cells whose first two runs differ by more than o.ThirdRunPct. Between
// runs it collects garbage so no run pays for the previous one's heap.
func RunCells(cells []Cell, o Options) []*Result {
	o.fix()
	out := make([]*Result, len(cells))
	for i, c := range cells {
		p := planFor(c.Workload)
		out[i] = &Result{Workload: c.Workload.Name, Contender: c.Contender.Name, Group: c.Contender.Group, Floor: c.Contender.Floor,
			BlocksPerTrace: p.BlocksPerTrace, TheoreticalPeak: p.TheoreticalPeak, GatesOK: true,
			Touch: effectiveTouch(c.Workload, o.Touch).String()}
	}
	total := len(cells) * o.Runs
	done := 0
	step := func(round int, i int) {
		c := cells[i]
		if o.Progress != nil {
			o.Progress(fmt.Sprintf("[%d/%d] run %d  %-13s %-19s", done+1, total, round, c.Workload.Name, c.Contender.Name))
		}
		runtime.GC()
		out[i].add(RunOnce(c.Contender, c.Workload, o))
		done++
	}
	for round := 1; round <= o.Runs; round++ {
		for i := range cells {
			step(round, i)
		}
	}
	var third []int
	for i, r := range out {
		if r.needsThird(o.ThirdRunPct) {
			third = append(third, i)
		}
	}
	total += len(third)
	for _, i := range third {
		step(3, i)
	}
	rank(out)
	return out
}

// rank fills Ratio (to the baseline) and Rank per workload; invalid cells
// are never ranked.
func rank(rs []*Result) {
	byW := map[string][]*Result{}
	var ws []string
	for _, r := range rs {
		if _, ok := byW[r.Workload]; !ok {
			ws = append(ws, r.Workload)
		}
		byW[r.Workload] = append(byW[r.Workload], r)
	}
	for _, w := range ws {
		var base float64
		for _, r := range byW[w] {
			if r.Contender == Baseline && r.GatesOK {
				base = r.MedianUS
			}
		}
		for _, r := range byW[w] {
			r.Rank = 0
			if base > 0 {
				r.Ratio = r.MedianUS / base
			}
			if !r.GatesOK {
				continue
			}
			r.Rank = 1
			for _, o := range byW[w] {
				if o.GatesOK && o.MedianUS < r.MedianUS {
					r.Rank++
				}
			}
		}
	}
}

// FindResult returns the result of (workload, contender), or nil.
func FindResult(rs []*Result, workload, contender string) *Result {
	for _, r := range rs {
		if r.Workload == workload && r.Contender == contender {
			return r
		}
	}
	return nil
}

// FastestPeer returns the valid Go peer with the lowest median on
// workload, or nil.
func FastestPeer(rs []*Result, workload string) *Result {
	var best *Result
	for _, r := range rs {
		if r.Workload == workload && r.Group == GroupGo && r.GatesOK && (best == nil || r.MedianUS < best.MedianUS) {
			best = r
		}
	}
	return best
}

func fmtUS(us float64) string {
	switch {
	case us >= 10000:
		return fmt.Sprintf("%.0f", us)
	case us >= 100:
		return fmt.Sprintf("%.1f", us)
	default:
		return fmt.Sprintf("%.2f", us)
	}
}

func fmtBytes(b float64) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%.1fMiB", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1fKiB", b/(1<<10))
	default:
		return fmt.Sprintf("%.0fB", b)
	}
}

// FormatTable renders results as the scoreboard table, one block per
// workload, contenders in velocity order, invalid cells last.
func FormatTable(rs []*Result) string {
	var b strings.Builder
	var ws []string
	seen := map[string]bool{}
	for _, r := range rs {
		if !seen[r.Workload] {
			seen[r.Workload] = true
			ws = append(ws, r.Workload)
		}
	}
	for _, w := range ws {
		var cell []*Result
		for _, r := range rs {
			if r.Workload == w {
				cell = append(cell, r)
			}
		}
		sortByRank(cell)
		p := cell[0]
		fmt.Fprintf(&b, "\n%s  (blocks/trace %d, theoretical peak %d, touch %s)\n", w, p.BlocksPerTrace, p.TheoreticalPeak, p.Touch)
		fmt.Fprintf(&b, "  %-4s %-19s %10s %7s %6s  %-26s %5s %7s %6s %9s  %s\n",
			"rank", "contender", "median µs", "×mbox", "CI %", "runs µs", "peak", "quality", "GC/tr", "bytes/tr", "gates")
		for _, r := range cell {
			runs := make([]string, len(r.RunsUS))
			for i, u := range r.RunsUS {
				runs[i] = fmtUS(u)
			}
			rk, gates := fmt.Sprint(r.Rank), "ok"
			if r.Floor {
				gates = "ok (floor: no workers)"
			}
			if !r.GatesOK {
				rk, gates = "-", "INVALID: "+strings.Join(r.Gates, "; ")
			}
			ratio := "-"
			if r.Ratio > 0 {
				ratio = fmt.Sprintf("%.2f", r.Ratio)
			}
			fmt.Fprintf(&b, "  %-4s %-19s %10s %7s %6.1f  %-26s %5d %7.2f %6.2f %9s  %s\n",
				rk, r.Contender, fmtUS(r.MedianUS), ratio, r.CIPct, strings.Join(runs, " / "),
				r.Peak, r.Quality, r.GCPerTrace, fmtBytes(r.BytesPerTrace), gates)
		}
	}
	return b.String()
}

func sortByRank(rs []*Result) {
	key := func(r *Result) float64 {
		if !r.GatesOK {
			return math.Inf(1)
		}
		return r.MedianUS
	}
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && key(rs[j]) < key(rs[j-1]); j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
}

// Legend explains the scoreboard's columns and statistics.
const Legend = `Legend:
  median µs  per-trace wall time on the owner goroutine (one trace = one churn run of 64 steps for churn-touch),
             from the first drain to the end-of-trace wait; the cell value is the median of the runs' medians.
  runs µs    each run's median of per-trace times (>= 2 runs; a 3rd when the first two differ by > 5 %).
  CI %       95 % distribution-free CI of the median within a run (order statistics at n/2 ∓ 0.98·√n),
             full width (hi - lo) / median; the cell's bounds are the medians of the runs' bounds.
  ×mbox      median / locus-mailbox median on the same workload (lower is faster).
  peak       worst sample-pass peak of outstanding blocks (untimed 4-trace pass, after the step-end drain);
  quality    peak / theoretical instant-free peak (§2.6).
  GC/tr, bytes/tr  GC cycles and heap bytes allocated per timed trace (runtime/metrics, worst run).
  gates      allocated = freed = blocks/trace every trace; submitted = drained; queues balanced; nothing rejected.
             A cell whose gates fail is INVALID and never ranked.
  touch      every contender writes the same bytes right after allocation on the owner: byte = 1 byte at offset 0,
             full = all 4096 bytes; churn-touch always writes all 4096 bytes. Every contender writes through the
             slice its allocation returned (locus: Pool.AllocBytes); go-heap's make also zeroes 4 KiB.`
