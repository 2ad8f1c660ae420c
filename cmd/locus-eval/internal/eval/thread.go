package eval

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/locus-go/locus/bench"
)

// The design-thread replay: experiments 0351–0359 of the LOCUS record as
// named configurations of bench's harnesses, each with the record's
// prediction, numeric bar and Rust figures, measured here with the same
// interleaved method as the scoreboard, and judged on the intervals.

// ThreadSchema identifies the thread replay's JSON document (version
// SchemaVersion).
const ThreadSchema = "locus-eval/thread"

// Verdicts of a replayed experiment.
const (
	// Confirmed: the bar holds over the whole interval.
	Confirmed = "confirmed"
	// Falsified: the bar fails over the whole interval.
	Falsified = "falsified"
	// Inconclusive: the interval straddles the bar.
	Inconclusive = "inconclusive"
	// Invalid: a configuration the bar needs failed its gates.
	Invalid = "invalid"
)

var (
	cycleConfigs = map[string]bench.CycleConfig{}
	reuseConfigs = map[string]bench.ReuseConfig{}
)

func cycleName(c bench.CycleConfig) string {
	cycleConfigs[c.String()] = c
	return c.String()
}

func reuseName(c bench.ReuseConfig) string {
	reuseConfigs[c.String()] = c
	return c.String()
}

func shared(p, b int) string {
	return cycleName(bench.CycleConfig{Transport: "shared", Producers: p, Batch: b})
}
func sharded(p int) string { return cycleName(bench.CycleConfig{Transport: "sharded", Producers: p}) }
func shardedChunk(p int) string {
	return cycleName(bench.CycleConfig{Transport: "sharded-chunk", Producers: p})
}
func reuse(b, p string, t bool) string {
	return reuseName(bench.ReuseConfig{Backing: b, Policy: p, Touch: t})
}

// member is one configuration an experiment needs: its harness and name.
type member struct{ harness, name string }

func trace(c string) member { return member{"trace", c} }
func cyc(c string) member   { return member{"cycle", c} }
func reu(c string) member   { return member{"reuse", c} }

// threadCtx gives an experiment the boards of the measured groups.
type threadCtx struct{ boards map[string]*WorkloadBoard }

// ratio returns a's time over b's, or ok false when either is invalid or
// missing.
func (x *threadCtx) ratio(a, b member) (Interval, bool) {
	if a.harness != b.harness {
		return Interval{}, false
	}
	wb := x.boards[a.harness]
	if wb == nil {
		return Interval{}, false
	}
	return wb.Ratio(a.name, b.name)
}

// us returns the median µs per trace of m, or "INVALID".
func (x *threadCtx) us(m member) string {
	if wb := x.boards[m.harness]; wb != nil {
		if c := wb.Cell(m.name); c != nil && c.GatesOK {
			return fmtUS(c.USPerTrace)
		}
	}
	return "INVALID"
}

// atLeast judges "x >= bar" on an interval.
func atLeast(iv Interval, ok bool, bar float64) string {
	switch {
	case !ok:
		return Invalid
	case iv.Lo >= bar:
		return Confirmed
	case iv.Hi < bar:
		return Falsified
	}
	return Inconclusive
}

// atMost judges "x <= bar" on an interval.
func atMost(iv Interval, ok bool, bar float64) string {
	switch {
	case !ok:
		return Invalid
	case iv.Hi <= bar:
		return Confirmed
	case iv.Lo > bar:
		return Falsified
	}
	return Inconclusive
}

// within judges "1/bar <= x <= bar" on an interval.
func within(iv Interval, ok bool, bar float64) string {
	switch {
	case !ok:
		return Invalid
	case iv.Lo >= 1/bar && iv.Hi <= bar:
		return Confirmed
	case iv.Lo > bar || iv.Hi < 1/bar:
		return Falsified
	}
	return Inconclusive
}

// worst combines verdicts: invalid, then falsified, then inconclusive.
func worst(vs ...string) string {
	rank := map[string]int{Confirmed: 0, Inconclusive: 1, Falsified: 2, Invalid: 3}
	w := Confirmed
	for _, v := range vs {
		if rank[v] > rank[w] {
			w = v
		}
	}
	return w
}

