// Package svgfont makes locus-eval's SVG figures render the same in every
// viewer without embedding a font: text is measured with Liberation Sans,
// whose advance widths are Arial's and Helvetica's, and written with a
// font-family stack of fonts with those metrics (Liberation Sans, Arimo,
// Arial, Helvetica), so a viewer that has any of them lays each label out
// at the width it was measured with. An embedded font (half a megabyte a
// figure) is ignored by renderers that skip @font-face, which then
// substitute a font of other widths and clip the labels.
//
// Importing the package sets gonum's default plot fonts to Liberation
// Sans; Write rewrites a figure's font families on its way out.
package svgfont

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"regexp"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Font is the face every figure measures and draws its text in.
var Font = font.Font{Typeface: "Liberation", Variant: "Sans"}

// family is how gonum's SVG canvas names Font; Stack is what a figure
// says instead.
const family = "font-family:Liberation Sans;"

// Stack is the font-family of every text in a written figure: fonts with
// Liberation Sans's metrics, then the generic family.
const Stack = "font-family:'Liberation Sans',Arimo,Arial,Helvetica,sans-serif;"

func init() {
	plot.DefaultFont = Font
	plotter.DefaultFont = Font
}

// Write writes svg, an SVG document drawn by gonum's canvas with fonts not
// embedded, to w with every font family replaced by Stack. A document
// with an embedded font or a text in another family is an error: its
// labels were measured with a font a viewer may not have.
func Write(w io.Writer, svg []byte) error {
	if bytes.Contains(svg, []byte("@font-face")) {
		return fmt.Errorf("svgfont: the figure embeds a font")
	}
	out := bytes.ReplaceAll(svg, []byte(family), []byte(Stack))
	if n, m := bytes.Count(out, []byte("font-family:")), bytes.Count(out, []byte(Stack)); n != m {
		return fmt.Errorf("svgfont: %d of %d texts are in a font other than %s", n-m, n, Font.Name())
	}
	var err error
	out = text.ReplaceAllFunc(out, func(t []byte) []byte {
		m := text.FindSubmatch(t)
		size, perr := strconv.ParseFloat(string(m[3]), 64)
		if perr != nil || size <= 0 {
			err = fmt.Errorf("svgfont: a text of font size %q", m[3])
			return t
		}
		face := font.DefaultCache.Lookup(Font, vg.Length(size))
		width := face.Width(html.UnescapeString(string(m[4]))).Points()
		return fmt.Appendf(nil, `<text %stextLength="%.2f" lengthAdjust="spacingAndGlyphs" style="%s">%s</text>`, m[1], width, m[2], m[4])
	})
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

// text matches a text element of gonum's SVG canvas: its attributes
// before the style, the style with its font size in px, and the escaped
// text. Its textLength is set to the width the text was measured with, so
// a viewer with none of Stack's fonts still draws it in that width.
var text = regexp.MustCompile(`<text ([^>]*?)style="([^"]*font-size:([0-9.]+)px[^"]*)">([^<]*)</text>`)
