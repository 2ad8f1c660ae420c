package eval

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// synthetic returns a steady-decode board of the contenders of factors
// measured by "processes" whose block times are scaled by the given factors (per process and round:
// base × factor × a little deterministic wobble).
func synthetic(factors map[string]float64, processes, rounds int, shift float64) WorkloadBoard {
	return syntheticFailing(factors, processes, rounds, shift, "")
}

// syntheticFailing is synthetic with the contender fail failing its gates
// in the last process ("": none).
func syntheticFailing(factors map[string]float64, processes, rounds int, shift float64, fail string) WorkloadBoard {
	var members []string // those of factors, in this order
	for _, m := range []string{"locus-mailbox", "locus-inline", "mutex-freelist", "sync-pool"} {
		if _, ok := factors[m]; ok {
			members = append(members, m)
		}
	}
	g := GroupSpec{ID: "unpaced/steady-decode", Harness: "trace", Workload: "steady-decode", Members: members}
	var gd []GroupData
	for p := range processes {
		d := GroupData{ID: g.ID}
		for _, m := range members {
			md := MemberData{Name: m, Steps: 64, Traces: rounds, AllocTraces: 4, Peaks: []int{2688, 2000}, LiveSum: 1000}
			for r := range rounds {
				wobble := 1 + 0.01*math.Sin(float64(7*p+3*r+len(m)))
				speed := 1 + 0.3*float64(r%2) // a speed mode every other round, shared by the round
				md.BlockUS = append(md.BlockUS, 100*factors[m]*wobble*speed*(1+shift*float64(p)))
			}
			if m == fail && p == processes-1 {
				md.Err = "gate: freed twice"
			}
			d.Members = append(d.Members, md)
		}
		gd = append(gd, d)
	}
	return buildWorkload(g, gd)
}

var factors = map[string]float64{"locus-mailbox": 1, "locus-inline": 0.5, "mutex-freelist": 1.0, "sync-pool": 2}

func TestBoard(t *testing.T) {
	wb := synthetic(factors, 4, 20, 0)
	for _, tc := range []struct {
		name    string
		ratio   float64
		verdict string
		rank    int
	}{
		{"locus-mailbox", 1, "baseline", 1},
		{"locus-inline", 0.5, "faster", 0},
		{"mutex-freelist", 1, "tie", 1},
		{"sync-pool", 2, "slower", 3},
	} {
		c := wb.Cell(tc.name)
		if c == nil {
			t.Fatalf("no cell %s", tc.name)
		}
		if math.Abs(c.Ratio.Point-tc.ratio) > 0.02 || c.Verdict != tc.verdict || c.Rank != tc.rank {
			t.Errorf("%s: ratio %+v verdict %s rank %d, want %v %s %d", tc.name, c.Ratio, c.Verdict, c.Rank, tc.ratio, tc.verdict, tc.rank)
		}
		if c.Quality.Median != (2688+2000)/2.0/1344 || c.Quality.Worst != 2 {
			t.Errorf("%s: quality %+v", tc.name, c.Quality)
		}
	}
	for _, want := range []string{"locus-mailbox: ", "tie with mutex-freelist", "2.00× faster than sync-pool", "floor locus-inline takes 0.50×"} {
		if !strings.Contains(wb.Verdict, want) {
			t.Errorf("verdict %q lacks %q", wb.Verdict, want)
		}
	}
	ab, _ := wb.Ratio("sync-pool", "locus-mailbox")
	ba, _ := wb.Ratio("locus-mailbox", "sync-pool")
	if !near(ab.Point*ba.Point, 1) || !near(ab.Lo*ba.Hi, 1) {
		t.Errorf("a/b %+v and b/a %+v are not inverses", ab, ba)
	}
	if _, ok := wb.Ratio("nope", "sync-pool"); ok {
		t.Error("ratio of an unknown contender")
	}
}

func TestInvalidCellNotRanked(t *testing.T) {
	wb := synthetic(factors, 3, 10, 0)
	_ = wb // rebuild with a failing member
	g := GroupSpec{ID: "unpaced/steady-decode", Harness: "trace", Workload: "steady-decode", Members: []string{"locus-mailbox", "sync-pool"}}
	gd := []GroupData{{Members: []MemberData{{Name: "locus-mailbox", BlockUS: []float64{1, 1}}, {Name: "sync-pool", BlockUS: []float64{2}, Err: "gate"}}}}
	b := buildWorkload(g, gd)
	c := b.Cell("sync-pool")
	if c.GatesOK || c.Rank != 0 || c.Verdict != "n/a" {
		t.Fatalf("invalid cell: %+v", c)
	}
}

