package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/locus-go/locus/bench"
)

// writeFigures writes velocity.svg, quality.svg and touch-<workload>.svg
// into dir. Invalid cells are left out of every figure.
func writeFigures(dir string, rs, touchRs []*bench.Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ws, cs := axes(rs)
	if len(ws) == 0 || len(cs) == 0 {
		return fmt.Errorf("no results to plot")
	}
	if err := velocityFigure(filepath.Join(dir, "velocity.svg"), rs, ws, cs); err != nil {
		return err
	}
	if err := qualityFigure(filepath.Join(dir, "quality.svg"), rs, ws, cs); err != nil {
		return err
	}
	tws, _ := axes(touchRs)
	for _, w := range tws {
		if err := touchFigure(filepath.Join(dir, "touch-"+w+".svg"), touchRs, w); err != nil {
			return err
		}
	}
	return nil
}

// axes returns the workloads and contenders of rs in first-seen order.
func axes(rs []*bench.Result) (ws, cs []string) {
	seenW, seenC := map[string]bool{}, map[string]bool{}
	for _, r := range rs {
		if !seenW[r.Workload] {
			seenW[r.Workload] = true
			ws = append(ws, r.Workload)
		}
		if !seenC[r.Contender] {
			seenC[r.Contender] = true
			cs = append(cs, r.Contender)
		}
	}
	return ws, cs
}

func find(rs []*bench.Result, w, c, touch string) *bench.Result {
	for _, r := range rs {
		if r.Workload == w && r.Contender == c && (touch == "" || r.Touch == touch) && r.GatesOK && r.MedianUS > 0 {
			return r
		}
	}
	return nil
}

type errPoints struct {
	plotter.XYs
	plotter.YErrors
}

// velocityFigure: median µs per trace (log scale) with the CI as error
// bars, one colour per workload, contenders along x.
func velocityFigure(file string, rs []*bench.Result, ws, cs []string) error {
	p := plot.New()
	p.Title.Text = "LOCUS-EVAL v1 velocity: median µs per trace (log scale; bars = 95 % CI; lower is faster)"
	p.Y.Label.Text = "µs per trace"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.NominalX(cs...)
	p.X.Tick.Label.Rotation = math.Pi / 6
	p.X.Tick.Label.XAlign = -0.9
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	for i, w := range ws {
		var pts errPoints
		for j, c := range cs {
			r := find(rs, w, c, "")
			if r == nil {
				continue
			}
			x := float64(j) + (float64(i)-float64(len(ws)-1)/2)*0.15
			pts.XYs = append(pts.XYs, plotter.XY{X: x, Y: r.MedianUS})
			lo, hi := math.Max(r.MedianUS-r.LoUS, 0), math.Max(r.HiUS-r.MedianUS, 0)
			pts.YErrors = append(pts.YErrors, struct{ Low, High float64 }{lo, hi})
		}
		if len(pts.XYs) == 0 {
			continue
		}
		s, err := plotter.NewScatter(pts.XYs)
		if err != nil {
			return err
		}
		s.GlyphStyle.Color = plotutil.Color(i)
		s.GlyphStyle.Shape = plotutil.Shape(i)
		s.GlyphStyle.Radius = vg.Points(3)
		eb, err := plotter.NewYErrorBars(pts)
		if err != nil {
			return err
		}
		eb.LineStyle.Color = plotutil.Color(i)
		p.Add(s, eb)
		p.Legend.Add(w, s)
	}
	p.Y.Max *= 6 // headroom for the legend (log scale)
	return p.Save(vg.Length(60+70*len(cs))*vg.Points(1)+5*vg.Inch, 5*vg.Inch, file)
}

// qualityFigure: peak / theoretical peak per contender and workload, with
// the 1.0 line (every block freed the instant its request finished).
func qualityFigure(file string, rs []*bench.Result, ws, cs []string) error {
	p := plot.New()
	p.Title.Text = "LOCUS-EVAL v1 quality: sample-pass peak / theoretical peak (1.0 = instant free)"
	p.Y.Label.Text = "peak / theoretical peak"
	p.Y.Min = 0
	p.NominalX(cs...)
	p.X.Tick.Label.Rotation = math.Pi / 6
	p.X.Tick.Label.XAlign = -0.9
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	width := vg.Points(10)
	for i, w := range ws {
		vs := make(plotter.Values, len(cs))
		for j, c := range cs {
			if r := find(rs, w, c, ""); r != nil {
				vs[j] = r.Quality
			}
		}
		b, err := plotter.NewBarChart(vs, width)
		if err != nil {
			return err
		}
		b.Color = plotutil.Color(i)
		b.LineStyle.Width = 0
		b.Offset = width * vg.Length(float64(i)-float64(len(ws)-1)/2)
		p.Add(b)
		p.Legend.Add(w, b)
	}
	one := plotter.NewFunction(func(float64) float64 { return 1 })
	one.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	one.Width = vg.Points(1.5)
	p.Add(one)
	p.Legend.Add("1.0 (theoretical)", one)
	p.Y.Max *= 1.4 // headroom for the legend
	return p.Save(vg.Length(60+70*len(cs))*vg.Points(1)+5*vg.Inch, 5*vg.Inch, file)
}

// touchFigure: median µs per trace of the touch-comparison contenders on
// one workload, one bar per touch mode.
func touchFigure(file string, rs []*bench.Result, w string) error {
	_, cs := axes(rs)
	p := plot.New()
	p.Title.Text = w + ": touch parity — µs per trace with no touch, a 1-byte touch and a full 4 KiB write"
	p.Y.Label.Text = "µs per trace"
	p.Y.Min = 0
	p.NominalX(cs...)
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	width := vg.Points(14)
	modes := []string{"none", "byte", "full"}
	for i, m := range modes {
		vs := make(plotter.Values, len(cs))
		any := false
		for j, c := range cs {
			if r := find(rs, w, c, m); r != nil {
				vs[j] = r.MedianUS
				any = true
			}
		}
		if !any {
			continue
		}
		b, err := plotter.NewBarChart(vs, width)
		if err != nil {
			return err
		}
		b.Color = plotutil.Color(i)
		b.LineStyle.Width = 0
		b.Offset = width * vg.Length(float64(i)-1)
		p.Add(b)
		p.Legend.Add("touch="+m, b)
	}
	p.Y.Max *= 1.3 // headroom for the legend
	return p.Save(vg.Length(60+90*len(cs))*vg.Points(1)+4*vg.Inch, 4*vg.Inch, file)
}
