package conformance

import (
	"bytes"
	"runtime"
	"strconv"
)

// goid returns the calling goroutine's id, as runtime.Stack prints it.
func goid() int64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		id, _ := strconv.ParseInt(string(b[:i]), 10, 64)
		return id
	}
	return 0
}

// goState returns the state runtime.Stack prints for goroutine id
// ("running", "runnable", "chan receive", "sync.Cond.Wait", ...), or "" if
// there is no such goroutine.
func goState(id int64) string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	head := []byte("goroutine " + strconv.FormatInt(id, 10) + " [")
	i := bytes.Index(buf, head)
	if i < 0 {
		return ""
	}
	rest := buf[i+len(head):]
	if j := bytes.IndexAny(rest, ",]"); j >= 0 {
		rest = rest[:j]
	}
	return string(rest)
}

// spinSamples is how many times spins looks at a goroutine that should be
// blocked.
const spinSamples = 20

// spins reports whether goroutine id, which should be blocked, is running
// or ready to run at every one of spinSamples looks, yielding between
// them: a goroutine that waits by spinning (with or without yielding)
// burns a core, one that blocks is seen waiting. It also returns the
// states seen.
func spins(id int64) (bool, []string) {
	var states []string
	for range spinSamples {
		st := goState(id)
		states = append(states, st)
		if st != "running" && st != "runnable" {
			return false, states
		}
		for range 50 {
			runtime.Gosched()
		}
	}
	return true, states
}
