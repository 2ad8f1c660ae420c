package eval

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/locus-go/locus/bench"
)

// fmtX formats a ratio: two decimals, three within 0.5 % of 1 (so that an
// interval that excludes 1 never prints as [1.00–…]).
func fmtX(x float64) string {
	switch {
	case x >= 0.995 && x < 1.005 && x != 1:
		return fmt.Sprintf("%.3f", x)
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	}
	return fmt.Sprintf("%.2f", x)
}

// fmtIv formats an interval as "[lo–hi]".
func fmtIv(iv Interval) string { return "[" + fmtX(iv.Lo) + "–" + fmtX(iv.Hi) + "]" }

// fmtUS formats µs with three significant digits or so.
func fmtUS(us float64) string {
	switch {
	case us >= 1000:
		return fmt.Sprintf("%.0f", us)
	case us >= 100:
		return fmt.Sprintf("%.1f", us)
	case us >= 10:
		return fmt.Sprintf("%.2f", us)
	}
	return fmt.Sprintf("%.3f", us)
}

func fmtBytes(b float64) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", b/(1<<10))
	}
	return fmt.Sprintf("%.0f B", b)
}

// plural returns "1 CPU", "2 CPUs", "3 processes".
func plural(n int, what string) string {
	switch {
	case n == 1:
		return "1 " + what
	case strings.HasSuffix(what, "s"):
		return itoa(n) + " " + what + "es"
	}
	return itoa(n) + " " + what + "s"
}

func itoa(n int) string { return fmt.Sprint(n) }

// byRatio orders cells: valid ones by ratio to the baseline, then invalid.
func byRatio(cells []Cell) []Cell {
	s := slices.Clone(cells)
	slices.SortStableFunc(s, func(a, b Cell) int {
		if a.GatesOK != b.GatesOK {
			if a.GatesOK {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.Ratio.Point, b.Ratio.Point)
	})
	return s
}

// verdictLine says, in one line, how the baseline compares with every
// other valid contender of the board: "N× faster than X [lo–hi]" when the
// baseline is faster with an interval that excludes 1, "N× slower than X"
// likewise, "tie with X" otherwise; the floor is given as the limit
// (paced, where it is no limit, as what it is).
func verdictLine(wb *WorkloadBoard, paced bool) string {
	base := wb.Cell(bench.Baseline)
	if base == nil {
		return ""
	}
	if !base.GatesOK {
		return bench.Baseline + ": invalid (failed its gates)"
	}
	var parts []string
	floor := ""
	for _, c := range byRatio(wb.Cells) {
		if c.Contender == bench.Baseline || !c.GatesOK {
			continue
		}
		if c.Floor {
			what := "its floor"
			if paced {
				what = "without workers (the owner frees inline)"
			}
			floor = fmt.Sprintf("; %s %s takes %s× its time %s", what, c.Contender, fmtX(c.Ratio.Point), fmtIv(c.Ratio))
			continue
		}
		switch c.Verdict {
		case "faster": // the contender is faster: the baseline is slower
			inv := c.Ratio.Inverse()
			parts = append(parts, fmt.Sprintf("%s× slower than %s %s", fmtX(inv.Point), c.Contender, fmtIv(inv)))
		case "slower":
			parts = append(parts, fmt.Sprintf("%s× faster than %s %s", fmtX(c.Ratio.Point), c.Contender, fmtIv(c.Ratio)))
		default:
			parts = append(parts, fmt.Sprintf("tie with %s %s", c.Contender, fmtIv(c.Ratio)))
		}
	}
	return bench.Baseline + ": " + strings.Join(parts, ", ") + floor
}

// WriteText writes the scoreboard as text: per pass and workload the
// verdict line and the table, then the targets and the legend.
func WriteText(w io.Writer, sb *Scoreboard) {
	fmt.Fprintf(w, "%s scoreboard — %s\n", sb.Suite, sb.Machine)
	if d := sb.Machine.Details(); d != "" {
		fmt.Fprintf(w, "host: %s\n", d)
	}
	fmt.Fprintf(w, "%s; %s; touch %s (churn-touch: full)", revString(sb.Revision), plural(sb.Config.Runs, "process"), sb.Config.Touch)
	if sb.Config.PaceUS > 0 {
		fmt.Fprintf(w, "; paced pass at %g µs", sb.Config.PaceUS)
	}
	if sb.Config.Quick {
		fmt.Fprint(w, "; QUICK (smoke test: the figures mean nothing)")
	}
	fmt.Fprintf(w, "; %s\n", (time.Duration(sb.WallSeconds * 1e9)).Round(time.Second))
	for _, p := range sb.Passes {
		fmt.Fprintln(w)
		if p.Name == "paced" {
			fmt.Fprintf(w, "== paced: %g µs of simulated compute after every step; owner time outside it ==\n", p.PaceUS)
		} else {
			fmt.Fprintln(w, "== unpaced: the v1 traces, steps back to back ==")
		}
		for i := range p.Workloads {
			writeBoard(w, &p.Workloads[i], p.Name == "paced")
		}
	}
	fmt.Fprintln(w)
	WriteTargets(w, sb.Targets)
	fmt.Fprintln(w)
	fmt.Fprintln(w, Legend)
}

func revString(r Revision) string {
	s := "revision " + r.VCS
	if len(r.VCS) > 12 {
		s = "revision " + r.VCS[:12]
	}
	if r.Modified {
		s += " (modified)"
	}
	return s
}

// boardTable returns a board's table as strings (the floor first, then by
// rank, ties by ratio, invalid cells last), and which columns hold numbers
// (right-aligned in text).
func boardTable(wb *WorkloadBoard, paced bool) (head []string, rows [][]string, numeric []bool) {
	timeCol := "µs/trace"
	if paced {
		timeCol = "owner µs/step"
	}
	head = []string{"rank", "contender", timeCol, "× " + bench.Baseline + " [99% CI]", "verdict", "quality med / worst"}
	numeric = []bool{true, false, true, false, false, false}
	if paced {
		head, numeric = append(head, "mean live"), append(numeric, true)
	}
	head, numeric = append(head, "bytes/trace", "gates"), append(numeric, true, false)
	cells := byRatio(wb.Cells)
	slices.SortStableFunc(cells, func(a, b Cell) int {
		key := func(c Cell) int {
			switch {
			case c.Floor && c.GatesOK:
				return -1
			case !c.GatesOK:
				return math.MaxInt
			}
			return c.Rank
		}
		return cmp.Compare(key(a), key(b))
	})
	for _, c := range cells {
		rank := "-"
		switch {
		case c.Floor:
			rank = "floor"
		case c.Rank > 0:
			rank = itoa(c.Rank)
		}
		t := c.USPerTrace
		if paced {
			t = c.USPerStep
		}
		ratio, verdict, gates := "", c.Verdict, "ok"
		if c.GatesOK {
			ratio = fmtX(c.Ratio.Point)
			if c.Contender != bench.Baseline {
				ratio += " " + fmtIv(c.Ratio)
			}
		} else {
			verdict, gates = "-", "INVALID: "+strings.Join(c.GateErrors, "; ")
		}
		q := "-"
		if c.Quality.Median > 0 {
			q = fmt.Sprintf("%.2f / %.2f", c.Quality.Median, c.Quality.Worst)
		}
		row := []string{rank, c.Contender, fmtUS(t), ratio, verdict, q}
		if paced {
			row = append(row, fmt.Sprintf("%.0f", c.MeanLive))
		}
		rows = append(rows, append(row, fmtBytes(c.BytesPerTrace), gates))
	}
	return head, rows, numeric
}

func writeBoard(w io.Writer, wb *WorkloadBoard, paced bool) {
	fmt.Fprintf(w, "\n%s  (%d blocks/trace, %d steps, theoretical peak %d)\n", wb.Workload, wb.BlocksPerTrace, wb.Steps, wb.TheoreticalPeak)
	fmt.Fprintf(w, "  %s\n", wb.Verdict)
	head, rows, numeric := boardTable(wb, paced)
	width := make([]int, len(head))
	for _, r := range append([][]string{head}, rows...) {
		for i, f := range r {
			width[i] = max(width[i], utf8.RuneCountInString(f))
		}
	}
	for _, r := range append([][]string{head}, rows...) {
		var b strings.Builder
		for i, f := range r {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(f))
			if i == len(r)-1 {
				pad = "" // the last column is ragged
			}
			if numeric[i] {
				f = pad + f
			} else {
				f += pad
			}
			b.WriteString("  " + f)
		}
		fmt.Fprintln(w, b.String())
	}
}

