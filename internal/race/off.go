//go:build !race

// Package race reports whether the race detector is compiled in.
package race

// Enabled is true in -race builds.
const Enabled = false