func fx(iv Interval, ok bool) string {
	if !ok {
		return "INVALID"
	}
	return fmtX(iv.Point) + "× " + fmtIv(iv)
}

type experiment struct {
	id, title, prediction, bar, rust, rustVerdict string
	needs                                         []member
	judge                                         func(x *threadCtx) (figures, verdict string)
}

var goPeers = func() []string {
	var ns []string
	for _, e := range bench.Contenders() {
		if e.Group == bench.GroupGo {
			ns = append(ns, e.Name)
		}
	}
	return ns
}()

var experiments = []experiment{
	{id: "0351", title: "shared queue under concurrent producers (commanded cycles, p × batch)",
		prediction:  "with the owner draining while producers enqueue, the batch limit stops mattering; producer count dominates",
		bar:         "every batch pair b ∈ {8,64,256} within 1.10× of each other at every p, and shared p4 / p1 (batch 64) above 1.10",
		rust:        "run 2 µs: p1 5.27/7.09/5.32, p2 9.54/14.08/9.67, p4 23.49/21.21/21.10 (b8/b64/b256)",
		rustVerdict: "survives: batch 8 ≈ 256; producer count dominates",
		needs: []member{cyc(shared(1, 8)), cyc(shared(1, 64)), cyc(shared(1, 256)), cyc(shared(2, 8)), cyc(shared(2, 64)),
			cyc(shared(2, 256)), cyc(shared(4, 8)), cyc(shared(4, 64)), cyc(shared(4, 256))},
		judge: func(x *threadCtx) (string, string) {
			var b strings.Builder
			var vs []string
			for _, p := range []int{1, 2, 4} {
				fmt.Fprintf(&b, "p%d %s/%s/%s µs", p, x.us(cyc(shared(p, 8))), x.us(cyc(shared(p, 64))), x.us(cyc(shared(p, 256))))
				batches := []int{8, 64, 256}
				far := ""
				for i := range batches {
					for j := i + 1; j < len(batches); j++ {
						iv, ok := x.ratio(cyc(shared(p, batches[i])), cyc(shared(p, batches[j])))
						v := within(iv, ok, 1.10)
						vs = append(vs, v)
						if v != Confirmed {
							far += fmt.Sprintf(" b%d/b%d %s", batches[i], batches[j], fx(iv, ok))
						}
					}
				}
				if far != "" {
					fmt.Fprintf(&b, " (%s)", strings.TrimSpace(far))
				}
				b.WriteString("; ")
			}
			iv, ok := x.ratio(cyc(shared(4, 64)), cyc(shared(1, 64)))
			vs = append(vs, atLeast(iv, ok, 1.10))
			fmt.Fprintf(&b, "p4/p1 %s", fx(iv, ok))
			return b.String(), worst(vs...)
		}},
	{id: "0352", title: "sharded per-producer queues vs one shared queue (commanded cycles, batch 64)",
		prediction:  "one queue per producer recovers most of the p4 penalty, landing near shared p2",
		bar:         "shared p4 / sharded p4 ≥ 1.5",
		rust:        "shared p2 9.93/9.81, sharded p2 9.29/9.24, shared p4 20.93/20.63, sharded p4 12.81/12.77 µs (p4: 1.63×)",
		rustVerdict: "direction survives, magnitude fails (1.63× but far above p1)",
		needs:       []member{cyc(shared(2, 64)), cyc(sharded(2)), cyc(shared(4, 64)), cyc(sharded(4))},
		judge: func(x *threadCtx) (string, string) {
			r2, ok2 := x.ratio(cyc(shared(2, 64)), cyc(sharded(2)))
			r4, ok4 := x.ratio(cyc(shared(4, 64)), cyc(sharded(4)))
			return fmt.Sprintf("shared p2 %s, sharded p2 %s µs (%s); shared p4 %s, sharded p4 %s µs (%s)",
				x.us(cyc(shared(2, 64))), x.us(cyc(sharded(2))), fx(r2, ok2),
				x.us(cyc(shared(4, 64))), x.us(cyc(sharded(4))), fx(r4, ok4)), atLeast(r4, ok4, 1.5)
		}},
	{id: "0353", title: "chunk publish vs per-handle sharded queues (commanded cycles)",
		prediction:  "one send per producer per cycle pushes p4 below 10 µs (from 12.8)",
		bar:         "per-handle p4 / chunk p4 ≥ 1.28 (the record's 12.8 → 10 µs)",
		rust:        "per_handle p2 9.30/9.19, chunk p2 7.33/7.46, per_handle p4 12.86/13.37, chunk p4 10.81/10.80 µs",
		rustVerdict: "direction survives, magnitude fails (p4 ≈ 10.8 µs)",
		needs:       []member{cyc(sharded(2)), cyc(shardedChunk(2)), cyc(sharded(4)), cyc(shardedChunk(4))},
		judge: func(x *threadCtx) (string, string) {
			r2, ok2 := x.ratio(cyc(sharded(2)), cyc(shardedChunk(2)))
			r4, ok4 := x.ratio(cyc(sharded(4)), cyc(shardedChunk(4)))
			return fmt.Sprintf("per-handle p2 %s, chunk p2 %s µs (%s); per-handle p4 %s, chunk p4 %s µs (%s)",
				x.us(cyc(sharded(2))), x.us(cyc(shardedChunk(2))), fx(r2, ok2),
				x.us(cyc(sharded(4))), x.us(cyc(shardedChunk(4))), fx(r4, ok4)), atLeast(r4, ok4, 1.28)
		}},
	{id: "0354", title: "sharded chunk vs shared per-handle under the mixed-lifetime trace (steady-decode)",
		prediction:  "the commanded-cycle win of sharding + chunk publish survives continuous staggered frees",
		bar:         "locus-shared / locus-sharded-chunk ≥ 1.10",
		rust:        "shared_per_handle 282.09/283.23, sharded_chunk 80.18/81.15 µs (3.5×)",
		rustVerdict: "survives by far more than predicted (3.5×)",
		needs:       []member{trace("locus-shared"), trace("locus-sharded-chunk")},
		judge: func(x *threadCtx) (string, string) {
			r, ok := x.ratio(trace("locus-shared"), trace("locus-sharded-chunk"))
			return fmt.Sprintf("locus-shared %s, locus-sharded-chunk %s µs (%s)",
				x.us(trace("locus-shared")), x.us(trace("locus-sharded-chunk")), fx(r, ok)), atLeast(r, ok, 1.10)
		}},
	{id: "0355", title: "locus against what a Go user would use, same trace (steady-decode)",
		prediction:  "locus first; the closest peer 1.2–2× behind; falsified if any peer reaches the locus time",
		bar:         "fastest Go peer / locus-sharded-chunk (the 0355 locus path) > 1",
		rust:        "jemalloc 230.05/233.44, mimalloc 201.56/198.26, system 261.60/228.61 vs sharded_chunk 80.18/81.15 µs",
		rustVerdict: "survives with the predicted order and a larger gap",
		needs: func() []member {
			ms := []member{trace("locus-sharded-chunk"), trace("locus-mailbox")}
			for _, n := range goPeers {
				ms = append(ms, trace(n))
			}
			return ms
		}(),
		judge: func(x *threadCtx) (string, string) {
			// The fastest peer is the one with the lowest ratio to the locus path.
			var best string
			var r Interval
			ok := false
			for _, n := range goPeers {
				if iv, okn := x.ratio(trace(n), trace("locus-sharded-chunk")); okn && (!ok || iv.Point < r.Point) {
					best, r, ok = n, iv, true
				}
			}
			if !ok {
				return "no valid Go peer", Invalid
			}
			rm, okm := x.ratio(trace(best), trace("locus-mailbox"))
			return fmt.Sprintf("fastest Go peer %s %s µs: %s locus-sharded-chunk (%s µs), %s locus-mailbox (%s µs)",
					best, x.us(trace(best)), fx(r, ok), x.us(trace("locus-sharded-chunk")), fx(rm, okm), x.us(trace("locus-mailbox"))),
				atLeast(r, ok, 1+1e-9)
		}},
	{id: "0356", title: "chunk-preserving recycling: prefill served by AllocChunk (steady-decode)",
		prediction:  "keeping request-chunk identity cuts the 80 µs trace below 60 µs",
		bar:         "locus-mailbox / locus-allocchunk ≥ 1.33 (80 → 60)",
		rust:        "sharded_chunk_pool 90.46/88.18 vs sharded_chunk (with change) 93.23/88.34 µs; unmodified control 78.3–80.4",
		rustVerdict: "falsified, reverted",
		needs:       []member{trace("locus-mailbox"), trace("locus-allocchunk")},
		judge: func(x *threadCtx) (string, string) {
			r, ok := x.ratio(trace("locus-mailbox"), trace("locus-allocchunk"))
			return fmt.Sprintf("locus-mailbox %s, locus-allocchunk %s µs (%s)",
				x.us(trace("locus-mailbox")), x.us(trace("locus-allocchunk")), fx(r, ok)), atLeast(r, ok, 1.33)
		}},
	{id: "0357", title: "Treiber mailboxes vs bounded chunk queues (steady-decode)",
		prediction:  "replacing each worker's bounded list-queue by a mailbox cuts the trace ≥ 10 %",
		bar:         "locus-sharded-chunk / locus-mailbox ≥ 1.10",
		rust:        "sharded_chunk 73.69/78.24, sharded_mailbox 69.01/72.12 µs (6–8 %)",
		rustVerdict: "direction survives, 10 % bar missed; adopted for zero tuning",
		needs:       []member{trace("locus-sharded-chunk"), trace("locus-mailbox")},
		judge: func(x *threadCtx) (string, string) {
			r, ok := x.ratio(trace("locus-sharded-chunk"), trace("locus-mailbox"))
			return fmt.Sprintf("locus-sharded-chunk %s, locus-mailbox %s µs (%s)",
				x.us(trace("locus-sharded-chunk")), x.us(trace("locus-mailbox")), fx(r, ok)), atLeast(r, ok, 1.10)
		}},
	{id: "0358", title: "LIFO vs FIFO reuse with written blocks (harness R, heap)",
		prediction:  "once blocks are written, LIFO is ≥ 10 % faster than FIFO; untouched controls stay order-neutral",
		bar:         "fifo touch4k / lifo touch4k ≥ 1.10, and the notouch controls within 1.10× of each other",
		rust:        "lifo touch 92.23/82.80, fifo touch 102.53/101.10, lifo notouch 4.29/4.36, fifo notouch 4.58/4.84 µs",
		rustVerdict: "survives (11–18 %) with a control caveat; did not robustly reproduce in 0359's runs",
		needs: []member{reu(reuse("heap", "lifo", true)), reu(reuse("heap", "fifo", true)),
			reu(reuse("heap", "lifo", false)), reu(reuse("heap", "fifo", false))},
		judge: func(x *threadCtx) (string, string) {
			lt, ft := reu(reuse("heap", "lifo", true)), reu(reuse("heap", "fifo", true))
			ln, fn := reu(reuse("heap", "lifo", false)), reu(reuse("heap", "fifo", false))
			rt, okt := x.ratio(ft, lt)
			rn, okn := x.ratio(fn, ln)
			return fmt.Sprintf("touch4k lifo %s, fifo %s µs (%s); notouch lifo %s, fifo %s µs (%s)",
				x.us(lt), x.us(ft), fx(rt, okt), x.us(ln), x.us(fn), fx(rn, okn)), worst(atLeast(rt, okt, 1.10), within(rn, okn, 1.10))
		}},
	{id: "0359", title: "mapped-region pool vs heap blocks on the reuse loop (harness R, LIFO)",
		prediction:  "one contiguous anonymous mapping adds no cost to the written-block churn loop",
		bar:         "mapped / heap ≤ 1.05 with touch4k and with notouch",
		rust:        "touch heap 93.23/86.56/91.37, mapped 123.95/85.38/83.48; notouch heap 4.38/4.36, mapped 4.38/4.34 µs",
		rustVerdict: "split: no hot-path cost survives (run 1 an outlier); bind half fails on that host",
		needs: []member{reu(reuse("heap", "lifo", true)), reu(reuse("mmap", "lifo", true)),
			reu(reuse("heap", "lifo", false)), reu(reuse("mmap", "lifo", false))},
		judge: func(x *threadCtx) (string, string) {
			ht, mt := reu(reuse("heap", "lifo", true)), reu(reuse("mmap", "lifo", true))
			hn, mn := reu(reuse("heap", "lifo", false)), reu(reuse("mmap", "lifo", false))
			rt, okt := x.ratio(mt, ht)
			rn, okn := x.ratio(mn, hn)
			return fmt.Sprintf("touch4k heap %s, mapped %s µs (%s); notouch heap %s, mapped %s µs (%s)",
				x.us(ht), x.us(mt), fx(rt, okt), x.us(hn), x.us(mn), fx(rn, okn)), worst(atMost(rt, okt, 1.05), atMost(rn, okn, 1.05))
		}},
}