// targetGot formats what a target measured.
func targetGot(t Target) string {
	got := "-"
	switch {
	case t.Status == NotMeasured:
	case t.Want.Unit == "B":
		got = fmtBytes(t.Got.Point)
	default:
		got = fmtX(t.Got.Point) + "× " + fmtIv(t.Got)
	}
	if t.Detail != "" {
		got += " (" + t.Detail + ")"
	}
	return got
}

// WriteTargets writes the targets, one line each.
func WriteTargets(w io.Writer, ts []Target) {
	fmt.Fprintln(w, "Targets (judged on the 99 % intervals: met = the whole interval within the bound, missed = the whole")
	fmt.Fprintln(w, "interval beyond it, undecided = it straddles the bound; a missed target does not fail the run):")
	for _, t := range ts {
		want := fmt.Sprintf("≤ %g%s", t.Want.Value, t.Want.Unit)
		fmt.Fprintf(w, "  %-9s %-62s want %-8s got %s\n", strings.ToUpper(t.Status), t.Name, want, targetGot(t))
	}
}

// Legend explains the scoreboard's columns and statistics.
const Legend = `Legend:
  µs/trace      owner goroutine's wall time per trace (one trace = one churn run of 64 steps for churn-touch), from the
                first drain to the end of the end-of-trace barrier and its one drain; the median over all blocks of the
                block's mean per timed trace. Paced: owner µs/step = the same less the pace spins, per step.
                The ratio pairs blocks of the same round, which cancels the host's slow speed swings; compare
                contenders by it, not by the quotient of two µs figures.
  × baseline    per round, the contender's block time over locus-mailbox's block in the same round; per process the
                median over its rounds; over processes the geometric mean of those medians, with a 99 % Student t
                interval on their logarithms (the processes, whose memory layout and timing differ, are the units).
                Lower is faster.
  verdict       faster / slower than locus-mailbox when the interval excludes 1, else tie.
  rank          1 + the number of contenders faster than this one with a pairwise interval that excludes 1 (ties share
                a rank); the floor (locus-inline: no workers, the owner frees inline) is the limit and is not ranked.
  quality       peak of outstanding blocks (allocated, not yet back on the free list) at step ends, over the theoretical
                instant-free peak: median and worst over the sampled traces (unpaced: the discarded first traces of
                every block; paced: every trace). mean live: outstanding blocks at step ends, mean.
  bytes/trace   heap bytes allocated per timed trace (runtime/metrics, counted per block).
  gates         every trace: allocated = freed = blocks per trace; after every trace: remote frees submitted = drained,
                queues empty, nothing rejected, live blocks as expected. A cell that fails is INVALID, never ranked, and
                the command exits non-zero.
  touch         every contender writes the same bytes right after allocating, on the owner: byte = 1 byte at offset 0;
                churn-touch writes all 4096 bytes. go-heap's make also zeroes every block.`
