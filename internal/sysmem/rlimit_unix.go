//go:build unix

package sysmem

import (
	"math"
	"syscall"
)

// rlimits returns RLIMIT_AS and RLIMIT_DATA, where set, less the address
// space and data the process already uses (Linux: /proc/self/status; where
// that cannot be read, the raw limit).
func rlimits() []bound {
	var bs []bound
	for _, r := range []struct {
		res  int
		name string
		used string
	}{{syscall.RLIMIT_AS, "RLIMIT_AS less the address space in use", "VmSize:"},
		{syscall.RLIMIT_DATA, "RLIMIT_DATA less the data in use", "VmData:"}} {
		var l syscall.Rlimit
		// Getrlimit only reads the process's limits.
		if err := syscall.Getrlimit(r.res, &l); err != nil || l.Cur == math.MaxUint64 || l.Cur == 0 {
			continue // unlimited (RLIM_INFINITY), or not told
		}
		bs = append(bs, bound{r.name, left(uint64(l.Cur), meminfo("/proc/self/status", r.used))})
	}
	return bs
}
