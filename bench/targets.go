package bench

import "fmt"

// Target is one of the velocity/allocation targets, checked against
// measured results.
type Target struct {
	Name string `json:"name"`
	Want string `json:"want"`
	Got  string `json:"got"`
	// Met is true when the target holds; Known is false when a needed cell
	// was not measured or is invalid.
	Met   bool `json:"met"`
	Known bool `json:"known"`
}

// Targets checks the v1 targets on rs (only those whose cells were run).
func Targets(rs []*Result) []Target {
	var ts []Target
	for _, w := range Workloads() {
		m := FindResult(rs, w.Name, Baseline)
		if m == nil {
			continue
		}
		t := Target{Name: w.Name + ": locus-mailbox first (floor excluded)", Want: "first"}
		if m.GatesOK {
			var ahead []string
			for _, r := range rs {
				if r.Workload == w.Name && r.GatesOK && !r.Floor && r.MedianUS < m.MedianUS {
					ahead = append(ahead, r.Contender)
				}
			}
			t.Known, t.Met = true, len(ahead) == 0
			t.Got = "first"
			if len(ahead) > 0 {
				t.Got = fmt.Sprintf("behind %v", ahead)
			}
		}
		ts = append(ts, t)
	}
	for _, g := range []struct {
		w   *Workload
		min float64
	}{{SteadyDecode, 3.5}, {BurstStorm, 4}, {LongTail, 3.5}, {ChurnTouch, 1.3}} {
		m, p := FindResult(rs, g.w.Name, Baseline), FastestPeer(rs, g.w.Name)
		if m == nil || p == nil {
			continue
		}
		t := Target{Name: g.w.Name + ": fastest Go peer / locus-mailbox", Want: fmt.Sprintf(">= %.2f×", g.min)}
		if m.GatesOK {
			x := p.MedianUS / m.MedianUS
			t.Known, t.Met, t.Got = true, x >= g.min, fmt.Sprintf("%.2f× (%s)", x, p.Contender)
		}
		ts = append(ts, t)
	}
	ratio := func(name, other, w string, limit float64) {
		m, o := FindResult(rs, w, Baseline), FindResult(rs, w, other)
		if m == nil || o == nil {
			return
		}
		t := Target{Name: name, Want: fmt.Sprintf("<= %.2f×", limit)}
		if m.GatesOK && o.GatesOK {
			x := m.MedianUS / o.MedianUS
			t.Known, t.Met, t.Got = true, x <= limit, fmt.Sprintf("%.2f×", x)
		}
		ts = append(ts, t)
	}
	ratio("steady-decode: locus-mailbox / locus-inline", "locus-inline", SteadyDecode.Name, 1.25)
	for _, w := range Workloads() {
		ratio(w.Name+": locus-mailbox / locus-handwritten", "locus-handwritten", w.Name, 1.05)
	}
	worst, any := 0.0, false
	who := ""
	for _, r := range rs {
		if r.Group == GroupLocus {
			any = true
			if r.BytesPerTrace > worst {
				worst, who = r.BytesPerTrace, r.Workload+"/"+r.Contender
			}
		}
	}
	if any {
		t := Target{Name: "locus contenders: bytes allocated per trace", Want: "0", Known: true, Met: worst < 1}
		t.Got = fmt.Sprintf("worst %.1f B", worst)
		if who != "" {
			t.Got += " (" + who + ")"
		}
		ts = append(ts, t)
	}
	return ts
}
