package frag

import (
	"bytes"
	"flag"
	"fmt"
	"image/color"
	"io"
	"os"
	"text/tabwriter"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/locus-go/locus/cmd/locus-eval/internal/eval/svgfont"
	"github.com/locus-go/locus/pool"
)

func pct(x float64) string { return fmt.Sprintf("%.1f %%", 100*x) }

// WriteTable prints, at each checkpoint, the peak external fragmentation
// so far (mean over trials, with the range) and the current one (mean) of
// each strategy beside the material's figures, then what each strategy
// refused and wasted over the whole run.
func (r *Result) WriteTable(w io.Writer) error {
	c := r.Config
	fmt.Fprintf(w, "External fragmentation (1 - largest free run / free pages): peak so far, mean of %d trials [min, max]; current, mean\n", c.Trials)
	fmt.Fprintf(w, "region %d pages of %d MB, allocations of 1 to %d pages (uniform), P(alloc) = %.2f, seeds %d to %d\n\n",
		c.Pages, c.PageMB, c.MaxPages, c.AllocProb, c.Seed, c.Seed+uint64(c.Trials)-1)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "ops\t")
	for _, s := range r.Series {
		fmt.Fprintf(tw, "%s peak\t%s current\t", s.Strategy, s.Strategy)
	}
	fmt.Fprint(tw, "material first-fit\tmaterial slabs\t\n")
	for _, cp := range r.checkpoints() {
		fmt.Fprintf(tw, "%d\t", cp)
		for _, s := range r.Series {
			fmt.Fprintf(tw, "%s [%s, %s]\t%s\t", pct(s.Peak[cp-1]), pct(s.PeakMin[cp]), pct(s.PeakMax[cp]), pct(s.Now[cp-1]))
		}
		if m, ok := Material[cp]; ok {
			fmt.Fprintf(tw, "%s\t%s\t\n", pct(m), pct(0))
		} else {
			fmt.Fprint(tw, "-\t-\t\n")
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nOver %d operations, per trial on average\n\n", c.Ops)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "strategy\tallocations\trefused\trefused with enough pages free\tinternal fragmentation\tutilization at the end\t\n")
	for _, s := range r.Series {
		fmt.Fprintf(tw, "%s\t%.0f\t%.1f (%s)\t%.1f (%s)\t%s\t%s\t\n", s.Strategy, s.Attempts,
			s.Refused, pct(s.Refused/s.Attempts), s.RefusedWithRoom, pct(s.RefusedWithRoom/s.Attempts),
			pct(s.InternalFrag), pct(s.Utilization[c.Ops-1]))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprint(w, "\nWhich to use: one block size, package pool; a few sizes, package classes (no external\n"+
		"fragmentation, internal fragmentation reported in its Stats); variable sizes that must be\n"+
		"contiguous, package pages (best fit by default, first fit as an option).\n")
	return err
}

// WriteSVG plots the peak external fragmentation over operations for each
// strategy (solid), the current one for the page strategies (dotted), and
// the material's first-fit figures (crosses).
func (r *Result) WriteSVG(w io.Writer) error {
	c := r.Config
	p := plot.New()
	p.Title.Text = fmt.Sprintf("External fragmentation, 1 - largest free run / free (mean of %d trials)\n"+
		"%d-page region, allocations of 1 to %d pages, P(alloc) = %.2f", c.Trials, c.Pages, c.MaxPages, c.AllocProb)
	p.X.Label.Text = "operations"
	p.Y.Label.Text = "external fragmentation (%)"
	p.X.Min, p.X.Max = 0, float64(c.Ops)*1.03
	p.Y.Min = 0
	p.X.Tick.Marker = integerTicks{}
	p.Y.Tick.Marker = integerTicks{}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	for i, s := range r.Series {
		// At most about 1000 points a line: the figure stays small.
		step := max(1, c.Ops/1000)
		var peak, now plotter.XYs
		for j := step - 1; j < c.Ops; j += step {
			peak = append(peak, plotter.XY{X: float64(j + 1), Y: 100 * s.Peak[j]})
			now = append(now, plotter.XY{X: float64(j + 1), Y: 100 * s.Now[j]})
		}
		lp, err := plotter.NewLine(peak)
		if err != nil {
			return err
		}
		lp.Color = plotutil.Color(i)
		lp.Width = vg.Points(2)
		p.Add(lp)
		if s.Strategy == SizeClasses {
			p.Legend.Add(s.Strategy+": 0 by construction", lp)
			continue
		}
		p.Legend.Add(s.Strategy+": peak so far", lp)
		ln, err := plotter.NewLine(now)
		if err != nil {
			return err
		}
		ln.Color = plotutil.Color(i)
		ln.Width = vg.Points(0.75)
		ln.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
		p.Add(ln)
		p.Legend.Add(s.Strategy+": current", ln)
	}
	var m plotter.XYs
	for _, cp := range r.checkpoints() {
		if v, ok := Material[cp]; ok {
			m = append(m, plotter.XY{X: float64(cp), Y: 100 * v})
		}
	}
	if len(m) > 0 {
		sc, err := plotter.NewScatter(m)
		if err != nil {
			return err
		}
		sc.GlyphStyle.Shape = draw.CrossGlyph{}
		sc.GlyphStyle.Radius = vg.Points(5)
		sc.GlyphStyle.Color = color.Black
		p.Add(sc)
		p.Legend.Add("material: first-fit", sc)
	}
	p.Y.Max = max(p.Y.Max*1.35, 10) // headroom for the legend
	cv := vgsvg.NewWith(vgsvg.UseWH(9*vg.Inch, 5*vg.Inch), vgsvg.EmbedFonts(false))
	p.Draw(draw.New(cv))
	var buf bytes.Buffer
	if _, err := cv.WriteTo(&buf); err != nil {
		return err
	}
	return svgfont.Write(w, buf.Bytes())
}

// integerTicks are gonum's default ticks labelled without decimals.
type integerTicks struct{}

func (integerTicks) Ticks(min, max float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = fmt.Sprintf("%.0f", ts[i].Value)
		}
	}
	return ts
}

