// Package invariants switches on expensive self-checks in test builds.
//
// Build with -tags locus_invariants (or -race, which implies it) and pools
// poison every freed block with 0xff, so a use after free reads garbage
// instead of plausible old data. In normal builds Enabled is a false constant
// and the checks compile away.
package invariants

// Poison overwrites a freed block with 0xff.
func Poison(b []byte) {
	for i := range b {
		b[i] = 0xff
	}
}
