//go:build !unix

package sysmem

// rlimits returns nothing where the system has no resource limits.
func rlimits() []bound { return nil }
