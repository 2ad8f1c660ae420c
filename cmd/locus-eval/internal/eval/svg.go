package eval

import (
	"bytes"
	"cmp"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/locus-go/locus/cmd/locus-eval/internal/eval/svgfont"

	"github.com/locus-go/locus/bench"
)

// The figures: per pass and workload, one of times and one of quality.
// The time figure is a horizontal bar per contender on a log axis of its
// ratio to locus-mailbox, from 1 to the ratio (left: faster, right:
// slower), sorted by that ratio, with the 99 % interval as a whisker and
// the ratio, interval, verdict and own median time as its label; locus
// contenders are blue (the baseline dark), Go peers orange, and the floor is
// a dashed reference line. The quality figure is a bar of the median peak /
// theoretical peak with a tick at the worst, and 1.0 as the reference. The
// machine, Go version and run are in every caption.

var (
	colLocus    = color.RGBA{R: 0x6b, G: 0xae, B: 0xd6, A: 0xff}
	colBaseline = color.RGBA{R: 0x08, G: 0x51, B: 0x9c, A: 0xff}
	colGo       = color.RGBA{R: 0xfd, G: 0xae, B: 0x6b, A: 0xff}
	colRef      = color.RGBA{R: 0x55, G: 0x55, B: 0x55, A: 0xff}
	colInk      = color.Black
)

// row is one bar of a figure.
type row struct {
	name     string
	from, to float64 // the bar; to NaN: no bar
	lo, hi   float64 // a whisker (hi 0: none)
	mark     float64 // a tick across the bar (0: none)
	fill     color.Color
	label    string
}

// ref is a vertical reference line, labelled in the top row.
type ref struct {
	x     float64
	label string
}

// rows is a plot.Plotter drawing horizontal bars, whiskers, marks and
// labels right of them, and reference lines labelled in an extra top row.
// Row i is drawn at y = n-1-i, so the first row is on top.
type rows struct {
	items []row
	refs  []ref
	font  font.Font
}

func (r *rows) y(i int) float64 { return float64(len(r.items) - 1 - i) }

func (r *rows) style() text.Style {
	return text.Style{Color: colInk, Font: r.font, Handler: plot.DefaultTextHandler, XAlign: draw.XLeft, YAlign: draw.YCenter}
}

// Plot draws the rows on the plot's canvas.
func (r *rows) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	half := (trY(1) - trY(0)) * 0.34
	top := trY(float64(len(r.items)))
	at := c.Min.X + vg.Points(4)
	for _, f := range r.refs {
		x := trX(f.x)
		sty := draw.LineStyle{Color: colRef, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}
		c.StrokeLine2(sty, x, c.Min.Y, x, top-half)
		lab := r.style()
		lab.Color = colRef
		c.FillText(lab, vg.Point{X: max(at, x-vg.Points(20)), Y: top}, f.label)
		// A sixth more than measured: a viewer that ignores textLength
		// and has no font of Liberation Sans's metrics draws wider text.
		at = max(at, x-vg.Points(20)) + lab.Width(f.label)*7/6 + vg.Points(12)
	}
	ink := draw.LineStyle{Color: colInk, Width: vg.Points(1.2)}
	for i, it := range r.items {
		y := trY(r.y(i))
		var end vg.Length
		if !math.IsNaN(it.to) {
			x0, x1 := trX(it.from), trX(it.to)
			c.FillPolygon(it.fill, []vg.Point{{X: x0, Y: y - half}, {X: x1, Y: y - half}, {X: x1, Y: y + half}, {X: x0, Y: y + half}})
			end = max(x0, x1)
			if it.hi > 0 {
				lo, hi := trX(it.lo), trX(it.hi)
				c.StrokeLine2(ink, lo, y, hi, y)
				c.StrokeLine2(ink, lo, y-half/2, lo, y+half/2)
				c.StrokeLine2(ink, hi, y-half/2, hi, y+half/2)
				end = max(end, hi)
			}
			if it.mark > 0 {
				m := trX(it.mark)
				c.StrokeLine2(draw.LineStyle{Color: colInk, Width: vg.Points(2)}, m, y-half*1.2, m, y+half*1.2)
				end = max(end, m)
			}
		} else {
			end = trX(it.from)
		}
		c.FillText(r.style(), vg.Point{X: end + vg.Points(5), Y: y}, it.label)
	}
}

