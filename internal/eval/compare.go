package eval

import (
	"fmt"
	"io"
	"strings"

	"github.com/locus-go/locus/bench"
)

// Comparison is the stability check of two runs: for every (pass,
// workload, contender) in both, do the intervals of the ratio to the
// baseline overlap; and for every pair of contenders that both runs
// separate (the pairwise interval excludes 1), do they order it the same
// way.
type Comparison struct {
	Cells []CellCheck `json:"cells"`
	// Separated counts the contender pairs both runs separate, OneSided
	// those only one run separates (not a failure: the other calls it a
	// tie), Conflicts the pairs the runs order opposite ways.
	Separated int      `json:"separated"`
	OneSided  int      `json:"one_sided"`
	Conflicts []string `json:"conflicts"`
	// OK is true when every interval overlaps and nothing conflicts.
	OK bool `json:"ok"`
}

// CellCheck is one (pass, workload, contender) of a comparison.
type CellCheck struct {
	Pass      string   `json:"pass"`
	Workload  string   `json:"workload"`
	Contender string   `json:"contender"`
	A         Interval `json:"a"`
	B         Interval `json:"b"`
	Overlap   bool     `json:"overlap"`
}

// Compare checks b against a.
func Compare(a, b *Scoreboard) Comparison {
	c := Comparison{OK: true}
	for _, pa := range a.Passes {
		pb := findPass(b, pa.Name)
		if pb == nil {
			continue
		}
		for i := range pa.Workloads {
			wa := &pa.Workloads[i]
			wb := findWorkload(pb, wa.Workload)
			if wb == nil {
				continue
			}
			var both []string
			for _, ca := range wa.Cells {
				cb := wb.Cell(ca.Contender)
				if cb == nil || !ca.GatesOK || !cb.GatesOK {
					continue
				}
				both = append(both, ca.Contender)
				if ca.Contender == bench.Baseline {
					continue
				}
				cc := CellCheck{Pass: pa.Name, Workload: wa.Workload, Contender: ca.Contender,
					A: ca.Ratio, B: cb.Ratio, Overlap: ca.Ratio.Overlaps(cb.Ratio)}
				c.OK = c.OK && cc.Overlap
				c.Cells = append(c.Cells, cc)
			}
			for x := range both {
				for y := x + 1; y < len(both); y++ {
					ra, okA := wa.Ratio(both[x], both[y])
					rb, okB := wb.Ratio(both[x], both[y])
					if !okA || !okB {
						continue
					}
					sa, sb := side(ra), side(rb)
					switch {
					case sa != 0 && sb != 0 && sa != sb:
						c.Conflicts = append(c.Conflicts, fmt.Sprintf("%s %s: %s / %s is %s×%s in one run, %s×%s in the other",
							pa.Name, wa.Workload, both[x], both[y], fmtX(ra.Point), fmtIv(ra), fmtX(rb.Point), fmtIv(rb)))
						c.OK = false
					case sa != 0 && sb != 0:
						c.Separated++
					case sa != 0 || sb != 0:
						c.OneSided++
					}
				}
			}
		}
	}
	return c
}

// side is -1 when the interval lies below 1, 1 above, 0 when it holds 1.
func side(iv Interval) int {
	switch {
	case iv.Hi < 1:
		return -1
	case iv.Lo > 1:
		return 1
	}
	return 0
}

func findPass(sb *Scoreboard, name string) *Pass {
	for i := range sb.Passes {
		if sb.Passes[i].Name == name {
			return &sb.Passes[i]
		}
	}
	return nil
}

func findWorkload(p *Pass, name string) *WorkloadBoard {
	for i := range p.Workloads {
		if p.Workloads[i].Workload == name {
			return &p.Workloads[i]
		}
	}
	return nil
}

// WriteComparison writes a comparison as text: every cell's two
// intervals, then the verdict.
func WriteComparison(w io.Writer, c Comparison) {
	fmt.Fprintf(w, "%-8s %-14s %-23s %-22s %-22s %s\n", "pass", "workload", "contender", "run A ×baseline", "run B ×baseline", "overlap")
	for _, cc := range c.Cells {
		mark := "yes"
		if !cc.Overlap {
			mark = "NO"
		}
		fmt.Fprintf(w, "%-8s %-14s %-23s %-22s %-22s %s\n", cc.Pass, cc.Workload, cc.Contender,
			fmtX(cc.A.Point)+" "+fmtIv(cc.A), fmtX(cc.B.Point)+" "+fmtIv(cc.B), mark)
	}
	bad := 0
	for _, cc := range c.Cells {
		if !cc.Overlap {
			bad++
		}
	}
	fmt.Fprintf(w, "\n%d of %d ratio intervals overlap; contender pairs separated by both runs: %d, all in the same order",
		len(c.Cells)-bad, len(c.Cells), c.Separated)
	if len(c.Conflicts) > 0 {
		fmt.Fprintf(w, " except %d:\n  %s\n", len(c.Conflicts), strings.Join(c.Conflicts, "\n  "))
	} else {
		fmt.Fprintln(w, ".")
	}
	fmt.Fprintf(w, "Pairs separated by one run only (a tie in the other): %d.\n", c.OneSided)
	if c.OK {
		fmt.Fprintln(w, "The runs are consistent: the stability bar holds.")
	} else {
		fmt.Fprintln(w, "The runs are NOT consistent: the stability bar fails.")
	}
}
