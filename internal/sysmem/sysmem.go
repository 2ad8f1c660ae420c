// Package sysmem tells whether an allocation of a given size can plausibly
// succeed, so that constructors reject absurd sizes with an error instead of
// letting the runtime die out of memory (a fatal error no recover catches).
//
// The bound is the smallest of what the process may actually use: the Go
// memory limit (GOMEMLIMIT or debug.SetMemoryLimit), the machine's physical
// memory, the cgroup's memory limit, and the address-space and data limits
// (RLIMIT_AS, RLIMIT_DATA) less what the process already uses of them,
// each where the system tells it (Linux: /proc and /sys/fs/cgroup). It is
// deliberately loose: it catches sizes the process could not hold, not
// allocations that merely compete with others.
package sysmem

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
)

// A bound is one limit on the process's memory, named for errors.
type bound struct {
	name  string
	bytes uint64
}

// bounds lists the limits that apply now, each where the system tells it.
func bounds() []bound {
	var bs []bound
	if l := debug.SetMemoryLimit(-1); l > 0 && l < math.MaxInt64 {
		bs = append(bs, bound{"the Go memory limit (GOMEMLIMIT)", uint64(l)})
	}
	if p := physical(); p > 0 {
		bs = append(bs, bound{"physical memory", p})
	}
	if c := cgroupLimit(); c > 0 {
		bs = append(bs, bound{"the cgroup memory limit", c})
	}
	return append(bs, rlimits()...)
}

// Limit returns the most bytes one allocation may plausibly take.
func Limit() uint64 {
	limit := uint64(math.MaxUint64)
	for _, b := range bounds() {
		limit = min(limit, b.bytes)
	}
	return limit
}

// Fits returns nil if n bytes are within every bound, else an error naming
// the tightest bound it exceeds. Callers wrap it in their own
// invalid-configuration error.
func Fits(n uint64) error {
	var worst *bound
	bs := bounds()
	for i := range bs {
		if n > bs[i].bytes && (worst == nil || bs[i].bytes < worst.bytes) {
			worst = &bs[i]
		}
	}
	if worst != nil {
		return fmt.Errorf("%d bytes exceed %s (%d bytes)", n, worst.name, worst.bytes)
	}
	return nil
}

// Product returns a×b, and false if either is negative or the product
// overflows an int.
func Product(a, b int) (int, bool) {
	if a < 0 || b < 0 {
		return 0, false
	}
	if a != 0 && b > math.MaxInt/a {
		return 0, false
	}
	return a * b, true
}

var physical = sync.OnceValue(func() uint64 { return meminfo("/proc/meminfo", "MemTotal:") })

// meminfo returns a "Key: N kB" field of a /proc file in bytes, or 0 where
// it cannot be read (other systems, restricted sandboxes).
func meminfo(path, key string) uint64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		// "MemTotal:       24591752 kB"
		f := bytes.Fields(sc.Bytes())
		if len(f) >= 2 && string(f[0]) == key {
			kb, err := strconv.ParseUint(string(f[1]), 10, 64)
			if err != nil || kb > math.MaxUint64/1024 {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}

// cgroupLimit returns the memory limit of this process's cgroup (v2
// memory.max, else v1 memory.limit_in_bytes), or 0 when there is none or it
// cannot be read.
func cgroupLimit() uint64 {
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if b, err := os.ReadFile(f); err == nil {
			return parseLimit(string(b))
		}
	}
	return 0
}

// parseLimit parses a cgroup limit file: a byte count, or "max" (none). A
// v1 "no limit" is a huge number, which the other bounds undercut.
func parseLimit(s string) uint64 {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// left is what remains of a limit after used bytes, at least 0.
func left(limit, used uint64) uint64 {
	if used >= limit {
		return 0
	}
	return limit - used
}