// DataRange covers every bar, whisker, mark and reference, and the top row.
func (r *rows) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax = math.Inf(1), math.Inf(-1)
	for _, it := range r.items {
		xmin, xmax = min(xmin, it.from), max(xmax, it.from)
		if !math.IsNaN(it.to) {
			xmin, xmax = min(xmin, it.to), max(xmax, it.to, it.mark)
		}
		if it.hi > 0 {
			xmin, xmax = min(xmin, it.lo), max(xmax, it.hi)
		}
	}
	for _, f := range r.refs {
		xmin, xmax = min(xmin, f.x), max(xmax, f.x)
	}
	return xmin, xmax, -0.6, float64(len(r.items)) + 0.4
}

// maxDecades is the most decades niceTicks marks in 1-2-5 steps; a wider
// axis (a hostile document) gets a tick every few powers of ten instead.
const maxDecades = 12

// niceTicks labels 1-2-5 steps on a log axis (every step when that would
// leave fewer than four labels), with minor ticks between.
func niceTicks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	labelled := 0
	first, last := math.Floor(math.Log10(lo))-1, math.Ceil(math.Log10(hi))
	if last-first > maxDecades {
		for e := first; e <= last; e += math.Ceil((last - first) / maxDecades) {
			ts = append(ts, plot.Tick{Value: math.Pow(10, e), Label: trimFloat(math.Pow(10, e))})
		}
		return ts
	}
	for e := first; e <= last; e++ {
		for m := 1.0; m < 10; m++ {
			v := m * math.Pow(10, e)
			if v < lo*0.999 || v > hi*1.001 {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = trimFloat(v)
				labelled++
			}
			ts = append(ts, t)
		}
	}
	if labelled < 4 {
		for i := range ts {
			ts[i].Label = trimFloat(ts[i].Value)
		}
	}
	return ts
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.3g", v)
	if v >= 1000 {
		s = fmt.Sprintf("%.0f", v)
	}
	return s
}

// linearTicks labels a linear axis from 0 in steps of 0.25 or 0.5, or of
// 1, 2 or 5 times a power of ten when that would make more than ten.
func linearTicks(lo, hi float64) []plot.Tick {
	step := 0.25
	if hi > 2.5 {
		step = 0.5
	}
	for k := 0; hi/step > 10; k++ {
		step = []float64{1, 2, 5}[k%3] * math.Pow(10, float64(k/3))
	}
	var ts []plot.Tick
	for v := 0.0; v <= hi+1e-9; v += step / 2 {
		t := plot.Tick{Value: v}
		if math.Mod(v+1e-9, step) < 2e-9 {
			t.Label = strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
		}
		ts = append(ts, t)
	}
	return ts
}

