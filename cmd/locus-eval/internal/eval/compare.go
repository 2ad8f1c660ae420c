package eval

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/locus-go/locus/bench"
)

// Comparison is the stability check of two runs: for every (pass,
// workload, contender) in both, do the intervals of the ratio to the
// baseline overlap; and for every pair of contenders that both runs
// separate (the pairwise interval excludes 1), do they order it the same
// way. A cell that failed its gates in either run fails the check.
type Comparison struct {
	Cells []CellCheck `json:"cells"`
	// Separated counts the contender pairs both runs separate, OneSided
	// those only one run separates (not a failure: the other calls it a
	// tie), Conflicts the pairs the runs order opposite ways.
	Separated int      `json:"separated"`
	OneSided  int      `json:"one_sided"`
	Conflicts []string `json:"conflicts"`
	// Invalid names the cells that failed their gates, in either run.
	Invalid []string `json:"invalid"`
	// OK is true when every interval overlaps, nothing conflicts and no
	// cell is invalid.
	OK bool `json:"ok"`
	// Hosts is empty when both runs come from the same kind of host
	// (Machine.SameHost); else it names both, and the cells that are apart
	// or pairs that conflict are the claims that differ between the hosts.
	Hosts string `json:"hosts,omitempty"`
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

// ErrIncomparable is matched by Compare's error when two runs do not
// measure the same thing.
var ErrIncomparable = errors.New("runs not comparable")

// ErrUnstable is matched by Comparison.Err when the stability bar fails:
// an interval of one run misses the other's, or a pair is ordered the
// opposite way. ErrInvalidCells is matched when a cell of either run failed
// its gates, so that the runs cannot vouch for each other.
var (
	ErrUnstable     = errors.New("the runs are not consistent")
	ErrInvalidCells = errors.New("cells failed their proof gates")
)

// Err returns nil when the stability bar holds, else an error saying why,
// matching ErrUnstable, ErrInvalidCells or both, and ErrIncomparable when
// no ratio was compared at all.
func (c Comparison) Err() error {
	apart := 0
	for _, cc := range c.Cells {
		if !cc.Overlap {
			apart++
		}
	}
	var errs []error
	if apart > 0 || len(c.Conflicts) > 0 {
		errs = append(errs, fmt.Errorf("%w: %d of %d ratio intervals apart, %d pairs in opposite orders",
			ErrUnstable, apart, len(c.Cells), len(c.Conflicts)))
	}
	if len(c.Invalid) > 0 {
		errs = append(errs, fmt.Errorf("%w: %d INVALID cells", ErrInvalidCells, len(c.Invalid)))
	}
	if len(c.Cells) == 0 {
		errs = append(errs, fmt.Errorf("%w: no ratio measured validly by both runs", ErrIncomparable))
	}
	return errors.Join(errs...)
}

// Compare checks b against a. Both must be valid (Validate) and comparable:
// measured with the same -quick, touch, passes and pace, over the same
// workloads in each pass and the same contenders on each workload (in any
// order), with at least one contender besides the baseline; else the error
// matches ErrDocument or ErrIncomparable and lists every difference. The
// number of processes, the machine and the revision may differ: comparing
// them is what the check is for.
func Compare(a, b *Scoreboard) (Comparison, error) {
	for _, x := range []struct {
		name string
		sb   *Scoreboard
	}{{"run A", a}, {"run B", b}} {
		if x.sb == nil {
			return Comparison{}, fmt.Errorf("%w: %s: no document", ErrDocument, x.name)
		}
		if err := x.sb.Validate(); err != nil {
			return Comparison{}, fmt.Errorf("%s: %w", x.name, err)
		}
	}
	if err := comparable(a, b); err != nil {
		return Comparison{}, err
	}
	c := Comparison{Cells: []CellCheck{}, Conflicts: []string{}, Invalid: []string{}}
	for _, pa := range a.Passes {
		pb := findPass(b, pa.Name)
		for i := range pa.Workloads {
			wa := &pa.Workloads[i]
			wb := findWorkload(pb, wa.Workload)
			for _, x := range []struct {
				run string
				wb  *WorkloadBoard
			}{{"run A", wa}, {"run B", wb}} {
				for _, cell := range x.wb.Cells {
					if !cell.GatesOK {
						c.Invalid = append(c.Invalid, fmt.Sprintf("%s: %s %s %s: %s", x.run, pa.Name, wa.Workload, cell.Contender,
							strings.Join(cell.GateErrors, "; ")))
					}
				}
			}
			var both []string
			for _, ca := range wa.Cells {
				cb := wb.Cell(ca.Contender)
				if !ca.GatesOK || !cb.GatesOK {
					continue // listed in Invalid
				}
				both = append(both, ca.Contender)
				if ca.Contender == bench.Baseline || ca.Verdict == "n/a" || cb.Verdict == "n/a" {
					continue // no ratio: the baseline failed its gates, listed in Invalid
				}
				cc := CellCheck{Pass: pa.Name, Workload: wa.Workload, Contender: ca.Contender,
					A: ca.Ratio, B: cb.Ratio, Overlap: ca.Ratio.Overlaps(cb.Ratio)}
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
					case sa != 0 && sb != 0:
						c.Separated++
					case sa != 0 || sb != 0:
						c.OneSided++
					}
				}
			}
		}
	}
	c.OK = c.Err() == nil
	if !a.Machine.SameHost(b.Machine) {
		c.Hosts = fmt.Sprintf("run A: %s [%s]; run B: %s [%s]", a.Machine, a.Machine.Details(), b.Machine, b.Machine.Details())
	}
	return c, nil
}