// scoreboardOf returns a valid scoreboard of the unpaced pass over wbs,
// measured by len(wbs[0].Seconds) processes in rounds rounds.
func scoreboardOf(rounds int, wbs ...WorkloadBoard) *Scoreboard {
	sb := &Scoreboard{Schema: Schema, SchemaVersion: SchemaVersion, Suite: "LOCUS-EVAL v1", Created: time.Unix(0, 0).UTC(),
		Config: RunConfig{Runs: len(wbs[0].Seconds), Touch: "byte", Unpaced: true}, Machine: ThisMachine(), Method: method, GatesOK: true,
		Passes: []Pass{{Name: "unpaced", Workloads: wbs}}}
	for _, wb := range wbs {
		sb.Config.Groups = append(sb.Config.Groups, GroupShape{ID: "unpaced/" + wb.Workload, Rounds: rounds, Traces: 1})
		for _, c := range wb.Cells {
			sb.GatesOK = sb.GatesOK && c.GatesOK
		}
	}
	sb.Targets = targets(sb)
	return sb
}

func TestCompare(t *testing.T) {
	a := scoreboardOf(20, synthetic(factors, 4, 20, 0))
	b := scoreboardOf(20, synthetic(factors, 4, 20, 0.001))
	if c, err := Compare(a, b); err != nil || !c.OK || len(c.Cells) != 3 || len(c.Conflicts) != 0 {
		t.Fatalf("near-identical runs: %+v, %v", c, err)
	}
	moved := map[string]float64{"locus-mailbox": 1, "locus-inline": 0.5, "mutex-freelist": 1.0, "sync-pool": 3}
	c, err := Compare(a, scoreboardOf(20, synthetic(moved, 4, 20, 0)))
	if err != nil || c.OK {
		t.Fatal("a run whose sync-pool moved from 2× to 3× passed the bar")
	}
	var buf bytes.Buffer
	WriteComparison(&buf, c)
	if !strings.Contains(buf.String(), "NOT consistent") || !strings.Contains(buf.String(), "NO") {
		t.Errorf("comparison text:\n%s", buf.String())
	}
	flipped := map[string]float64{"locus-mailbox": 1, "locus-inline": 0.5, "mutex-freelist": 1.0, "sync-pool": 0.5}
	if c, err := Compare(a, scoreboardOf(20, synthetic(flipped, 4, 20, 0))); err != nil || c.OK || len(c.Conflicts) == 0 {
		t.Fatalf("a flipped order: %+v, %v", c, err)
	}
}

