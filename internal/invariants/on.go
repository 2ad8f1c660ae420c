//go:build locus_invariants || race

package invariants

// Enabled reports whether invariant checks are compiled in.
const Enabled = true