// Main runs the experiment as a command: it prints the tables to stdout
// and, with -svg, writes the figure; usage and flag errors go to stderr.
// -quick runs 5 trials instead of 50: a smoke test whose means are rough.
func Main(args []string, stdout, stderr io.Writer) error {
	def := DefaultConfig()
	fs := flag.NewFlagSet("locus-eval frag", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: locus-eval frag [flags]

Replays the fragmentation experiment of the slab-allocator material on simulated page indices:
random allocations of 1 to -max pages from one region, alloc/free operations, and the peak external
fragmentation (1 - largest free run / free pages) after 100, 500, 1000 and 5000 operations of first fit
and best fit (package pages) and of size classes (package classes), beside the material's figures.
Deterministic for a -seed; measures no time.

Flags:
`)
		fs.PrintDefaults()
	}
	cfg := def
	fs.IntVar(&cfg.Pages, "pages", def.Pages, fmt.Sprintf("pages in the region (at most %d)", MaxRegionPages))
	fs.IntVar(&cfg.PageMB, "page-mb", def.PageMB, "megabytes a page stands for (labels only)")
	fs.IntVar(&cfg.MaxPages, "max", def.MaxPages, "largest allocation, in pages")
	fs.IntVar(&cfg.Ops, "ops", def.Ops, fmt.Sprintf("operations per trial (at most %d)", MaxOps))
	fs.IntVar(&cfg.Trials, "trials", def.Trials, fmt.Sprintf("trials (seeds; at most %d)", MaxTrials))
	fs.Uint64Var(&cfg.Seed, "seed", def.Seed, "first seed")
	fs.Float64Var(&cfg.AllocProb, "p-alloc", def.AllocProb, "probability that an operation allocates")
	quick := fs.Bool("quick", false, "5 trials (unless -trials is given): a smoke test")
	svg := fs.String("svg", "", "write the figure to this SVG file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("frag: %w: unexpected argument %q", pool.ErrInvalidConfig, fs.Arg(0))
	}
	trialsSet := false
	fs.Visit(func(f *flag.Flag) { trialsSet = trialsSet || f.Name == "trials" })
	if *quick && !trialsSet {
		cfg.Trials = 5
	}
	if cfg.PageMB <= 0 {
		return fmt.Errorf("frag: %w: -page-mb %d: want 1 or more", pool.ErrInvalidConfig, cfg.PageMB)
	}
	// Zero is refused here, not replaced by a default as Run does.
	if err := cfg.validate("-pages", "-max", "-ops", "-trials", "-p-alloc"); err != nil {
		return err
	}
	cfg.Checkpoints = nil
	for _, cp := range def.Checkpoints {
		if cp <= cfg.Ops {
			cfg.Checkpoints = append(cfg.Checkpoints, cp)
		}
	}
	if len(cfg.Checkpoints) == 0 || cfg.Checkpoints[len(cfg.Checkpoints)-1] != cfg.Ops {
		cfg.Checkpoints = append(cfg.Checkpoints, cfg.Ops)
	}
	res, err := Run(cfg)
	if err != nil {
		return err
	}
	if err := res.WriteTable(stdout); err != nil {
		return err
	}
	if *svg == "" {
		return nil
	}
	f, err := os.Create(*svg)
	if err != nil {
		return err
	}
	if err := res.WriteSVG(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
