package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/locus-go/locus/internal/eval"
)

func runReport(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("locus-eval report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: locus-eval report [-text] [-svg DIR] RUN.json [MORE.json...] [THREAD.json] [SCALE.json...]

Prints BENCHMARKS.md (Markdown) from documents recorded with locus-eval -json and locus-eval thread -json:
the first scoreboard in full, each further scoreboard (another machine or GOMAXPROCS) as a section of its
own, the design-thread ledger when a thread document is given, and a "many cores" section for every
locus-eval scale -json document. Measures nothing.

  go run ./cmd/locus-eval -json > run.json
  go run ./cmd/locus-eval thread -json > thread.json
  go run ./cmd/locus-eval report run.json thread.json > BENCHMARKS.md
`)
	}
	svgDir := fs.String("svg", "", "also write the first scoreboard's figures (SVG) into this directory")
	text := fs.Bool("text", false, "print the scoreboards (and the ledger) as the scoreboard command prints them, not Markdown")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return fmt.Errorf("%w: report needs at least one scoreboard document", eval.ErrConfig)
	}
	var sbs []*eval.Scoreboard
	var th *eval.Thread
	var scales []*eval.Scale
	for _, path := range fs.Args() {
		if schema, err := eval.SchemaOf(path); err != nil {
			return err
		} else if schema == eval.ScaleSchema {
			sc, err := eval.ReadScale(path)
			if err != nil {
				return err
			}
			scales = append(scales, sc)
			continue
		}
		sb, t, err := eval.ReadDocument(path)
		if err != nil {
			return err
		}
		switch {
		case sb != nil:
			for _, o := range sbs {
				if o.Created.Equal(sb.Created) && o.Machine == sb.Machine {
					return fmt.Errorf("%w: %s is a scoreboard already given (same run: %s, %s)", eval.ErrConfig, path,
						sb.Machine, sb.Created.Format("2006-01-02 15:04:05"))
				}
			}
			sbs = append(sbs, sb)
		case th != nil:
			return fmt.Errorf("%w: two thread documents (%s)", eval.ErrConfig, path)
		default:
			th = t
		}
	}
	// The figures are written, and -svg's directory created, only now that
	// every document is valid.
	if len(sbs) > 0 && *svgDir != "" {
		if _, err := eval.WriteFigures(*svgDir, sbs[0]); err != nil {
			return fmt.Errorf("-svg: %w", err)
		}
	}
	if *text {
		for _, sb := range sbs {
			eval.WriteText(stdout, sb)
		}
		if th != nil {
			eval.WriteLedger(stdout, th)
		}
		for _, sc := range scales {
			eval.WriteScaleText(stdout, sc)
		}
		return nil
	}
	if len(sbs) == 0 {
		return fmt.Errorf("%w: report needs at least one scoreboard document", eval.ErrConfig)
	}
	// The command as the document shows it names the files, not where they
	// were on the machine that generated it.
	names := make([]string, fs.NArg())
	for i, path := range fs.Args() {
		names[i] = filepath.Base(path)
	}
	return eval.WriteMarkdown(stdout, sbs, th, scales, "go run ./cmd/locus-eval report "+strings.Join(names, " "))
}