// figure renders rs as SVG into w, on a log axis (ratios) or a linear one
// from 0, with room right of the data for the labels, its text in
// svgfont's metric-compatible stack. An axis it cannot
// draw (a value at or below 0 on the log axis, one not finite, a span past
// the float range) is an error, never gonum's panic.
func figure(w io.Writer, title, xlabel string, rs *rows, logX bool) error {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(12)
	p.X.Label.Text = xlabel
	p.X.Label.TextStyle.Font.Size = vg.Points(9)
	p.X.Label.Padding = vg.Points(6)
	names := make([]string, len(rs.items)+1) // the top row holds the references' labels
	for i, it := range rs.items {
		names[len(rs.items)-1-i] = it.name
	}
	p.NominalY(names...)
	p.Y.Tick.Label.Font.Size = vg.Points(10)
	p.Y.Padding = vg.Points(8) // room for a wider substitute font before the bars
	rs.font = font.From(svgfont.Font, vg.Points(9))
	xmin, xmax, _, _ := rs.DataRange()
	if !finite(xmin, xmax) || (logX && xmin <= 0) {
		return fmt.Errorf("%w: %q: values from %g to %g cannot be drawn on a %s axis", ErrDocument, title, xmin, xmax, map[bool]string{true: "log", false: "linear"}[logX])
	}
	const width, labelShare = 9.5, 0.30 // inches; the share of the axis kept for labels
	if logX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.TickerFunc(niceTicks)
		lo := xmin / 1.15
		span := math.Log10(xmax / lo)
		p.X.Min, p.X.Max = lo, xmax*math.Pow(10, span*labelShare/(1-labelShare))
	} else {
		p.X.Tick.Marker = plot.TickerFunc(linearTicks)
		p.X.Min, p.X.Max = 0, xmax/(1-labelShare)
	}
	if !finite(p.X.Min, p.X.Max) || !(p.X.Min < p.X.Max) || (logX && !(p.X.Min > 0)) {
		return fmt.Errorf("%w: %q: values from %g to %g span more than an axis can", ErrDocument, title, xmin, xmax)
	}
	grid := plotter.NewGrid()
	grid.Horizontal.Color = color.Transparent
	grid.Vertical.Color = color.Gray{Y: 0xe0}
	p.Add(grid, rs)
	height := 1.65 + 0.3*float64(len(rs.items)+1)
	c := vgsvg.NewWith(vgsvg.UseWH(vg.Length(width)*vg.Inch, vg.Length(height)*vg.Inch), vgsvg.EmbedFonts(false))
	p.Draw(draw.Crop(draw.New(c), vg.Points(6), -vg.Points(6), vg.Points(4), -vg.Points(4))) // a margin: no glyph at the edge
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return err
	}
	return svgfont.Write(w, buf.Bytes())
}