// ExperimentIDs returns the replayable experiment ids, in order.
func ExperimentIDs() []string {
	var ids []string
	for _, e := range experiments {
		ids = append(ids, e.id)
	}
	return ids
}

// ThreadOptions configures a design-thread replay.
type ThreadOptions struct {
	// IDs selects experiments (nil: all).
	IDs []string
	// Runs is the number of measuring processes (MinRuns to MaxRuns).
	Runs  int
	Quick bool
	// Touch is the touch of the trace configurations.
	Touch    bench.TouchMode
	Progress func(Progress)
}

// Check validates o before any work: MinRuns to MaxRuns processes, and
// known experiments, each named once.
func (o *ThreadOptions) Check() error {
	var errs []error
	if err := checkRuns(o.Runs); err != nil {
		errs = append(errs, err)
	}
	for i, id := range o.IDs {
		switch {
		case !slices.ContainsFunc(experiments, func(e experiment) bool { return e.id == id }):
			errs = append(errs, fmt.Errorf("%w: unknown experiment %q (have %s)", ErrConfig, id, strings.Join(ExperimentIDs(), ", ")))
		case slices.Index(o.IDs, id) < i:
			errs = append(errs, fmt.Errorf("%w: experiment %s named twice", ErrConfig, id))
		}
	}
	return errors.Join(errs...)
}