// comparable returns an error listing every difference that makes two
// valid runs incomparable.
func comparable(a, b *Scoreboard) error {
	var diffs []string
	ca, cb := a.Config, b.Config
	if ca.Quick != cb.Quick {
		diffs = append(diffs, fmt.Sprintf("-quick: %v in run A, %v in run B", ca.Quick, cb.Quick))
	}
	if ca.Touch != cb.Touch {
		diffs = append(diffs, fmt.Sprintf("-touch: %s in run A, %s in run B", ca.Touch, cb.Touch))
	}
	if ca.Unpaced != cb.Unpaced {
		diffs = append(diffs, fmt.Sprintf("the unpaced pass: %s", onlyIn(ca.Unpaced)))
	}
	if ca.PaceUS != cb.PaceUS {
		diffs = append(diffs, fmt.Sprintf("-pace: %s in run A, %s in run B", paceString(ca.PaceUS), paceString(cb.PaceUS)))
	}
	names := func(n int, name func(int) string) []string {
		s := make([]string, n)
		for i := range s {
			s[i] = name(i)
		}
		slices.Sort(s)
		return s
	}
	for _, pa := range a.Passes {
		pb := findPass(b, pa.Name)
		if pb == nil {
			continue // a difference of pace or unpaced, listed above
		}
		wa := names(len(pa.Workloads), func(i int) string { return pa.Workloads[i].Workload })
		wb := names(len(pb.Workloads), func(i int) string { return pb.Workloads[i].Workload })
		if !slices.Equal(wa, wb) {
			diffs = append(diffs, fmt.Sprintf("%s workloads: %s in run A, %s in run B", pa.Name, strings.Join(wa, ","), strings.Join(wb, ",")))
			continue
		}
		for i := range pa.Workloads {
			x, y := &pa.Workloads[i], findWorkload(pb, pa.Workloads[i].Workload)
			ea := names(len(x.Cells), func(i int) string { return x.Cells[i].Contender })
			eb := names(len(y.Cells), func(i int) string { return y.Cells[i].Contender })
			if !slices.Equal(ea, eb) {
				diffs = append(diffs, fmt.Sprintf("%s %s contenders: %s in run A, %s in run B", pa.Name, x.Workload,
					strings.Join(ea, ","), strings.Join(eb, ",")))
			}
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("%w: they were made with different configurations:\n  %s", ErrIncomparable, strings.Join(diffs, "\n  "))
	}
	for _, p := range a.Passes {
		for _, w := range p.Workloads {
			for _, c := range w.Cells {
				if c.Contender != bench.Baseline {
					return nil
				}
			}
		}
	}
	return fmt.Errorf("%w: nothing to compare: the runs measured no contender besides %s", ErrIncomparable, bench.Baseline)
}

func onlyIn(inA bool) string {
	if inA {
		return "only in run A"
	}
	return "only in run B"
}

func paceString(paceUS float64) string {
	if paceUS == 0 {
		return "off"
	}
	return fmt.Sprintf("%g µs", paceUS)
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
	if c.Hosts != "" {
		fmt.Fprintf(w, "The runs come from DIFFERENT HOSTS, so a ratio apart or a pair in opposite orders below is a claim\n"+
			"that holds on one host and not on the other:\n  %s\n\n", c.Hosts)
	}
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
	if len(c.Invalid) > 0 {
		fmt.Fprintf(w, "\n%d cells failed their proof gates (INVALID), so their ratios are not compared:\n  %s\n",
			len(c.Invalid), strings.Join(c.Invalid, "\n  "))
	}
	fmt.Fprintf(w, "\n%d of %d ratio intervals overlap; contender pairs separated by both runs: %d, all in the same order",
		len(c.Cells)-bad, len(c.Cells), c.Separated)
	if len(c.Conflicts) > 0 {
		fmt.Fprintf(w, " except %d:\n  %s\n", len(c.Conflicts), strings.Join(c.Conflicts, "\n  "))
	} else {
		fmt.Fprintln(w, ".")
	}
	fmt.Fprintf(w, "Pairs separated by one run only (a tie in the other): %d.\n", c.OneSided)
	if err := c.Err(); err == nil {
		fmt.Fprintln(w, "The runs are consistent: the stability bar holds.")
	} else {
		fmt.Fprintf(w, "The runs are NOT consistent: the stability bar fails (%s).\n", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
}