// Compare refuses documents it cannot vouch for: invalid ones, runs of
// another configuration, and runs without a contender to compare; and a
// cell that failed its gates fails the bar.
func TestCompareRefuses(t *testing.T) {
	a := scoreboardOf(20, synthetic(factors, 4, 20, 0))
	two := map[string]float64{"locus-mailbox": 1, "sync-pool": 2}
	for _, tc := range []struct {
		name   string
		b      func(b *Scoreboard)
		target error
	}{
		{"quick", func(b *Scoreboard) { b.Config.Quick = true }, ErrIncomparable},
		{"touch", func(b *Scoreboard) { b.Config.Touch = "full" }, ErrIncomparable},
		{"paced", func(b *Scoreboard) {
			b.Config.Unpaced, b.Config.PaceUS, b.Passes[0].Name, b.Passes[0].PaceUS = false, 30, "paced", 30
			b.Config.Groups[0].ID = "paced/steady-decode"
		}, ErrIncomparable},
		{"workloads", func(b *Scoreboard) {
			b.Passes[0].Workloads[0].Workload, b.Config.Groups[0].ID = "long-tail", "unpaced/long-tail"
		}, ErrIncomparable},
		{"contenders", func(b *Scoreboard) {
			*b = *scoreboardOf(20, synthetic(two, 4, 20, 0))
		}, ErrIncomparable},
		{"invalid", func(b *Scoreboard) { b.Passes[0].Workloads[0].Cells[1].Rank = -3 }, ErrDocument},
		{"nil", nil, ErrDocument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b *Scoreboard
			if tc.b != nil {
				b = scoreboardOf(20, synthetic(factors, 4, 20, 0))
				tc.b(b)
			}
			if _, err := Compare(a, b); !errors.Is(err, tc.target) {
				t.Fatalf("Compare(a, b): %v, want %v", err, tc.target)
			}
			if _, err := Compare(b, a); !errors.Is(err, tc.target) {
				t.Fatalf("Compare(b, a): %v, want %v", err, tc.target)
			}
		})
	}
	only := scoreboardOf(20, synthetic(map[string]float64{"locus-mailbox": 1}, 4, 20, 0))
	if _, err := Compare(only, only); !errors.Is(err, ErrIncomparable) {
		t.Errorf("runs of the baseline alone: %v, want ErrIncomparable", err)
	}

	bad := scoreboardOf(20, syntheticFailing(factors, 4, 20, 0, "sync-pool"))
	if err := bad.Validate(); err != nil || bad.GatesOK {
		t.Fatalf("a run with a failed gate: gates_ok %v, %v", bad.GatesOK, err)
	}
	c, err := Compare(a, bad)
	if err != nil {
		t.Fatal(err)
	}
	if c.OK || len(c.Invalid) != 1 || !errors.Is(c.Err(), ErrInvalidCells) || errors.Is(c.Err(), ErrUnstable) {
		t.Fatalf("a failed gate: OK %v, invalid %q, %v", c.OK, c.Invalid, c.Err())
	}
	var buf bytes.Buffer
	WriteComparison(&buf, c)
	if !strings.Contains(buf.String(), "INVALID") || !strings.Contains(buf.String(), "NOT consistent") {
		t.Errorf("comparison text:\n%s", buf.String())
	}
	base := scoreboardOf(20, syntheticFailing(factors, 4, 20, 0, "locus-mailbox"))
	if c, err := Compare(base, base); err != nil || c.OK || len(c.Cells) != 0 || !errors.Is(c.Err(), ErrIncomparable) {
		t.Fatalf("a failed baseline: %+v, %v, %v", c, err, c.Err())
	}
}

func TestTargets(t *testing.T) {
	sb := scoreboardOf(20, synthetic(factors, 4, 20, 0))
	got := map[string]string{}
	for _, tg := range sb.Targets {
		got[tg.Name] = tg.Status
		if tg.Met != (tg.Status == Met) {
			t.Errorf("%s: met %v with status %s", tg.Name, tg.Met, tg.Status)
		}
	}
	for name, want := range map[string]string{
		"unpaced steady-decode: locus-mailbox / mutex-freelist": Undecided,
		"unpaced steady-decode: locus-mailbox / locus-inline":   Missed,
		"every locus contender: heap bytes per timed trace":     Met,
	} {
		if got[name] != want {
			t.Errorf("%s: %q, want %q (all: %v)", name, got[name], want, got)
		}
	}
}

func TestDocumentRoundTrip(t *testing.T) {
	sb := scoreboardOf(20, synthetic(factors, 4, 20, 0))
	b, err := json.Marshal(sb)
	if err != nil {
		t.Fatal(err)
	}
	back, th, err := ParseDocument(b)
	if err != nil || th != nil || back == nil {
		t.Fatalf("ParseDocument: %v %v %v", back, th, err)
	}
	if c, err := Compare(sb, back); err != nil || !c.OK {
		t.Fatalf("a run does not match itself after JSON: %+v, %v", c, err)
	}
	var md, txt bytes.Buffer
	if err := WriteMarkdown(&md, []*Scoreboard{back, back}, nil, nil, nil, "locus-eval report x.json"); err != nil {
		t.Fatal(err)
	}
	WriteText(&txt, back)
	for _, want := range []string{"# Benchmarks", "### steady-decode", "| rank | contender |", "## Another machine", "## The JSON document"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	for _, want := range []string{"scoreboard —", "steady-decode", "Targets", "Legend"} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("text lacks %q", want)
		}
	}
	files, err := WriteFigures(t.TempDir(), back)
	if err != nil || len(files) != 2 {
		t.Fatalf("figures %v: %v", files, err)
	}
	for _, bad := range []string{`{}`, `{"schema":"x","schema_version":1}`, `{"schema":"locus-eval/scoreboard","schema_version":2}`, `[`} {
		if _, _, err := ParseDocument([]byte(bad)); err == nil {
			t.Errorf("ParseDocument(%s) accepted it", bad)
		}
	}
}