// Thread is the design-thread replay's JSON document.
type Thread struct {
	Schema        string      `json:"schema"`
	SchemaVersion int         `json:"schema_version"`
	Created       time.Time   `json:"created"`
	Runs          int         `json:"runs"`
	Quick         bool        `json:"quick"`
	Touch         string      `json:"touch"`
	Machine       Machine     `json:"machine"`
	Revision      Revision    `json:"revision"`
	Method        Method      `json:"method"`
	Ledger        []LedgerRow `json:"ledger"`
	// Boards are the measured groups: "cycle", "reuse" and "trace"
	// (steady-decode).
	Boards      []WorkloadBoard `json:"boards"`
	GatesOK     bool            `json:"gates_ok"`
	WallSeconds float64         `json:"wall_seconds"`
}

// LedgerRow is one replayed experiment.
type LedgerRow struct {
	ID          string `json:"id"`
	Title       string `json:"title"`
	Prediction  string `json:"prediction"`
	Bar         string `json:"bar"`
	Rust        string `json:"rust"`
	RustVerdict string `json:"rust_verdict"`
	Go          string `json:"go"`
	Verdict     string `json:"verdict"`
}

// threadShapes cut each harness into blocks (timed traces, discarded
// traces, rounds): a block is 0.1–1 ms.
var threadShapes = map[string]blockShape{
	"cycle": {32, 2, 40},
	"reuse": {8, 1, 40},
	"trace": {6, 1, 40},
}

