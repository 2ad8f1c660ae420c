package eval

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/locus-go/locus/bench"
)

// WriteMarkdown writes BENCHMARKS.md: the first scoreboard in full, every
// further scoreboard (another machine, another GOMAXPROCS) as a section of
// its own, the thread replay's ledger when given, every scaling run's
// "many cores" section, then how the figures are made and the JSON schema.
func WriteMarkdown(w io.Writer, sbs []*Scoreboard, t *Thread, scales []*Scale, command string) error {
	if len(sbs) == 0 {
		return fmt.Errorf("%w: no scoreboard run given", ErrConfig)
	}
	main := sbs[0]
	fmt.Fprintf(w, "# Benchmarks: the %s scoreboard\n\n", main.Suite)
	fmt.Fprintf(w, "Generated from recorded runs by `%s`; do not edit by hand. Every figure below is a ratio of times\n", command)
	fmt.Fprintln(w, "measured side by side, with its 99 % interval; a ratio whose interval contains 1 is a tie. How the runs")
	fmt.Fprintln(w, "are measured, and the JSON they are recorded in, are described at the end.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "```sh")
	fmt.Fprintln(w, "go run ./cmd/locus-eval -json > run.json        # the scoreboard (under 4 minutes on 2 cores)")
	fmt.Fprintln(w, "go run ./cmd/locus-eval thread -json > thread.json")
	fmt.Fprintln(w, "go run ./cmd/locus-eval report run.json thread.json > BENCHMARKS.md")
	fmt.Fprintln(w, "```")
	writeRunHeader(w, main)
	writeTargetsMD(w, main.Targets)
	writeBoardsMD(w, main, "##")
	for _, sb := range sbs[1:] {
		fmt.Fprintf(w, "\n## Another machine: %s\n", sb.Machine)
		writeRunHeader(w, sb)
		writeTargetsMD(w, sb.Targets)
		writeBoardsMD(w, sb, "###")
	}
	if t != nil {
		writeThreadMD(w, t)
	}
	for _, sc := range scales {
		WriteScaleMarkdown(w, sc)
	}
	fmt.Fprint(w, methodMD)
	fmt.Fprint(w, schemaMD)
	return nil
}

func writeRunHeader(w io.Writer, sb *Scoreboard) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| run | |")
	fmt.Fprintln(w, "|---|---|")
	fmt.Fprintf(w, "| machine | %s |\n", sb.Machine)
	if d := sb.Machine.Details(); d != "" {
		fmt.Fprintf(w, "| host | %s |\n", d)
	}
	fmt.Fprintf(w, "| date | %s |\n", sb.Created.UTC().Format("2006-01-02 15:04 UTC"))
	rev := sb.Revision.VCS
	if sb.Revision.Modified {
		rev += " (with uncommitted changes)"
	}
	fmt.Fprintf(w, "| revision | %s `%s` |\n", sb.Revision.Module, rev)
	cfg := fmt.Sprintf("%s, touch %s", plural(sb.Config.Runs, "process"), sb.Config.Touch)
	if sb.Config.PaceUS > 0 {
		cfg += fmt.Sprintf(", paced pass at %g µs", sb.Config.PaceUS)
	}
	if sb.Config.Quick {
		cfg += ", QUICK (a smoke test: the figures mean nothing)"
	}
	fmt.Fprintf(w, "| configuration | %s |\n", cfg)
	var shapes []string
	for _, g := range sb.Config.Groups {
		shapes = append(shapes, fmt.Sprintf("%s %d × (%d + %d)", g.ID, g.Rounds, g.Discard, g.Traces))
	}
	fmt.Fprintf(w, "| rounds × (discarded + timed traces) per block, per process | %s |\n", strings.Join(shapes, ", "))
	fmt.Fprintf(w, "| wall time | %s |\n", time.Duration(sb.WallSeconds*1e9).Round(time.Second))
	gates := "every cell passed its proof gates"
	if !sb.GatesOK {
		gates = "**some cells FAILED their proof gates** (marked INVALID)"
	}
	fmt.Fprintf(w, "| gates | %s |\n", gates)
}

func writeTargetsMD(w io.Writer, ts []Target) {
	fmt.Fprintln(w, "\n### Targets")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Met: the whole interval is within the bound; missed: the whole interval is beyond it; undecided: it")
	fmt.Fprintln(w, "straddles the bound. A missed target is reported, not a failure.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| status | target | want | got |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, t := range ts {
		fmt.Fprintf(w, "| %s | %s | ≤ %g%s | %s |\n", t.Status, t.Name, t.Want.Value, t.Want.Unit, targetGot(t))
	}
}

