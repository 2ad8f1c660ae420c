package eval

import (
	"fmt"

	"github.com/locus-go/locus/bench"
)

// Target statuses.
const (
	// Met: the whole interval is on the target's side of the bound.
	Met = "met"
	// Missed: the whole interval is on the wrong side.
	Missed = "missed"
	// Undecided: the interval straddles the bound.
	Undecided = "undecided"
	// NotMeasured: a cell the target needs was not run or failed its gates.
	NotMeasured = "n/a"
)

// Target is one performance target judged on a run. A missed target is
// reported, never an error: only failed gates make a run fail.
type Target struct {
	Name string `json:"name"`
	// Pass and Workload locate the cells ("" for targets over all).
	Pass     string `json:"pass"`
	Workload string `json:"workload"`
	// Want is the bound: the measure must be <= Bound.
	Want Bound `json:"want"`
	// Got is the measure with its interval (a count has Lo = Hi = Point).
	Got    Interval `json:"got"`
	Status string   `json:"status"`
	Met    bool     `json:"met"`
	// Detail names what Got is about, e.g. the worst cell ("" when
	// nothing needs saying).
	Detail string `json:"detail"`
}

// Bound is a target's bound on a measure.
type Bound struct {
	Op    string  `json:"op"` // always "<="
	Value float64 `json:"value"`
	Unit  string  `json:"unit"` // "×" (a ratio of times) or "B" (bytes per trace)
}

// judge returns the status of iv <= bound.
func judge(iv Interval, bound float64) string {
	switch {
	case iv.Hi <= bound:
		return Met
	case iv.Lo > bound:
		return Missed
	}
	return Undecided
}

// targets are the scoreboard's targets (the hot-path issue's bar):
// locus-mailbox at most 1.00× mutex-freelist and 0.80× mutex-freelist-checked
// on every workload, at most 1.30× its floor locus-inline on steady-decode,
// at most 1.05× the hand-written reference, paced owner time per step at
// most mutex-freelist's, and no heap bytes per trace for any locus
// contender.
func targets(sb *Scoreboard) []Target {
	ts := []Target{}
	ratio := func(pass, other string, bound float64, only string) {
		for _, p := range sb.Passes {
			if p.Name != pass {
				continue
			}
			for i := range p.Workloads {
				wb := &p.Workloads[i]
				if only != "" && wb.Workload != only {
					continue
				}
				if wb.Cell(bench.Baseline) == nil || wb.Cell(other) == nil {
					continue
				}
				t := Target{Name: fmt.Sprintf("%s %s: %s / %s", pass, wb.Workload, bench.Baseline, other),
					Pass: pass, Workload: wb.Workload, Want: Bound{"<=", bound, "×"}, Status: NotMeasured}
				if iv, ok := wb.Ratio(bench.Baseline, other); ok {
					t.Got, t.Status = iv, judge(iv, bound)
				}
				t.Met = t.Status == Met
				ts = append(ts, t)
			}
		}
	}
	ratio("unpaced", "mutex-freelist", 1.00, "")
	ratio("unpaced", "mutex-freelist-checked", 0.80, "")
	ratio("unpaced", "locus-inline", 1.30, bench.SteadyDecode.Name)
	ratio("unpaced", "locus-handwritten", 1.05, "")
	ratio("paced", "mutex-freelist", 1.00, "")

	t := Target{Name: "every locus contender: heap bytes per timed trace", Want: Bound{"<=", 0, "B"}, Status: NotMeasured}
	worst, any := -1.0, false
	for _, p := range sb.Passes {
		for _, wb := range p.Workloads {
			for _, c := range wb.Cells {
				if c.Group != bench.GroupLocus || c.Traces == 0 {
					continue
				}
				any = true
				if c.BytesPerTrace > worst {
					worst = c.BytesPerTrace
					t.Detail = p.Name + " " + wb.Workload + " " + c.Contender
				}
			}
		}
	}
	if any {
		t.Got = Interval{worst, worst, worst}
		t.Status = judge(t.Got, 0)
		t.Met = t.Status == Met
		if t.Met {
			t.Detail = "every cell"
		} else {
			t.Detail = "worst: " + t.Detail
		}
		ts = append(ts, t)
	}
	return ts
}