// RunThread replays the selected experiments; configurations that several
// experiments share are measured once.
func RunThread(o ThreadOptions) (*Thread, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	var exps []experiment
	for _, id := range o.IDs {
		exps = append(exps, experiments[slices.IndexFunc(experiments, func(e experiment) bool { return e.id == id })])
	}
	if len(exps) == 0 {
		exps = experiments
	}
	start := time.Now()
	members := map[string][]string{}
	for _, e := range exps {
		for _, m := range e.needs {
			if !slices.Contains(members[m.harness], m.name) {
				members[m.harness] = append(members[m.harness], m.name)
			}
		}
	}
	warm, alloc := bench.DefaultWarmup, DefaultAllocTraces
	if o.Quick {
		warm, alloc = 1, 1
	}
	var groups []GroupSpec
	for _, h := range []string{"cycle", "trace", "reuse"} {
		if len(members[h]) == 0 {
			continue
		}
		s := threadShapes[h]
		if o.Quick {
			s = quickShape
		}
		g := GroupSpec{ID: h, Harness: h, Members: members[h], Rounds: s.rounds, Traces: s.traces, Discard: s.discard,
			Warmup: warm, AllocTraces: alloc}
		if h == "trace" {
			g.Workload, g.Touch = bench.SteadyDecode.Name, o.Touch.String()
		}
		groups = append(groups, g)
	}
	specs := repeat(groups, o.Runs)
	data, err := runProcesses(specs, newTracker(specs, o.Progress).update)
	if err != nil {
		return nil, err
	}
	t := &Thread{Schema: ThreadSchema, SchemaVersion: SchemaVersion, Created: time.Now().UTC(), Runs: o.Runs, Quick: o.Quick,
		Touch: o.Touch.String(), Machine: ThisMachine(), Revision: ThisRevision(), Method: method, GatesOK: true}
	x := &threadCtx{boards: map[string]*WorkloadBoard{}}
	for gi, g := range groups {
		var gd []GroupData
		for _, d := range data {
			gd = append(gd, d.Groups[gi])
		}
		t.Boards = append(t.Boards, buildWorkload(g, gd))
	}
	for i := range t.Boards {
		x.boards[groups[i].Harness] = &t.Boards[i]
		for _, c := range t.Boards[i].Cells {
			t.GatesOK = t.GatesOK && c.GatesOK
		}
	}
	for _, e := range exps {
		figs, v := e.judge(x)
		t.Ledger = append(t.Ledger, LedgerRow{ID: e.id, Title: e.title, Prediction: e.prediction, Bar: e.bar,
			Rust: e.rust, RustVerdict: e.rustVerdict, Go: figs, Verdict: v})
	}
	t.WallSeconds = time.Since(start).Seconds()
	return t, nil
}

