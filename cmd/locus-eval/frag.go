package main

import (
	"io"

	"github.com/locus-go/locus/cmd/locus-eval/internal/eval/frag"
)

// runFrag is the frag subcommand: the fragmentation experiment of the slab-allocator material.
func runFrag(args []string, stdout, stderr io.Writer) error {
	return frag.Main(args, stdout, stderr)
}