func writeBoardsMD(w io.Writer, sb *Scoreboard, h string) {
	for _, p := range sb.Passes {
		paced := p.Name == "paced"
		if paced {
			fmt.Fprintf(w, "\n%s Paced: %g µs of simulated compute after every step\n\n", h, p.PaceUS)
			fmt.Fprintln(w, "The owner spins for the pace after every step while the workers free; the time column is what the")
			fmt.Fprintln(w, "owner spends per step outside the spin (pool operations, dispatch, drains, the end-of-trace wait);")
			fmt.Fprintln(w, "mean live is the mean of outstanding blocks at step ends: the memory a serving engine holds.")
		} else {
			fmt.Fprintf(w, "\n%s Unpaced: the v1 traces, steps back to back\n", h)
		}
		for i := range p.Workloads {
			wb := &p.Workloads[i]
			fmt.Fprintf(w, "\n%s# %s\n\n", h, wb.Workload)
			fmt.Fprintf(w, "%d blocks per trace, %d steps, theoretical peak %d blocks.\n\n", wb.BlocksPerTrace, wb.Steps, wb.TheoreticalPeak)
			if wb.Verdict != "" {
				fmt.Fprintf(w, "%s\n\n", wb.Verdict)
			}
			head, rows, numeric := boardTable(wb, paced)
			fmt.Fprintf(w, "| %s |\n|", strings.Join(head, " | "))
			for _, n := range numeric {
				if n {
					fmt.Fprint(w, "---:|")
				} else {
					fmt.Fprint(w, "---|")
				}
			}
			fmt.Fprintln(w)
			for _, r := range rows {
				fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
			}
		}
	}
}

func writeThreadMD(w io.Writer, t *Thread) {
	fmt.Fprintln(w, "\n## The design thread replayed (experiments 0351–0359)")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Measured %s on %s, %s, revision `%s`. Rust: the record's per-run figures (Apple Silicon,\n",
		t.Created.UTC().Format("2006-01-02"), t.Machine, plural(t.Runs, "process"), t.Revision.VCS)
	fmt.Fprintln(w, "Criterion). Go: median µs per cycle or trace, and ratios of times with 99 % intervals measured")
	fmt.Fprintln(w, "interleaved, as on the scoreboard. Confirmed: the bar holds over the whole interval; falsified: it")
	fmt.Fprintln(w, "fails over the whole interval; inconclusive: the interval straddles the bar.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| id | experiment | bar | Rust (record) | Go (here) | verdict |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, r := range t.Ledger {
		fmt.Fprintf(w, "| %s | %s | %s | %s; %s | %s | %s |\n", r.ID, r.Title, r.Bar, r.Rust, r.RustVerdict, r.Go, r.Verdict)
	}
}

var methodMD = `
## How the figures are made

- **Interleaving.** For each workload, every contender is opened in one process. A round visits the
  contenders in a fresh random order and times one block of each: one untimed trace (sampled for the
  quality figures), then a few timed traces (the run table lists how many); the block's value is the
  mean owner time of its timed traces. A round lasts
  tens of milliseconds, so the host's slow drifts (this development VM has two speed modes about
  1.45× apart that persist for about 100 ms) hit every contender of a round alike.
- **Processes.** The whole is repeated in several processes (` + "`-runs`" + `, ` + itoa(DefaultRuns) + ` by default, at least ` + itoa(MinRuns) + `), one after
  another; each opens its contenders in a different order, so memory layout differs between them.
- **Ratio.** Per process, the median over its rounds of the contender's block time over the other's
  block time in the same round; over processes, the geometric mean of those medians. The 99 %
  interval is Student's t on the logarithms of the per-process medians, with processes − 1 degrees
  of freedom: the processes are the units, because their layout and their moment differ, and that
  (more than the noise between rounds) decides where another run lands. A rank or a
  faster/slower verdict is claimed only when the interval excludes 1; ranks count the contenders
  that are faster with a pairwise interval that excludes 1, so ties share a rank.
- **Owner time.** From the first drain of a trace to the end of its end-of-trace barrier (every
  contender waits once, until every dispatched list is freed, then drains once). Paced: the pace
  spins are subtracted. The µs columns are each contender's own median over all its blocks; the
  ratio pairs blocks of the same round, which cancels the host's speed swings, so compare
  contenders by the ratio, not by the quotient of two µs figures.
- **Quality.** The peak of outstanding blocks (allocated, not yet back on the free list) at step
  ends, over the theoretical instant-free peak; median and worst over the sampled traces.
- **Allocation.** After the rounds, every contender runs 4 more traces with the collector off,
  bracketed by runtime.ReadMemStats: heap bytes per trace in steady state.
- **Gates.** Every trace: allocated = freed = blocks per trace; after every trace: remote frees
  submitted = drained, queues empty, nothing rejected, live blocks as expected. A cell that fails
  is INVALID, never ranked, and the command exits with status 1. Performance targets never change
  the exit status.
- **Stability.` + "`locus-eval compare a.json b.json`" + ` checks two runs against each other: every ratio interval
  of one overlaps the other's, and every pair of contenders that both runs separate is ordered the
  same way.

## Adding a run from another machine

Record the scoreboard there (for example at several GOMAXPROCS settings:
` + "`GOMAXPROCS=8 go run ./cmd/locus-eval -json > run-8.json`" + `) and pass the files after this machine's
run: ` + "`go run ./cmd/locus-eval report run.json run-8.json thread.json > BENCHMARKS.md`" + `. Each further
scoreboard becomes a section of its own, headed by its machine; nothing else depends on it.
`