// WriteLedger writes the replay as text.
func WriteLedger(w io.Writer, t *Thread) {
	fmt.Fprintf(w, "Design thread 0351–0359 replayed — %s\n", t.Machine)
	fmt.Fprintf(w, "%s; %s; trace touch %s; %s", revString(t.Revision), plural(t.Runs, "process"), t.Touch,
		time.Duration(t.WallSeconds*1e9).Round(time.Second))
	if t.Quick {
		fmt.Fprint(w, "; QUICK (smoke test: the figures mean nothing)")
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Rust: the record's per-run figures (Apple Silicon, Criterion). Go: median µs per cycle or trace here, and")
	fmt.Fprintln(w, "ratios of times with 99 % intervals, measured interleaved as on the scoreboard.")
	for _, r := range t.Ledger {
		fmt.Fprintf(w, "\n%s  %s\n", r.ID, r.Title)
		fmt.Fprintf(w, "  prediction  %s\n", r.Prediction)
		fmt.Fprintf(w, "  bar         %s\n", r.Bar)
		fmt.Fprintf(w, "  Rust        %s\n", r.Rust)
		fmt.Fprintf(w, "              record: %s\n", r.RustVerdict)
		fmt.Fprintf(w, "  Go (now)    %s\n", r.Go)
		fmt.Fprintf(w, "  verdict     %s\n", strings.ToUpper(r.Verdict))
	}
	for _, b := range t.Boards {
		for _, c := range b.Cells {
			if !c.GatesOK {
				fmt.Fprintf(w, "\nINVALID %s/%s: %s", b.Workload, c.Contender, strings.Join(c.GateErrors, "; "))
			}
		}
	}
	fmt.Fprintln(w, "\nVerdicts: confirmed = the bar holds over the whole 99 % interval; falsified = it fails over the whole")
	fmt.Fprintln(w, "interval; inconclusive = the interval straddles the bar; invalid = a configuration failed its gates.")
}
