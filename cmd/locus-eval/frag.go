package main

import (
	"io"

	"github.com/locus-go/locus/internal/eval/frag"
)

// runFrag is the frag subcommand: the fragmentation experiment of issue #12.
func runFrag(args []string, stdout, stderr io.Writer) error {
	return frag.Main(args, stdout, stderr)
}
