package svgfont_test

import (
	"bytes"
	"strings"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/locus-go/locus/cmd/locus-eval/internal/eval/svgfont"
)

func render(t *testing.T, embed bool) []byte {
	t.Helper()
	p := plot.New()
	p.Title.Text = "a title"
	p.X.Label.Text = "x"
	p.Y.Label.Text = "y"
	l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 2}})
	if err != nil {
		t.Fatal(err)
	}
	p.Add(l)
	p.Legend.Add("a line", l)
	c := vgsvg.NewWith(vgsvg.UseWH(4*vg.Inch, 3*vg.Inch), vgsvg.EmbedFonts(embed))
	p.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Every text of a plot is in the stack; nothing is embedded.
func TestWrite(t *testing.T) {
	var out bytes.Buffer
	if err := svgfont.Write(&out, render(t, false)); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if n := strings.Count(s, svgfont.Stack); n < 5 {
		t.Fatalf("%d texts in the stack, want every one (title, labels, ticks, legend)", n)
	}
	if strings.Contains(s, "Liberation Serif") || strings.Contains(s, "@font-face") {
		t.Fatal("a serif or embedded font is left")
	}
	if out.Len() > 20_000 {
		t.Fatalf("a small figure takes %d bytes", out.Len())
	}
}

// A figure with an embedded font, or a text in another family, is refused.
func TestWriteRefuses(t *testing.T) {
	if err := svgfont.Write(&bytes.Buffer{}, render(t, true)); err == nil {
		t.Fatal("an embedded font was accepted")
	}
	other := []byte(`<text style="font-family:Liberation Serif;font-size:9px">x</text>`)
	if err := svgfont.Write(&bytes.Buffer{}, other); err == nil {
		t.Fatal("a serif text was accepted")
	}
}
