// Package sysmem tells whether an allocation of a given size can plausibly
// succeed, so that constructors reject absurd sizes with an error instead of
// letting the runtime die out of memory (a fatal error no recover catches).
//
// The bound is the smaller of the Go memory limit (GOMEMLIMIT or
// debug.SetMemoryLimit) and the machine's physical memory where it can be
// read (Linux: /proc/meminfo). It is deliberately loose: it catches sizes no
// machine could hold, not allocations that merely compete with others.
package sysmem

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
)

// Limit returns the most bytes one allocation may plausibly take.
func Limit() uint64 {
	limit := uint64(math.MaxUint64)
	if l := debug.SetMemoryLimit(-1); l > 0 && l < math.MaxInt64 {
		limit = uint64(l)
	}
	if p := physical(); p > 0 {
		limit = min(limit, p)
	}
	return limit
}

// Fits returns nil if n bytes are within Limit, else an error saying both.
// Callers wrap it in their own invalid-configuration error.
func Fits(n uint64) error {
	if l := Limit(); n > l {
		return fmt.Errorf("%d bytes exceed this process's memory (%d bytes)", n, l)
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

var physical = sync.OnceValue(readPhysical)

// readPhysical returns MemTotal from /proc/meminfo in bytes, or 0 where it
// cannot be read (other systems, restricted sandboxes).
func readPhysical() uint64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		// "MemTotal:       24591752 kB"
		f := bytes.Fields(sc.Bytes())
		if len(f) >= 2 && string(f[0]) == "MemTotal:" {
			kb, err := strconv.ParseUint(string(f[1]), 10, 64)
			if err != nil || kb > math.MaxUint64/1024 {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}