// schemaMD documents the JSON documents; ~ stands for a backquote, which a
// raw string cannot hold. It must name every field the documents hold
// (TestSchemaDocumented checks it against the types).
var schemaMD = strings.NewReplacer("~", "`").Replace(`
## The JSON document (schema ~` + Schema + `~, version ` + itoa(SchemaVersion) + `)

~locus-eval -json~ writes one object. Every field below is always present (a list with nothing in
it is ~[]~, never null or absent), and nothing else is: ~report~ and ~compare~ refuse a document with
another field, a field of the wrong type, or content a run cannot have written.

| field | meaning |
|---|---|
| ~schema~, ~schema_version~ | "` + Schema + `", ` + itoa(SchemaVersion) + ` |
| ~suite~ | "` + bench.Suite + `" |
| ~created~ | RFC 3339 time of the run, UTC |
| ~config~ | ~runs~ (processes, ` + itoa(MinRuns) + ` to ` + itoa(MaxRuns) + `), ~quick~, ~touch~ ("byte", "full" or "none"), ~unpaced~, ~pace_us~ (0: no paced pass; at most ` + itoa(int(us(MaxPace))) + `), ~groups[]~ |
| ~config.groups[]~ | one per pass and workload: ~id~ ("pass/workload", e.g. "unpaced/steady-decode"), ~rounds~, ~traces_per_block~, ~discarded_per_block~, ~warmup_traces~ |
| ~machine~ | ~cpu_model~, ~num_cpu~, ~gomaxprocs~, ~go_version~, ~goos~, ~goarch~, ~gogc~ ("": the default), ~cpu~ (~vendor~, ~family~, ~model~, ~stepping~, ~microarch~ ("": not known), ~l2_kib~, ~l3_kib~), ~cores~, ~numa_nodes~ (0: not told), ~hypervisor~ ("": none told; "yes": present, unnamed), ~kernel~ |
| ~revision~ | ~module~, ~vcs_revision~ (a commit, a module version, or "unknown"), ~vcs_modified~ |
| ~method~ | the statistics in words: ~timing~, ~ratio~, ~interval~, ~quality~; and ~confidence~ (0.99) |
| ~passes[]~ | ~name~ ("unpaced" or "paced", each at most once), ~pace_us~, ~workloads[]~ |
| ~passes[].workloads[]~ | ~workload~, ~blocks_per_trace~, ~theoretical_peak~, ~steps~, ~verdict~ (the one-line summary), ~seconds[]~ (one per process), ~cells[]~, ~raw~ |
| ~cells[]~ | ~contender~ (locus-mailbox, the baseline, always among them), ~group~ ("locus" or "go"), ~floor~ (the reference floor, never ranked), ~checked~ (rejects stale, double and foreign frees), ~gates_ok~, ~gate_errors[]~ (one per failing process; ~[]~ when the gates held), ~us_per_trace~, ~us_per_step~, ~ratio~ ({point, lo, hi}: this contender's time over the baseline's, 0 < lo <= point <= hi), ~verdict~ ("baseline", "faster", "slower", "tie"; "n/a" when this cell or the baseline failed its gates, with ratio {0, 0, 0}), ~rank~ (1 and up; 0: not ranked, the floor and invalid cells), ~quality~ ({median, worst}), ~mean_live~, ~bytes_per_trace~, ~allocs_per_trace~, ~gc_per_trace~, ~blocks~, ~traces~ |
| ~raw~ | ~members[]~ (the cells' contenders, in order) and ~blocks_us[process][member][round]~: every block's mean owner µs per trace, from which every ratio can be recomputed |
| ~targets[]~ | ~name~, ~pass~ and ~workload~ ("" for a target over all of them), ~want~ ({op, value, unit}: op "<=", unit "×" or "B"), ~got~ ({point, lo, hi}), ~status~ ("met", "missed", "undecided", "n/a"), ~met~, ~detail~ (what ~got~ is about, e.g. the worst cell; "" when nothing needs saying) |
| ~gates_ok~, ~wall_seconds~ | every gate held; the run's wall time |

~locus-eval thread -json~ writes schema "` + ThreadSchema + `" (version ` + itoa(SchemaVersion) + `), with the same rules: ~schema~,
~schema_version~, ~created~, ~runs~, ~quick~, ~touch~, ~machine~, ~revision~, ~method~, ~ledger[]~ (~id~, ~title~,
~prediction~, ~bar~, ~rust~, ~rust_verdict~, ~go~, ~verdict~: "confirmed", "falsified", "inconclusive" or
"invalid"), ~boards[]~ (the measured groups "cycle", "steady-decode" and "reuse", shaped like the
scoreboard's workloads but without a baseline: every verdict is "n/a" and every ratio {0, 0, 0}),
~gates_ok~ and ~wall_seconds~.
`)