// WriteFigures writes every figure of sb into dir, creating it, and returns
// their paths. sb must be valid (Validate; ReadDocument's documents are).
// Every figure is rendered before dir is touched: a figure that cannot be
// drawn leaves no directory and no file behind.
func WriteFigures(dir string, sb *Scoreboard) ([]string, error) {
	var names []string
	var svgs [][]byte
	err := renderFigures(sb, func(name string, render func(io.Writer) error) error {
		var buf bytes.Buffer
		if err := render(&buf); err != nil {
			return err
		}
		names, svgs = append(names, name), append(svgs, buf.Bytes())
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	for i, name := range names {
		file := filepath.Join(dir, name)
		if err := os.WriteFile(file, svgs[i], 0o644); err != nil {
			return files, err
		}
		files = append(files, file)
	}
	return files, nil
}

// renderFigures calls out with every figure of sb: its file name and the
// function that renders it.
func renderFigures(sb *Scoreboard, out func(name string, render func(io.Writer) error) error) error {
	// Two lines, each narrower than the axis it is centred under.
	caption := fmt.Sprintf("%s\n%s; %s", sb.Machine, plural(sb.Config.Runs, "process"), revString(sb.Revision))
	for _, p := range sb.Passes {
		for i := range p.Workloads {
			wb := &p.Workloads[i]
			name := p.Name + "-" + wb.Workload + ".svg"
			if err := out("time-"+name, func(w io.Writer) error { return timeFigure(w, p, wb, caption) }); err != nil {
				return err
			}
			if err := out("quality-"+name, func(w io.Writer) error { return qualityFigure(w, p, wb, caption) }); err != nil {
				return err
			}
		}
	}
	return nil
}

func fillOf(c Cell) color.Color {
	switch {
	case c.Contender == bench.Baseline:
		return colBaseline
	case c.Group == bench.GroupLocus:
		return colLocus
	}
	return colGo
}

func timeFigure(w io.Writer, p Pass, wb *WorkloadBoard, caption string) error {
	paced := p.Name == "paced"
	val := func(c Cell) float64 {
		if paced {
			return c.USPerStep
		}
		return c.USPerTrace
	}
	unit := "µs/trace"
	if paced {
		unit = "µs/step"
	}
	rs := &rows{}
	for _, c := range byRatio(wb.Cells) {
		hasRatio := c.GatesOK && c.Ratio.Lo > 0 // valid, and its baseline valid too
		if c.Floor && hasRatio {
			what := "floor"
			if paced {
				what = "no workers"
			}
			rs.refs = append(rs.refs, ref{c.Ratio.Point, fmt.Sprintf("%s: %s %s× %s, %s %s", what, c.Contender,
				fmtX(c.Ratio.Point), fmtIv(c.Ratio), fmtUS(val(c)), unit)})
			continue
		}
		it := row{name: c.Contender, from: 1, to: c.Ratio.Point, lo: c.Ratio.Lo, hi: c.Ratio.Hi, fill: fillOf(c)}
		switch {
		case !c.GatesOK:
			it.to, it.hi, it.label = math.NaN(), 0, "INVALID (a gate failed)"
		case !hasRatio:
			it.to, it.hi, it.label = math.NaN(), 0, fmt.Sprintf("no ratio (%s failed its gates), %s %s", bench.Baseline, fmtUS(val(c)), unit)
		case c.Contender == bench.Baseline:
			it.to, it.hi, it.mark = 1, 0, 1
			it.label = fmt.Sprintf("1 (baseline), %s %s", fmtUS(val(c)), unit)
		default:
			it.label = fmt.Sprintf("%s× %s %s, %s %s", fmtX(c.Ratio.Point), fmtIv(c.Ratio), c.Verdict, fmtUS(val(c)), unit)
		}
		rs.items = append(rs.items, it)
	}
	if len(rs.items) == 0 {
		return fmt.Errorf("%s: nothing to plot", wb.Workload)
	}
	rs.refs = append(rs.refs, ref{1, bench.Baseline})
	what := "owner time per trace"
	if paced {
		what = fmt.Sprintf("owner time per step outside the %g µs pace", p.PaceUS)
	}
	title := fmt.Sprintf("%s, %s: %s, × %s (99 %% interval; left is faster)", wb.Workload, p.Name, what, bench.Baseline)
	xlabel := "time / " + bench.Baseline + "'s time (log scale); blue: locus, dark blue: " + bench.Baseline + ", orange: Go peers\n" + caption
	return figure(w, title, xlabel, rs, true)
}

func qualityFigure(w io.Writer, p Pass, wb *WorkloadBoard, caption string) error {
	cells := slices.Clone(wb.Cells)
	slices.SortStableFunc(cells, func(a, b Cell) int {
		if a.Quality.Median != b.Quality.Median {
			return cmp.Compare(a.Quality.Median, b.Quality.Median)
		}
		return cmp.Compare(a.Quality.Worst, b.Quality.Worst)
	})
	rs := &rows{refs: []ref{{1, "1.0: every block freed the instant its request ends"}}}
	for _, c := range cells {
		it := row{name: c.Contender, to: c.Quality.Median, mark: c.Quality.Worst, fill: fillOf(c)}
		switch {
		case !c.GatesOK:
			it.to, it.mark, it.label = math.NaN(), 0, "INVALID (a gate failed)"
		case c.Quality.Median == 0:
			it.to, it.mark, it.label = math.NaN(), 0, "not sampled"
		default:
			it.label = fmt.Sprintf("%.2f, worst %.2f", c.Quality.Median, c.Quality.Worst)
			if p.Name == "paced" {
				it.label += fmt.Sprintf("; mean live %.0f", c.MeanLive)
			}
		}
		rs.items = append(rs.items, it)
	}
	title := fmt.Sprintf("%s, %s: peak of outstanding blocks / theoretical peak %d (bar: median, tick: worst)",
		wb.Workload, p.Name, wb.TheoreticalPeak)
	xlabel := "peak / theoretical peak; blue: locus, dark blue: " + bench.Baseline + ", orange: Go peers\n" + caption
	return figure(w, title, xlabel, rs, false)
}
